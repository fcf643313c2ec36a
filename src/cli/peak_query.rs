//! What a user asks peak calling for: the peak query flags (declared once, for `monomorph
//! peaks` and `monomorph match --peaks`), pytom's extraction flags, and the checked query
//! the callers run ([`PeakQuery`]).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use monomorph::algo::peaks::RunStats;

use super::error::{CliError, CliResult};

/// The peak query flags, one declaration for `monomorph peaks` and `monomorph match
/// --target-list --peaks` (there under "Many targets", each requiring --peaks).
#[derive(Args, Debug, Clone)]
pub struct PeakFlags {
    /// Minimum distance between peaks in voxels (Chebyshev, strict) and max-filter radius.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub min_distance: usize,
    /// Only peaks scoring above X (skimage: strictly above). With --caller maxfilter or
    /// recursive this is pytme's --min-score (peaks scoring at least X, with pytme's
    /// maximum-filter quirk), hence its alias; pytme's postprocess defaults to 0, monomorph to
    /// no limit.
    #[arg(
        long,
        visible_alias = "min-score",
        value_name = "X",
        allow_negative_numbers = true
    )]
    pub threshold_abs: Option<f64>,
    /// Only peaks scoring at most X, as pytme's --max-score: with --caller maxfilter or
    /// recursive, candidates above X are dropped before the distance filter (so they suppress
    /// no neighbour), as pytme's callers do; with skimage (peak_local_max has no maximum),
    /// peaks above X are removed from the called list before --num-peaks applies.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub max_score: Option<f64>,
    /// Sub-voxel peak positions as pytme's postprocess --peak-oversampling F: the score map's
    /// DFT interpolant sampled F times finer around each peak (upsampled DFT,
    /// Guizar-Sicairos 2008; a region of ceil(1.5 F) samples per axis), precision 1/F voxel.
    /// Written as fractional coordinates in the CSV and STAR (_rlnCoordinateX/Y/Z). Positions
    /// not searched (-inf, a restricted match) count as 0 in the interpolant, and a position
    /// never moves from its voxel towards a neighbour not searched (it stays in the searched
    /// box). Refused with NaN in the map (--allow-nan) and, before allocating, when the
    /// memory it needs (a 3-D map at the maximum factor: about 17 GB) is not available.
    #[arg(long, value_name = "F")]
    pub peak_oversampling: Option<f64>,
    /// Only peaks scoring above Y × the map maximum.
    #[arg(long, value_name = "Y")]
    pub threshold_rel: Option<f64>,
    /// No peaks within N voxels of the border (default: the minimum distance).
    #[arg(long, value_name = "N")]
    pub exclude_border: Option<usize>,
    /// At most K peaks, the best first.
    #[arg(long, value_name = "K")]
    pub num_peaks: Option<usize>,
    /// Raise the threshold so that at most K false positives are expected, by pytme's
    /// postprocess --n-false-positives rule: erfcinv(2K / (voxels × rotations)) · √2 · σ over
    /// the voxels inside the border. σ² and the rotation count come from the matching run
    /// (run.json: its mean squared score over all voxels and rotations); without a run.json, σ
    /// falls back to the map's standard deviation inside the border (with a warning).
    #[arg(long, value_name = "K")]
    pub false_positives: Option<f64>,
    /// Peak caller: scikit-image's peak_local_max, pytme's maximum-filter caller, pytme's
    /// recursive masking, or pytom-match-pick's extraction (--particle-diameter, --num-peaks;
    /// --false-positives, default 1, sets its cut-off, --threshold-abs replaces it).
    #[arg(long, value_enum, default_value_t = Caller::Skimage)]
    pub caller: Caller,
}

impl Default for PeakFlags {
    fn default() -> Self {
        PeakFlags {
            min_distance: 5,
            threshold_abs: None,
            max_score: None,
            peak_oversampling: None,
            threshold_rel: None,
            exclude_border: None,
            num_peaks: None,
            false_positives: None,
            caller: Caller::Skimage,
        }
    }
}

/// The flags of [`PeakFlags`] (clap ids), which `match` takes only with --peaks.
pub const PEAK_FLAG_IDS: [&str; 9] = [
    "min_distance",
    "threshold_abs",
    "max_score",
    "peak_oversampling",
    "threshold_rel",
    "exclude_border",
    "num_peaks",
    "false_positives",
    "caller",
];

/// `--caller`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// scikit-image `peak_local_max` (exact).
    Skimage,
    /// pytme `PeakCallerMaximumFilter`.
    Maxfilter,
    /// pytme `PeakCallerRecursiveMasking`.
    Recursive,
    /// pytom-match-pick 0.14 `extract_particles` (`monomorph peaks` only).
    Pytom,
}

