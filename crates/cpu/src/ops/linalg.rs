//! Batched linear algebra on the CPU: matrix-vector products, the Laplacian stencil, and the
//! fused kernels of the CG loop.
//!
//! Every per-row reduction is split into fixed chunks of the row (independent of the batch
//! size and of the thread count) whose partials are combined in chunk order, so a row's
//! result is the same bit for bit whether it is solved alone or in a batch. Inner loops keep
//! [`LANES`] independent accumulators so that they vectorise. Dot products are formed and
//! summed in the precision set's accumulator type ([`Precision::Accum`], `A` below; `f64` for
//! both sets today).

use monomorph_core::{
    Boundary, CsrMatrix, DenseDims, Float, LaplacianDims, Linalg, PoissonStencil, Precision,
    Result, check_active, check_axpy_pair_rows, check_axpy_rows, check_laplacian, check_matvec_csr,
    check_matvec_csr_dot, check_matvec_dense, check_matvec_dense_dot, check_scale_rows,
    check_xpay_rows,
};
use ndarray::ArrayD;
use num_traits::Zero as _;
use rayon::prelude::*;

use super::stream::{fence_streaming, prefetch_ahead, prefetch_line, store_line, streams};
use super::{data, data_mut};
use crate::Cpu;
use crate::simd::widest_simd;
use crate::util::PAR_MIN;

/// The accumulator type of `Cpu<P>` ([`Precision::Accum`]): what the fused ops' dot products
/// are formed, summed and returned in.
type A<P> = <P as Precision>::Accum;

/// Independent accumulators of the fused reductions.
const LANES: usize = 8;
/// Elements per chunk of a row in the fused kernels (a parallel task and a reduction partial).
const CHUNK: usize = 1 << 14;
/// Elements per chunk of the Laplacian (8 planes of 128²: the halo planes add 25 %).
pub(super) const STENCIL_CHUNK: usize = 1 << 17;

/// Runs `f(row, y_row)` for every row of `y` (rows × n), in parallel over rows or, for one long
/// row, over chunks of it (`f` then gets the chunk offset).
fn rows_mut<T: Send + Sync>(y: &mut [T], n: usize, f: impl Fn(usize, usize, &mut [T]) + Sync) {
    if n == 0 {
        return;
    }
    let rows = y.len() / n;
    if y.len() < PAR_MIN {
        for (r, c) in y.chunks_mut(n).enumerate() {
            f(r, 0, c);
        }
    } else if rows >= rayon::current_num_threads() * 2 || n < PAR_MIN {
        y.par_chunks_mut(n)
            .enumerate()
            .for_each(|(r, c)| f(r, 0, c));
    } else {
        for (r, row) in y.chunks_mut(n).enumerate() {
            row.par_chunks_mut(PAR_MIN)
                .enumerate()
                .for_each(|(k, c)| f(r, k * PAR_MIN, c));
        }
    }
}

/// For every row of `y` (rows × n) where `active` (all rows when `active` is empty), runs
/// `f(row, offset, chunk)` over chunks of `chunk` elements (the last may be shorter), in
/// parallel, and returns per row the sum of the chunks' results in chunk order (0 for
/// inactive rows).
pub(super) fn row_chunks_sum<T: Send + Sync, A: Float>(
    y: &mut [T],
    n: usize,
    chunk: usize,
    active: &[bool],
    f: impl Fn(usize, usize, &mut [T]) -> A + Sync,
) -> Vec<A> {
    if n == 0 {
        return vec![A::zero(); active.len()];
    }
    let chunk = chunk.max(1);
    let on = |r: usize| active.is_empty() || active[r];
    let row = |r: usize, yr: &mut [T]| -> A {
        if !on(r) {
            return A::zero();
        }
        if n <= chunk {
            return f(r, 0, yr);
        }
        let parts: Vec<A> = yr
            .par_chunks_mut(chunk)
            .enumerate()
            .map(|(k, c)| f(r, k * chunk, c))
            .collect();
        parts.into_iter().sum()
    };
    if y.len() < PAR_MIN {
        y.chunks_mut(n)
            .enumerate()
            .map(|(r, c)| row(r, c))
            .collect()
    } else {
        y.par_chunks_mut(n)
            .enumerate()
            .map(|(r, c)| row(r, c))
            .collect()
    }
}

