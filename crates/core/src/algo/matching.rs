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
//! * Zero variance is defined, never NaN: a local target deviation under `eps` is replaced by 1
//!   (pytme's rule); a constant template (or constant target for the globally standardised
//!   CAM/NCC) scores 0 everywhere (pytme divides by zero there).
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
//! agree to round-off. MCC normalises by maxima over the whole grid and is never tiled.

use std::fmt;
use std::ops::ControlFlow;
use std::str::FromStr;

use crate::algo::rotations::RotationSet;
use crate::backend::{
    Arr, ArrayMeta, Backend, BinaryOp, BorderMode, ComplexOf, CorrWindow, FloatOf, IntOf,
    Interpolation, ScoreNorm, SpectralNorm, UnaryOp, WindowExtension, array_bytes,
};
use crate::dtype::{Float, Index, Real};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::fast_shape;

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
    /// pytme's `ssum`: Σ score² over target voxels and rotations / (voxels · rotations), the
    /// variance estimate of `postprocess --n-false-positives`. (pytme sums over its FFT grid;
    /// identical when the grid is the target shape.)
    pub ssum: f64,
    /// Σ score² of each (tile, rotation) scoring call, in the loop's order (tile by tile,
    /// rotations in order within a tile), each accumulated from zero: `ssum` is their in-order
    /// left fold / (voxels · rotations). Lets a split run (over ranks or devices) rebuild `ssum`
    /// bit for bit.
    pub ssum_parts: Vec<f64>,
    /// Number of tiles the target was split into (1 = untiled).
    pub tiles: usize,
}

/// One unit of work: an output box of the target and how its input window is read.
#[derive(Debug, Clone)]
struct Job {
    out_offset: Vec<usize>,
    out_shape: Vec<usize>,
    start: Vec<isize>,
    len: Vec<usize>,
    fast: Vec<usize>,
    shift: Vec<isize>,
}

fn circular_job(target: &[usize], tshape: &[usize]) -> Job {
    let fast = fast_shape(target);
    Job {
        out_offset: vec![0; target.len()],
        out_shape: target.to_vec(),
        start: vec![0; target.len()],
        len: fast.clone(),
        shift: tshape.iter().map(|&n| -((n / 2) as isize)).collect(),
        fast,
    }
}

fn window_job(offset: &[usize], out: &[usize], tshape: &[usize]) -> Job {
    let len: Vec<usize> = out.iter().zip(tshape).map(|(o, n)| o + n - 1).collect();
    Job {
        out_offset: offset.to_vec(),
        out_shape: out.to_vec(),
        start: offset
            .iter()
            .zip(tshape)
            .map(|(&a, &n)| a as isize - (n / 2) as isize)
            .collect(),
        fast: fast_shape(&len),
        len,
        shift: vec![0; out.len()],
    }
}

/// (real, complex) FFT-grid buffer counts of a score, including setup peaks.
fn buffer_counts(score: Score) -> (u64, u64) {
    match score {
        Score::CC | Score::LCC | Score::NCC => (3, 3),
        Score::CAM | Score::FLCSphericalMask => (5, 4),
        Score::FLC => (5, 6),
        Score::MCC => (9, 6),
    }
}

/// Estimated peak bytes of matching an output box `out` on an FFT grid `fast` (the caller's
/// arrays excluded; the full result maps included).
pub fn estimate_bytes<B: Backend>(
    score: Score,
    target: &[usize],
    out: &[usize],
    fast: &[usize],
) -> Result<u64> {
    let _ = (
        array_bytes::<FloatOf<B>>(&[1])?,
        array_bytes::<ComplexOf<B>>(&[1])?,
    );
    estimate_sized(
        score,
        target,
        out,
        fast,
        std::mem::size_of::<FloatOf<B>>(),
        std::mem::size_of::<IntOf<B>>(),
    )
}

