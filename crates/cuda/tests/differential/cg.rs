//! Batched conjugate gradient on the device against the CPU: iterations and solutions.

use crate::common::{Dev, make};
use crate::{max_abs_diff, to_f64};
use monomorph_core::Real;
use monomorph_core::algo::cg::{LaplacianOperator, SolveParams, conjugate_gradient};
use monomorph_core::testing::Lcg;
use monomorph_core::{Boundary, Double, Memory, Precision, Single};
use monomorph_cpu::Cpu;

/// Batched CG on a Laplacian: same iterations (±1) and solutions within tolerance.
fn cg_agrees<P: Precision>(tol: f64) {
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(3);
    let grid = [12usize, 10, 9];
    let n: usize = grid.iter().product();
    let y = rng.array::<<P as Precision>::Float>(&[3, n]);
    let op = LaplacianOperator::new(&grid, Boundary::DirichletZero).unwrap();
    let params = SolveParams::default().with_tolerances(1e-5, 0.0, 500);
    let rc = conjugate_gradient(&cpu, &op, &cpu.upload(y.view()).unwrap(), None, &params).unwrap();
    let rg = conjugate_gradient(&gpu, &op, &gpu.upload(y.view()).unwrap(), None, &params).unwrap();
    assert_eq!(rc.converged, rg.converged);
    for (a, b) in rc.iterations.iter().zip(&rg.iterations) {
        assert!(a.abs_diff(*b) <= 1, "iterations {a} vs {b}");
    }
    let xc = to_f64(&cpu.download(&rc.x).unwrap());
    let xg = to_f64(&gpu.download(&rg.x).unwrap());
    let scale = xc.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&xc, &xg);
    assert!(d <= tol * scale.max(1.0), "max |x_cpu - x_cuda| = {d:e}");
}

/// Every CG path on the device against the CPU: the Laplacian, a dense matrix per entry and a
/// CSR matrix per entry, plain CG (whose per-row scalars stay on the device), CG with Jacobi
/// and CG-adaptive, with entries stopping at different iterations (masks that change): the
/// same flags, the same iteration counts (±1 in single precision, where rounding may move the
/// last step), and solutions within `tol` of the CPU's.
fn cg_paths_agree<P: Precision>(tol: f64) {
    use monomorph_core::algo::cg::{
        CsrOperator, DenseOperator, LinearOperator, Method, Preconditioner,
    };
    type F<P> = <P as Precision>::Float;
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(17);
    let single = std::mem::size_of::<F<P>>() == 4;
    let rtol = if single {
        vec![1e-2, 1e-4, 1e-3]
    } else {
        vec![1e-3, 1e-9, 1e-6]
    };
    // Dense SPD per entry: B·Bᵀ + shift·I.
    let m = 40;
    let dense = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[3, m, m]), |i| {
        let v = ((i[1] * 7 + i[2] * 3 + i[0]) % 11) as f64 / 11.0;
        let w = ((i[2] * 7 + i[1] * 3 + i[0]) % 11) as f64 / 11.0;
        F::<P>::from_f64(0.5 * (v + w) + if i[1] == i[2] { m as f64 * 0.3 } else { 0.0 })
    });
    let (mut indptr, mut indices) = (vec![0i64], Vec::new());
    for i in 0..m as i64 {
        for j in [i - 1, i, i + 1] {
            if (0..m as i64).contains(&j) {
                indices.push(j);
            }
        }
        indptr.push(indices.len() as i64);
    }
    let csr_vals = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[3, indices.len()]), |i| {
        let p = i[1];
        let row = indptr.iter().rposition(|&s| s as usize <= p).unwrap();
        F::<P>::from_f64(if indices[p] as usize == row {
            2.5 + 0.2 * i[0] as f64
        } else {
            -1.0
        })
    });
    let grid = [12usize, 10, 9];
    let n: usize = grid.iter().product();
    let y_lap = rng.array::<F<P>>(&[3, n]);
    let y_m = rng.array::<F<P>>(&[3, m]);
    let lap = LaplacianOperator::new(&grid, Boundary::DirichletZero).unwrap();
    let (dense_c, dense_g) = (
        DenseOperator::new(&cpu, dense.view()).unwrap(),
        DenseOperator::new(&gpu, dense.view()).unwrap(),
    );
    let (csr_c, csr_g) = (
        CsrOperator::new(&cpu, m, &indptr, &indices, csr_vals.view()).unwrap(),
        CsrOperator::new(&gpu, m, &indptr, &indices, csr_vals.view()).unwrap(),
    );
    type Pair<'a, P> = (
        &'a str,
        &'a dyn LinearOperator<Cpu<P>>,
        &'a dyn LinearOperator<Dev<P>>,
        &'a ndarray::ArrayD<F<P>>,
    );
    let ops: [Pair<'_, P>; 3] = [
        ("laplacian", &lap, &lap, &y_lap),
        ("dense", &dense_c, &dense_g, &y_m),
        ("csr", &csr_c, &csr_g, &y_m),
    ];
    for (name, op_c, op_g, y) in ops {
        for (method, pre) in [
            (Method::Cg, Preconditioner::None),
            (Method::Cg, Preconditioner::Jacobi),
            (Method::CgAdaptive, Preconditioner::None),
        ] {
            let mut params = SolveParams::new(method);
            params.preconditioner = pre;
            params.rtol = rtol.clone();
            params.max_iter = vec![2000];
            let what = format!("{name} {method:?} {pre:?} {}", P::NAME);
            let rc = conjugate_gradient(&cpu, op_c, &cpu.upload(y.view()).unwrap(), None, &params)
                .unwrap();
            let rg = conjugate_gradient(&gpu, op_g, &gpu.upload(y.view()).unwrap(), None, &params)
                .unwrap();
            assert_eq!(rc.converged, rg.converged, "{what}: {rc:?} vs {rg:?}");
            assert_eq!(rc.diverged, rg.diverged, "{what}");
            for (a, b) in rc.iterations.iter().zip(&rg.iterations) {
                let slack = if single { 1 } else { 0 };
                assert!(a.abs_diff(*b) <= slack, "{what}: iterations {a} vs {b}");
            }
            let xc = to_f64(&cpu.download(&rc.x).unwrap());
            let xg = to_f64(&gpu.download(&rg.x).unwrap());
            let scale = xc.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let d = max_abs_diff(&xc, &xg);
            assert!(
                d <= tol * scale.max(1.0),
                "{what}: max |x_cpu - x_cuda| = {d:e}"
            );
        }
    }
}

#[test]
fn cg_paths_single() {
    cg_paths_agree::<Single>(2e-3);
}

#[test]
fn cg_paths_double() {
    cg_paths_agree::<Double>(1e-7);
}

#[test]
fn cg_single() {
    cg_agrees::<Single>(1e-4);
}

#[test]
fn cg_double() {
    cg_agrees::<Double>(1e-9);
}
