//! File formats of the `monomorph` command, usable from Rust too: `.npy` and MRC volumes,
//! CSV/STAR peak lists, PNG slices.
//!
//! Every reader validates its header before allocating and reports a bad file as
//! [`Error::Io`] naming the file and saying what was expected.

pub mod mrc;
pub mod npy;
pub mod png;
pub mod table;

use std::path::Path;

use ndarray::ArrayD;

use crate::{Error, Float, Result};

pub use mrc::{MrcVolume, read_mrc, write_mrc};
pub use npy::{read_npy, write_npy};
pub use png::write_png;
pub use table::{
    PeakRow, TableMeta, parse_euler_csv, read_euler_csv, write_peaks, write_peaks_with,
};

/// An [`Error::Io`] for `path`.
pub fn io_err(path: &Path, message: impl Into<String>) -> Error {
    Error::Io {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// An array read from a file, in the type it was stored in (small integer types and every MRC
/// mode arrive as `F32`).
#[derive(Debug, Clone, PartialEq)]
pub enum HostArray {
    /// float32 (also int8/uint8/int16/uint16 and MRC data).
    F32(ArrayD<f32>),
    /// float64.
    F64(ArrayD<f64>),
    /// int32.
    I32(ArrayD<i32>),
    /// int64.
    I64(ArrayD<i64>),
}

impl HostArray {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            HostArray::F32(a) => a.shape(),
            HostArray::F64(a) => a.shape(),
            HostArray::I32(a) => a.shape(),
            HostArray::I64(a) => a.shape(),
        }
    }

    /// The stored dtype's numpy name.
    pub fn dtype(&self) -> &'static str {
        match self {
            HostArray::F32(_) => "float32",
            HostArray::F64(_) => "float64",
            HostArray::I32(_) => "int32",
            HostArray::I64(_) => "int64",
        }
    }

    /// The values converted to the float type `T`.
    pub fn to_float<T: Float>(&self) -> ArrayD<T> {
        match self {
            HostArray::F32(a) => a.mapv(|v| T::from_f64(v as f64)),
            HostArray::F64(a) => a.mapv(T::from_f64),
            HostArray::I32(a) => a.mapv(|v| T::from_f64(v as f64)),
            HostArray::I64(a) => a.mapv(|v| T::from_f64(v as f64)),
        }
    }

    /// The values as `i64` when the array holds integers (or integral floats).
    pub fn to_i64(&self) -> std::result::Result<ArrayD<i64>, String> {
        let bad = |v: f64| format!("holds the non-integer value {v}, expected integers");
        Ok(match self {
            HostArray::I32(a) => a.mapv(i64::from),
            HostArray::I64(a) => a.clone(),
            HostArray::F32(a) => {
                if let Some(v) = a.iter().find(|v| v.fract() != 0.0 || !v.is_finite()) {
                    return Err(bad(*v as f64));
                }
                a.mapv(|v| v as i64)
            }
            HostArray::F64(a) => {
                if let Some(v) = a.iter().find(|v| v.fract() != 0.0 || !v.is_finite()) {
                    return Err(bad(*v));
                }
                a.mapv(|v| v as i64)
            }
        })
    }

    /// Number of NaN or infinite values.
    pub fn count_nonfinite(&self) -> usize {
        match self {
            HostArray::F32(a) => a.iter().filter(|v| !v.is_finite()).count(),
            HostArray::F64(a) => a.iter().filter(|v| !v.is_finite()).count(),
            _ => 0,
        }
    }
}

/// An array read by [`read_array`], with the voxel size when the file had one.
#[derive(Debug, Clone)]
pub struct Volume {
    /// The data.
    pub data: HostArray,
    /// Voxel size in Å `(z, y, x)` from an MRC header; `None` for `.npy`.
    pub voxel_size: Option<[f32; 3]>,
}

/// `true` when `path` has an MRC extension (`.mrc`, `.map`, `.rec`, `.mrcs`, `.st`).
pub fn is_mrc(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["mrc", "map", "rec", "mrcs", "st"].contains(&e.to_ascii_lowercase().as_str())
    })
}

/// Reads a `.npy` or MRC file (chosen by extension).
pub fn read_array(path: impl AsRef<Path>) -> Result<Volume> {
    let path = path.as_ref();
    if is_mrc(path) {
        let v = read_mrc(path)?;
        Ok(Volume {
            data: HostArray::F32(v.data),
            voxel_size: Some(v.voxel_size),
        })
    } else if path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        Ok(Volume {
            data: read_npy(path)?,
            voxel_size: None,
        })
    } else {
        Err(io_err(
            path,
            "unknown file type, expected .npy or MRC (.mrc, .map, .rec)",
        ))
    }
}
