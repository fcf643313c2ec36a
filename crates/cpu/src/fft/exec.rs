//! The passes of an N-d real FFT over realfft/rustfft plans.
//!
//! # How memory is walked
//!
//! * **The r2c axis** (`L`, the last of the plan's axes). When it is the array's last axis its
//!   lines are contiguous rows: each row is copied into a per-thread buffer (realfft uses its
//!   input as scratch and ours is borrowed) and transformed straight into the output row. When
//!   batch axes follow `L`, `TILE` adjacent lines are gathered into a contiguous block first.
//! * **Strided complex axes.** `TILE` adjacent lines (adjacent in the fastest index) are gathered
//!   into one contiguous block, transformed with ONE rustfft call (rustfft runs `len/n`
//!   back-to-back transforms of length `n`), and scattered back. A strided read is then
//!   `TILE` contiguous elements, so every fetched cache line is used, and the block stays in L1.
//! * **Fusion.** When the complex axis just before `L` has many outer slabs (the z planes of a
//!   3-D volume, or the items of a batch of 2-D images), each slab's r2c rows and then its
//!   complex transforms along that axis run back to back while the slab is in cache. The
//!   remaining axis (z of a 3-D volume) runs as a separate pass, parallel over
//!   (outer index, tile of columns).
//! * **Pruning** (forward only). With the input zero outside `[0, nonzero[k])`: the r2c lines
//!   and the complex lines whose coordinates on a not-yet-transformed axis are outside the box
//!   are skipped (their values are never read: the later pass along that axis reads only the
//!   first `nonzero` entries of each line and zero-fills the rest), so a 32³ block in a 128³
//!   box skips most of the first two passes and the last pass reads 32 of 128 planes.
//! * **Staging the last pruned pass.** In a pass that reads only `nonzero` of `len` rows of an
//!   array too large for L2, the rows past `nonzero` are written but never read, so the
//!   scatter of a 16-line tile would miss on each of their far-apart 128-byte pieces (the full
//!   pass does not: its gather has just brought the same cache lines in). There, each task
//!   takes a wide chunk of columns, transposes the rows past `nonzero` of its tiles' results
//!   into a per-thread staging block (the chunk's rows, in L2) and copies that out row by row:
//!   long contiguous writes that the hardware prefetchers stream. The rows inside the box go
//!   straight back (the gather has just brought their lines in). The tiles are transformed
//!   out of place (rustfft's `process_immutable`) from a block whose zero tails are written
//!   once per chunk, not once per tile (and so are the fused pass's pruned slabs). Same
//!   transforms, so the result is bit-identical.
//!
//! Scratch (the gathered block, the real row buffer and the FFT scratch) is per thread, grown
//! once and reused: no allocation inside a transform after the first call on a thread.

use monomorph_core::{MAX_GROUP, Result};
use num_complex::Complex;
use rayon::prelude::*;
use rustfft::{Fft, FftNum};

use super::kernels::{FftFloat, Kernels, Scratch, TILE, as_complex, as_complex_mut, realfft_ok};
use super::real::ROWS;
use super::{CPass, Check, Geometry};
use crate::transpose;
use crate::util::{self, SharedMut, grow};

/// Elements of work below which a parallel task is not split further.
const PAR_WORK: usize = 1 << 14;
/// A fused slab must fit in this many bytes (L2-sized) to be worth fusing.
const FUSE_MAX_BYTES: usize = 1 << 21;
/// Bytes of the per-thread staging block of a staged pruned pass (a quarter of L2, so that it
/// stays there with the gathered rows). On the 32³-in-128³ transform 256 KiB and 512 KiB
/// measured alike, 1 MiB 10–15% and 128 KiB 25–30% slower.
const STAGE_BYTES: usize = 1 << 19;

/// Tasks per parallel loop: enough that no task is smaller than [`PAR_WORK`] elements.
fn min_tasks(work_per_task: usize) -> usize {
    (PAR_WORK / work_per_task.max(1)).max(1)
}

/// `(number of tiles, tile width)` covering `inner` adjacent lines with tiles of at most
/// [`TILE`] lines and widths as even as possible.
fn tiling(inner: usize) -> (usize, usize) {
    let tiles = inner.div_ceil(TILE);
    (tiles, inner.div_ceil(tiles))
}

/// Copies `w` strided lines of length `len` (line `t` starts at `src + i0 + t`, element `j`
/// at `+ j * inner`) into `block` as contiguous lines (`block[t * len + j]`), reading only
/// `j < lim` and zero-filling the rest.
///
/// # Safety
/// For every `j < lim` and `t < w`, `src + j * inner + i0 + t` must be valid for reads and not
/// written concurrently. `block.len() >= w * len`.
#[inline]
unsafe fn gather<E: Copy + Default>(
    src: *const E,
    inner: usize,
    i0: usize,
    w: usize,
    len: usize,
    lim: usize,
    block: &mut [E],
) {
    let block = &mut block[..w * len];
    // SAFETY: the source rectangle (lim rows of stride `inner`, w columns from i0) is valid by
    // the caller's contract; the destination (w rows of stride `len`, lim columns) lies in
    // `block`, which is exclusively borrowed and does not overlap the source.
    unsafe { transpose::transpose(src.add(i0), inner, block.as_mut_ptr(), len, lim, w) };
    if lim < len {
        for line in block.chunks_exact_mut(len) {
            line[lim..].fill(E::default());
        }
    }
}

