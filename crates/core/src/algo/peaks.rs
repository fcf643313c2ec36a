//! Peak calling on score maps: local maxima at least a minimum distance apart, above a
//! threshold, away from the border, best first.
//!
//! * [`find_peaks`] is scikit-image's `peak_local_max` (labels = None) exactly: the same
//!   coordinates in the same order. The heavy passes run on the device: a separable max filter
//!   ([`Filter::max_filter`](crate::backend::Filter::max_filter), mode nearest, window `2·min_distance + 1`) and the compaction
//!   [`Filter::peak_candidates`](crate::backend::Filter::peak_candidates); only the candidate list crosses to the host, where the greedy
//!   minimum-distance filter runs over a grid of buckets.
//! * [`max_filter_coordinates`], [`call_peaks_maximum_filter`], [`call_peaks_fast`] and
//!   [`call_peaks_recursive`] are pytme's peak callers on the same primitives.
//! * [`extract_pytom`] is pytom-match-pick's candidate extraction (cube suppression, optional
//!   top-hat dual threshold [`tophat_mask`]) and [`estimate_roc`] its ROC estimate.
//! * [`false_alarm_threshold`] turns "at most k false positives" into a score threshold.
//! * [`refine_parabolic`] adds a sub-voxel offset to each peak (a parabola through the peak
//!   and its neighbours, per axis); [`oversample_peaks`] finds sub-voxel positions as pytme's
//!   `PeakCaller.oversample_peaks` does (upsampled DFT).
//!
//! # −∞
//! A score of −∞ marks a position that was not searched (a restricted template matching run,
//! pytme's fill value): it is never a peak, for every caller (scikit-image's never reports the
//! map minimum; pytme's callers would, and here do not).
//!
//! # NaN
//! NaN is never a peak and does not poison the others: before filtering, NaN voxels are
//! replaced (in a device copy) by −∞, and the map minimum and maximum used by the thresholds
//! are taken over the non-NaN values. A map whose non-NaN values are all equal (or that is all
//! NaN) has no peaks, like scikit-image's constant ("trivial") image.

mod false_alarm;
mod histogram;
mod oversample;
mod pytme;
mod pytom;
mod refine;
mod roc;
mod spacing;
mod stats;
mod tophat;

use ndarray::ArrayView3;

use crate::backend::Arr;
use crate::backend::{
    ArrayMeta, BackendTypes, BinaryOp, BorderMode, Elementwise, Filter, Memory, Reduce,
};
use crate::dtype::{Float, Index};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::{expect_nonempty, expect_shape};

pub use false_alarm::{FalseAlarm, RunStats, false_alarm};
pub use histogram::{centres as histogram_centres, histogram};
pub use oversample::oversample_peaks;
pub use pytme::{
    PytmeParams, RecursiveMask, call_peaks_fast, call_peaks_maximum_filter, call_peaks_recursive,
    max_filter_coordinates,
};
pub use pytom::{Extracted, PytomParams, extract_pytom, pytom_cut_off, pytom_radius};
pub use refine::refine_parabolic;
pub use roc::{Gaussian, Roc, RocParams, RocPoint, estimate_roc};
pub use stats::{
    erfc, erfcinv, false_alarm_threshold, pytme_false_alarm_threshold, voxels_inside_border,
};
pub use tophat::{TophatFit, TophatParams, tophat_cut, tophat_mask, white_tophat};

use spacing::{Closeness, greedy_spacing};

/// One called peak.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// Index of the voxel on every axis.
    pub coord: Vec<usize>,
    /// Its score.
    pub score: f64,
    /// The best rotation at this voxel, when a rotation-index map and the rotation list were
    /// given: the index into the list and the d×d matrix (row-major).
    pub rotation: Option<(usize, Vec<f64>)>,
}

/// scikit-image's `exclude_border`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExcludeBorder {
    /// `true`: exclude `min_distance` voxels on every side; `false`: exclude nothing.
    Bool(bool),
    /// The same width on every axis.
    Width(usize),
    /// One width per axis.
    PerAxis(Vec<usize>),
}

