//! Intake: another library's managed tensor taken over, checked, and lent to a job (host) or
//! described for a backend to adopt (its own device).

use std::any::Any;
use std::sync::Arc;

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::backend::{ForeignBuffer, Location};
use crate::host_array::{Borrowed, HostArray};

use super::*;

/// The managed tensor a [`ForeignArray`] owns.
#[derive(Debug)]
enum Managed {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

/// Another library's array taken over through DLPack: checked (C-contiguous, a supported
/// type, aligned), and released (the producer's deleter called, once) when dropped. On the
/// host it becomes a job input read in place ([`ForeignArray::into_host_array`]).
#[derive(Debug)]
pub struct ForeignArray {
    managed: Managed,
    /// The first element (`data + byte_offset`).
    ptr: *const u8,
    shape: Vec<usize>,
    dtype: Dtype,
    device: DLDevice,
}

// SAFETY: a `ForeignArray` only reads its buffer (through shared views that borrow it) and
// calls the producer's deleter once, from `drop`. DLPack's Python protocol lets the consumer
// call the deleter from any thread (producers take the GIL in it where they need it; the
// Python package drops these with the GIL held anyway). Nothing here writes the buffer.
#[allow(unsafe_code)]
unsafe impl Send for ForeignArray {}
// SAFETY: as for `Send`: every access through `&ForeignArray` reads plain values.
#[allow(unsafe_code)]
unsafe impl Sync for ForeignArray {}

impl Drop for ForeignArray {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: `managed` came from the producer, is owned by this value alone (the
        // constructors' contract: the capsule was marked used) and is released here, once.
        unsafe {
            match self.managed {
                Managed::Legacy(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
                Managed::Versioned(p) => {
                    if let Some(d) = (*p).deleter {
                        d(p)
                    }
                }
            }
        }
    }
}

impl ForeignArray {
    /// Takes ownership of a legacy managed tensor (a `"dltensor"` capsule's pointer) and
    /// checks it; the deleter is called when the result (or the error) is dropped. The error
    /// says what is wrong, without naming the argument.
    ///
    /// # Safety
    /// `p` must be a valid `DLManagedTensor` no one else will release (the capsule renamed to
    /// `"used_dltensor"`), whose `dl_tensor` describes memory that stays allocated and
    /// unwritten until its deleter is called.
    #[allow(unsafe_code)]
    pub unsafe fn from_legacy(p: *mut DLManagedTensor) -> Result<Self, String> {
        if p.is_null() {
            return Err("a DLPack capsule holding no tensor".into());
        }
        // SAFETY: `p` is valid (the caller's promise); the tensor is read once, here.
        let t = unsafe { &(*p).dl_tensor };
        // SAFETY: as above; the arrays `t` points at are valid per DLPack.
        unsafe { Self::checked(Managed::Legacy(p), t) }
    }

    /// Takes ownership of a versioned managed tensor (a `"dltensor_versioned"` capsule's
    /// pointer), as [`ForeignArray::from_legacy`]; a major version other than 1 is refused.
    ///
    /// # Safety
    /// As [`ForeignArray::from_legacy`] (the capsule renamed to `"used_dltensor_versioned"`).
    #[allow(unsafe_code)]
    pub unsafe fn from_versioned(p: *mut DLManagedTensorVersioned) -> Result<Self, String> {
        if p.is_null() {
            return Err("a DLPack capsule holding no tensor".into());
        }
        // SAFETY: `p` is valid (the caller's promise). The major version is checked before
        // the tensor is read (its layout may differ in another major version).
        let major = unsafe { (*p).version.major };
        if major != 1 {
            // Release it without reading the tensor: the header (version, ctx, deleter) is
            // the same in every version.
            let _owned = ForeignArray {
                managed: Managed::Versioned(p),
                ptr: std::ptr::null(),
                shape: Vec::new(),
                dtype: Dtype::U8,
                device: DLDevice {
                    device_type: CPU,
                    device_id: 0,
                },
            };
            return Err(format!(
                "DLPack version {major}.x, expected 1.x (pass a legacy capsule or upgrade monomorph)"
            ));
        }
        // SAFETY: as above.
        let t = unsafe { &(*p).dl_tensor };
        // SAFETY: as above.
        unsafe { Self::checked(Managed::Versioned(p), t) }
    }

