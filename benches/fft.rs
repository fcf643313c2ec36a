//! Real FFTs on the CPU backend (float32): an r2c + c2r pair at 128³, 256³ and 2048², and the
//! pruned forward transform of a 32³ block in a 128³ box against the full forward one.
//!
//! Targets (issue 2): the pairs at least as fast as FFTW measured the same day
//! (`benches/peers/fft_fftw.py`: pyFFTW, FFTW_MEASURE; the issue quotes about 12 ms for 128³ on
//! 2 threads, 22 ms on 1, 135 ms for 256³ on 2 — on the 2-core AVX-512 Xeon of 2026-11-29 FFTW
//! took 5.0, 9.8 and 72 ms), and the pruned forward at most half the full one.
//!
//! `cargo bench --bench fft` (all threads) and `RAYON_NUM_THREADS=1 cargo bench --bench fft`.
//! The machine is shared: compare minimums, and run the peer script alternately.

use divan::Bencher;
use monomorph::FftPlan;
use monomorph::prelude::*;
use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;

fn main() {
    divan::main();
}

fn volume(shape: &[usize]) -> ArrayD<f32> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    })
}

fn pair(bencher: Bencher, shape: &[usize]) {
    let cpu = Cpu::<Single>::new();
    let axes: Vec<usize> = (0..shape.len()).collect();
    let plan = cpu.fft_plan(shape, &axes).expect("plan");
    let x = volume(shape);
    let mut spec = ArrayD::<Complex<f32>>::zeros(IxDyn(plan.complex_shape()));
    let mut y = ArrayD::<f32>::zeros(IxDyn(shape));
    // One untimed pair grows the per-thread scratch.
    cpu.rfft(&plan, &x, &mut spec).expect("rfft");
    cpu.irfft(&plan, &mut spec, &mut y).expect("irfft");
    bencher.bench_local(|| {
        cpu.rfft(&plan, &x, &mut spec).expect("rfft");
        cpu.irfft(&plan, &mut spec, &mut y).expect("irfft");
        divan::black_box(&y);
    });
}

/// r2c + c2r of a 128³ float32 volume.
#[divan::bench(sample_count = 21, sample_size = 1)]
fn r2c_c2r_128_cubed(bencher: Bencher) {
    pair(bencher, &[128, 128, 128]);
}

/// r2c + c2r of a 256³ float32 volume.
#[divan::bench(sample_count = 11, sample_size = 1)]
fn r2c_c2r_256_cubed(bencher: Bencher) {
    pair(bencher, &[256, 256, 256]);
}

/// r2c + c2r of a 2048² float32 image.
#[divan::bench(sample_count = 21, sample_size = 1)]
fn r2c_c2r_2048_squared(bencher: Bencher) {
    pair(bencher, &[2048, 2048]);
}

/// Forward transform of a 128³ box holding a 32³ block in its corner: `pruned` tells the
/// transform the block's extent, `full` does not.
#[divan::bench(args = ["full", "pruned"], sample_count = 31, sample_size = 1)]
fn forward_32_in_128(bencher: Bencher, how: &str) {
    let cpu = Cpu::<Single>::new();
    let shape = [128, 128, 128];
    let plan = cpu.fft_plan(&shape, &[0, 1, 2]).expect("plan");
    let block = volume(&[32, 32, 32]);
    let mut x = ArrayD::<f32>::zeros(IxDyn(&shape));
    x.slice_mut(ndarray::s![..32, ..32, ..32]).assign(&block);
    let mut spec = ArrayD::<Complex<f32>>::zeros(IxDyn(plan.complex_shape()));
    let pruned = how == "pruned";
    let run = |spec: &mut ArrayD<Complex<f32>>| {
        if pruned {
            cpu.rfft_pruned(&plan, &x, &[32, 32, 32], spec)
                .expect("rfft_pruned");
        } else {
            cpu.rfft(&plan, &x, spec).expect("rfft");
        }
    };
    run(&mut spec);
    bencher.bench_local(|| {
        run(&mut spec);
        divan::black_box(&spec);
    });
}
