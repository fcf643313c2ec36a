//! DLPack, the array-exchange protocol of Python's array libraries (numpy, PyTorch, CuPy,
//! JAX), without Python: the C structs of `dlpack.h` (v1.x), a [`ForeignArray`] that takes
//! ownership of another library's managed tensor (legacy `DLManagedTensor` or
//! `DLManagedTensorVersioned`), checks it and lends a host one to a job as a
//! [`HostArray::Borrowed`] buffer read in place, or describes a float one (host or GPU) as a
//! [`ForeignBuffer`] for the backend of its device to adopt; and [`Exported`]: an owned result
//! array (host, or a backend's array on its device) handed to another library as managed
//! tensors whose deleter frees it.
//!
//! The Python package moves the capsules (`__dlpack__`); everything that reads or writes the
//! structs lives here, so that it is tested without an interpreter.

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::backend::{ExportedBuffer, ForeignBuffer, Location};
use crate::host_array::{Borrowed, HostArray};

/// `kDLCPU`: host memory.
pub const CPU: i32 = 1;
/// `kDLCUDA`: memory of a CUDA device.
pub const CUDA: i32 = 2;
/// `kDLCUDAHost`: pinned host memory (read on the host as `CPU`).
pub const CUDA_HOST: i32 = 3;

/// `DLDevice`: where a tensor lives.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// `DLDeviceType` ([`CPU`], [`CUDA`], [`CUDA_HOST`], …).
    pub device_type: i32,
    /// The device's ordinal (0 on the host).
    pub device_id: i32,
}

/// `DLDataType`: type code (`kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2, `kDLBool` 6, …), bits and
/// lanes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// The type code.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

/// `DLTensor`: a strided view (`strides` in elements; NULL for C order).
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The allocation (see `byte_offset`).
    pub data: *mut c_void,
    /// Where it lives.
    pub device: DLDevice,
    /// Number of axes.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for a compact C-ordered tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (the legacy, unversioned capsule `"dltensor"`).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by whoever owns it last.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLPackVersion {
    /// Major version (1 here: a larger one is refused).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned` (the capsule `"dltensor_versioned"`, DLPack ≥ 1.0).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The producer's DLPack version.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by whoever owns it last.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_READ_ONLY` (1), `…_IS_COPIED` (2), …
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// The element types a [`ForeignArray`] can hold, by numpy's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// float32.
    F32,
    /// float64.
    F64,
    /// int32.
    I32,
    /// int64.
    I64,
    /// int8 (read as float32, as the command's `.npy` reader does).
    I8,
    /// int16 (read as float32).
    I16,
    /// uint8 (read as float32).
    U8,
    /// uint16 (read as float32).
    U16,
    /// bool, one byte (read as float32 0/1).
    Bool,
}

impl Dtype {
    fn of(t: DLDataType) -> Option<Self> {
        if t.lanes != 1 {
            return None;
        }
        Some(match (t.code, t.bits) {
            (2, 32) => Dtype::F32,
            (2, 64) => Dtype::F64,
            (0, 32) => Dtype::I32,
            (0, 64) => Dtype::I64,
            (0, 8) => Dtype::I8,
            (0, 16) => Dtype::I16,
            (1, 8) => Dtype::U8,
            (1, 16) => Dtype::U16,
            (6, 8) => Dtype::Bool,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::I16 | Dtype::U16 => 2,
            Dtype::I8 | Dtype::U8 | Dtype::Bool => 1,
        }
    }

    /// numpy's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
            Dtype::I8 => "int8",
            Dtype::I16 => "int16",
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
            Dtype::Bool => "bool",
        }
    }
}

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

/// Whether `strides` (elements) describe a C-ordered compact layout of `shape` (the stride of
/// an axis of extent 1 does not matter; nor do any of an empty array).
fn c_contiguous(shape: &[usize], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut want: i64 = 1;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != want {
            return false;
        }
        want = want.saturating_mul(n as i64);
    }
    true
}

/// C-order strides (elements) of `shape`.
fn c_strides(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1].max(1) as i64;
    }
    strides
}

fn shape_usize(shape: &[i64]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}

