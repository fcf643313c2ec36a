//! scipy-compatible neighbourhood filters: separable max filter (van Herk / Gil-Werman), max
//! filter with an arbitrary footprint, Laplacian, and peak-candidate compaction.
//!
//! Every pass of the max filter along an axis works on *blocks of lines*, filtered with the
//! lines as the inner (vectorised) dimension, blocks in parallel on rayon's pool:
//! - on a non-contiguous axis the lines of a block are neighbours in memory, so each row of
//!   the block (one position along the axis) is one contiguous run, read where it is;
//! - on the contiguous last axis, blocks of lines are transposed (16×16 AVX-512 tiles for
//!   4-byte elements, 8×8 AVX or portable tiles otherwise) into a buffer where they are the
//!   inner dimension, filtered there, and transposed back;
//! - only small trailing axes (`1 < stride < 32`) gather their lines element by element.
//!
//! For a volume, the last two axes are filtered plane by plane (a plane stays in L2 between
//! its two passes), then each leading axis in one pass over the whole array. A single sweep
//! over the volume for the leading axis as well (two segments of planes kept) was tried and
//! was slower on the 256³ bench: its segment buffers (2 × size planes) outgrow L2.
//!
//! # NaN
//! The max filter compares with `>` only, so a NaN never wins a comparison against a number
//! that came before it in the van Herk sweep and always survives one against a number that
//! came after it: where a NaN is within reach of a window the output may be NaN or the
//! largest number, depending on its position (scipy's own result is order dependent too). It
//! never panics, and windows that contain no NaN are exact.

use monomorph_core::{BorderMode, Filter, Float, Precision, Real, Result};
use ndarray::ArrayD;
use rayon::prelude::*;
use std::sync::{Mutex, PoisonError};

use super::{data, data_mut};
use crate::Cpu;
use crate::transpose;
use crate::util::{PAR_MIN, SharedMut, grow, strides};

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

#[inline(always)]
fn vmax<T: Real>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

/// Lanes of a max-filter block whose lines are neither contiguous nor far apart (`1 < stride <
/// MF_LANES`, small trailing axes): element `i` of lane `l` at `i * MF_LANES + l` in the block
/// buffers.
const MF_LANES: usize = 32;

/// Width (elements) of a block of adjacent lines on a non-contiguous axis (`stride >=
/// MF_LANES`): each row of the block is one contiguous run of up to this many elements.
const MF_WIDE: usize = 256;

/// Elements of the transposed block of the contiguous-axis pass (lines × line length): 256 KiB
/// of `f32`, so the block, its running maxima and the plane being filtered stay in L2.
const MF_TRANSPOSED: usize = 1 << 16;

/// Van Herk / Gil-Werman on `w`-wide rows (the slow path of [`max_pass`], lines gathered
/// element by element). Forward: `ext` holds the extended rows (already gathered, row `j` =
/// position `j − size/2`), `g` gets the running maximum from the start of each segment of
/// `size` rows. Backward: `ext` becomes the running maximum to the end of each segment (`h`),
/// and as soon as `h[i]` is known, `emit(i, max(h[i], g[i + size − 1]))` gives output row `i`
/// (window `[i, i + size)` of the extended line).
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

/// The reusable buffers of one task of a max-filter pass (grown, never shrunk or refilled:
/// every element a pass reads it has written first).
pub(super) struct MfScratch<T> {
    /// Running maxima from the start of each segment, `ext_len × w`.
    g: Vec<T>,
    /// The extended rows outside the line (`size − 1` of them, `w` wide).
    border: Vec<T>,
    /// The running maximum to the end of the segment, one row.
    h: Vec<T>,
    /// The transposed block of the contiguous-axis pass.
    t: Vec<T>,
}

impl<T> Default for MfScratch<T> {
    fn default() -> Self {
        MfScratch {
            g: Vec::new(),
            border: Vec::new(),
            h: Vec::new(),
            t: Vec::new(),
        }
    }
}

/// One [`MfScratch`] per thread of rayon's pool, plus one for a calling thread outside it,
/// allocated once per filter call (not once per block or per rayon split, which would map and
/// zero fresh pages every time).
struct ScratchPool<T>(Vec<Mutex<MfScratch<T>>>);

impl<T> ScratchPool<T> {
    fn new() -> Self {
        ScratchPool(
            (0..=rayon::current_num_threads())
                .map(|_| Mutex::new(MfScratch::default()))
                .collect(),
        )
    }

