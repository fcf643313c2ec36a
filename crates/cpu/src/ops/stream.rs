//! Memory-streaming helpers of the stencil kernels (the Laplacian and the pressure stencil):
//! software prefetch of the line a kernel will read first from memory, and non-temporal
//! stores of the line it writes.
//!
//! A stencil pass reads its input `x` once from memory (the neighbour lines of the plane
//! below, the same plane and the plane above are in cache by the time they are read, except
//! the plane above) and writes its output once. Two things kept it at a third of the
//! machine's bandwidth: the one line per step that comes from memory (the upper-plane
//! neighbour) was requested only when needed, one stream among five cache hits, and every
//! output line was first read into cache before being overwritten (write-allocate), a third
//! vector of traffic. [`prefetch_line`] asks for the upper-plane line a few lines ahead;
//! [`store_streaming`] writes the finished line around the caches. Neither changes a value:
//! the results are the same bits.

/// Output size (bytes, the whole array) from which the stencil kernels write with streaming
/// stores. Below it, a CG iteration's vectors (`x`, `r`, `d`, `q`) fit in a typical 16–32 MiB
/// last-level cache, the output is read again from there by the next pass, and streaming it to
/// memory would cost that pass a memory read: plain stores are kept.
pub(super) const STREAM_MIN_BYTES: usize = 8 << 20;

/// Whether a stencil kernel writing `len` elements of `T` streams its output
/// ([`STREAM_MIN_BYTES`]).
#[inline]
pub(super) fn streams<T>(len: usize) -> bool {
    len.saturating_mul(std::mem::size_of::<T>()) >= STREAM_MIN_BYTES
}

/// `dst = src` (the first `dst.len()` elements), with [`store_streaming`] when `stream`, else
/// plain stores.
#[inline(always)]
pub(super) fn store_line<T: Copy>(src: &[T], dst: &mut [T], stream: bool) {
    if stream {
        store_streaming(src, dst);
    } else {
        dst.copy_from_slice(&src[..dst.len()]);
    }
}

/// How many lines of `nx` elements of `T` ahead a stencil kernel prefetches: about 16 KiB,
/// and at least one line (far enough for the memory latency, near enough to stay in L1/L2).
#[inline(always)]
pub(super) fn prefetch_ahead<T>(nx: usize) -> usize {
    (16384 / (nx * std::mem::size_of::<T>()).max(1)).max(1)
}

/// Requests the cache lines of `line` (a line of the input that will be read a few lines
/// later) into the cache: a hint, with no effect on any value.
#[inline(always)]
pub(super) fn prefetch_line<T>(line: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let bytes = std::mem::size_of_val(line);
        let p = line.as_ptr().cast::<i8>();
        for off in (0..bytes).step_by(64) {
            // SAFETY: `off < bytes`, so the address lies inside `line`; a prefetch never faults
            // and reads or writes nothing.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
}

/// `dst = src` (the first `dst.len()` elements of `src`), written with non-temporal stores
/// where the target has them (x86-64: 16-byte streaming stores, plain stores for the few
/// elements before the first 16-byte boundary and after the last), so that `dst`'s cache
/// lines are not read from memory before being overwritten. Call [`fence_streaming`] before
/// another thread may read `dst`.
#[inline(always)]
pub(super) fn store_streaming<T: Copy>(src: &[T], dst: &mut [T]) {
    let n = dst.len();
    let src = &src[..n];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let size = std::mem::size_of::<T>();
        if size == 4 || size == 8 {
            let per = 16 / size;
            let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
            // Elements before the first 16-byte boundary (`d` is aligned to `size`, so the
            // boundary is reached after fewer than `per` elements).
            let head = ((16 - d as usize % 16) % 16 / size).min(n);
            let body = (n - head) / per * per;
            // SAFETY: every index below is < n = dst.len() = src.len(); the streaming stores
            // write 16 bytes at `d + i` with `i ≥ head`, which is 16-byte aligned, and
            // `i + per ≤ head + body ≤ n`; `T` is a plain `Copy` value of 4 or 8 bytes, so
            // copying its bytes copies the value; `src` and `dst` do not overlap (a shared and
            // a mutable borrow).
            unsafe {
                for i in 0..head {
                    *d.add(i) = *s.add(i);
                }
                let mut i = head;
                while i < head + body {
                    let v = _mm_loadu_si128(s.add(i).cast::<__m128i>());
                    _mm_stream_si128(d.add(i).cast::<__m128i>(), v);
                    i += per;
                }
                for i in head + body..n {
                    *d.add(i) = *s.add(i);
                }
            }
            return;
        }
    }
    dst.copy_from_slice(src);
}

/// Orders the streaming stores of this thread before its later stores (x86-64 `sfence`; a
/// no-op elsewhere), so that the thread's completion, which another thread observes, comes
/// after the data it wrote with [`store_streaming`].
#[inline(always)]
pub(super) fn fence_streaming() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and no preconditions (SSE, part of x86-64).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length and every start alignment (including lines shorter than one streaming
    /// store and slices starting mid-vector) copies exactly, for 4- and 8-byte elements.
    #[test]
    fn streaming_store_copies_every_element() {
        for n in 0..40usize {
            for start in 0..5usize {
                let src: Vec<f64> = (0..n).map(|i| i as f64 * 1.5 - 3.0).collect();
                let mut buf = vec![f64::NAN; n + 8];
                store_streaming(&src, &mut buf[start..start + n]);
                fence_streaming();
                assert_eq!(&buf[start..start + n], &src[..], "f64 n {n} start {start}");
                assert!(buf[..start].iter().all(|v| v.is_nan()), "before");
                assert!(buf[start + n..].iter().all(|v| v.is_nan()), "after");
                let src32: Vec<f32> = src.iter().map(|&v| v as f32).collect();
                let mut b32 = vec![f32::NAN; n + 8];
                store_streaming(&src32, &mut b32[start..start + n]);
                assert_eq!(
                    &b32[start..start + n],
                    &src32[..],
                    "f32 n {n} start {start}"
                );
                assert!(
                    b32[..start]
                        .iter()
                        .chain(&b32[start + n..])
                        .all(|v| v.is_nan())
                );
            }
        }
        prefetch_line(&[1.0f64; 3]);
    }

    /// Plain stores below the size threshold, streaming from it on; both copy exactly.
    #[test]
    fn streaming_starts_at_the_threshold() {
        assert!(!streams::<f64>(STREAM_MIN_BYTES / 8 - 1));
        assert!(streams::<f64>(STREAM_MIN_BYTES / 8));
        assert!(!streams::<f32>(STREAM_MIN_BYTES / 8));
        assert!(streams::<f32>(usize::MAX));
        for stream in [false, true] {
            let src = [1.0f32, 2.0, 3.0, 4.0, 5.0];
            let mut dst = [0.0f32; 5];
            store_line(&src, &mut dst, stream);
            assert_eq!(dst, src);
        }
    }
}
