//! scipy-compatible neighbourhood filters: separable max filter (van Herk / Gil-Werman), max
//! filter with an arbitrary footprint, Laplacian, and peak-candidate compaction.
//!
//! Every pass along an axis works on *blocks of adjacent lines*: the lines of a block are
//! gathered into an interleaved buffer (element `i` of lane `l` at `i * LANES + l`), filtered
//! with the lanes as the inner (vectorised) loop, and scattered back. For a non-contiguous axis
//! the lanes of a block are neighbours in memory, so each gathered row is one cache line rather
//! than `LANES` scattered loads; blocks run in parallel on rayon's pool.
//!
//! # NaN
//! The max filter compares with `>` only, so a NaN never wins a comparison against a number
//! that came before it in the van Herk sweep and always survives one against a number that
//! came after it: where a NaN is within reach of a window the output may be NaN or the
//! largest number, depending on its position (scipy's own result is order dependent too). It
//! never panics, and windows that contain no NaN are exact.

use monomorph_core::error::fmt_shape;
use monomorph_core::{BorderMode, Error, Filter, Float, Precision, Real, Result};
use ndarray::ArrayD;
use rayon::prelude::*;

use super::{data, data_mut};
use crate::Cpu;
use crate::util::PAR_MIN;

/// A raw pointer that may cross threads; users guarantee disjoint access.
#[derive(Clone, Copy)]
pub(super) struct SendPtr<T>(pub(super) *mut T);
// SAFETY: only used to hand disjoint sets of elements of one slice to parallel tasks (see
// `LineBlocks`); the pointee type is `Send`.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above; tasks never touch the same element.
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole `Send` wrapper).
    #[inline(always)]
    pub(super) fn get(self) -> *mut T {
        self.0
    }
}

/// The most lanes a block may have.
pub(super) const MAX_LANES: usize = 64;

/// The lines of a row-major array along one axis, grouped in blocks of `lanes` consecutive
/// lines. Line `l` starts at `(l / stride) * len * stride + l % stride` and its element `i`
/// is `stride` further per step; blocks partition the lines and lines partition the elements.
pub(super) struct LineBlocks {
    /// Elements per line (the axis length).
    pub(super) len: usize,
    /// Distance between consecutive elements of a line.
    pub(super) stride: usize,
    lines: usize,
    lanes: usize,
}

impl LineBlocks {
    pub(super) fn new(shape: &[usize], axis: usize, lanes: usize) -> Self {
        let len = shape[axis];
        let stride: usize = shape[axis + 1..].iter().product();
        let outer: usize = shape[..axis].iter().product();
        LineBlocks {
            len,
            stride,
            lines: outer * stride,
            lanes: lanes.min(MAX_LANES),
        }
    }

    /// Number of blocks.
    pub(super) fn count(&self) -> usize {
        self.lines.div_ceil(self.lanes)
    }

    /// Start offsets of the lines of block `b` and how many lines it has.
    pub(super) fn block(&self, b: usize) -> ([usize; MAX_LANES], usize) {
        let l0 = b * self.lanes;
        let nl = self.lanes.min(self.lines - l0);
        let mut bases = [0usize; MAX_LANES];
        for (k, base) in bases.iter_mut().enumerate().take(nl) {
            let l = l0 + k;
            *base = (l / self.stride) * self.len * self.stride + l % self.stride;
        }
        (bases, nl)
    }
}

/// Where a filter reads position `p` of an axis of length `n`: `Some(index)` or `None` for
/// the constant value (scipy's `NI_ExtendLine` conventions; `n > 0`).
pub(crate) fn border_index(p: isize, n: usize, mode: BorderMode) -> Option<usize> {
    let ni = n as isize;
    if (0..ni).contains(&p) {
        return Some(p as usize);
    }
    Some(match mode {
        BorderMode::Constant(_) => return None,
        BorderMode::Nearest => p.clamp(0, ni - 1) as usize,
        BorderMode::Reflect => {
            let q = p.rem_euclid(2 * ni);
            (if q < ni { q } else { 2 * ni - 1 - q }) as usize
        }
        BorderMode::Mirror => {
            if ni == 1 {
                0
            } else {
                let period = 2 * ni - 2;
                let q = p.rem_euclid(period);
                (if q < ni { q } else { period - q }) as usize
            }
        }
        BorderMode::Wrap => p.rem_euclid(ni) as usize,
    })
}