/// Managed tensors of [`Exported`] arrays not yet released by their consumer, in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many managed tensors [`Exported::managed`] made that their consumers have not released
/// yet (each deleter call takes one off): for tests that a consumer released each once.
pub fn live_exports() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// An owned host array lent to other libraries through DLPack without a copy: each
/// [`Exported::managed`] is a managed tensor over the same buffer whose deleter releases its
/// share; the buffer is freed with the last share (this value's and its consumers').
pub struct Exported {
    /// Owns the buffer (not moved again, read only by [`Exported::copy_of`]: consumers may
    /// write through `data`, as they may through any DLPack view).
    buffer: Keep,
    /// Where the buffer lives.
    device: DLDevice,
    data: *mut c_void,
    dtype: DLDataType,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

impl std::fmt::Debug for Exported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exported")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .finish()
    }
}

/// What owns an [`Exported`] buffer.
enum Keep {
    /// A host array.
    Host(HostArray),
    /// A backend's array ([`ExportedBuffer::owner`]): dropping it frees it (on its device).
    Backend {
        /// Dropped with the last share, never read.
        _owner: Box<dyn Any + Send + Sync>,
    },
}

// SAFETY: `data` points into `buffer`'s heap buffer, which is owned (moved in, never touched
// again by Rust code) and freed with the value; the struct is otherwise plain data. Writes a
// consumer makes through `data` are its own (DLPack hands out a mutable view), as with numpy's
// views of one buffer.
#[allow(unsafe_code)]
unsafe impl Send for Exported {}
// SAFETY: as for `Send`: `&Exported` reads only the plain fields.
#[allow(unsafe_code)]
unsafe impl Sync for Exported {}

/// A managed tensor of an [`Exported`] array and the share it holds (`tensor` first: the
/// managed tensor's address is this block's).
#[repr(C)]
struct Share {
    tensor: DLManagedTensor,
    keep: Arc<Exported>,
}

