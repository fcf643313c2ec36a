//! pytme 0.3.6's peak callers (`tme/analyzer/peaks.py`) on monomorph's primitives.
//!
//! Every caller ends with pytme's driver (`PeakCaller._get_peak_mask` + `_update`): drop
//! candidates closer than `min_boundary_distance` to an edge, below `min_score` or above
//! `max_score`, rank by descending score (ties in raster order), keep the `2·num_peaks` best
//! when there were more than `num_peaks` candidates, then a greedy distance filter
//! with pytme's integer rule (a pair is too close when the Euclidean distance, truncated to an
//! integer, is `<= min_distance`, i.e. `d < min_distance + 1`), and keep the `num_peaks` best.
//!
//! Differences from pytme, on purpose: a score of −∞ (a position not searched) is never a
//! peak; the boundary is always applied (pytme loses it when the
//! candidates outnumber `num_peaks`); ties are broken in raster order (pytme's sorts are
//! unstable); pytme's `num_peaks` placeholder rows (position −1, score −1) do not exist, so
//! they neither take a slot nor suppress candidates near the origin.

use ndarray::ArrayView3;

use super::spacing::{Closeness, greedy_spacing};
use super::{Peak, attach_rotations, clamp_windows, min_max, ravel, sanitize, sort_desc, unravel};
use crate::backend::{
    Arr, ArrayMeta, BackendTypes, BorderMode, Elementwise, Filter, Interpolation, Memory, Reduce,
    Resample,
};
use crate::dtype::{Float, Index};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::{expect_nonempty, expect_shape};

/// Parameters shared by pytme's peak callers (pytme's constructor arguments and defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct PytmeParams {
    /// At most this many peaks. Default 1000.
    pub num_peaks: usize,
    /// Minimum distance (see the module docs for pytme's integer rule); also the window of the
    /// maximum filter and the grid / box size. Default 1.
    pub min_distance: usize,
    /// Peaks must satisfy `b <= coord < shape − b` on every axis. Default 0.
    pub min_boundary_distance: usize,
    /// Peaks must score `>=` this.
    pub min_score: Option<f64>,
    /// Peaks must score `<=` this.
    pub max_score: Option<f64>,
}

impl Default for PytmeParams {
    fn default() -> Self {
        PytmeParams {
            num_peaks: 1000,
            min_distance: 1,
            min_boundary_distance: 0,
            min_score: None,
            max_score: None,
        }
    }
}

fn check_scores(what: &str, v: Option<f64>) -> Result<()> {
    match v {
        Some(x) if x.is_nan() => Err(Error::invalid(what, "expected a number, got NaN")),
        _ => Ok(()),
    }
}

/// (flat index, value) of pytme's `max_filter_coordinates`, raster order, on a NaN-free map.
fn mfc_raw<B: Memory + Elementwise + Reduce + Filter, T: Float>(
    b: &B,
    src: &Arr<B, T>,
    min_distance: usize,
    min_score: Option<f64>,
) -> Result<Vec<(usize, T)>> {
    let shape = src.shape().to_vec();
    let border = vec![0usize; shape.len()];
    let mut mf = b.zeros::<T>(&shape)?;
    b.max_filter(
        src,
        &clamp_windows(min_distance, &shape),
        BorderMode::Constant(0.0),
        &mut mf,
    )?;
    let lowest = T::neg_infinity();
    let Some(m) = min_score else {
        return b.peak_candidates(src, &mf, lowest, &border);
    };
    // pytme: `mf -= (score < min_score)`; a voxel is reported when `mf == score` afterwards.
    let m = T::from_f64(m);
    let mut out: Vec<(usize, T)> = b
        .peak_candidates(src, &mf, lowest, &border)?
        .into_iter()
        .filter(|&(_, v)| v >= m)
        .collect();
    b.scalar_assign(crate::backend::BinaryOp::Sub, &mut mf, 1.0)?;
    out.extend(
        b.peak_candidates(src, &mf, lowest, &border)?
            .into_iter()
            .filter(|&(_, v)| v < m),
    );
    out.sort_unstable_by_key(|&(i, _)| i);
    Ok(out)
}