    /// Runs `f` with the current thread's scratch (the lock is never contended: a thread
    /// runs one block at a time and blocks do not nest).
    fn with<R>(&self, f: impl FnOnce(&mut MfScratch<T>) -> R) -> R {
        let last = self.0.len() - 1;
        let k = rayon::current_thread_index().map_or(last, |k| k.min(last));
        let mut sc = self.0[k].lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut sc)
    }
}

/// Van Herk / Gil-Werman along the rows of a block: row `k < n` of the lines at `src + k·ss`,
/// `w` elements, output row `k` at `dst + k·ds`. The rows of the extended line outside
/// `0..n` (the border) are built once in `sc.border`; the others are read where they are, so
/// nothing is gathered. Forward, `sc.g` gets the running maximum from the start of each
/// segment of `size` extended rows; backward, the running maximum to the end of the segment
/// is kept in one row `sc.h`, and output row `i` (window `[i, i + size)` of the extended
/// line) is `max(h[i], g[i + size − 1])`, written as soon as `h[i]` is known.
///
/// `src` may equal `dst` (with `ss == ds`): the forward sweep only reads, and the backward
/// sweep writes row `j` after reading extended row `j` (source row `j − size/2`), so every
/// source row is read before it is overwritten; the border rows are copied first.
///
/// # Safety
/// `src + k·ss + l` must be valid for reads and `dst + k·ds + l` for writes for `k < n`,
/// `l < w`; no other thread may write those source elements or access those destination
/// elements during the call; if the two regions overlap, `src == dst` and `ss == ds`.
#[allow(clippy::too_many_arguments)]
unsafe fn van_herk_block<T: Real>(
    src: *const T,
    ss: usize,
    dst: *mut T,
    ds: usize,
    w: usize,
    n: usize,
    size: usize,
    mode: BorderMode,
    sc: &mut MfScratch<T>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::simd::has_avx512() {
            // SAFETY: AVX-512F is available; the rest is this function's contract.
            return unsafe { van_herk_block_avx512(src, ss, dst, ds, w, n, size, mode, sc) };
        }
        if crate::simd::has_avx2_fma() {
            // SAFETY: AVX2 (and FMA) are available; the rest is this function's contract.
            return unsafe { van_herk_block_avx2(src, ss, dst, ds, w, n, size, mode, sc) };
        }
    }
    // SAFETY: this function's contract.
    unsafe { van_herk_block_impl(src, ss, dst, ds, w, n, size, mode, sc) }
}

/// Instantiates [`van_herk_block_impl`] (always inlined) under `#[target_feature]`.
macro_rules! van_herk_block_with {
    ($name:ident, $features:literal, $doc:literal) => {
        #[doc = $doc]
        ///
        /// # Safety
        /// The CPU has the named features; as [`van_herk_block`].
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name<T: Real>(
            src: *const T,
            ss: usize,
            dst: *mut T,
            ds: usize,
            w: usize,
            n: usize,
            size: usize,
            mode: BorderMode,
            sc: &mut MfScratch<T>,
        ) {
            // SAFETY: forwarded contract.
            unsafe { van_herk_block_impl(src, ss, dst, ds, w, n, size, mode, sc) }
        }
    };
}
van_herk_block_with!(
    van_herk_block_avx512,
    "avx512f",
    "[`van_herk_block`] compiled for AVX-512 (16 `f32` lanes per max)."
);
van_herk_block_with!(
    van_herk_block_avx2,
    "avx2",
    "[`van_herk_block`] compiled for AVX2 (8 `f32` lanes per max)."
);

