//! `monomorph peaks`: peak calling on a score map.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use monomorph::algo::peaks::{
    ExcludeBorder, Peak, PeakParams, PytmeParams, attach_rotations, call_peaks_maximum_filter,
    call_peaks_recursive, false_alarm_threshold, find_peaks,
};
use monomorph::algo::rotations::matrix_to_euler_zyz;
use monomorph::io::{HostArray, PeakRow, write_peaks, write_png};
use monomorph::{Arr, Backend, BackendTask, FloatOf};
use ndarray::{Array3, ArrayD, Ix3};
use tracing::info_span;

use super::output::{check_out_file, read_npy_input};
use super::{CliError, CliResult, Global};

/// Options of `monomorph peaks`.
#[derive(Args, Debug, Clone)]
pub struct PeaksArgs {
    /// Score map (`.npy` or MRC), 2-D or 3-D.
    #[arg(long, value_name = "S.npy")]
    pub scores: PathBuf,
    /// Best-rotation index per voxel (int32/int64 `.npy`, same shape as the scores).
    #[arg(long, value_name = "RI.npy", requires = "rotations")]
    pub rotation_index: Option<PathBuf>,
    /// The rotation list `(n, d, d)` the index refers to (adds rotation and Euler columns).
    #[arg(long, value_name = "R.npy", requires = "rotation_index")]
    pub rotations: Option<PathBuf>,
    /// Minimum distance between peaks in voxels (Chebyshev, strict) and max-filter radius.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub min_distance: usize,
    /// Only peaks scoring above X.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub threshold_abs: Option<f64>,
    /// Only peaks scoring above Y × the map maximum.
    #[arg(long, value_name = "Y")]
    pub threshold_rel: Option<f64>,
    /// No peaks within N voxels of the border (default: the minimum distance).
    #[arg(long, value_name = "N")]
    pub exclude_border: Option<usize>,
    /// At most K peaks, the best first.
    #[arg(long, value_name = "K")]
    pub num_peaks: Option<usize>,
    /// Raise the threshold so that at most K false positives are expected (Gaussian noise of
    /// the map's standard deviation over voxels × rotations, pytme's --n-false-positives).
    #[arg(long, value_name = "K")]
    pub false_positives: Option<f64>,
    /// Peak caller: scikit-image's peak_local_max, pytme's maximum-filter caller, or pytme's
    /// recursive masking.
    #[arg(long, value_enum, default_value_t = Caller::Skimage)]
    pub caller: Caller,
    /// Output peak list: `.csv` (`z,y,x,score[,rotation,phi,theta,psi]`) or `.star` (RELION).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Also draw the central slice of the map with the peaks marked, as a 16-bit PNG.
    #[arg(long, value_name = "FILE.png")]
    pub png: Option<PathBuf>,
}

/// `--caller`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// scikit-image `peak_local_max` (exact).
    Skimage,
    /// pytme `PeakCallerMaximumFilter`.
    Maxfilter,
    /// pytme `PeakCallerRecursiveMasking`.
    Recursive,
}

/// What to call peaks with (host data, no backend type).
#[derive(Debug, Clone)]
pub struct PeakQuery {
    pub min_distance: usize,
    pub threshold_abs: Option<f64>,
    pub threshold_rel: Option<f64>,
    pub exclude_border: Option<usize>,
    pub num_peaks: Option<usize>,
    pub false_positives: Option<f64>,
    pub caller: Caller,
    /// Noise standard deviation for `false_positives` (matching's `sqrt(ssum)`); default: the
    /// map's standard deviation.
    pub noise_sigma: Option<f64>,
}

