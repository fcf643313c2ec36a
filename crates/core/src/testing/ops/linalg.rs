//! Linalg: dense, CSR and stencil operators, row ops, fused CG updates.

use ndarray::{ArrayD, IxDyn};

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, assert_close, flat, reference};

pub fn dense_matvec<B: Backend>(b: &B) {
    let mut rng = Lcg::new(80);
    let (a, x) = (host::<B>(&mut rng, &[6, 5]), host::<B>(&mut rng, &[3, 5]));
    let mut y = b.zeros::<FloatOf<B>>(&[3, 6]).expect("zeros");
    b.matvec_dense(&up(b, &a), &up(b, &x), &mut y)
        .expect("matvec_dense");
    let e = reference::matvec(&to_f64(&a), &to_f64(&x));
    assert_close(
        "matvec_dense",
        &flat(&down(b, &y)),
        &flat(&e),
        0.0,
        16.0 * eps::<B>(),
    );
    // one matrix per entry
    let per = host::<B>(&mut rng, &[3, 6, 5]);
    b.matvec_dense(&up(b, &per), &up(b, &x), &mut y)
        .expect("per-entry matvec");
    let hy = down(b, &y);
    for e in 0..3 {
        let ae = ArrayD::from_shape_fn(IxDyn(&[6, 5]), |i| per[[e, i[0], i[1]]].as_f64());
        let xe = ArrayD::from_shape_fn(IxDyn(&[1, 5]), |i| x[[e, i[1]]].as_f64());
        let ye = reference::matvec(&ae, &xe);
        for i in 0..6 {
            assert!((hy[[e, i]].as_f64() - ye[[0, i]]).abs() <= 16.0 * eps::<B>());
        }
    }
    let bad = b.zeros::<FloatOf<B>>(&[3, 4]).expect("zeros");
    assert!(b.matvec_dense(&up(b, &a), &bad, &mut y).is_err());
}

pub fn csr_matvec<B: Backend>(b: &B) {
    // 4×5 matrix with an empty row
    let indptr = ArrayD::from_shape_vec(IxDyn(&[5]), vec![0i64, 2, 2, 5, 6]).expect("shape");
    let indices = ArrayD::from_shape_vec(IxDyn(&[6]), vec![0i64, 3, 1, 2, 4, 0]).expect("shape");
    let vals = [1.0, -2.0, 0.5, 3.0, 1.5, -1.0];
    let data = ArrayD::from_shape_vec(
        IxDyn(&[6]),
        vals.iter().map(|&v| FloatOf::<B>::from_f64(v)).collect(),
    )
    .expect("shape");
    let flat_i64 = |a: &ArrayD<i64>| a.iter().copied().collect::<Vec<i64>>();
    let a = CsrMatrix::<B, FloatOf<B>>::from_parts(
        b,
        4,
        5,
        &flat_i64(&indptr),
        &flat_i64(&indices),
        data.view(),
    )
    .expect("valid CSR");
    let mut dense = ArrayD::<f64>::zeros(IxDyn(&[4, 5]));
    for r in 0..4 {
        for p in indptr[r] as usize..indptr[r + 1] as usize {
            dense[[r, indices[p] as usize]] = vals[p];
        }
    }
    let mut rng = Lcg::new(81);
    let x = host::<B>(&mut rng, &[2, 5]);
    let mut y = b.zeros::<FloatOf<B>>(&[2, 4]).expect("zeros");
    b.matvec_csr(&a, &up(b, &x), &mut y).expect("matvec_csr");
    let e = reference::matvec(&dense, &to_f64(&x));
    assert_close(
        "matvec_csr",
        &flat(&down(b, &y)),
        &flat(&e),
        0.0,
        16.0 * eps::<B>(),
    );
}