/// `v` in the accumulator type `A` (exact for `f32`/`f64` into `f64`; an identity for `f64`).
#[inline(always)]
fn wide<T: Float, A: Float>(v: T) -> A {
    A::from_f64(monomorph_core::Real::as_f64(v))
}

/// Σ a·b in the accumulator type `A` with [`LANES`] accumulators.
#[inline(always)]
pub(super) fn dot_lanes<T: Float, A: Float>(a: &[T], b: &[T]) -> A {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [A::zero(); LANES];
    let mut ia = a.chunks_exact(LANES);
    let mut ib = b.chunks_exact(LANES);
    for (ca, cb) in (&mut ia).zip(&mut ib) {
        for j in 0..LANES {
            acc[j] += wide::<T, A>(ca[j]) * wide(cb[j]);
        }
    }
    let mut s = A::zero();
    for (&x, &y) in ia.remainder().iter().zip(ib.remainder()) {
        s += wide::<T, A>(x) * wide(y);
    }
    acc.iter().copied().sum::<A>() + s
}

/// `x += a·d`, `r −= a·q` over one chunk; returns (Σ r², Σ r·q if `RQ`) of the new `r`, in
/// the accumulator type `A`.
#[inline(always)]
fn update_chunk<T: Float, A: Float, const RQ: bool>(
    a: T,
    dc: &[T],
    qc: &[T],
    xc: &mut [T],
    rc: &mut [T],
) -> (A, A) {
    let len = xc.len();
    let (dc, qc, rc) = (&dc[..len], &qc[..len], &mut rc[..len]);
    let mut acc = [A::zero(); LANES];
    let mut acq = [A::zero(); LANES];
    let full = len / LANES * LANES;
    let (xh, xt) = xc.split_at_mut(full);
    let (rh, rt) = rc.split_at_mut(full);
    for (((xb, rb), db), qb) in xh
        .chunks_exact_mut(LANES)
        .zip(rh.chunks_exact_mut(LANES))
        .zip(dc[..full].chunks_exact(LANES))
        .zip(qc[..full].chunks_exact(LANES))
    {
        for j in 0..LANES {
            xb[j] += a * db[j];
            let nr = rb[j] - a * qb[j];
            rb[j] = nr;
            let f = wide::<T, A>(nr);
            acc[j] += f * f;
            if RQ {
                acq[j] += f * wide(qb[j]);
            }
        }
    }
    let (mut s, mut sq) = (
        acc.iter().copied().sum::<A>(),
        acq.iter().copied().sum::<A>(),
    );
    for i in 0..xt.len() {
        xt[i] += a * dc[full + i];
        let nr = rt[i] - a * qc[full + i];
        rt[i] = nr;
        s += wide::<T, A>(nr) * wide(nr);
        if RQ {
            sq += wide::<T, A>(nr) * wide(qc[full + i]);
        }
    }
    (s, sq)
}

widest_simd! {
    /// [`update_chunk`] without `r·q`, at the widest vector width the CPU has (the same
    /// arithmetic and lane sums, hence the same bits, on every path).
    fn update_chunk_rr<T: Float, A: Float>(
        a: T,
        dc: &[T],
        qc: &[T],
        xc: &mut [T],
        rc: &mut [T],
    ) -> (A, A) = update_chunk::<T, A, false>;
}

widest_simd! {
    /// [`update_chunk`] with `r·q` (CG-adaptive's), at the widest vector width.
    fn update_chunk_rq<T: Float, A: Float>(
        a: T,
        dc: &[T],
        qc: &[T],
        xc: &mut [T],
        rc: &mut [T],
    ) -> (A, A) = update_chunk::<T, A, true>;
}

