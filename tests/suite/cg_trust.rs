//! Conjugate gradient never claims what it did not achieve: `converged` is judged on the true
//! residual `y − A·x`, the divergence rule never gives up on a definite system, `y = 0` returns
//! `x = 0` at once, a zero curvature stops at once, and every message's advice matches its cause.

use monomorph::algo::cg::{
    CsrOperator, DenseOperator, LaplacianOperator, LinearOperator, Method, Preconditioner,
    SolveParams, SolveResult, conjugate_gradient,
};
use monomorph::prelude::*;
use monomorph::{Arr, Boundary, FloatOf, Real};
use ndarray::{ArrayD, IxDyn};

use crate::cg::naive_laplacian;

/// A `(batch, n)` device array from host rows.
fn rows<B: Backend>(b: &B, rows: &[Vec<f64>]) -> Arr<B, FloatOf<B>> {
    let n = rows[0].len();
    let flat: Vec<FloatOf<B>> = rows
        .iter()
        .flatten()
        .map(|&v| FloatOf::<B>::from_f64(v))
        .collect();
    let host = ArrayD::from_shape_vec(IxDyn(&[rows.len(), n]), flat).expect("shape");
    b.upload(host.view()).expect("upload")
}

fn host<B: Backend>(b: &B, a: &Arr<B, FloatOf<B>>) -> ArrayD<f64> {
    b.download(a).expect("download").mapv(|v| v.as_f64())
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The SPD matrix of `tests/fixtures/cg/ill_conditioned_scipy.py`: `A = Qᵀ·diag(λ)·Q` with `Q`
/// the orthonormal DCT-II matrix (`Q[i][j] = s_i·cos(π·i·(2j+1)/(2n))`) and
/// `λ_j = cond^(j/(n−1))`, so cond(A) = `cond`. Built the same way in Python, no random numbers.
pub(crate) fn ill_conditioned(n: usize, cond: f64) -> Vec<f64> {
    let q = |i: usize, j: usize| {
        let s = if i == 0 {
            (1.0 / n as f64).sqrt()
        } else {
            (2.0 / n as f64).sqrt()
        };
        s * (std::f64::consts::PI * i as f64 * (2 * j + 1) as f64 / (2 * n) as f64).cos()
    };
    let lam: Vec<f64> = (0..n)
        .map(|k| cond.powf(k as f64 / (n - 1) as f64))
        .collect();
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = (0..n).map(|k| q(k, i) * lam[k] * q(k, j)).sum();
        }
    }
    a
}

/// The right-hand side of the same script: `y_j = sin(1 + j)`.
pub(crate) fn ill_conditioned_rhs(n: usize) -> Vec<f64> {
    (0..n).map(|j| (1.0 + j as f64).sin()).collect()
}

/// scipy 1.17.1's `scipy.sparse.linalg.cg` iterations on that system (n = 100, cond = 1e8,
/// rtol = 1e-6, x0 = 0), measured by `ill_conditioned_scipy.py`.
const SCIPY_ITERATIONS: usize = 4332;

fn matvec(a: &[f64], n: usize, x: &[f64]) -> Vec<f64> {
    (0..n)
        .map(|i| (0..n).map(|j| a[i * n + j] * x[j]).sum())
        .collect()
}

#[test]
fn spd_of_condition_1e8_converges_within_twice_scipys_iterations() {
    // The old rule (Σr² > 100·Σr0² after 8 iterations) declared this system diverged after 8
    // iterations: CG's residual grows before it falls on ill-conditioned definite systems.
    let b = Cpu::<Double>::new();
    let n = 100;
    let a = ill_conditioned(n, 1e8);
    let y = ill_conditioned_rhs(n);
    let ah = ArrayD::from_shape_vec(IxDyn(&[n, n]), a.clone()).expect("shape");
    let op = DenseOperator::new(&b, ah.view()).expect("dense");
    for method in [Method::Cg, Method::CgAdaptive] {
        let p = SolveParams::new(method).with_tolerances(1e-6, 0.0, 100 * n);
        let res = conjugate_gradient(&b, &op, &rows(&b, std::slice::from_ref(&y)), None, &p)
            .expect("solve");
        assert!(
            res.converged[0] && !res.diverged[0],
            "{method:?}: {:?}",
            res.message
        );
        assert!(
            res.iterations[0] <= 2 * SCIPY_ITERATIONS,
            "{method:?}: {} iterations, scipy {SCIPY_ITERATIONS}",
            res.iterations[0]
        );
        let x = host(&b, &res.x);
        let ax = matvec(&a, n, x.as_slice().expect("contiguous"));
        let r: Vec<f64> = y.iter().zip(&ax).map(|(p, q)| p - q).collect();
        assert!(
            norm(&r) <= 1e-6 * norm(&y),
            "{method:?}: ‖y − Ax‖ = {}",
            norm(&r)
        );
        assert!(
            (res.residual_norm[0] - norm(&r)).abs() <= 1e-3 * norm(&r),
            "{method:?}: residual_norm {} is not ‖y − Ax‖ = {}",
            res.residual_norm[0],
            norm(&r)
        );
        eprintln!(
            "cond 1e8 n {n} {method:?}: {} iterations (scipy {SCIPY_ITERATIONS})",
            res.iterations[0]
        );
    }
}

