//! One file per op family, mirroring `monomorph_core::backend::ops`.

mod correlate;
mod elementwise;
mod filter;
mod foreign;
mod linalg;
mod memory;
mod reduce;
mod resample;
mod spectral;
mod stencil;
mod stream;

use monomorph_core::{Error, Result};
use ndarray::ArrayD;

/// The contiguous row-major data of an array (every array the backend makes is; a user's
/// non-standard view is rejected rather than silently misread).
pub(crate) fn data<'a, T>(what: &str, a: &'a ArrayD<T>) -> Result<&'a [T]> {
    a.as_slice().ok_or_else(|| {
        Error::invalid(
            what,
            "array is not in standard (row-major, contiguous) layout",
        )
    })
}

/// Mutable counterpart of [`data`].
pub(crate) fn data_mut<'a, T>(what: &str, a: &'a mut ArrayD<T>) -> Result<&'a mut [T]> {
    a.as_slice_mut().ok_or_else(|| {
        Error::invalid(
            what,
            "array is not in standard (row-major, contiguous) layout",
        )
    })
}
