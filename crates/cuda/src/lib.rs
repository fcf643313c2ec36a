//! # monomorph-cuda
//!
//! monomorph's CUDA backend (`Cuda<P>`), built on cudarc with dynamic loading: the crate builds
//! on any machine, and without a driver its constructor returns
//! [`Error::DeviceUnavailable`](monomorph_core::Error::DeviceUnavailable) instead of panicking.
#![warn(missing_docs)]

use std::marker::PhantomData;

use monomorph_core::{Error, Precision, Result};

/// The CUDA backend in precision `P`.
#[derive(Debug, Clone)]
pub struct Cuda<P: Precision> {
    _p: PhantomData<P>,
}

impl<P: Precision> Cuda<P> {
    /// Opens device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self> {
        // SAFETY: only dlopens candidate library names; calls no CUDA symbol.
        let driver = unsafe { cudarc::driver::sys::is_culib_present() };
        if !driver {
            return Err(Error::DeviceUnavailable(format!(
                "CUDA device {ordinal}: no CUDA driver (libcuda.so not found)"
            )));
        }
        Err(Error::DeviceUnavailable(format!(
            "CUDA device {ordinal}: the CUDA backend is not implemented yet"
        )))
    }
}
