//! Linalg, the pressure-Poisson stencil: the matrix-free product against a sparse matrix
//! assembled here from the definition, for every boundary combination, spacing and obstacle
//! layout; and symmetry / negative semi-definiteness on random masks (a property).

use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

use super::*;
use crate::backend::{PoissonStencil, Side};
use crate::testing::{Lcg, assert_close, flat};

/// The operator assembled as CSR (f64) straight from its definition: for an active cell, per
/// axis and side, a neighbour inside the grid (or wrapped on a periodic axis) that is active adds
/// `+c` off the diagonal and `−c` on it; a Dirichlet ghost adds `−c` on the diagonal only; a
/// Neumann side or an obstacle neighbour adds nothing. Obstacle rows are empty.
pub fn poisson_csr(
    grid: &[usize],
    sides: &[[Side; 2]],
    spacing: &[f64],
    obstacles: &[bool],
) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
    let n: usize = grid.iter().product();
    let nd = grid.len();
    let stride = |a: usize| grid[a + 1..].iter().product::<usize>();
    let mut indptr = vec![0usize];
    let (mut indices, mut data) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mut row: std::collections::BTreeMap<usize, f64> = Default::default();
        if !obstacles[i] {
            for a in 0..nd {
                let (s, len) = (stride(a), grid[a]);
                let ca = 1.0 / (spacing[a] * spacing[a]);
                let c = (i / s) % len;
                for (up, side) in [(false, sides[a][0]), (true, sides[a][1])] {
                    let edge = if up { c + 1 == len } else { c == 0 };
                    let j = match (edge, side) {
                        (true, Side::Neumann) => continue,
                        (true, Side::Dirichlet) => {
                            *row.entry(i).or_default() -= ca;
                            continue;
                        }
                        (true, Side::Periodic) if up => i - (len - 1) * s,
                        (true, Side::Periodic) => i + (len - 1) * s,
                        (false, _) if up => i + s,
                        (false, _) => i - s,
                    };
                    if obstacles[j] {
                        continue;
                    }
                    *row.entry(i).or_default() -= ca;
                    *row.entry(j).or_default() += ca;
                }
            }
        }
        for (j, v) in row {
            indices.push(j);
            data.push(v);
        }
        indptr.push(indices.len());
    }
    (indptr, indices, data)
}

/// `A·x` for every row of `x` (`(batch, n)`) with a host CSR matrix.
fn csr_apply(a: &(Vec<usize>, Vec<usize>, Vec<f64>), x: &ArrayD<f64>) -> ArrayD<f64> {
    let (ip, ix, v) = a;
    let (rows, n) = (x.shape()[0], x.shape()[1]);
    ArrayD::from_shape_fn(IxDyn(&[rows, n]), |k| {
        (ip[k[1]]..ip[k[1] + 1])
            .map(|p| v[p] * x[[k[0], ix[p]]])
            .sum()
    })
}

/// Every `[lower, upper]` combination of one axis.
const AXIS_SIDES: [[Side; 2]; 5] = [
    [Side::Dirichlet, Side::Dirichlet],
    [Side::Neumann, Side::Neumann],
    [Side::Periodic, Side::Periodic],
    [Side::Dirichlet, Side::Neumann],
    [Side::Neumann, Side::Dirichlet],
];

/// Every boundary combination of an `nd`-axis grid.
fn all_sides(nd: usize) -> Vec<Vec<[Side; 2]>> {
    let mut out = vec![vec![]];
    for _ in 0..nd {
        out = out
            .into_iter()
            .flat_map(|v: Vec<[Side; 2]>| {
                AXIS_SIDES.iter().map(move |s| {
                    let mut w = v.clone();
                    w.push(*s);
                    w
                })
            })
            .collect();
    }
    out
}