widest_simd! {
    /// [`dot_lanes`] at the widest vector width.
    fn dot_wide<T: Float, A: Float>(a: &[T], b: &[T]) -> A = dot_lanes;
}

widest_simd! {
    /// `y = x + β·y` over one chunk, returning `Σ x·y` of the new `y` when `dot` (0 otherwise),
    /// at the widest vector width.
    fn xpay_chunk<T: Float, A: Float>(beta: T, xs: &[T], c: &mut [T], dot: bool) -> A =
        xpay_chunk_impl;
}

/// The body of [`xpay_chunk`].
#[inline(always)]
fn xpay_chunk_impl<T: Float, A: Float>(beta: T, xs: &[T], c: &mut [T], dot: bool) -> A {
    let xs = &xs[..c.len()];
    for (v, &xv) in c.iter_mut().zip(xs) {
        *v = xv + beta * *v;
    }
    if dot { dot_lanes(xs, c) } else { A::zero() }
}

/// The Laplacian of one row, `out` = lines `[line0, line0 + out.len()/nx)` of the padded
/// `(nz, ny, nx)` grid; returns Σ x·out over those lines when `dot`. Sum order per point, as
/// PhiFlow's `laplace`: centre, then slowest axis to fastest, lower neighbour then upper.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn laplacian_lines_impl<T: Float, A: Float>(
    g: [usize; 3],
    nd: usize,
    periodic: bool,
    xv: &[T],
    zeros: &[T],
    line0: usize,
    out: &mut [T],
    dot: bool,
    stream: bool,
) -> A {
    let [nz, ny, nx] = g;
    let centre = T::from_f64(-2.0 * nd as f64);
    let zero = T::zero();
    // Line (iz, iy) of the neighbour along an axis, or `zeros` outside a Dirichlet grid.
    let line = |iz: usize, iy: usize| &xv[(iz * ny + iy) * nx..(iz * ny + iy + 1) * nx];
    let neighbour = |c: usize, len: usize, up: bool, present: bool| -> Option<usize> {
        if !present {
            return None;
        }
        if up {
            if c + 1 < len {
                Some(c + 1)
            } else if periodic {
                Some(0)
            } else {
                None
            }
        } else if c > 0 {
            Some(c - 1)
        } else if periodic {
            Some(len - 1)
        } else {
            None
        }
    };
    let mut total = A::zero();
    // Each line is computed into `buf` (in L1), then written to its place in `out` (with
    // streaming stores when `stream`); the upper neighbour along the slowest axis (`stride` lines on, the line that comes from
    // memory) is asked for `ahead` lines before it is needed.
    let mut buf = vec![zero; nx];
    let stride = match nd {
        3.. => ny,
        2 => 1,
        _ => 0,
    };
    let ahead = prefetch_ahead::<T>(nx);
    for (k, dst) in out.chunks_mut(nx).enumerate() {
        let l = line0 + k;
        let (iz, iy) = (l / ny, l % ny);
        let xc = line(iz, iy);
        let pl = l + stride + ahead;
        if stride > 0 && pl < nz * ny {
            prefetch_line(&xv[pl * nx..(pl + 1) * nx]);
        }
        let o = &mut buf[..];
        let zd = neighbour(iz, nz, false, nd >= 3).map_or(zeros, |z| line(z, iy));
        let zu = neighbour(iz, nz, true, nd >= 3).map_or(zeros, |z| line(z, iy));
        let yd = neighbour(iy, ny, false, nd >= 2).map_or(zeros, |y| line(iz, y));
        let yu = neighbour(iy, ny, true, nd >= 2).map_or(zeros, |y| line(iz, y));
        let at = |i: isize| -> T {
            if i >= 0 && (i as usize) < nx {
                xc[i as usize]
            } else if periodic {
                xc[i.rem_euclid(nx as isize) as usize]
            } else {
                zero
            }
        };
        let point = |i: usize| -> T {
            centre * xc[i] + zd[i] + zu[i] + yd[i] + yu[i] + at(i as isize - 1) + at(i as isize + 1)
        };
        o[0] = point(0);
        if nx > 1 {
            // Interior: no branches and slices of one known length, so the loop vectorises.
            let m = nx - 2;
            let o_in = &mut o[1..1 + m];
            let (xl, xm, xr) = (&xc[..m], &xc[1..1 + m], &xc[2..2 + m]);
            let (zd, zu, yd, yu) = (&zd[1..1 + m], &zu[1..1 + m], &yd[1..1 + m], &yu[1..1 + m]);
            for i in 0..m {
                o_in[i] = centre * xm[i] + zd[i] + zu[i] + yd[i] + yu[i] + xl[i] + xr[i];
            }
            o[nx - 1] = point(nx - 1);
        }
        if dot {
            total += dot_lanes(xc, o);
        }
        store_line(o, dst, stream);
    }
    if stream {
        fence_streaming();
    }
    total
}