pub fn laplacian_stencil<B: Backend>(b: &B) {
    let mut rng = Lcg::new(82);
    for grid in [vec![9], vec![5, 7], vec![4, 5, 6], vec![1, 6]] {
        let n: usize = grid.iter().product();
        let x = host::<B>(&mut rng, &[2, n]);
        for (bc, periodic) in [(Boundary::DirichletZero, false), (Boundary::Periodic, true)] {
            let mut y = b.zeros::<FloatOf<B>>(&[2, n]).expect("zeros");
            b.laplacian(&grid, bc, &up(b, &x), &mut y)
                .expect("laplacian");
            let e = reference::laplacian(&grid, periodic, &to_f64(&x));
            assert_close(
                &format!("laplacian {grid:?} {bc:?}"),
                &flat(&down(b, &y)),
                &flat(&e),
                0.0,
                32.0 * eps::<B>(),
            );
        }
    }
    let x = b.zeros::<FloatOf<B>>(&[2, 10]).expect("zeros");
    let mut y = b.zeros::<FloatOf<B>>(&[2, 10]).expect("zeros");
    assert!(
        b.laplacian(&[3, 3], Boundary::DirichletZero, &x, &mut y)
            .is_err(),
        "grid size mismatch"
    );
    assert!(
        b.laplacian(&[1, 1, 2, 5], Boundary::DirichletZero, &x, &mut y)
            .is_err(),
        "4-D grid"
    );
}

pub fn row_ops<B: Backend>(b: &B) {
    let mut rng = Lcg::new(83);
    let (x, y0) = (host::<B>(&mut rng, &[3, 50]), host::<B>(&mut rng, &[3, 50]));
    let alpha: Vec<FloatOf<B>> = [0.5, -1.0, 2.0]
        .iter()
        .map(|&v| FloatOf::<B>::from_f64(v))
        .collect();
    let (dx, tol) = (up(b, &x), 8.0 * eps::<B>());
    let mut y = up(b, &y0);
    b.axpy_rows(&alpha, &dx, &mut y).expect("axpy_rows");
    let e: Vec<f64> = (0..150)
        .map(|i| {
            y0[[i / 50, i % 50]].as_f64() + alpha[i / 50].as_f64() * x[[i / 50, i % 50]].as_f64()
        })
        .collect();
    assert_close("axpy_rows", &flat(&down(b, &y)), &e, tol, tol);
    let mut y = up(b, &y0);
    b.xpay_rows(&dx, &alpha, &mut y).expect("xpay_rows");
    let e: Vec<f64> = (0..150)
        .map(|i| {
            x[[i / 50, i % 50]].as_f64() + alpha[i / 50].as_f64() * y0[[i / 50, i % 50]].as_f64()
        })
        .collect();
    assert_close("xpay_rows", &flat(&down(b, &y)), &e, tol, tol);
    let mut y = up(b, &y0);
    b.scale_rows(&alpha, &mut y).expect("scale_rows");
    let e: Vec<f64> = (0..150)
        .map(|i| alpha[i / 50].as_f64() * y0[[i / 50, i % 50]].as_f64())
        .collect();
    assert_close("scale_rows", &flat(&down(b, &y)), &e, tol, tol);
    assert!(b.scale_rows(&alpha[..2], &mut y).is_err(), "alpha per row");
}

pub fn axpy_pair_rows_fused<B: Backend>(b: &B) {
    let mut rng = Lcg::new(84);
    let shape = [3, 40000];
    let (d, q, x0, r0) = (
        host::<B>(&mut rng, &shape),
        host::<B>(&mut rng, &shape),
        host::<B>(&mut rng, &shape),
        host::<B>(&mut rng, &shape),
    );
    let alpha: Vec<FloatOf<B>> = [0.3, 0.0, -1.25]
        .iter()
        .map(|&v| FloatOf::<B>::from_f64(v))
        .collect();
    let (mut x, mut r) = (up(b, &x0), up(b, &r0));
    let rr = f64s(
        b.axpy_pair_rows(&alpha, &up(b, &d), &up(b, &q), &mut x, &mut r)
            .expect("axpy_pair_rows"),
    );
    let (hx, hr) = (down(b, &x), down(b, &r));
    for row in 0..3 {
        let a = alpha[row];
        let mut acc = 0.0;
        for j in 0..shape[1] {
            let ex = x0[[row, j]] + a * d[[row, j]];
            let er = r0[[row, j]] - a * q[[row, j]];
            assert!((hx[[row, j]].as_f64() - ex.as_f64()).abs() <= 4.0 * eps::<B>());
            assert!((hr[[row, j]].as_f64() - er.as_f64()).abs() <= 4.0 * eps::<B>());
            acc += hr[[row, j]].as_f64().powi(2);
        }
        assert!(
            (rr[row] - acc).abs() <= 1e-9 * acc.max(1.0),
            "row {row}: {} vs {acc}",
            rr[row]
        );
    }
}

