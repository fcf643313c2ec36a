//! MRC-2014 volumes (`.mrc`, `.map`, `.rec`), read and written by hand.
//!
//! Reading supports modes 0 (int8), 1 (int16), 2 (float32), 6 (uint16) and 12 (float16), either
//! byte order (from the `MACHST` stamp), any axis order (`MAPC/MAPR/MAPS`), and an extended
//! header (`NSYMBT` bytes, skipped). The header is checked before anything is allocated:
//! positive dimensions, a known mode, and a file size equal to `1024 + NSYMBT + data` (for a
//! compressed file: a decompressed size within the bound, and a stream that ends there). The
//! payload is read straight into the final buffer.
//! Writing produces mode 2 (float32), little endian, with the voxel size in `CELLA`.

use std::io::{Read, Write};
use std::path::Path;

use ndarray::{ArrayD, IxDyn};

use super::io_err;
use super::stream::{Extent, expect_end, read_converted, read_full, read_native, write_array_le};
use crate::Result;

/// Size of the fixed MRC header in bytes.
pub const HEADER_BYTES: usize = 1024;

/// A volume read from an MRC file.
#[derive(Debug, Clone)]
pub struct MrcVolume {
    /// The voxels as `(z, y, x)` (x fastest), or `(y, x)` when the file holds one section.
    pub data: ArrayD<f32>,
    /// Voxel size in Å per axis, `(z, y, x)`: `CELLA / M` from the header (1 when unset).
    pub voxel_size: [f32; 3],
    /// The header's mode.
    pub mode: i32,
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f32;
    match exp {
        0 => sign * frac * 2f32.powi(-24),
        31 => {
            if frac == 0.0 {
                sign * f32::INFINITY
            } else {
                f32::NAN
            }
        }
        e => sign * (1.0 + frac / 1024.0) * 2f32.powi(e - 15),
    }
}

/// What reading an MRC file needs from its header, checked.
struct Header {
    /// Big-endian (the `MACHST` stamp).
    big: bool,
    /// NX, NY, NZ: columns, rows, sections.
    dims: [usize; 3],
    /// The mode (0, 1, 2, 6 or 12).
    mode: i32,
    /// Extended header bytes (NSYMBT).
    nsymbt: usize,
    /// MAPC, MAPR, MAPS: which of X, Y, Z (1, 2, 3) columns, rows and sections are.
    map: [i32; 3],
    /// Voxels in the file.
    n: usize,
    /// The file's size the header announces.
    want: usize,
    /// Voxel size in Å, `(z, y, x)`.
    voxel_size: [f32; 3],
}