fn cval_of<T: Real>(mode: BorderMode) -> T {
    match mode {
        BorderMode::Constant(c) => T::from_f64(c),
        _ => T::zero(),
    }
}

fn check_mode(mode: BorderMode) -> Result<()> {
    match mode {
        BorderMode::Constant(c) if c.is_nan() => Err(Error::invalid(
            "mode",
            "BorderMode::Constant(cval) needs a number, got NaN",
        )),
        _ => Ok(()),
    }
}

#[inline(always)]
fn vmax<T: Real>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

/// Lanes of a max-filter block whose lines are not adjacent in memory (last axis, tiny
/// strides): element `i` of lane `l` at `i * MF_LANES + l` in the block buffers.
const MF_LANES: usize = 32;

/// Width (elements) of a block of adjacent lines on a non-contiguous axis: each gathered row
/// is one contiguous run of this many elements.
const MF_WIDE: usize = 128;

/// Van Herk / Gil-Werman on `w`-wide rows. Forward: `ext` holds the extended rows (already
/// gathered, row `j` = position `j − size/2`), `g` gets the running maximum from the start of
/// each segment of `size` rows. Backward: `ext` becomes the running maximum to the end of each
/// segment (`h`), and as soon as `h[i]` is known, `emit(i, max(h[i], g[i + size − 1]))` gives
/// output row `i` (window `[i, i + size)` of the extended line).
#[inline(always)]
fn van_herk_rows<T: Real>(
    ext: &mut [T],
    g: &mut [T],
    w: usize,
    ext_len: usize,
    size: usize,
    n: usize,
    mut emit: impl FnMut(usize, &[T], &[T]),
) {
    for j in 0..ext_len {
        let (gp, gc) = g.split_at_mut(j * w);
        let gc = &mut gc[..w];
        let e = &ext[j * w..(j + 1) * w];
        if j.is_multiple_of(size) {
            gc.copy_from_slice(e);
        } else {
            let gp = &gp[(j - 1) * w..];
            for l in 0..w {
                gc[l] = vmax(gp[l], e[l]);
            }
        }
    }
    let mut j = ext_len;
    while j > 0 {
        j -= 1;
        if !(j + 1).is_multiple_of(size) && j + 1 < ext_len {
            let (hc, hn) = ext.split_at_mut((j + 1) * w);
            let hc = &mut hc[j * w..];
            let hn = &hn[..w];
            for l in 0..w {
                hc[l] = vmax(hc[l], hn[l]);
            }
        }
        if j < n {
            emit(
                j,
                &ext[j * w..(j + 1) * w],
                &g[(j + size - 1) * w..(j + size) * w],
            );
        }
    }
}