/// The inverse of [`gather`] (all `len` elements of each line).
///
/// # Safety
/// For every `j < len` and `t < w`, `dst + j * inner + i0 + t` must be valid for writes and
/// not accessed concurrently. `block.len() >= w * len`.
#[inline]
unsafe fn scatter<E: Copy>(
    block: &[E],
    dst: *mut E,
    inner: usize,
    i0: usize,
    w: usize,
    len: usize,
) {
    let block = &block[..w * len];
    // SAFETY: the source (w rows of stride `len`, len columns) is `block`; the destination
    // (len rows of stride `inner`, w columns from i0) is valid and unaliased by the caller's
    // contract, and does not overlap `block`.
    unsafe { transpose::transpose(block.as_ptr(), len, dst.add(i0), inner, w, len) };
}

/// Complex transforms of `w` adjacent strided lines of one slab (`(len, inner)` starting at
/// `base`), reading only the first `lim` entries of each line.
///
/// # Safety
/// `base` must point to a slab of `len * inner` elements valid for reads and writes, of which
/// the columns `i0..i0 + w` are accessed by no one else during the call; `i0 + w <= inner`.
unsafe fn c_tile<T: FftNum + Default>(
    base: *mut Complex<T>,
    inner: usize,
    i0: usize,
    w: usize,
    len: usize,
    lim: usize,
    fft: &dyn Fft<T>,
    block: &mut [Complex<T>],
    scratch: &mut [Complex<T>],
) {
    let blk = &mut block[..w * len];
    // SAFETY: forwarded from this function's contract.
    unsafe { gather(base, inner, i0, w, len, lim, blk) };
    fft.process_with_scratch(blk, scratch);
    // SAFETY: forwarded from this function's contract.
    unsafe { scatter(blk, base, inner, i0, w, len) };
}

/// Complex transforms along the pass axis of one slab `(len, inner)`, on this thread.
fn c_slab<T: FftFloat>(
    slab: &mut [Complex<T>],
    p: &CPass,
    lim: usize,
    fft: &dyn Fft<T>,
    k: &Kernels<T>,
    s: &mut Scratch<T>,
) {
    let (len, inner) = (p.len, p.inner);
    assert_eq!(slab.len(), len * inner, "slab of a complex pass");
    let (tiles, tw) = tiling(inner);
    let base = slab.as_mut_ptr();
    if lim < len {
        // Pruned: out of place from a block whose zero tails are written once per slab.
        let (lines, spec, scratch, _) = s.staged(k, 0);
        zero_tails(&mut lines[..tw * len], len, lim);
        for tile in 0..tiles {
            let i0 = tile * tw;
            let w = tw.min(inner - i0);
            let (x, y) = (&mut lines[..w * len], &mut spec[..w * len]);
            // SAFETY: `slab` is borrowed mutably for the whole loop and holds `len * inner`
            // elements (asserted above); i0 + w <= inner; `x` and `y` hold w lines of len
            // and overlap neither each other nor the slab.
            unsafe {
                transpose::transpose(base.add(i0), inner, x.as_mut_ptr(), len, lim, w);
                fft.process_immutable_with_scratch(x, y, scratch);
                scatter(y, base, inner, i0, w, len);
            }
        }
        return;
    }
    let (block, _, scratch) = s.parts(k);
    for tile in 0..tiles {
        let i0 = tile * tw;
        let w = tw.min(inner - i0);
        // SAFETY: `slab` is borrowed mutably for the whole loop and holds `len * inner`
        // elements (asserted above); i0 + w <= inner.
        unsafe { c_tile(base, inner, i0, w, len, lim, fft, block, scratch) };
    }
}

/// The staging chunk width of a pruned pass `p` reading `lim` rows, or `None` when the pass
/// is not staged (not pruned, its slabs fit in L2, or too few columns).
fn staging<T>(p: &CPass, lim: usize) -> Option<usize> {
    let size = std::mem::size_of::<Complex<T>>();
    if lim >= p.len || p.len * p.inner * size <= FUSE_MAX_BYTES || p.inner < 4 * TILE {
        return None;
    }
    Some((STAGE_BYTES / (p.len * size)).max(TILE))
}

/// Spectrum products of a forward transform `X`: `outs[q] = factors[q] · conj(X)` (the matching
/// loop's `F · conj(T)`), in the *correlation layout*: where [`correlate_pass`] gives a pass,
/// the products come already inverse-transformed along that pass's axis (see
/// [`c_pass_correlate`]), which [`inverse_consume`] then skips; elsewhere they are the plain
/// products. Each slice holds the whole complex array.
pub(crate) struct Products<'a, T> {
    pub factors: &'a [&'a [Complex<T>]],
    pub outs: Vec<SharedMut<Complex<T>>>,
}

