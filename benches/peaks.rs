//! Peak calling on a float32 256³ smoothed random map (white noise blurred by two passes of a
//! 5-wide box per axis: blobs a few voxels wide, like a score map). Target (issue 4):
//! `find_peaks(min_distance = 5)` at least 5× faster than scikit-image's
//! `peak_local_max(min_distance=5)` on the same kind of map
//! (`benches/peers/peaks_skimage.py`, ~1.7 s here).
//!
//! `cargo bench --bench peaks`

use divan::Bencher;
use monomorph::algo::peaks::{PeakParams, PytmeParams, call_peaks_maximum_filter, find_peaks};
use monomorph::prelude::*;
use ndarray::{ArrayD, Axis, IxDyn};

fn main() {
    divan::main();
}

const N: usize = 256;

/// Box blur of width 5 along `axis` (clipped at the edges), on the host.
fn blur(a: &ArrayD<f32>, axis: usize) -> ArrayD<f32> {
    let mut out = a.clone();
    for (src, mut dst) in a
        .lanes(Axis(axis))
        .into_iter()
        .zip(out.lanes_mut(Axis(axis)))
    {
        let n = src.len();
        for i in 0..n {
            let lo = i.saturating_sub(2);
            let hi = (i + 3).min(n);
            let s: f32 = (lo..hi).map(|j| src[j]).sum();
            dst[i] = s / (hi - lo) as f32;
        }
    }
    out
}

/// The benchmark map: deterministic noise (sum of 4 uniforms per voxel), blurred.
fn smoothed_map() -> ArrayD<f32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut a = ArrayD::from_shape_simple_fn(IxDyn(&[N, N, N]), || {
        uniform() + uniform() + uniform() + uniform() - 2.0
    });
    for _ in 0..2 {
        for axis in 0..3 {
            a = blur(&a, axis);
        }
    }
    a
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn find_peaks_256_md5(bencher: Bencher) {
    let cpu = Cpu::<Single>::new();
    let map = cpu.upload(smoothed_map().view()).expect("upload");
    let params = PeakParams::with_min_distance(5);
    let n = find_peaks(&cpu, &map, &params).expect("find_peaks").len();
    eprintln!("find_peaks(min_distance=5) on 256³: {n} peaks");
    bencher.bench_local(|| divan::black_box(find_peaks(&cpu, &map, &params).expect("find_peaks")));
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn pytme_maximum_filter_caller_256_md5(bencher: Bencher) {
    let cpu = Cpu::<Single>::new();
    let map = cpu.upload(smoothed_map().view()).expect("upload");
    let params = PytmeParams {
        num_peaks: 1000,
        min_distance: 5,
        ..PytmeParams::default()
    };
    bencher.bench_local(|| {
        divan::black_box(call_peaks_maximum_filter(&cpu, &map, &params).expect("caller"))
    });
}
