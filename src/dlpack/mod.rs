//! DLPack, the array-exchange protocol of Python's array libraries (numpy, PyTorch, CuPy,
//! JAX), without Python: the C structs of `dlpack.h` (v1.x), a [`ForeignArray`] that takes
//! ownership of another library's managed tensor (legacy `DLManagedTensor` or
//! `DLManagedTensorVersioned`), checks it and lends a host one to a job as a
//! [`HostArray::Borrowed`](crate::HostArray::Borrowed) buffer read in place, or describes a float one (host or GPU) as a
//! [`ForeignBuffer`](crate::backend::ForeignBuffer) for the backend of its device to adopt; and [`Exported`]: an owned result
//! array (host, or a backend's array on its device) handed to another library as managed
//! tensors whose deleter frees it.
//!
//! The Python package moves the capsules (`__dlpack__`); everything that reads or writes the
//! structs lives here, so that it is tested without an interpreter.

use std::ffi::c_void;

mod export;
mod foreign;
#[cfg(test)]
mod tests;

pub use export::{Exported, live_exports};
pub use foreign::ForeignArray;

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
