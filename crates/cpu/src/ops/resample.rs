//! Spatial rearrangements (pad, crop, flip, roll) and scipy-compatible spline resampling.
//!
//! * `pad`/`crop`/`flip`/`roll` are one gather: every destination axis index maps to a source
//!   index (or to zero), and rows of the last axis are copied in contiguous runs, in parallel
//!   over rows.
//! * `spline_prefilter` is scipy's `spline_filter1d(order=3, mode="mirror")` along every axis
//!   (the filter `affine_transform(mode="constant", prefilter=True)` applies), computed in
//!   `f64` on blocks of adjacent lines so that non-contiguous axes stay cache friendly.
//! * `affine_transform` follows scipy's `NI_GeometricTransform` for mode `"constant"`: a
//!   coordinate outside `[0, n − 1]` on any axis gives `cval = 0`; inside, the B-spline taps
//!   that fall outside the array read mirrored coefficients (`−1 → 1`, `n → n − 2`). The
//!   coordinates are computed in `f64` in scipy's order (from `offset[h]`, then `+ o_l·m[h][l]`
//!   axis by axis), so points on the edge (`0` or `n − 1` exactly) land on the same side as in
//!   scipy. `affine_transform_reversed` computes the coordinate of the mirrored output index
//!   and tests that one, as scipy does for pytme's reversed template;
//!   `affine_transform_reversed_in(AxisOrder::Reversed)` sums it from the last axis, as scipy
//!   does for pytme's transposed (MRC) arrays.

use monomorph_core::{
    AxisOrder, Element, Float, Interpolation, PadMode, Precision, Resample, Result,
};
use ndarray::ArrayD;
use rayon::prelude::*;

use super::filter::LineBlocks;
use super::{data, data_mut};
use crate::Cpu;
use crate::util::{PAR_MIN, SharedMut};

/// Source index along one axis for each destination index; `None` means "zero".
type AxisMap = Vec<Option<usize>>;

/// A run of the last axis: `len` destination elements from `dst` on, copied from `src` on
/// (or zero-filled when `src` is `None`).
#[derive(Clone, Copy)]
struct Run {
    dst: usize,
    src: Option<usize>,
    len: usize,
}

fn runs_of(map: &[Option<usize>]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (d, &s) in map.iter().enumerate() {
        if let Some(last) = runs.last_mut() {
            let extends = match (last.src, s) {
                (None, None) => true,
                (Some(a), Some(b)) => a + last.len == b,
                _ => false,
            };
            if extends {
                last.len += 1;
                continue;
            }
        }
        runs.push(Run {
            dst: d,
            src: s,
            len: 1,
        });
    }
    runs
}

/// `dst[o] = src[map_0[o_0], …, map_{r−1}[o_{r−1}]]`, or zero where any map entry is `None`.
fn remap<T: Element>(
    src: &[T],
    src_shape: &[usize],
    dst: &mut [T],
    dst_shape: &[usize],
    maps: &[AxisMap],
) {
    let r = dst_shape.len();
    if dst.is_empty() {
        return;
    }
    if r == 0 {
        dst[0] = src[0];
        return;
    }
    let row_len = dst_shape[r - 1];
    let mut sstr = vec![1usize; r];
    for k in (0..r - 1).rev() {
        sstr[k] = sstr[k + 1] * src_shape[k + 1];
    }
    let runs = runs_of(&maps[r - 1]);
    let src_row_len = src_shape[r - 1];
    let fill_row = |row: usize, out: &mut [T]| {
        let mut rem = row;
        let mut soff = 0usize;
        for k in (0..r - 1).rev() {
            let i = rem % dst_shape[k];
            rem /= dst_shape[k];
            match maps[k][i] {
                Some(s) => soff += s * sstr[k],
                None => {
                    out.fill(T::default());
                    return;
                }
            }
        }
        let srow = &src[soff..soff + src_row_len];
        for run in &runs {
            let o = &mut out[run.dst..run.dst + run.len];
            match run.src {
                Some(s) => o.copy_from_slice(&srow[s..s + run.len]),
                None => o.fill(T::default()),
            }
        }
    };
    if dst.len() >= PAR_MIN {
        let rows_per_task = (PAR_MIN / row_len.max(1)).max(1);
        dst.par_chunks_mut(row_len * rows_per_task)
            .enumerate()
            .for_each(|(c, chunk)| {
                for (i, out) in chunk.chunks_mut(row_len).enumerate() {
                    fill_row(c * rows_per_task + i, out);
                }
            });
    } else {
        for (i, out) in dst.chunks_mut(row_len).enumerate() {
            fill_row(i, out);
        }
    }
}