/// The stencil (plain, fused with the dot, and with the dots on the device) equals the
/// assembled matrix for every boundary combination on 1-, 2- and 3-D grids, three spacings and
/// three obstacle layouts (none, random, a block touching the boundary).
pub fn poisson_stencil_matches_assembled<B: Backend>(b: &B) {
    let mut rng = Lcg::new(131);
    for grid in [vec![7], vec![1, 5], vec![5, 6], vec![4, 3, 5]] {
        let n: usize = grid.iter().product();
        let nd = grid.len();
        let random: Vec<bool> = (0..n).map(|_| rng.next_f64() < 0.25).collect();
        let block: Vec<bool> = (0..n).map(|i| i % grid[nd - 1] < 2 && i < n / 2).collect();
        let layouts = [vec![false; n], random, block];
        let spacings: [Vec<f64>; 3] = [
            vec![1.0],
            vec![0.5],
            (0..nd).map(|a| 0.25 + 0.5 * a as f64).collect(),
        ];
        let x = host::<B>(&mut rng, &[3, n]);
        let xf = to_f64(&x);
        let dx = up(b, &x);
        for (k, sides) in all_sides(nd).iter().enumerate() {
            let obstacles = &layouts[k % 3];
            if obstacles.iter().all(|&o| o) {
                continue;
            }
            let spacing = &spacings[(k / 3) % 3];
            let st =
                PoissonStencil::new(b, &grid, sides, spacing, Some(obstacles)).expect("stencil");
            let sp: Vec<f64> = if spacing.len() == 1 {
                vec![spacing[0]; nd]
            } else {
                spacing.clone()
            };
            let a = poisson_csr(&grid, sides, &sp, obstacles);
            let e = csr_apply(&a, &xf);
            let scale = sp.iter().map(|d| 1.0 / (d * d)).fold(0.0, f64::max);
            let tol = 64.0 * eps::<B>() * scale;
            let what = format!("stencil {grid:?} {sides:?} dx {spacing:?} layout {}", k % 3);
            let mut y = b.zeros::<FloatOf<B>>(&[3, n]).expect("zeros");
            b.stencil(&st, &dx, &mut y).expect("stencil");
            assert_close(&what, &flat(&down(b, &y)), &flat(&e), 0.0, tol);
            // Fused with x·y, one row off.
            let active = [true, false, true];
            let mut y2 = b.zeros::<FloatOf<B>>(&[3, n]).expect("zeros");
            let dots = f64s(
                b.stencil_dot(&st, &dx, &mut y2, &active)
                    .expect("stencil_dot"),
            );
            let hy = down(b, &y2);
            for r in 0..3 {
                if !active[r] {
                    assert_eq!(dots[r], 0.0, "{what}: inactive row's dot");
                    continue;
                }
                let want: f64 = (0..n).map(|i| xf[[r, i]] * e[[r, i]]).sum();
                assert!(
                    (dots[r] - want).abs() <= tol * n as f64,
                    "{what}: dot {} vs {want}",
                    dots[r]
                );
                for i in 0..n {
                    assert!(
                        (hy[[r, i]].as_f64() - e[[r, i]]).abs() <= tol,
                        "{what}: stencil_dot y"
                    );
                }
            }
            // Dots into slot 2 of device scalars.
            let mask = up(
                b,
                &ArrayD::from_shape_vec(IxDyn(&[3]), vec![1i32, 0, 1]).expect("m"),
            );
            let mut s = b.zeros::<AccumOf<B>>(&[4, 3]).expect("zeros");
            let mut y3 = b.zeros::<FloatOf<B>>(&[3, n]).expect("zeros");
            b.stencil_dot_into(&st, &dx, &mut y3, &mask, &mut s, 2)
                .expect("stencil_dot_into");
            let sh = down_acc(b, &s);
            for r in 0..3 {
                let want = if active[r] { dots[r] } else { 0.0 };
                assert!(
                    (sh[[2, r]] - want).abs() <= tol * n as f64,
                    "{what}: stencil_dot_into slot"
                );
                assert_eq!(sh[[0, r]], 0.0, "{what}: other slots kept");
            }
        }
        // Without an obstacle mask the stencil keeps no per-cell flags on the device: the same
        // products from the boundary alone.
        for sides in all_sides(nd).iter().step_by(7) {
            let st = PoissonStencil::new(b, &grid, sides, &[0.5], None).expect("stencil");
            assert!(st.cells().is_none());
            let a = poisson_csr(&grid, sides, &vec![0.5; nd], &vec![false; n]);
            let mut y = b.zeros::<FloatOf<B>>(&[3, n]).expect("zeros");
            b.stencil(&st, &dx, &mut y).expect("stencil");
            assert_close(
                &format!("stencil {grid:?} {sides:?} without mask"),
                &flat(&down(b, &y)),
                &flat(&csr_apply(&a, &xf)),
                0.0,
                256.0 * eps::<B>(),
            );
        }
    }
    // Argument errors, alike on every backend.
    let d = [Side::Dirichlet; 2];
    assert!(PoissonStencil::new(b, &[4, 4], &[d], &[1.0], None).is_err());
    assert!(
        PoissonStencil::new(b, &[4], &[[Side::Periodic, Side::Neumann]], &[1.0], None).is_err()
    );
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            PoissonStencil::new(b, &[4], &[d], &[bad], None).is_err(),
            "{bad}"
        );
    }
    assert!(PoissonStencil::new(b, &[4], &[d], &[1.0, 1.0], None).is_err());
    assert!(PoissonStencil::new(b, &[4], &[d], &[1.0], Some(&[true; 4])).is_err());
    assert!(PoissonStencil::new(b, &[4], &[d], &[1.0], Some(&[false; 3])).is_err());
    let st = PoissonStencil::new(b, &[4], &[d], &[1.0], None).expect("stencil");
    let x = b.zeros::<FloatOf<B>>(&[2, 5]).expect("zeros");
    let mut y = b.zeros::<FloatOf<B>>(&[2, 5]).expect("zeros");
    assert!(b.stencil(&st, &x, &mut y).is_err(), "x of the wrong length");
}

