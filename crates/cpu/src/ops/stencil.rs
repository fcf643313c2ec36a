//! The pressure-Poisson stencil (`Linalg::stencil`, `stencil_dot`) on the CPU: one pass over
//! the grid a line at a time, the per-cell flags deciding which faces are open (see
//! `monomorph_core::PoissonStencil` for the definition every backend computes). Each line is
//! walked by its runs of cells with equal flags (`monomorph_core::LineRuns`, made once per
//! stencil), so that lines beside walls and through obstacles run the same branch-free vector
//! loop as open ones, at the widest vector width of the CPU, and no per-cell flags are read.
//! Each line is computed into a buffer, then written out (streaming stores for large grids),
//! and the upper plane's line is prefetched ahead (see `super::stream`).

use monomorph_core::{
    CELL_ACTIVE, Float, LineRuns, PoissonStencil, Precision, Result, StencilDims, check_active,
    check_stencil, face_bit,
};
use ndarray::ArrayD;

use super::linalg::{STENCIL_CHUNK, dot_lanes, row_chunks_sum};
use super::stream::{fence_streaming, prefetch_ahead, prefetch_line, store_line, streams};
use super::{data, data_mut};
use crate::Cpu;
use crate::simd::widest_simd;

/// Number of open faces on padded axis `p` (0, 1 or 2) as `T`.
#[inline(always)]
fn open_count<T: Float>(f: u8, p: usize) -> T {
    let k = ((f >> (1 + 2 * p)) & 1) + ((f >> (2 + 2 * p)) & 1);
    T::from_f64(k as f64)
}

/// `v` when face `(p, up)` is open in the flags `f`, else the zero line `z`.
#[inline(always)]
fn pick<'a, T>(f: u8, p: usize, up: bool, v: &'a [T], z: &'a [T]) -> &'a [T] {
    if f & face_bit(p, up) != 0 { v } else { z }
}

