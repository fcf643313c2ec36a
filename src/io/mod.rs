//! File formats of the `monomorph` command, usable from Rust too: `.npy` and MRC volumes (plain,
//! gzip or bzip2 compressed), CSV/STAR peak lists, PNG slices, and the size arguments.
//!
//! Every reader validates its header before allocating and reports a bad file as
//! [`Error::Io`] naming the file and saying what was expected. Payloads are read with one copy,
//! straight into the final buffer, and written with one write.

pub mod args;
pub mod mrc;
pub mod npy;
pub mod plot;
pub mod png;
pub mod star;
pub mod stream;
pub mod table;
pub mod tilt;

use std::io::{BufReader, Read};
use std::path::Path;

use ndarray::ArrayD;

use crate::{Error, Float, Result};

pub use mrc::{MrcVolume, read_mrc, write_mrc};
pub use npy::{read_npy, write_npy};
pub use png::write_png;
pub use table::{
    MicrographPeaks, PeakRow, TableMeta, parse_euler_csv, peaks_star_many, read_euler_csv,
    write_peaks, write_peaks_with,
};

/// Checks, without opening it, that `path` is a regular file (or a link to one): a FIFO, a
/// socket, a device or a folder is refused with an [`Error::Io`] naming the file, since opening
/// a FIFO with no writer blocks forever and a device never ends. `stat` does not block.
pub fn check_regular_file(path: &Path) -> Result<()> {
    let m = std::fs::metadata(path).map_err(|e| io_err(path, format!("cannot read: {e}")))?;
    if m.is_file() {
        return Ok(());
    }
    let what = if m.is_dir() {
        "a folder"
    } else {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            let t = m.file_type();
            if t.is_fifo() {
                "a FIFO (named pipe)"
            } else if t.is_socket() {
                "a socket"
            } else if t.is_char_device() || t.is_block_device() {
                "a device"
            } else {
                "not a regular file"
            }
        }
        #[cfg(not(unix))]
        {
            "not a regular file"
        }
    };
    Err(io_err(path, format!("is {what}, expected a regular file")))
}

