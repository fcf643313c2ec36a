//! Max filter of a 256³ float32 volume at window sizes 3, 11 and 21 (mode nearest), the
//! peak-calling pass. Targets (issue 2): size 11 at least 10× faster than scipy's
//! `maximum_filter` (`benches/peers/resample_filter_scipy.py`; the issue quotes ~1.1 s, the
//! 2-core AVX-512 Xeon of 2026-11-29 took 0.3–0.4 s), and size 21 no
//! more than 1.2× slower than size 3 (O(1) per element whatever the window).
//!
//! `cargo bench --bench filter`

use divan::Bencher;
use monomorph::BorderMode;
use monomorph::prelude::*;
use ndarray::{ArrayD, IxDyn};

fn main() {
    divan::main();
}

const N: usize = 256;

fn volume() -> ArrayD<f32> {
    ArrayD::from_shape_fn(IxDyn(&[N, N, N]), |i| {
        (((i[0] * 7919 + i[1] * 104_729 + i[2] * 1_299_709) % 10_007) as f32) / 10_007.0
    })
}

#[divan::bench(args = [3, 11, 21], sample_count = 5, sample_size = 1)]
fn max_filter_256(bencher: Bencher, size: usize) {
    let cpu = Cpu::<Single>::new();
    let vol = volume();
    let mut out = ArrayD::<f32>::zeros(IxDyn(&[N, N, N]));
    bencher.bench_local(|| {
        cpu.max_filter(&vol, &[size; 3], BorderMode::Nearest, &mut out)
            .expect("max_filter");
        divan::black_box(&out);
    });
}
