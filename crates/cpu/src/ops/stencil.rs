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
/// returns Σ x·out over those lines when `dot`, in the accumulator type `A`.
#[allow(clippy::too_many_arguments)]
fn stencil_lines<T: Float, A: Float>(
    d: &StencilDims,
    flags: &[u8],
    xv: &[T],
    zeros: &[T],
    line0: usize,
    out: &mut [T],
    dot: bool,
) -> A {
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
    let two = T::from_f64(2.0);
    // The flags of an active cell with both faces open on every real axis.
    let full = (first..3).fold(CELL_ACTIVE, |v, p| {
        v | face_bit(p, false) | face_bit(p, true)
    });
    let mut total = A::zero();
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
            if f_in.iter().all(|&f| f == full) {
                // Every cell of the stretch active with all its faces open (the bulk of a
                // grid): the same expression as `cell` with every select taken and k = 2,
                // evaluated in the same order (bit-identical), without the per-cell flag
                // decoding, so the loop vectorises as the plain Laplacian's does.
                match first {
                    0 => {
                        for i in 0..m {
                            let x = xm[i];
                            o_in[i] = c[0] * ((zd[i] + zu[i]) - two * x)
                                + c[1] * ((yd[i] + yu[i]) - two * x)
                                + c[2] * ((xl[i] + xr[i]) - two * x);
                        }
                    }
                    1 => {
                        for i in 0..m {
                            let x = xm[i];
                            o_in[i] = c[1] * ((yd[i] + yu[i]) - two * x)
                                + c[2] * ((xl[i] + xr[i]) - two * x);
                        }
                    }
                    _ => {
                        for i in 0..m {
                            o_in[i] = c[2] * ((xl[i] + xr[i]) - two * xm[i]);
                        }
                    }
                }
            } else {
                for i in 0..m {
                    o_in[i] = cell(f_in[i], xm[i], zd[i], zu[i], yd[i], yu[i], xl[i], xr[i]);
                }
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
    ) -> Result<Vec<P::Accum>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use monomorph_core::{Double, Linalg, Real, Side, Single};
    use ndarray::IxDyn;

    /// The stencil of every cell by the per-cell definition (`axis_term` per real axis, summed
    /// in `stencil_lines`' order), for a 3-, 2- or 1-axis grid padded to three.
    fn per_cell<T: Float>(st: &PoissonStencil<Cpu<impl Precision>>, x: &[T]) -> Vec<T> {
        let d = st.dims();
        let [nz, ny, nx] = d.grid3;
        let c = d.coef.map(T::from_f64);
        let first = d.coef.iter().position(|&v| v != 0.0).unwrap_or(2);
        let flags = st.cell_flags();
        let at = |z: isize, y: isize, xx: isize| -> T {
            let wrap = |i: isize, n: usize, p: usize| -> Option<usize> {
                if (0..n as isize).contains(&i) {
                    Some(i as usize)
                } else if d.periodic[p] {
                    Some(i.rem_euclid(n as isize) as usize)
                } else {
                    None
                }
            };
            match (wrap(z, nz, 0), wrap(y, ny, 1), wrap(xx, nx, 2)) {
                (Some(z), Some(y), Some(xx)) => x[(z * ny + y) * nx + xx],
                _ => T::zero(),
            }
        };
        let mut out = vec![T::zero(); x.len()];
        for z in 0..nz {
            for y in 0..ny {
                for xx in 0..nx {
                    let i = (z * ny + y) * nx + xx;
                    let f = flags[i];
                    if f & CELL_ACTIVE == 0 {
                        continue;
                    }
                    let (zi, yi, xi) = (z as isize, y as isize, xx as isize);
                    let t = |p: usize| match p {
                        0 => axis_term(f, 0, at(zi - 1, yi, xi), at(zi + 1, yi, xi), x[i]),
                        1 => axis_term(f, 1, at(zi, yi - 1, xi), at(zi, yi + 1, xi), x[i]),
                        _ => axis_term(f, 2, at(zi, yi, xi - 1), at(zi, yi, xi + 1), x[i]),
                    };
                    let sx = c[2] * t(2);
                    out[i] = match first {
                        0 => c[0] * t(0) + c[1] * t(1) + sx,
                        1 => c[1] * t(1) + sx,
                        _ => sx,
                    };
                }
            }
        }
        out
    }

    fn check<P: Precision>(grid: &[usize], sides: &[[Side; 2]], obstacles: bool)
    where
        P::Float: Float,
    {
        let b = Cpu::<P>::with_threads(2).unwrap();
        let n: usize = grid.iter().product();
        let mask: Vec<bool> = (0..n).map(|i| i % 37 == 5 || i % 53 == 11).collect();
        let st = PoissonStencil::new(
            &b,
            grid,
            sides,
            &[0.5, 0.25, 2.0][..grid.len()],
            obstacles.then_some(&mask[..]),
        )
        .unwrap();
        let x: Vec<P::Float> = (0..n)
            .map(|i| P::Float::from_f64(((i * 7919) % 1013) as f64 / 97.0 - 5.0))
            .collect();
        let xa = ArrayD::from_shape_vec(IxDyn(&[1, n]), x.clone()).unwrap();
        let mut y = ArrayD::zeros(IxDyn(&[1, n]));
        b.stencil(&st, &xa, &mut y).unwrap();
        let want = per_cell(&st, &x);
        for (i, (g, w)) in y.iter().zip(&want).enumerate() {
            assert_eq!(
                g.as_f64().to_bits(),
                w.as_f64().to_bits(),
                "{grid:?} {sides:?} obstacles {obstacles}: cell {i}: {g:?} vs {w:?}"
            );
        }
    }

    /// The whole-line fast path (every cell active with every face open) gives the per-cell
    /// definition's bits, as does the flag-decoding path beside obstacles and boundaries.
    #[test]
    fn fast_lines_equal_the_per_cell_definition_bit_for_bit() {
        use Side::{Dirichlet as D, Neumann as N, Periodic as P};
        for obstacles in [false, true] {
            check::<Double>(&[6, 7, 19], &[[N, N], [N, D], [D, N]], obstacles);
            check::<Double>(&[5, 4, 17], &[[P, P], [D, D], [P, P]], obstacles);
            check::<Single>(&[6, 7, 19], &[[N, D], [P, P], [N, N]], obstacles);
            check::<Double>(&[9, 23], &[[N, D], [N, N]], obstacles);
            check::<Single>(&[8, 16], &[[P, P], [D, N]], obstacles);
            check::<Double>(&[31], &[[N, D]], obstacles);
        }
    }
}
