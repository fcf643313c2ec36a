//! CPU-vs-CUDA differential tests: the same generic algorithm run on `Cpu<P>` and `Cuda<P>`
//! must agree. Skipped (with a line) without a device; `MONOMORPH_REQUIRE_CUDA=1` makes a
//! skip a failure. With the `cpu-stand-in` feature every body runs with `Cpu<P>` in the
//! device's place (see `common`).

mod common;

use common::{Dev, make};
use monomorph_core::algo::cg::{LaplacianOperator, SolveParams, conjugate_gradient};
use monomorph_core::algo::matching::{MatchParams, Score, match_template};
use monomorph_core::algo::peaks::{PeakParams, find_peaks};
use monomorph_core::algo::rotations::RotationSet;
use monomorph_core::testing::Lcg;
use monomorph_core::{Backend, Boundary, Double, Memory, Precision, Single};
use monomorph_cpu::Cpu;

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn to_f64<T: monomorph_core::Real>(a: &ndarray::ArrayD<T>) -> Vec<f64> {
    a.iter().map(|v| v.as_f64()).collect()
}

/// Template matching of a small volume with a few rotations: scores and best rotations agree.
fn matching_agrees<P: Precision>(score: Score, tol: f64) {
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(7);
    let target = rng.array::<<P as Precision>::Float>(&[24, 20, 22]);
    let template = rng.array::<<P as Precision>::Float>(&[7, 6, 8]);
    let rotations =
        RotationSet::from_euler_zyz(&[[0.0, 0.0, 0.0], [30.0, 20.0, 10.0], [90.0, 45.0, 0.0]])
            .expect("rotations");
    let run = |b: &dyn Fn() -> (Vec<f64>, Vec<f64>, f64)| b();
    let cpu_out = run(&|| {
        let t = cpu.upload(target.view()).unwrap();
        let m = cpu.upload(template.view()).unwrap();
        let r = match_template(&cpu, &t, &m, &MatchParams::new(score, rotations.clone())).unwrap();
        (
            to_f64(&cpu.download(&r.scores).unwrap()),
            to_f64(&cpu.download(&r.rotation_index).unwrap()),
            r.ssum,
        )
    });
    let gpu_out = run(&|| {
        let t = gpu.upload(target.view()).unwrap();
        let m = gpu.upload(template.view()).unwrap();
        let r = match_template(&gpu, &t, &m, &MatchParams::new(score, rotations.clone())).unwrap();
        (
            to_f64(&gpu.download(&r.scores).unwrap()),
            to_f64(&gpu.download(&r.rotation_index).unwrap()),
            r.ssum,
        )
    });
    let d = max_abs_diff(&cpu_out.0, &gpu_out.0);
    assert!(
        d <= tol,
        "{score}: max |cpu - cuda| score = {d:e} > {tol:e}"
    );
    let same_rot = cpu_out
        .1
        .iter()
        .zip(&gpu_out.1)
        .filter(|(a, b)| a == b)
        .count();
    // Near-ties between rotations may flip under different rounding; nearly all must agree.
    assert!(
        same_rot as f64 >= 0.99 * cpu_out.1.len() as f64,
        "{score}: only {same_rot}/{} best rotations agree",
        cpu_out.1.len()
    );
    assert!(((cpu_out.2 - gpu_out.2) / cpu_out.2.abs().max(1e-30)).abs() < 1e-3);
}

/// Score statistics and the phase-scrambling background on the device: the same maps as the
/// CPU's to round-off (3-D FLC, 2-D CC).
fn stats_and_background_agree<P: Precision>(tol: f64) {
    use monomorph_core::algo::matching::Background;
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(9);
    for (score, tshape, pshape) in [
        (Score::FLC, vec![20usize, 18, 16], vec![6usize, 6, 6]),
        (Score::CC, vec![30, 28], vec![7, 7]),
    ] {
        let target = rng.array::<<P as Precision>::Float>(&tshape);
        let template = rng.array::<<P as Precision>::Float>(&pshape);
        let rotations = RotationSet::uniform(tshape.len(), 60.0).expect("rotations");
        let run = |b: &dyn Fn() -> Vec<Vec<f64>>| b();
        macro_rules! on {
            ($b:expr) => {{
                let t = $b.upload(target.view()).unwrap();
                let m = $b.upload(template.view()).unwrap();
                let mut p = MatchParams::new(score, rotations.clone());
                p.score_stats = true;
                p.background = Some(Background::PhaseScrambling);
                let r = match_template($b, &t, &m, &p).unwrap();
                let st = r.statistics($b).unwrap().unwrap();
                vec![
                    to_f64(&$b.download(&r.scores).unwrap()),
                    to_f64(&$b.download(&st.mean).unwrap()),
                    to_f64(&$b.download(&st.std).unwrap()),
                ]
            }};
        }
        let c = run(&|| on!(&cpu));
        let g = run(&|| on!(&gpu));
        let scale = c[0].iter().fold(0.0f64, |a, v| a.max(v.abs())).max(1.0);
        for (k, what) in ["scores", "mean", "std"].iter().enumerate() {
            let d = max_abs_diff(&c[k], &g[k]);
            assert!(d <= tol * scale, "{score}: {what} differs by {d:e}");
        }
    }
}

#[test]
fn stats_and_background_single() {
    stats_and_background_agree::<Single>(1e-4);
}

#[test]
fn stats_and_background_double() {
    stats_and_background_agree::<Double>(1e-9);
}

#[test]
fn matching_cc_single() {
    matching_agrees::<Single>(Score::CC, 1e-3);
}

#[test]
fn matching_flc_spherical_single() {
    matching_agrees::<Single>(Score::FLCSphericalMask, 1e-4);
}

#[test]
fn matching_flc_double() {
    matching_agrees::<Double>(Score::FLC, 1e-9);
}

/// Peak calling on the same map gives the same peaks.
fn peaks_agree<P: Precision>() {
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(11);
    let map = rng.array::<<P as Precision>::Float>(&[30, 28, 26]);
    let params = PeakParams::with_min_distance(3);
    let a = find_peaks(&cpu, &cpu.upload(map.view()).unwrap(), &params).unwrap();
    let b = find_peaks(&gpu, &gpu.upload(map.view()).unwrap(), &params).unwrap();
    assert_eq!(a, b, "peaks differ between CPU and CUDA");
}

#[test]
fn peaks_single() {
    peaks_agree::<Single>();
}

#[test]
fn peaks_double() {
    peaks_agree::<Double>();
}

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

/// Device-only: the CUDA device's own facts (not under the CPU stand-in).
#[cfg(not(feature = "cpu-stand-in"))]
#[test]
fn device_info_is_consistent() {
    use monomorph_cuda::Cuda;
    let Some(gpu) = make::<Single>() else { return };
    let info = gpu.info();
    let d = gpu.device();
    assert_eq!(d.name, info.name);
    assert!(info.total_memory >= info.free_memory && info.multiprocessors > 0);
    let g64 = Cuda::<Double>::sharing(&gpu);
    assert_eq!(g64.device().name, d.name);
}