impl<T: FftFloat> Products<'_, T> {
    /// `outs[q][at + c] = factors[q][at + c] · conj(x[c])` for every `c < x.len()`.
    ///
    /// # Safety
    /// `at + x.len()` is at most the arrays' length and no one else accesses that range of
    /// the outputs during the call.
    #[inline]
    unsafe fn put_row(&self, at: usize, x: &[Complex<T>]) {
        for (f, o) in self.factors.iter().zip(&self.outs) {
            // SAFETY: in bounds and unaliased by the caller's contract.
            let o = unsafe { std::slice::from_raw_parts_mut(o.get().add(at), x.len()) };
            for ((o, &a), &v) in o.iter_mut().zip(&f[at..at + x.len()]).zip(x) {
                *o = a * v.conj();
            }
        }
    }

    /// `outs[q][at + c] = x[c]` for every `c < x.len()`.
    ///
    /// # Safety
    /// As [`Self::put_row`].
    #[inline]
    unsafe fn copy_row(&self, q: usize, at: usize, x: &[Complex<T>]) {
        // SAFETY: in bounds and unaliased by the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(x.as_ptr(), self.outs[q].get().add(at), x.len()) };
    }

    /// The products of a whole spectrum `x` (when no staged pass could write them), in parallel.
    fn apply(&self, x: &[Complex<T>]) {
        const CH: usize = 1 << 14;
        (0..x.len().div_ceil(CH)).into_par_iter().for_each(|c| {
            let at = c * CH;
            let end = (at + CH).min(x.len());
            // SAFETY: chunks are disjoint and within the arrays (which hold x.len() elements).
            unsafe { self.put_row(at, &x[at..end]) };
        });
    }
}

/// `(chunks, width)` of a staged pass over `inner` columns in chunks of about `cw`: a multiple
/// of the thread count, so that the last round keeps every thread busy.
fn chunking(inner: usize, cw: usize) -> (usize, usize) {
    let threads = rayon::current_num_threads().max(1);
    let chunks = inner.div_ceil(cw).next_multiple_of(threads);
    (chunks, inner.div_ceil(chunks))
}

/// Zeroes entries `lim..` of every line of `len` in `lines` (the transforms read whole lines;
/// the gathers write only their first `lim` entries).
fn zero_tails<T: FftFloat>(lines: &mut [Complex<T>], len: usize, lim: usize) {
    for line in lines.chunks_exact_mut(len) {
        line[lim..].fill(Complex::default());
    }
}

/// The last complex pass of a geometry when the matching loop's products are fused with it
/// (see [`c_pass_correlate`]): it is not the fused slab pass, and its array is too large for L2
/// with enough columns to stage. Both [`forward`] (with products) and [`inverse_consume`] ask
/// this, so they agree on the layout of the products. The r2c axis must be the last (as
/// `inverse_consume` requires).
pub(crate) fn correlate_pass<T>(g: &Geometry) -> Option<&CPass> {
    let rest = usize::from(fused::<T>(g).is_some());
    let p = g.cpasses.last()?;
    let size = std::mem::size_of::<Complex<T>>();
    // Staged chunks narrower than 4 tiles (long lines: 2048² images) write rows of a few
    // cache lines each; there the separate passes measured faster.
    (g.r_inner == 1
        && g.cpasses.len() > rest
        && p.len * p.inner * size > FUSE_MAX_BYTES
        && p.inner >= 4 * TILE
        && STAGE_BYTES / (2 * p.len * size) >= 4 * TILE)
        .then_some(p)
}

