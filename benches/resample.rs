//! Cubic rotation (spline prefilter + affine transform) of a 32³ float32 volume about its
//! centre, as pytme rotates a template per rotation. Target (issue 2): ≤ 2 ms on 2 cores;
//! scipy's `affine_transform(order=3, prefilter=True)` takes ~17 ms
//! (`benches/peers/resample_filter_scipy.py`).
//!
//! `cargo bench --bench resample`

use divan::Bencher;
use monomorph::Interpolation;
use monomorph::prelude::*;
use ndarray::{ArrayD, IxDyn};

fn main() {
    divan::main();
}

const N: usize = 32;

fn volume() -> ArrayD<f32> {
    let c = (N as f32 - 1.0) / 2.0;
    ArrayD::from_shape_fn(IxDyn(&[N, N, N]), |i| {
        let r2: f32 = (0..3).map(|k| (i[k] as f32 - c).powi(2)).sum();
        (-r2 / 40.0).exp() + 0.1 * ((i[0] * 7 + i[1] * 13 + i[2] * 3) % 11) as f32
    })
}

/// ZYZ Euler (30°, 40°, 50°) and its offset about the centre.
fn rotation() -> (Vec<f64>, Vec<f64>) {
    let (a, b, g) = (30f64.to_radians(), 40f64.to_radians(), 50f64.to_radians());
    let rz = |t: f64| [t.cos(), -t.sin(), 0.0, t.sin(), t.cos(), 0.0, 0.0, 0.0, 1.0];
    let ry = |t: f64| [t.cos(), 0.0, t.sin(), 0.0, 1.0, 0.0, -t.sin(), 0.0, t.cos()];
    let mul = |p: [f64; 9], q: [f64; 9]| {
        let mut r = [0.0; 9];
        for i in 0..3 {
            for j in 0..3 {
                r[i * 3 + j] = (0..3).map(|k| p[i * 3 + k] * q[k * 3 + j]).sum();
            }
        }
        r
    };
    let m = mul(mul(rz(a), ry(b)), rz(g));
    let c = (N as f64 - 1.0) / 2.0;
    let off = (0..3)
        .map(|h| c - (0..3).map(|l| m[h * 3 + l] * c).sum::<f64>())
        .collect();
    (m.to_vec(), off)
}

/// Prefilter a copy of the template, then rotate it: one pytme rotation step.
#[divan::bench]
fn cubic_rotation_32(bencher: Bencher) {
    let cpu = Cpu::<Single>::new();
    let vol = volume();
    let (m, off) = rotation();
    let mut coef = vol.clone();
    let mut out = ArrayD::<f32>::zeros(IxDyn(&[N, N, N]));
    bencher.bench_local(|| {
        coef.assign(&vol);
        cpu.spline_prefilter(&mut coef).expect("prefilter");
        cpu.affine_transform(&coef, &m, &off, Interpolation::Cubic, &mut out)
            .expect("affine");
        divan::black_box(&out);
    });
}

/// The affine transform alone (coefficients prefiltered once, as for a rotation search).
#[divan::bench(args = [Interpolation::Linear, Interpolation::Cubic])]
fn affine_only_32(bencher: Bencher, interp: Interpolation) {
    let cpu = Cpu::<Single>::new();
    let mut coef = volume();
    cpu.spline_prefilter(&mut coef).expect("prefilter");
    let (m, off) = rotation();
    let mut out = ArrayD::<f32>::zeros(IxDyn(&[N, N, N]));
    bencher.bench_local(|| {
        cpu.affine_transform(&coef, &m, &off, interp, &mut out)
            .expect("affine");
        divan::black_box(&out);
    });
}

/// The spline prefilter alone (three recursive passes in `f64`).
#[divan::bench]
fn prefilter_32(bencher: Bencher) {
    let cpu = Cpu::<Single>::new();
    let vol = volume();
    let mut coef = vol.clone();
    bencher.bench_local(|| {
        coef.assign(&vol);
        cpu.spline_prefilter(&mut coef).expect("prefilter");
        divan::black_box(&coef);
    });
}