/// `v` in the accumulator type of `B`.
fn acc<B: Backend>(v: f64) -> AccumOf<B> {
    <AccumOf<B> as Real>::from_f64(v)
}

/// Per-row scalars `(4, rows)` with recognisable values, for the `…_into` / `…_ratio` ops.
fn row_scalars(rows: usize) -> ArrayD<f64> {
    ArrayD::from_shape_fn(IxDyn(&[4, rows]), |i| {
        100.0 * i[0] as f64 + i[1] as f64 + 0.5
    })
}

/// Asserts that every slot of `s` but `written` still holds its value from `before`, exactly.
fn other_slots_kept(what: &str, s: &ArrayD<f64>, before: &ArrayD<f64>, written: &[usize]) {
    for k in 0..s.shape()[0] {
        if !written.contains(&k) {
            for e in 0..s.shape()[1] {
                assert_eq!(
                    s[[k, e]],
                    before[[k, e]],
                    "{what}: slot {k} row {e} changed"
                );
            }
        }
    }
}

/// Checks the per-row dots an op returned or stored against `x·y` of the host copies, with 0
/// for inactive rows.
fn check_row_dots(what: &str, got: &[f64], x: &ArrayD<f64>, y: &ArrayD<f64>, active: &[bool]) {
    let n = x.shape()[1];
    for (e, &on) in active.iter().enumerate() {
        let want = if on {
            (0..n).map(|i| x[[e, i]] * y[[e, i]]).sum::<f64>()
        } else {
            0.0
        };
        let scale = (0..n).map(|i| (x[[e, i]] * y[[e, i]]).abs()).sum::<f64>();
        assert!(
            (got[e] - want).abs() <= 1e-9 * scale.max(1e-300),
            "{what}: row {e} dot {} vs {want}",
            got[e]
        );
    }
}

/// The fused ops of the CG loop, host-valued (`laplacian_dot`, `matvec_dense_dot`,
/// `matvec_csr_dot`, `xpay_rows_dot`, `xpay_rows_where`) and with their per-row scalars on the
/// device (`…_into`, `axpy_pair_rows_ratio`, `xpay_rows_ratio`): the rows a mask switches off
/// are skipped (dot 0, nothing else written), the step sizes are [`step_ratio`] of the slots
/// (0 for a zero denominator, and then `x`, `r` stay exactly as they were even beside NaN),
/// the slots not written keep their values, and every value matches a host reference.
/// Rows of 20 000 points, so a device backend splits each row over several blocks.
/// The data every part of [`cg_fused_device_scalars`] works on.
struct Fused<B: Backend> {
    rng: Lcg,
    rows: usize,
    grid: [usize; 3],
    n: usize,
    active: [bool; 3],
    mask: Arr<B, i32>,
    tol: f64,
    sentinel: FloatOf<B>,
    x: ArrayD<FloatOf<B>>,
    xf: ArrayD<f64>,
    dx: Arr<B, FloatOf<B>>,
}

pub fn cg_fused_device_scalars<B: Backend>(b: &B) {
    let mut rng = Lcg::new(85);
    let (rows, grid) = (3usize, [20usize, 25, 40]);
    let n: usize = grid.iter().product();
    let mask_h = ArrayD::from_shape_vec(IxDyn(&[rows]), vec![1i32, 0, 1]).expect("shape");
    let x = host::<B>(&mut rng, &[rows, n]);
    let mut fx = Fused {
        rows,
        grid,
        n,
        active: [true, false, true],
        mask: up(b, &mask_h),
        tol: 8.0 * eps::<B>(),
        sentinel: FloatOf::<B>::from_f64(7.0),
        xf: to_f64(&x),
        dx: up(b, &x),
        x,
        rng,
    };
    fused_stencil(b, &mut fx);
    fused_matvecs(b, &mut fx);
    fused_xpay(b, &mut fx);
    fused_update(b, &mut fx);
    fused_checks(b, &fx);
}