/// One separable max-filter pass of window `size` along `axis`, reading `input` (or `out`
/// itself when `None`) and writing `out`; on rayon's pool when `parallel` and large.
fn max_pass<T: Real>(
    input: Option<&[T]>,
    out: &mut [T],
    shape: &[usize],
    axis: usize,
    size: usize,
    mode: BorderMode,
    parallel: bool,
) {
    let n = shape[axis];
    let stride: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let left = (size / 2) as isize;
    let ext_len = n + size - 1;
    let table: Vec<Option<usize>> = (0..ext_len)
        .map(|j| border_index(j as isize - left, n, mode).map(|i| i * stride))
        .collect();
    let cval = cval_of::<T>(mode);
    let ptr = SendPtr(out.as_mut_ptr());
    let total = out.len();
    let inp = input.map(|s| SendPtr(s.as_ptr() as *mut T));
    // the source of the pass: the input, or `out` itself (in place)
    let src = inp.unwrap_or(ptr);
    let parallel = parallel && total >= PAR_MIN;

    if stride >= MF_LANES {
        // Blocks of up to MF_WIDE adjacent lines: rows are contiguous runs.
        let per_outer = stride.div_ceil(MF_WIDE);
        let run = |bufs: &mut (Vec<T>, Vec<T>), b: usize| {
            let (o, j0) = (b / per_outer, (b % per_outer) * MF_WIDE);
            let w = MF_WIDE.min(stride - j0);
            let base = o * n * stride + j0;
            let (ext, g) = bufs;
            ext.clear();
            ext.resize(ext_len * w, cval);
            g.clear();
            g.resize(ext_len * w, cval);
            for (j, t) in table.iter().enumerate() {
                if let Some(off) = t {
                    // SAFETY: `base + off + w <= total` (line `base..` of the block, element
                    // `off / stride < n`); the block reads only its own lines, which no other
                    // task writes (blocks partition the lines).
                    let row = unsafe { std::slice::from_raw_parts(src.get().add(base + off), w) };
                    ext[j * w..(j + 1) * w].copy_from_slice(row);
                }
            }
            van_herk_rows(ext, g, w, ext_len, size, n, |i, h, gg| {
                // SAFETY: output row `i` of this block's lines: in bounds, written by this
                // task only; it is no longer read (the block was gathered above).
                let o =
                    unsafe { std::slice::from_raw_parts_mut(ptr.get().add(base + i * stride), w) };
                for l in 0..w {
                    o[l] = vmax(h[l], gg[l]);
                }
            });
        };
        let count = outer * per_outer;
        if parallel {
            (0..count)
                .into_par_iter()
                .for_each_init(|| (Vec::new(), Vec::new()), |bufs, b| run(bufs, b));
        } else {
            let mut bufs = (Vec::new(), Vec::new());
            for b in 0..count {
                run(&mut bufs, b);
            }
        }
        return;
    }

    // Lines not adjacent in memory: MF_LANES lines per block, interleaved in the buffers
    // (gathered and scattered line by line, so each line is read and written sequentially).
    let blocks = LineBlocks::new(shape, axis, MF_LANES);
    let run = |bufs: &mut (Vec<T>, Vec<T>, Vec<T>), b: usize| {
        let (bases, nl) = blocks.block(b);
        let (ext, g, res) = bufs;
        ext.clear();
        ext.resize(ext_len * MF_LANES, cval);
        g.clear();
        g.resize(ext_len * MF_LANES, cval);
        res.clear();
        res.resize(n * MF_LANES, cval);
        for (l, &base) in bases.iter().enumerate().take(nl) {
            for (j, t) in table.iter().enumerate() {
                if let Some(off) = t {
                    // SAFETY: `base + off < total` (see LineBlocks); in place, the block reads
                    // only its own lines.
                    ext[j * MF_LANES + l] = unsafe { *src.get().add(base + off) };
                }
            }
        }
        van_herk_rows(ext, g, MF_LANES, ext_len, size, n, |i, h, gg| {
            let r = &mut res[i * MF_LANES..(i + 1) * MF_LANES];
            for l in 0..MF_LANES {
                r[l] = vmax(h[l], gg[l]);
            }
        });
        for (l, &base) in bases.iter().enumerate().take(nl) {
            for i in 0..n {
                // SAFETY: element `i` of the block's own line `l`, in bounds, written by this
                // task only.
                unsafe { *ptr.get().add(base + i * stride) = res[i * MF_LANES + l] };
            }
        }
    };
    if parallel {
        (0..blocks.count()).into_par_iter().for_each_init(
            || (Vec::new(), Vec::new(), Vec::new()),
            |bufs, b| run(bufs, b),
        );
    } else {
        let mut bufs = (Vec::new(), Vec::new(), Vec::new());
        for b in 0..blocks.count() {
            run(&mut bufs, b);
        }
    }
}

fn check_same(what: &str, a: &[usize], b: &[usize]) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::shape(what, fmt_shape(a), fmt_shape(b)))
    }
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