/// A periodic 8×8×4 Laplacian with `y_j = j/256`: its mean is 0.498, so the singular system
/// has no solution (‖y − A·x‖ ≥ |mean(y)|·√n ≈ 8 for every x). The seed's rules reported it
/// converged in f64 after 25 iterations: its recurrence residual reached 3.4e-5 (tolerance
/// 9.2e-5) by rounding, with ‖x‖ = 1.6e17 and ‖y − A·x‖ = 218.
fn singular_case<B: Backend>(b: &B) -> (SolveResult<B>, Vec<f64>, f64) {
    let grid = [8, 8, 4];
    let n = 256;
    let y: Vec<f64> = (0..n).map(|j| j as f64 / n as f64).collect();
    let op = LaplacianOperator::new(&grid, Boundary::Periodic).expect("laplacian");
    let p = SolveParams::default().with_tolerances(1e-5, 0.0, 1000);
    let res =
        conjugate_gradient(b, &op, &rows(b, std::slice::from_ref(&y)), None, &p).expect("solve");
    let mean = y.iter().sum::<f64>() / n as f64;
    (res, y, mean.abs() * (n as f64).sqrt())
}

fn check_singular<B: Backend>(b: &B) {
    let (res, y, floor) = singular_case(b);
    assert!(!res.converged[0], "{:?}", res);
    let x = host(b, &res.x);
    let ax = naive_laplacian(&[8, 8, 4], true, x.as_slice().expect("contiguous"));
    let r: Vec<f64> = y.iter().zip(&ax).map(|(p, q)| p - q).collect();
    let true_norm = norm(&r);
    eprintln!(
        "singular periodic ({}): {:?}, |x| = {:e}, host ‖y − Ax‖ = {true_norm:e}",
        std::any::type_name::<FloatOf<B>>(),
        res,
        norm(x.as_slice().unwrap())
    );
    // residual_norm and residual.npy are the true residual, far above the tolerance (the
    // values themselves are dominated by rounding of A·x for an x this large).
    assert!(res.residual_norm[0] >= 0.99 * floor, "{:?}", res);
    assert!(true_norm >= 0.99 * floor);
    let rr = host(b, &res.residual);
    let rn = norm(rr.as_slice().expect("contiguous"));
    assert!(
        (rn - res.residual_norm[0]).abs() <= 1e-6 * rn,
        "{rn} vs {:?}",
        res
    );
    assert!(
        res.residual_norm[0] <= 2.0 * true_norm && true_norm <= 2.0 * res.residual_norm[0],
        "reported {} vs host {true_norm}",
        res.residual_norm[0]
    );
    assert!(res.message[0].contains("zero mean"), "{}", res.message[0]);
}

#[test]
fn singular_periodic_system_without_solution_is_not_converged() {
    check_singular(&Cpu::<Double>::new());
    check_singular(&Cpu::<Single>::new());
}