/// The Laplacian, host-valued and into slot 1.
fn fused_stencil<B: Backend>(b: &B, fx: &mut Fused<B>) {
    let rows = fx.rows;
    let grid = fx.grid;
    let n = fx.n;
    let active = fx.active;
    let sentinel = fx.sentinel;
    let mask = &fx.mask;
    let xf = &fx.xf;
    let dx = &fx.dx;
    // Laplacian, host-valued and into slot 1.
    for into in [false, true] {
        let mut y = b.full::<FloatOf<B>>(&[rows, n], sentinel).expect("full");
        let s0 = row_scalars(rows);
        let mut s = up_acc(b, &s0);
        let dots = if into {
            b.laplacian_dot_into(&grid, Boundary::DirichletZero, dx, &mut y, mask, &mut s, 1)
                .expect("laplacian_dot_into");
            let sh = down_acc(b, &s);
            other_slots_kept("laplacian_dot_into", &sh, &s0, &[1]);
            sh.index_axis(ndarray::Axis(0), 1)
                .iter()
                .copied()
                .collect::<Vec<f64>>()
        } else {
            f64s(
                b.laplacian_dot(&grid, Boundary::DirichletZero, dx, &mut y, &active)
                    .expect("laplacian_dot"),
            )
        };
        let e = reference::laplacian(&grid, false, xf);
        let hy = to_f64(&down(b, &y));
        for r in 0..rows {
            let row = |a: &ArrayD<f64>| {
                a.index_axis(ndarray::Axis(0), r)
                    .iter()
                    .copied()
                    .collect::<Vec<f64>>()
            };
            if active[r] {
                assert_close(
                    "laplacian_dot y",
                    &row(&hy),
                    &row(&e),
                    0.0,
                    32.0 * eps::<B>(),
                );
            } else if into {
                assert!(row(&hy).iter().all(|&v| v == 7.0), "inactive row written");
            }
        }
        check_row_dots("laplacian_dot", &dots, xf, &hy, &active);
    }
}

