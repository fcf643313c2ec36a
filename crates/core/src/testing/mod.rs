//! The backend conformance suite, written once and instantiated per backend with
//! [`backend_test_suite!`](crate::backend_test_suite).
//!
//! Every function takes a backend and panics (as a test does) when the backend disagrees with a
//! plain host reference. Tolerances scale with the backend's float epsilon, so the same suite
//! runs for `Single` and `Double`. Enabled by the `testing` feature.
//!
//! ```ignore
//! // crates/<backend>/tests/conformance.rs
//! fn make() -> Option<MyBackend<Single>> { MyBackend::new().ok() }
//! monomorph_core::backend_test_suite!(make);
//! ```
#![allow(missing_docs, clippy::missing_panics_doc)]

mod ops;
mod props;
pub mod reference;

pub use ops::*;
pub use props::*;

/// Deterministic pseudo-random numbers in [-1, 1) (a 64-bit LCG; no `rand` dependency).
#[derive(Debug, Clone)]
pub struct Lcg(u64);

impl Lcg {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Lcg(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }
    /// Next value in [-1, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
    /// An array of `shape` with values in [-1, 1).
    pub fn array<T: crate::Real>(&mut self, shape: &[usize]) -> ndarray::ArrayD<T> {
        ndarray::ArrayD::from_shape_simple_fn(ndarray::IxDyn(shape), || {
            T::from_f64(self.next_f64())
        })
    }
    /// An array of `shape` with small integer values in [0, levels) (many ties).
    pub fn levels<T: crate::Real>(&mut self, shape: &[usize], levels: u32) -> ndarray::ArrayD<T> {
        ndarray::ArrayD::from_shape_simple_fn(ndarray::IxDyn(shape), || {
            T::from_f64(
                ((self.next_f64() + 1.0) * 0.5 * levels as f64)
                    .floor()
                    .min(levels as f64 - 1.0),
            )
        })
    }
}

/// Number of proptest cases: `PROPTEST_CASES` or `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Asserts `|a - b| <= atol + rtol·|b|` element-wise, with a message naming the worst element.
pub fn assert_close(what: &str, a: &[f64], b: &[f64], rtol: f64, atol: f64) {
    assert_eq!(
        a.len(),
        b.len(),
        "{what}: lengths differ ({} vs {})",
        a.len(),
        b.len()
    );
    let mut worst = (0usize, 0.0f64);
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let err = (x - y).abs();
        let excess = err - (atol + rtol * y.abs());
        let bad = excess > 0.0 || excess.is_nan();
        if bad && (excess > worst.1 || worst.1 == 0.0 || excess.is_nan()) {
            worst = (i, excess.max(f64::MIN_POSITIVE));
        }
    }
    if worst.1 > 0.0 {
        let i = worst.0;
        panic!(
            "{what}: element {i} differs: got {}, expected {} (rtol {rtol:e}, atol {atol:e})",
            a[i], b[i]
        );
    }
}

/// Flattens a host array into f64 values.
pub fn flat<T: crate::Real>(a: &ndarray::ArrayD<T>) -> Vec<f64> {
    a.iter().map(|v| v.as_f64()).collect()
}

/// Stamps out the whole conformance suite for a backend: one `#[test]` per conformance
/// function, in one module per op family (`memory::memory_roundtrip`, …).
///
/// `$make` is a path to `fn() -> Option<B>`; `None` means "no device here" and the tests return
/// early (the maker prints the skip line and decides whether a skip is a failure, e.g. under
/// `MONOMORPH_REQUIRE_CUDA=1`).
///
/// A new backend can be brought up family by family: `backend_test_suite!(make; memory,
/// elementwise)` stamps only the families named (`memory`, `elementwise`, `reduce`,
/// `spectral`, `resample`, `filter`, `linalg`, `correlate`, `validation`), each of which is
/// also its own macro, [`conformance_family!`](crate::conformance_family).
#[macro_export]
macro_rules! backend_test_suite {
    ($make:path) => {
        $crate::backend_test_suite!($make; memory, elementwise, reduce, spectral, resample,
            filter, linalg, correlate, validation);
    };
    ($make:path; $($family:ident),+ $(,)?) => {
        $( $crate::conformance_family!($family, $make); )+
    };
}

/// Stamps one op family's conformance tests into a module named after the family
/// (see [`backend_test_suite!`](crate::backend_test_suite)); its functions live in
/// `testing/ops/<family>.rs`.
#[macro_export]
macro_rules! conformance_family {
    (memory, $make:path) => {
        $crate::conformance_family!(@mod memory, $make;
            memory_roundtrip, memory_errors, cast_roundtrip, foreign_roundtrip);
    };
    (elementwise, $make:path) => {
        $crate::conformance_family!(@mod elementwise, $make;
            elementwise_real, elementwise_complex, elementwise_shape_errors);
    };
    (reduce, $make:path) => {
        $crate::conformance_family!(@mod reduce, $make;
            reduce_basic, reduce_nan_and_empty, reduce_rows, top_k_ties, prop_reductions_f64,
            reduce_accumulates_beyond_the_float_type);
    };
    (spectral, $make:path) => {
        $crate::conformance_family!(@mod spectral, $make;
            fft_matches_dft, fft_batch_axes, fft_pruned_equals_full, fft_plan_errors,
            fft_inner_axes_odd_slabs, fft_length_one_axes, prop_fft_roundtrip);
    };
    (resample, $make:path) => {
        $crate::conformance_family!(@mod resample, $make;
            pad_crop_flip_roll, pad_symmetric, resample_errors, affine_identity_and_shift,
            rotate_quarter_turn_exact, spline_prefilter_interpolates, prop_rotate_back,
            affine_reversed_is_flip_affine_flip, affine_reversed_in_the_transposed_frame);
    };
    (filter, $make:path) => {
        $crate::conformance_family!(@mod filter, $make;
            max_filter_matches_brute, max_filter_footprint_matches_brute,
            laplace_matches_reference, peak_candidates_compacts, gather_matches_host,
            prop_max_filter_brute);
    };
    (linalg, $make:path) => {
        $crate::conformance_family!(@mod linalg, $make;
            dense_matvec, csr_matvec, laplacian_stencil, row_ops, axpy_pair_rows_fused,
            cg_fused_device_scalars, poisson_stencil_matches_assembled,
            prop_poisson_stencil_symmetric);
    };
    (correlate, $make:path) => {
        $crate::conformance_family!(@mod correlate, $make;
            running_max_strict, fused_pipeline_equals_unfused, fused_group_equals_separate_passes,
            gather_window_matches_host, moment_statistics_match_host);
    };
    (validation, $make:path) => {
        $crate::conformance_family!(@mod validation, $make;
            cpu_reference_argument_rules, validation_memory, validation_elementwise,
            validation_reduce, validation_spectral, validation_resample, validation_filter,
            validation_linalg, validation_correlate);
    };
    (@mod $family:ident, $make:path; $($name:ident),* $(,)?) => {
        mod $family {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $name() {
                    if let Some(b) = $make() {
                        $crate::testing::$name(&b);
                    }
                }
            )*
        }
    };
}