/// pytme's `NumpyFFTWBackend.max_filter_coordinates(scores, min_distance, min_score)`: every
/// voxel equal to its maximum filter with a **`min_distance`-wide** box (asymmetric for even
/// widths) and a constant-0 border (so a negative local maximum within reach of the edge is
/// not reported, and on a flat zero background every voxel is). With `min_score`, the filtered
/// value is lowered by 1 where the score is below `min_score` before the comparison (pytme's
/// quirk: a low voxel whose window maximum is exactly its score + 1 is still reported).
/// Coordinates in raster order. NaN voxels are never reported (and count as −∞ for their
/// neighbours). Errors: `min_distance` 0, an empty map.
pub fn max_filter_coordinates<B: Memory + Elementwise + Reduce + Filter, T: Float>(
    b: &B,
    scores: &Arr<B, T>,
    min_distance: usize,
    min_score: Option<f64>,
) -> Result<Vec<Vec<usize>>> {
    expect_nonempty("scores", scores.shape())?;
    if min_distance == 0 {
        return Err(Error::invalid(
            "min_distance",
            "the filter window must be at least 1, got 0",
        ));
    }
    check_scores("min_score", min_score)?;
    let src = sanitize(b, scores)?;
    let shape = scores.shape();
    Ok(mfc_raw(b, src.get(), min_distance, min_score)?
        .into_iter()
        .map(|(i, _)| unravel(i, shape))
        .collect())
}

/// pytme's driver on (flat index, value) candidates: boundary, score window, rank, integer
/// distance rule, `num_peaks`.
fn drive<T: Float>(cands: Vec<(usize, T)>, shape: &[usize], p: &PytmeParams) -> Vec<Peak> {
    let lo = p.min_score.map(T::from_f64);
    let hi = p.max_score.map(T::from_f64);
    let mbd = p.min_boundary_distance;
    let total = cands.len();
    let mut c: Vec<(usize, T)> = cands
        .into_iter()
        .filter(|&(_, v)| !v.is_nan() && v != T::neg_infinity())
        .filter(|&(_, v)| lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h))
        .filter(|&(i, _)| {
            unravel(i, shape)
                .iter()
                .zip(shape)
                .all(|(&x, &s)| x >= mbd && x.saturating_add(mbd) < s)
        })
        .collect();
    sort_desc(&mut c);
    c.dedup_by_key(|e| e.0);
    // pytme's `_get_peak_mask`: with more than `num_peaks` candidates (valid or not), only the
    // `2·num_peaks` best valid ones go on to the distance filter (so a cluster of candidates
    // around a strong peak can crowd out weaker peaks, as in pytme).
    if total > p.num_peaks {
        c.truncate(p.num_peaks.saturating_mul(2));
    }
    let coords: Vec<Vec<usize>> = c.iter().map(|&(i, _)| unravel(i, shape)).collect();
    let order: Vec<usize> = (0..c.len()).collect();
    let kept = greedy_spacing(
        &coords,
        &order,
        shape,
        Closeness::FlooredEuclidean {
            spacing: p.min_distance,
        },
        p.num_peaks,
    );
    kept.into_iter()
        .map(|k| Peak {
            coord: coords[k].clone(),
            score: c[k].1.as_f64(),
            rotation: None,
        })
        .collect()
}

fn validate(scores_shape: &[usize], p: &PytmeParams) -> Result<()> {
    expect_nonempty("scores", scores_shape)?;
    check_scores("min_score", p.min_score)?;
    check_scores("max_score", p.max_score)?;
    Ok(())
}

/// pytme's `PeakCallerMaximumFilter`: candidates from [`max_filter_coordinates`] (window
/// `min_distance`, constant-0 border), then pytme's driver (module docs), with the boundary
/// applied correctly. Errors: `min_distance` 0, an empty map, NaN score limits.
pub fn call_peaks_maximum_filter<B: Memory + Elementwise + Reduce + Filter, T: Float>(
    b: &B,
    scores: &Arr<B, T>,
    params: &PytmeParams,
) -> Result<Vec<Peak>> {
    validate(scores.shape(), params)?;
    if params.min_distance == 0 {
        return Err(Error::invalid(
            "min_distance",
            "the filter window must be at least 1, got 0",
        ));
    }
    let src = sanitize(b, scores)?;
    let cands = mfc_raw(b, src.get(), params.min_distance, params.min_score)?;
    Ok(drive(cands, scores.shape(), params))
}