/// Dense (shared and per entry) and CSR (per entry), host-valued and into a slot.
fn fused_matvecs<B: Backend>(b: &B, fx: &mut Fused<B>) {
    let rows = fx.rows;
    let active = fx.active;
    let sentinel = fx.sentinel;
    let mask = &fx.mask;
    let rng = &mut fx.rng;
    // Dense (shared and per entry) and CSR (per entry), host-valued and into slot 2.
    let m = 70;
    let xs = host::<B>(rng, &[rows, m]);
    let (xsf, dxs) = (to_f64(&xs), up(b, &xs));
    let shared = host::<B>(rng, &[m, m]);
    let per = host::<B>(rng, &[rows, m, m]);
    for (name, a) in [("shared", &shared), ("per entry", &per)] {
        let da = up(b, a);
        for into in [false, true] {
            let mut y = b.full::<FloatOf<B>>(&[rows, m], sentinel).expect("full");
            let s0 = row_scalars(rows);
            let mut s = up_acc(b, &s0);
            let dots = if into {
                b.matvec_dense_dot_into(&da, &dxs, &mut y, mask, &mut s, 2)
                    .expect("matvec_dense_dot_into");
                let sh = down_acc(b, &s);
                other_slots_kept("matvec_dense_dot_into", &sh, &s0, &[2]);
                sh.index_axis(ndarray::Axis(0), 2)
                    .iter()
                    .copied()
                    .collect::<Vec<f64>>()
            } else {
                f64s(
                    b.matvec_dense_dot(&da, &dxs, &mut y, &active)
                        .expect("matvec_dense_dot"),
                )
            };
            let hy = to_f64(&down(b, &y));
            for r in (0..rows).filter(|&r| active[r]) {
                let ar = if a.ndim() == 3 {
                    to_f64(&a.index_axis(ndarray::Axis(0), r).to_owned())
                } else {
                    to_f64(a)
                };
                let xr = ArrayD::from_shape_fn(IxDyn(&[1, m]), |i| xsf[[r, i[1]]]);
                let e = reference::matvec(&ar, &xr);
                let got = hy
                    .index_axis(ndarray::Axis(0), r)
                    .iter()
                    .copied()
                    .collect::<Vec<f64>>();
                assert_close(
                    &format!("matvec_dense_dot {name}"),
                    &got,
                    &flat(&e),
                    0.0,
                    16.0 * m as f64 * eps::<B>(),
                );
            }
            check_row_dots("matvec_dense_dot", &dots, &xsf, &hy, &active);
        }
    }
    let (mut indptr, mut indices) = (vec![0i64], Vec::new());
    for i in 0..m as i64 {
        for j in [i - 3, i - 1, i, i + 2] {
            if (0..m as i64).contains(&j) {
                indices.push(j);
            }
        }
        indptr.push(indices.len() as i64);
    }
    let vals = host::<B>(rng, &[rows, indices.len()]);
    let csr = CsrMatrix::<B, FloatOf<B>>::from_parts(b, m, m, &indptr, &indices, vals.view())
        .expect("valid CSR");
    for into in [false, true] {
        let mut y = b.full::<FloatOf<B>>(&[rows, m], sentinel).expect("full");
        let s0 = row_scalars(rows);
        let mut s = up_acc(b, &s0);
        let dots = if into {
            b.matvec_csr_dot_into(&csr, &dxs, &mut y, mask, &mut s, 0)
                .expect("matvec_csr_dot_into");
            let sh = down_acc(b, &s);
            other_slots_kept("matvec_csr_dot_into", &sh, &s0, &[0]);
            sh.index_axis(ndarray::Axis(0), 0)
                .iter()
                .copied()
                .collect::<Vec<f64>>()
        } else {
            f64s(
                b.matvec_csr_dot(&csr, &dxs, &mut y, &active)
                    .expect("matvec_csr_dot"),
            )
        };
        let hy = to_f64(&down(b, &y));
        for r in (0..rows).filter(|&r| active[r]) {
            for i in 0..m {
                let e: f64 = (indptr[i] as usize..indptr[i + 1] as usize)
                    .map(|p| vals[[r, p]].as_f64() * xsf[[r, indices[p] as usize]])
                    .sum();
                assert!(
                    (hy[[r, i]] - e).abs() <= 16.0 * eps::<B>(),
                    "csr row {r} {i}"
                );
            }
        }
        check_row_dots("matvec_csr_dot", &dots, &xsf, &hy, &active);
    }
}

