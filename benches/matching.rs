//! Template matching on the CPU backend (float32): seconds per rotation.
//!
//! * 3-D: target 128³, template 32³ with a ball mask (radius 15), 64 rotations,
//!   FLCSphericalMask and FLC.
//! * 2-D: target 2048², template 64² with a disc mask, 16 rotations, FLC.
//! * 3-D FLC as above with a Fourier filter on the template and the target (a ±60° missing
//!   wedge times a Gaussian bandpass, made here), against the unfiltered FLC (issue 17: within
//!   1.1× per rotation).
//! * 3-D 96³ / 24³ FLC with and without per-voxel score statistics (`--score-stats`), 256
//!   rotations (issue 25: at most 1.15× per rotation; the statistics' run divided by the plain
//!   one).
//!
//! Peer: `benches/peers/matching_pytme.py` (pytme 0.3.6 `match_exhaustive`, numpyfftw backend,
//! job_schedule=(1, 2), same sizes). Issue 3's targets: ≥ 4× (FLCSphericalMask) and ≥ 3.5× (FLC)
//! faster than pytme in 3-D, ≥ 3× in 2-D. Divan reports the time of one whole run; divide by
//! the rotation count printed in the bench name. Peak RSS is printed at the end.
//!
//! `cargo bench --bench matching`

use divan::Bencher;
use monomorph::algo::filters::SpectralFilter;
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

/// A missing-wedge-and-bandpass-like weight: zero in a ±60° wedge around the last axis (in the
/// plane of axes 0 and last), times `exp(-k²/(2·0.2²))·(1 − exp(-k²/(2·0.02²)))` in cycles/voxel;
/// DC 0. The weights are made once, before timing (a filter builder makes them once per job):
/// the bench times their application.
struct WedgeBandpass {
    template: ArrayD<f64>,
    target: ArrayD<f64>,
}

impl WedgeBandpass {
    fn new(template: &[usize], fast: &[usize]) -> Self {
        WedgeBandpass {
            template: Self::weight(template),
            target: Self::weight(fast),
        }
    }

    fn weight(shape: &[usize]) -> ArrayD<f64> {
        let d = shape.len();
        let mut half = shape.to_vec();
        half[d - 1] = shape[d - 1] / 2 + 1;
        let freq = |i: usize, n: usize| {
            let i = i as f64;
            let n = n as f64;
            if i < n / 2.0 { i / n } else { (i - n) / n }
        };
        let tan30 = (30.0f64).to_radians().tan();
        ArrayD::from_shape_fn(IxDyn(&half), |ix| {
            let k: Vec<f64> = (0..d).map(|a| freq(ix[a], shape[a])).collect();
            let k2: f64 = k.iter().map(|v| v * v).sum();
            let wedge = k[d - 1].abs() <= k[0].abs() / tan30;
            let band = (-k2 / (2.0 * 0.04)).exp() * (1.0 - (-k2 / (2.0 * 0.0004)).exp());
            if wedge { band } else { 0.0 }
        })
    }
}

impl SpectralFilter for WedgeBandpass {
    fn template_weight(&self, _shape: &[usize]) -> monomorph::Result<Option<ArrayD<f64>>> {
        Ok(Some(self.template.clone()))
    }
    fn target_weight(&self, _shape: &[usize]) -> monomorph::Result<Option<ArrayD<f64>>> {
        Ok(Some(self.target.clone()))
    }
}

fn bench_match(bencher: Bencher, score: Score, target: &[usize], template: &[usize], nrot: usize) {
    bench_match_with(bencher, score, target, template, nrot, None, false);
}

/// One run of `match_template` timed, with `filters` and, with `score_stats`, the statistics.
fn bench_match_with(
    bencher: Bencher,
    score: Score,
    target: &[usize],
    template: &[usize],
    nrot: usize,
    filters: Option<&dyn SpectralFilter>,
    score_stats: bool,
) {
    let cpu = Cpu::<Single>::new();
    let t = cpu.upload(volume(target, 7).view()).expect("target");
    let m = cpu.upload(volume(template, 11).view()).expect("template");
    let k = cpu
        .upload(ball(template, template[0] as f64 / 2.0 - 1.0).view())
        .expect("mask");
    let mut p = MatchParams::new(score, rotations(target.len(), nrot));
    p.template_mask = Some(&k);
    p.filters = filters;
    p.score_stats = score_stats;
    // One untimed run warms the FFT plans and scratch.
    match_template(&cpu, &t, &m, &p).expect("match");
    bencher.bench_local(|| {
        let r = match_template(&cpu, &t, &m, &p).expect("match");
        // With score statistics: the maps a user reads, mean, std and z.
        let st = r.statistics(&cpu).expect("statistics");
        divan::black_box((r, st))
    });
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

/// 3-D 128³ / 32³, FLC with a wedge + bandpass filter on template and target, 64 rotations.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn flc_filtered_3d_128_32_rot64(bencher: Bencher) {
    bench_match_with(
        bencher,
        Score::FLC,
        &[128; 3],
        &[32; 3],
        64,
        Some(&WedgeBandpass::new(&[32; 3], &[128; 3])),
        false,
    );
}

/// 2-D 2048² / 64², FLC, 16 rotations.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn flc_2d_2048_64_rot16(bencher: Bencher) {
    bench_match(bencher, Score::FLC, &[2048, 2048], &[64, 64], 16);
}

/// 3-D 96³ / 24³, FLC, 256 rotations: the plain run of the score-statistics pair below.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn flc_3d_96_24_rot256(bencher: Bencher) {
    bench_match_with(bencher, Score::FLC, &[96; 3], &[24; 3], 256, None, false);
}

/// 3-D 96³ / 24³, FLC, 256 rotations, with the per-voxel score statistics (mean, std, z of the
/// score over the rotations: the exact integer moments, and the statistics from them).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn flc_score_stats_3d_96_24_rot256(bencher: Bencher) {
    bench_match_with(bencher, Score::FLC, &[96; 3], &[24; 3], 256, None, true);
}