fn footprint_impl<T: Real>(
    src: &[T],
    out: &mut [T],
    shape: &[usize],
    fp: &[bool],
    fshape: &[usize],
    mode: BorderMode,
) {
    let r = shape.len();
    let st = strides(shape);
    let fst = strides(fshape);
    // per axis: table[i + f] = offset of position i + f − centre, for i < n, f < fshape
    let tables: Vec<Vec<Option<usize>>> = (0..r)
        .map(|k| {
            let c = (fshape[k] / 2) as isize;
            (0..shape[k] + fshape[k])
                .map(|q| border_index(q as isize - c, shape[k], mode).map(|i| i * st[k]))
                .collect()
        })
        .collect();
    // the true footprint entries as per-axis coordinates
    let entries: Vec<Vec<usize>> = fp
        .iter()
        .enumerate()
        .filter(|(_, v)| **v)
        .map(|(flat, _)| (0..r).map(|k| (flat / fst[k]) % fshape[k]).collect())
        .collect();
    let cval = cval_of::<T>(mode);
    let row_len = shape[r - 1];
    let do_row = |row: usize, o: &mut [T]| {
        let mut idx = vec![0usize; r];
        let mut rem = row;
        for k in (0..r - 1).rev() {
            idx[k] = rem % shape[k];
            rem /= shape[k];
        }
        for (j, o) in o.iter_mut().enumerate() {
            idx[r - 1] = j;
            let mut best: Option<T> = None;
            for e in &entries {
                let mut off = 0usize;
                let mut inside = true;
                for k in 0..r {
                    match tables[k][idx[k] + e[k]] {
                        Some(v) => off += v,
                        None => {
                            inside = false;
                            break;
                        }
                    }
                }
                let v = if inside { src[off] } else { cval };
                best = Some(match best {
                    None => v,
                    Some(b) => vmax(b, v),
                });
            }
            *o = best.unwrap_or(cval);
        }
    };
    if out.len() >= PAR_MIN / 8 {
        out.par_chunks_mut(row_len)
            .enumerate()
            .for_each(|(i, o)| do_row(i, o));
    } else {
        for (i, o) in out.chunks_mut(row_len).enumerate() {
            do_row(i, o);
        }
    }
}

/// `out (+)= [1, −2, 1]` along `axis`, computed as scipy's `correlate1d` does (in `f64`:
/// `x·(−2) + (x₋₁ + x₊₁)·1`), rounded to `T`; `first` stores, otherwise adds in `T`.
fn laplace_axis<T: Float>(
    src: &[T],
    out: &mut [T],
    shape: &[usize],
    axis: usize,
    mode: BorderMode,
    first: bool,
) {
    let n = shape[axis];
    let stride: usize = shape[axis + 1..].iter().product();
    let cval = match mode {
        BorderMode::Constant(c) => c,
        _ => 0.0,
    };
    let lo = border_index(-1, n, mode);
    let hi = border_index(n as isize, n, mode);
    let second = |x0: T, xm: f64, xp: f64| -> f64 { x0.as_f64() * -2.0 + (xm + xp) };
    let store = |o: &mut T, d: f64| {
        if first {
            *o = T::from_f64(d);
        } else {
            *o += T::from_f64(d);
        }
    };
    // neighbour index along the axis (within the same line), or None for cval
    let nb = |i: usize, delta: isize| -> Option<usize> {
        let p = i as isize + delta;
        if p < 0 {
            lo
        } else if p >= n as isize {
            hi
        } else {
            Some(p as usize)
        }
    };
    if stride == 1 {
        // contiguous lines
        let line = |(line, o): (&[T], &mut [T])| {
            for i in 0..n {
                let xm = nb(i, -1).map_or(cval, |k| line[k].as_f64());
                let xp = nb(i, 1).map_or(cval, |k| line[k].as_f64());
                store(&mut o[i], second(line[i], xm, xp));
            }
        };
        if out.len() >= PAR_MIN {
            src.par_chunks(n).zip(out.par_chunks_mut(n)).for_each(line);
        } else {
            src.chunks(n).zip(out.chunks_mut(n)).for_each(line);
        }
    } else {
        // rows of `stride` elements; row r is (outer, i) = (r / n, r % n)
        let row = |(r, o): (usize, &mut [T])| {
            let (outer, i) = (r / n, r % n);
            let base = outer * n * stride;
            let cur = &src[base + i * stride..base + (i + 1) * stride];
            let rm = nb(i, -1).map(|k| &src[base + k * stride..base + (k + 1) * stride]);
            let rp = nb(i, 1).map(|k| &src[base + k * stride..base + (k + 1) * stride]);
            for j in 0..stride {
                let xm = rm.map_or(cval, |s| s[j].as_f64());
                let xp = rp.map_or(cval, |s| s[j].as_f64());
                store(&mut o[j], second(cur[j], xm, xp));
            }
        };
        if out.len() >= PAR_MIN {
            out.par_chunks_mut(stride).enumerate().for_each(row);
        } else {
            out.chunks_mut(stride).enumerate().for_each(row);
        }
    }
}