// ------------------------------------------------------------------ fused kernels vs host

use monomorph_core::{CorrWindow, Correlate, IntOf, Normalization, Real, RunningMax, host};

/// `score_max_update` on the device equals the host reference kernel for the three
/// normalisations: scores within round-off, the same winners, the same Σ score².
fn score_max_update_agrees<P: Precision>(tol: f64) {
    let Some(gpu) = make::<P>() else { return };
    type F<P> = <P as Precision>::Float;
    let mut rng = Lcg::new(21);
    let fast = [12usize, 10, 9];
    let out = [8usize, 7, 9];
    let shift = [-3isize, 2, -4];
    let corr = rng.array::<F<P>>(&fast);
    let c1 = rng.array::<F<P>>(&fast);
    let c2 = rng
        .array::<F<P>>(&fast)
        .mapv(|v| v * v + F::<P>::from_f64(0.5));
    let inv_den = rng.array::<F<P>>(&out);
    let best0 = rng.array::<F<P>>(&out).mapv(|v| v * F::<P>::from_f64(0.3));
    let scale = F::<P>::from_f64(0.7);
    let (n, eps) = (F::<P>::from_f64(3.0), F::<P>::from_f64(1e-6));
    for which in 0..3 {
        // Host reference.
        let mut hb = best0.clone();
        let mut hi = ndarray::ArrayD::<IntOf<Dev<P>>>::zeros(ndarray::IxDyn(&out));
        let hnorm: host::Norm<'_, F<P>> = match which {
            0 => Normalization::Scaled { scale },
            1 => Normalization::Denominator {
                scale,
                inv_den: inv_den.as_slice().unwrap(),
            },
            _ => Normalization::Local {
                scale,
                c1: c1.as_slice().unwrap(),
                c2: c2.as_slice().unwrap(),
                n,
                eps,
            },
        };
        let idx = <IntOf<Dev<P>> as Real>::from_f64(4.0);
        // The score moments too (one pass: each voxel's words then hold its one score).
        let mscale = [2f64.powi(50), 2f64.powi(40)];
        let mut mshape = out.to_vec();
        mshape.push(4);
        let mut hm = ndarray::ArrayD::<i64>::zeros(ndarray::IxDyn(&mshape));
        // The host pass adds to the working form of the moments.
        let nl = out[out.len() - 1];
        host::moments_open(hm.as_slice_mut().unwrap(), nl);
        let hs = host::score_max_update(
            corr.as_slice().unwrap(),
            &fast,
            &hnorm,
            &shift,
            &out,
            0..out[0],
            hb.as_slice_mut().unwrap(),
            hi.as_slice_mut().unwrap(),
            idx,
            Some((hm.as_slice_mut().unwrap(), mscale)),
        )
        .unwrap();
        host::moments_close(hm.as_slice_mut().unwrap(), nl);
        // Device.
        let dc = gpu.upload(corr.view()).unwrap();
        let (d1, d2, dd) = (
            gpu.upload(c1.view()).unwrap(),
            gpu.upload(c2.view()).unwrap(),
            gpu.upload(inv_den.view()).unwrap(),
        );
        let mut db = gpu.upload(best0.view()).unwrap();
        let mut di = gpu.zeros::<IntOf<Dev<P>>>(&out).unwrap();
        let mut ss = gpu.zeros::<f64>(&[1]).unwrap();
        let mut dm = gpu.zeros::<i64>(&mshape).unwrap();
        gpu.moments_open(&mut dm).unwrap();
        // The same normalisation on the device arrays (c1, then c2).
        let mut masks = [&d1, &d2].into_iter();
        let norm = hnorm.map(|_| &dd, |_| masks.next().unwrap());
        let rm = RunningMax {
            best: &mut db,
            best_index: &mut di,
            index: idx,
            ssum: &mut ss,
            moments: Some(monomorph_core::Moments {
                acc: &mut dm,
                scale: mscale,
            }),
        };
        gpu.score_max_update(&dc, norm, CorrWindow { shift: &shift }, rm)
            .unwrap();
        gpu.moments_close(&mut dm).unwrap();
        // Moments: the same score per voxel to round-off (mean of one pass = the score).
        let gm = gpu.download(&dm).unwrap();
        let stat = |w: &[i64]| {
            monomorph_core::algo::matching::voxel_statistics(w, 0.0, 1, mscale).expect("in range")
                [0]
        };
        for (g, h) in gm
            .as_slice()
            .unwrap()
            .chunks_exact(4)
            .zip(hm.as_slice().unwrap().chunks_exact(4))
        {
            let (a, b) = (stat(g), stat(h));
            assert!(
                (a - b).abs() <= tol * (1.0 + b.abs()),
                "norm {which}: moments {a} vs {b}"
            );
        }
        let gb = to_f64(&gpu.download(&db).unwrap());
        let d = max_abs_diff(&gb, &to_f64(&hb));
        assert!(d <= tol, "norm {which}: best differs by {d:e}");
        let gi = to_f64(&gpu.download(&di).unwrap());
        let same = gi
            .iter()
            .zip(to_f64(&hi).iter())
            .filter(|(a, b)| a == b)
            .count();
        assert!(
            same as f64 >= 0.99 * gi.len() as f64,
            "norm {which}: {same}/{} winners agree",
            gi.len()
        );
        let gs = gpu.download(&ss).unwrap()[[0]];
        assert!(
            (gs - hs).abs() <= 1e3 * tol * hs.abs().max(1.0),
            "norm {which}: ssum {gs} vs {hs}"
        );
        // Σ score² is reduced in a fixed order (no float atomics): the same pass again gives
        // the same bits.
        let mut ss2 = gpu.zeros::<f64>(&[1]).unwrap();
        let mut masks = [&d1, &d2].into_iter();
        let norm = hnorm.map(|_| &dd, |_| masks.next().unwrap());
        let rm = RunningMax {
            best: &mut db,
            best_index: &mut di,
            index: idx,
            ssum: &mut ss2,
            moments: None,
        };
        gpu.score_max_update(&dc, norm, CorrWindow { shift: &shift }, rm)
            .unwrap();
        let gs2 = gpu.download(&ss2).unwrap()[[0]];
        assert_eq!(
            gs2.to_bits(),
            gs.to_bits(),
            "norm {which}: ssum not reproducible"
        );
    }
}

#[test]
fn score_max_update_single() {
    score_max_update_agrees::<Single>(1e-5);
}

#[test]
fn score_max_update_double() {
    score_max_update_agrees::<Double>(1e-12);
}

