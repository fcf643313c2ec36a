//! `match --check-hand N` (Warp's `--check_hand`): the template mirrored is matched as a second
//! job of the same plan, and the best N peaks of both score maps say which hand fits better.

use monomorph::work::{MatchJob, Part};
use monomorph::{Backend, BackendTask, FloatOf, Real};
use ndarray::ArrayD;
use serde_json::json;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::peaks::{Caller, PeakQuery};

/// A finished job's scores (as scores.npy holds them, float32), from its merged parts.
pub struct FinishScores<'a> {
    /// The job.
    pub job: &'a MatchJob,
    /// Its parts, merged.
    pub part: Part,
}

impl BackendTask for FinishScores<'_> {
    type Output = ArrayD<f32>;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<ArrayD<f32>> {
        let r = self.job.finish(b, self.part)?;
        Ok(b.download(&r.scores)?
            .mapv(|v| super::output::f64_of(v) as f32))
    }
}

/// The best `n` peaks of a float32 score map: scikit-image's caller, at least half the
/// template's smallest side (`side`) apart and from the border, as `match --png` calls them.
struct BestPeaks {
    scores: ArrayD<f32>,
    query: PeakQuery,
}

impl BackendTask for BestPeaks {
    type Output = Vec<f64>;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Vec<f64>> {
        let s = b.upload_owned(self.scores.mapv(|v| FloatOf::<B>::from_f64(v as f64)))?;
        let called = super::peaks::call(b, &s, &self.query, None)?;
        Ok(called.peaks.iter().map(|p| p.score).collect())
    }
}

/// The query of the handedness check: the best `n` peaks, `side.div_ceil(2)` apart.
fn query(n: usize, side: usize) -> PeakQuery {
    PeakQuery {
        min_distance: side.div_ceil(2).max(1),
        threshold_abs: None,
        threshold_rel: None,
        exclude_border: None,
        num_peaks: Some(n),
        false_positives: None,
        caller: Caller::Skimage,
        run_stats: None,
        max_score: None,
        oversampling: None,
    }
}

/// run.json's `check_hand`: `n`, the mean of the best `n` peak scores of the `original` and
/// `mirrored` maps (with how many peaks each had, when fewer than `n`), and the `better` hand
/// (a tie says "original").
pub fn check_hand(
    g: &Global,
    n: usize,
    side: usize,
    original: &ArrayD<f32>,
    mirrored: &ArrayD<f32>,
) -> CliResult<serde_json::Value> {
    let mean = |scores: &ArrayD<f32>| -> CliResult<(f64, usize)> {
        let task = BestPeaks {
            scores: scores.clone(),
            query: query(n, side),
        };
        let best = monomorph::dispatch(g.dispatch(None), task)?;
        if best.is_empty() {
            return Err(CliError::failure(
                "--check-hand: a score map has no peak (nothing searched, or a constant map)",
            ));
        }
        Ok((best.iter().sum::<f64>() / best.len() as f64, best.len()))
    };
    let (o, on) = mean(original)?;
    let (m, mn) = mean(mirrored)?;
    Ok(json!({
        "n": n,
        "original": o,
        "mirrored": m,
        "better": if m > o { "mirrored" } else { "original" },
        "peaks_found": {"original": on, "mirrored": mn},
        "mirror": "the template (and its mask) with its last array axis (x) reversed",
        "peaks": format!("scikit-image's peak_local_max: the best {n}, at least {} voxels apart and from the border", side.div_ceil(2).max(1)),
    }))
}
