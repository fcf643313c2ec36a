//! CPU-vs-CUDA differential tests: the same generic algorithm run on `Cpu<P>` and `Cuda<P>`
//! must agree. Skipped (with a line) without a device; `MONOMORPH_REQUIRE_CUDA=1` makes a
//! skip a failure. With the `cpu-stand-in` feature every body runs with `Cpu<P>` in the
//! device's place (see `common`). One module per family: matching runs, peaks, CG, the
//! correlate kernels, pytme's fixtures.

#[path = "../common/mod.rs"]
mod common;

mod cg;
mod correlate;
mod fixtures;
mod matching;
mod peaks;

#[cfg(not(feature = "cpu-stand-in"))]
use common::make;
#[cfg(not(feature = "cpu-stand-in"))]
use monomorph_core::{Backend, Double, Single};

/// The largest absolute difference of two equally long slices.
fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// The values as f64.
fn to_f64<T: monomorph_core::Real>(a: &ndarray::ArrayD<T>) -> Vec<f64> {
    a.iter().map(|v| v.as_f64()).collect()
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
