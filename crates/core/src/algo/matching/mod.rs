//! Template matching over a rotation search, generic over the backend (pytme 0.3.6's exhaustive
//! matching, same numbers).
//!
//! [`match_template`] scores every position of a 2-D or 3-D target against a template rotated by
//! every matrix of a [`RotationSet`], and keeps per voxel the best score and the index of the
//! rotation that gave it. Scores and conventions are pytme's (`tme/matching_scores.py`):
//!
//! * `score[x] = Σ_k t_R[k] · f[x − n//2 + k]`: index `x` is where template voxel `n//2` lands.
//! * Default: circular correlation over `fast_shape(target)` (the target zero-padded at the high
//!   end). [`MatchParams::pad_edges`]: the target is extended symmetrically (numpy's
//!   `mode="symmetric"`) by `n − 1` per axis, so every window reads a true symmetric extension —
//!   pytme's `pad_target_edges` without its even-`n` off-by-one at index 0.
//! * Rotation is a pull-back about `c = (n − 1)/2`: `t_R[o] = t[R·(o − c) + c]`, cubic B-spline
//!   with prefilter (default) or linear; the FLC/MCC mask is rotated with the same order and no
//!   prefilter (so a binary mask is smoothed even by the identity), as pytme does.
//! * Running max over rotations with strict `>` from −∞: ties keep the earlier rotation.
//! * Fourier filters ([`MatchParams::filters`]), where pytme applies them: the target once per
//!   run, on the whole target (zero-padded to `fast_shape`, before the score's preprocessing;
//!   with `pad_edges` its symmetric extension, on the extension's FFT grid, as pytme filters its
//!   padded target), and each rotated template on its own box, circularly, before the score's
//!   normalisation (the mask is not filtered). Weights are symmetrised on the planes a real
//!   inverse FFT reads as real, so every backend gives pytme's numbers (`filter.rs`).
//! * Zero variance is defined, never NaN: a local target deviation under `eps` is replaced by 1
//!   (pytme's rule); a constant template (or constant target for the globally standardised
//!   CAM/NCC) scores 0 everywhere at the identity rotation (pytme divides by zero there). A
//!   constant template is constant only unrotated: rotated, the samples its box draws from
//!   beyond its edge are 0, so the rotated box is a plateau with a sloped rim. Under FLC (the
//!   mask rotates with it) that still scores 0; under a mask that does not follow it
//!   (FLCSphericalMask, the command's default) or none (CC, NCC) it scores like any template
//!   (0.22 to 0.36 with FLCSphericalMask measured on noise with 20° steps).
//!
//! # Inner loop
//! Target spectra and denominators are computed once per tile. Per rotation: rotate the template
//! box on the device → place it in a zeroed FFT buffer (only the box is written) → pruned r2c and
//! the products with the target spectra ([`Correlate::rfft_pruned_mul_conj`](crate::backend::Correlate::rfft_pruned_mul_conj)) → c2r and the
//! score pass ([`Correlate::irfft_score_max_update`](crate::backend::Correlate::irfft_score_max_update)), which reads the correlation with the
//! `n//2` alignment and the crop folded in, normalises, updates the running max/argmax and
//! accumulates Σ score². A backend fuses these where it can save passes over the volume (the CPU
//! runs the products with the slowest axis' forward and inverse transforms tile by tile, and
//! scores each z slab of FLC's three correlations while it is in cache, so neither the products
//! nor the correlations are written out); MCC keeps the unfused sequence, as it normalises by
//! maxima over the whole grid. Nothing is allocated per rotation. On the CPU
//! the parallelism is inside each FFT and each fused pass (rayon), not across rotations: it keeps
//! one set of FFT-sized buffers (memory) and measured no slower (see the project notes).
//!
//! # Memory and tiles
//! The bytes a run needs are estimated before allocating ([`estimate_bytes`]). When they exceed
//! the backend's [`Memory::available_memory`](crate::backend::Memory::available_memory) or [`MatchParams::memory_limit`], the target is
//! split into tiles; each tile reads its window plus the `n − 1` margin from the same extension
//! the whole run would read (periodic zero-padded, or symmetric), so tiled and untiled results
//! agree to round-off. MCC normalises by maxima over the whole grid and is never tiled. A
//! circular run scores every position of its FFT grid (tiles of the padding included), so that
//! [`MatchResult::ssum`] sums over pytme's positions; only the target's voxels reach the maps.
//!
//! # Restricting the search
//! [`MatchParams::search_box`] and [`MatchParams::scheduling_mask`] restrict the positions
//! searched: only the box (shrunk to the mask's bounding box) is tiled, tiles holding no mask
//! voxel are skipped, and each tile reads its window plus the template's reach from the
//! extension a whole run reads (on an axis the tile spans whole, a circular run's own grid),
//! so the searched scores are the whole run's (to round-off) and the work is proportional to
//! the box. The maps keep the target's shape; positions not
//! searched hold score −∞ and rotation index −1 (pytme's fill for positions no box covered),
//! which no peak caller reports. `ssum` sums the scored positions (the box's, no padding) over
//! the target's voxels as usual. MCC (never tiled) scores the whole target, then marks the
//! outside.
//!
//! # Files
//! `plan.rs`: jobs (tiles) and the memory estimate; `search.rs`: the restricted search;
//! `seeded.rs`: the seeded search ([`Seeds`], local refinement: each seed's rotations in its
//! own neighbourhood, run as boxes of the restricted search); `prepare.rs`: validation and the scores'
//! preprocessing, once per run; `filter.rs`: the Fourier filters applied to the target (once)
//! and to each rotated template; `state.rs`: [`Score`]'s per-job state (one variant per
//! normalisation, owning its buffers) and its per-rotation steps; `run.rs`: the rotation loop.
//!
//! # Adding a score
//! * One that reuses a normalisation (scaled, fixed denominator, rotated-mask local, MCC):
//!   a variant of [`Score`] (its name, [`Score::ALL`], and [`Score::uses_template_mask`] /
//!   [`Score::rotates_mask`] if it reads a mask) in `mod.rs`; its preprocessing, if any, in
//!   `prepare.rs`; in `state.rs`, the `ScoreState` variant it builds in
//!   `ScoreState::new` and its row of `buffer_counts`. The loop (`run.rs`) does not change.
//! * One with a new normalisation: also a `ScoreState` variant with its buffers and its arms
//!   in `standardize` / `score` (and `rotate_mask` if it rotates a mask); and, when the
//!   backends should fuse it, a variant of [`Normalization`](crate::backend::Normalization)
//!   (`backend/ops/correlate/norm.rs`), after which the compiler lists every place to extend:
//!   its arms in `norm.rs`, its shape check (`correlate/check.rs`), the host kernel
//!   (`host::score_line` in `correlate/host.rs`, which the CPU's fused and unfused passes
//!   share, so the CPU crate does not change), CUDA's `ScoreArgs::new`
//!   (`crates/cuda/src/ops/correlate.rs`) with its branch of `mm_score_max`
//!   (`crates/cuda/kernels/correlate.cu`); then a case of the conformance test
//!   (`testing/ops/correlate.rs`).
//! * The command line's `--score` values (`src/cli/matching.rs`) and a pytme fixture
//!   (`tests/fixtures/matching/reference.py`, `tests/suite/matching.rs`).