/// The forward transform's last pass (along `p.axis`, reading the first `lim` entries of each
/// line of `data`), fused with the spectrum products and the inverse transform's first pass
/// along the same axis: per tile of lines, `X = fft(x)`, then for each product
/// `Z = ifft(F_q · conj(X))` along the axis, staged and copied out row by row into `outs[q]`.
/// The products are thus never written in the spectral domain of this axis and the inverse's
/// strided pass over them disappears. Same transforms in the same order as the unfused
/// sequence, so the result is bit-identical to it. `data` is only read.
#[allow(clippy::too_many_arguments)]
fn c_pass_correlate<T: FftFloat>(
    data: &[Complex<T>],
    p: &CPass,
    lim: usize,
    fwd: &dyn Fft<T>,
    inv: &dyn Fft<T>,
    k: &Kernels<T>,
    pr: &Products<'_, T>,
) {
    let (len, inner) = (p.len, p.inner);
    assert_eq!(data.len(), p.outer * len * inner, "array of a complex pass");
    // The lowest transform axis: no earlier transform axis can put a slab outside the box.
    debug_assert!(p.checks.is_empty(), "correlate pass with pruning checks");
    let nq = pr.outs.len();
    let size = std::mem::size_of::<Complex<T>>();
    let cw = (STAGE_BYTES / (nq.max(1) * len * size)).max(TILE);
    let (chunks, cw) = chunking(inner, cw);
    (0..p.outer * chunks).into_par_iter().for_each(|task| {
        let (o, c) = (task / chunks, task % chunks);
        let c0 = c * cw;
        if c0 >= inner {
            return;
        }
        let cwid = cw.min(inner - c0);
        let slab = o * len * inner;
        T::with_scratch(|s| {
            let (lines, spec, scratch, stage) = s.staged(k, (nq + 1) * len * cwid);
            let (zb, stage) = stage.split_at_mut(len * cwid);
            let (tiles, tw) = tiling(cwid);
            zero_tails(&mut lines[..tw * len], len, lim);
            for tile in 0..tiles {
                let i0 = c0 + tile * tw;
                let w = tw.min(c0 + cwid - i0);
                let (x, y) = (&mut lines[..w * len], &mut spec[..w * len]);
                let z = &mut zb[..w * len];
                // SAFETY: `data` holds `outer * len * inner` elements (asserted above), so the
                // `lim` rows of columns i0..i0 + w of slab o are in bounds; the destination,
                // the first `lim` entries of w lines of len, lies in `x`.
                unsafe {
                    transpose::transpose(
                        data.as_ptr().add(slab + i0),
                        inner,
                        x.as_mut_ptr(),
                        len,
                        lim,
                        w,
                    )
                };
                fwd.process_immutable_with_scratch(x, y, scratch);
                for (q, f) in pr.factors.iter().enumerate() {
                    // SAFETY: factor q holds the whole array (checked by the caller): the len
                    // rows of columns i0..i0 + w of slab o are in bounds; `z` holds w lines.
                    unsafe {
                        transpose::transpose(
                            f.as_ptr().add(slab + i0),
                            inner,
                            z.as_mut_ptr(),
                            len,
                            len,
                            w,
                        )
                    };
                    for (a, &v) in z.iter_mut().zip(y.iter()) {
                        *a = *a * v.conj();
                    }
                    inv.process_with_scratch(z, scratch);
                    // SAFETY: `z` holds w lines of len; the destination is columns
                    // i0 - c0.. of the len rows (stride cwid) of stage block q, inside `stage`.
                    unsafe {
                        transpose::transpose(
                            z.as_ptr(),
                            len,
                            stage.as_mut_ptr().add(q * len * cwid + i0 - c0),
                            cwid,
                            w,
                            len,
                        )
                    };
                }
            }
            for q in 0..nq {
                let blk = &stage[q * len * cwid..(q + 1) * len * cwid];
                for (j, row) in blk.chunks_exact(cwid).enumerate() {
                    // SAFETY: columns c0..c0 + cwid of row j of slab o of output q: in
                    // bounds, this task's alone.
                    unsafe { pr.copy_row(q, slab + j * inner + c0, row) };
                }
            }
        });
    });
}

/// A pruned complex pass (see the module docs), parallel over (outer slab, chunk of about
/// `cw` columns): per chunk, tiles of lines reading their first `lim` entries are transformed;
/// their rows inside the box go straight back, the others into the staging block, which is
/// then copied out row by row.
fn c_pass_staged<T: FftFloat>(
    data: &mut [Complex<T>],
    p: &CPass,
    nz: &[usize],
    cw: usize,
    fft: &dyn Fft<T>,
    k: &Kernels<T>,
) {
    let (len, inner) = (p.len, p.inner);
    assert_eq!(data.len(), p.outer * len * inner, "array of a complex pass");
    let lim = nz[p.axis];
    let (chunks, cw) = chunking(inner, cw);
    let ptr = SharedMut(data.as_mut_ptr());
    (0..p.outer * chunks).into_par_iter().for_each(|task| {
        let (o, c) = (task / chunks, task % chunks);
        let c0 = c * cw;
        if c0 >= inner || !Check::all_inside(&p.checks, o, nz) {
            return;
        }
        let cwid = cw.min(inner - c0);
        T::with_scratch(|s| {
            let (lines, spec, scratch, stage) = s.staged(k, len * cwid);
            let base = ptr.get().wrapping_add(o * len * inner);
            let (tiles, tw) = tiling(cwid);
            // The lines' zero tails, once per chunk: the transforms only read `lines`.
            zero_tails(&mut lines[..tw * len], len, lim);
            for tile in 0..tiles {
                let i0 = c0 + tile * tw;
                let w = tw.min(c0 + cwid - i0);
                let (x, y) = (&mut lines[..w * len], &mut spec[..w * len]);
                // SAFETY: `data` is borrowed mutably for the whole parallel loop and holds
                // `outer * len * inner` elements (asserted above), so slab `o` is in bounds;
                // distinct tasks are distinct (o, chunk) pairs, whose columns c0..c0 + cwid
                // of slab o (which hold i0..i0 + w) are disjoint. The destination, the first
                // `lim` entries of w lines of len, lies in `x`.
                unsafe { transpose::transpose(base.add(i0), inner, x.as_mut_ptr(), len, lim, w) };
                fft.process_immutable_with_scratch(x, y, scratch);
                // SAFETY: `y` holds w lines of len. Rows j < lim go straight back to the
                // columns i0..i0 + w of slab o that the gather above has just read (so their
                // cache lines are present; this task's alone, as above); rows j >= lim go to
                // columns i0 - c0.. of rows j of stride cwid of `stage` (len * cwid elements).
                // Neither destination overlaps `y`.
                unsafe {
                    transpose::transpose(y.as_ptr(), len, base.add(i0), inner, w, lim);
                    transpose::transpose(
                        y.as_ptr().add(lim),
                        len,
                        stage.as_mut_ptr().add(lim * cwid + i0 - c0),
                        cwid,
                        w,
                        len - lim,
                    );
                }
            }
            for (j, row) in stage[..len * cwid].chunks_exact(cwid).enumerate().skip(lim) {
                // SAFETY: columns c0..c0 + cwid of row j of slab o: in bounds and this task's
                // alone (as above); no gather reads rows j >= lim.
                unsafe {
                    std::ptr::copy_nonoverlapping(row.as_ptr(), base.add(j * inner + c0), cwid);
                }
            }
        });
    });
}