/// The body of [`van_herk_block`], inlined into each instantiation.
///
/// # Safety
/// As [`van_herk_block`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn van_herk_block_impl<T: Real>(
    src: *const T,
    ss: usize,
    dst: *mut T,
    ds: usize,
    w: usize,
    n: usize,
    size: usize,
    mode: BorderMode,
    sc: &mut MfScratch<T>,
) {
    let left = size / 2;
    let ext_len = n + size - 1;
    grow(&mut sc.g, ext_len * w);
    grow(&mut sc.border, (size - 1) * w);
    grow(&mut sc.h, w);
    let cval = cval_of::<T>(mode);
    // border rows: extended rows `j < left` at `j`, rows `j >= left + n` at `j − n`
    for (b, row) in sc.border.chunks_exact_mut(w).take(size - 1).enumerate() {
        let p = if b < left {
            b as isize - left as isize
        } else {
            (n + b - left) as isize
        };
        match border_index(p, n, mode) {
            Some(k) => {
                // SAFETY: source row `k < n`, valid for `w` reads (this function's contract).
                let line = unsafe { std::slice::from_raw_parts(src.add(k * ss), w) };
                row.copy_from_slice(line)
            }
            None => row.fill(cval),
        }
    }
    let border = sc.border.as_ptr();
    let row = |j: usize| -> *const T {
        if j < left {
            // SAFETY: pointer arithmetic only, border row `j` of `size − 1`.
            unsafe { border.add(j * w) }
        } else if j < left + n {
            // SAFETY: pointer arithmetic only, source row `j − left < n`.
            unsafe { src.add((j - left) * ss) }
        } else {
            // SAFETY: pointer arithmetic only, border row `j − n < size − 1`.
            unsafe { border.add((j - n) * w) }
        }
    };
    let g = &mut sc.g[..ext_len * w];
    for j in 0..ext_len {
        // SAFETY: a source or border row, `w` elements, not written during this sweep.
        let e = unsafe { std::slice::from_raw_parts(row(j), w) };
        let (gp, gc) = g.split_at_mut(j * w);
        let gc = &mut gc[..w];
        if j.is_multiple_of(size) {
            gc.copy_from_slice(e);
        } else {
            max_rows(gc, &gp[(j - 1) * w..], e);
        }
    }
    let h = &mut sc.h[..w];
    for j in (0..ext_len).rev() {
        // SAFETY: a border row, or source row `j − left`, not yet overwritten: the rows
        // written so far are `> j` (see the doc comment).
        let e = unsafe { std::slice::from_raw_parts(row(j), w) };
        let restart = (j + 1).is_multiple_of(size) || j + 1 == ext_len;
        if j >= n {
            if restart {
                h.copy_from_slice(e);
            } else {
                max_rows_acc(h, e);
            }
            continue;
        }
        let gg = &g[(j + size - 1) * w..(j + size) * w];
        // SAFETY: output row `j < n`, `w` elements, this call's only; it does not overlap
        // `e` (source row `j − left` with `left >= 1`, or a border row).
        let o = unsafe { std::slice::from_raw_parts_mut(dst.add(j * ds), w) };
        if restart {
            h.copy_from_slice(e);
            max_rows(o, h, gg);
        } else {
            back_row(o, h, e, gg);
        }
    }
}

// The row kernels of `van_herk_block`. They work on fixed-size chunks loaded into local
// arrays, so that LLVM emits straight-line vector code without aliasing checks.

/// Elements per chunk of the row kernels (one AVX-512 vector of `f32`).
const CH: usize = 16;

/// `c = max(p, x)` elementwise.
#[inline(always)]
fn max_rows<T: Real>(c: &mut [T], p: &[T], x: &[T]) {
    let (c16, cr) = c.as_chunks_mut::<CH>();
    let (p16, pr) = p[..c16.len() * CH + cr.len()].as_chunks::<CH>();
    let (x16, xr) = x[..c16.len() * CH + cr.len()].as_chunks::<CH>();
    for ((c, p), x) in c16.iter_mut().zip(p16).zip(x16) {
        let (pv, xv) = (*p, *x);
        *c = std::array::from_fn(|k| vmax(pv[k], xv[k]));
    }
    for ((c, &p), &x) in cr.iter_mut().zip(pr).zip(xr) {
        *c = vmax(p, x);
    }
}

/// `h = max(x, h)` elementwise.
#[inline(always)]
fn max_rows_acc<T: Real>(h: &mut [T], x: &[T]) {
    let (h16, hr) = h.as_chunks_mut::<CH>();
    let (x16, xr) = x[..h16.len() * CH + hr.len()].as_chunks::<CH>();
    for (h, x) in h16.iter_mut().zip(x16) {
        let (hv, xv) = (*h, *x);
        *h = std::array::from_fn(|k| vmax(xv[k], hv[k]));
    }
    for (c, &x) in hr.iter_mut().zip(xr) {
        *c = vmax(x, *c);
    }
}