    /// Owns `managed` first (so it is released on every error), then checks `t`.
    ///
    /// # Safety
    /// `t` is the valid tensor of `managed`.
    #[allow(unsafe_code)]
    unsafe fn checked(managed: Managed, t: &DLTensor) -> Result<Self, String> {
        let mut me = ForeignArray {
            managed,
            ptr: std::ptr::null(),
            shape: Vec::new(),
            dtype: Dtype::U8,
            device: t.device,
        };
        match t.device.device_type {
            CPU | CUDA_HOST | CUDA => {}
            other => {
                return Err(format!(
                    "an array on DLPack device type {other}, expected a CPU or CUDA array"
                ));
            }
        }
        me.dtype = Dtype::of(t.dtype).ok_or_else(|| {
            format!(
                "DLPack dtype (code {}, {} bits, {} lanes), expected float32, float64, int32 or \
                 int64 (or bool/int8/uint8/int16/uint16, read as float32)",
                t.dtype.code, t.dtype.bits, t.dtype.lanes
            )
        })?;
        let ndim = usize::try_from(t.ndim).map_err(|_| format!("{} axes", t.ndim))?;
        let dims: &[i64] = if ndim == 0 {
            &[]
        } else if t.shape.is_null() {
            return Err("a DLPack tensor without a shape".into());
        } else {
            // SAFETY: DLPack: `shape` holds `ndim` extents.
            unsafe { std::slice::from_raw_parts(t.shape, ndim) }
        };
        me.shape = dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("extent {d} in shape {dims:?}")))
            .collect::<Result<_, _>>()?;
        let len = me
            .shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|n| {
                n.checked_mul(me.dtype.size())
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
            .ok_or_else(|| format!("shape {dims:?} too large"))?;
        if !t.strides.is_null() && ndim > 0 {
            // SAFETY: DLPack: non-null `strides` holds `ndim` strides.
            let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
            if !c_contiguous(&me.shape, strides) {
                return Err(format!(
                    "strides {strides:?} (elements) for shape {dims:?}: not C-contiguous, \
                     expected a C-ordered array (e.g. .contiguous() or numpy.ascontiguousarray)"
                ));
            }
        }
        if len > 0 {
            if t.data.is_null() {
                return Err("a DLPack tensor without data".into());
            }
            let offset = usize::try_from(t.byte_offset)
                .map_err(|_| format!("byte offset {}", t.byte_offset))?;
            let ptr = t.data.cast::<u8>().wrapping_add(offset);
            if ptr.align_offset(me.dtype.size()) != 0 {
                return Err(format!(
                    "data at byte offset {offset} not aligned for {}, expected an aligned array",
                    me.dtype.name()
                ));
            }
            me.ptr = ptr;
        }
        Ok(me)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// Where it lives: (DLPack device type, ordinal).
    pub fn device(&self) -> (i32, i32) {
        (self.device.device_type, self.device.device_id)
    }

    /// Whether it lives in host memory (`kDLCPU` or pinned `kDLCUDAHost`).
    pub fn on_host(&self) -> bool {
        matches!(self.device.device_type, CPU | CUDA_HOST)
    }

    /// The values as a view of `T` (host only; `T` of the array's size and a non-empty array,
    /// checked by the caller).
    #[allow(unsafe_code)]
    fn view<T>(&self) -> ArrayViewD<'_, T> {
        debug_assert!(self.on_host() && !self.ptr.is_null());
        debug_assert_eq!(size_of::<T>(), self.dtype.size());
        // SAFETY: on the host, `ptr` is aligned for the element type and holds `shape`'s
        // product of C-ordered elements of `dtype` (checked at construction), allocated and
        // unwritten while `self` lives (the producer's contract); `T` has that size and every
        // bit pattern is valid for the plain numbers read here (bool bytes are read as u8).
        unsafe { ArrayViewD::from_shape_ptr(IxDyn(&self.shape), self.ptr.cast::<T>()) }
    }