/// One complex pass over the whole array, parallel over (outer slab, tile of lines).
fn c_pass<T: FftFloat>(
    data: &mut [Complex<T>],
    p: &CPass,
    nonzero: Option<&[usize]>,
    fft: &dyn Fft<T>,
    k: &Kernels<T>,
) {
    let (len, inner) = (p.len, p.inner);
    assert_eq!(data.len(), p.outer * len * inner, "array of a complex pass");
    let lim = nonzero.map_or(len, |nz| nz[p.axis]);
    let (tiles, tw) = tiling(inner);
    let ptr = SharedMut(data.as_mut_ptr());
    (0..p.outer * tiles)
        .into_par_iter()
        .with_min_len(min_tasks(tw * len))
        .for_each(|task| {
            let (o, tile) = (task / tiles, task % tiles);
            if let Some(nz) = nonzero
                && !Check::all_inside(&p.checks, o, nz)
            {
                return;
            }
            let i0 = tile * tw;
            let w = tw.min(inner - i0);
            T::with_scratch(|s| {
                let (block, _, scratch) = s.parts(k);
                // SAFETY: `data` is borrowed mutably for the whole parallel loop and holds
                // `outer * len * inner` elements (asserted above), so slab `o` is in bounds;
                // distinct tasks are distinct (o, tile) pairs, whose columns i0..i0 + w of
                // slab o are disjoint.
                unsafe {
                    let base = ptr.get().add(o * len * inner);
                    c_tile(base, inner, i0, w, len, lim, fft, block, scratch);
                }
            });
        });
}

/// r2c transforms of the lines of `rows` outer slabs: `input` holds `rows * n * r_inner` reals,
/// `out` `rows * m * r_inner` complex values. On this thread.
fn r2c_rows<T: FftFloat>(
    g: &Geometry,
    k: &Kernels<T>,
    input: &[T],
    out: &mut [Complex<T>],
    active: impl Fn(usize) -> bool,
    s: &mut Scratch<T>,
) -> Result<()> {
    let (n, m, inner) = (g.n, g.m, g.r_inner);
    let (block, real, scratch) = s.parts(k);
    if inner == 1 {
        if let Some(hp) = &k.half {
            // Runs of up to ROWS consecutive active rows: one half-length FFT call per run,
            // straight from the input rows, then the twiddle step into the output rows.
            let (h, rows) = (n / 2, input.len() / n);
            let mut o = 0;
            while o < rows {
                if !active(o) {
                    o += 1;
                    continue;
                }
                let mut e = o + 1;
                while e < rows && e - o < ROWS && active(e) {
                    e += 1;
                }
                let z: &[Complex<T>] = as_complex(&input[o * n..e * n])?;
                let blk = &mut block[..(e - o) * h];
                hp.fwd.process_immutable_with_scratch(z, blk, scratch);
                for (zr, xr) in blk
                    .chunks_exact(h)
                    .zip(out[o * m..e * m].chunks_exact_mut(m))
                {
                    T::r2c_post(zr, &hp.tw_fwd, xr);
                }
                o = e;
            }
            return Ok(());
        }
        for (o, (src, dst)) in input
            .chunks_exact(n)
            .zip(out.chunks_exact_mut(m))
            .enumerate()
        {
            if active(o) {
                let buf = &mut real[..n];
                buf.copy_from_slice(src);
                realfft_ok(k.r2c.process_with_scratch(buf, dst, scratch))?;
            }
        }
        return Ok(());
    }
    let (tiles, tw) = tiling(inner);
    for (o, (src, dst)) in input
        .chunks_exact(n * inner)
        .zip(out.chunks_exact_mut(m * inner))
        .enumerate()
    {
        if !active(o) {
            continue;
        }
        for tile in 0..tiles {
            let i0 = tile * tw;
            let w = tw.min(inner - i0);
            // SAFETY: `src` holds n * inner elements and i0 + w <= inner.
            unsafe { gather(src.as_ptr(), inner, i0, w, n, n, real) };
            for t in 0..w {
                realfft_ok(k.r2c.process_with_scratch(
                    &mut real[t * n..(t + 1) * n],
                    &mut block[t * m..(t + 1) * m],
                    scratch,
                ))?;
            }
            // SAFETY: `dst` is borrowed mutably, holds m * inner elements, i0 + w <= inner.
            unsafe { scatter(block, dst.as_mut_ptr(), inner, i0, w, m) };
        }
    }
    Ok(())
}

