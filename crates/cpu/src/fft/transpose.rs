//! Out-of-place transposes of small strided rectangles: the gather into, and the scatter out
//! of, the contiguous blocks of the strided FFT passes.
//!
//! The portable path works in 4×4 blocks so that each fetched cache line of both sides is
//! used while it is in L1. On x86-64 with AVX, 8-byte elements (`Complex<f32>`, one `f64`
//! lane) are transposed 4×4 in registers (two unpacks and two 128-bit permutes per pair of
//! rows), which is where the strided passes of a float32 FFT spend their non-FFT time.

/// `dst[c * ds + r] = src[r * ss + c]` for `r < rows`, `c < cols`.
///
/// # Safety
/// `src + r * ss + c` must be valid for reads and `dst + c * ds + r` valid for writes for
/// every `r < rows`, `c < cols`; the two regions must not overlap, and nothing else may write
/// the source or access the destination during the call.
#[inline]
pub(super) unsafe fn transpose<E: Copy>(
    src: *const E,
    ss: usize,
    dst: *mut E,
    ds: usize,
    rows: usize,
    cols: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of::<E>() == 8 && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is available (checked above); `E` is 8 bytes, so the element grid is
        // the same in units of 8-byte lanes; the caller's contract covers the accesses.
        unsafe { avx::transpose8(src.cast(), ss, dst.cast(), ds, rows, cols) };
        return;
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { portable(src, ss, dst, ds, rows, cols) };
}

/// The portable transpose, in 4×4 blocks.
///
/// # Safety
/// As [`transpose`].
#[inline]
unsafe fn portable<E: Copy>(
    src: *const E,
    ss: usize,
    dst: *mut E,
    ds: usize,
    rows: usize,
    cols: usize,
) {
    let (r4, c4) = (rows & !3, cols & !3);
    // SAFETY (all blocks below): every index is `< rows` / `< cols`, covered by the contract.
    unsafe {
        for r in (0..r4).step_by(4) {
            for c in (0..c4).step_by(4) {
                let mut tile = [[src.read(); 4]; 4];
                for (i, row) in tile.iter_mut().enumerate() {
                    for (k, v) in row.iter_mut().enumerate() {
                        *v = src.add((r + i) * ss + c + k).read();
                    }
                }
                for k in 0..4 {
                    let d = dst.add((c + k) * ds + r);
                    for (i, row) in tile.iter().enumerate() {
                        d.add(i).write(row[k]);
                    }
                }
            }
            for c in c4..cols {
                for i in 0..4 {
                    dst.add(c * ds + r + i)
                        .write(src.add((r + i) * ss + c).read());
                }
            }
        }
        for r in r4..rows {
            for c in 0..cols {
                dst.add(c * ds + r).write(src.add(r * ss + c).read());
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    /// [`super::transpose`] for 8-byte elements with AVX (elements viewed as `f64` lanes and
    /// moved bit for bit; pointers need only 4-byte alignment: every access is unaligned).
    ///
    /// # Safety
    /// AVX must be available; the accesses are those of [`super::transpose`] in units of
    /// 8 bytes.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose8(
        src: *const f64,
        ss: usize,
        dst: *mut f64,
        ds: usize,
        rows: usize,
        cols: usize,
    ) {
        let (r4, c4) = (rows & !3, cols & !3);
        // SAFETY (all blocks below): every index is `< rows` / `< cols`, covered by the
        // contract; loads and stores are unaligned.
        unsafe {
            for r in (0..r4).step_by(4) {
                let s = src.add(r * ss);
                for c in (0..c4).step_by(4) {
                    let a = _mm256_loadu_pd(s.add(c));
                    let b = _mm256_loadu_pd(s.add(ss + c));
                    let e = _mm256_loadu_pd(s.add(2 * ss + c));
                    let f = _mm256_loadu_pd(s.add(3 * ss + c));
                    let t0 = _mm256_unpacklo_pd(a, b); // a0 b0 a2 b2
                    let t1 = _mm256_unpackhi_pd(a, b); // a1 b1 a3 b3
                    let t2 = _mm256_unpacklo_pd(e, f); // e0 f0 e2 f2
                    let t3 = _mm256_unpackhi_pd(e, f); // e1 f1 e3 f3
                    let d = dst.add(c * ds + r);
                    _mm256_storeu_pd(d, _mm256_permute2f128_pd::<0x20>(t0, t2));
                    _mm256_storeu_pd(d.add(ds), _mm256_permute2f128_pd::<0x20>(t1, t3));
                    _mm256_storeu_pd(d.add(2 * ds), _mm256_permute2f128_pd::<0x31>(t0, t2));
                    _mm256_storeu_pd(d.add(3 * ds), _mm256_permute2f128_pd::<0x31>(t1, t3));
                }
                for c in c4..cols {
                    for i in 0..4 {
                        dst.add(c * ds + r + i)
                            .write_unaligned(s.add(i * ss + c).read_unaligned());
                    }
                }
            }
            for r in r4..rows {
                for c in 0..cols {
                    dst.add(c * ds + r)
                        .write_unaligned(src.add(r * ss + c).read_unaligned());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use num_complex::Complex;

    /// Both paths against the definition, on sizes with and without 4-remainders.
    #[test]
    fn transposes_match_definition() {
        for (rows, cols, ss, ds) in [(4, 4, 4, 4), (7, 5, 9, 8), (16, 13, 20, 17), (1, 3, 3, 1)] {
            let src: Vec<Complex<f32>> = (0..rows * ss)
                .map(|i| Complex::new(i as f32, -(i as f32)))
                .collect();
            let want = |d: &[Complex<f32>]| {
                for r in 0..rows {
                    for c in 0..cols {
                        assert_eq!(d[c * ds + r], src[r * ss + c], "({r}, {c})");
                    }
                }
            };
            let mut d1 = vec![Complex::new(0.0f32, 0.0); cols * ds];
            let mut d2 = d1.clone();
            // SAFETY: the buffers cover `rows * ss` and `cols * ds` elements.
            unsafe {
                super::transpose(src.as_ptr(), ss, d1.as_mut_ptr(), ds, rows, cols);
                super::portable(src.as_ptr(), ss, d2.as_mut_ptr(), ds, rows, cols);
            }
            want(&d1);
            want(&d2);
            let s64: Vec<Complex<f64>> = src
                .iter()
                .map(|c| Complex::new(c.re as f64, c.im as f64))
                .collect();
            let mut d3 = vec![Complex::new(0.0f64, 0.0); cols * ds];
            // SAFETY: as above.
            unsafe { super::transpose(s64.as_ptr(), ss, d3.as_mut_ptr(), ds, rows, cols) };
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(d3[c * ds + r], s64[r * ss + c]);
                }
            }
        }
    }
}
