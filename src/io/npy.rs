//! `.npy` files (numpy format versions 1, 2 and 3): read float32/float64/int32/int64 (and the small
//! integer types) in either byte order and C or Fortran order; write little-endian C order.
//!
//! The reader checks the header before it allocates anything: the magic string, the header
//! dictionary, the dtype, the shape (no overflow) and that the file holds exactly the bytes the
//! header announces (a compressed file: no more than its bound, and a stream that ends there).
//! A truncated file or a header that lies about its size is an
//! [`Error::Io`](crate::Error::Io) naming the file, never a panic. The payload is then read
//! straight into the final buffer (one copy), and written from it in one write.

use std::io::{Read, Write};
use std::path::Path;

use ndarray::{ArrayD, IxDyn, ShapeBuilder};

use super::stream::{
    Extent, FillError, expect_end, fill, read_converted, read_full, read_native, write_array_le,
};
use super::{HostArray, io_err};
use crate::Result;

const MAGIC: &[u8] = b"\x93NUMPY";

/// Scalar kinds the reader understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    F32,
    F64,
    I8,
    U8,
    I16,
    U16,
    I32,
    I64,
}

impl Kind {
    fn size(self) -> usize {
        match self {
            Kind::I8 | Kind::U8 => 1,
            Kind::I16 | Kind::U16 => 2,
            Kind::F32 | Kind::I32 => 4,
            Kind::F64 | Kind::I64 => 8,
        }
    }
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
struct Header {
    kind: Kind,
    big_endian: bool,
    fortran: bool,
    shape: Vec<usize>,
    data_offset: usize,
}

fn parse_descr(d: &str) -> std::result::Result<(Kind, bool), String> {
    let supported = "expected one of <f4 <f8 <i4 <i8 (either byte order) or |i1 |u1 |b1 <i2 <u2";
    // `split_at_checked`: a dtype starting with a multi-byte character is an error, not a panic.
    let Some((order, code)) = d.split_at_checked(1).filter(|_| d.len() >= 2) else {
        return Err(format!("unsupported dtype '{d}', {supported}"));
    };
    let big = match order {
        ">" => true,
        "<" | "|" | "=" => false,
        _ => return Err(format!("unsupported dtype '{d}', {supported}")),
    };
    let kind = match code {
        "f4" => Kind::F32,
        "f8" => Kind::F64,
        "i1" => Kind::I8,
        "u1" => Kind::U8,
        // numpy's bool: one byte, 0 or 1 (read as uint8).
        "b1" => Kind::U8,
        "i2" => Kind::I16,
        "u2" => Kind::U16,
        "i4" => Kind::I32,
        "i8" => Kind::I64,
        _ => return Err(format!("unsupported dtype '{d}', {supported}")),
    };
    Ok((kind, big))
}

/// Finds `'key':` in the header dict and returns the text after the colon.
fn after_key<'a>(dict: &'a str, key: &str) -> std::result::Result<&'a str, String> {
    for quote in ['\'', '"'] {
        let pat = format!("{quote}{key}{quote}");
        if let Some(i) = dict.find(&pat) {
            let rest = dict[i + pat.len()..].trim_start();
            return rest
                .strip_prefix(':')
                .map(str::trim_start)
                .ok_or_else(|| format!("header key '{key}' has no value"));
        }
    }
    Err(format!("header has no '{key}' key"))
}

/// The most header bytes a file may announce (numpy writes a few hundred; its own reader stops at
/// 10 000 by default).
const MAX_HEADER: usize = 1 << 20;