/// c2r transforms of the lines of whole outer slabs (`input` is clobbered). On this thread.
fn c2r_rows<T: FftFloat>(
    g: &Geometry,
    k: &Kernels<T>,
    input: &mut [Complex<T>],
    out: &mut [T],
    s: &mut Scratch<T>,
) -> Result<()> {
    let (n, m, inner) = (g.n, g.m, g.r_inner);
    let zero = T::zero();
    let (block, real, scratch) = s.parts(k);
    if inner == 1 {
        if let Some(hp) = &k.half {
            let h = n / 2;
            for (x, y) in input.chunks_mut(ROWS * m).zip(out.chunks_mut(ROWS * n)) {
                let r = x.len() / m;
                let blk = &mut block[..r * h];
                for (xr, yr) in x.chunks_exact(m).zip(blk.chunks_exact_mut(h)) {
                    T::c2r_pre(xr, &hp.tw_inv, yr);
                }
                hp.inv
                    .process_outofplace_with_scratch(blk, as_complex_mut(y)?, scratch);
            }
            return Ok(());
        }
        for (src, dst) in input.chunks_exact_mut(m).zip(out.chunks_exact_mut(n)) {
            src[0].im = zero;
            src[m - 1].im = if n % 2 == 0 { zero } else { src[m - 1].im };
            realfft_ok(k.c2r.process_with_scratch(src, dst, scratch))?;
        }
        return Ok(());
    }
    let (tiles, tw) = tiling(inner);
    for (src, dst) in input
        .chunks_exact_mut(m * inner)
        .zip(out.chunks_exact_mut(n * inner))
    {
        for tile in 0..tiles {
            let i0 = tile * tw;
            let w = tw.min(inner - i0);
            // SAFETY: `src` holds m * inner elements and i0 + w <= inner.
            unsafe { gather(src.as_ptr(), inner, i0, w, m, m, block) };
            for t in 0..w {
                let line = &mut block[t * m..(t + 1) * m];
                line[0].im = zero;
                if n % 2 == 0 {
                    line[m - 1].im = zero;
                }
                realfft_ok(k.c2r.process_with_scratch(
                    line,
                    &mut real[t * n..(t + 1) * n],
                    scratch,
                ))?;
            }
            // SAFETY: `dst` is borrowed mutably, holds n * inner elements, i0 + w <= inner.
            unsafe { scatter(real, dst.as_mut_ptr(), inner, i0, w, n) };
        }
    }
    Ok(())
}

/// Slabs per parallel task: about 8 tasks per thread, but none under [`PAR_WORK`] elements.
fn rows_per_task(total_rows: usize, row_elems: usize) -> usize {
    util::rows_per_task(total_rows, 8, min_tasks(row_elems))
}

/// The fused slab of a geometry: the outer slabs of the first complex pass, if there are
/// enough of them for every thread and each fits in L2.
fn fused<T>(g: &Geometry) -> Option<&CPass> {
    let p = g.cpasses.first()?;
    let threads = rayon::current_num_threads().max(1);
    let bytes = p.len * p.inner * std::mem::size_of::<Complex<T>>();
    (p.outer >= 4 * threads && bytes <= FUSE_MAX_BYTES).then_some(p)
}