impl Header {
    /// Parses and checks the 1024-byte header: positive dimensions, a known mode, a
    /// non-negative extended header, a permutation of the axes, sizes that do not overflow.
    fn parse(bytes: &[u8; HEADER_BYTES]) -> std::result::Result<Header, String> {
        let big = bytes[212] == 0x11 && bytes[213] == 0x11;
        let word = |i: usize| -> [u8; 4] {
            [
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ]
        };
        let int = |i: usize| {
            if big {
                i32::from_be_bytes(word(i))
            } else {
                i32::from_le_bytes(word(i))
            }
        };
        let flt = |i: usize| {
            if big {
                f32::from_be_bytes(word(i))
            } else {
                f32::from_le_bytes(word(i))
            }
        };
        let (nx, ny, nz, mode) = (int(0), int(1), int(2), int(3));
        if nx <= 0 || ny <= 0 || nz <= 0 {
            return Err(format!(
                "header dimensions NX, NY, NZ = {nx}, {ny}, {nz}, expected positive sizes (is this an MRC file?)"
            ));
        }
        let bpv = match mode {
            0 => 1usize,
            1 | 6 | 12 => 2,
            2 => 4,
            _ => {
                return Err(format!(
                    "MRC mode {mode} is not supported, expected 0 (int8), 1 (int16), 2 (float32), 6 (uint16) or 12 (float16)"
                ));
            }
        };
        let nsymbt = int(23);
        if nsymbt < 0 {
            return Err(format!(
                "extended header size NSYMBT = {nsymbt}, expected ≥ 0"
            ));
        }
        // Axis order: MAPC/MAPR/MAPS say which of X, Y, Z (1, 2, 3) columns, rows and sections are.
        let (mapc, mapr, maps) = (int(16), int(17), int(18));
        let (mapc, mapr, maps) = if (mapc, mapr, maps) == (0, 0, 0) {
            (1, 2, 3)
        } else {
            (mapc, mapr, maps)
        };
        let mut sorted = [mapc, mapr, maps];
        sorted.sort_unstable();
        if sorted != [1, 2, 3] {
            return Err(format!(
                "MAPC, MAPR, MAPS = {mapc}, {mapr}, {maps}, expected a permutation of 1, 2, 3"
            ));
        }
        let (nx, ny, nz) = (nx as usize, ny as usize, nz as usize);
        let n = nx
            .checked_mul(ny)
            .and_then(|v| v.checked_mul(nz))
            .ok_or_else(|| format!("header dimensions {nx}×{ny}×{nz} overflow"))?;
        let data_bytes = n
            .checked_mul(bpv)
            .ok_or_else(|| format!("header dimensions {nx}×{ny}×{nz} overflow"))?;
        let offset = HEADER_BYTES + nsymbt as usize;
        let want = offset
            .checked_add(data_bytes)
            .ok_or("header sizes overflow")?;
        // Voxel size: CELLA (words 10..12, Å, X Y Z) over MX MY MZ (words 7..9).
        let cell = [flt(10), flt(11), flt(12)];
        let m = [int(7), int(8), int(9)];
        let vs = |i: usize| -> f32 {
            if m[i] > 0 && cell[i].is_finite() && cell[i] > 0.0 {
                cell[i] / m[i] as f32
            } else {
                1.0
            }
        };
        Ok(Header {
            big,
            dims: [nx, ny, nz],
            mode,
            nsymbt: nsymbt as usize,
            map: [mapc, mapr, maps],
            n,
            want,
            voxel_size: [vs(2), vs(1), vs(0)],
        })
    }

    /// Refuses a file whose size (or bound, for a compressed one) the header contradicts.
    fn check_extent(&self, extent: &Extent) -> std::result::Result<(), String> {
        let ([nx, ny, nz], mode, nsymbt, want) = (self.dims, self.mode, self.nsymbt, self.want);
        match extent {
            Extent::Exact(len) if *len != want as u64 => Err(format!(
                "file is {len} bytes but the header (NX×NY×NZ = {nx}×{ny}×{nz}, mode {mode}, {nsymbt} extended-header bytes) needs {want}: {}, expected a consistent MRC-2014 file",
                if *len < want as u64 {
                    "truncated"
                } else {
                    "the header lies about its size"
                }
            )),
            Extent::AtMost { limit, why } if want as u64 > *limit => Err(format!(
                "the header (NX×NY×NZ = {nx}×{ny}×{nz}, mode {mode}, {nsymbt} extended-header bytes) announces {want} bytes, more than {why} ({limit} bytes) can hold"
            )),
            _ => Ok(()),
        }
    }

    /// Reads the payload after the extended header (skipped) in file order, as f32.
    fn read_voxels<R: Read + ?Sized>(
        &self,
        r: &mut R,
        stream: bool,
    ) -> std::result::Result<Vec<f32>, String> {
        let (big, n, nsymbt) = (self.big, self.n, self.nsymbt);
        let skipped = std::io::copy(
            &mut Read::take(&mut *r, nsymbt as u64),
            &mut std::io::sink(),
        )
        .map_err(|e| format!("cannot read the extended header: {e}"))?;
        if skipped < nsymbt as u64 {
            return Err(format!(
                "truncated: the extended header of {nsymbt} bytes ends after {skipped}, expected a complete file"
            ));
        }
        Ok(match self.mode {
            0 => read_converted::<1, _>(r, n, stream, |a| a[0] as i8 as f32)?,
            1 => read_converted::<2, _>(r, n, stream, |a| {
                (if big {
                    i16::from_be_bytes(a)
                } else {
                    i16::from_le_bytes(a)
                }) as f32
            })?,
            6 => read_converted::<2, _>(r, n, stream, |a| {
                (if big {
                    u16::from_be_bytes(a)
                } else {
                    u16::from_le_bytes(a)
                }) as f32
            })?,
            12 => read_converted::<2, _>(r, n, stream, |a| {
                f16_to_f32(if big {
                    u16::from_be_bytes(a)
                } else {
                    u16::from_le_bytes(a)
                })
            })?,
            _ => read_native::<f32, _>(r, n, big, stream)?,
        })
    }