use std::fmt;
use std::ops::ControlFlow;
use std::str::FromStr;

use crate::algo::rotations::RotationSet;
use crate::backend::{Arr, ArrayMeta, Backend, FloatOf, IntOf, Interpolation, WindowExtension};
use crate::dtype::{Index, Real};
use crate::error::{Error, Result};
use crate::shape::{AxisOrder, fast_shape};

mod background;
mod filter;
mod job;
mod plan;
mod prepare;
mod run;
mod search;
mod seeded;
mod state;
mod stats;

pub use background::{Background, BackgroundScores, apply_background, background_grid};
pub use filter::symmetrize_half_grid;
use job::Job;
pub use plan::estimate_bytes;
use plan::plan_jobs;
use prepare::{TargetArg, prepare};
use run::{JobMoments, run_job};
pub use search::searched_box;
pub use seeded::{Seed, Seeds};
pub use stats::{MAX_ROTATIONS, ScoreMoments, ScoreStatistics, statistics, voxel_statistics};

/// The scores pytme offers (its names and maths, `tme/matching_scores.py` in pytme 0.3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Score {
    /// Raw cross-correlation `C(f, t_R)`.
    CC,
    /// CC of the Laplacians (`scipy.ndimage.laplace`, mode reflect), Laplacian before rotation.
    LCC,
    /// Target globally standardised, template standardised over its box, divided by √size.
    NCC,
    /// Target and template globally standardised, then FLCSphericalMask.
    CAM,
    /// Local normalised correlation with the unrotated mask's denominator (computed once).
    FLCSphericalMask,
    /// Local normalised correlation with the rotated (smoothed) mask, per rotation.
    FLC,
    /// Padfield masked NCC with a target mask ([`MatchParams::target_mask`]).
    MCC,
}

impl Score {
    /// Every score, in pytme's register order.
    pub const ALL: [Score; 7] = [
        Score::CC,
        Score::LCC,
        Score::CAM,
        Score::NCC,
        Score::FLCSphericalMask,
        Score::FLC,
        Score::MCC,
    ];
    /// pytme's name.
    pub fn name(self) -> &'static str {
        match self {
            Score::CC => "CC",
            Score::LCC => "LCC",
            Score::NCC => "NCC",
            Score::CAM => "CAM",
            Score::FLCSphericalMask => "FLCSphericalMask",
            Score::FLC => "FLC",
            Score::MCC => "MCC",
        }
    }
    /// `true` for the scores that read a template mask (all-ones when none is given).
    pub fn uses_template_mask(self) -> bool {
        matches!(
            self,
            Score::CAM | Score::FLCSphericalMask | Score::FLC | Score::MCC
        )
    }
    /// `true` for the scores that rotate the mask with the template.
    pub fn rotates_mask(self) -> bool {
        matches!(self, Score::FLC | Score::MCC)
    }
    /// `false` for the scores that cannot be split into tiles: MCC normalises by maxima over
    /// the whole grid, so it runs on the whole target (a restricted search marks the outside
    /// afterwards) and a memory limit too small for it is an error.
    pub fn tileable(self) -> bool {
        self != Score::MCC
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Score {
    type Err = Error;
    /// Parses pytme's names, case-insensitively.
    fn from_str(s: &str) -> Result<Self> {
        Score::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Score::ALL.iter().map(|c| c.name()).collect();
                Error::invalid(
                    "score",
                    format!("unknown score `{s}`; expected one of {}", names.join(", ")),
                )
            })
    }
}