/// The lines a run of cells reads: the centre line and, per face, the neighbour line or the
/// zero line when the face is closed (a closed face contributes `+0`, as `sel` gives).
struct RunLines<'a, T> {
    x: &'a [T],
    lo: [&'a [T]; 3],
    hi: [&'a [T]; 3],
}

/// `o = Σ_p c_p·((lo_p + hi_p) − k_p·x)` over a run of active cells that share their flags, on
/// the real axes from `first`: the per-cell definition with every select decided once for the
/// run (`k_p` its open-face counts), evaluated in the same order, so the loop vectorises and
/// gives the per-cell bits.
#[inline(always)]
fn run_cells<T: Float>(c: [T; 3], k: [T; 3], first: usize, l: &RunLines<'_, T>, o: &mut [T]) {
    let m = o.len();
    let x = &l.x[..m];
    let (zl, zh) = (&l.lo[0][..m], &l.hi[0][..m]);
    let (yl, yh) = (&l.lo[1][..m], &l.hi[1][..m]);
    let (xl, xh) = (&l.lo[2][..m], &l.hi[2][..m]);
    match first {
        0 => {
            for i in 0..m {
                let v = x[i];
                o[i] = c[0] * ((zl[i] + zh[i]) - k[0] * v)
                    + c[1] * ((yl[i] + yh[i]) - k[1] * v)
                    + c[2] * ((xl[i] + xh[i]) - k[2] * v);
            }
        }
        1 => {
            for i in 0..m {
                let v = x[i];
                o[i] = c[1] * ((yl[i] + yh[i]) - k[1] * v) + c[2] * ((xl[i] + xh[i]) - k[2] * v);
            }
        }
        _ => {
            for i in 0..m {
                o[i] = c[2] * ((xl[i] + xh[i]) - k[2] * x[i]);
            }
        }
    }
}

widest_simd! {
    /// [`stencil_lines_impl`] at the widest vector width the CPU has (same arithmetic, no
    /// fused multiply-add: the same bits on every path).
    fn stencil_lines<T: Float, A: Float>(
        d: &StencilDims,
        runs: &LineRuns,
        xv: &[T],
        zeros: &[T],
        line0: usize,
        out: &mut [T],
        dot: bool,
        stream: bool,
    ) -> A = stencil_lines_impl;
}

/// The stencil over lines `[line0, line0 + out.len()/nx)` of one row (`xv`, the whole row);
/// returns Σ x·out over those lines when `dot`, in the accumulator type `A`.
///
/// Each line is walked by its runs of cells with equal flags ([`LineRuns`], made once per
/// stencil), each computed by one branch-free loop ([`run_cells`]): a line of open cells is
/// three runs (its two end cells, whose x neighbours wrap or lie outside the grid, are runs of
/// their own), a line beside a wall or through an obstacle a few more. No flags byte is read
/// per cell.
#[inline(always)]
fn stencil_lines_impl<T: Float, A: Float>(
    d: &StencilDims,
    runs: &LineRuns,
    xv: &[T],
    zeros: &[T],
    line0: usize,
    out: &mut [T],
    dot: bool,
    stream: bool,
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
    let mut total = A::zero();
    // Each line is computed into `buf` (in L1), then written to its place in `out` (with
    // streaming stores when `stream`).
    let mut buf = vec![zero; nx];
    // The line that comes from memory is the upper neighbour along the first real axis
    // (`stride` lines on): asked for `ahead` lines before it is needed.
    let stride = [ny, 1, 0][first];
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
        let zd = neighbour(iz, nz, false, 0).map_or(zeros, |z| line(z, iy));
        let zu = neighbour(iz, nz, true, 0).map_or(zeros, |z| line(z, iy));
        let yd = neighbour(iy, ny, false, 1).map_or(zeros, |y| line(iz, y));
        let yu = neighbour(iy, ny, true, 1).map_or(zeros, |y| line(iz, y));
        // The x neighbours of the line's end cells (each a run of one): wrapped on a periodic
        // axis, else the ghost's 0 (or a closed face's unused value).
        let (x_before, x_after) = if d.periodic[2] {
            (&xc[nx - 1..], &xc[..1])
        } else {
            (&zeros[..1], &zeros[..1])
        };
        let mut s = 0;
        for (len, f) in runs.line(l) {
            let e = s + len;
            if f & CELL_ACTIVE == 0 {
                o[s..e].fill(zero);
            } else {
                // Each face's line for the run: the neighbour's when open, else zeros.
                let z = &zeros[..len];
                let xl = if s == 0 { x_before } else { &xc[s - 1..e - 1] };
                let xh = if e == nx { x_after } else { &xc[s + 1..e + 1] };
                let lines = RunLines {
                    x: &xc[s..e],
                    lo: [
                        pick(f, 0, false, &zd[s..e], z),
                        pick(f, 1, false, &yd[s..e], z),
                        pick(f, 2, false, xl, z),
                    ],
                    hi: [
                        pick(f, 0, true, &zu[s..e], z),
                        pick(f, 1, true, &yu[s..e], z),
                        pick(f, 2, true, xh, z),
                    ],
                };
                let k = [0, 1, 2].map(|p| open_count::<T>(f, p));
                run_cells(c, k, first, &lines, &mut o[s..e]);
            }
            s = e;
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
        let runs = st.line_runs();
        // Whole lines per chunk, and large chunks (each also reads the planes beside it).
        let chunk = (STENCIL_CHUNK / nx).max(1) * nx;
        // Large outputs (not read back from cache by the next pass) are streamed to memory.
        let stream = streams::<T>(y.len());
        Ok(row_chunks_sum(
            data_mut("y", y)?,
            n,
            chunk,
            active,
            |r, off, o| {
                let xv = &dx[r * n..(r + 1) * n];
                stencil_lines(&d, runs, xv, &zeros, off / nx, o, dot, stream)
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use monomorph_core::{Double, Linalg, Real, Side, Single};
    use ndarray::IxDyn;

    /// `v` when bit `b` of `f` is set, else 0 (a select, so that the loops vectorise).
    fn sel<T: Float>(f: u8, b: u8, v: T) -> T {
        if f & b != 0 { v } else { T::zero() }
    }

    /// One axis term `(nb_lower + nb_upper) − k·x` of a cell.
    fn axis_term<T: Float>(f: u8, p: usize, lo: T, hi: T, x: T) -> T {
        sel(f, face_bit(p, false), lo) + sel(f, face_bit(p, true), hi) - open_count::<T>(f, p) * x
    }

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
        let n: usize = grid.iter().product();
        let mask: Vec<bool> = (0..n).map(|i| i % 37 == 5 || i % 53 == 11).collect();
        check_mask::<P>(grid, sides, obstacles.then_some(&mask[..]));
    }

    /// A box obstacle with a one-cell hole, on a grid with long lines: long runs of open cells,
    /// of closed faces beside the box and of inactive cells.
    fn check_box<P: Precision>(grid: &[usize], sides: &[[Side; 2]])
    where
        P::Float: Float,
    {
        let n: usize = grid.iter().product();
        let nx = grid[grid.len() - 1];
        let rest = n / nx;
        let mask: Vec<bool> = (0..n)
            .map(|i| {
                let (l, x) = (i / nx, i % nx);
                (rest == 1 || (rest / 4..rest * 3 / 4).contains(&l))
                    && (7..nx - 9).contains(&x)
                    && x != 21
            })
            .collect();
        check_mask::<P>(grid, sides, Some(&mask));
    }

    fn check_mask<P: Precision>(grid: &[usize], sides: &[[Side; 2]], mask: Option<&[bool]>)
    where
        P::Float: Float,
    {
        let obstacles = mask.is_some();
        let b = Cpu::<P>::with_threads(2).unwrap();
        let n: usize = grid.iter().product();
        let st =
            PoissonStencil::new(&b, grid, sides, &[0.5, 0.25, 2.0][..grid.len()], mask).unwrap();
        let x: Vec<P::Float> = (0..n)
            .map(|i| P::Float::from_f64(((i * 7919) % 1013) as f64 / 97.0 - 5.0))
            .collect();
        let xa = ArrayD::from_shape_vec(IxDyn(&[1, n]), x.clone()).unwrap();
        let mut y = ArrayD::zeros(IxDyn(&[1, n]));
        b.stencil(&st, &xa, &mut y).unwrap();
        let want = per_cell(&st, &x);
        // The kernel itself with streaming stores (the op streams only large grids).
        let d = st.dims();
        let zeros = vec![P::Float::from_f64(0.0); d.grid3[2]];
        let mut streamed = vec![P::Float::from_f64(f64::NAN); n];
        let _: f64 = stencil_lines(&d, st.line_runs(), &x, &zeros, 0, &mut streamed, true, true);
        for (i, ((g, s), w)) in y.iter().zip(&streamed).zip(&want).enumerate() {
            assert_eq!(
                g.as_f64().to_bits(),
                w.as_f64().to_bits(),
                "{grid:?} {sides:?} obstacles {obstacles}: cell {i}: {g:?} vs {w:?}"
            );
            assert_eq!(
                s.as_f64().to_bits(),
                w.as_f64().to_bits(),
                "streamed, cell {i}"
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
            // Lines of one and two cells (both end cells, or one cell both ends).
            check::<Double>(&[6, 5, 2], &[[N, D], [P, P], [D, N]], obstacles);
            check::<Double>(&[7, 1], &[[P, P], [P, P]], obstacles);
            check::<Single>(&[9, 1], &[[N, D], [D, N]], obstacles);
            check::<Double>(&[1], &[[P, P]], false);
        }
        check_box::<Double>(&[5, 6, 70], &[[N, N], [N, D], [N, N]]);
        check_box::<Double>(&[4, 6, 53], &[[P, P], [D, N], [P, P]]);
        check_box::<Single>(&[12, 67], &[[N, D], [D, N]]);
        check_box::<Double>(&[61], &[[D, D]]);
    }
}
