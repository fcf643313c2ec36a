//! Template matching on the CPU backend (float32): seconds per rotation.
//!
//! * 3-D: target 128³, template 32³ with a ball mask (radius 15), 64 rotations,
//!   FLCSphericalMask and FLC.
//! * 2-D: target 2048², template 64² with a disc mask, 16 rotations, FLC.
//!
//! Peer: `benches/peers/matching_pytme.py` (pytme 0.3.6 `match_exhaustive`, numpyfftw backend,
//! job_schedule=(1, 2), same sizes). Issue 3's targets: ≥ 4× (FLCSphericalMask) and ≥ 3.5× (FLC)
//! faster than pytme in 3-D, ≥ 3× in 2-D. Divan reports the time of one whole run; divide by
//! the rotation count printed in the bench name. Peak RSS is printed at the end.
//!
//! `cargo bench --bench matching`

use divan::Bencher;
use monomorph::algo::matching::{MatchParams, Score, match_template};
use monomorph::algo::rotations::RotationSet;
use monomorph::prelude::*;
use ndarray::{ArrayD, IxDyn};

fn main() {
    divan::main();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(l) = status.lines().find(|l| l.starts_with("VmHWM")) {
        println!(
            "peak RSS of the bench process: {}",
            l.trim_start_matches("VmHWM:").trim()
        );
    }
}

fn volume(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut s = seed | 1;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    })
}

fn ball(shape: &[usize], radius: f64) -> ArrayD<f32> {
    ArrayD::from_shape_fn(IxDyn(shape), |i| {
        let r2: f64 = (0..shape.len())
            .map(|k| (i[k] as f64 - (shape[k] as f64 - 1.0) / 2.0).powi(2))
            .sum();
        if r2 <= radius * radius { 1.0 } else { 0.0 }
    })
}

/// The first `n` rotations of the even sampling (identity first).
fn rotations(dim: usize, n: usize) -> RotationSet {
    let all = RotationSet::uniform(dim, if dim == 3 { 15.0 } else { 2.0 }).expect("rotations");
    RotationSet::from_matrices(dim, &all.as_flat()[..n * dim * dim]).expect("subset")
}

fn bench_match(bencher: Bencher, score: Score, target: &[usize], template: &[usize], nrot: usize) {
    let cpu = Cpu::<Single>::new();
    let t = cpu.upload(volume(target, 7).view()).expect("target");
    let m = cpu.upload(volume(template, 11).view()).expect("template");
    let k = cpu
        .upload(ball(template, template[0] as f64 / 2.0 - 1.0).view())
        .expect("mask");
    let mut p = MatchParams::new(score, rotations(target.len(), nrot));
    p.template_mask = Some(&k);
    // One untimed run warms the FFT plans and scratch.
    match_template(&cpu, &t, &m, &p).expect("match");
    bencher.bench_local(|| divan::black_box(match_template(&cpu, &t, &m, &p).expect("match")));
}

/// 3-D 128³ / 32³, FLCSphericalMask, 64 rotations.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn flc_spherical_3d_128_32_rot64(bencher: Bencher) {
    bench_match(bencher, Score::FLCSphericalMask, &[128; 3], &[32; 3], 64);
}

/// 3-D 128³ / 32³, FLC, 64 rotations.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn flc_3d_128_32_rot64(bencher: Bencher) {
    bench_match(bencher, Score::FLC, &[128; 3], &[32; 3], 64);
}

/// 2-D 2048² / 64², FLC, 16 rotations.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn flc_2d_2048_64_rot16(bencher: Bencher) {
    bench_match(bencher, Score::FLC, &[2048, 2048], &[64, 64], 16);
}
