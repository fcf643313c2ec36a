use ndarray::{ArrayD, ArrayViewD};

use crate::backend::{Arr, ArrayMeta, BackendTypes};
use crate::dtype::{Element, Real};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::checked_len;

/// Allocation, host transfer and synchronisation.
pub trait Memory: BackendTypes {
    /// A zero-filled array. Checks the request against [`Memory::available_memory`] first.
    fn zeros<T: Element>(&self, shape: &[usize]) -> Result<Arr<Self, T>>;
    /// Copies a host array to the device (the only host→device crossing).
    fn upload<T: Element>(&self, host: ArrayViewD<'_, T>) -> Result<Arr<Self, T>>;
    /// Copies a device array to the host (the only device→host crossing). Synchronises.
    fn download<T: Element>(&self, a: &Arr<Self, T>) -> Result<ArrayD<T>>;
    /// `dst = src` (same shape).
    fn copy<T: Element>(&self, src: &Arr<Self, T>, dst: &mut Arr<Self, T>) -> Result<()>;
    /// Every element set to `value`.
    fn fill<T: Element>(&self, a: &mut Arr<Self, T>, value: T) -> Result<()>;
    /// The same data with a new shape of equal length (no copy).
    fn reshape<T: Element>(&self, a: Arr<Self, T>, shape: &[usize]) -> Result<Arr<Self, T>>;
    /// Element-wise conversion `dst = src as D` (same shape).
    fn cast<S: Real, D: Real>(&self, src: &Arr<Self, S>, dst: &mut Arr<Self, D>) -> Result<()>;
    /// Bytes the backend can still allocate (device free memory, or host available memory).
    fn available_memory(&self) -> u64;
    /// Waits for all queued work; reports asynchronous device errors.
    fn synchronize(&self) -> Result<()>;

    /// A new array filled with `value`.
    fn full<T: Element>(&self, shape: &[usize], value: T) -> Result<Arr<Self, T>> {
        let mut a = self.zeros::<T>(shape)?;
        self.fill(&mut a, value)?;
        Ok(a)
    }
    /// Hands a host array to the device, consuming it: [`Memory::upload`] of its view by
    /// default; a backend whose arrays live in host memory (the CPU) takes the buffer over
    /// without a copy when it is in standard layout. Use it for large inputs read from disk.
    fn upload_owned<T: Element>(&self, host: ArrayD<T>) -> Result<Arr<Self, T>> {
        self.upload(host.view())
    }
    /// Takes a device array to the host, consuming it: [`Memory::download`] by default; a
    /// backend whose arrays live in host memory (the CPU) hands the buffer over without a copy
    /// when it is in standard layout. Use it for large results the device no longer needs.
    fn download_owned<T: Element>(&self, a: Arr<Self, T>) -> Result<ArrayD<T>> {
        self.download(&a)
    }
    /// A copy of `a`.
    fn duplicate<T: Element>(&self, a: &Arr<Self, T>) -> Result<Arr<Self, T>> {
        let mut b = self.zeros::<T>(a.shape())?;
        self.copy(a, &mut b)?;
        Ok(b)
    }
    /// Errors with [`Error::OutOfMemory`] when `bytes` exceed [`Memory::available_memory`].
    fn check_allocation(&self, what: &str, bytes: u64) -> Result<()> {
        let available = self.available_memory();
        if bytes > available {
            Err(Error::OutOfMemory {
                what: what.to_string(),
                requested: bytes,
                available,
            })
        } else {
            Ok(())
        }
    }
}

/// Bytes of an array of `T` with `shape`, with an error on overflow.
pub fn array_bytes<T: Element>(shape: &[usize]) -> Result<u64> {
    checked_len(shape)
        .and_then(|n| n.checked_mul(std::mem::size_of::<T>()))
        .map(|b| b as u64)
        .ok_or_else(|| Error::invalid("shape", format!("{shape:?} overflows the address space")))
}

/// The argument check of [`Memory::copy`] and [`Memory::cast`] (`op` names which), shared by
/// the backends so that they fail alike: `dst` has `src`'s shape.
pub fn check_copy(op: &str, src: &[usize], dst: &[usize]) -> Result<()> {
    super::same_shape_named(|| format!("{op}: dst vs src"), src, dst)
}

/// The argument check of [`Memory::reshape`], shared by the backends: the new shape has the
/// array's `len` elements (a count that overflows `usize` never does).
pub fn check_reshape(len: usize, shape: &[usize]) -> Result<()> {
    if checked_len(shape) == Some(len) {
        Ok(())
    } else {
        Err(Error::shape(
            "reshape",
            format!("a shape with {len} elements"),
            fmt_shape(shape),
        ))
    }
}
