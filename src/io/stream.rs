//! The payload plumbing shared by the `.npy` and MRC readers and writers: read a header, allocate
//! the final buffer once, read the payload straight into its bytes, and fix the byte order or
//! convert the type in place; write a header and then the payload's bytes in one call.
//!
//! A reader knows how many bytes its source may hold before it allocates: a plain file (or an
//! in-memory buffer) holds exactly its length, and a decompressing stream at most a bound
//! ([`Extent`]). A header that announces more than that is rejected before any allocation, and
//! every allocation is fallible, so a lying header is a clean error, never an abort.

use std::io::{self, Read, Write};

use bytemuck::Pod;

/// How many bytes a source holds, known before its payload is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Extent {
    /// Exactly this many bytes: a plain file or an in-memory buffer. The header must announce
    /// exactly this size.
    Exact(u64),
    /// At most `limit` bytes: a decompressing stream. `why` says what sets the limit (for the
    /// error message); the reader checks that the stream ends where the header says.
    AtMost {
        /// The bound in bytes.
        limit: u64,
        /// What the bound is, e.g. "1032 × the 4000-byte gzip file".
        why: String,
    },
}

impl Extent {
    /// `true` for a decompressing stream.
    pub(crate) fn is_stream(&self) -> bool {
        matches!(self, Extent::AtMost { .. })
    }
}

/// Why [`fill`] stopped early.
#[derive(Debug)]
pub(crate) enum FillError {
    /// The source ended after this many bytes of the buffer.
    Eof(usize),
    /// The source failed (an I/O error or a corrupt compressed stream).
    Io(io::Error),
}

/// Reads from `r` until `buf` is full or the source ends; the number of bytes read.
pub(crate) fn read_full<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Fills `buf` from `r` completely.
pub(crate) fn fill<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> Result<(), FillError> {
    match read_full(r, buf) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(n) => Err(FillError::Eof(n)),
        Err(e) => Err(FillError::Io(e)),
    }
}

/// Checks that a stream has nothing left after the payload (reads at most one byte).
pub(crate) fn expect_end<R: Read + ?Sized>(r: &mut R, what: &str) -> Result<(), String> {
    let mut one = [0u8; 1];
    match read_full(r, &mut one) {
        Ok(0) => Ok(()),
        Ok(_) => Err(format!(
            "more data follows the {what} the header announces, expected the file to end there"
        )),
        Err(e) => Err(format!("cannot read past the {what}: {e}")),
    }
}

/// A zeroed `Vec<T>` of `n` elements, or an error instead of an allocation abort. A large one
/// comes from the kernel untouched (calloc), so the payload read that follows faults each page
/// in once.
pub(crate) fn zeroed_vec<T: Pod>(n: usize) -> Result<Vec<T>, String> {
    let mut v: Vec<T> = bytemuck::allocation::try_zeroed_vec(n).map_err(|()| {
        format!(
            "cannot allocate {} elements of {} bytes for the data, expected a size this machine can hold",
            n,
            std::mem::size_of::<T>()
        )
    })?;
    advise_huge_pages(bytemuck::cast_slice_mut(&mut v));
    Ok(v)
}

