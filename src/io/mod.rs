//! File formats of the `monomorph` command, usable from Rust too: `.npy` and MRC volumes (plain,
//! gzip or bzip2 compressed), CSV/STAR peak lists and PNG slices.
//!
//! Every reader validates its header before allocating and reports a bad file as
//! [`Error::Io`] naming the file and saying what was expected. Payloads are read with one copy,
//! straight into the final buffer, and written with one write.

pub mod mrc;
pub mod npy;
pub mod plot;
pub mod png;
pub mod relion5;
pub mod star;
mod stream;
pub mod table;
pub mod tilt;

use std::io::{BufReader, Read};
use std::path::Path;

use crate::{Error, Result};

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

pub use crate::host_array::HostArray;

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
pub(crate) fn decompressed_limit(codec: Codec, compressed: u64) -> stream::Extent {
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