/// Templates (and masks) already rotated, one per rotation, in template orientation and after the
/// score's preprocessing (LCC: Laplacian; CAM: global standardisation), e.g. pytme's
/// `rotated_templates.npy` / `rotated_masks.npy`. Used instead of rotating: checks the score
/// maths apart from interpolation.
pub struct Prerotated<'a, B: Backend> {
    /// One template box per rotation.
    pub templates: &'a [Arr<B, FloatOf<B>>],
    /// One mask box per rotation (FLC and MCC).
    pub masks: Option<&'a [Arr<B, FloatOf<B>>]>,
}

/// Progress callback: `(rotation steps done, total)`; return `ControlFlow::Break(())` to cancel
/// ([`Error::Cancelled`]). Total is rotations × tiles.
pub type Progress<'a> = &'a (dyn Fn(usize, usize) -> ControlFlow<()> + Sync);

/// Parameters of [`match_template`]. Build with [`MatchParams::new`] and set fields.
pub struct MatchParams<'a, B: Backend> {
    /// The score.
    pub score: Score,
    /// The rotations searched (their dimension must be the target's).
    pub rotations: RotationSet,
    /// Template mask (template-shaped) for CAM, FLCSphericalMask, FLC, MCC; all ones if `None`.
    pub template_mask: Option<&'a Arr<B, FloatOf<B>>>,
    /// Target mask (target-shaped), needed by MCC.
    pub target_mask: Option<&'a Arr<B, FloatOf<B>>>,
    /// Symmetric edge padding instead of circular correlation.
    pub pad_edges: bool,
    /// Rotation interpolation (cubic with prefilter by default).
    pub interpolation: Interpolation,
    /// Use these pre-rotated volumes instead of rotating (one per rotation).
    pub prerotated: Option<Prerotated<'a, B>>,
    /// Upper bound on the bytes the run may use (the backend's available memory applies too).
    pub memory_limit: Option<u64>,
    /// Force tiles of at most this output shape (testing and tuning); `None` = by memory.
    pub tile_shape: Option<Vec<usize>>,
    /// MCC: scores are 0 where the mask overlap is below this fraction of its maximum (0.3).
    pub mcc_overlap_ratio: f64,
    /// Called after every rotation; may cancel.
    pub progress: Option<Progress<'a>>,
    /// Fourier-space filters of the template (per rotation) and the target (once); none if
    /// `None`.
    pub filters: Option<&'a dyn crate::algo::filters::SpectralFilter>,
    /// Accumulate per-voxel statistics of the score over the rotations
    /// ([`MatchResult::moments`], [`MatchResult::statistics`]; see `stats.rs` for the exact
    /// fixed-point sums and their memory, 32 bytes per voxel).
    pub score_stats: bool,
    /// Background correction of the scores (pytme's `--background-correction`; see
    /// [`Background`]); none if `None`. Not with MCC or pre-rotated templates.
    pub background: Option<Background>,
    /// Search only the positions `start..stop` on every axis (pytom-match-pick's
    /// `--search-z/y/x`); `None` = the whole target. Positions outside are not searched: score
    /// −∞, rotation index −1 (see [Restricting the search](#restricting-the-search)).
    pub search_box: Option<&'a [(usize, usize)]>,
    /// Target-shaped binary mask (0 or 1) of the positions where a match may occur (pytme's
    /// `--scheduling-mask`): tiles with no 1 are skipped, positions at 0 are not searched
    /// (score −∞, rotation index −1).
    pub scheduling_mask: Option<&'a Arr<B, FloatOf<B>>>,
    /// How pytme would hold these arrays ([`AxisOrder`]): [`AxisOrder::Pytme`] (the default:
    /// pytme's own arrays, e.g. the same `.npy` files) or [`AxisOrder::Reversed`] (pytme holds
    /// the transpose, as it reads an MRC file; the rotations are then `P·R·P` of pytme's).
    /// What pytme computes in its own axis order is computed in that frame: the rotated
    /// template's and mask's edge test (which sample points on the box edge fall inside) and
    /// the phase-scrambling noise. The filters carry their own
    /// ([`FilterSpec::axis_order`](crate::algo::filters::FilterSpec::axis_order)); give both
    /// the same frame.
    pub pytme_frame: AxisOrder,
    /// A seeded search (local refinement, [`Seeds`]): each seed searches only its own
    /// rotations (a range of [`MatchParams::rotations`]) at the positions within its radius;
    /// the rest is not searched (score −∞, rotation index −1). With a search box or a
    /// scheduling mask, the positions in both. Not with MCC, score statistics, a background
    /// or pre-rotated templates. `None`: every rotation at every position.
    pub seeds: Option<&'a Seeds>,
}

impl<'a, B: Backend> MatchParams<'a, B> {
    /// Defaults: no masks, circular correlation, cubic interpolation, no limits, no callback.
    pub fn new(score: Score, rotations: RotationSet) -> Self {
        MatchParams {
            score,
            rotations,
            template_mask: None,
            target_mask: None,
            pad_edges: false,
            interpolation: Interpolation::Cubic,
            prerotated: None,
            memory_limit: None,
            tile_shape: None,
            mcc_overlap_ratio: 0.3,
            progress: None,
            filters: None,
            score_stats: false,
            background: None,
            search_box: None,
            scheduling_mask: None,
            pytme_frame: AxisOrder::Pytme,
            seeds: None,
        }
    }
}