/// The direction updates: host factors, a ratio, a negated ratio with its dot.
fn fused_xpay<B: Backend>(b: &B, fx: &mut Fused<B>) {
    let rows = fx.rows;
    let n = fx.n;
    let active = fx.active;
    let tol = fx.tol;
    let mask = &fx.mask;
    let x = &fx.x;
    let xf = &fx.xf;
    let dx = &fx.dx;
    let rng = &mut fx.rng;
    // xpay_rows_dot / xpay_rows_where (host factors) and xpay_rows_ratio (factors s[3]/s[0]).
    let y0 = host::<B>(rng, &[rows, n]);
    let beta_h = [0.75, -2.0, 0.0];
    let beta: Vec<FloatOf<B>> = beta_h.iter().map(|&v| FloatOf::<B>::from_f64(v)).collect();
    let mut sr = row_scalars(rows);
    for (e, &v) in beta_h.iter().enumerate() {
        sr[[0, e]] = 4.0;
        sr[[3, e]] = 4.0 * v;
    }
    // The same factors as −(s[2]/s[0]) for the negated ratio (mode 3).
    for (e, &v) in beta_h.iter().enumerate() {
        sr[[2, e]] = -4.0 * v;
    }
    for mode in 0..4 {
        let mut dsr = up_acc(b, &sr);
        let mut y = up(b, &y0);
        let dots = match mode {
            0 => Some(f64s(
                b.xpay_rows_dot(dx, &beta, &mut y, &active)
                    .expect("xpay_rows_dot"),
            )),
            1 => {
                b.xpay_rows_where(dx, &beta, &mut y, &active)
                    .expect("xpay_rows_where");
                None
            }
            2 => {
                b.xpay_rows_ratio(dx, &mut dsr, Ratio::new(3, 0), mask, &mut y, None)
                    .expect("xpay_rows_ratio");
                other_slots_kept("xpay_rows_ratio", &down_acc(b, &dsr), &sr, &[]);
                None
            }
            _ => {
                let ratio = Ratio::negated(2, 0);
                b.xpay_rows_ratio(dx, &mut dsr, ratio, mask, &mut y, Some(1))
                    .expect("xpay_rows_ratio with its dot");
                let sh = down_acc(b, &dsr);
                other_slots_kept("xpay_rows_ratio", &sh, &sr, &[1]);
                Some(sh.index_axis(ndarray::Axis(0), 1).iter().copied().collect())
            }
        };
        let hy = down(b, &y);
        for r in (0..rows).filter(|&r| active[r]) {
            let bt: FloatOf<B> = step_ratio(acc::<B>(sr[[3, r]]), acc::<B>(sr[[0, r]]));
            assert_eq!(bt, beta[r]);
            for i in 0..n {
                let e = x[[r, i]] + bt * y0[[r, i]];
                assert!(
                    (hy[[r, i]].as_f64() - e.as_f64()).abs() <= tol,
                    "xpay {mode}"
                );
            }
        }
        if let Some(d) = dots {
            check_row_dots("xpay_rows_dot", &d, xf, &to_f64(&hy), &active);
        }
    }
}