/// Reads the magic string, the version and the header dictionary from `r`.
fn read_header<R: Read + ?Sized>(
    r: &mut R,
    extent: &Extent,
) -> std::result::Result<Header, String> {
    let mut pre = [0u8; 12];
    let got = read_full(r, &mut pre[..10]).map_err(|e| format!("cannot read: {e}"))?;
    if got < 10 || &pre[..6] != MAGIC {
        return Err(
            "not a .npy file (missing the \\x93NUMPY magic), expected a numpy .npy file".into(),
        );
    }
    let (len, start) = match pre[6] {
        1 => (u16::from_le_bytes([pre[8], pre[9]]) as usize, 10usize),
        2 | 3 => {
            if read_full(r, &mut pre[10..12]).map_err(|e| format!("cannot read: {e}"))? < 2 {
                return Err("truncated header, expected a complete .npy file".into());
            }
            (
                u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize,
                12,
            )
        }
        v => {
            return Err(format!(
                "unsupported .npy format version {v}, expected 1, 2 or 3"
            ));
        }
    };
    let past_end = match extent {
        Extent::Exact(total) => (start + len) as u64 > *total,
        Extent::AtMost { .. } => false,
    };
    if past_end {
        return Err("truncated header (the header length points past the end of the file), expected a complete .npy file".into());
    }
    if len > MAX_HEADER {
        return Err(format!(
            "header of {len} bytes, expected at most {MAX_HEADER} (a numpy header dictionary)"
        ));
    }
    let mut dict = vec![0u8; len];
    fill(r, &mut dict).map_err(|e| match e {
        FillError::Eof(_) => "truncated header (the header length points past the end of the file), expected a complete .npy file".to_string(),
        FillError::Io(e) => format!("cannot read the header: {e}"),
    })?;
    let dict = std::str::from_utf8(&dict)
        .map_err(|_| "header is not text, expected a numpy header dictionary".to_string())?;
    let mut h = parse_dict(dict)?;
    h.data_offset = start + len;
    Ok(h)
}

/// Parses the header dictionary (`data_offset` is left 0).
fn parse_dict(dict: &str) -> std::result::Result<Header, String> {
    // descr
    let rest = after_key(dict, "descr")?;
    let q = rest.chars().next().ok_or("empty 'descr'")?;
    if q != '\'' && q != '"' {
        return Err("structured dtypes are not supported, expected a plain numeric dtype".into());
    }
    let close = rest[1..].find(q).ok_or("unterminated 'descr' string")?;
    let (kind, big_endian) = parse_descr(&rest[1..1 + close])?;
    // fortran_order
    let rest = after_key(dict, "fortran_order")?;
    let fortran = if rest.starts_with("True") {
        true
    } else if rest.starts_with("False") {
        false
    } else {
        return Err("'fortran_order' is neither True nor False".into());
    };
    // shape
    let rest = after_key(dict, "shape")?;
    let rest = rest.strip_prefix('(').ok_or("'shape' is not a tuple")?;
    let close = rest.find(')').ok_or("unterminated 'shape' tuple")?;
    let mut shape = Vec::new();
    for part in rest[..close].split(',') {
        let p = part.trim().trim_end_matches('L');
        if p.is_empty() {
            continue;
        }
        shape.push(
            p.parse::<usize>()
                .map_err(|_| format!("'shape' entry '{p}' is not a non-negative integer"))?,
        );
    }
    if shape.len() > 32 {
        return Err(format!("{} axes, expected at most 32", shape.len()));
    }
    Ok(Header {
        kind,
        big_endian,
        fortran,
        shape,
        data_offset: 0,
    })
}

fn shape_str(shape: &[usize]) -> String {
    if shape.is_empty() {
        "()".into()
    } else {
        shape
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("×")
    }
}

fn build<T: Clone>(
    shape: &[usize],
    fortran: bool,
    v: Vec<T>,
) -> std::result::Result<ArrayD<T>, String> {
    let a = if fortran {
        ArrayD::from_shape_vec(IxDyn(shape).f(), v)
    } else {
        ArrayD::from_shape_vec(IxDyn(shape), v)
    }
    .map_err(|e| format!("inconsistent shape: {e}"))?;
    Ok(if fortran {
        a.as_standard_layout().into_owned()
    } else {
        a
    })
}