/// `inverse_denominator` on the device equals the host kernel.
fn inverse_denominator_agrees<P: Precision>(tol: f64) {
    let Some(gpu) = make::<P>() else { return };
    type F<P> = <P as Precision>::Float;
    let mut rng = Lcg::new(22);
    let fast = [11usize, 10, 8];
    let out = [9usize, 6, 8];
    let shift = [-5isize, 3, 0];
    let c1 = rng.array::<F<P>>(&fast);
    // Some points with e2 − e1² below eps, to exercise the "1 where s < eps" branch.
    let c2 = rng.array::<F<P>>(&fast).mapv(|v| v * v);
    let (scale, n, eps) = (
        F::<P>::from_f64(0.9),
        F::<P>::from_f64(2.5),
        F::<P>::from_f64(1e-3),
    );
    let mut want = ndarray::ArrayD::<F<P>>::zeros(ndarray::IxDyn(&out));
    host::inverse_denominator(
        c1.as_slice().unwrap(),
        c2.as_slice().unwrap(),
        &fast,
        &shift,
        scale,
        n,
        eps,
        &out,
        0..out[0],
        want.as_slice_mut().unwrap(),
    )
    .unwrap();
    let mut got = gpu.zeros::<F<P>>(&out).unwrap();
    gpu.inverse_denominator(
        &gpu.upload(c1.view()).unwrap(),
        &gpu.upload(c2.view()).unwrap(),
        CorrWindow { shift: &shift },
        scale,
        n,
        eps,
        &mut got,
    )
    .unwrap();
    let g = to_f64(&gpu.download(&got).unwrap());
    let w = to_f64(&want);
    let scale_w = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&g, &w);
    assert!(
        d <= tol * scale_w,
        "inverse_denominator differs by {d:e} (scale {scale_w})"
    );
}

#[test]
fn inverse_denominator_single() {
    inverse_denominator_agrees::<Single>(1e-5);
}

#[test]
fn inverse_denominator_double() {
    inverse_denominator_agrees::<Double>(1e-12);
}

/// `combine_masked_correlations` on the device equals the host kernel (scores, the overlap cut, the clip).
fn combine_masked_correlations_agrees<P: Precision>(tol: f64) {
    let Some(gpu) = make::<P>() else { return };
    type F<P> = <P as Precision>::Float;
    let mut rng = Lcg::new(23);
    let shape = [10usize, 9, 8];
    let pos = |a: ndarray::ArrayD<F<P>>| a.mapv(|v| F::<P>::from_f64(v.as_f64().abs() + 0.05));
    let ins: Vec<ndarray::ArrayD<F<P>>> = vec![
        rng.array(&shape),
        rng.array(&shape),
        rng.array(&shape),
        pos(rng.array(&shape)),
        pos(rng.array(&shape)),
        pos(rng.array(&shape)),
    ];
    let (scale, eps, ratio) = (
        F::<P>::from_f64(1.3),
        F::<P>::from_f64(1e-6),
        F::<P>::from_f64(0.3),
    );
    let mut want = ins[0].clone();
    host::combine_masked_correlations(
        want.as_slice_mut().unwrap(),
        [
            ins[1].as_slice().unwrap(),
            ins[2].as_slice().unwrap(),
            ins[3].as_slice().unwrap(),
            ins[4].as_slice().unwrap(),
            ins[5].as_slice().unwrap(),
        ],
        scale,
        eps,
        ratio,
    );
    let d: Vec<_> = ins.iter().map(|a| gpu.upload(a.view()).unwrap()).collect();
    let mut c_ft = gpu.upload(ins[0].view()).unwrap();
    gpu.combine_masked_correlations(
        &mut c_ft, &d[1], &d[2], &d[3], &d[4], &d[5], scale, eps, ratio,
    )
    .unwrap();
    let g = to_f64(&gpu.download(&c_ft).unwrap());
    let w = to_f64(&want);
    let zeros_w = w.iter().filter(|v| **v == 0.0).count();
    assert!(zeros_w > 0, "the test data must reach the overlap cut");
    let diff = max_abs_diff(&g, &w);
    assert!(
        diff <= tol,
        "combine_masked_correlations differs by {diff:e}"
    );
}

#[test]
fn combine_masked_correlations_single() {
    combine_masked_correlations_agrees::<Single>(1e-4);
}

#[test]
fn combine_masked_correlations_double() {
    combine_masked_correlations_agrees::<Double>(1e-10);
}

// ------------------------------------------------------------------ whole matching runs

/// A run of `match_template` with every option the scores need, on any backend.
#[allow(clippy::too_many_arguments)]
fn match_run<B: Backend>(
    b: &B,
    score: Score,
    target: &ndarray::ArrayD<monomorph_core::FloatOf<B>>,
    template: &ndarray::ArrayD<monomorph_core::FloatOf<B>>,
    mask: Option<&ndarray::ArrayD<monomorph_core::FloatOf<B>>>,
    target_mask: Option<&ndarray::ArrayD<monomorph_core::FloatOf<B>>>,
    rotations: &RotationSet,
    pad_edges: bool,
    tile: Option<Vec<usize>>,
) -> (Vec<f64>, Vec<f64>, f64, usize) {
    let t = b.upload(target.view()).unwrap();
    let m = b.upload(template.view()).unwrap();
    let mk = mask.map(|x| b.upload(x.view()).unwrap());
    let tm = target_mask.map(|x| b.upload(x.view()).unwrap());
    let mut p = MatchParams::new(score, rotations.clone());
    p.template_mask = mk.as_ref();
    p.target_mask = tm.as_ref();
    p.pad_edges = pad_edges;
    p.tile_shape = tile;
    let r = match_template(b, &t, &m, &p).unwrap();
    (
        to_f64(&b.download(&r.scores).unwrap()),
        to_f64(&b.download(&r.rotation_index).unwrap()),
        r.ssum,
        r.tiles,
    )
}

fn ball<T: Real>(shape: &[usize]) -> ndarray::ArrayD<T> {
    let r = shape.iter().copied().min().unwrap() as f64 / 2.0 - 0.5;
    ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(shape), |i| {
        let d2: f64 = (0..shape.len())
            .map(|k| (i[k] as f64 - (shape[k] as f64 - 1.0) / 2.0).powi(2))
            .sum();
        T::from_f64(if d2 <= r * r { 1.0 } else { 0.0 })
    })
}

/// CPU and CUDA agree on a score: values within `tol` of the score scale, ≥ 99 % of the
/// winning rotations, Σ score² within 1e-3.
#[allow(clippy::too_many_arguments)]
fn scores_agree<P: Precision>(
    score: Score,
    target_shape: &[usize],
    template_shape: &[usize],
    rotations: &RotationSet,
    pad_edges: bool,
    tile: Option<Vec<usize>>,
    tol: f64,
) {
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(31);
    let target = rng.array::<<P as Precision>::Float>(target_shape);
    let template = rng.array::<<P as Precision>::Float>(template_shape);
    let mask = ball::<<P as Precision>::Float>(template_shape);
    let tmask = ball::<<P as Precision>::Float>(target_shape);
    let needs_mask = matches!(
        score,
        Score::CAM | Score::FLC | Score::FLCSphericalMask | Score::MCC
    );
    let mk = needs_mask.then_some(&mask);
    let tm = (score == Score::MCC).then_some(&tmask);
    let c = match_run(
        &cpu,
        score,
        &target,
        &template,
        mk,
        tm,
        rotations,
        pad_edges,
        tile.clone(),
    );
    let g = match_run(
        &gpu, score, &target, &template, mk, tm, rotations, pad_edges, tile,
    );
    assert_eq!(c.3, g.3, "{score}: tile counts differ");
    let scale = c.0.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&c.0, &g.0);
    assert!(
        d <= tol * scale,
        "{score}: max |cpu − cuda| = {d:e} (scale {scale:e})"
    );
    let same = c.1.iter().zip(&g.1).filter(|(a, b)| a == b).count();
    assert!(
        same as f64 >= 0.99 * c.1.len() as f64,
        "{score}: only {same}/{} best rotations agree",
        c.1.len()
    );
    assert!(
        ((c.2 - g.2) / c.2.abs().max(1e-30)).abs() < 1e-3,
        "{score}: ssum {} vs {}",
        c.2,
        g.2
    );
}