/// Reads a text input after [`check_regular_file`]; errors name the file.
pub fn read_text_file(path: &Path) -> Result<String> {
    check_regular_file(path)?;
    std::fs::read_to_string(path).map_err(|e| io_err(path, format!("cannot read: {e}")))
}

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

    /// The values converted to the float type `T`, moved without a copy when they already are.
    pub fn into_float<T: Float>(self) -> ArrayD<T> {
        use std::any::Any;
        fn cast<S: 'static, T: Float>(a: ArrayD<S>) -> Result<ArrayD<T>, ArrayD<S>> {
            let b: Box<dyn Any> = Box::new(a);
            match b.downcast::<ArrayD<T>>() {
                Ok(t) => Ok(*t),
                Err(b) => Err(*b.downcast::<ArrayD<S>>().expect("the type it was boxed as")),
            }
        }
        match self {
            HostArray::F32(a) => cast(a).unwrap_or_else(|a| a.mapv(|v| T::from_f64(v as f64))),
            HostArray::F64(a) => cast(a).unwrap_or_else(|a| a.mapv(T::from_f64)),
            other => other.to_float(),
        }
    }

    /// The first finite value whose magnitude exceeds `f32::MAX` (it would become infinite in
    /// single precision), for float64 data; `None` when every value fits.
    pub fn first_beyond_f32(&self) -> Option<f64> {
        match self {
            HostArray::F64(a) => a
                .iter()
                .copied()
                .find(|v| v.is_finite() && v.abs() > f32::MAX as f64),
            HostArray::I64(a) => a
                .iter()
                .map(|&v| v as f64)
                .find(|v| v.abs() > f32::MAX as f64),
            _ => None,
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

    /// The number of NaN values (0 for integer data).
    pub fn count_nan(&self) -> usize {
        match self {
            HostArray::F32(a) => a.iter().filter(|v| v.is_nan()).count(),
            HostArray::F64(a) => a.iter().filter(|v| v.is_nan()).count(),
            _ => 0,
        }
    }

    /// Number of −∞ values (positions a restricted match did not search).
    pub fn count_neg_inf(&self) -> usize {
        match self {
            HostArray::F32(a) => a.iter().filter(|&&v| v == f32::NEG_INFINITY).count(),
            HostArray::F64(a) => a.iter().filter(|&&v| v == f64::NEG_INFINITY).count(),
            _ => 0,
        }
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

/// The container format of an array file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy `.npy`.
    Npy,
    /// MRC-2014 (`.mrc`, `.map`, `.rec`, `.mrcs`, `.st`).
    Mrc,
}

/// The compression around an array file, from its last extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Not compressed.
    Plain,
    /// gzip (`.gz`), one or more members.
    Gzip,
    /// bzip2 (`.bz2`), one or more streams.
    Bzip2,
}

/// The most a deflate stream expands (1032:1, plus headers): a gzip file claiming more than
/// this many times its size is a lie or a bomb.
const GZIP_MAX_RATIO: u64 = 1032;

fn has_ext(path: &Path, exts: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// The format and compression of `path` from its name: `x.mrc`, `x.map.gz`, `x.npy.bz2`…;
/// `None` when the name is neither.
pub fn classify(path: &Path) -> Option<(Format, Codec)> {
    let (inner, codec) = if has_ext(path, &["gz"]) {
        (Path::new(path.file_stem()?), Codec::Gzip)
    } else if has_ext(path, &["bz2"]) {
        (Path::new(path.file_stem()?), Codec::Bzip2)
    } else {
        (path, Codec::Plain)
    };
    if has_ext(inner, &["mrc", "map", "rec", "mrcs", "st"]) {
        Some((Format::Mrc, codec))
    } else if has_ext(inner, &["npy"]) {
        Some((Format::Npy, codec))
    } else {
        None
    }
}

/// `true` when `path` has an MRC extension (`.mrc`, `.map`, `.rec`, `.mrcs`, `.st`), compressed
/// (`.gz`, `.bz2`) or not.
pub fn is_mrc(path: &Path) -> bool {
    matches!(classify(path), Some((Format::Mrc, _)))
}

/// The most bytes a `codec` stream of `compressed` bytes may decompress to here: for gzip
/// deflate's 1032:1 ceiling; for both, no more than the memory available now.
pub fn decompressed_limit(codec: Codec, compressed: u64) -> stream::Extent {
    let mem = stream::available_memory();
    let (ratio, ratio_why) = match codec {
        Codec::Plain => return stream::Extent::Exact(compressed),
        Codec::Gzip => (
            compressed
                .saturating_mul(GZIP_MAX_RATIO)
                .saturating_add(1 << 16),
            format!("{GZIP_MAX_RATIO} × the {compressed}-byte gzip file"),
        ),
        Codec::Bzip2 => (u64::MAX, String::new()),
    };
    match mem {
        Some(m) if m < ratio => stream::Extent::AtMost {
            limit: m,
            why: "the memory available".into(),
        },
        _ if ratio == u64::MAX => stream::Extent::AtMost {
            limit: u64::MAX,
            why: "this machine".into(),
        },
        _ => stream::Extent::AtMost {
            limit: ratio,
            why: ratio_why,
        },
    }
}

/// Opens `path` (decompressing by its extension) and hands the byte source and its extent to
/// `read`; errors name the file.
pub(crate) fn with_source<T>(
    path: &Path,
    read: impl FnOnce(&mut dyn Read, &stream::Extent) -> std::result::Result<T, String>,
) -> Result<T> {
    let codec = classify(path).map_or(Codec::Plain, |(_, c)| c);
    check_regular_file(path)?;
    let mut file =
        std::fs::File::open(path).map_err(|e| io_err(path, format!("cannot read: {e}")))?;
    let len = file
        .metadata()
        .map_err(|e| io_err(path, format!("cannot read: {e}")))?
        .len();
    let extent = decompressed_limit(codec, len);
    let r = match codec {
        Codec::Plain => read(&mut file, &extent),
        Codec::Gzip => read(
            &mut flate2::read::MultiGzDecoder::new(BufReader::new(file)),
            &extent,
        ),
        Codec::Bzip2 => read(
            &mut bzip2::read::MultiBzDecoder::new(BufReader::new(file)),
            &extent,
        ),
    };
    r.map_err(|m| io_err(path, m))
}

fn read_format(
    format: Format,
    r: &mut dyn Read,
    extent: &stream::Extent,
) -> std::result::Result<Volume, String> {
    Ok(match format {
        Format::Mrc => {
            let v = mrc::read_mrc_from(r, extent)?;
            Volume {
                data: HostArray::F32(v.data),
                voxel_size: Some(v.voxel_size),
            }
        }
        Format::Npy => Volume {
            data: npy::read_npy_from(r, extent)?,
            voxel_size: None,
        },
    })
}

/// Decodes an in-memory array file of `format` compressed with `codec`, exactly as
/// [`read_array`] reads one from disk. Errors are messages without the path.
pub fn decode_array(
    bytes: &[u8],
    format: Format,
    codec: Codec,
) -> std::result::Result<Volume, String> {
    let extent = decompressed_limit(codec, bytes.len() as u64);
    match codec {
        Codec::Plain => read_format(format, &mut &bytes[..], &extent),
        Codec::Gzip => read_format(
            format,
            &mut flate2::read::MultiGzDecoder::new(bytes),
            &extent,
        ),
        Codec::Bzip2 => read_format(
            format,
            &mut bzip2::read::MultiBzDecoder::new(bytes),
            &extent,
        ),
    }
}

/// Reads a `.npy` or MRC file (chosen by extension), plain or compressed (`.gz`, `.bz2`, as
/// mrcfile and pytme read them).
pub fn read_array(path: impl AsRef<Path>) -> Result<Volume> {
    let path = path.as_ref();
    let Some((format, _)) = classify(path) else {
        return Err(io_err(
            path,
            "unknown file type, expected .npy or MRC (.mrc, .map, .rec), optionally .gz or .bz2",
        ));
    };
    with_source(path, |r, extent| read_format(format, r, extent))
}