/// numpy's `mode="symmetric"` index (scipy's "reflect"): `d c b a | a b c d | d c b a`.
pub(crate) fn symmetric_index(p: isize, n: usize) -> usize {
    let n = n as isize;
    let period = 2 * n;
    let q = p.rem_euclid(period);
    (if q < n { q } else { period - 1 - q }) as usize
}

/// scipy's mirror index for spline taps (`NI_GeometricTransform`): `c b | a b c d | c b`.
fn mirror_index(idx: isize, n: usize) -> usize {
    let n = n as isize;
    if n <= 1 {
        return 0;
    }
    let s2 = 2 * n - 2;
    let mut i = idx;
    if i < 0 {
        i += s2 * (-i / s2);
        i = if i <= 1 - n { i + s2 } else { -i };
    } else if i >= n {
        i -= s2 * (i / s2);
        if i >= n {
            i = s2 - i;
        }
    }
    i as usize
}

// ---------------------------------------------------------------------------------------------
// Spline prefilter

/// The cubic B-spline pole, `sqrt(3) − 2` (scipy's `get_filter_poles`).
const POLE3: f64 = -0.267_949_192_431_122_7;

/// Lanes filtered together when the lines are not adjacent in memory (last axis).
const LANES: usize = 16;

/// Width of a block of adjacent lines on a non-contiguous axis (one contiguous run per row).
const WIDE: usize = 64;

/// scipy's `apply_filter(order=3, mode=mirror)` on `w` interleaved lines of length `n > 1`:
/// element `i` of lane `l` is `c[i * w + l]`.
fn spline_filter_lanes(c: &mut [f64], n: usize, w: usize) {
    let z = POLE3;
    let gain = (1.0 - z) * (1.0 - 1.0 / z);
    for v in c[..n * w].iter_mut() {
        *v *= gain;
    }
    // _init_causal_mirror
    let z_n_1 = z.powi((n - 1) as i32);
    let mut c0: Vec<f64> = (0..w).map(|l| c[l] + z_n_1 * c[(n - 1) * w + l]).collect();
    let mut z_i = z;
    for i in 1..n - 1 {
        let (a, b) = (&c[i * w..(i + 1) * w], &c[(n - 1 - i) * w..(n - i) * w]);
        for l in 0..w {
            c0[l] += z_i * (a[l] + z_n_1 * b[l]);
        }
        z_i *= z;
    }
    let den = 1.0 - z_n_1 * z_n_1;
    for l in 0..w {
        c[l] = c0[l] / den;
    }
    for i in 1..n {
        let (prev, cur) = c.split_at_mut(i * w);
        let prev = &prev[(i - 1) * w..];
        for l in 0..w {
            cur[l] += z * prev[l];
        }
    }
    // _init_anticausal_mirror
    let (a, b) = ((n - 2) * w, (n - 1) * w);
    for l in 0..w {
        c[b + l] = (z * c[a + l] + c[b + l]) * z / (z * z - 1.0);
    }
    for i in (0..n - 1).rev() {
        let (cur, next) = c.split_at_mut((i + 1) * w);
        let cur = &mut cur[i * w..];
        for l in 0..w {
            cur[l] = z * (next[l] - cur[l]);
        }
    }
}