/// The deleter of [`Exported::managed`]'s tensors: drops the share.
#[allow(unsafe_code)]
unsafe extern "C" fn release_share(p: *mut DLManagedTensor) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` is a `Share` made by `Exported::managed` (its `manager_ctx`), released once
    // by its consumer (DLPack's contract).
    unsafe { drop(Box::from_raw((*p).manager_ctx.cast::<Share>())) };
    LIVE.fetch_sub(1, Ordering::SeqCst);
}

impl Exported {
    /// Takes `a` (float32/float64/int32/int64; a borrowed buffer is copied into its own type)
    /// for export; its buffer is not copied.
    pub fn new(a: HostArray) -> Arc<Self> {
        fn parts<T: Clone>(
            a: ArrayD<T>,
            code: u8,
        ) -> (*mut c_void, DLDataType, Vec<i64>, ArrayD<T>) {
            let mut a = if a.is_standard_layout() {
                a
            } else {
                a.as_standard_layout().into_owned()
            };
            let data = a.as_mut_ptr().cast::<c_void>();
            let bits = (size_of::<T>() * 8) as u8;
            let shape = a.shape().iter().map(|&d| d as i64).collect();
            (
                data,
                DLDataType {
                    code,
                    bits,
                    lanes: 1,
                },
                shape,
                a,
            )
        }
        let (data, dtype, shape, keep) = match a.into_owned() {
            HostArray::F32(a) => {
                let (d, t, s, a) = parts(a, 2);
                (d, t, s, HostArray::F32(a))
            }
            HostArray::F64(a) => {
                let (d, t, s, a) = parts(a, 2);
                (d, t, s, HostArray::F64(a))
            }
            HostArray::I32(a) => {
                let (d, t, s, a) = parts(a, 0);
                (d, t, s, HostArray::I32(a))
            }
            HostArray::I64(a) => {
                let (d, t, s, a) = parts(a, 0);
                (d, t, s, HostArray::I64(a))
            }
            HostArray::Borrowed(_) => unreachable!("into_owned gives an owned array"),
        };
        let strides = c_strides(&shape_usize(&shape));
        Arc::new(Exported {
            buffer: Keep::Host(keep),
            device: DLDevice {
                device_type: CPU,
                device_id: 0,
            },
            data,
            dtype,
            shape,
            strides,
        })
    }

    /// Takes a backend's array handed over by [`Foreign::export`](crate::Foreign::export)
    /// (host or GPU memory; float32/float64/int32/int64) for export, without a copy: the
    /// managed tensors describe it where it lives, and the last share drops its owner (which
    /// frees it on its own device).
    pub fn from_backend(e: ExportedBuffer) -> Result<Arc<Self>, String> {
        let (code, bits) = match e.dtype {
            crate::DType::F32 => (2, 32),
            crate::DType::F64 => (2, 64),
            crate::DType::I32 => (0, 32),
            crate::DType::I64 => (0, 64),
            other => return Err(format!("an array of {} for export", other.name())),
        };
        let device = match e.location {
            Location::Host => DLDevice {
                device_type: CPU,
                device_id: 0,
            },
            Location::Cuda(n) => DLDevice {
                device_type: CUDA,
                device_id: i32::try_from(n).map_err(|_| format!("CUDA device {n}"))?,
            },
        };
        Ok(Arc::new(Exported {
            device,
            data: e.addr as *mut c_void,
            dtype: DLDataType {
                code,
                bits,
                lanes: 1,
            },
            shape: e.shape.iter().map(|&d| d as i64).collect(),
            strides: c_strides(&e.shape),
            buffer: Keep::Backend { _owner: e.owner },
        }))
    }

    /// A new export of a copy of `e`'s values (DLPack's `copy=True`) when they are in host
    /// memory; `None` for a GPU array (copied by its own library, not here).
    pub fn copy_of(e: &Exported) -> Option<Arc<Self>> {
        match &e.buffer {
            Keep::Host(h) => Some(Exported::new(h.clone())),
            Keep::Backend { .. } if e.device.device_type == CPU => {
                let n: usize = e.shape().iter().product();
                let shape = IxDyn(&e.shape());
                #[allow(unsafe_code)]
                fn read<T: Copy>(p: *mut c_void, n: usize) -> Vec<T> {
                    if n == 0 {
                        return Vec::new();
                    }
                    // SAFETY: a host export's `data` holds `n` compact values of its type
                    // (`T`, matched by the caller), alive while the export is borrowed.
                    unsafe { std::slice::from_raw_parts(p.cast::<T>(), n) }.to_vec()
                }
                let h = match (e.dtype.code, e.dtype.bits) {
                    (2, 32) => HostArray::F32(ArrayD::from_shape_vec(shape, read(e.data, n)).ok()?),
                    (2, 64) => HostArray::F64(ArrayD::from_shape_vec(shape, read(e.data, n)).ok()?),
                    (0, 32) => HostArray::I32(ArrayD::from_shape_vec(shape, read(e.data, n)).ok()?),
                    _ => HostArray::I64(ArrayD::from_shape_vec(shape, read(e.data, n)).ok()?),
                };
                Some(Exported::new(h))
            }
            Keep::Backend { .. } => None,
        }
    }

    /// Where the buffer lives: (DLPack device type, ordinal), `(1, 0)` for the host.
    pub fn device(&self) -> (i32, i32) {
        (self.device.device_type, self.device.device_id)
    }

    /// The shape.
    pub fn shape(&self) -> Vec<usize> {
        self.shape.iter().map(|&d| d as usize).collect()
    }

    /// numpy's name of the element type.
    pub fn dtype(&self) -> &'static str {
        match (self.dtype.code, self.dtype.bits) {
            (2, 32) => "float32",
            (2, 64) => "float64",
            (0, 32) => "int32",
            _ => "int64",
        }
    }

    /// The first element's address.
    pub fn data_ptr(&self) -> usize {
        self.data as usize
    }

    /// A new managed tensor over the buffer (where it lives, C order, strides given), holding a
    /// share of it until its deleter is called — by the consumer, once; or by whoever drops
    /// it unconsumed (a capsule's destructor).
    pub fn managed(self: &Arc<Self>) -> *mut DLManagedTensor {
        let share = Box::new(Share {
            tensor: DLManagedTensor {
                dl_tensor: DLTensor {
                    data: self.data,
                    device: self.device,
                    ndim: self.shape.len() as i32,
                    dtype: self.dtype,
                    // Consumers only read shape and strides (DLPack); the vectors live as
                    // long as the share's `keep`.
                    shape: self.shape.as_ptr().cast_mut(),
                    strides: self.strides.as_ptr().cast_mut(),
                    byte_offset: 0,
                },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(release_share),
            },
            keep: self.clone(),
        });
        let p = Box::into_raw(share);
        // SAFETY: `p` is the block just leaked; its context names itself for the deleter.
        #[allow(unsafe_code)]
        unsafe {
            (*p).tensor.manager_ctx = p.cast();
        }
        LIVE.fetch_add(1, Ordering::SeqCst);
        p.cast()
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A producer's managed tensor over `data` with the given layout; its deleter counts.
    struct Made {
        _data: Vec<u8>,
        shape: Vec<i64>,
        strides: Option<Vec<i64>>,
        count: &'static AtomicUsize,
    }

    unsafe extern "C" fn count_legacy(p: *mut DLManagedTensor) {
        // SAFETY: made by `legacy` below: the context is a boxed `Made`.
        let m = unsafe { Box::from_raw((*p).manager_ctx.cast::<Made>()) };
        m.count.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the managed tensor was boxed by `legacy`.
        drop(unsafe { Box::from_raw(p) });
    }

    fn legacy(
        data: Vec<u8>,
        dtype: DLDataType,
        shape: Vec<i64>,
        strides: Option<Vec<i64>>,
        offset: u64,
        device_type: i32,
        count: &'static AtomicUsize,
    ) -> *mut DLManagedTensor {
        let mut m = Box::new(Made {
            _data: data,
            shape,
            strides,
            count,
        });
        let t = DLTensor {
            data: m._data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type,
                device_id: 0,
            },
            ndim: m.shape.len() as i32,
            dtype,
            shape: m.shape.as_mut_ptr(),
            strides: m
                .strides
                .as_mut()
                .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
            byte_offset: offset,
        };
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: t,
            manager_ctx: Box::into_raw(m).cast(),
            deleter: Some(count_legacy),
        }))
    }

    const F32: DLDataType = DLDataType {
        code: 2,
        bits: 32,
        lanes: 1,
    };

    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn an_exported_array_comes_back_in_place_and_each_share_is_released_once() {
        let a = ArrayD::from_shape_vec(vec![2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.5]).unwrap();
        let e = Exported::new(HostArray::F32(a));
        assert_eq!((e.shape(), e.dtype()), (vec![2, 3], "float32"));
        let p = e.managed();
        assert_eq!(Arc::strong_count(&e), 2);
        // SAFETY: `p` is a fresh managed tensor of `e`, owned here.
        let f = unsafe { ForeignArray::from_legacy(p) }.expect("a valid tensor");
        assert_eq!(
            (f.shape(), f.dtype(), f.device()),
            (&[2, 3][..], Dtype::F32, (CPU, 0))
        );
        let h = f.into_host_array(|f| f).expect("on the host");
        let v = h.float_view::<f32>().expect("float32 read as it is");
        assert_eq!(
            v.as_ptr() as usize,
            e.data_ptr(),
            "the exported buffer, not a copy"
        );
        assert_eq!(v[[1, 2]], 6.5);
        assert!(h.borrowed().expect("lent").read_in_place());
        drop(v);
        assert_eq!(Arc::strong_count(&e), 2, "the job's input holds the share");
        drop(h);
        assert_eq!(
            Arc::strong_count(&e),
            1,
            "the deleter ran once with the last reader"
        );
        // Unconsumed shares are released by whoever drops them: the same deleter.
        let q = e.managed();
        // SAFETY: `q` is a fresh managed tensor of `e`; its deleter is called once.
        unsafe { ((*q).deleter.unwrap())(q) };
        assert_eq!(Arc::strong_count(&e), 1);
    }

    #[test]
    fn exports_of_every_output_type_describe_their_buffer() {
        let i = ArrayD::from_shape_vec(vec![3], vec![-1i32, 0, 7]).unwrap();
        let e = Exported::new(HostArray::I32(i));
        let p = e.managed();
        // SAFETY: a fresh managed tensor of `e`.
        let t = unsafe { &(*p).dl_tensor };
        assert_eq!((t.dtype.code, t.dtype.bits, t.ndim), (0, 32, 1));
        // SAFETY: as above; released once.
        let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
        assert_eq!(
            f.into_host_array(|f| f).unwrap(),
            HostArray::I32(ArrayD::from_shape_vec(vec![3], vec![-1, 0, 7]).unwrap())
        );
        assert_eq!(Arc::strong_count(&e), 1);
        let d = Exported::new(HostArray::F64(ArrayD::zeros(vec![2, 0, 4])));
        let p = d.managed();
        // SAFETY: a fresh managed tensor of `d`, released once below.
        let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
        assert_eq!(f.shape(), &[2, 0, 4]);
        assert_eq!(
            f.into_host_array(|f| f).unwrap(),
            HostArray::F64(ArrayD::zeros(vec![2, 0, 4]))
        );
        assert_eq!(Arc::strong_count(&d), 1);
    }

    #[test]
    fn bad_tensors_are_refused_and_still_released_once() {
        static N: AtomicUsize = AtomicUsize::new(0);
        let data = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0]);
        let cases: Vec<(*mut DLManagedTensor, &str)> = vec![
            // A transposed (Fortran-ordered) 3×2 view.
            (
                legacy(data.clone(), F32, vec![3, 2], Some(vec![1, 3]), 0, CPU, &N),
                "not C-contiguous",
            ),
            (
                legacy(
                    data.clone(),
                    DLDataType {
                        code: 5,
                        bits: 64,
                        lanes: 1,
                    },
                    vec![3],
                    None,
                    0,
                    CPU,
                    &N,
                ),
                "DLPack dtype (code 5",
            ),
            (
                legacy(data.clone(), F32, vec![6], None, 2, CPU, &N),
                "not aligned for float32",
            ),
            (
                legacy(data.clone(), F32, vec![-6], None, 0, CPU, &N),
                "extent -6",
            ),
            (
                legacy(data.clone(), F32, vec![6], None, 0, 14, &N),
                "DLPack device type 14",
            ),
        ];
        let k = cases.len();
        for (p, want) in cases {
            // SAFETY: `p` was made above and is released by `from_legacy` (once).
            let e = unsafe { ForeignArray::from_legacy(p) }.unwrap_err();
            assert!(e.contains(want), "{e:?} should say {want:?}");
        }
        assert_eq!(N.load(Ordering::SeqCst), k, "each deleter called once");
    }

    #[test]
    fn layouts_dlpack_allows_are_read_as_they_are() {
        static N: AtomicUsize = AtomicUsize::new(0);
        let data = floats(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        // Explicit C strides, an arbitrary stride on an axis of extent 1, and an offset of one
        // element: all read in place.
        let p = legacy(data, F32, vec![2, 1, 3], Some(vec![3, 99, 1]), 4, CPU, &N);
        // SAFETY: made above; released once when `h` drops.
        let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
        let h = f.into_host_array(|f| f).unwrap();
        assert_eq!(h.float_view::<f32>().unwrap()[[1, 0, 2]], 6.0);
        assert_eq!(N.load(Ordering::SeqCst), 0, "alive while read");
        drop(h);
        assert_eq!(N.load(Ordering::SeqCst), 1);
        // Small integer types and bool are converted to float32; on a GPU: no host array.
        let p = legacy(
            vec![0, 1, 2, 255],
            DLDataType {
                code: 6,
                bits: 8,
                lanes: 1,
            },
            vec![4],
            None,
            0,
            CPU,
            &N,
        );
        // SAFETY: made above; released once, here.
        let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
        assert_eq!(f.dtype().name(), "bool");
        let h = f.into_host_array(|f| f).unwrap();
        assert_eq!(
            h.to_float::<f32>().into_raw_vec_and_offset().0,
            vec![0.0, 1.0, 1.0, 1.0]
        );
        let p = legacy(floats(&[1.0]), F32, vec![1], None, 0, CUDA, &N);
        // SAFETY: made above; released once, here.
        let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
        assert_eq!((f.on_host(), f.device()), (false, (CUDA, 0)));
        assert!(f.into_host_array(|f| f).unwrap_err().contains("GPU 0"));
        assert_eq!(N.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_versioned_tensor_of_another_major_version_is_released_unread() {
        static N: AtomicUsize = AtomicUsize::new(0);
        unsafe extern "C" fn count(p: *mut DLManagedTensorVersioned) {
            N.fetch_add(1, Ordering::SeqCst);
            // SAFETY: boxed below.
            drop(unsafe { Box::from_raw(p) });
        }
        let mut shape = [2i64];
        let mut data = [1.0f64, 2.0];
        let mut make = |major| {
            Box::into_raw(Box::new(DLManagedTensorVersioned {
                version: DLPackVersion { major, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(count),
                flags: 0,
                dl_tensor: DLTensor {
                    data: data.as_mut_ptr().cast(),
                    device: DLDevice {
                        device_type: CPU,
                        device_id: 0,
                    },
                    ndim: 1,
                    dtype: DLDataType {
                        code: 2,
                        bits: 64,
                        lanes: 1,
                    },
                    shape: shape.as_mut_ptr(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                },
            }))
        };
        let (v2, v1) = (make(2), make(1));
        // SAFETY: made above, released once each.
        let e = unsafe { ForeignArray::from_versioned(v2) }.unwrap_err();
        assert!(e.contains("version 2"), "{e}");
        // SAFETY: as above.
        let f = unsafe { ForeignArray::from_versioned(v1) }.unwrap();
        let h = f.into_host_array(|f| f).unwrap();
        assert_eq!(h.float_view::<f64>().unwrap().as_ptr(), data.as_ptr());
        drop(h);
        assert_eq!(N.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn backend_arrays_export_where_they_live_and_foreign_ones_adopt_on_their_device() {
        use crate::{Cpu, Foreign, Memory, Single};
        let b = Cpu::<Single>::new();
        let h = ArrayD::from_shape_vec(vec![2, 3], vec![1.0f32, -2.0, 3.5, 4.0, 5.0, 6.0]).unwrap();
        let e = Exported::from_backend(b.export(b.upload(h.view()).unwrap()).unwrap()).unwrap();
        assert_eq!(
            (e.device(), e.shape(), e.dtype()),
            ((CPU, 0), vec![2, 3], "float32")
        );
        let copy = Exported::copy_of(&e).expect("host memory is copied");
        assert_ne!(copy.data_ptr(), e.data_ptr());
        let p = e.managed();
        // SAFETY: a fresh managed tensor of `e`, released once when the buffer drops.
        let f = unsafe { ForeignArray::from_legacy(p) }.unwrap();
        let buf = f.into_foreign_buffer(|f| f).unwrap();
        assert_eq!((buf.location(), buf.addr()), (Location::Host, e.data_ptr()));
        assert_eq!(b.download(&b.adopt(&buf).unwrap()).unwrap(), h);
        assert_eq!(Arc::strong_count(&e), 2, "the buffer holds the share");
        drop(buf);
        assert_eq!(Arc::strong_count(&e), 1);

        // A GPU array: described on its device, never read here; the CPU backend refuses it.
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = legacy(floats(&[1.0, 2.0]), F32, vec![2], None, 0, CUDA, &N);
        // SAFETY: made above; released once when `buf` drops.
        let buf = unsafe { ForeignArray::from_legacy(p) }
            .unwrap()
            .into_foreign_buffer(|f| f)
            .unwrap();
        assert_eq!(buf.location(), Location::Cuda(0));
        let err = b.adopt(&buf).err().unwrap().to_string();
        assert!(err.contains("CUDA device 0"), "{err}");
        drop(buf);
        let p = legacy(
            vec![0; 8],
            DLDataType {
                code: 0,
                bits: 32,
                lanes: 1,
            },
            vec![2],
            None,
            0,
            CUDA,
            &N,
        );
        // SAFETY: as above.
        let err = unsafe { ForeignArray::from_legacy(p) }
            .unwrap()
            .into_foreign_buffer(|f| f)
            .unwrap_err();
        assert!(
            err.contains("int32") && err.contains("float32 or float64"),
            "{err}"
        );
        assert_eq!(N.load(Ordering::SeqCst), 2, "each released once");

        // A backend array on a GPU exports as kDLCUDA on its ordinal; its owner is dropped with
        // the last share; it is not copied on the host.
        let owner = Arc::new(7u8);
        let e = Exported::from_backend(ExportedBuffer {
            addr: 4096,
            location: Location::Cuda(3),
            shape: vec![4, 2],
            dtype: crate::DType::I64,
            owner: Box::new(owner.clone()),
        })
        .unwrap();
        assert_eq!((e.device(), e.dtype()), ((CUDA, 3), "int64"));
        assert!(Exported::copy_of(&e).is_none());
        let p = e.managed();
        // SAFETY: a fresh managed tensor; only its description is read, then it is released.
        unsafe {
            assert_eq!(
                (*p).dl_tensor.device,
                DLDevice {
                    device_type: CUDA,
                    device_id: 3
                }
            );
            assert_eq!(
                std::slice::from_raw_parts((*p).dl_tensor.strides, 2),
                &[2, 1]
            );
            ((*p).deleter.unwrap())(p);
        }
        drop(e);
        assert_eq!(
            Arc::strong_count(&owner),
            1,
            "the owner dropped with the last share"
        );
    }
}