impl Default for ExcludeBorder {
    fn default() -> Self {
        ExcludeBorder::Bool(true)
    }
}

/// A boolean neighbourhood for the max filter (scipy's `footprint`), row-major, centre
/// `shape // 2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footprint {
    /// The mask, `shape.iter().product()` entries.
    pub mask: Vec<bool>,
    /// Its shape (one entry per axis of the map).
    pub shape: Vec<usize>,
}

/// Parameters of [`find_peaks`]: scikit-image's `peak_local_max` arguments with its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakParams {
    /// Peaks are separated by at least this distance (strict: a pair exactly `min_distance`
    /// apart survives); no spacing at all at 0 and 1. Also the max-filter radius and the
    /// default border width. Default 1.
    pub min_distance: usize,
    /// Minimum score (strict `>`); default: the map minimum (so the minimum is never a peak).
    pub threshold_abs: Option<f64>,
    /// Minimum score relative to the map maximum (`threshold_rel · max`, strict); the larger of
    /// the two thresholds applies.
    pub threshold_rel: Option<f64>,
    /// Border exclusion, applied before spacing. Default `Bool(true)`.
    pub exclude_border: ExcludeBorder,
    /// At most this many peaks (the best); `None` = all.
    pub num_peaks: Option<usize>,
    /// A neighbourhood replacing the `(2·min_distance + 1)`-box of the max filter.
    pub footprint: Option<Footprint>,
    /// Minkowski norm of the spacing test: `f64::INFINITY` (Chebyshev, the default), 2
    /// (Euclidean), any `p >= 1`.
    pub p_norm: f64,
}

impl Default for PeakParams {
    fn default() -> Self {
        PeakParams {
            min_distance: 1,
            threshold_abs: None,
            threshold_rel: None,
            exclude_border: ExcludeBorder::default(),
            num_peaks: None,
            footprint: None,
            p_norm: f64::INFINITY,
        }
    }
}

impl PeakParams {
    /// The defaults with `min_distance` set.
    pub fn with_min_distance(min_distance: usize) -> Self {
        PeakParams {
            min_distance,
            ..Self::default()
        }
    }
}

/// The max-filter window `w` clamped to each axis of `shape`: a window of `2·s + 1` voxels or
/// more reaches past both ends of an axis of length `s` from every voxel, so every wider window
/// sees the same voxels and the same border values (for any border mode) and gives the same
/// maximum. Clamping makes the filter's cost independent of `w`.
pub(crate) fn clamp_windows(w: usize, shape: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .map(|&s| w.min(s.saturating_mul(2).saturating_add(1)))
        .collect()
}

/// Row-major unravel of a flat index.
pub(crate) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0usize; shape.len()];
    for k in (0..shape.len()).rev() {
        c[k] = flat % shape[k];
        flat /= shape[k];
    }
    c
}

/// Row-major flat index of a coordinate.
pub(crate) fn ravel(coord: &[usize], shape: &[usize]) -> usize {
    coord
        .iter()
        .zip(shape)
        .fold(0usize, |acc, (&x, &s)| acc * s + x)
}

/// `scores` itself when it holds no NaN, otherwise a device copy with NaN replaced by −∞.
pub(crate) enum Sanitized<'a, B: BackendTypes, T: Float> {
    Borrowed(&'a Arr<B, T>),
    Owned(Arr<B, T>),
}

impl<B: BackendTypes, T: Float> Sanitized<'_, B, T> {
    pub(crate) fn get(&self) -> &Arr<B, T> {
        match self {
            Sanitized::Borrowed(a) => a,
            Sanitized::Owned(a) => a,
        }
    }
}

