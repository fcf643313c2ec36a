//! The FFT against a naive O(n²) DFT, round trips, pruning, and plan errors.

use monomorph_core::{Double, Error, FftPlan, Single, Spectral};
use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;
use proptest::prelude::*;

use crate::Cpu;

/// A deterministic pseudo-random array in [-1, 1).
fn rand_array(shape: &[usize], seed: u64) -> ArrayD<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    })
}

/// Naive DFT along each of `axes` (complex, full length), then the half spectrum on the last.
fn naive_rfft(a: &ArrayD<f64>, axes: &[usize]) -> ArrayD<Complex<f64>> {
    let shape = a.shape().to_vec();
    let mut cur: ArrayD<Complex<f64>> = a.mapv(|v| Complex::new(v, 0.0));
    for &ax in axes {
        let n = shape[ax];
        let prev = cur.clone();
        for (ix, v) in cur.indexed_iter_mut() {
            let mut ix = ix.clone();
            let k = ix[ax];
            let mut acc = Complex::new(0.0, 0.0);
            for j in 0..n {
                ix[ax] = j;
                let ang = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                acc += prev[&ix] * Complex::new(ang.cos(), ang.sin());
            }
            *v = acc;
        }
    }
    let last = axes[axes.len() - 1];
    let mut half = shape.clone();
    half[last] = shape[last] / 2 + 1;
    ArrayD::from_shape_fn(IxDyn(&half), |ix| cur[ix])
}