fn rot3() -> RotationSet {
    RotationSet::from_euler_zyz(&[[0.0, 0.0, 0.0], [30.0, 20.0, 10.0], [90.0, 45.0, 0.0]])
        .expect("rotations")
}

fn rot2() -> RotationSet {
    let m = |deg: f64| {
        let (s, c) = deg.to_radians().sin_cos();
        [[c, -s], [s, c]]
    };
    let mats: Vec<[[f64; 2]; 2]> = [0.0, 25.0, 70.0, 140.0].iter().map(|&d| m(d)).collect();
    let flat: Vec<f64> = mats
        .iter()
        .flat_map(|r| r.iter().flatten().copied())
        .collect();
    let a = ndarray::Array3::from_shape_vec((mats.len(), 2, 2), flat).unwrap();
    RotationSet::from_array(a.view()).expect("2-D rotations")
}

#[test]
fn matching_mcc_single() {
    scores_agree::<Single>(
        Score::MCC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-3,
    );
}

#[test]
fn matching_cam_single() {
    scores_agree::<Single>(
        Score::CAM,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_lcc_single() {
    scores_agree::<Single>(
        Score::LCC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_ncc_single() {
    scores_agree::<Single>(
        Score::NCC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_flc_single() {
    scores_agree::<Single>(
        Score::FLC,
        &[24, 20, 22],
        &[7, 6, 8],
        &rot3(),
        false,
        None,
        1e-4,
    );
}

#[test]
fn matching_mcc_cam_double() {
    for score in [Score::MCC, Score::CAM, Score::NCC] {
        scores_agree::<Double>(score, &[20, 18, 16], &[6, 7, 5], &rot3(), false, None, 1e-9);
    }
}

#[test]
fn matching_2d_every_score() {
    for score in Score::ALL {
        scores_agree::<Single>(score, &[64, 50], &[11, 9], &rot2(), false, None, 1e-3);
    }
    scores_agree::<Single>(Score::FLC, &[64, 50], &[11, 9], &rot2(), true, None, 1e-3);
}

#[test]
fn matching_tiled() {
    for (score, pad) in [(Score::FLC, false), (Score::CC, true), (Score::NCC, false)] {
        scores_agree::<Single>(
            score,
            &[40, 36, 30],
            &[8, 7, 6],
            &rot3(),
            pad,
            Some(vec![20, 18, 30]),
            1e-4,
        );
    }
}

// ------------------------------------------------------------------ pytme fixtures on the GPU

/// A little-endian i32 word of an MRC header.
fn mrc_word(h: &[u8], i: usize) -> i32 {
    i32::from_le_bytes(h[4 * i..4 * i + 4].try_into().unwrap())
}

/// An MRC volume of mode 2 (f32) in file order `(z, y, x)` (sections, rows, columns), as the
/// command line reads it; anything else is a failure naming the file.
fn read_mrc(path: &std::path::Path) -> ndarray::ArrayD<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.len() >= 1024,
        "{}: shorter than a header",
        path.display()
    );
    let (nx, ny, nz) = (
        mrc_word(&bytes, 0),
        mrc_word(&bytes, 1),
        mrc_word(&bytes, 2),
    );
    let (mode, ext) = (mrc_word(&bytes, 3), mrc_word(&bytes, 23));
    let axes = [
        mrc_word(&bytes, 16),
        mrc_word(&bytes, 17),
        mrc_word(&bytes, 18),
    ];
    assert!(
        mode == 2 && axes == [1, 2, 3] && nx > 0 && ny > 0 && nz > 0 && ext >= 0,
        "{}: mode {mode}, axes {axes:?}, size {nx}×{ny}×{nz}: only f32 in x, y, z order here",
        path.display()
    );
    let shape = [nz as usize, ny as usize, nx as usize];
    let n: usize = shape.iter().product();
    let start = 1024 + ext as usize;
    let data = bytes
        .get(start..start + 4 * n)
        .unwrap_or_else(|| panic!("{}: truncated data", path.display()));
    let v: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v).unwrap()
}

/// Every pytme fixture case under `tests/fixtures/matching`, each by the files it holds:
///
/// * a library case (`target.npy`, pytme's own rotated templates, so only the score maths
///   differ): the device's map agrees with pytme's within the case's tolerance, and with the
///   CPU's;
/// * a command-line case (`target.mrc`, `rotations.npy` in file order, pytme's ssum in its
///   case.json: `3d_flc_nonfast`): run through the library with the backend's own rotation,
///   the device's map agrees with the CPU's and its ssum (over the whole FFT grid) with pytme's.
///
/// A folder of neither layout fails the test, so that a fixture added later is run or seen.
#[test]
fn pytme_fixtures_on_the_gpu() {
    let Some(gpu) = make::<Single>() else { return };
    let Some(root) = common::fixtures("matching") else {
        return;
    };
    let cpu = Cpu::<Single>::new();
    let (mut library, mut cli) = (Vec::new(), Vec::new());
    for dir in common::case_dirs(&root) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if dir.join("target.npy").exists() {
            library_case_on_the_gpu(&gpu, &cpu, &dir, &name);
            library.push(name);
        } else if dir.join("target.mrc").exists() {
            cli_case_on_the_gpu(&gpu, &cpu, &dir, &name);
            cli.push(name);
        } else {
            panic!("{name}: neither target.npy (a library case) nor target.mrc (a CLI case)");
        }
    }
    println!("library cases {library:?}; command-line cases {cli:?}");
    assert!(
        library.len() >= 9 && !cli.is_empty(),
        "only {} library and {} command-line cases under {}",
        library.len(),
        cli.len(),
        root.display()
    );
}

/// One library case of [`pytme_fixtures_on_the_gpu`].
fn library_case_on_the_gpu(
    gpu: &Dev<Single>,
    cpu: &Cpu<Single>,
    dir: &std::path::Path,
    name: &str,
) {
    use common::npy;
    let meta = common::case_json(dir);
    let need = |f: &str| npy(dir, f).unwrap_or_else(|| panic!("{name}: {f} missing"));
    let score: Score = meta["score"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no score in case.json"))
        .parse()
        .unwrap();
    let pad = meta["pad_target_edges"]
        .as_bool()
        .unwrap_or_else(|| panic!("{name}: no pad_target_edges in case.json"));
    let target = need("target.npy");
    let template = need("template.npy");
    let rot = need("rotations.npy")
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap();
    let rotations = RotationSet::from_array(rot.view()).unwrap();
    let want = need("scores.npy");
    let split = |a: ndarray::ArrayD<f32>| -> Vec<ndarray::ArrayD<f32>> {
        a.axis_iter(ndarray::Axis(0))
            .map(|v| v.to_owned())
            .collect()
    };
    let rt = split(need("rotated_templates.npy"));
    let rm = npy(dir, "rotated_masks.npy").map(split);
    let mask = npy(dir, "template_mask.npy");
    let tmask = npy(dir, "target_mask.npy");
    macro_rules! go {
        ($b:expr) => {{
            let b = $b;
            let t = b.upload(target.view()).unwrap();
            let m = b.upload(template.view()).unwrap();
            let mk = mask.as_ref().map(|x| b.upload(x.view()).unwrap());
            let tm = tmask.as_ref().map(|x| b.upload(x.view()).unwrap());
            let drt: Vec<_> = rt.iter().map(|x| b.upload(x.view()).unwrap()).collect();
            let drm: Option<Vec<_>> = rm
                .as_ref()
                .map(|v| v.iter().map(|x| b.upload(x.view()).unwrap()).collect());
            let mut p = MatchParams::new(score, rotations.clone());
            p.template_mask = mk.as_ref();
            p.target_mask = tm.as_ref();
            p.pad_edges = pad;
            p.prerotated = Some(monomorph_core::algo::matching::Prerotated {
                templates: &drt,
                masks: drm.as_deref(),
            });
            let r = match_template(b, &t, &m, &p).unwrap();
            to_f64(&b.download(&r.scores).unwrap())
        }};
    }
    let g = go!(gpu);
    let c = go!(cpu);
    let scale = c.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&g, &c);
    assert!(
        d <= 1e-4 * scale,
        "{name}: max |cuda − cpu| = {d:e} (scale {scale:e})"
    );
    // Against pytme itself: the case's own absolute tolerance, outside the padded cases'
    // even-template first row (compared on the CPU side in tests/suite).
    let t = &meta["tolerances"];
    let w: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    let wmax = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = t["score_abs"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}: no tolerances.score_abs"))
        .max(t["score_rel_to_max_abs"].as_f64().unwrap_or(0.0) * wmax);
    if !pad {
        let dp = max_abs_diff(&g, &w);
        assert!(dp <= tol, "{name}: max |cuda − pytme| = {dp:e} > {tol:e}");
    }
}

/// One command-line case of [`pytme_fixtures_on_the_gpu`] (FLC with a template mask, the
/// backend's own rotation): the device's map within 1e-3 of the CPU's maximum |score|, and
/// ssum within 1e-4 of pytme's (as tests/suite's command-line run).
fn cli_case_on_the_gpu(gpu: &Dev<Single>, cpu: &Cpu<Single>, dir: &std::path::Path, name: &str) {
    let meta = common::case_json(dir);
    let score: Score = meta["score"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no score in case.json"))
        .parse()
        .unwrap();
    let want = meta["pytme_ssum"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}: no pytme_ssum in case.json"));
    let target = read_mrc(&dir.join("target.mrc"));
    let template = read_mrc(&dir.join("template.mrc"));
    let mask = dir.join("mask.mrc");
    let mask = mask.exists().then(|| read_mrc(&mask));
    let rot = common::npy(dir, "rotations.npy")
        .unwrap_or_else(|| panic!("{name}: rotations.npy missing"))
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap();
    let rotations = RotationSet::from_array(rot.view()).unwrap();
    if let Some(shape) = meta["target_shape_zyx"].as_array() {
        let shape: Vec<usize> = shape.iter().map(|v| v.as_u64().unwrap() as usize).collect();
        assert_eq!(
            target.shape(),
            shape.as_slice(),
            "{name}: target.mrc's shape"
        );
    }
    macro_rules! go {
        ($b:expr) => {{
            let b = $b;
            let t = b.upload(target.view()).unwrap();
            let m = b.upload(template.view()).unwrap();
            let mk = mask.as_ref().map(|x| b.upload(x.view()).unwrap());
            let mut p = MatchParams::new(score, rotations.clone());
            p.template_mask = mk.as_ref();
            let r = match_template(b, &t, &m, &p).unwrap();
            (to_f64(&b.download(&r.scores).unwrap()), r.ssum)
        }};
    }
    let (g, gs) = go!(gpu);
    let (c, cs) = go!(cpu);
    let scale = c.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    let d = max_abs_diff(&g, &c);
    assert!(
        d <= 1e-3 * scale,
        "{name}: max |cuda − cpu| = {d:e} (scale {scale:e})"
    );
    for (who, s) in [("cuda", gs), ("cpu", cs)] {
        assert!(
            ((s - want) / want).abs() <= 1e-4,
            "{name}: {who} ssum {s} vs pytme {want} (over the FFT grid)"
        );
    }
}

// ---- max filter and top_k on the device: the CPU's answers bit for bit ----

/// Bitwise equality, every NaN equal to every NaN.
fn same_bits<T: Real>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            #[allow(clippy::eq_op)]
            let both_nan = x != x && y != y;
            both_nan || bytemuck::bytes_of(x) == bytemuck::bytes_of(y)
        })
}