widest_simd! {
    /// [`laplacian_lines_impl`] at the widest vector width (the same bits on every path).
    fn laplacian_lines<T: Float, A: Float>(
        g: [usize; 3],
        nd: usize,
        periodic: bool,
        xv: &[T],
        zeros: &[T],
        line0: usize,
        out: &mut [T],
        dot: bool,
        stream: bool,
    ) -> A = laplacian_lines_impl;
}

impl<P: Precision> Cpu<P> {
    fn laplacian_impl<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
        active: &[bool],
        dot: bool,
    ) -> Result<Vec<A<P>>> {
        let op = if dot { "laplacian_dot" } else { "laplacian" };
        let LaplacianDims { rows, n, grid3: g } = check_laplacian(op, grid, x.shape(), y.shape())?;
        if dot {
            check_active(op, active, rows)?;
        }
        let nx = g[2];
        let zeros = vec![T::zero(); nx];
        let dx = data("x", x)?;
        let nd = grid.len();
        let periodic = boundary == Boundary::Periodic;
        // Whole lines per chunk, and large chunks: each chunk also reads the planes above and
        // below it, so short chunks would stream the input several times.
        let chunk = (STENCIL_CHUNK / nx).max(1) * nx;
        // Large outputs (not read back from cache by the next pass) are streamed to memory.
        let stream = streams::<T>(y.len());
        let out = row_chunks_sum(data_mut("y", y)?, n, chunk, active, |r, off, o| {
            let xv = &dx[r * n..(r + 1) * n];
            laplacian_lines(g, nd, periodic, xv, &zeros, off / nx, o, dot, stream)
        });
        Ok(out)
    }
}

