//! Spectral: FFT plans and transforms against a direct DFT.

use ndarray::{ArrayD, IxDyn};

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, assert_close, flat, reference};

fn check_fft<B: Backend>(b: &B, shape: &[usize], axes: &[usize], seed: u64) {
    let mut rng = Lcg::new(seed);
    let h = host::<B>(&mut rng, shape);
    let plan = b.fft_plan(shape, axes).expect("fft_plan");
    assert_eq!(plan.real_shape(), shape);
    let expect = reference::rfft(&to_f64(&h), axes);
    assert_eq!(
        plan.complex_shape(),
        expect.shape(),
        "complex shape for {shape:?} axes {axes:?}"
    );
    let d = up(b, &h);
    let mut spec = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    b.rfft(&plan, &d, &mut spec).expect("rfft");
    let got = down(b, &spec);
    let n: usize = axes.iter().map(|&a| shape[a]).product();
    let scale = (n as f64).sqrt();
    let tol = 16.0 * eps::<B>() * scale * (n as f64).log2().max(1.0);
    let g: Vec<f64> = got
        .iter()
        .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
        .collect();
    let e: Vec<f64> = expect.iter().flat_map(|c| [c.re, c.im]).collect();
    assert_close(&format!("rfft {shape:?} axes {axes:?}"), &g, &e, 0.0, tol);
    let mut back = b.zeros::<FloatOf<B>>(shape).expect("zeros");
    b.irfft(&plan, &mut spec, &mut back).expect("irfft");
    let back: Vec<f64> = flat(&down(b, &back)).iter().map(|v| v / n as f64).collect();
    assert_close(
        &format!("irfft∘rfft {shape:?} axes {axes:?}"),
        &back,
        &flat(&to_f64(&h)),
        0.0,
        tol,
    );
}

pub fn fft_matches_dft<B: Backend>(b: &B) {
    check_fft(b, &[16], &[0], 10);
    check_fft(b, &[15], &[0], 11);
    check_fft(b, &[13], &[0], 12);
    check_fft(b, &[8, 6], &[0, 1], 13);
    check_fft(b, &[7, 9], &[0, 1], 14);
    check_fft(b, &[6, 5, 8], &[0, 1, 2], 15);
    check_fft(b, &[5, 7, 3], &[0, 1, 2], 16);
    check_fft(b, &[12, 10, 14], &[0, 1, 2], 17);
}

/// Length-1 axes (the round-trip property draws them in almost every run; these name them):
/// a lone length-1 transform, a length-1 transformed axis between batch axes, and a length-1
/// last axis (whose half spectrum is its one bin), alone and with a longer axis.
pub fn fft_length_one_axes<B: Backend>(b: &B) {
    check_fft(b, &[1], &[0], 130);
    check_fft(b, &[3, 1, 5], &[1], 131);
    check_fft(b, &[4, 1], &[0, 1], 132);
    check_fft(b, &[4, 1], &[1], 133);
    check_fft(b, &[1, 6], &[0, 1], 134);
    check_fft(b, &[1, 1, 1], &[0, 1, 2], 135);
    check_fft(b, &[2, 1, 3], &[0, 1, 2], 136);
}

pub fn fft_batch_axes<B: Backend>(b: &B) {
    check_fft(b, &[3, 8], &[1], 20);
    check_fft(b, &[4, 6, 10], &[1, 2], 21);
    check_fft(b, &[6, 10, 3], &[0, 1], 22);
    check_fft(b, &[5, 4, 6], &[2], 23);
}

pub fn fft_pruned_equals_full<B: Backend>(b: &B) {
    let shape = [24, 20, 18];
    let box_ = [7, 5, 6];
    let mut rng = Lcg::new(30);
    let small = host::<B>(&mut rng, &box_);
    let mut h = ArrayD::<FloatOf<B>>::zeros(IxDyn(&shape));
    for ((i, j, k), v) in ndarray::Array3::from_shape_vec(box_, small.iter().copied().collect())
        .expect("shape")
        .indexed_iter()
    {
        h[[i, j, k]] = *v;
    }
    let plan = b.fft_plan(&shape, &[0, 1, 2]).expect("plan");
    let d = up(b, &h);
    let mut full = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    let mut pruned = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    b.rfft(&plan, &d, &mut full).expect("rfft");
    b.rfft_pruned(&plan, &d, &box_, &mut pruned)
        .expect("rfft_pruned");
    let f: Vec<f64> = down(b, &full)
        .iter()
        .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
        .collect();
    let p: Vec<f64> = down(b, &pruned)
        .iter()
        .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
        .collect();
    // Relative to the spectrum's largest magnitude: a device's multi-pass 3-D plan (cuFFT)
    // and the pruned sequence of 1-D passes round differently (pocketfft's f32 differs by
    // ≈ 0.1·eps·max|F| here); a wrong or missing slab is off by O(max|F|).
    let top = f.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    assert_close("rfft_pruned vs rfft", &p, &f, 0.0, 64.0 * eps::<B>() * top);
}

pub fn fft_plan_errors<B: Backend>(b: &B) {
    assert!(b.fft_plan(&[8, 8], &[2]).is_err(), "axis out of range");
    assert!(b.fft_plan(&[8, 8], &[1, 0]).is_err(), "unsorted axes");
    assert!(b.fft_plan(&[8, 8], &[]).is_err(), "no axes");
    assert!(b.fft_plan(&[8, 0], &[0, 1]).is_err(), "zero-sized shape");
    let plan = b.fft_plan(&[8, 8], &[0, 1]).expect("plan");
    let wrong = b.zeros::<FloatOf<B>>(&[8, 6]).expect("zeros");
    let mut spec = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    assert!(
        b.rfft(&plan, &wrong, &mut spec).is_err(),
        "plan used on the wrong shape"
    );
    let right = b.zeros::<FloatOf<B>>(&[8, 8]).expect("zeros");
    let mut bad_spec = b.zeros::<ComplexOf<B>>(&[8, 8]).expect("zeros");
    assert!(
        b.rfft(&plan, &right, &mut bad_spec).is_err(),
        "wrong spectrum shape"
    );
}

/// Transforms over axes strictly inside the array, where a device plan repeats at offsets
/// of an odd number of reals (`nin·inner` odd): cuFFT wants R2C inputs and C2R outputs
/// aligned to the complex type, so a backend must not hand it those offsets as they are.
/// Also a non-contiguous axis set whose first real step is strided, and odd batch sizes.
pub fn fft_inner_axes_odd_slabs<B: Backend>(b: &B) {
    check_fft(b, &[2, 3, 5], &[1], 120);
    check_fft(b, &[3, 5, 3], &[1], 121);
    check_fft(b, &[3, 3, 5, 3], &[1, 2], 122);
    check_fft(b, &[2, 5, 3, 3], &[0, 2], 123);
    check_fft(b, &[3, 7, 9], &[1], 124);
    check_fft(b, &[5, 3], &[1], 125);
}