/// Values with many ties; for floats also −0, +0, ±∞ and NaN (one in ~20).
fn levels<T: Real>(rng: &mut u64, n: usize, special: bool) -> Vec<T> {
    (0..n)
        .map(|_| {
            *rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = *rng >> 33;
            let v = match r % 20 {
                0 if special => f64::NAN,
                1 if special => f64::INFINITY,
                2 if special => f64::NEG_INFINITY,
                3 if special => -0.0,
                x => (x % 9) as f64 - 4.0,
            };
            T::from_f64(v)
        })
        .collect()
}

/// `max_filter` on the device equals the CPU's (one thread: the CPU's axis order is then
/// fixed) for every dtype, border mode and kernel: windows of 2–7 (per-output loop), 8–91
/// (shared-memory tiles, several tiles per line on the 300- and 400-long axes) and 100 (one
/// thread per line), on contiguous and strided axes, NaN and −0 included for floats.
fn max_filter_agrees<P: Precision, T: Real>(special: bool) {
    use monomorph_core::{BorderMode, Filter};
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::with_threads(1).expect("cpu");
    let mut rng = 17u64;
    let modes = [
        BorderMode::Nearest,
        BorderMode::Reflect,
        BorderMode::Mirror,
        BorderMode::Wrap,
        BorderMode::Constant(-1.5),
    ];
    let cases: [(&[usize], &[usize]); 8] = [
        (&[37], &[21]),
        (&[3, 400], &[1, 21]),
        (&[400, 5], &[21, 3]),
        (&[19, 23], &[100, 8]),
        (&[4, 6, 300], &[3, 5, 61]),
        (&[6, 7, 9], &[2, 9, 30]),
        (&[130, 3, 5], &[91, 1, 2]),
        (&[2, 3, 4, 5], &[3, 2, 7, 8]),
    ];
    for (shape, size) in cases {
        let n: usize = shape.iter().product();
        let h = ndarray::ArrayD::from_shape_vec(shape.to_vec(), levels::<T>(&mut rng, n, special))
            .expect("shape");
        let (dc, dg) = (cpu.upload(h.view()).unwrap(), gpu.upload(h.view()).unwrap());
        for mode in modes {
            let mut oc = cpu.zeros::<T>(shape).unwrap();
            let mut og = gpu.zeros::<T>(shape).unwrap();
            cpu.max_filter(&dc, size, mode, &mut oc).unwrap();
            gpu.max_filter(&dg, size, mode, &mut og).unwrap();
            let (c, g) = (cpu.download(&oc).unwrap(), gpu.download(&og).unwrap());
            let (c, g): (Vec<T>, Vec<T>) =
                (c.iter().copied().collect(), g.iter().copied().collect());
            assert!(
                same_bits(&c, &g),
                "max_filter {shape:?} size {size:?} {mode:?} {}: cuda differs from cpu",
                std::any::type_name::<T>()
            );
        }
    }
}