    /// A host array as a job input: float32/float64 lent in place ([`HostArray::Borrowed`],
    /// kept alive by `own(self)`: the producer's deleter runs when the last reader is done),
    /// int32/int64 copied once, the small types converted once to float32 (as the command's
    /// `.npy` reader does). An array on a GPU is an error (see the caller's backend).
    pub fn into_host_array<O: Any + Send + Sync>(
        self,
        own: impl FnOnce(ForeignArray) -> O,
    ) -> Result<HostArray, String> {
        if !self.on_host() {
            let (kind, id) = self.device();
            return Err(format!(
                "an array on GPU {id} (DLPack device type {kind}), expected a host array here"
            ));
        }
        if self.ptr.is_null() {
            // Empty: nothing to lend (a view needs a non-null pointer).
            let z = IxDyn(&self.shape);
            return Ok(match self.dtype {
                Dtype::F64 => HostArray::F64(ArrayD::zeros(z)),
                Dtype::I32 => HostArray::I32(ArrayD::zeros(z)),
                Dtype::I64 => HostArray::I64(ArrayD::zeros(z)),
                _ => HostArray::F32(ArrayD::zeros(z)),
            });
        }
        let shape = self.shape.clone();
        Ok(match self.dtype {
            Dtype::F32 => {
                let ptr = self.ptr.cast::<f32>();
                #[allow(unsafe_code)]
                // SAFETY: `ptr` holds `shape`'s product of aligned C-ordered f32 (checked at
                // construction), kept allocated and unwritten by the producer until its
                // deleter runs, which is when the owner (holding `self`) is dropped.
                let b = unsafe { Borrowed::float32(ptr, shape, Arc::new(own(self))) };
                HostArray::Borrowed(b)
            }
            Dtype::F64 => {
                let ptr = self.ptr.cast::<f64>();
                #[allow(unsafe_code)]
                // SAFETY: as for float32.
                let b = unsafe { Borrowed::float64(ptr, shape, Arc::new(own(self))) };
                HostArray::Borrowed(b)
            }
            Dtype::I32 => HostArray::I32(self.view::<i32>().to_owned()),
            Dtype::I64 => HostArray::I64(self.view::<i64>().to_owned()),
            Dtype::I8 => HostArray::F32(self.view::<i8>().mapv(f32::from)),
            Dtype::I16 => HostArray::F32(self.view::<i16>().mapv(f32::from)),
            Dtype::U8 => HostArray::F32(self.view::<u8>().mapv(f32::from)),
            Dtype::U16 => HostArray::F32(self.view::<u16>().mapv(f32::from)),
            Dtype::Bool => HostArray::F32(self.view::<u8>().mapv(|v| f32::from(v != 0))),
        })
    }
}

impl ForeignArray {
    /// A float32/float64 array as a [`ForeignBuffer`] for a backend to adopt on the device it
    /// lives on (a GPU array's values are never read on the host), kept alive by `own(self)`
    /// (the producer's deleter runs when the last holder is done). Another element type is
    /// an error.
    pub fn into_foreign_buffer<O: Any + Send + Sync>(
        self,
        own: impl FnOnce(ForeignArray) -> O,
    ) -> Result<ForeignBuffer, String> {
        let dtype = match self.dtype {
            Dtype::F32 => crate::DType::F32,
            Dtype::F64 => crate::DType::F64,
            other => {
                let (kind, id) = self.device();
                return Err(format!(
                    "an array of {} (DLPack device type {kind}, device {id}), expected float32 \
                     or float64 for an array matched on its device",
                    other.name()
                ));
            }
        };
        let location = if self.on_host() {
            Location::Host
        } else {
            let id = usize::try_from(self.device.device_id)
                .map_err(|_| format!("CUDA device {}", self.device.device_id))?;
            Location::Cuda(id)
        };
        let (addr, shape) = (self.ptr as usize, self.shape.clone());
        #[allow(unsafe_code)]
        // SAFETY: checked at construction: `ptr` (in the memory of `device`) holds `shape`'s
        // product of aligned C-ordered values of `dtype`, kept allocated and unwritten by the
        // producer until its deleter runs, which is when the owner (holding `self`) is
        // dropped. On a GPU the producer ordered its work before the stream the capsule was
        // requested with, and the adopting backend synchronises its context before reading.
        unsafe { ForeignBuffer::new(addr, dtype, shape, location, Arc::new(own(self))) }
            .map_err(|e| e.to_string())
    }
}
