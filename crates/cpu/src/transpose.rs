//! Out-of-place transposes of small strided rectangles, shared by the strided FFT passes
//! (gather into and scatter out of contiguous blocks of `Complex<T>`) and the contiguous-axis
//! max-filter pass. Elements are moved bit for bit, whatever their type.
//!
//! On x86-64: 4-byte elements in 16×16 AVX-512 tiles (else 8×8 AVX tiles), 8-byte elements
//! (`Complex<f32>`, `f64`) in 4×4 AVX tiles (two unpacks and two 128-bit permutes per pair of
//! rows; 4×4 rather than 8×8 so the FFT's tiles of 13 or 15 lines stay mostly vectorised).
//! Elsewhere, and for other sizes, portable 8×8 tiles so each fetched cache line of both sides
//! is used while it is in L1.

/// `dst[c·ds + r] = src[r·ss + c]` for `r < rows`, `c < cols`.
///
/// # Safety
/// `src + r·ss + c` must be valid for reads and `dst + c·ds + r` for writes for every
/// `r < rows`, `c < cols`; the regions must not overlap and no other thread may write
/// the source or access the destination during the call.
pub(crate) unsafe fn transpose<E: Copy>(
    src: *const E,
    ss: usize,
    dst: *mut E,
    ds: usize,
    rows: usize,
    cols: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of::<E>() == 4 && crate::simd::has_avx512() {
        let (r16, c16) = (rows & !15, cols & !15);
        // SAFETY: AVX-512F is available; `E` is 4 bytes, moved bit for bit as `f32`
        // lanes by unaligned loads and stores; the tiles cover `r16 × c16`, and the two
        // strips left over are sub-rectangles of the caller's, so its contract covers
        // every access.
        unsafe {
            avx512::tiles32(src.cast(), ss, dst.cast(), ds, r16, c16);
            transpose8(src.add(c16), ss, dst.add(c16 * ds), ds, r16, cols - c16);
            transpose8(src.add(r16 * ss), ss, dst.add(r16), ds, rows - r16, cols);
        }
        return;
    }
    // SAFETY: forwarded contract.
    unsafe { transpose8(src, ss, dst, ds, rows, cols) };
}

/// [`transpose`] in 8×8 tiles (AVX when available), the edges element by element.
///
/// # Safety
/// As [`transpose`].
unsafe fn transpose8<E: Copy>(
    src: *const E,
    ss: usize,
    dst: *mut E,
    ds: usize,
    rows: usize,
    cols: usize,
) {
    let (mut r8, mut c8) = (rows & !7, cols & !7);
    let mut tiled = false;
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx() {
        let bytes = std::mem::size_of::<E>();
        if bytes == 8 {
            // 4×4 tiles: the corner is the 4-aligned one.
            (r8, c8) = (rows & !3, cols & !3);
        }
        if bytes == 4 {
            // SAFETY: AVX is available; `E` is 4 bytes, so the element grid is the same in
            // units of `f32` lanes, moved bit for bit by unaligned loads and stores; the
            // tiles cover `r8 × c8`, inside the caller's rectangle.
            unsafe { avx::tiles32(src.cast(), ss, dst.cast(), ds, r8, c8) };
            tiled = true;
        } else if bytes == 8 {
            // SAFETY: as above with 8-byte elements moved as `f64` lanes (4×4 tiles, so
            // `r8 × c8` is the 4-aligned corner, inside the caller's rectangle).
            unsafe { avx::tiles64(src.cast(), ss, dst.cast(), ds, r8, c8) };
            tiled = true;
        }
    }
    // SAFETY: every index is `< rows` / `< cols`, covered by the contract.
    unsafe {
        if !tiled {
            portable_tiles(src, ss, dst, ds, r8, c8);
        }
        for r in 0..r8 {
            for c in c8..cols {
                dst.add(c * ds + r).write(src.add(r * ss + c).read());
            }
        }
        for r in r8..rows {
            for c in 0..cols {
                dst.add(c * ds + r).write(src.add(r * ss + c).read());
            }
        }
    }
}

