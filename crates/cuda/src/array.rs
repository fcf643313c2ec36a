//! Device arrays.

use std::marker::PhantomData;

use cudarc::driver::CudaSlice;
use monomorph_core::{ArrayMeta, Element};

/// A row-major array of `T` in device memory: raw bytes plus a shape.
///
/// Complex values are stored as interleaved (re, im) pairs, as cuFFT's `float2`/`double2`;
/// transfers go through byte casts, so the host type's alignment (4 for `Complex<f32>`, 8 for
/// `float2`) never matters.
pub struct CudaArray<T: Element> {
    pub(crate) buf: CudaSlice<u8>,
    pub(crate) shape: Vec<usize>,
    pub(crate) _t: PhantomData<T>,
}

impl<T: Element> CudaArray<T> {
    /// Bytes of payload (`len * size_of::<T>()`).
    pub fn num_bytes(&self) -> usize {
        self.len() * std::mem::size_of::<T>()
    }
}

impl<T: Element> ArrayMeta for CudaArray<T> {
    fn shape(&self) -> &[usize] {
        &self.shape
    }
}

impl<T: Element> std::fmt::Debug for CudaArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaArray<{}>{:?}", T::DTYPE.name(), self.shape)
    }
}
