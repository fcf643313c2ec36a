//! The correlate kernels on the device against the host reference: the score passes, the
//! normalisations, the pruned forward FFT and the fused matching step, `standardize_masked`.

use crate::common::{Dev, make};
use crate::matching::ball;
use crate::{max_abs_diff, to_f64};
use monomorph_core::testing::Lcg;
use monomorph_core::{Backend, Double, Memory, Precision, Single};
use monomorph_core::{CorrWindow, Correlate, IntOf, Normalization, Real, RunningMax, host};
use monomorph_cpu::Cpu;

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
        let unit = host::moment_unit(&out);
        host::moments_open(hm.as_slice_mut().unwrap(), unit);
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
        host::moments_close(hm.as_slice_mut().unwrap(), unit);
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
