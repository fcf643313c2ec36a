//! # monomorph
//!
//! Scientific array algorithms written once, generic over a compile-time [`Backend`], and
//! monomorphized into CPU and CUDA code: FFT template matching over a rotation search, max-filter
//! peak calling, and batched conjugate gradient.
//!
//! ```
//! use monomorph::prelude::*;
//!
//! // Any algorithm is a generic function over the backend…
//! fn total<B: Backend>(b: &B, host: &ndarray::ArrayD<f32>) -> monomorph::Result<f64> {
//!     let a = b.upload(host.view())?;
//!     b.sum(&a)
//! }
//! // …instantiated for the backend you pick once, at the top.
//! let cpu = Cpu::<Single>::new();
//! let v = ndarray::ArrayD::from_elem(vec![8, 8], 1.0f32);
//! assert_eq!(total(&cpu, &v)?, 64.0);
//! # Ok::<(), monomorph::Error>(())
//! ```
#![warn(missing_docs)]

pub mod dispatch;
pub mod io;

pub use dispatch::{BackendChoice, BackendTask, DefaultBackend, PrecisionChoice, dispatch};
pub use monomorph_core::*;

#[cfg(feature = "cpu")]
pub use monomorph_cpu::Cpu;
#[cfg(feature = "cuda")]
pub use monomorph_cuda::Cuda;

/// Everything a user crate usually needs.
pub mod prelude {
    pub use monomorph_core::{
        Arr, ArrayMeta, Backend, BackendTypes, Correlate, Double, Elementwise, Error, Filter,
        Linalg, Memory, Reduce, Resample, Result, Single, Spectral,
    };
    #[cfg(feature = "cpu")]
    pub use monomorph_cpu::Cpu;
    #[cfg(feature = "cuda")]
    pub use monomorph_cuda::Cuda;
}