/// pytme's `PeakCallerFast`: the score map is cut into a grid of `shape // min_distance` equal
/// boxes per axis (pytme's `split_shape`: the last box is shifted to end at the edge, so it may
/// overlap its neighbour; where `ceil(s / n)·(n − 1)` runs past the edge, pytme 0.3.6 makes
/// empty boxes and fails, here those boxes are shifted to end at the edge too); each box
/// contributes its first maximum if that voxel is also the
/// maximum of the window `[p − min_distance, p + min_distance)` around it; then pytme's driver.
///
/// On the device: the box maxima come from a max filter of the box size read at the box
/// centres, the window test from a max filter of size `2·min_distance`; only candidates and one
/// value per box reach the host. One difference from pytme remains, for exact ties only: when
/// a box's first maximum fails the window test but a later voxel of the box with the same
/// score passes it, that later voxel is reported (pytme reports nothing for the box).
/// Errors: `min_distance` 0, an empty map, NaN score limits.
pub fn call_peaks_fast<B: Memory + Elementwise + Reduce + Filter, T: Float>(
    b: &B,
    scores: &Arr<B, T>,
    params: &PytmeParams,
) -> Result<Vec<Peak>> {
    validate(scores.shape(), params)?;
    let md = params.min_distance;
    if md == 0 {
        return Err(Error::invalid(
            "min_distance",
            "the grid box must be at least 1, got 0",
        ));
    }
    let shape = scores.shape().to_vec();
    let ndim = shape.len();
    let src = sanitize(b, scores)?;
    let src = src.get();
    // Grid (pytme's split_shape with equal_shape=True).
    let splits: Vec<usize> = shape.iter().map(|&s| (s / md).max(1)).collect();
    let len: Vec<usize> = shape
        .iter()
        .zip(&splits)
        .map(|(&s, &n)| s.div_ceil(n))
        .collect();
    let starts: Vec<Vec<usize>> = (0..ndim)
        .map(|k| {
            (0..splits[k])
                .map(|i| {
                    if i + 1 < splits[k] {
                        (i * len[k]).min(shape[k] - len[k])
                    } else {
                        shape[k] - len[k]
                    }
                })
                .collect()
        })
        .collect();
    // Box maxima: a box-sized max filter read at each box's centre.
    let mut boxmax = b.zeros::<T>(&shape)?;
    b.max_filter(src, &len, BorderMode::Nearest, &mut boxmax)?;
    let n_boxes: usize = splits.iter().product();
    let mut centres = Vec::with_capacity(n_boxes);
    for bi in 0..n_boxes {
        let g = unravel(bi, &splits);
        let c: Vec<usize> = (0..ndim).map(|k| starts[k][g[k]] + len[k] / 2).collect();
        centres.push(ravel(&c, &shape));
    }
    let vbox = b.gather(&boxmax, &centres)?;
    drop(boxmax);
    // Window test: p equals the maximum of [p − md, p + md) (an even 2·md box).
    let mut win = b.zeros::<T>(&shape)?;
    b.max_filter(
        src,
        &clamp_windows(md.saturating_mul(2), &shape),
        BorderMode::Nearest,
        &mut win,
    )?;
    let cands = b.peak_candidates(src, &win, T::neg_infinity(), &vec![0; ndim])?;
    drop(win);
    // For each box, the first (lowest flat index) candidate inside it scoring the box max.
    let mut best: Vec<Option<(usize, T)>> = vec![None; n_boxes];
    for &(i, v) in &cands {
        let c = unravel(i, &shape);
        // Boxes containing c along each axis (at most two, where the last box overlaps).
        let per_axis: Vec<Vec<usize>> = (0..ndim)
            .map(|k| {
                (0..splits[k])
                    .filter(|&j| starts[k][j] <= c[k] && c[k] < starts[k][j] + len[k])
                    .collect()
            })
            .collect();
        let mut sel = vec![0usize; ndim];
        'boxes: loop {
            let g: Vec<usize> = (0..ndim).map(|k| per_axis[k][sel[k]]).collect();
            let bi = ravel(&g, &splits);
            if v == vbox[bi] && best[bi].is_none_or(|(j, _)| i < j) {
                best[bi] = Some((i, v));
            }
            let mut k = ndim;
            loop {
                if k == 0 {
                    break 'boxes;
                }
                k -= 1;
                if sel[k] + 1 < per_axis[k].len() {
                    sel[k] += 1;
                    break;
                }
                sel[k] = 0;
            }
        }
    }
    let mut picked: Vec<(usize, T)> = best.into_iter().flatten().collect();
    picked.sort_unstable_by_key(|&(i, _)| i);
    picked.dedup_by_key(|e| e.0);
    Ok(drive(picked, &shape, params))
}

/// The template mask and rotations of [`call_peaks_recursive`].
pub struct RecursiveMask<'a, B: BackendTypes, T: Float, I: Index> {
    /// The template mask (d axes; its shape is the masked box).
    pub mask: &'a Arr<B, T>,
    /// Best rotation per voxel (same shape as the score map) and the rotation list `(n, d, d)`;
    /// `None` masks with the unrotated mask.
    pub rotations: Option<(&'a Arr<B, I>, ArrayView3<'a, f64>)>,
}