/// `axpy_pair_rows_ratio`, with and without Jacobi.
fn fused_update<B: Backend>(b: &B, fx: &mut Fused<B>) {
    let rows = fx.rows;
    let n = fx.n;
    let active = fx.active;
    let tol = fx.tol;
    let sentinel = fx.sentinel;
    let mask = &fx.mask;
    let rng = &mut fx.rng;
    // axpy_pair_rows_ratio: α = s[2]/s[1]; row 2 has a zero denominator and NaN in d and q
    // (α = 0 must leave its x and r as they are), row 1 is masked off (NaN as well).
    let (d, q, xa, r0, w) = (
        host::<B>(rng, &[rows, n]),
        host::<B>(rng, &[rows, n]),
        host::<B>(rng, &[rows, n]),
        host::<B>(rng, &[rows, n]),
        host::<B>(rng, &[rows, n]),
    );
    let (mut d, mut q) = (d, q);
    for r in [1, 2] {
        d[[r, 5]] = FloatOf::<B>::from_f64(f64::NAN);
        q[[r, 7]] = FloatOf::<B>::from_f64(f64::INFINITY);
    }
    let mut s0 = row_scalars(rows);
    s0[[1, 0]] = -3.0;
    s0[[2, 0]] = 1.2;
    s0[[1, 2]] = 0.0;
    let (dd, dq, dw) = (up(b, &d), up(b, &q), up(b, &w));
    for jacobi in [false, true] {
        let (mut xd, mut rd) = (up(b, &xa), up(b, &r0));
        let mut z = b.full::<FloatOf<B>>(&[rows, n], sentinel).expect("full");
        let precond = jacobi.then_some(Precond {
            w: &dw,
            z: &mut z,
            slot: 3,
        });
        // Without Jacobi, r·q into slot 4 (CG-adaptive's pair of dots).
        let rq = (!jacobi).then_some(4);
        let s_before = if jacobi {
            s0.clone()
        } else {
            ArrayD::from_shape_fn(IxDyn(&[5, rows]), |i| {
                if i[0] < 4 { s0[[i[0], i[1]]] } else { 0.0 }
            })
        };
        let mut s = up_acc(b, &s_before);
        let ratio = Ratio::new(2, 1);
        b.axpy_pair_rows_ratio(
            &mut s, ratio, mask, &dd, &dq, &mut xd, &mut rd, 0, precond, rq,
        )
        .expect("axpy_pair_rows_ratio");
        let (hx, hr, hz, sh) = (down(b, &xd), down(b, &rd), down(b, &z), down_acc(b, &s));
        let written: &[usize] = if jacobi { &[0, 3] } else { &[0, 4] };
        other_slots_kept("axpy_pair_rows_ratio", &sh, &s_before, written);
        for r in 0..rows {
            let a: FloatOf<B> = if active[r] {
                step_ratio(acc::<B>(s0[[2, r]]), acc::<B>(s0[[1, r]]))
            } else {
                FloatOf::<B>::from_f64(0.0)
            };
            let (mut rr, mut rz, mut rqs) = (0.0, 0.0, 0.0);
            for i in 0..n {
                let (ex, er) = if a == FloatOf::<B>::from_f64(0.0) {
                    (xa[[r, i]], r0[[r, i]])
                } else {
                    (xa[[r, i]] + a * d[[r, i]], r0[[r, i]] - a * q[[r, i]])
                };
                if a == FloatOf::<B>::from_f64(0.0) {
                    assert_eq!(hx[[r, i]], ex, "α = 0 row {r}: x changed");
                    assert_eq!(hr[[r, i]], er, "α = 0 row {r}: r changed");
                } else {
                    assert!(
                        (hx[[r, i]].as_f64() - ex.as_f64()).abs() <= tol,
                        "x {r} {i}"
                    );
                    assert!(
                        (hr[[r, i]].as_f64() - er.as_f64()).abs() <= tol,
                        "r {r} {i}"
                    );
                }
                let f = hr[[r, i]].as_f64();
                rr += f * f;
                rqs += f * q[[r, i]].as_f64();
                if jacobi {
                    let ez = w[[r, i]] * hr[[r, i]];
                    assert_eq!(hz[[r, i]], ez, "z = w ⊙ r, row {r} {i}");
                    rz += f * ez.as_f64();
                }
            }
            assert!(
                (sh[[0, r]] - rr).abs() <= 1e-9 * rr,
                "r·r row {r}: {}",
                sh[[0, r]]
            );
            if jacobi {
                assert!(
                    (sh[[3, r]] - rz).abs() <= 1e-9 * rz.abs().max(1e-300),
                    "r·z {r}"
                );
            } else if rqs.is_finite() {
                let bound = 1e-9 * rqs.abs().max(1e-300);
                assert!((sh[[4, r]] - rqs).abs() <= bound, "r·q {r}: {}", sh[[4, r]]);
            } else {
                assert!(
                    !sh[[4, r]].is_finite(),
                    "r·q {r}: {} (q holds infinity)",
                    sh[[4, r]]
                );
            }
        }
    }
}

/// The shapes of the per-row scalars and the mask are checked.
fn fused_checks<B: Backend>(b: &B, fx: &Fused<B>) {
    let rows = fx.rows;
    let grid = fx.grid;
    let n = fx.n;
    let mask = &fx.mask;
    let dx = &fx.dx;
    // The shapes of the per-row scalars and the mask are checked.
    let mut y = b.zeros::<FloatOf<B>>(&[rows, n]).expect("zeros");
    let mut short = up_acc(b, &ArrayD::<f64>::zeros(IxDyn(&[2, rows])));
    assert!(
        b.laplacian_dot_into(
            &grid,
            Boundary::DirichletZero,
            dx,
            &mut y,
            mask,
            &mut short,
            2
        )
        .is_err(),
        "slot 2 of a (2, rows) array"
    );
    let mut s = up_acc(b, &row_scalars(rows));
    let bad_mask = up(b, &ArrayD::<i32>::zeros(IxDyn(&[rows + 1])));
    assert!(
        b.laplacian_dot_into(
            &grid,
            Boundary::DirichletZero,
            dx,
            &mut y,
            &bad_mask,
            &mut s,
            0
        )
        .is_err(),
        "a mask of rows + 1 flags"
    );
}