/// `h = max(x, h)`, `o = max(h, q)` elementwise.
#[inline(always)]
fn back_row<T: Real>(o: &mut [T], h: &mut [T], x: &[T], q: &[T]) {
    let (o16, or) = o.as_chunks_mut::<CH>();
    let len = o16.len() * CH + or.len();
    let (h16, hr) = h[..len].as_chunks_mut::<CH>();
    let (x16, xr) = x[..len].as_chunks::<CH>();
    let (q16, qr) = q[..len].as_chunks::<CH>();
    for (((o, h), x), q) in o16.iter_mut().zip(h16).zip(x16).zip(q16) {
        let (hv, xv, qv) = (*h, *x, *q);
        let nv: [T; CH] = std::array::from_fn(|k| vmax(xv[k], hv[k]));
        *h = nv;
        *o = std::array::from_fn(|k| vmax(nv[k], qv[k]));
    }
    for (((o, c), &x), &q) in or.iter_mut().zip(hr).zip(xr).zip(qr) {
        let v = vmax(x, *c);
        *c = v;
        *o = vmax(v, q);
    }
}

/// One block of the pass along a contiguous axis: lines `0..nl` of length `n` at `src + l·n`
/// are transposed into `sc.t` (so that the lines become the contiguous, vectorised inner
/// dimension), filtered there in place by [`van_herk_block`], and transposed into
/// `dst + l·n`.
///
/// # Safety
/// `src` valid for reads and `dst` for writes of `nl · n` elements, not accessed by another
/// thread during the call; the two are equal or do not overlap.
unsafe fn contiguous_block<T: Real>(
    src: *const T,
    dst: *mut T,
    n: usize,
    nl: usize,
    size: usize,
    mode: BorderMode,
    sc: &mut MfScratch<T>,
) {
    let mut t = std::mem::take(&mut sc.t);
    grow(&mut t, n * nl);
    // SAFETY: source `nl × n` (contract), `t` holds `n × nl`; distinct allocations. The
    // filter reads and writes `t` only; the transpose back writes the `nl × n` destination,
    // read (if it is the source) only by the first transpose.
    unsafe {
        transpose::transpose(src, n, t.as_mut_ptr(), nl, nl, n);
        let tp = t.as_mut_ptr();
        van_herk_block(tp, nl, tp, nl, nl, n, size, mode, sc);
        transpose::transpose(t.as_ptr(), nl, dst, n, n, nl);
    }
    sc.t = t;
}