/// pytme's `PeakCallerRecursiveMasking`: repeatedly take the best voxel not yet masked, stop
/// when it scores below `min_score` (default: no limit) or `num_peaks` are found, and mask
/// around it either a `min_distance` box (`[p − md/2, p − md/2 + md)`) or, with `mask`, the
/// voxels where the template mask — rotated by that peak's rotation (linear interpolation,
/// pull-back about the centre `(n − 1)/2`) and placed with its centre `n/2` on the peak —
/// exceeds 0.1. Then pytme's driver. Each peak carries its rotation when rotations are given.
///
/// The score map is never modified or copied to the host: voxels are visited in descending
/// order through [`Reduce::top_k`](crate::backend::Reduce::top_k) in doubling batches, and the masked set is a host bitmap.
/// Unlike pytme, masked voxels are excluded rather than set to 0 (pytme's zeros can outrank
/// negative scores and stop the search early), and the search stops at the first −∞ (a
/// position not searched). Errors: `min_distance` 0 without a mask, a mask with the wrong
/// number of axes, a rotation map of another shape, rotations not d×d.
pub fn call_peaks_recursive<
    B: Memory + Elementwise + Reduce + Filter + Resample,
    T: Float,
    I: Index,
>(
    b: &B,
    scores: &Arr<B, T>,
    params: &PytmeParams,
    mask: Option<RecursiveMask<'_, B, T, I>>,
) -> Result<Vec<Peak>> {
    validate(scores.shape(), params)?;
    let shape = scores.shape().to_vec();
    let extent = masked_extent(&shape, params, mask.as_ref())?;
    if min_max(b, scores)?.is_none() || params.num_peaks == 0 {
        return Ok(Vec::new());
    }
    let min_score = params.min_score.map(T::from_f64);
    let mut masked = Bitmap::new(scores.len());
    let mut found: Vec<(usize, T)> = Vec::new();
    let mut rotated = match &mask {
        Some(m) => Some(b.zeros::<T>(m.mask.shape())?),
        None => None,
    };
    let mut order = Descending::new(scores.len());
    while found.len() < params.num_peaks {
        let Some((i, v)) = order.next(b, scores)? else {
            break; // every (non-NaN) voxel visited
        };
        if min_score.is_some_and(|m| v < m) || v == T::neg_infinity() {
            break;
        }
        if masked.get(i) {
            continue;
        }
        let c = unravel(i, &shape);
        // The region to mask, relative to the box origin c − extent/2.
        let keep = match (&mask, rotated.as_mut()) {
            (Some(m), Some(buf)) => Some(rotated_mask(b, m, i, &c, buf)?),
            _ => None,
        };
        mask_region(&mut masked, &c, &extent, &shape, keep.as_deref());
        found.push((i, v));
    }
    let mut peaks = drive(found, &shape, params);
    if let Some(RecursiveMask {
        rotations: Some((ri, rots)),
        ..
    }) = mask
    {
        attach_rotations(b, &mut peaks, &shape, ri, rots)?;
    }
    Ok(peaks)
}

/// The box masked around each peak of [`call_peaks_recursive`]: the template mask's shape, or a
/// `min_distance` box; checks the mask and rotations against the map.
fn masked_extent<B: BackendTypes, T: Float, I: Index>(
    shape: &[usize],
    params: &PytmeParams,
    mask: Option<&RecursiveMask<'_, B, T, I>>,
) -> Result<Vec<usize>> {
    let ndim = shape.len();
    let Some(m) = mask else {
        if params.min_distance == 0 {
            return Err(Error::invalid(
                "min_distance",
                "the masked box must be at least 1 wide, got 0",
            ));
        }
        return Ok(vec![params.min_distance; ndim]);
    };
    if m.mask.ndim() != ndim {
        return Err(Error::shape(
            "mask of call_peaks_recursive",
            format!("{ndim} axes (like scores {})", fmt_shape(shape)),
            fmt_shape(m.mask.shape()),
        ));
    }
    expect_nonempty("mask", m.mask.shape())?;
    if let Some((ri, rots)) = &m.rotations {
        expect_shape(
            "rotation_index (must match the score map)",
            shape,
            ri.shape(),
        )?;
        let (nr, r1, r2) = rots.dim();
        if r1 != ndim || r2 != ndim {
            return Err(Error::shape(
                "rotations",
                format!("(n, {ndim}, {ndim})"),
                fmt_shape(&[nr, r1, r2]),
            ));
        }
    }
    Ok(m.mask.shape().to_vec())
}

/// A set of flat indices.
struct Bitmap(Vec<u64>);