/// Reads a `.npy` file from `r`, which holds [`Extent`] bytes: the header is checked against
/// the extent before anything is allocated, then the payload is read straight into the final
/// buffer. Errors are messages without the path.
pub(crate) fn read_npy_from<R: Read + ?Sized>(
    r: &mut R,
    extent: &Extent,
) -> std::result::Result<HostArray, String> {
    let h = read_header(r, extent)?;
    let n = h
        .shape
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| format!("shape {} overflows", shape_str(&h.shape)))?;
    let want = n
        .checked_mul(h.kind.size())
        .ok_or_else(|| format!("shape {} overflows", shape_str(&h.shape)))?;
    match extent {
        Extent::Exact(total) => {
            let have = total.saturating_sub(h.data_offset as u64);
            if have < want as u64 {
                return Err(format!(
                    "truncated: the header announces {} elements of {} bytes ({} data bytes) but only {} follow, expected a complete .npy file",
                    shape_str(&h.shape),
                    h.kind.size(),
                    want,
                    have
                ));
            }
            if have > want as u64 {
                return Err(format!(
                    "{} bytes follow the data the header announces ({} elements of {} bytes = {} bytes), expected the file to end there",
                    have - want as u64,
                    shape_str(&h.shape),
                    h.kind.size(),
                    want
                ));
            }
        }
        Extent::AtMost { limit, why } => {
            if (h.data_offset as u64).saturating_add(want as u64) > *limit {
                return Err(format!(
                    "the header announces {} elements of {} bytes ({} data bytes), more than {why} ({limit} bytes) can hold",
                    shape_str(&h.shape),
                    h.kind.size(),
                    want
                ));
            }
        }
    }
    let stream = extent.is_stream();
    let (s, f, big) = (&h.shape, h.fortran, h.big_endian);
    let a = match h.kind {
        Kind::F32 => HostArray::F32(build(s, f, read_native(r, n, big, stream)?)?),
        Kind::F64 => HostArray::F64(build(s, f, read_native(r, n, big, stream)?)?),
        Kind::I32 => HostArray::I32(build(s, f, read_native(r, n, big, stream)?)?),
        Kind::I64 => HostArray::I64(build(s, f, read_native(r, n, big, stream)?)?),
        Kind::I8 => HostArray::F32(build(
            s,
            f,
            read_converted::<1, _>(r, n, stream, |a| a[0] as i8 as f32)?,
        )?),
        Kind::U8 => HostArray::F32(build(
            s,
            f,
            read_converted::<1, _>(r, n, stream, |a| a[0] as f32)?,
        )?),
        Kind::I16 => HostArray::F32(build(
            s,
            f,
            read_converted::<2, _>(r, n, stream, |a| {
                (if big {
                    i16::from_be_bytes(a)
                } else {
                    i16::from_le_bytes(a)
                }) as f32
            })?,
        )?),
        Kind::U16 => HostArray::F32(build(
            s,
            f,
            read_converted::<2, _>(r, n, stream, |a| {
                (if big {
                    u16::from_be_bytes(a)
                } else {
                    u16::from_le_bytes(a)
                }) as f32
            })?,
        )?),
    };
    if stream {
        expect_end(r, "data")?;
    }
    Ok(a)
}

/// Decodes an in-memory `.npy` file. Errors are messages without the path.
pub fn decode_npy(bytes: &[u8]) -> std::result::Result<HostArray, String> {
    read_npy_from(&mut &bytes[..], &Extent::Exact(bytes.len() as u64))
}

/// Reads a `.npy` file (also `.npy.gz` and `.npy.bz2`, decompressed as they are read).
pub fn read_npy(path: impl AsRef<Path>) -> Result<HostArray> {
    let path = path.as_ref();
    super::with_source(path, |r, extent| read_npy_from(r, extent))
}

/// Element types [`write_npy`] can store.
pub trait NpyElement: bytemuck::Pod {
    /// The numpy `descr` (`<f4`…).
    const DESCR: &'static str;
}