/// On random grids, boundaries, spacings and obstacle masks the operator, applied by the
/// backend to every unit vector at once, is a symmetric matrix with a non-positive diagonal
/// that dominates its row: symmetric negative semi-definite.
pub fn prop_poisson_stencil_symmetric<B: Backend>(b: &B) {
    let strat = (
        proptest::collection::vec(1usize..6, 1..4),
        proptest::collection::vec(0usize..3, 6),
        proptest::collection::vec(0.3f64..3.0, 3),
        proptest::collection::vec(proptest::bool::weighted(0.3), 125),
    );
    crate::testing::props::runner(16)
        .run(&strat, |(grid, kinds, spacing, mask)| {
            let nd = grid.len();
            let n: usize = grid.iter().product();
            let obstacles: Vec<bool> = mask[..n].to_vec();
            if obstacles.iter().all(|&o| o) {
                return Ok(());
            }
            let side = |k: usize| [Side::Dirichlet, Side::Neumann, Side::Periodic][k];
            let sides: Vec<[Side; 2]> = (0..nd)
                .map(|a| {
                    let (lo, hi) = (side(kinds[2 * a]), side(kinds[2 * a + 1]));
                    if lo == Side::Periodic || hi == Side::Periodic {
                        [Side::Periodic; 2]
                    } else {
                        [lo, hi]
                    }
                })
                .collect();
            let st = PoissonStencil::new(b, &grid, &sides, &spacing[..nd], Some(&obstacles))
                .expect("stencil");
            let eye = ArrayD::from_shape_fn(IxDyn(&[n, n]), |k| {
                FloatOf::<B>::from_f64(if k[0] == k[1] { 1.0 } else { 0.0 })
            });
            let mut y = b.zeros::<FloatOf<B>>(&[n, n]).expect("zeros");
            b.stencil(&st, &up(b, &eye), &mut y).expect("stencil");
            let m = to_f64(&down(b, &y)); // row j = A·e_j = column j of A
            let scale = spacing.iter().map(|d| 1.0 / (d * d)).fold(0.0, f64::max);
            let tol = 16.0 * eps::<B>() * scale;
            for i in 0..n {
                let mut off = 0.0;
                for j in 0..n {
                    prop_assert!(
                        (m[[i, j]] - m[[j, i]]).abs() <= tol,
                        "not symmetric at ({i}, {j}): {} vs {}",
                        m[[i, j]],
                        m[[j, i]]
                    );
                    if i != j {
                        prop_assert!(m[[i, j]] >= -tol, "negative off-diagonal");
                        off += m[[i, j]].abs();
                    }
                }
                prop_assert!(m[[i, i]] <= tol, "positive diagonal {}", m[[i, i]]);
                prop_assert!(
                    -m[[i, i]] + 8.0 * tol >= off,
                    "row {i} not diagonally dominant: {} < {off}",
                    -m[[i, i]]
                );
            }
            // The matrix is the assembled one.
            let a = poisson_csr(&grid, &sides, &spacing[..nd], &obstacles);
            let dense = csr_apply(
                &a,
                &ArrayD::from_shape_fn(IxDyn(&[n, n]), |k| if k[0] == k[1] { 1.0 } else { 0.0 }),
            );
            for (u, v) in m.iter().zip(dense.iter()) {
                prop_assert!((u - v).abs() <= tol, "{u} vs assembled {v}");
            }
            Ok(())
        })
        .expect("poisson stencil property");
}
