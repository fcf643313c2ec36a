//! pytme's false-alarm threshold on a score map (`postprocess --n-false-positives`): how many
//! trials the map holds, the noise σ (from the matching run, or the map), and the threshold.

use crate::backend::{Arr, ArrayMeta, Backend, FloatOf};
use crate::dtype::Real;
use crate::error::{Error, Result};

use super::stats::{false_alarm_threshold, pytme_false_alarm_threshold, voxels_inside_border};

/// What pytme's false-alarm rule needs from a matching run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunStats {
    /// Σ score² over voxels and rotations / (voxels · rotations) (pytme's `ssum`).
    pub ssum: f64,
    /// Number of rotations searched.
    pub n_rotations: usize,
}

/// How a `--false-positives` threshold was made.
#[derive(Debug, Clone, PartialEq)]
pub struct FalseAlarm {
    /// Expected false positives asked for.
    pub k: f64,
    /// `true`: pytme's rule from the run's statistics; `false`: the map-σ fallback.
    pub from_run: bool,
    /// The noise standard deviation used.
    pub sigma: f64,
    /// Voxels inside the border.
    pub n_voxels: usize,
    /// Rotations counted.
    pub n_rotations: usize,
    /// The score threshold (`None` when the border leaves no voxel).
    pub threshold: Option<f64>,
}

impl FalseAlarm {
    /// One line saying which rule made the threshold.
    pub fn describe(&self) -> String {
        let t = self
            .threshold
            .map_or("none (no voxel inside the border)".to_string(), |t| {
                format!("{t}")
            });
        let rule = if self.from_run {
            "pytme's postprocess rule from the matching run's statistics (sigma = sqrt(ssum))"
        } else {
            "map-sigma fallback (no matching run statistics: sigma = the score map's standard \
             deviation inside the border)"
        };
        format!(
            "false-alarm threshold {t} for {} expected false positive(s): {rule}, sigma {}, \
             {} voxels x {} rotations",
            self.k, self.sigma, self.n_voxels, self.n_rotations
        )
    }
}

/// The score threshold above which at most `k` false positives are expected on `scores`,
/// counting the voxels at least `border` (per axis) inside the edges: pytme's postprocess
/// `--n-false-positives` rule, `erfcinv(2k / (voxels × rotations)) · √2 · σ`.
///
/// With the matching run's statistics (`run`: its [`MatchResult::ssum`] and rotation count) σ²
/// is pytme's `ssum` (over the searched positions only when the map has positions not searched,
/// score −∞, which are no trials); without them σ is the map's standard deviation inside the
/// border over `fallback_rotations` rotations, which a map with unsearched positions refuses.
/// The threshold is `None` when the border leaves no voxel. Errors name `false_positives`: a
/// `k` of at least half the trials, a map with positions not searched and no statistics.
///
/// [`MatchResult::ssum`]: crate::algo::matching::MatchResult::ssum
pub fn false_alarm<B: Backend>(
    b: &B,
    scores: &Arr<B, FloatOf<B>>,
    border: &[usize],
    k: f64,
    run: Option<RunStats>,
    fallback_rotations: usize,
) -> Result<FalseAlarm> {
    let shape = scores.shape();
    let border = border.to_vec();
    let all_voxels = voxels_inside_border(shape, &border);
    // Positions not searched (score −∞, a restricted match) are no trials.
    let not_searched = if all_voxels == 0 {
        0
    } else {
        let inner: Vec<usize> = shape.iter().zip(&border).map(|(s, w)| s - 2 * w).collect();
        let mut crop = b.zeros::<FloatOf<B>>(&inner)?;
        b.crop(scores, &border, &mut crop)?;
        b.count_nonfinite(&crop)?
    };
    let n_voxels = all_voxels - not_searched;
    let (from_run, n_rotations, sigma) = match run {
        Some(rs) => (true, rs.n_rotations, (rs.ssum as f32).sqrt() as f64),
        None if not_searched > 0 => {
            return Err(Error::invalid(
                "false_positives",
                "the map has positions not searched (-inf) and no matching run statistics: \
                 pass --match-run DIR",
            ));
        }
        None => {
            let sigma = if n_voxels == 0 {
                0.0
            } else if border.iter().all(|&w| w == 0) {
                b.std(scores)?.as_f64()
            } else {
                let inner: Vec<usize> = shape.iter().zip(&border).map(|(s, w)| s - 2 * w).collect();
                let mut crop = b.zeros::<FloatOf<B>>(&inner)?;
                b.crop(scores, &border, &mut crop)?;
                b.std(&crop)?.as_f64()
            };
            (false, fallback_rotations, sigma)
        }
    };
    // A restricted run's ssum sums the searched positions only, over the target's voxels:
    // over the searched ones it is the mean square pytme's rule wants.
    let ssum_of =
        |rs: RunStats| rs.ssum * shape.iter().product::<usize>() as f64 / n_voxels.max(1) as f64;
    let sigma = match run {
        Some(rs) if not_searched > 0 => (ssum_of(rs) as f32).sqrt() as f64,
        _ => sigma,
    };
    let threshold = if n_voxels == 0 {
        None
    } else {
        let trials = n_voxels as f64 * n_rotations as f64;
        if 2.0 * k >= trials {
            return Err(Error::invalid(
                "false_positives",
                format!(
                    "{k} is too many: 2K must be below voxels x rotations = {n_voxels} x \
                     {n_rotations}"
                ),
            ));
        }
        Some(match run {
            Some(rs) if not_searched > 0 => {
                pytme_false_alarm_threshold(k, ssum_of(rs), n_voxels, n_rotations)?
            }
            Some(rs) => pytme_false_alarm_threshold(k, rs.ssum, n_voxels, n_rotations)?,
            None => false_alarm_threshold(k, n_voxels, n_rotations, sigma)?,
        })
    };
    Ok(FalseAlarm {
        k,
        from_run,
        sigma,
        n_voxels,
        n_rotations,
        threshold,
    })
}