fn spline_prefilter_impl<T: Float>(a: &mut [T], shape: &[usize]) {
    if a.is_empty() {
        return;
    }
    let parallel = a.len() >= PAR_MIN;
    let ptr = SharedMut(a.as_mut_ptr());
    for axis in 0..shape.len() {
        let n = shape[axis];
        if n <= 1 {
            continue;
        }
        let stride: usize = shape[axis + 1..].iter().product();
        let outer: usize = shape[..axis].iter().product();
        if stride >= LANES {
            // blocks of up to WIDE adjacent lines: each row is one contiguous run
            let per_outer = stride.div_ceil(WIDE);
            let run = |buf: &mut Vec<f64>, b: usize| {
                let (o, j0) = (b / per_outer, (b % per_outer) * WIDE);
                let w = WIDE.min(stride - j0);
                let base = o * n * stride + j0;
                buf.clear();
                buf.resize(n * w, 0.0);
                for i in 0..n {
                    // SAFETY: row `i` of this block's lines (in bounds: o < outer, i < n,
                    // j0 + w <= stride); blocks partition the lines, so no other task touches
                    // these elements.
                    let row =
                        unsafe { std::slice::from_raw_parts(ptr.get().add(base + i * stride), w) };
                    for (d, v) in buf[i * w..(i + 1) * w].iter_mut().zip(row) {
                        *d = v.as_f64();
                    }
                }
                spline_filter_lanes(buf, n, w);
                for i in 0..n {
                    // SAFETY: as above.
                    let row = unsafe {
                        std::slice::from_raw_parts_mut(ptr.get().add(base + i * stride), w)
                    };
                    for (d, v) in row.iter_mut().zip(&buf[i * w..(i + 1) * w]) {
                        *d = T::from_f64(*v);
                    }
                }
            };
            let count = outer * per_outer;
            if parallel {
                (0..count)
                    .into_par_iter()
                    .for_each_init(Vec::new, |buf, b| run(buf, b));
            } else {
                let mut buf = Vec::new();
                for b in 0..count {
                    run(&mut buf, b);
                }
            }
            continue;
        }
        // lines not adjacent in memory: LANES lines per block, interleaved in the buffer,
        // gathered and scattered line by line
        let blocks = LineBlocks::new(shape, axis, LANES);
        let run = |buf: &mut Vec<f64>, b: usize| {
            let (bases, nl) = blocks.block(b);
            buf.clear();
            buf.resize(n * LANES, 0.0);
            for (l, &base) in bases.iter().enumerate().take(nl) {
                for i in 0..n {
                    // SAFETY: element `i` of the block's own line `l` (see LineBlocks).
                    buf[i * LANES + l] = unsafe { *ptr.get().add(base + i * stride) }.as_f64();
                }
            }
            spline_filter_lanes(buf, n, LANES);
            for (l, &base) in bases.iter().enumerate().take(nl) {
                for i in 0..n {
                    // SAFETY: as above; written by this task only.
                    unsafe { *ptr.get().add(base + i * stride) = T::from_f64(buf[i * LANES + l]) };
                }
            }
        };
        if parallel {
            (0..blocks.count())
                .into_par_iter()
                .for_each_init(Vec::new, |buf, b| run(buf, b));
        } else {
            let mut buf = Vec::new();
            for b in 0..blocks.count() {
                run(&mut buf, b);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Affine transform

/// Per-axis geometry of the source: mirrored tap offsets (element offsets, already multiplied
/// by the stride) for tap indices `−1 ..= n + 1`, stored at `idx + 1`.
struct AxisTaps {
    n: usize,
    last: f64,
    offsets: Vec<usize>,
}

impl AxisTaps {
    fn new(n: usize, stride: usize) -> Self {
        let offsets = (-1..=(n as isize + 1))
            .map(|i| mirror_index(i, n) * stride)
            .collect();
        AxisTaps {
            n,
            last: (n - 1) as f64,
            offsets,
        }
    }
}

/// One output point: `Some((offsets, weights))` per axis, or `None` outside the source.
#[inline(always)]
fn taps<const K: usize>(cc: f64, ax: &AxisTaps) -> Option<([usize; K], [f64; K])> {
    if !(cc >= 0.0 && cc <= ax.last) {
        return None;
    }
    // 0 <= cc <= n - 1 here, so truncation is scipy's floor (and much cheaper than a libm
    // call on baseline x86-64).
    let fli = cc as usize;
    let fl = fli as f64;
    let x = cc - fl;
    let mut w = [0.0f64; K];
    let mut off = [0usize; K];
    // start index of the taps, + 1 for the table's origin at −1
    let base = if K == 4 {
        // get_spline_interpolation_weights(order=3)
        let y = x;
        let z = 1.0 - x;
        // scipy divides by 6; a multiplication is 1 ulp of f64 away at most and much cheaper
        const SIXTH: f64 = 1.0 / 6.0;
        w[1] = (y * y * (y - 2.0) * 3.0 + 4.0) * SIXTH;
        w[2] = (z * z * (z - 2.0) * 3.0 + 4.0) * SIXTH;
        w[0] = z * z * z * SIXTH;
        let mut w3 = 1.0;
        w3 -= w[0];
        w3 -= w[1];
        w3 -= w[2];
        w[3] = w3;
        fli // start = floor − 1, table origin + 1
    } else {
        w[0] = 1.0 - x;
        w[1] = 1.0 - w[0];
        fli + 1
    };
    debug_assert!(base + K <= ax.n + 3);
    off.copy_from_slice(&ax.offsets[base..base + K]);
    Some((off, w))
}

/// The `K` taps of one row along the last axis, as `f64`; interior taps are contiguous and
/// read as one slice (one bounds check, no table lookups).
#[inline(always)]
fn load_row<T: Float, const K: usize>(src: &[T], row: usize, off: &[usize; K]) -> [f64; K] {
    let mut p = [0.0f64; K];
    if off[K - 1] == off[0] + K - 1 {
        let s = &src[row + off[0]..row + off[0] + K];
        for c in 0..K {
            p[c] = s[c].as_f64();
        }
    } else {
        for c in 0..K {
            p[c] = src[row + off[c]].as_f64();
        }
    }
    p
}

/// The tensor-product spline sum `Σ w₀[a]·w₁[b]·w₂[c]·src[…]`, accumulated with the taps of
/// the last axis as vector lanes (the last-axis weights are applied once, at the end). The
/// summation order differs from scipy's point-by-point loop only at `f64` round-off.
#[inline(always)]
fn eval<T: Float, const D: usize, const K: usize>(
    src: &[T],
    off: &[[usize; K]; D],
    w: &[[f64; K]; D],
) -> f64 {
    let mut acc = [0.0f64; K];
    match D {
        1 => acc = load_row(src, 0, &off[0]),
        2 => {
            for a in 0..K {
                let p = load_row(src, off[0][a], &off[1]);
                for c in 0..K {
                    acc[c] += w[0][a] * p[c];
                }
            }
        }
        _ => {
            for a in 0..K {
                let mut acc_b = [0.0f64; K];
                for b in 0..K {
                    let p = load_row(src, off[0][a] + off[1][b], &off[2]);
                    for c in 0..K {
                        acc_b[c] += w[1][b] * p[c];
                    }
                }
                for c in 0..K {
                    acc[c] += w[0][a] * acc_b[c];
                }
            }
        }
    }
    let last = &w[D - 1];
    let mut t = 0.0;
    for c in 0..K {
        t += last[c] * acc[c];
    }
    t
}

fn affine_impl<T: Float, const D: usize, const K: usize>(
    src: &[T],
    ishape: &[usize],
    dst: &mut [T],
    oshape: &[usize],
    matrix: &[f64],
    shift: &[f64],
    mode: Mode,
) {
    let reversed = mode != Mode::Direct;
    let backward = mode == Mode::ReversedBackward;
    let mut istr = [1usize; D];
    for k in (0..D - 1).rev() {
        istr[k] = istr[k + 1] * ishape[k + 1];
    }
    let axes: Vec<AxisTaps> = (0..D).map(|h| AxisTaps::new(ishape[h], istr[h])).collect();
    let mut m = [[0.0f64; D]; D];
    for h in 0..D {
        for l in 0..D {
            m[h][l] = matrix[h * D + l];
        }
    }
    let row_len = oshape[D - 1];
    let rows = dst.len() / row_len;
    let do_row = |row: usize, out: &mut [T]| {
        // output coordinates of this row (all axes but the last), mirrored when reversed
        let mut o = [0usize; D];
        let mut rem = row;
        for k in (0..D - 1).rev() {
            o[k] = rem % oshape[k];
            rem /= oshape[k];
            if reversed {
                o[k] = oshape[k] - 1 - o[k];
            }
        }
        // scipy starts from the shift and adds o_l·m[h][l] in axis order; the first D − 1
        // terms are the same for the whole row.
        let mut partial = [0.0f64; D];
        for h in 0..D {
            let mut acc = shift[h];
            for l in 0..D - 1 {
                acc += o[l] as f64 * m[h][l];
            }
            partial[h] = acc;
        }
        let mut off = [[0usize; K]; D];
        let mut w = [[0.0f64; K]; D];
        'points: for (j, out) in out.iter_mut().enumerate() {
            let jf = if reversed { row_len - 1 - j } else { j } as f64;
            for h in 0..D {
                let mut cc = if backward {
                    // pytme's axis order (it holds the transpose): the last axis first.
                    let mut acc = shift[h] + jf * m[h][D - 1];
                    for l in (0..D - 1).rev() {
                        acc += o[l] as f64 * m[h][l];
                    }
                    acc
                } else {
                    partial[h] + jf * m[h][D - 1]
                };
                if reversed {
                    // scipy's in/out test on the reversed array's coordinate, then the same
                    // point in `src` (exactly inside [0, n − 1] when y is).
                    if !(cc >= 0.0 && cc <= axes[h].last) {
                        *out = T::zero();
                        continue 'points;
                    }
                    cc = axes[h].last - cc;
                }
                match taps::<K>(cc, &axes[h]) {
                    Some((oo, ww)) => {
                        off[h] = oo;
                        w[h] = ww;
                    }
                    None => {
                        *out = T::zero();
                        continue 'points;
                    }
                }
            }
            *out = T::from_f64(eval::<T, D, K>(src, &off, &w));
        }
    };
    if dst.len() >= PAR_MIN / 4 && rows > 1 {
        let tasks = rayon::current_num_threads() * 8;
        let rows_per_task = rows.div_ceil(tasks).max(1);
        dst.par_chunks_mut(row_len * rows_per_task)
            .enumerate()
            .for_each(|(c, chunk)| {
                for (i, out) in chunk.chunks_mut(row_len).enumerate() {
                    do_row(c * rows_per_task + i, out);
                }
            });
    } else {
        for (i, out) in dst.chunks_mut(row_len).enumerate() {
            do_row(i, out);
        }
    }
}

impl<P: Precision> Resample for Cpu<P> {
    fn pad<T: Float>(
        &self,
        src: &ArrayD<T>,
        before: &[usize],
        mode: PadMode,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            let (ss, ds) = (src.shape().to_vec(), dst.shape().to_vec());
            monomorph_core::check_pad(&ss, before, mode, &ds)?;
            let maps: Vec<AxisMap> = (0..ss.len())
                .map(|k| {
                    (0..ds[k])
                        .map(|o| {
                            let p = o as isize - before[k] as isize;
                            match mode {
                                PadMode::Zero => {
                                    (p >= 0 && (p as usize) < ss[k]).then_some(p as usize)
                                }
                                PadMode::Symmetric => Some(symmetric_index(p, ss[k])),
                            }
                        })
                        .collect()
                })
                .collect();
            let s = data("pad: src", src)?;
            remap(s, &ss, data_mut("pad: dst", dst)?, &ds, &maps);
            Ok(())
        })
    }

    fn crop<T: Element>(
        &self,
        src: &ArrayD<T>,
        offset: &[usize],
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            let (ss, ds) = (src.shape().to_vec(), dst.shape().to_vec());
            monomorph_core::check_crop(&ss, offset, &ds)?;
            let maps: Vec<AxisMap> = (0..ss.len())
                .map(|k| (0..ds[k]).map(|o| Some(o + offset[k])).collect())
                .collect();
            let s = data("crop: src", src)?;
            remap(s, &ss, data_mut("crop: dst", dst)?, &ds, &maps);
            Ok(())
        })
    }

    fn flip<T: Element>(&self, src: &ArrayD<T>, axes: &[usize], dst: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            let (ss, ds) = (src.shape().to_vec(), dst.shape().to_vec());
            let flipped = monomorph_core::check_flip(&ss, axes, &ds)?;
            let maps: Vec<AxisMap> = (0..ss.len())
                .map(|k| {
                    (0..ds[k])
                        .map(|o| Some(if flipped[k] { ss[k] - 1 - o } else { o }))
                        .collect()
                })
                .collect();
            let s = data("flip: src", src)?;
            remap(s, &ss, data_mut("flip: dst", dst)?, &ds, &maps);
            Ok(())
        })
    }

    fn roll<T: Element>(
        &self,
        src: &ArrayD<T>,
        shifts: &[isize],
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            let (ss, ds) = (src.shape().to_vec(), dst.shape().to_vec());
            monomorph_core::check_roll(&ss, shifts, &ds)?;
            let maps: Vec<AxisMap> = (0..ss.len())
                .map(|k| {
                    let n = ss[k] as isize;
                    (0..ds[k])
                        .map(|o| {
                            Some((o as isize - shifts[k] % n.max(1)).rem_euclid(n.max(1)) as usize)
                        })
                        .collect()
                })
                .collect();
            let s = data("roll: src", src)?;
            remap(s, &ss, data_mut("roll: dst", dst)?, &ds, &maps);
            Ok(())
        })
    }

    fn spline_prefilter<T: Float>(&self, a: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            let shape = a.shape().to_vec();
            spline_prefilter_impl(data_mut("spline_prefilter: a", a)?, &shape);
            Ok(())
        })
    }

    fn affine_transform<T: Float>(
        &self,
        src: &ArrayD<T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| affine(src, matrix, offset, interp, dst, Mode::Direct))
    }

    fn affine_transform_reversed_in<T: Float>(
        &self,
        src: &ArrayD<T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        frame: AxisOrder,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        let mode = match frame {
            AxisOrder::Pytme => Mode::Reversed,
            AxisOrder::Reversed => Mode::ReversedBackward,
        };
        self.install(|| affine(src, matrix, offset, interp, dst, mode))
    }
}