/// Asks Linux to back the 2 MiB-aligned middle of a large, not yet touched buffer with huge
/// pages, so that the read that fills it faults once per 2 MiB instead of once per 4 KiB (a
/// 64 MiB payload: 32 faults instead of 16 384). Advice only: failure (THP off, another OS)
/// changes nothing but speed. The facade's one `unsafe` call (the crate denies the rest).
#[allow(unsafe_code)]
fn advise_huge_pages(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if buf.len() < 2 * HUGE {
            return;
        }
        let ptr = buf.as_mut_ptr() as usize;
        let start = ptr.next_multiple_of(HUGE);
        let end = (ptr + buf.len()) / HUGE * HUGE;
        if end > start {
            // SAFETY: [start, end) lies inside `buf` (start >= ptr, end <= ptr + len) and is
            // page aligned as madvise requires; MADV_HUGEPAGE changes how the kernel backs the
            // range, never its contents or validity. The result is ignored (advice only).
            let _ = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE)
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// Reverses the byte order of every element of `v` in place.
pub(crate) fn swap_bytes<T: Pod>(v: &mut [T]) {
    match std::mem::size_of::<T>() {
        2 => bytemuck::cast_slice_mut::<T, u16>(v)
            .iter_mut()
            .for_each(|x| *x = x.swap_bytes()),
        4 => bytemuck::cast_slice_mut::<T, u32>(v)
            .iter_mut()
            .for_each(|x| *x = x.swap_bytes()),
        8 => bytemuck::cast_slice_mut::<T, u64>(v)
            .iter_mut()
            .for_each(|x| *x = x.swap_bytes()),
        _ => {}
    }
}

/// Describes a short payload: `what` is "data" or similar, `want` the announced bytes, `got` what
/// the source held.
fn short(want: u64, got: u64, stream: bool) -> String {
    format!(
        "truncated: the header announces {want} data bytes but the {} ends after {got}, expected a complete file",
        if stream { "decompressed data" } else { "file" }
    )
}

fn fill_error(e: FillError, done: u64, want: u64, stream: bool) -> String {
    match e {
        FillError::Eof(n) => short(want, done + n as u64, stream),
        FillError::Io(e) => format!("cannot read the data: {e}"),
    }
}

/// Reads `n` elements of the plain-old-data type `T` stored in byte order `big_endian` straight
/// into a new vector (one copy), then fixes the byte order in place when it differs from this
/// machine's.
pub(crate) fn read_native<T: Pod, R: Read + ?Sized>(
    r: &mut R,
    n: usize,
    big_endian: bool,
    stream: bool,
) -> Result<Vec<T>, String> {
    let mut v: Vec<T> = zeroed_vec(n)?;
    let want = (n * std::mem::size_of::<T>()) as u64;
    fill(r, bytemuck::cast_slice_mut(&mut v)).map_err(|e| fill_error(e, 0, want, stream))?;
    if big_endian != cfg!(target_endian = "big") {
        swap_bytes(&mut v);
    }
    Ok(v)
}

/// Reads `n` elements of `N` bytes each and converts them with `f` into a new `f32` vector, in
/// one pass through a small buffer (for the types that arrive as `f32`: small integers, float16).
pub(crate) fn read_converted<const N: usize, R: Read + ?Sized>(
    r: &mut R,
    n: usize,
    stream: bool,
    f: impl Fn([u8; N]) -> f32,
) -> Result<Vec<f32>, String> {
    const CHUNK: usize = 64 * 1024;
    let mut v: Vec<f32> = zeroed_vec(n)?;
    let mut buf = vec![0u8; CHUNK * N];
    let want = (n * N) as u64;
    let mut done = 0u64;
    for out in v.chunks_mut(CHUNK) {
        let b = &mut buf[..out.len() * N];
        fill(r, b).map_err(|e| fill_error(e, done, want, stream))?;
        done += b.len() as u64;
        for (o, c) in out.iter_mut().zip(b.chunks_exact(N)) {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            *o = f(a);
        }
    }
    Ok(v)
}

/// Writes `values` as little-endian bytes: one write of the values' own bytes when they are
/// already little endian (every supported machine), else through a small buffer.
pub(crate) fn write_le<T: Pod, W: Write>(w: &mut W, values: &[T]) -> io::Result<()> {
    if cfg!(target_endian = "little") {
        return w.write_all(bytemuck::cast_slice(values));
    }
    for chunk in values.chunks(64 * 1024) {
        let mut c = chunk.to_vec();
        swap_bytes(&mut c);
        w.write_all(bytemuck::cast_slice(&c))?;
    }
    Ok(())
}

/// Writes the elements of an array in logical (C) order as little-endian bytes: one write when
/// the array is contiguous in C order, else through a small buffer.
pub(crate) fn write_array_le<T: Pod, W: Write>(
    w: &mut W,
    a: &ndarray::ArrayD<T>,
) -> io::Result<()> {
    if let Some(s) = a.as_slice() {
        return write_le(w, s);
    }
    let mut buf = Vec::with_capacity(64 * 1024);
    for &v in a.iter() {
        buf.push(v);
        if buf.len() == buf.capacity() {
            write_le(w, &buf)?;
            buf.clear();
        }
    }
    write_le(w, &buf)
}

/// The memory this machine has available now (Linux `MemAvailable`), when the OS says.
pub(crate) fn available_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_read_swaps_and_reports_truncation() {
        let bytes: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let v: Vec<f32> = read_native(&mut &bytes[..], 2, true, false).unwrap();
        assert_eq!(v, [1.5, -2.0]);
        let e = read_native::<f32, _>(&mut &bytes[..7], 2, true, true).unwrap_err();
        assert!(e.contains("truncated") && e.contains("after 7"), "{e}");
        let v = read_converted::<2, _>(&mut &[1u8, 0, 0xff, 0xff][..], 2, false, |a| {
            i16::from_le_bytes(a) as f32
        })
        .unwrap();
        assert_eq!(v, [1.0, -1.0]);
    }
}