impl<P: Precision> Filter for Cpu<P> {
    fn max_filter<T: Real>(
        &self,
        src: &ArrayD<T>,
        size: &[usize],
        mode: BorderMode,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        let shape = src.shape().to_vec();
        check_same("max_filter: dst", &shape, dst.shape())?;
        check_mode(mode)?;
        if size.len() != shape.len() {
            return Err(Error::shape(
                "max_filter: size",
                format!(
                    "{} entries (one per axis of {})",
                    shape.len(),
                    fmt_shape(&shape)
                ),
                format!("{} entries", size.len()),
            ));
        }
        if let Some(k) = size.iter().position(|&s| s == 0) {
            return Err(Error::invalid(
                "max_filter: size",
                format!("window size on axis {k} is 0; sizes must be >= 1"),
            ));
        }
        let s = data("max_filter: src", src)?;
        let o = data_mut("max_filter: dst", dst)?;
        if o.is_empty() {
            return Ok(());
        }
        let r = shape.len();
        let planes: usize = shape[..r.saturating_sub(2)].iter().product();
        let mut first = true;
        let mut done = vec![false; r];
        if r >= 3
            && planes >= 2 * rayon::current_num_threads()
            && (size[r - 1] > 1 || size[r - 2] > 1)
        {
            // The last two axes plane by plane (each plane stays in cache between its two
            // passes), planes in parallel; then the leading axes over the whole volume.
            let pshape = [shape[r - 2], shape[r - 1]];
            let plane = pshape[0] * pshape[1];
            o.par_chunks_mut(plane)
                .zip(s.par_chunks(plane))
                .for_each(|(op, sp)| {
                    let mut pfirst = true;
                    for (k, ax) in [(r - 1, 1), (r - 2, 0)] {
                        if size[k] > 1 {
                            max_pass(pfirst.then_some(sp), op, &pshape, ax, size[k], mode, false);
                            pfirst = false;
                        }
                    }
                });
            first = false;
            done[r - 1] = true;
            done[r - 2] = true;
        }
        for axis in 0..r {
            if size[axis] <= 1 || done[axis] {
                continue;
            }
            max_pass(first.then_some(s), o, &shape, axis, size[axis], mode, true);
            first = false;
        }
        if first {
            o.copy_from_slice(s);
        }
        Ok(())
    }