impl<P: Precision> Linalg for Cpu<P> {
    fn matvec_dense<T: Float>(
        &self,
        a: &ArrayD<T>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            let DenseDims {
                batch,
                m,
                n,
                per_entry,
            } = check_matvec_dense(a.shape(), x.shape(), y.shape())?;
            let (da, dx) = (data("a", a)?, data("x", x)?);
            let dy = data_mut("y", y)?;
            let body = |idx: usize, out: &mut T| {
                let (b, i) = (idx / m.max(1), idx % m.max(1));
                let row = if per_entry {
                    &da[(b * m + i) * n..(b * m + i + 1) * n]
                } else {
                    &da[i * n..(i + 1) * n]
                };
                let xv = &dx[b * n..(b + 1) * n];
                let mut acc = T::zero();
                for j in 0..n {
                    acc += row[j] * xv[j];
                }
                *out = acc;
            };
            if batch * m * n >= PAR_MIN {
                dy.par_iter_mut().enumerate().for_each(|(i, o)| body(i, o));
            } else {
                dy.iter_mut().enumerate().for_each(|(i, o)| body(i, o));
            }
            Ok(())
        })
    }

    fn matvec_csr<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| self.csr_impl(a, x, y, &[], false).map(|_| ()))
    }

    fn laplacian<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| {
            self.laplacian_impl(grid, boundary, x, y, &[], false)
                .map(|_| ())
        })
    }

    fn stencil<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
    ) -> Result<()> {
        self.install(|| self.stencil_impl(st, x, y, &[], false).map(|_| ()))
    }

    fn stencil_dot<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        self.install(|| self.stencil_impl(st, x, y, active, true))
    }

    fn scale_rows<T: Float>(&self, alpha: &[T], x: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            let (_, n) = check_scale_rows(alpha, x.shape())?;
            rows_mut(data_mut("x", x)?, n, |r, _, c| {
                let a = alpha[r];
                for v in c {
                    *v *= a;
                }
            });
            Ok(())
        })
    }

    fn axpy_rows<T: Float>(&self, alpha: &[T], x: &ArrayD<T>, y: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            let (_, n) = check_axpy_rows(alpha, x.shape(), y.shape())?;
            let dx = data("x", x)?;
            rows_mut(data_mut("y", y)?, n, |r, off, c| {
                let a = alpha[r];
                if a == T::zero() {
                    return;
                }
                let xs = &dx[r * n + off..r * n + off + c.len()];
                for (v, &xv) in c.iter_mut().zip(xs) {
                    *v += a * xv;
                }
            });
            Ok(())
        })
    }

    fn xpay_rows<T: Float>(&self, x: &ArrayD<T>, beta: &[T], y: &mut ArrayD<T>) -> Result<()> {
        self.install(|| {
            let (_, n) = check_xpay_rows("xpay_rows", x.shape(), beta, y.shape(), None)?;
            let dx = data("x", x)?;
            rows_mut(data_mut("y", y)?, n, |r, off, c| {
                let b = beta[r];
                let xs = &dx[r * n + off..r * n + off + c.len()];
                for (v, &xv) in c.iter_mut().zip(xs) {
                    *v = xv + b * *v;
                }
            });
            Ok(())
        })
    }

    fn axpy_pair_rows<T: Float>(
        &self,
        alpha: &[T],
        d: &ArrayD<T>,
        q: &ArrayD<T>,
        x: &mut ArrayD<T>,
        r: &mut ArrayD<T>,
    ) -> Result<Vec<A<P>>> {
        self.install(|| self.update_xr(alpha, d, q, x, r, false).map(|(rr, _)| rr))
    }

    fn axpy_pair_rows_dots<T: Float>(
        &self,
        alpha: &[T],
        d: &ArrayD<T>,
        q: &ArrayD<T>,
        x: &mut ArrayD<T>,
        r: &mut ArrayD<T>,
    ) -> Result<(Vec<A<P>>, Vec<A<P>>)> {
        self.install(|| self.update_xr(alpha, d, q, x, r, true))
    }

    fn xpay_rows_where<T: Float>(
        &self,
        x: &ArrayD<T>,
        beta: &[T],
        y: &mut ArrayD<T>,
        active: &[bool],
    ) -> Result<()> {
        self.install(|| self.xpay_impl(x, beta, y, active, false).map(|_| ()))
    }

    fn xpay_rows_dot<T: Float>(
        &self,
        x: &ArrayD<T>,
        beta: &[T],
        y: &mut ArrayD<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        self.install(|| self.xpay_impl(x, beta, y, active, true))
    }

    fn laplacian_dot<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        self.install(|| self.laplacian_impl(grid, boundary, x, y, active, true))
    }

    fn matvec_dense_dot<T: Float>(
        &self,
        a: &ArrayD<T>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        self.install(|| {
            let DenseDims { batch: rows, n, .. } =
                check_matvec_dense_dot(a.shape(), x.shape(), y.shape(), active)?;
            // Dense products are O(n²) per row: the extra O(n) pass for the dot costs nothing.
            self.matvec_dense(a, x, y)?;
            let (dx, dy) = (data("x", x)?, data("y", y)?);
            Ok((0..rows)
                .map(|r| {
                    if active[r] {
                        dot_lanes(&dx[r * n..(r + 1) * n], &dy[r * n..(r + 1) * n])
                    } else {
                        A::<P>::zero()
                    }
                })
                .collect())
        })
    }

    fn matvec_csr_dot<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
        active: &[bool],
    ) -> Result<Vec<A<P>>> {
        self.install(|| {
            check_matvec_csr_dot(a, x.shape(), y.shape(), active)?;
            self.csr_impl(a, x, y, active, true)
        })
    }
}