#[test]
fn zero_rhs_returns_zero_at_once() {
    // y = 0 with x0 ≠ 0 and atol = 0: x = 0 with 0 iterations, per row; the other row solves.
    let b = Cpu::<Double>::new();
    let n = 64;
    let op = LaplacianOperator::new(&[8, 8], Boundary::DirichletZero).expect("laplacian");
    let y = vec![vec![0.0; n], (0..n).map(|j| (j as f64).cos()).collect()];
    let x0 = vec![vec![0.5; n], vec![0.25; n]];
    for method in [Method::Cg, Method::CgAdaptive] {
        let p = SolveParams::new(method).with_tolerances(1e-8, 0.0, 1000);
        let res =
            conjugate_gradient(&b, &op, &rows(&b, &y), Some(&rows(&b, &x0)), &p).expect("solve");
        assert_eq!(
            res.converged,
            vec![true, true],
            "{method:?} {:?}",
            res.message
        );
        assert_eq!(res.iterations[0], 0, "{method:?}");
        assert!(res.iterations[1] > 0);
        let x = host(&b, &res.x);
        assert!(
            x.index_axis(ndarray::Axis(0), 0).iter().all(|&v| v == 0.0),
            "{method:?}: x row 0"
        );
        assert_eq!(res.residual_norm[0], 0.0);
        assert!(res.message[0].contains("y = 0"), "{}", res.message[0]);
        assert!(!res.message[0].contains("max_iter"), "{}", res.message[0]);
    }
}

#[test]
fn zero_curvature_stops_at_once() {
    // A constant y on the periodic Laplacian lies in its null space: d·Ad = 0 at the first
    // step. The seed took zero steps until max_iter; now it is diverged after 1 iteration.
    let b = Cpu::<Double>::new();
    let op = LaplacianOperator::new(&[8, 8], Boundary::Periodic).expect("laplacian");
    let p = SolveParams::default().with_tolerances(1e-6, 0.0, 500);
    let res = conjugate_gradient(&b, &op, &rows(&b, &[vec![1.0; 64]]), None, &p).expect("solve");
    assert_eq!(res.converged, vec![false]);
    assert_eq!(res.diverged, vec![true]);
    assert_eq!(res.iterations, vec![1]);
    assert!((res.residual_norm[0] - 8.0).abs() < 1e-12, "{:?}", res);
    assert!(
        res.message[0].contains("zero curvature"),
        "{}",
        res.message[0]
    );
    assert!(res.message[0].contains("zero mean"), "{}", res.message[0]);
}

#[test]
fn growth_on_an_indefinite_operator_is_diverged_not_on_a_definite_one() {
    // The fixture's indefinite matrix diverges (curvature changes sign, residual grows 1e7×);
    // the same eigenvalues all made positive converge.
    let b = Cpu::<Double>::new();
    let a = crate::common::npy::<f64>("cg/indefinite_diverge_f64/A.npy");
    let y = crate::common::npy::<f64>("cg/indefinite_diverge_f64/y.npy");
    let yd = b.upload(y.view()).expect("upload");
    let op = DenseOperator::new(&b, a.view()).expect("dense");
    let p = SolveParams::default().with_tolerances(1e-8, 0.0, 500);
    let res = conjugate_gradient(&b, &op, &yd, None, &p).expect("solve");
    assert_eq!(res.diverged, vec![true]);
    assert!(
        res.message[0].contains("changed sign"),
        "{}",
        res.message[0]
    );
    // A² is SPD with condition 4 (eigenvalues in [1, 4]).
    let n = a.shape()[0];
    let a2 = ArrayD::from_shape_fn(IxDyn(&[n, n]), |ij| {
        (0..n).map(|k| a[[ij[0], k]] * a[[k, ij[1]]]).sum::<f64>()
    });
    let op2 = DenseOperator::new(&b, a2.view()).expect("dense");
    let res = conjugate_gradient(&b, &op2, &yd, None, &p).expect("solve");
    assert_eq!(res.converged, vec![true], "{:?}", res.message);
}

#[test]
fn advice_matches_the_cause() {
    let b = Cpu::<Double>::new();
    let op = LaplacianOperator::new(&[16, 16], Boundary::DirichletZero).expect("laplacian");
    let y = rows(&b, &[(0..256).map(|j| (j as f64 * 0.1).sin()).collect()]);
    // Too few iterations: raise max_iter, and Jacobi only when it is not already on.
    let p = SolveParams::default().with_tolerances(1e-10, 0.0, 3);
    let m = conjugate_gradient(&b, &op, &y, None, &p)
        .expect("solve")
        .message[0]
        .clone();
    assert!(m.contains("raise max_iter") && m.contains("Jacobi"), "{m}");
    let pj = SolveParams {
        preconditioner: Preconditioner::Jacobi,
        ..p.clone()
    };
    let m = conjugate_gradient(&b, &op, &y, None, &pj)
        .expect("solve")
        .message[0]
        .clone();
    assert!(m.contains("raise max_iter") && !m.contains("Jacobi"), "{m}");
    // A tolerance below what single precision can reach says so, not "raise max_iter".
    let bs = Cpu::<Single>::new();
    let ys = rows(&bs, &[(0..256).map(|j| (j as f64 * 0.1).sin()).collect()]);
    let p = SolveParams::default().with_tolerances(1e-12, 0.0, 2000);
    let res = conjugate_gradient(&bs, &op, &ys, None, &p).expect("solve");
    assert!(!res.converged[0]);
    let m = &res.message[0];
    assert!(m.contains("double precision"), "{m}");
    assert!(!m.contains("raise max_iter"), "{m}");
}

