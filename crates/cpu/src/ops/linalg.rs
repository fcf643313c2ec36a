use monomorph_core::error::fmt_shape;
use monomorph_core::{Boundary, CsrMatrix, Error, Float, Linalg, Precision, Result};
use ndarray::ArrayD;
use rayon::prelude::*;

use super::{data, data_mut};
use crate::Cpu;
use crate::util::{PAR_MIN, per_row, rows_of, same_shape};

/// Runs `f(row, y_row)` for every row of `y` (rows × n), in parallel over rows or, for one long
/// row, over chunks of it (`f` then gets the chunk offset).
fn rows_mut<T: Send + Sync>(
    y: &mut [T],
    n: usize,
    f: impl Fn(usize, usize, &mut [T]) + Sync,
) {
    if n == 0 {
        return;
    }
    let rows = y.len() / n;
    if y.len() < PAR_MIN {
        for (r, c) in y.chunks_mut(n).enumerate() {
            f(r, 0, c);
        }
    } else if rows >= rayon::current_num_threads() * 2 || n < PAR_MIN {
        y.par_chunks_mut(n).enumerate().for_each(|(r, c)| f(r, 0, c));
    } else {
        for (r, row) in y.chunks_mut(n).enumerate() {
            row.par_chunks_mut(PAR_MIN)
                .enumerate()
                .for_each(|(k, c)| f(r, k * PAR_MIN, c));
        }
    }
}

impl<P: Precision> Linalg for Cpu<P> {
    fn matvec_dense<T: Float>(&self, a: &ArrayD<T>, x: &ArrayD<T>, y: &mut ArrayD<T>) -> Result<()> {
        let (batch, n) = rows_of("x of matvec_dense", x.shape())?;
        let (m, an, per_entry) = match a.shape() {
            [m, n] => (*m, *n, false),
            [b, m, n] if *b == batch => (*m, *n, true),
            s => {
                return Err(Error::shape(
                    "matrix of matvec_dense",
                    format!("(m, {n}) or ({batch}, m, {n})"),
                    fmt_shape(s),
                ));
            }
        };
        if an != n {
            return Err(Error::shape(
                "matrix of matvec_dense (columns vs x)",
                format!("{n} columns"),
                fmt_shape(a.shape()),
            ));
        }
        same_shape("y of matvec_dense", &[batch, m], y.shape())?;
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
    }