#[test]
fn max_filter_f32_with_nan() {
    max_filter_agrees::<Single, f32>(true);
}

#[test]
fn max_filter_f64_with_nan() {
    max_filter_agrees::<Double, f64>(true);
}

#[test]
fn max_filter_integers() {
    max_filter_agrees::<Single, i32>(false);
    max_filter_agrees::<Double, i64>(false);
}

/// `top_k` for k > 1 on the device equals the CPU's: ties by index, NaN excluded, −0 equal
/// to +0, ±∞, integers, all equal, all NaN, k at and beyond the number of elements.
fn top_k_agrees<P: Precision, T: Real>(special: bool) {
    use monomorph_core::Reduce;
    let Some(gpu) = make::<P>() else { return };
    let cpu = Cpu::<P>::new();
    let mut rng = 23u64;
    let n = 20_000;
    let mut arrays: Vec<Vec<T>> = vec![
        levels::<T>(&mut rng, n, special),
        vec![T::from_f64(2.0); n],
        (0..n)
            .map(|i| T::from_f64(((i * 7919) % 10007) as f64 - 5000.0))
            .collect(),
    ];
    if special {
        arrays.push(vec![T::from_f64(f64::NAN); 300]);
        arrays.push(
            (0..300)
                .map(|i| T::from_f64(if i % 2 == 0 { -0.0 } else { 0.0 }))
                .collect(),
        );
    }
    for v in arrays {
        let len = v.len();
        let h = ndarray::ArrayD::from_shape_vec(vec![len], v).expect("shape");
        let (dc, dg) = (cpu.upload(h.view()).unwrap(), gpu.upload(h.view()).unwrap());
        for k in [2usize, 5, 1000, 6000, len - 1, len, len + 9] {
            let c = cpu.top_k(&dc, k).unwrap();
            let g = gpu.top_k(&dg, k).unwrap();
            let ci: Vec<usize> = c.iter().map(|p| p.0).collect();
            let gi: Vec<usize> = g.iter().map(|p| p.0).collect();
            let cv: Vec<T> = c.iter().map(|p| p.1).collect();
            let gv: Vec<T> = g.iter().map(|p| p.1).collect();
            assert!(
                ci == gi && same_bits(&cv, &gv),
                "top_k k {k} of {len} {}: indices or values differ",
                std::any::type_name::<T>()
            );
        }
    }
}

// ------------------------------------------------ pruned forward and fused matching step

/// A random array of `shape`, zero outside the box `[0, nz)`.
fn boxed_array<T: Real>(rng: &mut Lcg, shape: &[usize], nz: &[usize]) -> ndarray::ArrayD<T> {
    let mut a = rng.array::<T>(shape);
    for (i, v) in a.indexed_iter_mut() {
        if (0..shape.len()).any(|k| i[k] >= nz[k]) {
            *v = T::from_f64(0.0);
        }
    }
    a
}

fn complex_f64<T: Real>(a: &ndarray::ArrayD<num_complex::Complex<T>>) -> Vec<f64> {
    a.iter()
        .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
        .collect()
}

/// `rfft_pruned` on the device (the pruned schedule where it applies: a box at most half the
/// first axis, all axes) equals the device's full `rfft` and the CPU's, within
/// 32·eps·max|F| (cuFFT's multi-pass 3-D plan and the sequence of 1-D passes round
/// differently); an empty box gives zeros over a dirty buffer.
fn pruned_rfft_agrees<P: Precision>() {
    if let Some(gpu) = make::<P>() {
        pruned_rfft_on::<P, _>(&gpu);
    }
}

/// The body of [`pruned_rfft_agrees`] for any backend `gpu` (the CPU checks the test itself).
fn pruned_rfft_on<P: Precision, B: Backend<Precision = P>>(gpu: &B) {
    use monomorph_core::{ComplexOf, FftPlan, Spectral};
    let cpu = Cpu::<P>::new();
    type F<P> = <P as Precision>::Float;
    let eps = <F<P> as monomorph_core::Float>::EPS.as_f64();
    let mut rng = Lcg::new(41);
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[128, 128, 128], &[0, 1, 2], &[32, 32, 32]),
        (&[24, 20, 18], &[0, 1, 2], &[7, 5, 6]),
        (&[9, 7, 5], &[0, 1, 2], &[4, 7, 5]),
        (&[7, 5, 9], &[0, 1, 2], &[1, 1, 1]),
        (&[64, 50], &[0, 1], &[32, 50]),
        (&[11, 4], &[0, 1], &[2, 3]),
        (&[8, 6, 10], &[0, 1, 2], &[5, 2, 4]),
        (&[3, 6, 5], &[1, 2], &[1, 3, 2]),
        (&[6, 5, 4], &[0, 1], &[2, 2, 4]),
        (&[2, 3, 5], &[1], &[1, 1, 2]),
        (&[8, 6, 10], &[0, 1, 2], &[3, 0, 4]),
    ];
    for &(shape, axes, nz) in cases {
        let what = format!("{shape:?} over {axes:?}, box {nz:?}");
        let x = boxed_array::<F<P>>(&mut rng, shape, nz);
        let plan = gpu.fft_plan(shape, axes).unwrap();
        let cs = plan.complex_shape().to_vec();
        let dx = gpu.upload(x.view()).unwrap();
        let mut full = gpu.zeros::<ComplexOf<B>>(&cs).unwrap();
        // A dirty output: the pruned forward must write (or zero) every element.
        let dirty = ndarray::ArrayD::from_elem(
            ndarray::IxDyn(&cs),
            num_complex::Complex::new(F::<P>::from_f64(f64::NAN), F::<P>::from_f64(7.0)),
        );
        let mut pruned = gpu.upload(dirty.view()).unwrap();
        gpu.rfft(&plan, &dx, &mut full).unwrap();
        gpu.rfft_pruned(&plan, &dx, nz, &mut pruned).unwrap();
        // Twice: the cached pruned plan gives the same result.
        let first = complex_f64(&gpu.download(&pruned).unwrap());
        gpu.rfft_pruned(&plan, &dx, nz, &mut pruned).unwrap();
        let p = complex_f64(&gpu.download(&pruned).unwrap());
        assert_eq!(first.len(), p.len());
        assert!(
            first
                .iter()
                .zip(&p)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{what}: a second call differs"
        );
        let f = complex_f64(&gpu.download(&full).unwrap());
        let cplan = cpu.fft_plan(shape, axes).unwrap();
        let mut cspec = cpu.zeros::<ComplexOf<Cpu<P>>>(&cs).unwrap();
        cpu.rfft(&cplan, &x, &mut cspec).unwrap();
        let c = complex_f64(&cspec);
        let top = c.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        let tol = 32.0 * eps * top;
        assert!(
            p.iter().all(|v| v.is_finite()),
            "{what}: unwritten elements"
        );
        let d = max_abs_diff(&p, &f);
        assert!(d <= tol, "{what}: pruned vs full rfft {d:e} > {tol:e}");
        let d = max_abs_diff(&p, &c);
        assert!(
            d <= tol,
            "{what}: pruned (cuda) vs rfft (cpu) {d:e} > {tol:e}"
        );
    }
}