impl PeakQuery {
    /// From the command's flags.
    pub fn from_args(a: &PeaksArgs) -> CliResult<Self> {
        for (flag, v) in [
            ("--threshold-abs", a.threshold_abs),
            ("--threshold-rel", a.threshold_rel),
            ("--false-positives", a.false_positives),
        ] {
            if let Some(x) = v
                && !x.is_finite()
            {
                return Err(CliError::input(format!(
                    "{flag} {x}: expected a finite number"
                )));
            }
        }
        if let Some(k) = a.false_positives
            && k <= 0.0
        {
            return Err(CliError::input(format!(
                "--false-positives {k}: expected a number > 0"
            )));
        }
        Ok(PeakQuery {
            min_distance: a.min_distance,
            threshold_abs: a.threshold_abs,
            threshold_rel: a.threshold_rel,
            exclude_border: a.exclude_border,
            num_peaks: a.num_peaks,
            false_positives: a.false_positives,
            caller: a.caller,
            noise_sigma: None,
        })
    }
}

/// Euler angles (ZYZ intrinsic, degrees) of a row-major d×d rotation; 2-D rotations give
/// `[0, 0, psi]` with psi the in-plane angle.
pub fn euler_of(m: &[f64]) -> [f64; 3] {
    if m.len() == 4 {
        [0.0, 0.0, m[2].atan2(m[0]).to_degrees()]
    } else {
        let r = [[m[0], m[1], m[2]], [m[3], m[4], m[5]], [m[6], m[7], m[8]]];
        matrix_to_euler_zyz(&r)
    }
}

/// Table rows of called peaks.
pub fn rows_of(peaks: &[Peak]) -> Vec<PeakRow> {
    peaks
        .iter()
        .map(|p| PeakRow {
            position: p.coord.clone(),
            score: p.score,
            rotation: p.rotation.as_ref().map(|(k, _)| *k),
            euler: p.rotation.as_ref().map(|(_, m)| euler_of(m)),
        })
        .collect()
}

/// Calls peaks on a device score map; attaches rotations when given.
pub fn call<B: Backend>(
    b: &B,
    scores: &Arr<B, FloatOf<B>>,
    q: &PeakQuery,
    rotations: Option<(&Arr<B, i64>, &Array3<f64>)>,
) -> monomorph::Result<Vec<Peak>> {
    let _span = info_span!("peaks", caller = ?q.caller, min_distance = q.min_distance).entered();
    let shape = scores.shape().to_vec();
    let mut threshold = q.threshold_abs;
    if let Some(k) = q.false_positives {
        let n_rot = rotations.map_or(1, |(_, r)| r.shape()[0]);
        let sigma = match q.noise_sigma {
            Some(s) => s,
            None => b.std(scores)?,
        };
        let t = false_alarm_threshold(k, scores.len(), n_rot, sigma)?;
        threshold = Some(threshold.map_or(t, |a| a.max(t)));
    }
    let mut peaks = match q.caller {
        Caller::Skimage => {
            let params = PeakParams {
                min_distance: q.min_distance,
                threshold_abs: threshold,
                threshold_rel: q.threshold_rel,
                exclude_border: q
                    .exclude_border
                    .map_or(ExcludeBorder::Bool(true), ExcludeBorder::Width),
                num_peaks: q.num_peaks,
                ..PeakParams::default()
            };
            find_peaks(b, scores, &params)?
        }
        Caller::Maxfilter | Caller::Recursive => {
            let mut min_score = threshold;
            if let Some(r) = q.threshold_rel {
                let rel = r * super::output::f64_of(b.max(scores)?);
                min_score = Some(min_score.map_or(rel, |m| m.max(rel)));
            }
            let params = PytmeParams {
                num_peaks: q.num_peaks.unwrap_or(1000),
                min_distance: q.min_distance,
                min_boundary_distance: q.exclude_border.unwrap_or(0),
                min_score,
                max_score: None,
            };
            if q.caller == Caller::Maxfilter {
                call_peaks_maximum_filter(b, scores, &params)?
            } else {
                call_peaks_recursive::<B, FloatOf<B>, i64>(b, scores, &params, None)?
            }
        }
    };
    if let Some((ri, rots)) = rotations {
        attach_rotations(b, &mut peaks, &shape, ri, rots.view())?;
    }
    Ok(peaks)
}

use monomorph::ArrayMeta;