/// The flags of `peaks --caller pytom` (pytom-match-pick's `pytom_extract_candidates.py`).
#[derive(Args, Debug, Clone, Default)]
pub struct PytomArgs {
    /// Particle diameter in Å (--caller pytom): border planes of `r = int(D/2/voxel)` voxels
    /// are not searched and a `(2r+1)³` cube around each particle is cleared (pytom's
    /// behaviour; its documentation says a ball). The voxel size comes from the scores' MRC
    /// header, else the matching run's run.json, else --sampling-rate.
    #[arg(long, value_name = "Å")]
    pub particle_diameter: Option<f64>,
    /// Voxel size in Å of the scores, for --particle-diameter when neither the scores' header
    /// nor the run.json holds one.
    #[arg(long, value_name = "Å")]
    pub sampling_rate: Option<f64>,
    /// --caller pytom: keep only voxels whose white top-hat transform exceeds the cut fitted to
    /// its histogram (pytom's --tophat-filter: a Gaussian fitted to the log histogram, cut at
    /// --false-positives expected false positives).
    #[arg(long)]
    pub tophat_filter: bool,
    /// Connectivity of the top-hat's structure element: 1 (faces), 2 (+ edges), 3 (cube).
    #[arg(long, value_name = "1|2|3", default_value_t = 1)]
    pub tophat_connectivity: usize,
    /// Bins of the top-hat histogram.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub tophat_bins: usize,
    /// Mask (`.npy` or MRC, the scores' shape): scores where it is <= 0 are set to 0 before
    /// extraction, as pytom's --tomogram-mask.
    #[arg(long, value_name = "M")]
    pub tomogram_mask: Option<PathBuf>,
}

/// The first pytom-only flag given (for the other callers, which do not use them).
pub fn given_flag(p: &PytomArgs) -> Option<&'static str> {
    [
        ("--particle-diameter", p.particle_diameter.is_some()),
        ("--sampling-rate", p.sampling_rate.is_some()),
        ("--tophat-filter", p.tophat_filter),
        ("--tophat-connectivity", p.tophat_connectivity != 1),
        ("--tophat-bins", p.tophat_bins != 50),
        ("--tomogram-mask", p.tomogram_mask.is_some()),
    ]
    .into_iter()
    .find(|(_, g)| *g)
    .map(|(f, _)| f)
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
    /// The matching run's statistics for `false_positives` (pytme's rule); `None`: the map-σ
    /// fallback.
    pub run_stats: Option<RunStats>,
    /// Only peaks scoring at most this (pytme's max_score).
    pub max_score: Option<f64>,
    /// Sub-voxel positions by pytme's upsampled DFT with this factor.
    pub oversampling: Option<f64>,
}

impl PeakQuery {
    /// From the command's flags.
    pub fn from_flags(q: &PeakFlags) -> CliResult<Self> {
        PeakQuery {
            min_distance: q.min_distance,
            threshold_abs: q.threshold_abs,
            threshold_rel: q.threshold_rel,
            exclude_border: q.exclude_border,
            num_peaks: q.num_peaks,
            false_positives: q.false_positives,
            caller: q.caller,
            run_stats: None,
            max_score: q.max_score,
            oversampling: q.peak_oversampling,
        }
        .checked()
    }

    /// The query after the checks its flags get wherever they are given (`peaks`, `match
    /// --peaks`): finite thresholds, a positive number of false positives.
    pub fn checked(self) -> CliResult<Self> {
        if self.caller == Caller::Pytom {
            return Err(CliError::input(
                "--caller pytom: only for `monomorph peaks` (it needs --particle-diameter and \
                 the run's statistics), expected skimage, maxfilter or recursive here",
            ));
        }
        for (flag, v) in [
            ("--threshold-abs", self.threshold_abs),
            ("--threshold-rel", self.threshold_rel),
            ("--false-positives", self.false_positives),
            ("--max-score", self.max_score),
            ("--peak-oversampling", self.oversampling),
        ] {
            if let Some(x) = v
                && !x.is_finite()
            {
                return Err(CliError::input(format!(
                    "{flag} {x}: expected a finite number"
                )));
            }
        }
        if let Some(k) = self.false_positives
            && k <= 0.0
        {
            return Err(CliError::input(format!(
                "--false-positives {k}: expected a number > 0"
            )));
        }
        if let Some(f) = self.oversampling
            && !(f > 0.0 && f <= 682.0)
        {
            return Err(CliError::input(format!(
                "--peak-oversampling {f}: expected a factor > 0 and at most 682"
            )));
        }
        if let (Some(lo), Some(hi)) = (self.threshold_abs, self.max_score)
            && lo > hi
        {
            return Err(CliError::input(format!(
                "--max-score {hi}: below --threshold-abs/--min-score {lo}, expected a maximum \
                 at least the minimum"
            )));
        }
        Ok(self)
    }

    /// The border width per axis within which this query's caller reports no peak.
    pub fn border(&self, ndim: usize) -> Vec<usize> {
        let w = match self.caller {
            Caller::Skimage => self.exclude_border.unwrap_or(self.min_distance),
            Caller::Maxfilter | Caller::Recursive | Caller::Pytom => {
                self.exclude_border.unwrap_or(0)
            }
        };
        vec![w; ndim]
    }
}