/// One separable max-filter pass of window `size` (`> 1`) along `axis`, reading `input` (or
/// `out` itself when `None`) and writing `out`; on rayon's pool when `parallel` and large,
/// otherwise on the calling thread.
#[allow(clippy::too_many_arguments)]
fn max_pass<T: Real>(
    input: Option<&[T]>,
    out: &mut [T],
    shape: &[usize],
    axis: usize,
    size: usize,
    mode: BorderMode,
    parallel: bool,
    pool: &ScratchPool<T>,
) {
    let n = shape[axis];
    let stride: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let ptr = SharedMut(out.as_mut_ptr());
    let total = out.len();
    let inp = input.map(|s| SharedMut(s.as_ptr() as *mut T));
    // the source of the pass: the input, or `out` itself (in place)
    let src = inp.unwrap_or(ptr);
    let parallel = parallel && total >= PAR_MIN;

    // Runs `count` independent blocks, in parallel or one after the other.
    // Runs `count` independent blocks, in parallel or one after the other.
    let for_blocks = |count: usize, run: &(dyn Fn(&mut MfScratch<T>, usize) + Sync)| {
        if parallel {
            (0..count)
                .into_par_iter()
                .for_each(|b| pool.with(|sc| run(sc, b)));
        } else {
            pool.with(|sc| (0..count).for_each(|b| run(sc, b)));
        }
    };

    if stride == 1 {
        // Contiguous lines: blocks of `lanes` consecutive lines, transposed.
        // (a multiple of 16 where possible: whole 16×16 transpose tiles)
        let lanes = if outer < 16 {
            outer
        } else {
            (MF_TRANSPOSED / n).clamp(16, 256).min(outer) & !15
        };
        let run = |sc: &mut MfScratch<T>, b: usize| {
            let l0 = b * lanes;
            let nl = lanes.min(outer - l0);
            // SAFETY: lines `l0..l0 + nl` of `n` elements, in bounds; blocks partition the
            // lines, so no other task touches them; source and destination are the same
            // slice or different ones.
            unsafe {
                contiguous_block(
                    src.get().add(l0 * n),
                    ptr.get().add(l0 * n),
                    n,
                    nl,
                    size,
                    mode,
                    sc,
                )
            };
        };
        for_blocks(outer.div_ceil(lanes), &run);
        return;
    }

    if stride >= MF_LANES {
        // Blocks of up to MF_WIDE adjacent lines: rows are contiguous runs.
        let per_outer = stride.div_ceil(MF_WIDE);
        let run = |sc: &mut MfScratch<T>, b: usize| {
            let (o, j0) = (b / per_outer, (b % per_outer) * MF_WIDE);
            let w = MF_WIDE.min(stride - j0);
            let base = o * n * stride + j0;
            // SAFETY: rows `k < n` of the block at `base + k·stride`, `w <= stride − j0`
            // wide: in bounds; blocks partition the lines, so no other task reads or writes
            // them; in place, source and destination are the same with the same stride.
            unsafe {
                van_herk_block(
                    src.get().add(base),
                    stride,
                    ptr.get().add(base),
                    stride,
                    w,
                    n,
                    size,
                    mode,
                    sc,
                )
            };
        };
        for_blocks(outer * per_outer, &run);
        return;
    }

    // Lines neither contiguous nor far apart (small trailing axes): MF_LANES lines per block,
    // interleaved in the buffers (gathered and scattered line by line).
    let left = (size / 2) as isize;
    let ext_len = n + size - 1;
    let table: Vec<Option<usize>> = (0..ext_len)
        .map(|j| border_index(j as isize - left, n, mode).map(|i| i * stride))
        .collect();
    let cval = cval_of::<T>(mode);
    let blocks = LineBlocks::new(shape, axis, MF_LANES);
    let run = |sc: &mut MfScratch<T>, b: usize| {
        let (bases, nl) = blocks.block(b);
        let (ext, g, res) = (&mut sc.t, &mut sc.g, &mut sc.h);
        ext.clear();
        ext.resize(ext_len * MF_LANES, cval);
        grow(g, ext_len * MF_LANES);
        grow(res, n * MF_LANES);
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
    debug_assert!(blocks.count() * MF_LANES >= total / n);
    for_blocks(blocks.count(), &run);
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
        self.install(|| {
            let shape = src.shape().to_vec();
            monomorph_core::check_max_filter(&shape, size, mode, dst.shape())?;
            let s = data("max_filter: src", src)?;
            let o = data_mut("max_filter: dst", dst)?;
            if o.is_empty() {
                return Ok(());
            }
            let r = shape.len();
            let planes: usize = shape[..r.saturating_sub(2)].iter().product();
            let mut first = true;
            let mut done = vec![false; r];
            let pool = ScratchPool::new();
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
                                let src = pfirst.then_some(sp);
                                max_pass(src, op, &pshape, ax, size[k], mode, false, &pool);
                                pfirst = false;
                            }
                        }
                    });
                first = false;
                done[r - 1] = true;
                done[r - 2] = true;
            }
            // The order every backend and thread count shares (NaN makes the passes
            // non-commutative); the plane-by-plane route above is its first two passes.
            for axis in monomorph_core::max_filter_pass_order(size) {
                if done[axis] {
                    continue;
                }
                let src = first.then_some(s);
                max_pass(src, o, &shape, axis, size[axis], mode, true, &pool);
                first = false;
            }
            if first {
                o.copy_from_slice(s);
            }
            Ok(())
        })
    }

    fn max_filter_footprint<T: Real>(
        &self,
        src: &ArrayD<T>,
        footprint: &[bool],
        footprint_shape: &[usize],
        mode: BorderMode,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            let shape = src.shape().to_vec();
            monomorph_core::check_max_filter_footprint(
                &shape,
                footprint,
                footprint_shape,
                mode,
                dst.shape(),
            )?;
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
        })
    }

    fn laplace<T: Float>(
        &self,
        src: &ArrayD<T>,
        mode: BorderMode,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            let shape = src.shape().to_vec();
            monomorph_core::check_laplace(&shape, mode, dst.shape())?;
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
        })
    }

    fn peak_candidates<T: Real>(
        &self,
        src: &ArrayD<T>,
        filtered: &ArrayD<T>,
        threshold: T,
        border: &[usize],
    ) -> Result<Vec<(usize, T)>> {
        self.install(|| {
            let shape = src.shape().to_vec();
            monomorph_core::check_peak_candidates(&shape, filtered.shape(), border)?;
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
        })
    }
}

#[cfg(test)]
mod tests;
