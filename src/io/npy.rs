//! `.npy` files (numpy format versions 1, 2 and 3): read float32/float64/int32/int64 (and the small
//! integer types) in either byte order and C or Fortran order; write little-endian C order.
//!
//! The reader checks the header before it allocates anything: the magic string, the header
//! dictionary, the dtype, the shape (no overflow) and that the file holds exactly the bytes the
//! header announces. A truncated file or a header that lies about its size is an
//! [`Error::Io`](crate::Error::Io) naming the file, never a panic.

use std::path::Path;

use ndarray::{ArrayD, IxDyn, ShapeBuilder};

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
    let supported = "expected one of <f4 <f8 <i4 <i8 (either byte order) or |i1 |u1 <i2 <u2";
    if d.len() < 2 {
        return Err(format!("unsupported dtype '{d}', {supported}"));
    }
    let (order, code) = d.split_at(1);
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

fn parse_header(bytes: &[u8]) -> std::result::Result<Header, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(
            "not a .npy file (missing the \\x93NUMPY magic), expected a numpy .npy file".into(),
        );
    }
    let major = bytes[6];
    let (len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err("truncated header, expected a complete .npy file".into());
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => {
            return Err(format!(
                "unsupported .npy format version {v}, expected 1, 2 or 3"
            ));
        }
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or("truncated header (the header length points past the end of the file), expected a complete .npy file")?;
    let dict = std::str::from_utf8(&bytes[start..end])
        .map_err(|_| "header is not text, expected a numpy header dictionary".to_string())?;
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
        data_offset: end,
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

fn decode<T, const N: usize>(
    data: &[u8],
    big: bool,
    f: impl Fn([u8; N]) -> T,
    g: impl Fn([u8; N]) -> T,
) -> Vec<T> {
    data.chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            if big { g(a) } else { f(a) }
        })
        .collect()
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

/// Decodes an in-memory `.npy` file. Errors are messages without the path.
pub fn decode_npy(bytes: &[u8]) -> std::result::Result<HostArray, String> {
    let h = parse_header(bytes)?;
    let n = h
        .shape
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| format!("shape {} overflows", shape_str(&h.shape)))?;
    let want = n
        .checked_mul(h.kind.size())
        .ok_or_else(|| format!("shape {} overflows", shape_str(&h.shape)))?;
    let have = bytes.len() - h.data_offset;
    if have < want {
        return Err(format!(
            "truncated: the header announces {} elements of {} bytes ({} data bytes) but only {} follow, expected a complete .npy file",
            shape_str(&h.shape),
            h.kind.size(),
            want,
            have
        ));
    }
    if have > want {
        return Err(format!(
            "{} bytes follow the data the header announces ({} elements of {} bytes = {} bytes), expected the file to end there",
            have - want,
            shape_str(&h.shape),
            h.kind.size(),
            want
        ));
    }
    let d = &bytes[h.data_offset..];
    let (s, f, big) = (&h.shape, h.fortran, h.big_endian);
    Ok(match h.kind {
        Kind::F32 => HostArray::F32(build(
            s,
            f,
            decode(d, big, f32::from_le_bytes, f32::from_be_bytes),
        )?),
        Kind::F64 => HostArray::F64(build(
            s,
            f,
            decode(d, big, f64::from_le_bytes, f64::from_be_bytes),
        )?),
        Kind::I32 => HostArray::I32(build(
            s,
            f,
            decode(d, big, i32::from_le_bytes, i32::from_be_bytes),
        )?),
        Kind::I64 => HostArray::I64(build(
            s,
            f,
            decode(d, big, i64::from_le_bytes, i64::from_be_bytes),
        )?),
        Kind::I8 => HostArray::F32(build(s, f, d.iter().map(|&b| b as i8 as f32).collect())?),
        Kind::U8 => HostArray::F32(build(s, f, d.iter().map(|&b| b as f32).collect())?),
        Kind::I16 => HostArray::F32(build(
            s,
            f,
            decode(
                d,
                big,
                |a| i16::from_le_bytes(a) as f32,
                |a| i16::from_be_bytes(a) as f32,
            ),
        )?),
        Kind::U16 => HostArray::F32(build(
            s,
            f,
            decode(
                d,
                big,
                |a| u16::from_le_bytes(a) as f32,
                |a| u16::from_be_bytes(a) as f32,
            ),
        )?),
    })
}

/// Reads a `.npy` file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<HostArray> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_err(path, format!("cannot read: {e}")))?;
    decode_npy(&bytes).map_err(|m| io_err(path, m))
}

/// Element types [`write_npy`] can store.
pub trait NpyElement: Copy {
    /// The numpy `descr` (`<f4`…).
    const DESCR: &'static str;
    /// Appends the little-endian bytes of `self`.
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! npy_el {
    ($t:ty, $d:literal) => {
        impl NpyElement for $t {
            const DESCR: &'static str = $d;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
npy_el!(f32, "<f4");
npy_el!(f64, "<f8");
npy_el!(i32, "<i4");
npy_el!(i64, "<i8");

/// Encodes an array as a version-1 `.npy` file (little endian, C order).
pub fn encode_npy<T: NpyElement>(a: &ArrayD<T>) -> Vec<u8> {
    let shape = match a.ndim() {
        1 => format!("({},)", a.shape()[0]),
        _ => format!(
            "({})",
            a.shape()
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
    let mut out = Vec::with_capacity(10 + dict.len() + a.len() * std::mem::size_of::<T>());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    for &v in a.iter() {
        v.put(&mut out);
    }
    out
}

/// Writes an array as a `.npy` file (little endian, C order).
pub fn write_npy<T: NpyElement>(path: impl AsRef<Path>, a: &ArrayD<T>) -> Result<()> {
    let path = path.as_ref();
    std::fs::write(path, encode_npy(a)).map_err(|e| io_err(path, format!("cannot write: {e}")))
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
}
