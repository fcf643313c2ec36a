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
    let rr = b
        .axpy_pair_rows(&alpha, &up(b, &d), &up(b, &q), &mut x, &mut r)
        .expect("axpy_pair_rows");
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