impl Bitmap {
    fn new(n: usize) -> Self {
        Bitmap(vec![0u64; n.div_ceil(64)])
    }
    fn get(&self, i: usize) -> bool {
        (self.0[i / 64] >> (i % 64)) & 1 == 1
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
}

/// The voxels of a map in descending order (ties in raster order, NaN never), read from the
/// device in doubling batches of [`Reduce::top_k`](crate::backend::Reduce::top_k).
struct Descending<T> {
    n: usize,
    k: usize,
    list: Vec<(usize, T)>,
    pos: usize,
}

impl<T: Float> Descending<T> {
    fn new(n: usize) -> Self {
        Descending {
            n,
            k: 256usize.min(n),
            list: Vec::new(),
            pos: 0,
        }
    }

    /// The next voxel, `None` when every voxel was visited.
    fn next<B: Reduce + Memory>(
        &mut self,
        b: &B,
        scores: &Arr<B, T>,
    ) -> Result<Option<(usize, T)>> {
        if self.pos >= self.list.len() {
            if self.list.len() == self.n || (!self.list.is_empty() && self.list.len() < self.k) {
                return Ok(None);
            }
            if !self.list.is_empty() {
                self.k = self.k.saturating_mul(2).min(self.n);
            }
            self.list = b.top_k(scores, self.k)?;
            if self.pos >= self.list.len() {
                return Ok(None);
            }
        }
        self.pos += 1;
        Ok(Some(self.list[self.pos - 1]))
    }
}

/// The template mask of [`call_peaks_recursive`] rotated by the rotation of voxel `i` (at `c`)
/// into `buf`, on the host.
fn rotated_mask<B: Memory + Filter + Resample, T: Float, I: Index>(
    b: &B,
    m: &RecursiveMask<'_, B, T, I>,
    i: usize,
    c: &[usize],
    buf: &mut Arr<B, T>,
) -> Result<Vec<T>> {
    let ndim = c.len();
    let extent = m.mask.shape().to_vec();
    let r = match &m.rotations {
        Some((ri, rots)) => {
            let idx = b.gather(*ri, &[i])?[0];
            let r = idx
                .to_usize()
                .filter(|&r| r < rots.dim().0)
                .ok_or_else(|| {
                    Error::invalid(
                        "rotation_index",
                        format!(
                            "value {idx} at {c:?} is not an index into {} rotations",
                            rots.dim().0
                        ),
                    )
                })?;
            rots.index_axis(ndarray::Axis(0), r)
                .iter()
                .copied()
                .collect::<Vec<f64>>()
        }
        None => {
            let mut id = vec![0.0; ndim * ndim];
            for a in 0..ndim {
                id[a * ndim + a] = 1.0;
            }
            id
        }
    };
    let ctr: Vec<f64> = extent.iter().map(|&e| (e as f64 - 1.0) / 2.0).collect();
    let offset: Vec<f64> = (0..ndim)
        .map(|a| ctr[a] - (0..ndim).map(|j| r[a * ndim + j] * ctr[j]).sum::<f64>())
        .collect();
    b.affine_transform(m.mask, &r, &offset, Interpolation::Linear, buf)?;
    Ok(b.download(buf)?.iter().copied().collect())
}

/// Marks the box `c − extent/2 + [0, extent)` (the part inside the map) in `masked`; with
/// `keep` (the rotated mask over the box), only where it exceeds 0.1.
fn mask_region<T: Float>(
    masked: &mut Bitmap,
    c: &[usize],
    extent: &[usize],
    shape: &[usize],
    keep: Option<&[T]>,
) {
    let ndim = shape.len();
    let cut = T::from_f64(0.1);
    // Only the part of the box inside the map is visited (the box may be far larger than the
    // map): offset o is inside when 0 <= c + o − extent/2 < shape.
    let ranges: Vec<(usize, usize)> = (0..ndim)
        .map(|a| {
            let h = extent[a] / 2;
            let lo = h.saturating_sub(c[a]);
            let hi = extent[a].min(shape[a].saturating_add(h).saturating_sub(c[a]));
            (lo, hi)
        })
        .collect();
    if ranges.iter().any(|&(lo, hi)| lo >= hi) {
        return;
    }
    let mut o: Vec<usize> = ranges.iter().map(|r| r.0).collect();
    loop {
        if keep.is_none_or(|kv| kv[ravel(&o, extent)] > cut) {
            let flat = (0..ndim).fold(0usize, |acc, a| {
                acc * shape[a] + (c[a] + o[a] - extent[a] / 2)
            });
            masked.set(flat);
        }
        let mut a = ndim;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            o[a] += 1;
            if o[a] < ranges[a].1 {
                break;
            }
            o[a] = ranges[a].0;
        }
    }
}