/// [`estimate_bytes`] for element sizes `fsize` (float) and `isize_` (index) in bytes.
fn estimate_sized(
    score: Score,
    target: &[usize],
    out: &[usize],
    fast: &[usize],
    fsize: usize,
    isize_: usize,
) -> Result<u64> {
    let (nr, nc) = buffer_counts(score);
    let n = |s: &[usize]| -> Result<u64> {
        crate::shape::checked_len(s)
            .map(|v| v as u64)
            .ok_or_else(|| Error::invalid("shape", format!("{s:?} overflows")))
    };
    let (fs, is) = (fsize as u64, isize_ as u64);
    let r = n(fast)? * fs;
    let c = n(&crate::shape::rfft_shape(
        fast,
        &(0..fast.len()).collect::<Vec<_>>(),
    ))? * 2
        * fs;
    let o = n(out)? * (fs + is);
    let full = n(target)? * (fs + is);
    let den = if matches!(score, Score::CAM | Score::FLCSphericalMask) {
        n(out)? * fs
    } else {
        0
    };
    Ok(nr * r + nc * c + o + full + den)
}

/// Splits the target into jobs (tiles) that fit `limit` bytes.
fn plan_jobs(
    score: Score,
    target: &[usize],
    tshape: &[usize],
    pad_edges: bool,
    limit: u64,
    forced: Option<&[usize]>,
    sizes: (usize, usize),
) -> Result<(Vec<Job>, bool)> {
    let est =
        |out: &[usize], fast: &[usize]| estimate_sized(score, target, out, fast, sizes.0, sizes.1);
    let d = target.len();
    let whole = if pad_edges {
        window_job(&vec![0; d], target, tshape)
    } else {
        circular_job(target, tshape)
    };
    let mut tile: Vec<usize> = match forced {
        Some(t) => {
            if t.len() != d || t.contains(&0) {
                return Err(Error::shape(
                    "tile_shape",
                    format!("{d} positive sizes"),
                    format!("{t:?}"),
                ));
            }
            t.iter().zip(target).map(|(&a, &b)| a.min(b)).collect()
        }
        None => {
            if est(target, &whole.fast)? <= limit {
                return Ok((vec![whole], false));
            }
            target.to_vec()
        }
    };
    if forced.is_none() {
        loop {
            let len: Vec<usize> = tile.iter().zip(tshape).map(|(o, n)| o + n - 1).collect();
            if est(&tile, &fast_shape(&len))? <= limit {
                break;
            }
            // Halve the largest tile axis; give up when tiles would be smaller than the template.
            let (k, &big) = tile
                .iter()
                .enumerate()
                .max_by_key(|(_, v)| **v)
                .unwrap_or((0, &0));
            if big <= tshape[k].max(8) {
                let (nr, nc) = buffer_counts(score);
                return Err(Error::OutOfMemory {
                    what: format!(
                        "template matching ({score}, target {}, template {}, {nr} real + {nc} complex FFT buffers per tile)",
                        fmt_shape(target),
                        fmt_shape(tshape)
                    ),
                    requested: est(&tile, &fast_shape(&len))?,
                    available: limit,
                });
            }
            tile[k] = big.div_ceil(2);
        }
    }
    if tile == target && forced.is_none() {
        return Ok((vec![whole], false));
    }
    if score == Score::MCC {
        return Err(Error::invalid(
            "target",
            "MCC cannot be tiled (it normalises by maxima over the whole grid): raise the memory limit",
        ));
    }
    // Every combination of per-axis tile starts.
    let starts: Vec<Vec<usize>> = (0..d)
        .map(|k| (0..target[k]).step_by(tile[k]).collect())
        .collect();
    let mut jobs = Vec::new();
    let mut idx = vec![0usize; d];
    loop {
        let off: Vec<usize> = (0..d).map(|k| starts[k][idx[k]]).collect();
        let out: Vec<usize> = (0..d).map(|k| tile[k].min(target[k] - off[k])).collect();
        jobs.push(window_job(&off, &out, tshape));
        let mut k = d;
        loop {
            if k == 0 {
                return Ok((jobs, true));
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < starts[k].len() {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Inputs prepared once per run (score preprocessing done).
struct Prepared<B: Backend> {
    target: Arr<B, FloatOf<B>>,
    target_mask: Option<Arr<B, FloatOf<B>>>,
    /// Template, preprocessed (LCC/CAM); spline coefficients when rotating cubically.
    template_src: Arr<B, FloatOf<B>>,
    mask: Arr<B, FloatOf<B>>,
    mask_sum: f64,
}

fn check_finite<B: Backend>(b: &B, what: &str, a: &Arr<B, FloatOf<B>>) -> Result<()> {
    let count = b.count_nonfinite(a)?;
    if count > 0 {
        Err(Error::NonFinite {
            what: what.into(),
            count,
        })
    } else {
        Ok(())
    }
}

/// Globally standardises `a` (mean 0, population sd 1); a constant array becomes zeros.
fn standardize_global<B: Backend>(b: &B, a: &mut Arr<B, FloatOf<B>>) -> Result<()> {
    let (mean, sd) = b.mean_std(a)?;
    let rms2 = b.sum_sq(a)? / a.len() as f64;
    b.scalar_assign(BinaryOp::Sub, a, FloatOf::<B>::from_f64(mean))?;
    if sd * sd <= 1e-12 * rms2 || sd == 0.0 {
        b.fill(a, FloatOf::<B>::from_f64(0.0))
    } else {
        b.scalar_assign(BinaryOp::Mul, a, FloatOf::<B>::from_f64(1.0 / sd))
    }
}

/// pytme's `standardize(t, m, Σm)` in place (`scratch` is template-shaped); with `mask = None`
/// the whole box (`m = 1`). A template constant inside the mask becomes zeros.
fn standardize_masked<B: Backend>(
    b: &B,
    t: &mut Arr<B, FloatOf<B>>,
    mask: Option<(&Arr<B, FloatOf<B>>, f64)>,
    scratch: &mut Arr<B, FloatOf<B>>,
) -> Result<()> {
    let (n, s1, s2) = match mask {
        Some((m, n)) => {
            b.binary(BinaryOp::Mul, t, m, scratch)?;
            (n, b.sum(scratch)?, b.dot(t, scratch)?)
        }
        None => (t.len() as f64, b.sum(t)?, b.sum_sq(t)?),
    };
    let mean = s1 / n;
    let var = (s2 / n - mean * mean).max(0.0);
    if var.is_nan() || var <= 1e-12 * (s2 / n).abs() || !var.is_finite() {
        return b.fill(t, FloatOf::<B>::from_f64(0.0));
    }
    b.scalar_assign(BinaryOp::Sub, t, FloatOf::<B>::from_f64(mean))?;
    b.scalar_assign(BinaryOp::Mul, t, FloatOf::<B>::from_f64(1.0 / var.sqrt()))?;
    if let Some((m, _)) = mask {
        b.binary_assign(BinaryOp::Mul, t, m)?;
    }
    Ok(())
}

/// Validates the inputs and runs the score's preprocessing.
fn prepare<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    template: &Arr<B, FloatOf<B>>,
    p: &MatchParams<'_, B>,
) -> Result<Prepared<B>> {
    let (ts, ms) = (target.shape().to_vec(), template.shape().to_vec());
    if !(ts.len() == 2 || ts.len() == 3) {
        return Err(Error::shape("target", "a 2-D or 3-D array", fmt_shape(&ts)));
    }
    if ms.len() != ts.len() {
        return Err(Error::shape(
            "template",
            format!("{} axes like the target {}", ts.len(), fmt_shape(&ts)),
            format!("{} axes {}", ms.len(), fmt_shape(&ms)),
        ));
    }
    crate::shape::expect_nonempty("target", &ts)?;
    crate::shape::expect_nonempty("template", &ms)?;
    if ms.iter().zip(&ts).any(|(m, t)| m > t) {
        return Err(Error::shape(
            "template",
            format!("no axis larger than the target {}", fmt_shape(&ts)),
            fmt_shape(&ms),
        ));
    }
    if p.rotations.dim() != ts.len() {
        return Err(Error::shape(
            "rotations",
            format!("{0}×{0} matrices for a {0}-D target", ts.len()),
            format!("{0}×{0} matrices", p.rotations.dim()),
        ));
    }
    check_finite(b, "target", target)?;
    check_finite(b, "template", template)?;

    // Template mask.
    let mask = match p.template_mask {
        Some(m) => {
            if m.shape() != ms.as_slice() {
                return Err(Error::shape(
                    "template_mask",
                    fmt_shape(&ms),
                    fmt_shape(m.shape()),
                ));
            }
            check_finite(b, "template_mask", m)?;
            b.duplicate(m)?
        }
        None => b.full(&ms, FloatOf::<B>::from_f64(1.0))?,
    };
    let mask_sum = b.sum(&mask)?;
    if p.score.uses_template_mask() && (mask_sum.is_nan() || mask_sum <= 0.0) {
        return Err(Error::invalid(
            "template_mask",
            format!("must have a positive sum (got {mask_sum})"),
        ));
    }

    // Target preprocessing.
    let mut tgt = b.duplicate(target)?;
    match p.score {
        Score::LCC => b.laplace(target, BorderMode::Reflect, &mut tgt)?,
        Score::CAM | Score::NCC => standardize_global(b, &mut tgt)?,
        _ => {}
    }
    let target_mask = if p.score == Score::MCC {
        let Some(tm) = p.target_mask else {
            return Err(Error::invalid("target_mask", "MCC needs a target mask"));
        };
        if tm.shape() != ts.as_slice() {
            return Err(Error::shape(
                "target_mask",
                fmt_shape(&ts),
                fmt_shape(tm.shape()),
            ));
        }
        check_finite(b, "target_mask", tm)?;
        if b.sum(tm)? <= 0.0 {
            return Err(Error::invalid("target_mask", "must have a positive sum"));
        }
        let mut f = b.duplicate(&tgt)?;
        b.binary(BinaryOp::Mul, &tgt, tm, &mut f)?;
        tgt = f;
        Some(b.duplicate(tm)?)
    } else {
        None
    };

    // Template preprocessing (not for pre-rotated volumes: they are already preprocessed).
    let mut tsrc = b.duplicate(template)?;
    if let Some(pr) = &p.prerotated {
        let n = p.rotations.len();
        if pr.templates.len() != n {
            return Err(Error::shape(
                "prerotated templates",
                format!("{n} (one per rotation)"),
                pr.templates.len(),
            ));
        }
        for (i, t) in pr.templates.iter().enumerate() {
            if t.shape() != ms.as_slice() {
                return Err(Error::shape(
                    format!("prerotated template {i}"),
                    fmt_shape(&ms),
                    fmt_shape(t.shape()),
                ));
            }
        }
        if p.score.rotates_mask() {
            match pr.masks {
                Some(m) if m.len() == n => {
                    for (i, t) in m.iter().enumerate() {
                        if t.shape() != ms.as_slice() {
                            return Err(Error::shape(
                                format!("prerotated mask {i}"),
                                fmt_shape(&ms),
                                fmt_shape(t.shape()),
                            ));
                        }
                    }
                }
                Some(m) => return Err(Error::shape("prerotated masks", format!("{n}"), m.len())),
                None => {
                    return Err(Error::invalid(
                        "prerotated",
                        format!("{} needs rotated masks", p.score),
                    ));
                }
            }
        }
    } else {
        match p.score {
            Score::LCC => b.laplace(template, BorderMode::Reflect, &mut tsrc)?,
            Score::CAM => standardize_global(b, &mut tsrc)?,
            _ => {}
        }
        if p.interpolation == Interpolation::Cubic {
            b.spline_prefilter(&mut tsrc)?;
        }
    }
    Ok(Prepared {
        target: tgt,
        target_mask,
        template_src: tsrc,
        mask,
        mask_sum,
    })
}

/// Matrix and offset of the pull-back rotation about `(n − 1)/2` (rounded to f32 as pytme's
/// float32 homogeneous matrix is, when the backend is single precision).
fn pull_back(r: &[f64], tshape: &[usize], single: bool) -> (Vec<f64>, Vec<f64>) {
    let d = tshape.len();
    let round = |v: f64| if single { v as f32 as f64 } else { v };
    let m: Vec<f64> = r.iter().map(|&v| round(v)).collect();
    let c: Vec<f64> = tshape.iter().map(|&n| (n as f64 - 1.0) / 2.0).collect();
    let off = (0..d)
        .map(|i| round(c[i] - (0..d).map(|j| m[i * d + j] * c[j]).sum::<f64>()))
        .collect();
    (m, off)
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
pub fn match_template<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    template: &Arr<B, FloatOf<B>>,
    params: &MatchParams<'_, B>,
) -> Result<MatchResult<B>> {
    let prep = prepare(b, target, template, params)?;
    let ts = target.shape().to_vec();
    let tshape = template.shape().to_vec();
    let limit = params
        .memory_limit
        .map_or(b.available_memory(), |l| l.min(b.available_memory()));
    let (jobs, tiled) = plan_jobs(
        params.score,
        &ts,
        &tshape,
        params.pad_edges,
        limit,
        params.tile_shape.as_deref(),
        (
            std::mem::size_of::<FloatOf<B>>(),
            std::mem::size_of::<IntOf<B>>(),
        ),
    )?;
    let fast_full = fast_shape(&ts);
    let ext = if params.pad_edges {
        WindowExtension::Symmetric
    } else {
        WindowExtension::Periodic(&fast_full)
    };

    let nrot = params.rotations.len();
    let total = nrot * jobs.len();
    let mut ssum_parts = Vec::with_capacity(total);
    let lowest = <FloatOf<B> as Real>::lowest();
    let none = IntOf::<B>::from_i64(-1);
    let mut scores = b.full(&ts, lowest)?;
    let mut index = b.full(&ts, none)?;
    for (j, job) in jobs.iter().enumerate() {
        let progress = |r: usize| -> Result<()> {
            if let Some(cb) = params.progress
                && cb(j * nrot + r, total).is_break()
            {
                return Err(Error::Cancelled {
                    done: j * nrot + r,
                    total,
                });
            }
            Ok(())
        };
        if !tiled {
            run_job(
                b,
                &prep,
                params,
                job,
                ext,
                &tshape,
                &mut scores,
                &mut index,
                &mut ssum_parts,
                &progress,
            )?;
        } else {
            let mut s = b.full(&job.out_shape, lowest)?;
            let mut ix = b.full(&job.out_shape, none)?;
            run_job(
                b,
                &prep,
                params,
                job,
                ext,
                &tshape,
                &mut s,
                &mut ix,
                &mut ssum_parts,
                &progress,
            )?;
            b.insert_block(&s, &job.out_offset, &mut scores)?;
            b.insert_block(&ix, &job.out_offset, &mut index)?;
        }
    }
    let ssum_total = ssum_parts.iter().fold(0.0, |acc, p| acc + p);
    let voxels: usize = ts.iter().product();
    Ok(MatchResult {
        scores,
        rotation_index: index,
        rotations: params.rotations.clone(),
        n_rotations: nrot,
        ssum: ssum_total / (voxels as f64 * nrot as f64),
        ssum_parts,
        tiles: jobs.len(),
    })
}

/// Runs every rotation on one job, updating `best`/`best_index` (the job's output shape).
fn run_job<B: Backend>(
    b: &B,
    prep: &Prepared<B>,
    p: &MatchParams<'_, B>,
    job: &Job,
    ext: WindowExtension<'_>,
    tshape: &[usize],
    best: &mut Arr<B, FloatOf<B>>,
    best_index: &mut Arr<B, IntOf<B>>,
    ssum_parts: &mut Vec<f64>,
    progress: &dyn Fn(usize) -> Result<()>,
) -> Result<()> {
    type F<B> = FloatOf<B>;
    let fast = &job.fast;
    let d = fast.len();
    let axes: Vec<usize> = (0..d).collect();
    let plan = b.fft_plan(fast, &axes)?;
    let cshape = crate::shape::rfft_shape(fast, &axes);
    let scale_f: f64 = 1.0 / fast.iter().map(|&v| v as f64).product::<f64>();
    let scale = F::<B>::from_f64(scale_f);
    let eps = F::<B>::EPS;
    let window = CorrWindow { shift: &job.shift };
    let single = std::mem::size_of::<F<B>>() == 4;

    // Target side, once.
    let mut fpad = b.zeros::<F<B>>(fast)?;
    b.gather_window(&prep.target, &job.start, &job.len, ext, &mut fpad)?;
    let mut spec_f = b.zeros::<ComplexOf<B>>(&cshape)?;
    b.rfft(&plan, &fpad, &mut spec_f)?;
    let mut y = b.zeros::<ComplexOf<B>>(&cshape)?;
    let mut x = b.zeros::<ComplexOf<B>>(&cshape)?;
    let mut tpad = b.zeros::<F<B>>(fast)?;
    // Real FFT-grid arrays: `work[0]` is the correlation; FLC adds the two mask correlations
    // (which a backend fusing `irfft_score_max_update` never touches).
    let mut work = vec![b.zeros::<F<B>>(fast)?];
    let mut tbox = b.zeros::<F<B>>(tshape)?;
    let mut scratch = b.zeros::<F<B>>(tshape)?;
    let n_mask = prep.mask_sum;

    let mut inv_den = None;
    let mut flc = None;
    let mut mcc = None;
    match p.score {
        Score::CAM | Score::FLCSphericalMask => {
            b.write_corner(&prep.mask, &mut tpad)?;
            b.rfft_pruned(&plan, &tpad, tshape, &mut x)?;
            b.complex_mul_conj(&spec_f, &x, &mut y)?;
            b.irfft(&plan, &mut y, &mut work[0])?;
            b.unary_assign(UnaryOp::Square, &mut fpad)?;
            let mut sf2 = b.zeros::<ComplexOf<B>>(&cshape)?;
            b.rfft(&plan, &fpad, &mut sf2)?;
            b.complex_mul_conj(&sf2, &x, &mut y)?;
            drop(sf2);
            let mut c2 = b.zeros::<F<B>>(fast)?;
            b.irfft(&plan, &mut y, &mut c2)?;
            let mut den = b.zeros::<F<B>>(&job.out_shape)?;
            b.inverse_denominator(
                &work[0],
                &c2,
                window,
                scale,
                F::<B>::from_f64(n_mask),
                eps,
                &mut den,
            )?;
            inv_den = Some(den);
        }
        Score::FLC => {
            b.unary_assign(UnaryOp::Square, &mut fpad)?;
            let mut sf2 = b.zeros::<ComplexOf<B>>(&cshape)?;
            b.rfft(&plan, &fpad, &mut sf2)?;
            // The correlation spectra of C(f, m_R) and C(f², m_R), and the real arrays the
            // unfused default of `irfft_score_max_update` writes them to.
            work.push(b.zeros::<F<B>>(fast)?);
            work.push(b.zeros::<F<B>>(fast)?);
            flc = Some((
                sf2,
                b.zeros::<ComplexOf<B>>(&cshape)?,
                b.zeros::<ComplexOf<B>>(&cshape)?,
            ));
        }
        Score::MCC => {
            let tm = prep
                .target_mask
                .as_ref()
                .ok_or_else(|| Error::invalid("target_mask", "MCC needs a target mask"))?;
            let mut tmpad = b.zeros::<F<B>>(fast)?;
            b.gather_window(tm, &job.start, &job.len, ext, &mut tmpad)?;
            let mut spec_t = b.zeros::<ComplexOf<B>>(&cshape)?;
            b.rfft(&plan, &tmpad, &mut spec_t)?;
            drop(tmpad);
            b.unary_assign(UnaryOp::Square, &mut fpad)?;
            let mut spec_f2 = b.zeros::<ComplexOf<B>>(&cshape)?;
            b.rfft(&plan, &fpad, &mut spec_f2)?;
            let c: Vec<Arr<B, F<B>>> = (0..5)
                .map(|_| b.zeros::<F<B>>(fast))
                .collect::<Result<_>>()?;
            mcc = Some((spec_t, spec_f2, c));
        }
        _ => {}
    }
    drop(fpad);
    let mut mbox = if p.score.rotates_mask() {
        Some(b.zeros::<F<B>>(tshape)?)
    } else {
        None
    };
    let ncc_scale = F::<B>::from_f64(scale_f / (tshape.iter().product::<usize>() as f64).sqrt());

    for r in 0..p.rotations.len() {
        let (m, off) = pull_back(p.rotations.matrix(r), tshape, single);
        // Rotated template (and mask) in the template box.
        match &p.prerotated {
            Some(pr) => b.copy(&pr.templates[r], &mut tbox)?,
            None => b.affine_transform(&prep.template_src, &m, &off, p.interpolation, &mut tbox)?,
        }
        if let Some(mb) = mbox.as_mut() {
            match p.prerotated.as_ref().and_then(|pr| pr.masks) {
                Some(ms) => b.copy(&ms[r], mb)?,
                None => b.affine_transform(&prep.mask, &m, &off, p.interpolation, mb)?,
            }
        }
        let n_rot_mask = match &mbox {
            Some(mb) => b.sum(mb)?,
            None => n_mask,
        };
        if p.score.rotates_mask() && (n_rot_mask.is_nan() || n_rot_mask <= 0.0) {
            return Err(Error::invalid(
                "template_mask",
                format!("the mask rotated by rotation {r} has sum {n_rot_mask} (must be positive)"),
            ));
        }
        match p.score {
            Score::NCC => standardize_masked(b, &mut tbox, None, &mut scratch)?,
            Score::CAM | Score::FLCSphericalMask => {
                standardize_masked(b, &mut tbox, Some((&prep.mask, n_mask)), &mut scratch)?
            }
            Score::FLC | Score::MCC => {
                let mb = mbox
                    .as_ref()
                    .ok_or_else(|| Error::invalid("template_mask", "missing"))?;
                standardize_masked(b, &mut tbox, Some((mb, n_rot_mask)), &mut scratch)?
            }
            Score::CC | Score::LCC => {}
        }
        // C(f, t̂).
        b.write_corner(&tbox, &mut tpad)?;
        if p.score == Score::MCC {
            // MCC multiplies the template spectrum with two more spectra below.
            b.rfft_pruned(&plan, &tpad, tshape, &mut x)?;
            b.complex_mul_conj(&spec_f, &x, &mut y)?;
        } else {
            b.rfft_pruned_mul_conj(&plan, &tpad, tshape, &mut x, &[&spec_f], &mut [&mut y])?;
        }
        let index = idx::<B>(r)?;
        // This call's Σ score², accumulated from zero (see `MatchResult::ssum_parts`).
        let mut ssum = b.zeros::<f64>(&[1])?;
        let ssum = &mut ssum;
        match p.score {
            Score::CC | Score::LCC | Score::NCC => b.irfft_score_max_update(
                &plan,
                &mut y,
                SpectralNorm::Scaled {
                    scale: if p.score == Score::NCC {
                        ncc_scale
                    } else {
                        scale
                    },
                },
                &mut work[..1],
                window,
                best,
                best_index,
                index,
                ssum,
            )?,
            Score::CAM | Score::FLCSphericalMask => {
                let den = inv_den
                    .as_ref()
                    .ok_or_else(|| Error::invalid("denominator", "missing"))?;
                b.irfft_score_max_update(
                    &plan,
                    &mut y,
                    SpectralNorm::Denominator {
                        scale,
                        inv_den: den,
                    },
                    &mut work[..1],
                    window,
                    best,
                    best_index,
                    index,
                    ssum,
                )?
            }
            Score::FLC => {
                let (sf2, y1, y2) = flc
                    .as_mut()
                    .ok_or_else(|| Error::invalid("spectra", "missing"))?;
                let mb = mbox
                    .as_ref()
                    .ok_or_else(|| Error::invalid("template_mask", "missing"))?;
                b.write_corner(mb, &mut tpad)?;
                b.rfft_pruned_mul_conj(
                    &plan,
                    &tpad,
                    tshape,
                    &mut x,
                    &[&spec_f, sf2],
                    &mut [y1, y2],
                )?;
                b.irfft_score_max_update(
                    &plan,
                    &mut y,
                    SpectralNorm::LocalNorm {
                        scale,
                        c1: y1,
                        c2: y2,
                        n: F::<B>::from_f64(n_rot_mask),
                        eps,
                    },
                    &mut work,
                    window,
                    best,
                    best_index,
                    index,
                    ssum,
                )?
            }
            Score::MCC => {
                let (spec_t, sf2, c) = mcc
                    .as_mut()
                    .ok_or_else(|| Error::invalid("spectra", "missing"))?;
                let mb = mbox
                    .as_ref()
                    .ok_or_else(|| Error::invalid("template_mask", "missing"))?;
                let [c_fm, c_tt, c_f2m, c_tt2, c_tm] = c.as_mut_slice() else {
                    return Err(Error::invalid("MCC buffers", "expected 5"));
                };
                // C(f·T, t̂): MCC combines whole grids (global maxima), so nothing to fuse.
                b.irfft(&plan, &mut y, &mut work[0])?;
                // C(T, t̂) from the template spectrum still in x.
                b.complex_mul_conj(spec_t, &x, &mut y)?;
                b.irfft(&plan, &mut y, c_tt)?;
                // t̂² → C(T, t̂²).
                b.unary_assign(UnaryOp::Square, &mut tbox)?;
                b.write_corner(&tbox, &mut tpad)?;
                b.rfft_pruned(&plan, &tpad, tshape, &mut x)?;
                b.complex_mul_conj(spec_t, &x, &mut y)?;
                b.irfft(&plan, &mut y, c_tt2)?;
                // Mask correlations.
                b.write_corner(mb, &mut tpad)?;
                b.rfft_pruned(&plan, &tpad, tshape, &mut x)?;
                b.complex_mul_conj(&spec_f, &x, &mut y)?;
                b.irfft(&plan, &mut y, c_fm)?;
                b.complex_mul_conj(sf2, &x, &mut y)?;
                b.irfft(&plan, &mut y, c_f2m)?;
                b.complex_mul_conj(spec_t, &x, &mut y)?;
                b.irfft(&plan, &mut y, c_tm)?;
                b.mcc_combine(
                    &mut work[0],
                    c_fm,
                    c_tt,
                    c_f2m,
                    c_tt2,
                    c_tm,
                    scale,
                    eps,
                    F::<B>::from_f64(p.mcc_overlap_ratio),
                )?;
                b.score_max_update(
                    &work[0],
                    ScoreNorm::Scaled {
                        scale: F::<B>::from_f64(1.0),
                    },
                    window,
                    best,
                    best_index,
                    idx::<B>(r)?,
                    ssum,
                )?
            }
        }
        ssum_parts.push(b.download(ssum)?.iter().copied().next().unwrap_or(0.0));
        progress(r + 1)?;
    }
    Ok(())
}

fn idx<B: Backend>(r: usize) -> Result<IntOf<B>> {
    IntOf::<B>::from_usize(r)
        .ok_or_else(|| Error::invalid("rotations", format!("index {r} overflows the index type")))
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

    #[test]
    fn jobs_cover_the_target_once() {
        let (jobs, tiled) = plan_jobs(
            Score::FLC,
            &[50, 40],
            &[8, 7],
            false,
            u64::MAX,
            Some(&[16, 16]),
            (4, 4),
        )
        .unwrap();
        assert!(tiled);
        let mut seen = vec![0u8; 50 * 40];
        for j in &jobs {
            for a in 0..j.out_shape[0] {
                for c in 0..j.out_shape[1] {
                    seen[(j.out_offset[0] + a) * 40 + j.out_offset[1] + c] += 1;
                }
            }
            assert_eq!(j.len, vec![j.out_shape[0] + 7, j.out_shape[1] + 6]);
            assert_eq!(
                j.start,
                vec![j.out_offset[0] as isize - 4, j.out_offset[1] as isize - 3]
            );
        }
        assert!(seen.iter().all(|&v| v == 1));
    }

    #[test]
    fn memory_limit_splits_and_refuses_when_hopeless() {
        let (jobs, tiled) = plan_jobs(
            Score::FLC,
            &[128, 128, 128],
            &[32, 32, 32],
            false,
            60 << 20,
            None,
            (4, 4),
        )
        .unwrap();
        assert!(tiled && jobs.len() > 1);
        for j in &jobs {
            assert!(
                estimate_sized(Score::FLC, &[128; 3], &j.out_shape, &j.fast, 4, 4).unwrap()
                    <= 60 << 20
            );
        }
        let (jobs, tiled) = plan_jobs(
            Score::FLC,
            &[64, 64],
            &[8, 8],
            false,
            u64::MAX,
            None,
            (4, 4),
        )
        .unwrap();
        assert!(
            !tiled
                && jobs.len() == 1
                && jobs[0].fast == vec![64, 64]
                && jobs[0].shift == vec![-4, -4]
        );
        let e = plan_jobs(Score::FLC, &[64, 64], &[8, 8], false, 1000, None, (4, 4)).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
        let e = plan_jobs(
            Score::MCC,
            &[64, 64],
            &[8, 8],
            false,
            0,
            Some(&[32, 32]),
            (4, 4),
        )
        .unwrap_err();
        assert!(e.to_string().contains("MCC cannot be tiled"), "{e}");
    }
}