pub(crate) fn sanitize<'a, B: Memory + Elementwise + Reduce + Filter, T: Float>(
    b: &B,
    scores: &'a Arr<B, T>,
) -> Result<Sanitized<'a, B, T>> {
    if b.count_nonfinite(scores)? == 0 {
        return Ok(Sanitized::Borrowed(scores));
    }
    let mut owned = b.duplicate(scores)?;
    // max(NaN, −∞) = −∞ ("NaN loses"); ±∞ are unchanged.
    b.scalar_assign(BinaryOp::Max, &mut owned, f64::NEG_INFINITY)?;
    Ok(Sanitized::Owned(owned))
}

/// Minimum and maximum over the non-NaN values, `None` when every value is NaN.
pub(crate) fn min_max<B: Memory + Elementwise + Reduce + Filter, T: Float>(
    b: &B,
    a: &Arr<B, T>,
) -> Result<Option<(T, T)>> {
    match (b.min(a), b.max(a)) {
        (Ok(lo), Ok(hi)) => Ok(Some((lo, hi))),
        (Err(Error::NonFinite { .. }), _) | (_, Err(Error::NonFinite { .. })) => Ok(None),
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

fn border_widths(params: &PeakParams, ndim: usize) -> Result<Vec<usize>> {
    Ok(match &params.exclude_border {
        ExcludeBorder::Bool(true) => vec![params.min_distance; ndim],
        ExcludeBorder::Bool(false) => vec![0; ndim],
        ExcludeBorder::Width(w) => vec![*w; ndim],
        ExcludeBorder::PerAxis(v) => {
            if v.len() != ndim {
                return Err(Error::invalid(
                    "exclude_border",
                    format!("expected one width per axis ({ndim}), got {}", v.len()),
                ));
            }
            v.clone()
        }
    })
}

/// scikit-image `peak_local_max(scores, min_distance, threshold_abs, threshold_rel,
/// exclude_border, num_peaks, footprint, p_norm)` (labels = None), exactly:
///
/// 1. threshold = `threshold_abs`, or the map minimum; with `threshold_rel`,
///    `max(threshold, threshold_rel · max)` (in the map's precision, as numpy does);
/// 2. candidates are voxels equal to their max filter (mode nearest, box `2·min_distance + 1`
///    or `footprint`) and strictly above the threshold; a footprint of one voxel (or a map of
///    one voxel) makes every voxel above the threshold a candidate; a map whose every voxel
///    equals its max filter (a constant map) has none;
/// 3. voxels within the border widths are dropped (a border wider than half an axis leaves
///    nothing);
/// 4. candidates are ranked by descending score, ties in raster order;
/// 5. with `min_distance > 1`, greedy spacing: a candidate closer than `min_distance` (strict,
///    `p_norm` distance) to a kept peak is dropped;
/// 6. the first `num_peaks` are returned.
///
/// NaN voxels are never peaks (see the [module docs](self)). Errors: an empty map, a footprint
/// with the wrong number of axes or entries, `p_norm < 1` or NaN, non-finite thresholds, a
/// per-axis `exclude_border` of the wrong length.
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use monomorph::prelude::*;
/// use monomorph::ndarray::Array2;
///
/// let b = Cpu::<Single>::new();
/// let mut map = Array2::<f32>::zeros((20, 20));
/// map[[5, 5]] = 3.0;
/// map[[6, 7]] = 2.0; // within 5 of the stronger peak: dropped
/// map[[14, 12]] = 1.0;
/// let scores = b.upload_array(&map)?;
/// let peaks = find_peaks(&b, &scores, &PeakParams::with_min_distance(5))?;
/// let coords: Vec<_> = peaks.iter().map(|p| p.coord.clone()).collect();
/// assert_eq!(coords, vec![vec![5, 5], vec![14, 12]]); // best first
/// assert_eq!(peaks[0].score, 3.0);
/// # Ok::<(), monomorph::Error>(())
/// ```
pub fn find_peaks<B: Memory + Elementwise + Reduce + Filter, T: Float>(
    b: &B,
    scores: &Arr<B, T>,
    params: &PeakParams,
) -> Result<Vec<Peak>> {
    let shape = scores.shape().to_vec();
    expect_nonempty("scores", &shape)?;
    let ndim = shape.len();
    let md = params.min_distance;
    if params.p_norm.is_nan() || params.p_norm < 1.0 {
        return Err(Error::invalid(
            "p_norm",
            format!(
                "expected a Minkowski norm >= 1 (or infinity), got {}",
                params.p_norm
            ),
        ));
    }
    for (name, v) in [
        ("threshold_abs", params.threshold_abs),
        ("threshold_rel", params.threshold_rel),
    ] {
        if let Some(v) = v
            && !v.is_finite()
        {
            return Err(Error::invalid(
                name,
                format!("expected a finite value, got {v}"),
            ));
        }
    }
    // Any window of 2·s + 1 or more covers an axis of length s from every voxel: clamp it, so
    // a huge min_distance costs no more than the map's own size (same answer).
    let box_size = md.saturating_mul(2).saturating_add(1);
    let footprint_len = match &params.footprint {
        Some(fp) => {
            if fp.shape.len() != ndim {
                return Err(Error::shape(
                    "footprint of find_peaks",
                    format!("{ndim} axes (like scores {})", fmt_shape(&shape)),
                    format!("{} axes {}", fp.shape.len(), fmt_shape(&fp.shape)),
                ));
            }
            let len: usize = fp.shape.iter().product();
            if len == 0 || fp.mask.len() != len {
                return Err(Error::invalid(
                    "footprint",
                    format!(
                        "mask has {} entries for shape {} ({len} expected, at least one)",
                        fp.mask.len(),
                        fmt_shape(&fp.shape)
                    ),
                ));
            }
            len
        }
        None => box_size.saturating_pow(ndim as u32),
    };
    let border = border_widths(params, ndim)?;
    let max_out = params.num_peaks.unwrap_or(usize::MAX);
    if max_out == 0
        || border
            .iter()
            .zip(&shape)
            .any(|(&w, &s)| w > 0 && w.saturating_mul(2) >= s)
    {
        return Ok(Vec::new());
    }

    let Some((vmin, vmax)) = min_max(b, scores)? else {
        return Ok(Vec::new()); // all NaN
    };
    let mut threshold = match params.threshold_abs {
        Some(a) => T::from_f64(a),
        None => vmin,
    };
    if let Some(rel) = params.threshold_rel {
        let r = T::from_f64(rel) * vmax;
        if r > threshold {
            threshold = r;
        }
    }

    let src = sanitize(b, scores)?;
    let src = src.get();
    let n = scores.len();
    let candidates = if footprint_len == 1 || n == 1 {
        b.peak_candidates(src, src, threshold, &border)?
    } else {
        let mut filtered = b.zeros::<T>(&shape)?;
        match &params.footprint {
            None => {
                if vmin == vmax {
                    return Ok(Vec::new()); // constant map: skimage's "trivial image"
                }
                b.max_filter(
                    src,
                    &clamp_windows(box_size, &shape),
                    BorderMode::Nearest,
                    &mut filtered,
                )?;
            }
            Some(fp) => {
                b.max_filter_footprint(
                    src,
                    &fp.mask,
                    &fp.shape,
                    BorderMode::Nearest,
                    &mut filtered,
                )?;
                // Trivial image: every voxel equals its filtered value.
                let mut diff = b.zeros::<T>(&shape)?;
                b.binary(BinaryOp::Sub, &filtered, src, &mut diff)?;
                let trivial = match min_max(b, &diff)? {
                    None => true,
                    Some((lo, hi)) => lo == T::zero() && hi == T::zero(),
                };
                if trivial {
                    return Ok(Vec::new());
                }
            }
        }
        b.peak_candidates(src, &filtered, threshold, &border)?
    };
    Ok(rank_and_space(
        candidates,
        &shape,
        md,
        params.p_norm,
        max_out,
    ))
}

/// Ranks (flat index, value) candidates by descending value, ties by index, applies
/// scikit-image's spacing (when `md > 1`) and truncates.
fn rank_and_space<T: Float>(
    mut cands: Vec<(usize, T)>,
    shape: &[usize],
    md: usize,
    p_norm: f64,
    max_out: usize,
) -> Vec<Peak> {
    sort_desc(&mut cands);
    let peak = |&(i, v): &(usize, T)| Peak {
        coord: unravel(i, shape),
        score: v.as_f64(),
        rotation: None,
    };
    if md <= 1 {
        return cands.iter().take(max_out).map(peak).collect();
    }
    let coords: Vec<Vec<usize>> = cands.iter().map(|&(i, _)| unravel(i, shape)).collect();
    let order: Vec<usize> = (0..cands.len()).collect();
    let kept = greedy_spacing(
        &coords,
        &order,
        shape,
        Closeness::Minkowski {
            p: p_norm,
            spacing: md,
        },
        max_out,
    );
    kept.into_iter()
        .map(|k| Peak {
            coord: coords[k].clone(),
            score: cands[k].1.as_f64(),
            rotation: None,
        })
        .collect()
}

/// Descending value, ties in ascending flat index (numpy's stable `argsort(-v)` on a raster
/// ordered list). Values must not be NaN.
pub(crate) fn sort_desc<T: Float>(c: &mut [(usize, T)]) {
    c.sort_unstable_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.cmp(&b.0))
    });
}