    fn max_filter_footprint<T: Real>(
        &self,
        src: &ArrayD<T>,
        footprint: &[bool],
        footprint_shape: &[usize],
        mode: BorderMode,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        let shape = src.shape().to_vec();
        check_same("max_filter_footprint: dst", &shape, dst.shape())?;
        check_mode(mode)?;
        if footprint_shape.len() != shape.len() {
            return Err(Error::shape(
                "max_filter_footprint: footprint_shape",
                format!("{} axes like src {}", shape.len(), fmt_shape(&shape)),
                format!(
                    "{} axes {}",
                    footprint_shape.len(),
                    fmt_shape(footprint_shape)
                ),
            ));
        }
        let flen: usize = footprint_shape.iter().product();
        if footprint.len() != flen {
            return Err(Error::shape(
                "max_filter_footprint: footprint",
                format!("{flen} entries for shape {}", fmt_shape(footprint_shape)),
                format!("{} entries", footprint.len()),
            ));
        }
        if !footprint.iter().any(|&v| v) {
            return Err(Error::invalid(
                "max_filter_footprint: footprint",
                "has no true entry (an empty neighbourhood)",
            ));
        }
        let s = data("max_filter_footprint: src", src)?;
        let o = data_mut("max_filter_footprint: dst", dst)?;
        if o.is_empty() {
            return Ok(());
        }
        if shape.is_empty() {
            o.copy_from_slice(s);
            return Ok(());
        }
        footprint_impl(s, o, &shape, footprint, footprint_shape, mode);
        Ok(())
    }

    fn laplace<T: Float>(
        &self,
        src: &ArrayD<T>,
        mode: BorderMode,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        let shape = src.shape().to_vec();
        check_same("laplace: dst", &shape, dst.shape())?;
        check_mode(mode)?;
        let s = data("laplace: src", src)?;
        let o = data_mut("laplace: dst", dst)?;
        if o.is_empty() {
            return Ok(());
        }
        if shape.is_empty() {
            o.copy_from_slice(s);
            return Ok(());
        }
        for axis in 0..shape.len() {
            laplace_axis(s, o, &shape, axis, mode, axis == 0);
        }
        Ok(())
    }

    fn peak_candidates<T: Real>(
        &self,
        src: &ArrayD<T>,
        filtered: &ArrayD<T>,
        threshold: T,
        border: &[usize],
    ) -> Result<Vec<(usize, T)>> {
        let shape = src.shape().to_vec();
        check_same("peak_candidates: filtered", &shape, filtered.shape())?;
        if border.len() != shape.len() {
            return Err(Error::shape(
                "peak_candidates: border",
                format!(
                    "{} entries (one per axis of {})",
                    shape.len(),
                    fmt_shape(&shape)
                ),
                format!("{} entries", border.len()),
            ));
        }
        let s = data("peak_candidates: src", src)?;
        let f = data("peak_candidates: filtered", filtered)?;
        if s.is_empty() {
            return Ok(Vec::new());
        }
        let r = shape.len();
        if r == 0 {
            let ok = s[0] == f[0] && s[0] > threshold;
            return Ok(if ok { vec![(0, s[0])] } else { Vec::new() });
        }
        // the index range kept on each axis
        let keep: Vec<(usize, usize)> = (0..r)
            .map(|k| (border[k], shape[k].saturating_sub(border[k])))
            .collect();
        if keep.iter().any(|&(a, b)| a >= b) {
            return Ok(Vec::new());
        }
        let row_len = shape[r - 1];
        let rows = s.len() / row_len;
        let (j0, j1) = keep[r - 1];
        let scan_row = |row: usize, found: &mut Vec<(usize, T)>| {
            let mut rem = row;
            for k in (0..r - 1).rev() {
                let i = rem % shape[k];
                rem /= shape[k];
                if i < keep[k].0 || i >= keep[k].1 {
                    return;
                }
            }
            let base = row * row_len;
            for j in j0..j1 {
                let v = s[base + j];
                if v == f[base + j] && v > threshold {
                    found.push((base + j, v));
                }
            }
        };
        let found = if s.len() >= PAR_MIN {
            let rows_per_task = (PAR_MIN / row_len).max(1);
            let parts: Vec<Vec<(usize, T)>> = (0..rows.div_ceil(rows_per_task))
                .into_par_iter()
                .map(|c| {
                    let mut v = Vec::new();
                    for row in c * rows_per_task..((c + 1) * rows_per_task).min(rows) {
                        scan_row(row, &mut v);
                    }
                    v
                })
                .collect();
            parts.concat()
        } else {
            let mut v = Vec::new();
            for row in 0..rows {
                scan_row(row, &mut v);
            }
            v
        };
        Ok(found)
    }
}