#[test]
fn pruned_rfft_single() {
    pruned_rfft_agrees::<Single>();
}

#[test]
fn pruned_rfft_double() {
    pruned_rfft_agrees::<Double>();
}

/// The fused matching step on the device (`rfft_pruned_mul_conj` → `irfft_score_max_update`)
/// equals the CPU's unfused sequence (full `rfft` → `complex_mul_conj` → `irfft` →
/// `score_max_update`) for the three normalisations, 3-D and 2-D, with a shifted window.
fn fused_step_agrees<P: Precision>(tol: f64) {
    if let Some(gpu) = make::<P>() {
        fused_step_on::<P, _>(&gpu, tol);
    }
}

/// The body of [`fused_step_agrees`] for any backend `gpu` (the CPU checks the test itself).
fn fused_step_on<P: Precision, B: Backend<Precision = P>>(gpu: &B, tol: f64) {
    use monomorph_core::{Arr, ComplexOf, Elementwise, FftPlan, FloatOf, Spectral};
    let cpu = Cpu::<P>::new();
    type F<P> = <P as Precision>::Float;
    let mut rng = Lcg::new(43);
    let cases: &[(&[usize], &[usize], &[usize], &[isize])] = &[
        (&[48, 40, 36], &[12, 10, 9], &[37, 31, 28], &[-6, -5, -4]),
        (&[60, 52], &[14, 13], &[60, 52], &[-7, -6]),
    ];
    for &(fast, nz, out, shift) in cases {
        let axes: Vec<usize> = (0..fast.len()).collect();
        let f = rng.array::<F<P>>(fast);
        let f2 = f.mapv(|v| v * v);
        let t = boxed_array::<F<P>>(&mut rng, fast, nz);
        let m =
            boxed_array::<F<P>>(&mut rng, fast, nz).mapv(|v| F::<P>::from_f64(v.as_f64().abs()));
        let den = rng.array::<F<P>>(out);
        let best0 = rng.array::<F<P>>(out).mapv(|v| v * F::<P>::from_f64(1e-3));
        let scale = F::<P>::from_f64(1.0 / f.len() as f64);
        let (n, e) = (F::<P>::from_f64(30.0), F::<P>::from_f64(1e-3));
        let window = CorrWindow { shift };
        let idx = <IntOf<B> as Real>::from_f64(3.0);
        let cidx = <IntOf<Cpu<P>> as Real>::from_f64(3.0);
        for kind in 0..3 {
            let what = format!("norm {kind} on {fast:?} box {nz:?}");
            // CPU reference, unfused with the full forward transform.
            let (cb, ci, cs) = {
                let b = &cpu;
                let plan = b.fft_plan(fast, &axes).unwrap();
                let cshape = plan.complex_shape().to_vec();
                let spec = |x: &ndarray::ArrayD<F<P>>| {
                    let mut s = b.zeros::<ComplexOf<Cpu<P>>>(&cshape).unwrap();
                    b.rfft(&plan, x, &mut s).unwrap();
                    s
                };
                let (sf, sf2, st, sm) = (spec(&f), spec(&f2), spec(&t), spec(&m));
                let corr = |a: &Arr<Cpu<P>, ComplexOf<Cpu<P>>>,
                            x: &Arr<Cpu<P>, ComplexOf<Cpu<P>>>| {
                    let mut y = b.zeros::<ComplexOf<Cpu<P>>>(&cshape).unwrap();
                    b.complex_mul_conj(a, x, &mut y).unwrap();
                    let mut r = b.zeros::<FloatOf<Cpu<P>>>(fast).unwrap();
                    b.irfft(&plan, &mut y, &mut r).unwrap();
                    r
                };
                let (c0, c1, c2) = (corr(&sf, &st), corr(&sf, &sm), corr(&sf2, &sm));
                let mut best = best0.clone();
                let mut bi = b.zeros::<IntOf<Cpu<P>>>(out).unwrap();
                let mut ss = b.zeros::<f64>(&[1]).unwrap();
                let norm = match kind {
                    0 => Normalization::Scaled { scale },
                    1 => Normalization::Denominator {
                        scale,
                        inv_den: &den,
                    },
                    _ => Normalization::Local {
                        scale,
                        c1: &c1,
                        c2: &c2,
                        n,
                        eps: e,
                    },
                };
                let rm = RunningMax {
                    best: &mut best,
                    best_index: &mut bi,
                    index: cidx,
                    ssum: &mut ss,
                    moments: None,
                };
                b.score_max_update(&c0, norm, window, rm).unwrap();
                (to_f64(&best), to_f64(&bi), ss[[0]])
            };
            // The device's fused step.
            let b = gpu;
            let plan = b.fft_plan(fast, &axes).unwrap();
            let cshape = plan.complex_shape().to_vec();
            let spec = |x: &ndarray::ArrayD<F<P>>| {
                let mut s = b.zeros::<ComplexOf<B>>(&cshape).unwrap();
                b.rfft(&plan, &b.upload(x.view()).unwrap(), &mut s).unwrap();
                s
            };
            let (sf, sf2) = (spec(&f), spec(&f2));
            let (dt, dm, dden) = (
                b.upload(t.view()).unwrap(),
                b.upload(m.view()).unwrap(),
                b.upload(den.view()).unwrap(),
            );
            let mut x = b.zeros::<ComplexOf<B>>(&cshape).unwrap();
            let mut y = b.corr_spectrum(&plan).unwrap();
            let mut y1 = b.corr_spectrum(&plan).unwrap();
            let mut y2 = b.corr_spectrum(&plan).unwrap();
            let mut work: Vec<_> = (0..3).map(|_| b.zeros::<F<P>>(fast).unwrap()).collect();
            let mut best = b.upload(best0.view()).unwrap();
            let mut bi = b.zeros::<IntOf<B>>(out).unwrap();
            let mut ss = b.zeros::<f64>(&[1]).unwrap();
            b.rfft_pruned_mul_conj(&plan, &dt, nz, &mut x, &[&sf], &mut [&mut y])
                .unwrap();
            if kind == 2 {
                b.rfft_pruned_mul_conj(
                    &plan,
                    &dm,
                    nz,
                    &mut x,
                    &[&sf, &sf2],
                    &mut [&mut y1, &mut y2],
                )
                .unwrap();
            }
            let norm = match kind {
                0 => Normalization::Scaled { scale },
                1 => Normalization::Denominator {
                    scale,
                    inv_den: &dden,
                },
                _ => Normalization::Local {
                    scale,
                    c1: &mut y1,
                    c2: &mut y2,
                    n,
                    eps: e,
                },
            };
            let rm = RunningMax {
                best: &mut best,
                best_index: &mut bi,
                index: idx,
                ssum: &mut ss,
                moments: None,
            };
            b.irfft_score_max_update(&plan, &mut y, norm, &mut work, window, rm)
                .unwrap();
            let (gb, gi, gs) = (
                to_f64(&b.download(&best).unwrap()),
                to_f64(&b.download(&bi).unwrap()),
                b.download(&ss).unwrap()[[0]],
            );
            let top = cb.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
            let d = max_abs_diff(&gb, &cb);
            assert!(
                d <= tol * top,
                "{what}: best differs by {d:e} (scale {top:e})"
            );
            assert!(
                gi.contains(&3.0),
                "{what}: the running max was never updated"
            );
            let same = gi.iter().zip(&ci).filter(|(a, b)| a == b).count();
            assert!(
                same as f64 >= 0.99 * gi.len() as f64,
                "{what}: {same}/{} winners agree",
                gi.len()
            );
            assert!(
                (gs - cs).abs() <= 1e3 * tol * cs.abs().max(1e-30),
                "{what}: ssum {gs} vs {cs}"
            );
        }
    }
}