/// Forward transform (pruned when `nonzero` is given). Shapes were checked by the caller.
/// With `products`, the result is the products in the correlation layout (see [`Products`]) and
/// `out` is left unspecified.
pub(crate) fn forward<T: FftFloat>(
    g: &Geometry,
    k: &Kernels<T>,
    input: &[T],
    out: &mut [Complex<T>],
    nonzero: Option<&[usize]>,
    products: Option<&Products<'_, T>>,
) -> Result<()> {
    let rest = if let Some(p0) = fused::<T>(g) {
        let units = p0.outer;
        let (unit_r, unit_c) = (g.real_len / units, g.complex_len / units);
        let rows = g.r_outer / units;
        // R lines per coordinate of p0's axis within a slab.
        let between = rows / p0.len;
        let lim = nonzero.map_or(p0.len, |nz| nz[p0.axis]);
        let row_lim = lim * between;
        let slab = |ir: &[T], oc: &mut [Complex<T>]| -> Result<()> {
            T::with_scratch(|s| {
                r2c_rows(g, k, ir, oc, |o| o < row_lim, s)?;
                c_slab(oc, p0, lim, k.cfwd[0].as_ref(), k, s);
                Ok(())
            })
        };
        match nonzero {
            None => out
                .par_chunks_mut(unit_c)
                .zip(input.par_chunks(unit_r))
                .try_for_each(|(oc, ir)| slab(ir, oc))?,
            Some(nz) => {
                // Only the slabs inside the box, split evenly over the threads (the box is
                // usually a corner: with all slabs, the first half would hold all the work).
                let active: Vec<usize> = (0..units)
                    .filter(|&u| Check::all_inside(&p0.checks, u, nz))
                    .collect();
                let optr = SharedMut(out.as_mut_ptr());
                active.par_iter().try_for_each(|&u| {
                    // SAFETY: `out` is borrowed mutably for the whole parallel loop and holds
                    // `units * unit_c` elements; the units in `active` are distinct, so the
                    // slabs u * unit_c.. are disjoint.
                    let oc = unsafe {
                        std::slice::from_raw_parts_mut(optr.get().add(u * unit_c), unit_c)
                    };
                    slab(&input[u * unit_r..(u + 1) * unit_r], oc)
                })?;
            }
        }
        1
    } else {
        let row_elems = g.n * g.r_inner;
        let rpt = rows_per_task(g.r_outer, row_elems);
        out.par_chunks_mut(rpt * g.m * g.r_inner)
            .zip(input.par_chunks(rpt * row_elems))
            .enumerate()
            .try_for_each(|(c, (oc, ir))| {
                T::with_scratch(|s| {
                    let active = |o: usize| {
                        nonzero.is_none_or(|nz| Check::all_inside(&g.r_checks, c * rpt + o, nz))
                    };
                    r2c_rows(g, k, ir, oc, active, s)
                })
            })?;
        0
    };
    let corr = products.and_then(|pr| Some((pr, correlate_pass::<T>(g)?)));
    let passes = g.cpasses.len() - usize::from(corr.is_some());
    for (p, fft) in g.cpasses[..passes].iter().zip(&k.cfwd).skip(rest) {
        match nonzero.and_then(|nz| Some((nz, staging::<T>(p, nz[p.axis])?))) {
            Some((nz, cw)) => c_pass_staged(out, p, nz, cw, fft.as_ref(), k),
            None => c_pass(out, p, nonzero, fft.as_ref(), k),
        }
    }
    let pending = match corr {
        Some((pr, p)) => {
            let lim = nonzero.map_or(p.len, |nz| nz[p.axis]);
            let q = passes;
            c_pass_correlate(out, p, lim, k.cfwd[q].as_ref(), k.cinv[q].as_ref(), k, pr);
            None
        }
        None => products,
    };
    if let Some(pr) = pending {
        pr.apply(out);
    }
    Ok(())
}

/// Inverse transform (unnormalised; `input` is clobbered). Shapes were checked by the caller.
pub(crate) fn inverse<T: FftFloat>(
    g: &Geometry,
    k: &Kernels<T>,
    input: &mut [Complex<T>],
    out: &mut [T],
) -> Result<()> {
    let fuse = fused::<T>(g);
    let skip = usize::from(fuse.is_some());
    for (p, fft) in g.cpasses.iter().zip(&k.cinv).skip(skip).rev() {
        c_pass(input, p, None, fft.as_ref(), k);
    }
    if let Some(p0) = fuse {
        let units = p0.outer;
        let (unit_r, unit_c) = (g.real_len / units, g.complex_len / units);
        input
            .par_chunks_mut(unit_c)
            .zip(out.par_chunks_mut(unit_r))
            .try_for_each(|(ic, oc)| {
                T::with_scratch(|s| {
                    c_slab(ic, p0, p0.len, k.cinv[0].as_ref(), k, s);
                    c2r_rows(g, k, ic, oc, s)
                })
            })
    } else {
        let row_elems = g.n * g.r_inner;
        let rpt = rows_per_task(g.r_outer, row_elems);
        input
            .par_chunks_mut(rpt * g.m * g.r_inner)
            .zip(out.par_chunks_mut(rpt * row_elems))
            .try_for_each(|(ic, oc)| T::with_scratch(|s| c2r_rows(g, k, ic, oc, s)))
    }
}

/// Real elements of output that one [`inverse_consume`] task keeps (all spectra together) when
/// the slabs are rows: L2-resident with the FFT scratch.
const SINK_BYTES: usize = 1 << 19;

