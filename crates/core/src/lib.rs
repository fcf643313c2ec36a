//! # monomorph-core
//!
//! The compile-time [`Backend`] trait, its op families, the element and precision types, the
//! one [`Error`], and every algorithm of monomorph written once, generic over `B: Backend`:
//! template matching, peak calling and batched conjugate gradient.
//!
//! Backends live in their own crates (`monomorph-cpu`, `monomorph-cuda`); users normally
//! depend on the `monomorph` facade, which re-exports this crate and the enabled backends.
#![warn(missing_docs)]

pub mod algo;
pub mod backend;
pub mod device;
pub mod dtype;
pub mod error;
pub mod shape;
#[cfg(feature = "testing")]
pub mod testing;

pub use backend::*;
pub use device::{DeviceInfo, DeviceKind};
pub use dtype::{DType, Double, Element, Float, Index, Precision, Real, Single};
pub use error::{Error, Result};
pub use shape::{fast_shape, is_fast_len, next_fast_len};