struct PeaksTask {
    scores: HostArray,
    rotation_index: Option<ArrayD<i64>>,
    rotations: Option<Array3<f64>>,
    query: PeakQuery,
}

impl BackendTask for PeaksTask {
    type Output = Vec<Peak>;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Vec<Peak>> {
        let s = b.upload(self.scores.into_float::<FloatOf<B>>().view())?;
        let ri = match &self.rotation_index {
            Some(r) => Some(b.upload(r.view())?),
            None => None,
        };
        let rot = ri.as_ref().zip(self.rotations.as_ref());
        call(b, &s, &self.query, rot)
    }
}

/// Reads `(n, d, d)` rotations from a `.npy`.
pub fn read_rotations(flag: &str, path: &std::path::Path) -> CliResult<Array3<f64>> {
    let r = read_npy_input(flag, path)?;
    let shape = r.shape().to_vec();
    let ok = shape.len() == 3
        && shape[1] == shape[2]
        && (shape[1] == 2 || shape[1] == 3)
        && shape[0] > 0;
    if !ok {
        return Err(CliError::input(format!(
            "{flag} {}: shape {shape:?}, expected (n, d, d) rotation matrices with d = 2 or 3",
            path.display()
        )));
    }
    r.to_float::<f64>()
        .into_dimensionality::<Ix3>()
        .map_err(|e| CliError::input(format!("{flag} {}: {e}", path.display())))
}

/// Runs `monomorph peaks`.
pub fn run(g: &Global, a: PeaksArgs) -> CliResult<()> {
    let query = PeakQuery::from_args(&a)?;
    check_out_file("--out", &a.out)?;
    if let Some(p) = &a.png {
        check_out_file("--png", p)?;
    }
    let vol =
        monomorph::io::read_array(&a.scores).map_err(|e| CliError::from(e).about("--scores"))?;
    let g = &g.for_input("--scores", &a.scores, &vol.data)?;
    let shape = vol.data.shape().to_vec();
    if !(shape.len() == 2 || shape.len() == 3) || shape.contains(&0) {
        return Err(CliError::input(format!(
            "--scores {}: shape {shape:?}, expected a non-empty 2-D or 3-D map",
            a.scores.display()
        )));
    }
    let (rotation_index, rotations) = match (&a.rotation_index, &a.rotations) {
        (Some(ri), Some(r)) => {
            let idx = read_npy_input("--rotation-index", ri)?
                .to_i64()
                .map_err(|m| CliError::input(format!("--rotation-index {}: {m}", ri.display())))?;
            if idx.shape() != shape.as_slice() {
                return Err(CliError::input(format!(
                    "--rotation-index {}: shape {:?}, expected the score map's shape {shape:?}",
                    ri.display(),
                    idx.shape()
                )));
            }
            let rots = read_rotations("--rotations", r)?;
            if rots.shape()[1] != shape.len() {
                return Err(CliError::input(format!(
                    "--rotations {}: {}×{} matrices, expected {d}×{d} for a {d}-D map",
                    r.display(),
                    rots.shape()[1],
                    rots.shape()[2],
                    d = shape.len()
                )));
            }
            (Some(idx), Some(rots))
        }
        _ => (None, None),
    };
    // The PNG needs the map after the run; otherwise it moves into the task uncopied.
    let png_map = a.png.as_ref().map(|_| vol.data.to_float::<f32>());
    let task = PeaksTask {
        scores: vol.data,
        rotation_index,
        rotations,
        query,
    };
    let peaks = monomorph::dispatch(g.dispatch(None), task)?;
    write_peaks(&a.out, &rows_of(&peaks), shape.len())?;
    if let Some(p) = &a.png {
        let coords: Vec<Vec<usize>> = peaks.iter().map(|p| p.coord.clone()).collect();
        if let Some(map) = &png_map {
            write_png(p, map, &coords)?;
        }
    }
    if !g.quiet {
        eprintln!("{} peaks written to {}", peaks.len(), a.out.display());
    }
    Ok(())
}