    /// The voxels `v` in file order as `(z, y, x)`, or `(y, x)` for one section.
    fn to_zyx(&self, v: Vec<f32>) -> std::result::Result<ArrayD<f32>, String> {
        let [nx, ny, nz] = self.dims;
        let [_, mapr, maps] = self.map;
        // File order: sections (slowest), rows, columns (fastest).
        let file = ArrayD::from_shape_vec(IxDyn(&[nz, ny, nx]), v).map_err(|e| e.to_string())?;
        // Output axis k (0 = Z, 1 = Y, 2 = X) is the file axis whose map is 3 - k.
        // File axes: 0 = sections (maps), 1 = rows (mapr), 2 = columns (mapc).
        let file_axis_of = |space: i32| -> usize {
            if maps == space {
                0
            } else if mapr == space {
                1
            } else {
                2
            }
        };
        let perm = [file_axis_of(3), file_axis_of(2), file_axis_of(1)];
        let data = if perm == [0, 1, 2] {
            file
        } else {
            file.permuted_axes(IxDyn(&perm))
                .as_standard_layout()
                .into_owned()
        };
        let shape = data.shape().to_vec();
        if shape[0] == 1 {
            data.into_shape_with_order(IxDyn(&shape[1..]))
                .map_err(|e| e.to_string())
        } else {
            Ok(data)
        }
    }
}

