//! The pressure-Poisson stencil (`Linalg::stencil`, `stencil_dot`) on the CPU: one pass over
//! the grid a line at a time, the per-cell flags deciding which faces are open (see
//! `monomorph_core::PoissonStencil` for the definition every backend computes).

use monomorph_core::{
    CELL_ACTIVE, Float, PoissonStencil, Precision, Result, StencilDims, check_active,
    check_stencil, face_bit,
};
use ndarray::ArrayD;

use super::linalg::{STENCIL_CHUNK, dot_lanes, row_chunks_sum};
use super::{data, data_mut};
use crate::Cpu;

/// `v` when bit `b` of `f` is set, else 0 (a select, so that the loops vectorise).
#[inline(always)]
fn sel<T: Float>(f: u8, b: u8, v: T) -> T {
    if f & b != 0 { v } else { T::zero() }
}

/// Number of open faces on padded axis `p` (0, 1 or 2) as `T`.
#[inline(always)]
fn open_count<T: Float>(f: u8, p: usize) -> T {
    let k = ((f >> (1 + 2 * p)) & 1) + ((f >> (2 + 2 * p)) & 1);
    T::from_f64(k as f64)
}

/// One axis term `(nb_lower + nb_upper) − k·x` of a cell.
#[inline(always)]
fn axis_term<T: Float>(f: u8, p: usize, lo: T, hi: T, x: T) -> T {
    sel(f, face_bit(p, false), lo) + sel(f, face_bit(p, true), hi) - open_count::<T>(f, p) * x
}

/// The stencil over lines `[line0, line0 + out.len()/nx)` of one row (`xv`, the whole row);
/// returns Σ x·out over those lines when `dot`.
#[allow(clippy::too_many_arguments)]
fn stencil_lines<T: Float>(
    d: &StencilDims,
    flags: &[u8],
    xv: &[T],
    zeros: &[T],
    line0: usize,
    out: &mut [T],
    dot: bool,
) -> f64 {
    let [nz, ny, nx] = d.grid3;
    let c = d.coef.map(T::from_f64);
    // The first real axis (1-D grids: x only; 2-D: y and x; 3-D: z, y and x).
    let first = d.coef.iter().position(|&v| v != 0.0).unwrap_or(2);
    let line = |iz: usize, iy: usize| &xv[(iz * ny + iy) * nx..(iz * ny + iy + 1) * nx];
    // The neighbour line along padded axis p (0 = z, 1 = y), wrapped on a periodic axis, or
    // `zeros` outside the grid (a Dirichlet ghost, or a closed face whose value is not used).
    let neighbour = |c: usize, len: usize, up: bool, p: usize| -> Option<usize> {
        if p < first {
            return None;
        }
        if up {
            if c + 1 < len {
                Some(c + 1)
            } else if d.periodic[p] {
                Some(0)
            } else {
                None
            }
        } else if c > 0 {
            Some(c - 1)
        } else if d.periodic[p] {
            Some(len - 1)
        } else {
            None
        }
    };
    let zero = T::zero();
    let mut total = 0.0f64;
    for (k, o) in out.chunks_mut(nx).enumerate() {
        let l = line0 + k;
        let (iz, iy) = (l / ny, l % ny);
        let xc = line(iz, iy);
        let fl = &flags[l * nx..(l + 1) * nx];
        let zd = neighbour(iz, nz, false, 0).map_or(zeros, |z| line(z, iy));
        let zu = neighbour(iz, nz, true, 0).map_or(zeros, |z| line(z, iy));
        let yd = neighbour(iy, ny, false, 1).map_or(zeros, |y| line(iz, y));
        let yu = neighbour(iy, ny, true, 1).map_or(zeros, |y| line(iz, y));
        let at = |i: isize| -> T {
            if i >= 0 && (i as usize) < nx {
                xc[i as usize]
            } else if d.periodic[2] {
                xc[i.rem_euclid(nx as isize) as usize]
            } else {
                zero
            }
        };
        let cell = |f: u8, x: T, zd: T, zu: T, yd: T, yu: T, xl: T, xr: T| -> T {
            if f & CELL_ACTIVE == 0 {
                return zero;
            }
            let sx = c[2] * axis_term(f, 2, xl, xr, x);
            match first {
                0 => c[0] * axis_term(f, 0, zd, zu, x) + c[1] * axis_term(f, 1, yd, yu, x) + sx,
                1 => c[1] * axis_term(f, 1, yd, yu, x) + sx,
                _ => sx,
            }
        };
        let point = |i: usize| -> T {
            cell(
                fl[i],
                xc[i],
                zd[i],
                zu[i],
                yd[i],
                yu[i],
                at(i as isize - 1),
                at(i as isize + 1),
            )
        };
        o[0] = point(0);
        if nx > 1 {
            // Interior: slices of one known length, selects instead of branches.
            let m = nx - 2;
            let o_in = &mut o[1..1 + m];
            let (xl, xm, xr) = (&xc[..m], &xc[1..1 + m], &xc[2..2 + m]);
            let (zd, zu, yd, yu) = (&zd[1..1 + m], &zu[1..1 + m], &yd[1..1 + m], &yu[1..1 + m]);
            let f_in = &fl[1..1 + m];
            for i in 0..m {
                o_in[i] = cell(f_in[i], xm[i], zd[i], zu[i], yd[i], yu[i], xl[i], xr[i]);
            }
            o[nx - 1] = point(nx - 1);
        }
        if dot {
            total += dot_lanes(xc, o);
        }
    }
    total
}

impl<P: Precision> Cpu<P> {
    /// The stencil over the rows where `active` (all when empty), with Σ x·y per row if `dot`.
    pub(super) fn stencil_impl<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &ArrayD<T>,
        y: &mut ArrayD<T>,
        active: &[bool],
        dot: bool,
    ) -> Result<Vec<f64>> {
        let op = if dot { "stencil_dot" } else { "stencil" };
        let (rows, n) = check_stencil(op, st, x.shape(), y.shape())?;
        if dot {
            check_active(op, active, rows)?;
        }
        let d = st.dims();
        let nx = d.grid3[2];
        let zeros = vec![T::zero(); nx];
        let dx = data("x", x)?;
        let flags = st.cell_flags();
        // Whole lines per chunk, and large chunks (each also reads the planes beside it).
        let chunk = (STENCIL_CHUNK / nx).max(1) * nx;
        Ok(row_chunks_sum(
            data_mut("y", y)?,
            n,
            chunk,
            active,
            |r, off, o| {
                let xv = &dx[r * n..(r + 1) * n];
                stencil_lines(&d, flags, xv, &zeros, off / nx, o, dot)
            },
        ))
    }
}