impl NpyElement for f32 {
    const DESCR: &'static str = "<f4";
}
impl NpyElement for f64 {
    const DESCR: &'static str = "<f8";
}
impl NpyElement for i32 {
    const DESCR: &'static str = "<i4";
}
impl NpyElement for i64 {
    const DESCR: &'static str = "<i8";
}

/// The version-1 header (magic, version, length, padded dictionary) of a little-endian C-order
/// array of `T` with shape `shape`.
pub fn npy_header<T: NpyElement>(shape: &[usize]) -> Vec<u8> {
    let shape = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        T::DESCR,
        shape
    );
    // pad so that magic + 4 + dict + '\n' is a multiple of 64
    let total = MAGIC.len() + 4 + dict.len() + 1;
    dict.push_str(&" ".repeat((64 - total % 64) % 64));
    dict.push('\n');
    let mut out = Vec::with_capacity(10 + dict.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Writes an array as a version-1 `.npy` stream to `w`: the header, then the payload's bytes in
/// one write when the array is contiguous.
pub fn write_npy_to<T: NpyElement, W: Write>(w: &mut W, a: &ArrayD<T>) -> std::io::Result<()> {
    w.write_all(&npy_header::<T>(a.shape()))?;
    write_array_le(w, a)
}

/// Encodes an array as a version-1 `.npy` file (little endian, C order).
pub fn encode_npy<T: NpyElement>(a: &ArrayD<T>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + a.len() * std::mem::size_of::<T>());
    write_npy_to(&mut out, a).expect("writing to a Vec cannot fail");
    out
}

/// Writes an array as a `.npy` file (little endian, C order).
pub fn write_npy<T: NpyElement>(path: impl AsRef<Path>, a: &ArrayD<T>) -> Result<()> {
    let path = path.as_ref();
    let mut f =
        std::fs::File::create(path).map_err(|e| io_err(path, format!("cannot write: {e}")))?;
    write_npy_to(&mut f, a).map_err(|e| io_err(path, format!("cannot write: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_orders() {
        let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |i| {
            (i[0] * 100 + i[1] * 10 + i[2]) as f32
        });
        let bytes = encode_npy(&a);
        assert_eq!((bytes.len() - a.len() * 4) % 64, 0);
        match decode_npy(&bytes).unwrap() {
            HostArray::F32(b) => assert_eq!(a, b),
            other => panic!("wrong type {other:?}"),
        }
        // Fortran order, big endian float64, handwritten header.
        let shape = [2usize, 3];
        let mut hdr = String::from("{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }");
        while (10 + hdr.len() + 1) % 64 != 0 {
            hdr.push(' ');
        }
        hdr.push('\n');
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend_from_slice(&(hdr.len() as u16).to_le_bytes());
        f.extend_from_slice(hdr.as_bytes());
        // column-major data of [[0,1,2],[10,11,12]]
        for j in 0..shape[1] {
            for i in 0..shape[0] {
                f.extend_from_slice(&((i * 10 + j) as f64).to_be_bytes());
            }
        }
        match decode_npy(&f).unwrap() {
            HostArray::F64(b) => {
                assert_eq!(b.shape(), &[2, 3]);
                assert_eq!(b[[1, 2]], 12.0);
                assert_eq!(b[[0, 1]], 1.0);
            }
            other => panic!("wrong type {other:?}"),
        }
        // truncated
        let e = decode_npy(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn a_dtype_starting_with_a_multibyte_character_is_an_error() {
        // Found by the long fuzz run: `split_at(1)` panicked inside the character.
        // An empty array: the file is all header.
        let a = ArrayD::<f32>::zeros(IxDyn(&[0]));
        let text = String::from_utf8(encode_npy(&a)[10..].to_vec()).unwrap();
        let text = text.replacen("<f4", "\u{80}4", 1);
        let mut f = encode_npy(&a)[..10].to_vec();
        f[8..10].copy_from_slice(&(text.len() as u16).to_le_bytes());
        f.extend_from_slice(text.as_bytes());
        let e = decode_npy(&f).unwrap_err();
        assert!(e.contains("unsupported dtype"), "{e}");
    }
}