/// Reads an MRC file from `r`, which holds [`Extent`] bytes: the header is checked against the
/// extent before anything is allocated, then the payload is read straight into the final buffer
/// (and byte-swapped or converted in one pass). Errors are messages without the path.
pub(crate) fn read_mrc_from<R: Read + ?Sized>(
    r: &mut R,
    extent: &Extent,
) -> std::result::Result<MrcVolume, String> {
    let mut bytes = [0u8; HEADER_BYTES];
    let got = read_full(r, &mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if got < HEADER_BYTES {
        return Err(format!(
            "truncated: {got} bytes, shorter than the 1024-byte MRC header, expected an MRC-2014 file"
        ));
    }
    let header = Header::parse(&bytes)?;
    header.check_extent(extent)?;
    let stream = extent.is_stream();
    let v = header.read_voxels(r, stream)?;
    if stream {
        expect_end(r, "data")?;
    }
    Ok(MrcVolume {
        data: header.to_zyx(v)?,
        voxel_size: header.voxel_size,
        mode: header.mode,
    })
}

/// Decodes an in-memory MRC file. Errors are messages without the path.
pub fn decode_mrc(bytes: &[u8]) -> std::result::Result<MrcVolume, String> {
    read_mrc_from(&mut &bytes[..], &Extent::Exact(bytes.len() as u64))
}

/// Reads an MRC file (also `.mrc.gz`, `.map.bz2` and so on, decompressed as they are read).
pub fn read_mrc(path: impl AsRef<Path>) -> Result<MrcVolume> {
    let path = path.as_ref();
    super::with_source(path, |r, extent| read_mrc_from(r, extent))
}

/// The 1024-byte mode-2 MRC-2014 header of a 2-D `(y, x)` or 3-D `(z, y, x)` array with voxel
/// size `voxel_size` (Å, `(z, y, x)`), with its statistics (min, max, mean, rms).
pub fn mrc_header(a: &ArrayD<f32>, voxel_size: [f32; 3]) -> std::result::Result<Vec<u8>, String> {
    let (nz, ny, nx) = match a.shape() {
        [y, x] => (1, *y, *x),
        [z, y, x] => (*z, *y, *x),
        s => {
            return Err(format!(
                "cannot write a {}-D array as MRC, expected 2-D or 3-D",
                s.len()
            ));
        }
    };
    let too_big = |v: usize| i32::try_from(v).is_err();
    if too_big(nx) || too_big(ny) || too_big(nz) {
        return Err("dimensions exceed the MRC header's int32 range".into());
    }
    let mut h = vec![0u8; HEADER_BYTES];
    let put_i =
        |i: usize, v: i32, h: &mut Vec<u8>| h[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    let put_f =
        |i: usize, v: f32, h: &mut Vec<u8>| h[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    let (min, max, sum, sumsq) = a.iter().fold(
        (f32::INFINITY, f32::NEG_INFINITY, 0f64, 0f64),
        |(lo, hi, s, q), &v| {
            (
                lo.min(v),
                hi.max(v),
                s + v as f64,
                q + (v as f64) * (v as f64),
            )
        },
    );
    let n = a.len().max(1) as f64;
    let mean = sum / n;
    let rms = (sumsq / n - mean * mean).max(0.0).sqrt();
    put_i(0, nx as i32, &mut h);
    put_i(1, ny as i32, &mut h);
    put_i(2, nz as i32, &mut h);
    put_i(3, 2, &mut h);
    put_i(7, nx as i32, &mut h);
    put_i(8, ny as i32, &mut h);
    put_i(9, nz as i32, &mut h);
    put_f(10, voxel_size[2] * nx as f32, &mut h);
    put_f(11, voxel_size[1] * ny as f32, &mut h);
    put_f(12, voxel_size[0] * nz as f32, &mut h);
    for i in 13..16 {
        put_f(i, 90.0, &mut h);
    }
    put_i(16, 1, &mut h);
    put_i(17, 2, &mut h);
    put_i(18, 3, &mut h);
    put_f(19, min, &mut h);
    put_f(20, max, &mut h);
    put_f(21, mean as f32, &mut h);
    put_i(22, if a.ndim() == 3 { 1 } else { 0 }, &mut h);
    put_i(27, 20140, &mut h);
    h[208..212].copy_from_slice(b"MAP ");
    h[212..216].copy_from_slice(&[0x44, 0x44, 0, 0]);
    put_f(54, rms as f32, &mut h);
    put_i(55, 1, &mut h);
    let label = b"written by monomorph";
    h[224..224 + label.len()].copy_from_slice(label);
    Ok(h)
}

/// Encodes a 2-D `(y, x)` or 3-D `(z, y, x)` array as a mode-2 MRC-2014 file with voxel size
/// `voxel_size` (Å, `(z, y, x)`).
pub fn encode_mrc(a: &ArrayD<f32>, voxel_size: [f32; 3]) -> std::result::Result<Vec<u8>, String> {
    let mut h = mrc_header(a, voxel_size)?;
    h.reserve(a.len() * 4);
    write_array_le(&mut h, a).map_err(|e| e.to_string())?;
    Ok(h)
}

/// Writes a mode-2 MRC file with voxel size `voxel_size` (Å, `(z, y, x)`): the header, then the
/// payload's bytes in one write.
pub fn write_mrc(path: impl AsRef<Path>, a: &ArrayD<f32>, voxel_size: [f32; 3]) -> Result<()> {
    let path = path.as_ref();
    let header = mrc_header(a, voxel_size).map_err(|m| io_err(path, m))?;
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(path)?;
        f.write_all(&header)?;
        write_array_le(&mut f, a)
    };
    write().map_err(|e| io_err(path, format!("cannot write: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_voxel_size_and_f16() {
        let a = ArrayD::from_shape_fn(IxDyn(&[3, 4, 5]), |i| {
            (i[0] * 100 + i[1] * 10 + i[2]) as f32
        });
        let bytes = encode_mrc(&a, [2.0, 1.5, 1.25]).unwrap();
        assert_eq!(bytes.len(), 1024 + 60 * 4);
        let v = decode_mrc(&bytes).unwrap();
        assert_eq!(v.data, a);
        assert_eq!(v.voxel_size, [2.0, 1.5, 1.25]);
        let e = decode_mrc(&bytes[..bytes.len() - 4]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7e00).is_nan());
    }

    #[test]
    fn axis_order_is_honoured() {
        // Store the same volume with columns = Y, rows = X, sections = Z (MAPC=2, MAPR=1, MAPS=3).
        let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |i| {
            (i[0] * 100 + i[1] * 10 + i[2]) as f32
        });
        let t = a
            .clone()
            .permuted_axes(IxDyn(&[0, 2, 1]))
            .as_standard_layout()
            .into_owned();
        let mut bytes = encode_mrc(&t, [1.0; 3]).unwrap();
        bytes[64..68].copy_from_slice(&2i32.to_le_bytes());
        bytes[68..72].copy_from_slice(&1i32.to_le_bytes());
        let v = decode_mrc(&bytes).unwrap();
        assert_eq!(v.data, a);
    }
}