/// What [`match_template`] returns.
pub struct MatchResult<B: Backend> {
    /// Best score per voxel (target-shaped).
    pub scores: Arr<B, FloatOf<B>>,
    /// Index into [`MatchResult::rotations`] of the best rotation per voxel (−1 where no rotation
    /// scored above −∞, e.g. NaN).
    pub rotation_index: Arr<B, IntOf<B>>,
    /// The rotations searched.
    pub rotations: RotationSet,
    /// Number of rotations.
    pub n_rotations: usize,
    /// pytme's `ssum`, the variance estimate of `postprocess --n-false-positives`: Σ score² over
    /// the scored positions and all rotations / (target voxels · rotations). The positions are
    /// pytme's: the whole FFT grid `fast_shape(target)` of a circular run (the target
    /// zero-padded at the high end, as `MaxScoreOverRotations` sums its whole score array), the
    /// target's voxels with [`MatchParams::pad_edges`] (pytme's `pad_target_edges` zeroes the
    /// scores whose centre lies in the padding). Tiles give the untiled value to round-off. The
    /// left fold of [`MatchResult::ssum_parts`] in order, divided.
    pub ssum: f64,
    /// Σ score² of each scoring call (one per tile and rotation, in the loop's order: tiles
    /// outer, rotations inner), each accumulated from zero.
    pub ssum_parts: Vec<f64>,
    /// Number of tiles the target was split into (1 = untiled); for a seeded run, the tiles of
    /// its seed boxes (one per box unless memory splits a box).
    pub tiles: usize,
    /// With [`MatchParams::score_stats`]: the per-voxel sums of the scores and their squares
    /// over the rotations, exact fixed point (sums of disjoint rotation sets add up exactly:
    /// [`host::moments_merge`](crate::backend::host::moments_merge)).
    pub moments: Option<ScoreMoments<B>>,
    /// From [`match_template_raw`] with [`MatchParams::background`]: the background scores
    /// still to subtract ([`apply_background`], once every rotation's are merged in);
    /// [`match_template`] has applied them and leaves `None`.
    pub background: Option<BackgroundScores<B>>,
    /// After [`MatchResult::apply_background`]: the per-voxel shift subtracted from the scores
    /// (`bg − mean(bg)`); [`MatchResult::statistics`] shifts the mean by it too, so the
    /// statistics describe the corrected scores and the z-score is unchanged.
    pub background_shift: Option<Arr<B, FloatOf<B>>>,
    /// From [`match_templates_raw`] (several templates): the index of the template of the best
    /// score per voxel (−1 where none scored), whose rotation is
    /// [`MatchResult::rotation_index`]; `None` for one template.
    pub template_index: Option<Arr<B, IntOf<B>>>,
}

/// One template of [`match_templates_raw`] and its mask (`None`: ones, as without
/// [`MatchParams::template_mask`]).
pub struct TemplateInput<'a, B: Backend> {
    /// The template.
    pub template: &'a Arr<B, FloatOf<B>>,
    /// Its mask (template-shaped).
    pub mask: Option<&'a Arr<B, FloatOf<B>>>,
}

impl<B: Backend> MatchResult<B> {
    /// Mean, standard deviation and z-score of the best score per voxel over the rotations
    /// (`None` without [`MatchParams::score_stats`]); see [`statistics`].
    pub fn statistics(&self, b: &B) -> Result<Option<ScoreStatistics<B>>> {
        match &self.moments {
            Some(m) => statistics(
                b,
                m,
                &self.scores,
                self.background_shift.as_ref(),
                self.n_rotations,
            )
            .map(Some),
            None => Ok(None),
        }
    }

    /// Subtracts the background ([`MatchResult::background`], taken) from the scores, once
    /// every rotation's background is merged in; keeps the shift
    /// ([`MatchResult::background_shift`]). Nothing without a background.
    pub fn apply_background(&mut self, b: &B) -> Result<()> {
        if let Some(bg) = self.background.take() {
            self.background_shift = Some(apply_background(b, &mut self.scores, &bg)?);
        }
        Ok(())
    }
}

/// The (real, complex) FFT-grid arrays the first job of this run allocates, and those the
/// memory estimate ([`estimate_bytes`]) counts for its score: `(allocated, estimated)`, which
/// a test holds equal. Not part of the stable API.
#[doc(hidden)]
pub fn fft_buffers_allocated_and_estimated<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    template: &Arr<B, FloatOf<B>>,
    params: &MatchParams<'_, B>,
) -> Result<((u64, u64), (u64, u64))> {
    let one = [TemplateInput {
        template,
        mask: params.template_mask,
    }];
    let prep = prepare(b, TargetArg::Borrowed(target), &one, params)?;
    let (ts, tshape) = (target.shape().to_vec(), template.shape().to_vec());
    let sizes = (
        std::mem::size_of::<FloatOf<B>>(),
        std::mem::size_of::<IntOf<B>>(),
    );
    let (mut jobs, _) = plan_jobs(
        params.score,
        &ts,
        &tshape,
        params.pad_edges,
        u64::MAX,
        None,
        sizes,
        job_fixed_bytes(&prep, &tshape, sizes.0),
    )?;
    shift_windows(&mut jobs, &prep.origin);
    let fast_full = fast_shape(&ts);
    let ext = window_extension(params.pad_edges, &fast_full);
    let (_, _, allocated) = state::ScoreState::new(b, params, &prep, &jobs[0], ext, &tshape)?;
    Ok((allocated, state::buffer_counts(params.score)))
}