/// Fills [`Peak::rotation`] from a rotation-index map (same shape as the score map: the best
/// rotation per voxel, as template matching writes it) and the rotation list `(n, d, d)`.
/// Only the values at the peaks are read ([`Filter::gather`](crate::backend::Filter::gather)).
///
/// Errors: a map whose shape is not `scores_shape`, rotations that are not d×d, an index at a
/// peak that is negative or not below the number of rotations.
pub fn attach_rotations<B: Memory + Elementwise + Reduce + Filter, I: Index>(
    b: &B,
    peaks: &mut [Peak],
    scores_shape: &[usize],
    rotation_index: &Arr<B, I>,
    rotations: ArrayView3<'_, f64>,
) -> Result<()> {
    expect_shape(
        "rotation_index (must match the score map)",
        scores_shape,
        rotation_index.shape(),
    )?;
    let d = scores_shape.len();
    let (n_rot, r1, r2) = rotations.dim();
    if r1 != d || r2 != d {
        return Err(Error::shape(
            "rotations",
            format!("(n, {d}, {d})"),
            fmt_shape(&[n_rot, r1, r2]),
        ));
    }
    let flat: Vec<usize> = peaks
        .iter()
        .map(|p| ravel(&p.coord, scores_shape))
        .collect();
    let idx = b.gather(rotation_index, &flat)?;
    for (p, r) in peaks.iter_mut().zip(idx) {
        let k = r.to_usize().filter(|&k| k < n_rot).ok_or_else(|| {
            Error::invalid(
                "rotation_index",
                format!(
                    "value {r} at {:?} is not an index into {n_rot} rotations",
                    p.coord
                ),
            )
        })?;
        let m: Vec<f64> = rotations
            .index_axis(ndarray::Axis(0), k)
            .iter()
            .copied()
            .collect();
        p.rotation = Some((k, m));
    }
    Ok(())
}

/// [`find_peaks`] followed by [`attach_rotations`]: each peak carries its best rotation.
pub fn find_peaks_with_rotations<B: Memory + Elementwise + Reduce + Filter, T: Float, I: Index>(
    b: &B,
    scores: &Arr<B, T>,
    params: &PeakParams,
    rotation_index: &Arr<B, I>,
    rotations: ArrayView3<'_, f64>,
) -> Result<Vec<Peak>> {
    expect_shape(
        "rotation_index (must match the score map)",
        scores.shape(),
        rotation_index.shape(),
    )?;
    let mut peaks = find_peaks(b, scores, params)?;
    attach_rotations(b, &mut peaks, scores.shape(), rotation_index, rotations)?;
    Ok(peaks)
}