/// Inverse transforms of up to three product spectra of one geometry in the correlation layout
/// (see [`Products`]: the pass [`correlate_pass`] gives is already done), whose real outputs are
/// handed to
/// `consume` a piece at a time instead of being written out: `consume(row0, outs)` gets, for
/// each input, the real rows `row0..row0 + r` (rows of `n` along the last axis, flat over the
/// axes before it) of that input's result; it returns a partial sum. The pieces are the fused
/// slabs (a z plane of a 3-D volume) or, without fusion, groups of rows, in a per-thread buffer
/// that stays in cache while `consume` reads it. Requires `r_inner == 1` (the r2c axis is the
/// array's last). The inputs may be clobbered. Returns the partial sums added in piece order
/// (deterministic for any thread count). (Transforming each fused slab from a copy, so that the
/// input's cache lines stay clean, measured 5% slower for one rotation, whose spectra stay in
/// cache: the copy costs more than the write-back it saves. A group of rotations, whose
/// spectra may not, is transformed from a copy: `--score-stats` 96³/24³ FLC in groups of 4,
/// stats/plain per rotation 1.168 → 1.138 with 2 threads, 1.180 → 1.143 with 1; in groups of
/// 2, whose spectra mostly stay in cache at that size, the same within the noise.)
///
/// The inputs come in 1 to [`MAX_GROUP`] *groups* of `group` spectra (the products of one
/// rotation; several: a group of rotations scored in one pass), and `consume` returns one
/// partial sum per group, summed per group. The pieces are those of one group, whatever the
/// number of groups, so that each group's sum is added in the same order as when it is
/// transformed alone.
pub(crate) fn inverse_consume<T: FftFloat>(
    g: &Geometry,
    k: &Kernels<T>,
    group: usize,
    inputs: &mut [&mut [Complex<T>]],
    consume: &(dyn Fn(usize, &[&[T]]) -> Result<[f64; MAX_GROUP]> + Sync),
) -> Result<[f64; MAX_GROUP]> {
    let ns = inputs.len();
    assert!(
        (1..=3).contains(&group)
            && ns.is_multiple_of(group)
            && (1..=MAX_GROUP).contains(&(ns / group))
            && g.r_inner == 1,
        "inverse_consume: 1 to MAX_GROUP groups of 1 to 3 inputs, r2c axis last"
    );
    let fuse = fused::<T>(g);
    let skip = usize::from(fuse.is_some());
    // The pass the products come already transformed along (see `Products`).
    let done = usize::from(correlate_pass::<T>(g).is_some());
    let upto = g.cpasses.len() - done;
    for input in inputs.iter_mut() {
        assert_eq!(input.len(), g.complex_len, "input of inverse_consume");
        for (p, fft) in g.cpasses[..upto].iter().zip(&k.cinv).skip(skip).rev() {
            c_pass(input, p, None, fft.as_ref(), k);
        }
    }
    let n = g.n;
    // (pieces, rows per piece)
    let (pieces, rows) = match fuse {
        Some(p0) => (p0.outer, g.r_outer / p0.outer),
        None => {
            let by_cache = (SINK_BYTES / (group * n * std::mem::size_of::<T>())).max(1);
            let rpt = rows_per_task(g.r_outer, n).min(by_cache);
            (g.r_outer.div_ceil(rpt), rpt)
        }
    };
    let ptrs: Vec<SharedMut<Complex<T>>> = inputs
        .iter_mut()
        .map(|x| SharedMut(x.as_mut_ptr()))
        .collect();
    let m = g.m;
    // A group of rotations: its spectra (3 per rotation) overflow the cache, so each slab is
    // transformed from a copy, leaving the spectra's cache lines clean (evicted without a
    // write-back); alone, they stay in cache and the copy costs more than it saves (below).
    let copy = ns > group;
    let parts: Vec<[f64; MAX_GROUP]> = (0..pieces)
        .into_par_iter()
        .map(|piece| {
            let r0 = piece * rows;
            let r = rows.min(g.r_outer - r0);
            T::with_scratch(|s| -> Result<[f64; MAX_GROUP]> {
                let mut sink = std::mem::take(&mut s.sink);
                grow(&mut sink, ns * r * n);
                let mut res = Ok(());
                let mut local = std::mem::take(&mut s.slab);
                for (j, ptr) in ptrs.iter().enumerate() {
                    // SAFETY: input j is borrowed mutably for the whole call and holds
                    // `complex_len = r_outer * m` elements (asserted above; r_inner == 1);
                    // rows r0..r0 + r are this piece's alone (pieces are disjoint row ranges).
                    let ic =
                        unsafe { std::slice::from_raw_parts_mut(ptr.get().add(r0 * m), r * m) };
                    let ic: &mut [Complex<T>] = if copy {
                        // Resized (a no-op once grown) and copied whole: one `memcpy`, the
                        // widest copy the CPU has, where an element loop stays 16 bytes wide.
                        local.resize(ic.len(), Complex::new(T::zero(), T::zero()));
                        local.copy_from_slice(ic);
                        &mut local
                    } else {
                        ic
                    };
                    let oc = &mut sink[j * r * n..(j + 1) * r * n];
                    res = match fuse {
                        Some(p0) => {
                            c_slab(ic, p0, p0.len, k.cinv[0].as_ref(), k, s);
                            c2r_rows(g, k, ic, oc, s)
                        }
                        None => c2r_rows(g, k, ic, oc, s),
                    };
                    if res.is_err() {
                        break;
                    }
                }
                let out = res.and_then(|()| {
                    let mut outs: [&[T]; 3 * MAX_GROUP] = [&[]; 3 * MAX_GROUP];
                    for (j, o) in outs.iter_mut().enumerate().take(ns) {
                        *o = &sink[j * r * n..(j + 1) * r * n];
                    }
                    consume(r0, &outs[..ns])
                });
                s.sink = sink;
                s.slab = local;
                out
            })
        })
        .collect::<Result<_>>()?;
    Ok(std::array::from_fn(|q| parts.iter().map(|p| p[q]).sum()))
}