/// The bytes a run may use: [`MatchParams::memory_limit`] and the backend's available memory.
fn memory_limit<B: Backend>(b: &B, params: &MatchParams<'_, B>) -> u64 {
    params
        .memory_limit
        .map_or(b.available_memory(), |l| l.min(b.available_memory()))
}

/// Bytes every job needs besides its FFT-grid arrays: the template filter's spectra.
fn job_fixed_bytes<B: Backend>(prep: &prepare::Prepared<B>, tshape: &[usize], fsize: usize) -> u64 {
    if prep.template_filter.is_some() {
        filter::TemplateFilter::<B>::bytes(tshape, fsize)
    } else {
        0
    }
}

/// The extension every job reads its window from: symmetric (padded edges), or periodic over
/// the target zero-padded to its FFT grid `fast_full`.
fn window_extension(pad_edges: bool, fast_full: &[usize]) -> WindowExtension<'_> {
    if pad_edges {
        WindowExtension::Symmetric
    } else {
        WindowExtension::Periodic(fast_full)
    }
}

/// Shifts the jobs' window starts by `origin`, where the target starts in the array they read
/// (the filtered extension of a padded run).
fn shift_windows(jobs: &mut [Job], origin: &[isize]) {
    for job in jobs {
        for (s, o) in job.start.iter_mut().zip(origin) {
            *s += o;
        }
    }
}

/// The per-voxel maps a run fills, over the target or over one job's box: the best score and
/// its rotation index, and the score moments and the background when asked for.
struct JobMaps<B: Backend> {
    scores: Arr<B, FloatOf<B>>,
    index: Arr<B, IntOf<B>>,
    moments: Option<Arr<B, i64>>,
    /// The moments are all zero as made (no pass added yet: no opening needed).
    fresh: bool,
    background: Option<Arr<B, FloatOf<B>>>,
}

impl<B: Backend> JobMaps<B> {
    /// Fresh maps of `shape`: scores −∞, index −1, moments 0 (`stats`), background 0 on
    /// `background` (its grid, or the job's box).
    fn new(b: &B, shape: &[usize], stats: bool, background: Option<&[usize]>) -> Result<Self> {
        let with4: Vec<usize> = shape.iter().copied().chain([4]).collect();
        Ok(JobMaps {
            scores: b.full(shape, <FloatOf<B> as Real>::lowest())?,
            index: b.full(shape, IntOf::<B>::from_i64(-1))?,
            moments: match stats {
                true => Some(b.zeros::<i64>(&with4)?),
                false => None,
            },
            fresh: true,
            background: match background {
                Some(g) => Some(b.zeros::<FloatOf<B>>(g)?),
                None => None,
            },
        })
    }

    /// Puts job `job`'s maps into the run's `into`: the background box always (its grid
    /// covers the padding); the rest as the job keeps it: the whole FFT grid's corner
    /// (untiled), the tile's box (tiled), nothing for a box in the padding.
    fn put(&self, b: &B, job: &Job, tiled: bool, into: &mut JobMaps<B>) -> Result<()> {
        if let (Some(bg), Some(map)) = (&self.background, into.background.as_mut()) {
            b.insert_block(bg, &job.out_offset, map)?;
        }
        let moff: Vec<usize> = job.out_offset.iter().copied().chain([0]).collect();
        match &job.keep {
            None => {}
            Some(_) if !tiled => {
                // The whole FFT grid was scored: its corner is the target.
                b.crop(&self.scores, &job.out_offset, &mut into.scores)?;
                b.crop(&self.index, &job.out_offset, &mut into.index)?;
                if let (Some(mo), Some(m)) = (&self.moments, into.moments.as_mut()) {
                    b.crop(mo, &moff, m)?;
                }
            }
            Some(_) => {
                b.insert_block(&self.scores, &job.out_offset, &mut into.scores)?;
                b.insert_block(&self.index, &job.out_offset, &mut into.index)?;
                if let (Some(mo), Some(m)) = (&self.moments, into.moments.as_mut()) {
                    b.insert_block(mo, &moff, m)?;
                }
            }
        }
        Ok(())
    }
}