#[test]
fn single_precision_converged_means_the_true_residual_meets_the_tolerance() {
    // Every f32 entry reported converged has ‖y − A·x‖ ≤ tol computed independently in f64
    // (up to the f32 rounding of A·x itself).
    let b = Cpu::<Single>::new();
    let grid = [32, 32];
    let op = LaplacianOperator::new(&grid, Boundary::DirichletZero).expect("laplacian");
    let ys: Vec<Vec<f64>> = (0..3)
        .map(|k| {
            (0..1024)
                .map(|j| ((j * (k + 1)) as f64 * 0.05).sin())
                .collect()
        })
        .collect();
    for rtol in [1e-4, 1e-5, 1e-6] {
        let p = SolveParams::default().with_tolerances(rtol, 0.0, 2000);
        let res = conjugate_gradient(&b, &op, &rows(&b, &ys), None, &p).expect("solve");
        let x = host(&b, &res.x);
        for (e, y) in ys.iter().enumerate() {
            let xe: Vec<f64> = x.index_axis(ndarray::Axis(0), e).iter().copied().collect();
            let ax = naive_laplacian(&grid, false, &xe);
            let r: Vec<f64> = y.iter().zip(&ax).map(|(p, q)| p - q).collect();
            if res.converged[e] {
                assert!(
                    norm(&r) <= rtol * norm(y) * 1.01,
                    "rtol {rtol} entry {e}: ‖y − Ax‖ = {:e} > {:e}",
                    norm(&r),
                    rtol * norm(y)
                );
            }
        }
        eprintln!("f32 rtol {rtol}: {:?}", res);
    }
}

#[test]
fn a_csr_indptr_past_nnz_is_an_error_naming_indptr() {
    // indptr [0, 5, 3, 3] with 3 indices: the second entry points past the end. This panicked
    // (slice index out of range) while validating.
    let b = Cpu::<Double>::new();
    let d = ArrayD::from_elem(IxDyn(&[3]), 1.0);
    for (ptr, want) in [
        (&[0i64, 5, 3, 3][..], "past the end"),
        (&[0, -2, 3, 3][..], "decrease"),
        (&[0, 1, 2, 4][..], "past the end"),
        (&[0, 1, 2, 2][..], "last entry"),
    ] {
        let e = CsrOperator::<Cpu<Double>>::new(&b, 3, ptr, &[0, 1, 2], d.view())
            .err()
            .unwrap_or_else(|| panic!("{ptr:?} accepted"))
            .to_string();
        assert!(
            e.contains("indptr") && !e.contains("indices`"),
            "{ptr:?}: {e}"
        );
        assert!(e.contains(want), "{ptr:?}: {e}");
    }
    // check_csr_structure itself, and the backend check of a valid matrix.
    assert!(monomorph::check_csr_structure(3, 3, &[0, 5, 3, 3], &[0, 1, 2]).is_err());
    let op =
        CsrOperator::<Cpu<Double>>::new(&b, 3, &[0, 1, 2, 3], &[0, 1, 2], d.view()).expect("valid");
    assert_eq!(LinearOperator::<Cpu<Double>>::size(&op), 3);
}

#[test]
fn a_solve_too_large_for_memory_fails_before_iterating() {
    // y is 512 KiB; the four working vectors need 2 MiB, over the 1 MiB limit: one clear
    // out-of-memory error naming the solve's vectors, before any allocation.
    let b = Cpu::<Double>::with_memory_limit(1 << 20);
    let op = LaplacianOperator::new(&[64, 64], Boundary::DirichletZero).expect("laplacian");
    let y = rows(&b, &vec![vec![1.0; 4096]; 16]);
    let e = conjugate_gradient(&b, &op, &y, None, &SolveParams::default())
        .expect_err("over the memory limit")
        .to_string();
    assert!(
        e.contains("out of memory") && e.contains("working vectors"),
        "{e}"
    );
}