fn max_abs_diff(a: &ArrayD<Complex<f64>>, b: &ArrayD<Complex<f64>>) -> f64 {
    assert_eq!(a.shape(), b.shape());
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

/// rfft against the naive DFT and the round trip, in both precisions.
fn check(shape: &[usize], axes: &[usize], seed: u64) {
    let x = rand_array(shape, seed);
    let want = naive_rfft(&x, axes);
    let n: usize = axes.iter().map(|&a| shape[a]).product();
    let scale = (n as f64).sqrt() * (n as f64).log2().max(1.0);

    // f64
    let cpu = Cpu::<Double>::new();
    let plan = cpu.fft_plan(shape, axes).unwrap();
    assert_eq!(plan.real_shape(), shape);
    assert_eq!(plan.complex_shape(), want.shape());
    let mut spec = ArrayD::<Complex<f64>>::zeros(IxDyn(plan.complex_shape()));
    cpu.rfft(&plan, &x, &mut spec).unwrap();
    let err = max_abs_diff(&spec, &want);
    assert!(
        err < 1e-12 * scale * 10.0,
        "f64 rfft {shape:?} {axes:?}: {err}"
    );
    let mut back = ArrayD::<f64>::zeros(IxDyn(shape));
    cpu.irfft(&plan, &mut spec, &mut back).unwrap();
    let err = back
        .iter()
        .zip(x.iter())
        .map(|(b, x)| (b / n as f64 - x).abs())
        .fold(0.0, f64::max);
    assert!(
        err < 1e-13 * scale * 10.0,
        "f64 round trip {shape:?} {axes:?}: {err}"
    );

    // f32
    let cpu = Cpu::<Single>::new();
    let plan = cpu.fft_plan(shape, axes).unwrap();
    let x32 = x.mapv(|v| v as f32);
    let mut spec = ArrayD::<Complex<f32>>::zeros(IxDyn(plan.complex_shape()));
    cpu.rfft(&plan, &x32, &mut spec).unwrap();
    let spec64 = spec.mapv(|c| Complex::new(c.re as f64, c.im as f64));
    let err = max_abs_diff(&spec64, &want);
    assert!(
        err < 4e-7 * scale * 10.0,
        "f32 rfft {shape:?} {axes:?}: {err}"
    );
    let mut back = ArrayD::<f32>::zeros(IxDyn(shape));
    cpu.irfft(&plan, &mut spec, &mut back).unwrap();
    let err = back
        .iter()
        .zip(x.iter())
        .map(|(b, x)| (*b as f64 / n as f64 - x).abs())
        .fold(0.0, f64::max);
    assert!(
        err < 4e-7 * scale * 10.0,
        "f32 round trip {shape:?} {axes:?}: {err}"
    );
}

#[test]
fn one_d_against_dft() {
    for (n, seed) in [(1, 1), (2, 2), (7, 3), (8, 4), (13, 5), (16, 6), (30, 7)] {
        check(&[n], &[0], seed);
    }
}

#[test]
fn two_d_against_dft() {
    check(&[8, 6], &[0, 1], 10);
    check(&[7, 9], &[0, 1], 11);
    check(&[5, 13], &[0, 1], 12);
    check(&[40, 33], &[0, 1], 13); // more than one tile of columns
    check(&[1, 4], &[0, 1], 14);
    check(&[4, 1], &[0, 1], 15);
}

#[test]
fn three_d_against_dft() {
    check(&[6, 5, 8], &[0, 1, 2], 20);
    check(&[5, 7, 3], &[0, 1, 2], 21);
    check(&[4, 6, 11], &[0, 1, 2], 22);
    check(&[3, 2, 2], &[0, 1, 2], 23);
}

#[test]
fn batch_axes_against_dft() {
    check(&[3, 8], &[1], 30);
    check(&[3, 8], &[0], 31); // r2c along a strided axis
    check(&[4, 6, 10], &[1, 2], 32);
    check(&[6, 10, 3], &[0, 1], 33);
    check(&[5, 4, 6], &[2], 34);
    check(&[5, 4, 6], &[0, 2], 35);
    check(&[5, 4, 6], &[1], 36);
    check(&[2, 3, 4, 5], &[1, 2, 3], 37);
    check(&[3, 4, 2, 5], &[0, 1, 3], 38);
    check(&[3, 5, 4, 19], &[0, 2], 39); // strided r2c with more than one tile
}

#[test]
fn fused_path_against_dft() {
    // Many slabs on axis 0 so that the fused r2c + axis-1 path runs (and, for 3-D, the
    // separate axis-0 pass), in both precisions.
    check(&[64, 6, 10], &[1, 2], 40);
    check(&[48, 10, 9], &[0, 1, 2], 41);
    check(&[33, 5, 4, 3], &[0, 1, 2], 42);
}

/// Zero outside the box `[0, nz)` of `shape`.
fn boxed(shape: &[usize], nz: &[usize], seed: u64) -> ArrayD<f64> {
    let mut x = rand_array(shape, seed);
    for (ix, v) in x.indexed_iter_mut() {
        if (0..shape.len()).any(|k| ix[k] >= nz[k]) {
            *v = 0.0;
        }
    }
    x
}

fn check_pruned(shape: &[usize], axes: &[usize], nz: &[usize], seed: u64) {
    let x = boxed(shape, nz, seed);
    let cpu = Cpu::<Single>::new();
    let plan = cpu.fft_plan(shape, axes).unwrap();
    let x32 = x.mapv(|v| v as f32);
    let mut full = ArrayD::<Complex<f32>>::zeros(IxDyn(plan.complex_shape()));
    // Garbage in the output buffer must not leak into the pruned result.
    let mut pruned = ArrayD::from_elem(IxDyn(plan.complex_shape()), Complex::new(7.0f32, -3.0));
    cpu.rfft(&plan, &x32, &mut full).unwrap();
    cpu.rfft_pruned(&plan, &x32, nz, &mut pruned).unwrap();
    assert_eq!(full, pruned, "pruned {shape:?} {axes:?} {nz:?}");

    let cpu = Cpu::<Double>::new();
    let plan = cpu.fft_plan(shape, axes).unwrap();
    let mut full = ArrayD::<Complex<f64>>::zeros(IxDyn(plan.complex_shape()));
    let mut pruned = ArrayD::from_elem(IxDyn(plan.complex_shape()), Complex::new(f64::NAN, 1.0));
    cpu.rfft(&plan, &x, &mut full).unwrap();
    cpu.rfft_pruned(&plan, &x, nz, &mut pruned).unwrap();
    assert_eq!(full, pruned, "pruned f64 {shape:?} {axes:?} {nz:?}");
}

#[test]
fn pruned_equals_full() {
    check_pruned(&[24, 20, 18], &[0, 1, 2], &[7, 5, 6], 50);
    check_pruned(&[64, 32, 32], &[0, 1, 2], &[16, 8, 8], 51); // fused path
    check_pruned(&[32, 30], &[0, 1], &[9, 4], 52);
    check_pruned(&[40], &[0], &[3], 53);
    check_pruned(&[6, 10, 12], &[1, 2], &[2, 3, 4], 54);
    check_pruned(&[10, 12, 3], &[0, 1], &[3, 4, 2], 55);
    check_pruned(&[16, 12, 10], &[0, 1, 2], &[16, 12, 10], 56);
    check_pruned(&[16, 12, 10], &[0, 1, 2], &[0, 3, 3], 57);
    check_pruned(&[64, 8, 8], &[0, 1, 2], &[1, 1, 1], 58);
}

/// The staged last pass (a pruned pass over slabs larger than L2, see `exec`): bit-identical
/// to the full transform, in 3-D (fused first pass), 2-D, with a batch axis, odd lengths and
/// widths that leave partial chunks and tiles, and extents 0, 1 and a full axis elsewhere.
#[test]
fn staged_pruned_equals_full() {
    check_pruned(&[128, 64, 64], &[0, 1, 2], &[20, 10, 9], 60);
    check_pruned(&[128, 64, 64], &[0, 1, 2], &[1, 1, 1], 61);
    check_pruned(&[128, 64, 64], &[0, 1, 2], &[64, 64, 3], 62);
    check_pruned(&[131, 64, 66], &[0, 1, 2], &[33, 17, 5], 63);
    check_pruned(&[131, 64, 66], &[0, 1, 2], &[0, 17, 5], 64);
    check_pruned(&[3000, 200], &[0, 1], &[100, 50], 65);
    check_pruned(&[2999, 198], &[0, 1], &[1500, 198], 66);
    check_pruned(&[2, 4000, 130], &[1, 2], &[2, 100, 30], 67);
}

#[test]
fn plan_errors() {
    let cpu = Cpu::<Single>::new();
    let invalid = |r: Result<crate::CpuFftPlan, Error>| match r {
        Err(Error::InvalidArgument { name, .. }) => name,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    assert_eq!(invalid(cpu.fft_plan(&[4, 4], &[])), "axes");
    assert_eq!(invalid(cpu.fft_plan(&[4, 4, 4, 4], &[0, 1, 2, 3])), "axes");
    assert_eq!(invalid(cpu.fft_plan(&[4, 4], &[2])), "axes");
    assert_eq!(invalid(cpu.fft_plan(&[4, 4], &[1, 1])), "axes");
    assert_eq!(invalid(cpu.fft_plan(&[4, 4], &[1, 0])), "axes");
    assert_eq!(invalid(cpu.fft_plan(&[], &[0])), "axes");
    assert!(matches!(
        cpu.fft_plan(&[4, 0], &[0, 1]),
        Err(Error::Empty(_))
    ));
    assert!(matches!(cpu.fft_plan(&[0, 4], &[1]), Err(Error::Empty(_))));
    assert_eq!(invalid(cpu.fft_plan(&[usize::MAX, 4], &[0, 1])), "shape");
    let msg = cpu.fft_plan(&[4, 4], &[1, 1]).unwrap_err().to_string();
    assert!(msg.contains("repeated"), "{msg}");
}

#[test]
fn plan_used_with_wrong_arrays() {
    let cpu = Cpu::<Single>::new();
    let plan = cpu.fft_plan(&[8, 6], &[0, 1]).unwrap();
    let x = ArrayD::<f32>::zeros(IxDyn(&[8, 7]));
    let mut out = ArrayD::<Complex<f32>>::zeros(IxDyn(&[8, 4]));
    let err = cpu.rfft(&plan, &x, &mut out).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::FftPlan { .. }), "{err:?}");
    assert!(msg.contains("(8, 6)") && msg.contains("(8, 7)"), "{msg}");

    let x = ArrayD::<f32>::zeros(IxDyn(&[8, 6]));
    let mut bad = ArrayD::<Complex<f32>>::zeros(IxDyn(&[8, 6]));
    assert!(matches!(
        cpu.rfft(&plan, &x, &mut bad),
        Err(Error::FftPlan { .. })
    ));
    let mut y = ArrayD::<f32>::zeros(IxDyn(&[8, 5]));
    assert!(matches!(
        cpu.irfft(&plan, &mut out, &mut y),
        Err(Error::FftPlan { .. })
    ));

    // A plan of the other precision.
    let cpu64 = Cpu::<Double>::sharing(&cpu);
    let x64 = ArrayD::<f64>::zeros(IxDyn(&[8, 6]));
    let mut o64 = ArrayD::<Complex<f64>>::zeros(IxDyn(&[8, 4]));
    let msg = cpu64.rfft(&plan, &x64, &mut o64).unwrap_err().to_string();
    assert!(msg.contains("f32") && msg.contains("f64"), "{msg}");

    // Pruning extents.
    let mut out = ArrayD::<Complex<f32>>::zeros(IxDyn(&[8, 4]));
    assert!(matches!(
        cpu.rfft_pruned(&plan, &x, &[2], &mut out),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cpu.rfft_pruned(&plan, &x, &[2, 7], &mut out),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn plans_are_cached() {
    let cpu = Cpu::<Single>::new();
    let a = cpu.fft_plan(&[8, 6], &[0, 1]).unwrap();
    let b = cpu.clone().fft_plan(&[8, 6], &[0, 1]).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a.geom, &b.geom));
    let c = Cpu::<Double>::sharing(&cpu)
        .fft_plan(&[8, 6], &[0, 1])
        .unwrap();
    assert!(!std::sync::Arc::ptr_eq(&a.geom, &c.geom));
}

#[test]
fn irfft_ignores_imaginary_dc_and_nyquist() {
    // A non-Hermitian DC/Nyquist (imaginary parts) must not be an error; c2r drops them.
    let cpu = Cpu::<Single>::new();
    let plan = cpu.fft_plan(&[4, 8], &[0, 1]).unwrap();
    let mut spec = ArrayD::from_elem(IxDyn(&[4, 5]), Complex::new(1.0f32, 0.5));
    let mut out = ArrayD::<f32>::zeros(IxDyn(&[4, 8]));
    cpu.irfft(&plan, &mut spec, &mut out).unwrap();
    assert!(out.iter().all(|v| v.is_finite()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn round_trip(
        shape in prop::collection::vec(1usize..12, 1..=4),
        mask in 1u32..16,
        seed in 0u64..1000,
    ) {
        let nd = shape.len();
        let mut axes: Vec<usize> = (0..nd).filter(|&k| mask & (1 << k) != 0).collect();
        if axes.is_empty() {
            axes.push(nd - 1);
        }
        axes.truncate(3);
        let x = rand_array(&shape, seed);
        let n: usize = axes.iter().map(|&a| shape[a]).product();
        let cpu = Cpu::<Double>::new();
        let plan = cpu.fft_plan(&shape, &axes).unwrap();
        let mut spec = ArrayD::<Complex<f64>>::zeros(IxDyn(plan.complex_shape()));
        cpu.rfft(&plan, &x, &mut spec).unwrap();
        let mut back = ArrayD::<f64>::zeros(IxDyn(&shape));
        cpu.irfft(&plan, &mut spec, &mut back).unwrap();
        for (b, x) in back.iter().zip(x.iter()) {
            prop_assert!((b / n as f64 - x).abs() < 1e-12);
        }
    }
}
