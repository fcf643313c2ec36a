//! Memory family, foreign buffers: arrays another program owns (a DLPack producer: numpy,
//! PyTorch, CuPy) taken onto a backend ([`Foreign::adopt`]), and backend arrays handed over
//! to another program ([`Foreign::export`]) without a host round trip.
//!
//! Every decision (which buffer, which type, which device) is made in code every backend
//! shares ([`check_adopt`]); a backend implements only the copy (CPU: host to host; CUDA: one
//! device-to-device copy on its own device) and the hand-over of its own allocation.

use std::any::Any;
use std::sync::Arc;

use crate::backend::{Arr, FloatOf, Memory};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::checked_len;

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// Host memory (pageable or pinned).
    Host,
    /// The memory of CUDA device `n` (the ordinal as CUDA numbers the devices).
    Cuda(usize),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Host => write!(f, "host memory"),
            Location::Cuda(n) => write!(f, "CUDA device {n}"),
        }
    }
}

/// A C-ordered buffer another program owns: its first element's address, element type,
/// shape and location, and a keep-alive owner that holds it allocated (dropped with the last
/// clone). Made only by the unsafe [`ForeignBuffer::new`], whose caller promises what the
/// address holds; a backend reads it ([`Foreign::adopt`]) and never writes or frees it.
#[derive(Clone)]
pub struct ForeignBuffer {
    addr: usize,
    dtype: DType,
    shape: Vec<usize>,
    location: Location,
    _owner: Arc<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for ForeignBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForeignBuffer")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("location", &self.location)
            .finish()
    }
}

impl ForeignBuffer {
    /// Describes the buffer at `addr`. Errors (nothing read) when the shape's byte count
    /// overflows, or a non-empty buffer's address is null or not aligned for `dtype`.
    ///
    /// # Safety
    /// For a non-empty shape, `addr` must be the address, in `location`'s memory, of `shape`'s
    /// product of initialised `dtype` values in C order; they must stay allocated and not be
    /// written (by anyone) while `owner` or any clone of the returned value lives. On a CUDA
    /// device, the work that produced them must be complete or ordered before any later work
    /// of that device's context (a DLPack consumer gets this by passing `stream` to
    /// `__dlpack__`); a backend synchronises its device before reading.
    #[allow(unsafe_code)]
    pub unsafe fn new(
        addr: usize,
        dtype: DType,
        shape: Vec<usize>,
        location: Location,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Result<Self> {
        let len = checked_len(&shape)
            .filter(|n| {
                n.checked_mul(dtype.size())
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
            .ok_or_else(|| {
                Error::invalid("buffer", format!("shape {} too large", fmt_shape(&shape)))
            })?;
        if len > 0 && (addr == 0 || !addr.is_multiple_of(dtype.size())) {
            return Err(Error::invalid(
                "buffer",
                format!(
                    "address {addr:#x} is null or not aligned for {}",
                    dtype.name()
                ),
            ));
        }
        Ok(ForeignBuffer {
            addr,
            dtype,
            shape,
            location,
            _owner: owner,
        })
    }

    /// The first element's address (in [`ForeignBuffer::location`]'s memory).
    pub fn addr(&self) -> usize {
        self.addr
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The shape (C order).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Where it lives.
    pub fn location(&self) -> Location {
        self.location
    }
}

/// A backend array handed over ([`Foreign::export`]): its address, location, shape and type,
/// and the owner that frees it when dropped (from any thread, after the backend value that
/// made it may be gone). Whoever receives it (a DLPack capsule's deleter) drops `owner` once
/// no one reads `addr` any more.
pub struct ExportedBuffer {
    /// The first element's address (in `location`'s memory; 0 when empty).
    pub addr: usize,
    /// Where it lives.
    pub location: Location,
    /// The shape (C order, compact).
    pub shape: Vec<usize>,
    /// The element type.
    pub dtype: DType,
    /// Owns the allocation; dropping it frees it.
    pub owner: Box<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for ExportedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportedBuffer")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("location", &self.location)
            .finish()
    }
}

/// Foreign buffers onto the backend and backend arrays out of it (the memory family's
/// exchange with other programs).
pub trait Foreign: Memory {
    /// Where this backend's arrays live ([`Location::Host`] for the CPU, its device for CUDA).
    fn location(&self) -> Location;

    /// A new array of the backend's float type holding `buf`'s values: a float32 or float64
    /// buffer in this backend's own memory ([`Foreign::location`]) is copied (and converted to
    /// the float type when it is the other one) into a new allocation; `buf` is never written
    /// nor freed, and can be released as soon as this returns. Errors ([`check_adopt`]):
    /// another location or device, another element type.
    fn adopt(&self, buf: &ForeignBuffer) -> Result<Arr<Self, FloatOf<Self>>>;

    /// Hands `a` over without a copy: its address, shape and type, and an owner that frees
    /// it when dropped. A device backend waits for its queued work first, so the values are
    /// complete for any reader, on any stream.
    fn export<T: Element>(&self, a: Arr<Self, T>) -> Result<ExportedBuffer>;
}

/// The argument check of [`Foreign::adopt`], shared by the backends so that they fail alike:
/// `buf` lives at `here` (the backend's [`Foreign::location`]) and holds float32 or float64.
pub fn check_adopt(buf: &ForeignBuffer, here: Location, backend: &str) -> Result<()> {
    if buf.location() != here {
        return Err(Error::invalid(
            "buffer",
            format!(
                "an array in {}, but the {backend} backend computes in {here}: pass it on its \
                 own device (or copy it there first)",
                buf.location()
            ),
        ));
    }
    match buf.dtype() {
        DType::F32 | DType::F64 => Ok(()),
        other => Err(Error::invalid(
            "buffer",
            format!(
                "an array of {} in {}, expected float32 or float64",
                other.name(),
                buf.location()
            ),
        )),
    }
}
