//! Hand-over: owned result arrays (host, or a backend's on its device) lent to other
//! libraries as managed tensors whose deleter releases them.

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ndarray::{ArrayD, IxDyn};

use crate::backend::{ExportedBuffer, Location};
use crate::host_array::HostArray;

use super::*;

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