    fn matvec_csr<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
    ) -> Result<()> {
        let (batch, n) = rows_of("x of matvec_csr", x.shape())?;
        if n != a.ncols {
            return Err(Error::shape("x of matvec_csr", format!("(batch, {})", a.ncols), fmt_shape(x.shape())));
        }
        same_shape("y of matvec_csr", &[batch, a.nrows], y.shape())?;
        let nnz = a.nnz();
        let per_entry = match a.data.shape() {
            [k] if *k == nnz => false,
            [b, k] if *b == batch && *k == nnz => true,
            s => {
                return Err(Error::shape(
                    "data of CSR matrix",
                    format!("({nnz},) or ({batch}, {nnz})"),
                    fmt_shape(s),
                ));
            }
        };
        let (ip, ix, dv, dx) = (
            data("indptr", &a.indptr)?,
            data("indices", &a.indices)?,
            data("data", &a.data)?,
            data("x", x)?,
        );
        let m = a.nrows;
        rows_mut(data_mut("y", y)?, m, |b, off, out| {
            let xv = &dx[b * n..(b + 1) * n];
            let vals = if per_entry { &dv[b * nnz..(b + 1) * nnz] } else { dv };
            for (k, o) in out.iter_mut().enumerate() {
                let i = off + k;
                let (s, e) = (ip[i] as usize, ip[i + 1] as usize);
                let mut acc = T::zero();
                for p in s..e {
                    acc += vals[p] * xv[ix[p] as usize];
                }
                *o = acc;
            }
        });
        Ok(())
    }

    fn laplacian<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
    ) -> Result<()> {
        if grid.is_empty() || grid.len() > 3 || grid.contains(&0) {
            return Err(Error::invalid(
                "grid",
                format!("1 to 3 non-zero axes expected, got {}", fmt_shape(grid)),
            ));
        }
        let n: usize = grid.iter().product();
        let (batch, xn) = rows_of("x of laplacian", x.shape())?;
        if xn != n {
            return Err(Error::shape("x of laplacian", format!("(batch, {n})"), fmt_shape(x.shape())));
        }
        same_shape("y of laplacian", x.shape(), y.shape())?;
        let _ = batch;
        let dx = data("x", x)?;
        // Pad the grid to 3-D as (nz, ny, nx).
        let mut g = [1usize; 3];
        g[3 - grid.len()..].copy_from_slice(grid);
        let [nz, ny, nx] = g;
        let nd = grid.len();
        let centre = T::from_f64(-2.0 * nd as f64);
        let periodic = boundary == Boundary::Periodic;
        rows_mut(data_mut("y", y)?, n, |b, off, out| {
            let xv = &dx[b * n..(b + 1) * n];
            // Neighbour in one direction along an axis of length `len` with stride `st`.
            let nb = |idx: usize, c: usize, len: usize, st: usize, up: bool| -> T {
                if len == 1 && !periodic {
                    return T::zero();
                }
                if up {
                    if c + 1 < len {
                        xv[idx + st]
                    } else if periodic {
                        xv[idx + st - len * st]
                    } else {
                        T::zero()
                    }
                } else if c > 0 {
                    xv[idx - st]
                } else if periodic {
                    xv[idx + (len - 1) * st]
                } else {
                    T::zero()
                }
            };
            for (k, o) in out.iter_mut().enumerate() {
                let idx = off + k;
                let ix = idx % nx;
                let iy = (idx / nx) % ny;
                let iz = idx / (nx * ny);
                let mut acc = centre * xv[idx];
                if nd >= 1 {
                    acc += nb(idx, ix, nx, 1, false) + nb(idx, ix, nx, 1, true);
                }
                if nd >= 2 {
                    acc += nb(idx, iy, ny, nx, false) + nb(idx, iy, ny, nx, true);
                }
                if nd >= 3 {
                    acc += nb(idx, iz, nz, nx * ny, false) + nb(idx, iz, nz, nx * ny, true);
                }
                *o = acc;
            }
        });
        Ok(())
    }

    fn scale_rows<T: Float>(&self, alpha: &[T], x: &mut ArrayD<T>) -> Result<()> {
        let (rows, n) = rows_of("x of scale_rows", x.shape())?;
        per_row("alpha of scale_rows", alpha, rows)?;
        rows_mut(data_mut("x", x)?, n, |r, _, c| {
            let a = alpha[r];
            for v in c {
                *v *= a;
            }
        });
        Ok(())
    }

    fn axpy_rows<T: Float>(&self, alpha: &[T], x: &ArrayD<T>, y: &mut ArrayD<T>) -> Result<()> {
        same_shape("axpy_rows: y vs x", x.shape(), y.shape())?;
        let (rows, n) = rows_of("x of axpy_rows", x.shape())?;
        per_row("alpha of axpy_rows", alpha, rows)?;
        let dx = data("x", x)?;
        rows_mut(data_mut("y", y)?, n, |r, off, c| {
            let a = alpha[r];
            let xs = &dx[r * n + off..r * n + off + c.len()];
            for (v, &xv) in c.iter_mut().zip(xs) {
                *v += a * xv;
            }
        });
        Ok(())
    }

    fn xpay_rows<T: Float>(&self, x: &ArrayD<T>, beta: &[T], y: &mut ArrayD<T>) -> Result<()> {
        same_shape("xpay_rows: y vs x", x.shape(), y.shape())?;
        let (rows, n) = rows_of("x of xpay_rows", x.shape())?;
        per_row("beta of xpay_rows", beta, rows)?;
        let dx = data("x", x)?;
        rows_mut(data_mut("y", y)?, n, |r, off, c| {
            let b = beta[r];
            let xs = &dx[r * n + off..r * n + off + c.len()];
            for (v, &xv) in c.iter_mut().zip(xs) {
                *v = xv + b * *v;
            }
        });
        Ok(())
    }

    fn cg_update_xr<T: Float>(
        &self,
        alpha: &[T],
        d: &ArrayD<T>,
        q: &ArrayD<T>,
        x: &mut ArrayD<T>,
        r: &mut ArrayD<T>,
    ) -> Result<Vec<f64>> {
        same_shape("cg_update_xr: q vs d", d.shape(), q.shape())?;
        same_shape("cg_update_xr: x vs d", d.shape(), x.shape())?;
        same_shape("cg_update_xr: r vs d", d.shape(), r.shape())?;
        let (rows, n) = rows_of("d of cg_update_xr", d.shape())?;
        per_row("alpha of cg_update_xr", alpha, rows)?;
        let (dd, dq) = (data("d", d)?, data("q", q)?);
        let dxm = data_mut("x", x)?;
        let drm = data_mut("r", r)?;
        if n == 0 {
            return Ok(vec![0.0; rows]);
        }
        // Chunks of (row, range) processed in parallel; partial r·r combined per row in order.
        let chunk = PAR_MIN.min(n).max(1);
        let per_row_chunks = n.div_ceil(chunk);
        let partial: Vec<f64> = dxm
            .par_chunks_mut(n)
            .zip(drm.par_chunks_mut(n))
            .enumerate()
            .flat_map_iter(|(b, (xr, rr))| {
                let a = alpha[b];
                let base = b * n;
                xr.chunks_mut(chunk)
                    .zip(rr.chunks_mut(chunk))
                    .enumerate()
                    .map(|(k, (xc, rc))| {
                        let o = base + k * chunk;
                        let mut acc = 0.0f64;
                        for i in 0..xc.len() {
                            xc[i] += a * dd[o + i];
                            let nr = rc[i] - a * dq[o + i];
                            rc[i] = nr;
                            let f = nr.to_f64();
                            acc += f * f;
                        }
                        acc
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        Ok(partial
            .chunks(per_row_chunks)
            .map(|c| c.iter().sum())
            .collect())
    }
}