/// Matches `template` against `target` over `params.rotations` (see the module docs).
///
/// `target` and `template` are device arrays of the backend's float type with 2 or 3 axes each;
/// the template must be no larger than the target on any axis. The result stays on the device:
/// call peaks on it with [`MatchResult::peaks`].
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use monomorph::prelude::*;
/// use monomorph::ndarray::{Array2, Ix2, s};
///
/// let b = Cpu::<Single>::new();
/// let template = Array2::from_shape_fn((6, 6), |(y, x)| ((y * 6 + x) % 7) as f32);
/// let mut target = Array2::<f32>::zeros((40, 40));
/// target.slice_mut(s![20..26, 8..14]).assign(&template); // corner at (20, 8)
/// let (t, p) = (b.upload_array(&target)?, b.upload_array(&template)?);
///
/// let params = MatchParams::new(Score::FLC, RotationSet::uniform(2, 30.0)?); // 12 angles
/// let result = match_template(&b, &t, &p, &params)?;
///
/// let (best, score) = b.argmax(&result.scores)?;
/// assert_eq!((best / 40, best % 40), (23, 11)); // the template's centre voxel (6 / 2 = 3 in)
/// assert!(score > 0.99);
/// let rotation = b.download_as::<i64, Ix2>(&result.rotation_index)?;
/// assert_eq!(rotation[[23, 11]], 0); // the identity, first in the set
/// assert_eq!(result.n_rotations, 12);
/// # Ok::<(), monomorph::Error>(())
/// ```
///
/// A progress callback ([`MatchParams::progress`]) is `Fn + Sync`: count with an atomic
/// (`AtomicUsize::fetch_add`), which also serves as CG's observer.
///
/// It asks for [`Backend`] rather than the op families it uses, unlike CG and peak calling:
/// matching uses every family but [`Linalg`](crate::backend::Linalg) (memory, elementwise,
/// reductions, FFTs, resampling, LCC's Laplace filter, the fused correlate ops), so the exact
/// bound would be `Correlate + Reduce + Filter` spelled out on every type and function of the
/// module, for a backend that lacks only the CG ops.
pub fn match_template<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    template: &Arr<B, FloatOf<B>>,
    params: &MatchParams<'_, B>,
) -> Result<MatchResult<B>> {
    let mut r = match_template_raw(b, target, template, params)?;
    r.apply_background(b)?;
    Ok(r)
}

/// [`match_template`] without the step that needs every rotation's result: with
/// [`MatchParams::background`] the scores are returned uncorrected, with the background
/// scores in [`MatchResult::background`]. For a caller that splits the rotations (MPI ranks,
/// list items): merge the parts' maps (background: the greater value) and then call
/// [`MatchResult::apply_background`] once.
pub fn match_template_raw<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    template: &Arr<B, FloatOf<B>>,
    params: &MatchParams<'_, B>,
) -> Result<MatchResult<B>> {
    let one = [TemplateInput {
        template,
        mask: params.template_mask,
    }];
    let (r, _) = run_templates(b, TargetArg::Borrowed(target), &one, params)?;
    Ok(r)
}