#[test]
fn top_k_floats() {
    top_k_agrees::<Single, f32>(true);
    top_k_agrees::<Double, f64>(true);
}

#[test]
fn top_k_integers() {
    top_k_agrees::<Single, i32>(false);
    top_k_agrees::<Double, i64>(false);
}

/// pytme's recursive caller reads the map in descending order through `top_k` batches: the
/// same peaks on both backends.
#[test]
fn recursive_peaks_agree() {
    use monomorph_core::algo::peaks::{PytmeParams, call_peaks_recursive};
    let Some(gpu) = make::<Single>() else { return };
    let cpu = Cpu::<Single>::new();
    let mut rng = Lcg::new(31);
    let map = rng.array::<f32>(&[40, 36, 30]);
    let params = PytmeParams {
        num_peaks: 300,
        min_distance: 4,
        ..PytmeParams::default()
    };
    let a =
        call_peaks_recursive::<_, f32, i64>(&cpu, &cpu.upload(map.view()).unwrap(), &params, None)
            .unwrap();
    let b =
        call_peaks_recursive::<_, f32, i64>(&gpu, &gpu.upload(map.view()).unwrap(), &params, None)
            .unwrap();
    assert_eq!(a, b, "recursive peaks differ between CPU and CUDA");
}

#[test]
fn fused_step_single() {
    fused_step_agrees::<Single>(1e-4);
}

#[test]
fn fused_step_double() {
    fused_step_agrees::<Double>(1e-10);
}

/// The device tests' own logic, with the CPU in the device's place (runs without a device).
#[test]
fn pruned_and_fused_tests_pass_on_the_cpu() {
    pruned_rfft_on::<Single, _>(&Cpu::<Single>::new());
    fused_step_on::<Single, _>(&Cpu::<Single>::new(), 1e-4);
    fused_step_on::<Double, _>(&Cpu::<Double>::new(), 1e-10);
    standardize_on::<Single, _>(&Cpu::<Single>::new(), 1e-5);
}

/// `standardize_masked` on the device (two launches, no host round trip) equals the CPU's
/// (host scalars): with a mask and mask sum, over the whole box, and zeros for a template
/// constant inside its mask.
fn standardize_agrees<P: Precision>(tol: f64) {
    if let Some(gpu) = make::<P>() {
        standardize_on::<P, _>(&gpu, tol);
    }
}

/// The body of [`standardize_agrees`] for any backend `gpu`.
fn standardize_on<P: Precision, B: Backend<Precision = P>>(gpu: &B, tol: f64) {
    use monomorph_core::Correlate;
    type F<P> = <P as Precision>::Float;
    let cpu = Cpu::<P>::new();
    let mut rng = Lcg::new(47);
    // 33³ spans several blocks of the partial sums; 5×7 is one.
    for shape in [&[33usize, 33, 33][..], &[5, 7]] {
        let t = rng
            .array::<F<P>>(shape)
            .mapv(|v| v * F::<P>::from_f64(3.0) + F::<P>::from_f64(1.5));
        let mask = ball::<F<P>>(shape);
        // The mask sum in the accumulator type, as the matching loop passes it.
        let n = <P::Accum as monomorph_core::Real>::from_f64(mask.iter().map(|v| v.as_f64()).sum());
        // Constant inside the mask (random outside it): zeros.
        let flat = ndarray::Zip::from(&t).and(&mask).map_collect(|&v, &m| {
            if m.as_f64() > 0.0 {
                F::<P>::from_f64(2.5)
            } else {
                v
            }
        });
        for (what, x, with_mask) in [
            ("masked", &t, true),
            ("whole box", &t, false),
            ("constant in the mask", &flat, true),
        ] {
            let mut c = x.clone();
            let mut cs = cpu.zeros::<F<P>>(shape).unwrap();
            cpu.standardize_masked(&mut c, with_mask.then_some((&mask, n)), &mut cs)
                .unwrap();
            let mut g = gpu.upload(x.view()).unwrap();
            let gm = gpu.upload(mask.view()).unwrap();
            let mut gs = gpu.zeros::<F<P>>(shape).unwrap();
            gpu.standardize_masked(&mut g, with_mask.then_some((&gm, n)), &mut gs)
                .unwrap();
            let (c, g) = (to_f64(&c), to_f64(&gpu.download(&g).unwrap()));
            let d = max_abs_diff(&g, &c);
            assert!(
                d <= tol,
                "{shape:?} {what}: standardised templates differ by {d:e}"
            );
            if what.starts_with("constant") {
                assert!(g.iter().all(|&v| v == 0.0), "{shape:?} {what}: not zeros");
            } else {
                assert!(
                    c.iter().any(|&v| v.abs() > 0.5),
                    "{shape:?} {what}: degenerate"
                );
            }
        }
    }
}

#[test]
fn standardize_single() {
    standardize_agrees::<Single>(1e-5);
}

#[test]
fn standardize_double() {
    standardize_agrees::<Double>(1e-12);
}