/// Which transform [`affine_impl`] computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `affine_transform`.
    Direct,
    /// `affine_transform_reversed`: the mirrored output index's coordinate, summed in axis order.
    Reversed,
    /// `affine_transform_reversed_in(AxisOrder::Reversed)`: the same, summed from the last axis.
    ReversedBackward,
}

/// `affine_transform` (or its reversed form) on checked arguments, dispatched on rank and order.
fn affine<T: Float>(
    src: &ArrayD<T>,
    matrix: &[f64],
    offset: &[f64],
    interp: Interpolation,
    dst: &mut ArrayD<T>,
    rev: Mode,
) -> Result<()> {
    let (ss, ds) = (src.shape().to_vec(), dst.shape().to_vec());
    if !monomorph_core::check_affine_transform(&ss, &ds, matrix, offset)? {
        return Ok(());
    }
    let s = data("affine_transform: src", src)?;
    let o = data_mut("affine_transform: dst", dst)?;
    let (m, off) = (matrix, offset);
    match (ss.len(), interp) {
        (1, Interpolation::Linear) => affine_impl::<T, 1, 2>(s, &ss, o, &ds, m, off, rev),
        (1, Interpolation::Cubic) => affine_impl::<T, 1, 4>(s, &ss, o, &ds, m, off, rev),
        (2, Interpolation::Linear) => affine_impl::<T, 2, 2>(s, &ss, o, &ds, m, off, rev),
        (2, Interpolation::Cubic) => affine_impl::<T, 2, 4>(s, &ss, o, &ds, m, off, rev),
        (_, Interpolation::Linear) => affine_impl::<T, 3, 2>(s, &ss, o, &ds, m, off, rev),
        (_, Interpolation::Cubic) => affine_impl::<T, 3, 4>(s, &ss, o, &ds, m, off, rev),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_and_symmetric_indices() {
        assert_eq!(mirror_index(-1, 5), 1);
        assert_eq!(mirror_index(5, 5), 3);
        assert_eq!(mirror_index(6, 5), 2);
        assert_eq!(mirror_index(-1, 1), 0);
        assert_eq!(mirror_index(-1, 2), 1);
        assert_eq!(mirror_index(2, 2), 0);
        assert_eq!(symmetric_index(-1, 4), 0);
        assert_eq!(symmetric_index(-5, 4), 3);
        assert_eq!(symmetric_index(4, 4), 3);
        assert_eq!(symmetric_index(9, 4), 1);
    }
}