/// The portable transpose of the `r8 × c8` corner, in 8×8 tiles (each cache line of
/// both sides used while it is in L1).
///
/// # Safety
/// As [`transpose`], with `r8 <= rows`, `c8 <= cols` multiples of 8.
pub(crate) unsafe fn portable_tiles<E: Copy>(
    src: *const E,
    ss: usize,
    dst: *mut E,
    ds: usize,
    r8: usize,
    c8: usize,
) {
    for r in (0..r8).step_by(8) {
        for c in (0..c8).step_by(8) {
            // SAFETY: indices inside the corner (contract).
            unsafe {
                let mut tile = [[src.read(); 8]; 8];
                for (i, row) in tile.iter_mut().enumerate() {
                    for (k, v) in row.iter_mut().enumerate() {
                        *v = src.add((r + i) * ss + c + k).read();
                    }
                }
                for k in 0..8 {
                    let d = dst.add((c + k) * ds + r);
                    for (i, row) in tile.iter().enumerate() {
                        d.add(i).write(row[k]);
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// 16×16 tiles of 4-byte lanes with AVX-512: every load and store is one whole
    /// 64-byte row of a tile; four rounds of 16 shuffles (32-bit unpacks, 64-bit unpacks,
    /// two rounds of 128-bit lane shuffles).
    ///
    /// # Safety
    /// AVX-512F available; the accesses of [`super::transpose`] over the `r16 × c16`
    /// corner (multiples of 16) in units of 4 bytes (every access is unaligned).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tiles32(
        src: *const f32,
        ss: usize,
        dst: *mut f32,
        ds: usize,
        r16: usize,
        c16: usize,
    ) {
        for r in (0..r16).step_by(16) {
            for c in (0..c16).step_by(16) {
                let z = _mm512_setzero_ps();
                let mut x = [z; 16];
                for (i, v) in x.iter_mut().enumerate() {
                    // SAFETY: row `r + i`, columns `c..c + 16` of the corner (contract).
                    *v = unsafe { _mm512_loadu_ps(src.add((r + i) * ss + c)) };
                }
                // lane L of a[2k] / a[2k+1]: rows 2k, 2k+1 interleaved, columns
                // 4L, 4L+1 / 4L+2, 4L+3
                let mut a = [z; 16];
                for k in 0..8 {
                    a[2 * k] = _mm512_unpacklo_ps(x[2 * k], x[2 * k + 1]);
                    a[2 * k + 1] = _mm512_unpackhi_ps(x[2 * k], x[2 * k + 1]);
                }
                // lane L of b[4m + c]: column 4L + c, rows 4m..4m + 4
                let mut b = [z; 16];
                for m in 0..4 {
                    let p0 = _mm512_castps_pd(a[4 * m]);
                    let p1 = _mm512_castps_pd(a[4 * m + 1]);
                    let p2 = _mm512_castps_pd(a[4 * m + 2]);
                    let p3 = _mm512_castps_pd(a[4 * m + 3]);
                    b[4 * m] = _mm512_castpd_ps(_mm512_unpacklo_pd(p0, p2));
                    b[4 * m + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(p0, p2));
                    b[4 * m + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(p1, p3));
                    b[4 * m + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(p1, p3));
                }
                // d[c] / d[4 + c]: lanes 0, 2 / 1, 3 of b[c] then of b[4 + c];
                // e likewise of b[8 + c], b[12 + c]
                let (mut d, mut e) = ([z; 8], [z; 8]);
                for cc in 0..4 {
                    d[cc] = _mm512_shuffle_f32x4::<0x88>(b[cc], b[4 + cc]);
                    d[4 + cc] = _mm512_shuffle_f32x4::<0xDD>(b[cc], b[4 + cc]);
                    e[cc] = _mm512_shuffle_f32x4::<0x88>(b[8 + cc], b[12 + cc]);
                    e[4 + cc] = _mm512_shuffle_f32x4::<0xDD>(b[8 + cc], b[12 + cc]);
                }
                for cc in 0..4 {
                    let rows = [
                        (cc, _mm512_shuffle_f32x4::<0x88>(d[cc], e[cc])),
                        (8 + cc, _mm512_shuffle_f32x4::<0xDD>(d[cc], e[cc])),
                        (4 + cc, _mm512_shuffle_f32x4::<0x88>(d[4 + cc], e[4 + cc])),
                        (12 + cc, _mm512_shuffle_f32x4::<0xDD>(d[4 + cc], e[4 + cc])),
                    ];
                    for (k, v) in rows {
                        // SAFETY: destination row `c + k < c16`, columns `r..r + 16`.
                        unsafe { _mm512_storeu_ps(dst.add((c + k) * ds + r), v) };
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    /// 8×8 tiles of 4-byte lanes with AVX (three rounds of unpacks, shuffles and 128-bit
    /// permutes per tile).
    ///
    /// # Safety
    /// AVX available; the accesses of [`super::transpose`] over the `r8 × c8` corner in
    /// units of 4 bytes (pointers 4-byte aligned; every access is unaligned).
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tiles32(
        src: *const f32,
        ss: usize,
        dst: *mut f32,
        ds: usize,
        r8: usize,
        c8: usize,
    ) {
        for r in (0..r8).step_by(8) {
            for c in (0..c8).step_by(8) {
                // SAFETY: rows `r..r + 8`, columns `c..c + 8` of the corner (contract).
                unsafe {
                    let s = src.add(r * ss + c);
                    let a0 = _mm256_loadu_ps(s);
                    let a1 = _mm256_loadu_ps(s.add(ss));
                    let a2 = _mm256_loadu_ps(s.add(2 * ss));
                    let a3 = _mm256_loadu_ps(s.add(3 * ss));
                    let a4 = _mm256_loadu_ps(s.add(4 * ss));
                    let a5 = _mm256_loadu_ps(s.add(5 * ss));
                    let a6 = _mm256_loadu_ps(s.add(6 * ss));
                    let a7 = _mm256_loadu_ps(s.add(7 * ss));
                    let t0 = _mm256_unpacklo_ps(a0, a1);
                    let t1 = _mm256_unpackhi_ps(a0, a1);
                    let t2 = _mm256_unpacklo_ps(a2, a3);
                    let t3 = _mm256_unpackhi_ps(a2, a3);
                    let t4 = _mm256_unpacklo_ps(a4, a5);
                    let t5 = _mm256_unpackhi_ps(a4, a5);
                    let t6 = _mm256_unpacklo_ps(a6, a7);
                    let t7 = _mm256_unpackhi_ps(a6, a7);
                    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                    let d = dst.add(c * ds + r);
                    _mm256_storeu_ps(d, _mm256_permute2f128_ps::<0x20>(u0, u4));
                    _mm256_storeu_ps(d.add(ds), _mm256_permute2f128_ps::<0x20>(u1, u5));
                    _mm256_storeu_ps(d.add(2 * ds), _mm256_permute2f128_ps::<0x20>(u2, u6));
                    _mm256_storeu_ps(d.add(3 * ds), _mm256_permute2f128_ps::<0x20>(u3, u7));
                    _mm256_storeu_ps(d.add(4 * ds), _mm256_permute2f128_ps::<0x31>(u0, u4));
                    _mm256_storeu_ps(d.add(5 * ds), _mm256_permute2f128_ps::<0x31>(u1, u5));
                    _mm256_storeu_ps(d.add(6 * ds), _mm256_permute2f128_ps::<0x31>(u2, u6));
                    _mm256_storeu_ps(d.add(7 * ds), _mm256_permute2f128_ps::<0x31>(u3, u7));
                }
            }
        }
    }

    /// 4×4 transposes of 8-byte lanes with AVX over the `r8 × c8` corner (multiples of 4).
    ///
    /// # Safety
    /// AVX available; the accesses of [`super::transpose`] over the corner in units of 8
    /// bytes (pointers 4-byte aligned at least; every access is unaligned).
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn tiles64(
        src: *const f64,
        ss: usize,
        dst: *mut f64,
        ds: usize,
        r8: usize,
        c8: usize,
    ) {
        for r in (0..r8).step_by(4) {
            for c in (0..c8).step_by(4) {
                // SAFETY: rows `r..r + 4`, columns `c..c + 4` of the corner (contract).
                unsafe {
                    let s = src.add(r * ss + c);
                    let a = _mm256_loadu_pd(s);
                    let b = _mm256_loadu_pd(s.add(ss));
                    let e = _mm256_loadu_pd(s.add(2 * ss));
                    let f = _mm256_loadu_pd(s.add(3 * ss));
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
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use num_complex::Complex;

    /// The FFT's element types (8 and 16 bytes) against the definition, on sizes with and
    /// without 4- and 8-remainders (the 4-byte paths are tested with the max filter).
    #[test]
    fn complex_transposes_match_definition() {
        for (rows, cols, ss, ds) in [(4, 4, 4, 4), (7, 5, 9, 8), (16, 13, 20, 17), (1, 3, 3, 1)] {
            let src: Vec<Complex<f32>> = (0..rows * ss)
                .map(|i| Complex::new(i as f32, -(i as f32)))
                .collect();
            let mut d1 = vec![Complex::new(0.0f32, 0.0); cols * ds];
            // SAFETY: the buffers cover `rows * ss` and `cols * ds` elements.
            unsafe { super::transpose(src.as_ptr(), ss, d1.as_mut_ptr(), ds, rows, cols) };
            let s64: Vec<Complex<f64>> = src
                .iter()
                .map(|c| Complex::new(c.re as f64, c.im as f64))
                .collect();
            let mut d2 = vec![Complex::new(0.0f64, 0.0); cols * ds];
            // SAFETY: as above.
            unsafe { super::transpose(s64.as_ptr(), ss, d2.as_mut_ptr(), ds, rows, cols) };
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(d1[c * ds + r], src[r * ss + c], "({r}, {c})");
                    assert_eq!(d2[c * ds + r], s64[r * ss + c], "({r}, {c})");
                }
            }
        }
    }
}