/// [`match_template_raw`] (one template, its mask [`MatchParams::template_mask`] or its
/// [`TemplateInput::mask`]) or [`match_templates_raw`] (several, each with its own mask), taking
/// the target: the run uses `target` itself as its working target where the other entries copy
/// it first (the score's preprocessing may change it; a filtered run makes a new one anyway).
/// For a caller that uploaded the target for this run only (a [`crate::Memory::upload`] from
/// the caller's host buffer is then the one copy of it). The same result, bit for bit.
pub fn match_templates_raw_owned<B: Backend>(
    b: &B,
    target: Arr<B, FloatOf<B>>,
    templates: &[TemplateInput<'_, B>],
    params: &MatchParams<'_, B>,
) -> Result<MatchResult<B>> {
    if templates.len() > 1 && params.template_mask.is_some() {
        return Err(Error::invalid(
            "template_mask",
            "give each template its mask (TemplateInput::mask) with several templates",
        ));
    }
    let one;
    let templates = match (templates, params.template_mask) {
        ([t], Some(m)) if t.mask.is_none() => {
            one = [TemplateInput {
                template: t.template,
                mask: Some(m),
            }];
            &one[..]
        }
        _ => templates,
    };
    let (r, ntemplates) = run_templates(b, TargetArg::Owned(target), templates, params)?;
    split_pairs(b, r, ntemplates)
}

/// Several templates of one shape matched in one pass against one preparation of `target`:
/// the target filtered and preprocessed once, and per tile its spectra and the score's target
/// statistics computed once (CAM and FLCSphericalMask remake the latter when a template's mask
/// differs from the previous one's); then each template, with its own mask
/// ([`TemplateInput::mask`]; [`MatchParams::template_mask`] must be `None`), runs every
/// rotation, template after template.
///
/// The maps are the per-voxel maximum over the templates of what [`match_template_raw`] gives
/// for each alone, bit for bit: the greatest score, ties to the lower template index (then,
/// as for one template, to the lower rotation), with the template in
/// [`MatchResult::template_index`] and its rotation in [`MatchResult::rotation_index`].
/// `ssum` is the mean over every (template, rotation) pair (Σ score² / (voxels · rotations ·
/// templates)); `ssum_parts` holds one partial per (tile, template, rotation), in that order.
/// Not with pre-rotated templates, a background correction or score statistics (an error).
pub fn match_templates_raw<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    templates: &[TemplateInput<'_, B>],
    params: &MatchParams<'_, B>,
) -> Result<MatchResult<B>> {
    if params.template_mask.is_some() {
        return Err(Error::invalid(
            "template_mask",
            "give each template its mask (TemplateInput::mask) with several templates",
        ));
    }
    let (r, ntemplates) = run_templates(b, TargetArg::Borrowed(target), templates, params)?;
    split_pairs(b, r, ntemplates)
}

/// The result of a run over `ntemplates` templates with its pair indices
/// `t · rotations + r` split into [`MatchResult::template_index`] and
/// [`MatchResult::rotation_index`] (one template: as it is).
fn split_pairs<B: Backend>(
    b: &B,
    mut r: MatchResult<B>,
    ntemplates: usize,
) -> Result<MatchResult<B>> {
    if ntemplates > 1 {
        // Pair indices t · rotations + r into a template and a rotation index.
        let nrot = r.n_rotations as i64;
        let pairs = b.download(&r.rotation_index)?;
        let split = |f: fn(i64, i64) -> i64| {
            pairs.mapv(|v| {
                IntOf::<B>::from_i64(match v.to_usize() {
                    Some(u) => f(u as i64, nrot),
                    None => -1,
                })
            })
        };
        r.template_index = Some(b.upload_owned(split(|v, n| v / n))?);
        r.rotation_index = b.upload_owned(split(|v, n| v % n))?;
    }
    Ok(r)
}

/// Tells [`MatchParams::progress`] that `done` of `total` rotation steps are done; the
/// callback's `Break` stops the run with [`Error::Cancelled`].
pub(super) fn report_progress<B: Backend>(
    params: &MatchParams<'_, B>,
    done: usize,
    total: usize,
) -> Result<()> {
    if let Some(cb) = params.progress
        && cb(done, total).is_break()
    {
        return Err(Error::Cancelled { done, total });
    }
    Ok(())
}

/// The moment scales of a run with score statistics (`None` without) and the sizes its jobs
/// are planned with: the memory limit, the bytes per voxel of a float map and of the other
/// per-voxel maps (index; moments: 32 bytes; background), and the bytes a job holds whatever
/// its box.
fn sizing<B: Backend>(
    b: &B,
    prep: &prepare::Prepared<B>,
    params: &MatchParams<'_, B>,
    tshape: &[usize],
) -> Result<(Option<[f64; 2]>, seeded::Sizing)> {
    let fsize = std::mem::size_of::<FloatOf<B>>();
    let scales = if params.score_stats {
        stats::check_rotations(params.rotations.len())?;
        Some(stats::moment_scales(b, prep, params, tshape)?)
    } else {
        None
    };
    let per_voxel = std::mem::size_of::<IntOf<B>>()
        + scales.map_or(0, |_| stats::moment_bytes(1) as usize)
        + params
            .background
            .map_or(0, |_| fsize + std::mem::size_of::<IntOf<B>>());
    let sizing = seeded::Sizing {
        limit: memory_limit(b, params),
        sizes: (fsize, per_voxel),
        fixed: job_fixed_bytes(prep, tshape, fsize),
    };
    Ok((scales, sizing))
}

/// How many rotations job `job` scores at a time (1: one by one): the most the backend groups
/// ([`Correlate::score_group_max`](crate::backend::Correlate::score_group_max), at most
/// [`MAX_GROUP`](crate::backend::MAX_GROUP)) whose extra products ([`state::pair_counts`] per
/// later rotation) fit in the memory limit beside the job's planned bytes (the plan itself
/// does not count them, so it tiles as without grouping).
fn group_size<B: Backend>(
    b: &B,
    params: &MatchParams<'_, B>,
    ts: &[usize],
    job: &Job,
    sizing: &seeded::Sizing,
) -> Result<usize> {
    let most = b.score_group_max().min(crate::backend::MAX_GROUP);
    if most < 2 {
        return Ok(1);
    }
    let (fsize, per_voxel) = sizing.sizes;
    let planned = plan::estimate_sized(
        params.score,
        ts,
        &job.out_shape,
        &job.fast,
        fsize,
        per_voxel,
        sizing.fixed,
    )?;
    let axes: Vec<usize> = (0..job.fast.len()).collect();
    let c = crate::shape::rfft_shape(&job.fast, &axes)
        .iter()
        .product::<usize>() as u64
        * 2
        * fsize as u64;
    let extra = state::pair_counts(params.score) * c;
    Ok((2..=most)
        .rev()
        .find(|&k| planned.saturating_add((k as u64 - 1).saturating_mul(extra)) <= sizing.limit)
        .unwrap_or(1))
}

/// The jobs of an unseeded run and whether they are the tiles of a restricted search (whose
/// outside is marked afterwards). A score that is never tiled runs the whole target.
fn plan_run<B: Backend>(
    params: &MatchParams<'_, B>,
    region: Option<&search::Region<B>>,
    (ts, tshape): (&[usize], &[usize]),
    sizing: &seeded::Sizing,
) -> Result<(Vec<Job>, bool)> {
    let forced = params.tile_shape.as_deref();
    match region {
        Some(r) if params.score.tileable() && r.restricts(ts) => {
            let (jobs, _skipped) = r.jobs(
                params.score,
                ts,
                tshape,
                params.pad_edges,
                sizing.limit,
                forced,
                sizing.sizes,
                sizing.fixed,
            )?;
            Ok((jobs, true))
        }
        _ => plan_jobs(
            params.score,
            ts,
            tshape,
            params.pad_edges,
            sizing.limit,
            forced,
            sizing.sizes,
            sizing.fixed,
        ),
    }
}

/// The loop of [`match_template_raw`] over several templates: the result with pair indices
/// `t · rotations + r` in its rotation index (plain rotation indices for one template), and
/// the number of templates.
fn run_templates<B: Backend>(
    b: &B,
    target: TargetArg<'_, B>,
    templates: &[TemplateInput<'_, B>],
    params: &MatchParams<'_, B>,
) -> Result<(MatchResult<B>, usize)> {
    let ts = target.get().shape().to_vec();
    if let Some(s) = params.seeds {
        seeded::check(params, s, &ts)?;
    }
    let mut prep = prepare(b, target, templates, params)?;
    let ntemplates = prep.sides.len();
    let tshape = templates[0].template.shape().to_vec();
    let nrot = params.rotations.len();
    if IntOf::<B>::from_usize(nrot * ntemplates).is_none() {
        return Err(Error::invalid(
            "templates",
            format!("{ntemplates} templates × {nrot} rotations overflow the index type"),
        ));
    }
    let (scales, sizing) = sizing(b, &prep, params, &tshape)?;
    let region = search::Region::new(b, params, &ts)?;
    if let Some(seeds) = params.seeds {
        let r = seeded::run(
            b,
            &mut prep,
            params,
            seeds,
            region.as_ref(),
            (&ts, &tshape),
            sizing,
            ntemplates,
        )?;
        return Ok((r, ntemplates));
    }
    let (mut jobs, tiled) = plan_run(params, region.as_ref(), (&ts, &tshape), &sizing)?;
    shift_windows(&mut jobs, &prep.origin);
    let fast_full = fast_shape(&ts);
    let ext = window_extension(params.pad_edges, &fast_full);
    let total = nrot * ntemplates * jobs.len();
    let mut ssum = b.zeros::<f64>(&[1])?;
    let mut ssum_parts = Vec::with_capacity(total);
    let bg_grid = params
        .background
        .map(|_| background_grid(&ts, &tshape, params.pad_edges));
    let bg_shape = bg_grid.as_ref().map(|(g, _)| g.as_slice());
    let mut maps = JobMaps::new(b, &ts, scales.is_some(), bg_shape)?;
    // The mask-dependent target statistics: remade for a template whose mask differs.
    let mask_state = matches!(params.score, Score::CAM | Score::FLCSphericalMask);
    for (j, job) in jobs.iter().enumerate() {
        let group = if scales.is_some() {
            group_size(b, params, &ts, job, &sizing)?
        } else {
            1
        };
        let mut run = |m: &mut JobMaps<B>, prep: &mut prepare::Prepared<B>| -> Result<()> {
            prep.current = 0;
            let (mut grid, mut state, _) =
                state::ScoreState::new(b, params, prep, job, ext, &tshape)?;
            for t in 0..ntemplates {
                prep.current = t;
                if t > 0 && mask_state && !prep.sides[t].same_mask_as_previous {
                    (grid, state, _) = state::ScoreState::new(b, params, prep, job, ext, &tshape)?;
                }
                let step = (j * ntemplates + t) * nrot;
                let progress = |r: usize| report_progress(params, step + r, total);
                run_job(
                    b,
                    prep,
                    params,
                    job,
                    (&mut grid, &mut state),
                    t * nrot,
                    0..nrot,
                    &tshape,
                    (
                        &mut m.scores,
                        &mut m.index,
                        m.moments
                            .as_mut()
                            .zip(scales)
                            .map(|(acc, scale)| JobMoments {
                                acc,
                                scale,
                                fresh: std::mem::take(&mut m.fresh),
                            }),
                    ),
                    (&mut ssum, &mut ssum_parts),
                    m.background.as_mut(),
                    &progress,
                    group,
                )?;
            }
            Ok(())
        };
        if !tiled && job.out_shape == ts {
            // The output box is the target: update the result maps in place (the background
            // grid is the target too: padded edges, or a target of fast lengths).
            run(&mut maps, &mut prep)?;
            continue;
        }
        // The background starts at 0 (pytme's `scores_alt`), in every box of its grid.
        let bg_box = bg_shape.map(|_| job.out_shape.as_slice());
        let mut m = JobMaps::new(b, &job.out_shape, scales.is_some(), bg_box)?;
        run(&mut m, &mut prep)?;
        m.put(b, job, tiled, &mut maps)?;
    }
    let JobMaps {
        mut scores,
        mut index,
        moments,
        fresh: _,
        background: bg_map,
    } = maps;
    if let Some(r) = &region {
        r.mark_outside(b, &mut scores, &mut index)?;
    }
    // The left fold of the per-call sums, in the loop's order.
    let ssum_total = ssum_parts.iter().fold(0.0f64, |a, &p| a + p);
    let voxels: usize = ts.iter().product();
    let result = MatchResult {
        scores,
        rotation_index: index,
        rotations: params.rotations.clone(),
        n_rotations: nrot,
        ssum: ssum_total / (voxels as f64 * nrot as f64 * ntemplates as f64),
        ssum_parts,
        tiles: jobs.len(),
        moments: moments
            .zip(scales)
            .map(|(acc, scale)| ScoreMoments { acc, scale }),
        background: bg_map
            .zip(bg_grid)
            .map(|(map, (_, count))| BackgroundScores { map, count }),
        background_shift: None,
        template_index: None,
    };
    Ok((result, ntemplates))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_names_parse() {
        assert_eq!("flc".parse::<Score>().unwrap(), Score::FLC);
        assert_eq!(
            "FLCSphericalMask".parse::<Score>().unwrap(),
            Score::FLCSphericalMask
        );
        let e = "CORR".parse::<Score>().unwrap_err().to_string();
        assert!(
            e.contains("unknown score `CORR`") && e.contains("MCC"),
            "{e}"
        );
    }
}
