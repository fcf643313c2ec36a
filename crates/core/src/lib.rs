//! # monomorph-core
//!
//! The compile-time [`Backend`] trait, its op families, the element and precision types, the
//! one [`Error`], and every algorithm of monomorph written once, generic over `B: Backend`:
//! template matching, peak calling and batched conjugate gradient.
//!
//! Backends live in their own crates (`monomorph-cpu`, `monomorph-cuda`); users normally
//! depend on the `monomorph` facade, which re-exports this crate and the enabled backends.
//!
//! ## Start here
//! * [`prelude`]: one `use` for a generic function — the traits, the type aliases
//!   ([`Arr`], [`FloatOf`], [`ComplexOf`], [`IntOf`], [`AccumOf`]), the op enums and every algorithm entry
//!   point with its parameters and result.
//! * [`Backend`]: the contract, and the conventions every op follows (in [`backend`]).
//! * [`Transfer`]: `upload_array` / `download_as`, host arrays of any real type and dimension.
//! * [`match_template`](algo::matching::match_template) → [`find_peaks`](algo::peaks::find_peaks)
//!   (or [`MatchResult::peaks`](algo::matching::MatchResult::peaks)): template matching and
//!   peak calling.
//! * [`conjugate_gradient`](algo::cg::conjugate_gradient) with a
//!   [`LinearOperator`](algo::cg::LinearOperator): batched CG.
//!
//! Implementing a backend uses more: the fused-kernel argument types and host reference kernels
//! under [`backend`] (e.g. [`backend::host`]), and the conformance suite (`testing`, feature
//! `testing`).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// `deny`, not `forbid`: `ForeignBuffer::new` is declared `unsafe` (its caller promises what
// an address holds) and opts out; core has no `unsafe` block.
#![deny(unsafe_code)]

pub mod algo;
pub mod backend;
pub mod device;
pub mod dtype;
pub mod error;
pub mod shape;
#[cfg(feature = "testing")]
pub mod testing;

/// The `ndarray` this crate's API uses (host arrays for upload and download).
pub use ndarray;
/// The `num-complex` this crate's API uses (`ComplexOf<B>`).
pub use num_complex;

pub use backend::{
    AccumOf, Arr, ArrayMeta, Backend, BackendTypes, BinaryOp, BorderMode, Boundary, ComplexOf,
    Correlate, CsrMatrix, Elementwise, FftPlan, Filter, FloatOf, Foreign, IntOf, Interpolation,
    Linalg, Memory, PadMode, Reduce, Resample, Spectral, Transfer, UnaryOp,
};
pub use device::{DeviceInfo, DeviceKind};
pub use dtype::{DType, Double, Element, Float, Index, Precision, Real, Single};
pub use error::{Error, Result};
pub use shape::{AxisOrder, fast_shape, is_fast_len, next_fast_len};

// Implementer-only items (fused-kernel arguments, host reference kernels, shape checks) stay
// importable from the root, where the backends use them, but off its first page: they are
// documented under `backend`. The glob also keeps any op-family item added later reachable.
#[doc(hidden)]
pub use backend::*;

/// What a user's generic function needs, in one `use monomorph::prelude::*;`.
///
/// The backend traits (so every op is callable), the type aliases of a backend's types, the
/// element traits (`FloatOf::<B>::from_f64` needs [`Real`]), the op enums, typed transfers
/// ([`Transfer`]), and the entry points of the three algorithms with their parameters and
/// results.
pub mod prelude {
    pub use crate::algo::cg::{
        CsrOperator, DenseOperator, IterationState, LaplacianOperator, LinearOperator, Method,
        Preconditioner, SolveParams, SolveResult, conjugate_gradient, conjugate_gradient_observed,
    };
    pub use crate::algo::matching::{MatchParams, MatchResult, Score, match_template};
    pub use crate::algo::peaks::{Peak, PeakParams, find_peaks, find_peaks_with_rotations};
    pub use crate::algo::rotations::RotationSet;
    pub use crate::backend::{
        AccumOf, Arr, ArrayMeta, Backend, BackendTypes, BinaryOp, BorderMode, Boundary, ComplexOf,
        Correlate, CsrMatrix, Elementwise, FftPlan, Filter, FloatOf, Foreign, IntOf, Interpolation,
        Linalg, Memory, PadMode, Reduce, Resample, Spectral, Transfer, UnaryOp,
    };
    pub use crate::dtype::{Double, Element, Float, Index, Precision, Real, Single};
    pub use crate::error::{Error, Result};
}