impl<P: Precision> Cpu<P> {
    /// CSR product over the rows where `active` (all when empty), with Σ x·y per row if `dot`.
    fn csr_impl<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
        active: &[bool],
        dot: bool,
    ) -> Result<Vec<A<P>>> {
        let nnz = a.nnz();
        let (_batch, per_entry) = check_matvec_csr(a, x.shape(), y.shape())?;
        let n = a.ncols;
        let (ip, ix, dv, dx) = (
            data("indptr", &a.indptr)?,
            data("indices", &a.indices)?,
            data("data", &a.data)?,
            data("x", x)?,
        );
        let m = a.nrows;
        let out = row_chunks_sum(data_mut("y", y)?, m, CHUNK / 8, active, |b, off, out| {
            let xv = &dx[b * n..(b + 1) * n];
            let vals = if per_entry {
                &dv[b * nnz..(b + 1) * nnz]
            } else {
                dv
            };
            let mut total = A::<P>::zero();
            for (k, o) in out.iter_mut().enumerate() {
                let i = off + k;
                let (s, e) = (ip[i] as usize, ip[i + 1] as usize);
                let mut acc = T::zero();
                for p in s..e {
                    acc += vals[p] * xv[ix[p] as usize];
                }
                *o = acc;
                if dot {
                    total += wide::<T, A<P>>(xv[i]) * wide(acc);
                }
            }
            total
        });
        Ok(out)
    }

    /// `x += αd`, `r −= αq` (rows with α = 0 untouched), returning r·r and (if `rq`) r·q.
    fn update_xr<T: Float>(
        &self,
        alpha: &[T],
        d: &ArrayD<T>,
        q: &ArrayD<T>,
        x: &mut ArrayD<T>,
        r: &mut ArrayD<T>,
        rq: bool,
    ) -> Result<(Vec<A<P>>, Vec<A<P>>)> {
        let op = if rq {
            "axpy_pair_rows_dots"
        } else {
            "axpy_pair_rows"
        };
        let (rows, n) =
            check_axpy_pair_rows(op, alpha, d.shape(), q.shape(), x.shape(), r.shape())?;
        let (dd, dq) = (data("d", d)?, data("q", q)?);
        let dxm = data_mut("x", x)?;
        let drm = data_mut("r", r)?;
        if n == 0 {
            return Ok((vec![A::<P>::zero(); rows], vec![A::<P>::zero(); rows]));
        }
        // Per (row, chunk): (r·r, r·q) partials, combined per row in chunk order.
        let kernel = |a: T, o: usize, xc: &mut [T], rc: &mut [T]| -> (A<P>, A<P>) {
            let (dc, qc) = (&dd[o..o + xc.len()], &dq[o..o + xc.len()]);
            if a == T::zero() {
                let rr = dot_wide(rc, rc);
                return (rr, if rq { dot_wide(rc, qc) } else { A::<P>::zero() });
            }
            if rq {
                update_chunk_rq::<T, A<P>>(a, dc, qc, xc, rc)
            } else {
                update_chunk_rr::<T, A<P>>(a, dc, qc, xc, rc)
            }
        };
        let row = |b: usize, xr: &mut [T], rr: &mut [T]| -> (A<P>, A<P>) {
            let a = alpha[b];
            let base = b * n;
            if n <= CHUNK {
                return kernel(a, base, xr, rr);
            }
            let parts: Vec<(A<P>, A<P>)> = xr
                .par_chunks_mut(CHUNK)
                .zip(rr.par_chunks_mut(CHUNK))
                .enumerate()
                .map(|(k, (xc, rc))| kernel(a, base + k * CHUNK, xc, rc))
                .collect();
            parts
                .into_iter()
                .fold((A::<P>::zero(), A::<P>::zero()), |s, p| {
                    (s.0 + p.0, s.1 + p.1)
                })
        };
        let res: Vec<(A<P>, A<P>)> = if rows * n < PAR_MIN {
            dxm.chunks_mut(n)
                .zip(drm.chunks_mut(n))
                .enumerate()
                .map(|(b, (xr, rr))| row(b, xr, rr))
                .collect()
        } else {
            dxm.par_chunks_mut(n)
                .zip(drm.par_chunks_mut(n))
                .enumerate()
                .map(|(b, (xr, rr))| row(b, xr, rr))
                .collect()
        };
        Ok(res.into_iter().unzip())
    }

    /// `y = x + βy` on active rows (all when `active` is empty), with y·x per row if `dot`.
    fn xpay_impl<T: Float>(
        &self,
        x: &ArrayD<T>,
        beta: &[T],
        y: &mut ArrayD<T>,
        active: &[bool],
        dot: bool,
    ) -> Result<Vec<A<P>>> {
        let op = if dot {
            "xpay_rows_dot"
        } else {
            "xpay_rows_where"
        };
        let (_, n) = check_xpay_rows(op, x.shape(), beta, y.shape(), Some(active))?;
        let dx = data("x", x)?;
        Ok(row_chunks_sum(
            data_mut("y", y)?,
            n,
            CHUNK,
            active,
            |r, off, c| {
                let xs = &dx[r * n + off..r * n + off + c.len()];
                xpay_chunk::<T, A<P>>(beta[r], xs, c, dot)
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use monomorph_core::algo::cg::{
        DenseOperator, Method, Preconditioner, SolveParams, conjugate_gradient,
    };
    use monomorph_core::{AccumOf, Arr, Memory, Ratio, Real, Single};
    use ndarray::{Array2, IxDyn};

    /// A precision set whose accumulator is not `f64` (`f32` sums): what a reduced-precision
    /// set naming its own accumulator looks like. Nothing but `Accum` differs from [`Single`].
    #[derive(Debug, Default, Clone, Copy)]
    struct F32Sums;
    impl Precision for F32Sums {
        type Float = f32;
        type Int = i32;
        type Accum = f32;
        const NAME: &'static str = "single";
    }

    /// A row whose `r·r` depends on the accumulator: lane 0 of the sum holds `4096² = 2²⁴`,
    /// then `1` twice; `f32` sums lose each `1` (2²⁴ + 1 rounds to even), `f64` keeps both.
    fn lossy_row() -> ndarray::ArrayD<f32> {
        let mut r = ndarray::ArrayD::<f32>::zeros(IxDyn(&[1, 24]));
        r[[0, 0]] = 4096.0;
        r[[0, LANES]] = 1.0;
        r[[0, 2 * LANES]] = 1.0;
        r
    }

    /// `r·r` (α = 0, so `r` is kept) from `axpy_pair_rows` and from the device-scalar
    /// `axpy_pair_rows_ratio`, in `P`'s accumulator type.
    fn rr<P: Precision>() -> (AccumOf<Cpu<P>>, AccumOf<Cpu<P>>) {
        let b = Cpu::<P>::new();
        let row: ndarray::ArrayD<P::Float> = lossy_row().mapv(|v| P::Float::from_f64(v as f64));
        let zeros = b.zeros::<P::Float>(&[1, 24]).expect("zeros");
        let mut x = b.zeros::<P::Float>(&[1, 24]).expect("zeros");
        let mut r = b.upload(row.view()).expect("upload");
        // The annotations are the check: they stop compiling if these ops return or take
        // `f64` where the accumulator type belongs.
        let host: Vec<AccumOf<Cpu<P>>> = b
            .axpy_pair_rows(&[P::Float::zero()], &zeros, &zeros, &mut x, &mut r)
            .expect("axpy_pair_rows");
        let mut s: Arr<Cpu<P>, AccumOf<Cpu<P>>> = b.zeros(&[3, 1]).expect("zeros");
        let mask = b
            .upload(ndarray::ArrayD::from_elem(IxDyn(&[1]), 1i32).view())
            .expect("upload");
        // s[1] = 0: α = s[0]/s[1] is 0, and r·r goes to slot 2.
        b.axpy_pair_rows_ratio(
            &mut s,
            Ratio::new(0, 1),
            &mask,
            &zeros,
            &zeros,
            &mut x,
            &mut r,
            2,
            None,
            None,
        )
        .expect("axpy_pair_rows_ratio");
        let dev: ndarray::ArrayD<AccumOf<Cpu<P>>> = b.download(&s).expect("download");
        (host[0], dev[[2, 0]])
    }

    /// The Laplacian kernel with streaming stores (what the op does on large grids) writes
    /// the same bits and returns the same dot as with plain stores, on 3-, 2- and 1-D grids,
    /// Dirichlet and periodic, lines of any length.
    #[test]
    fn laplacian_lines_stream_the_same_bits() {
        for (grid, nd) in [([5, 6, 37], 3), ([1, 9, 21], 2), ([1, 1, 40], 1)] {
            let n: usize = grid.iter().product();
            let x: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1013) as f64 / 97.0).collect();
            let zeros = vec![0.0; grid[2]];
            for periodic in [false, true] {
                let mut plain = vec![f64::NAN; n];
                let mut streamed = vec![f64::NAN; n];
                let a: f64 =
                    laplacian_lines(grid, nd, periodic, &x, &zeros, 0, &mut plain, true, false);
                let b: f64 =
                    laplacian_lines(grid, nd, periodic, &x, &zeros, 0, &mut streamed, true, true);
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{grid:?} periodic {periodic}: dot"
                );
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&plain),
                    bits(&streamed),
                    "{grid:?} periodic {periodic}"
                );
                assert!(plain.iter().all(|v| v.is_finite()));
            }
        }
    }

    #[test]
    fn cg_dot_products_are_summed_in_the_accumulator_type() {
        let exact = 16_777_218.0; // 2²⁴ + 2
        assert_eq!(rr::<Single>(), (exact, exact), "f64 accumulator");
        let narrow: (f32, f32) = rr::<F32Sums>();
        assert_eq!(narrow, (16_777_216.0, 16_777_216.0), "f32 accumulator");
    }

    #[test]
    fn cg_runs_with_an_accumulator_other_than_f64() {
        // A well-conditioned SPD system, solved with f32 sums (Cg, CgAdaptive, Jacobi).
        let n = 16;
        let a = Array2::<f32>::from_shape_fn((n, n), |(i, j)| match i.abs_diff(j) {
            0 => 4.0,
            1 => -1.0,
            _ => 0.0,
        });
        let y = Array2::<f32>::from_shape_fn((2, n), |(k, i)| ((i * 7 + k) % 5) as f32 - 2.0);
        let b = Cpu::<F32Sums>::new();
        let op = DenseOperator::new(&b, a.view().into_dyn()).expect("operator");
        let yd = b.upload(y.view().into_dyn()).expect("upload");
        for (method, pre) in [
            (Method::Cg, Preconditioner::None),
            (Method::Cg, Preconditioner::Jacobi),
            (Method::CgAdaptive, Preconditioner::None),
        ] {
            let mut p = SolveParams::default().with_tolerances(1e-5, 0.0, 100);
            p.method = method;
            p.preconditioner = pre;
            let res = conjugate_gradient(&b, &op, &yd, None, &p).expect("solve");
            assert!(
                res.converged.iter().all(|&c| c),
                "{method:?} {pre:?}: {res:?}"
            );
            let x: ndarray::ArrayD<f32> = b.download(&res.x).expect("download");
            for k in 0..2 {
                for i in 0..n {
                    let ax: f32 = (0..n).map(|j| a[[i, j]] * x[[k, j]]).sum();
                    assert!((ax - y[[k, i]]).abs() < 1e-4, "{method:?} {pre:?} row {k}");
                }
            }
        }
    }
}
