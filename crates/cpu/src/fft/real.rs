//! Even-length real transforms as a half-length complex FFT plus a twiddle step, batched over
//! rows.
//!
//! realfft does the same maths one row at a time (one rustfft call, a copy, and a scalar
//! twiddle loop per row). Here the half-length FFT of up to [`ROWS`] contiguous rows runs as
//! ONE rustfft call straight from the (immutable) input rows into a scratch block, and the
//! twiddle step writes the output rows from that block; on x86-64 with AVX the float32
//! twiddle step handles four bins per instruction. The formulas (and twiddles) are realfft's,
//! so results agree with it to rounding.
//!
//! Forward, for a real row `x` of even length `n = 2h`: `z[k] = x[2k] + i x[2k+1]`,
//! `Z = FFT_h(z)`, then for `k = 1..h/2`, with `w_k = ½ e^{-2πik/n}`, `S = Z[k] + Z[h-k]`,
//! `D = Z[k] - Z[h-k]`: `X[k] = (½S.re + w.re S.im + w.im D.re, ½D.im + w.im S.im - w.re D.re)`
//! and `X[h-k] = (½S.re - …, … - ½D.im)`; `X[0] = Z0.re + Z0.im`, `X[h] = Z0.re - Z0.im`, and
//! `X[h/2] = conj(Z[h/2])` for even `h`. The inverse runs the steps backwards.

use std::sync::Arc;

use num_complex::Complex;
use rustfft::{Fft, FftNum};

/// Rows per batched rustfft call.
pub(crate) const ROWS: usize = 16;

/// The half-length plans and twiddles of an even-length real transform.
pub(crate) struct HalfPlans<T: FftNum> {
    pub fwd: Arc<dyn Fft<T>>,
    pub inv: Arc<dyn Fft<T>>,
    /// `½ e^{-2πik/n}` for `k = 1..kc`.
    pub tw_fwd: Vec<Complex<T>>,
    /// `e^{+2πik/n}` for `k = 1..kc`.
    pub tw_inv: Vec<Complex<T>>,
}

impl<T: FftNum> HalfPlans<T> {
    /// Plans for real length `n` (even).
    pub fn new(n: usize, planner: &mut rustfft::FftPlanner<T>) -> Self {
        debug_assert!(n.is_multiple_of(2) && n > 0);
        let kc = if n.is_multiple_of(4) {
            n / 4
        } else {
            n / 4 + 1
        };
        let tw = |k: usize, sign: f64, scale: f64| {
            let a = sign * 2.0 * std::f64::consts::PI * k as f64 / n as f64;
            Complex::new(
                T::from_f64(a.cos() * scale).unwrap_or_else(T::zero),
                T::from_f64(a.sin() * scale).unwrap_or_else(T::zero),
            )
        };
        HalfPlans {
            fwd: planner.plan_fft_forward(n / 2),
            inv: planner.plan_fft_inverse(n / 2),
            tw_fwd: (1..kc).map(|k| tw(k, -1.0, 0.5)).collect(),
            tw_inv: (1..kc).map(|k| tw(k, 1.0, 1.0)).collect(),
        }
    }

    /// Complex scratch elements the batched calls need.
    pub fn scratch_len(&self) -> usize {
        self.fwd
            .get_immutable_scratch_len()
            .max(self.inv.get_outofplace_scratch_len())
    }
}

/// The twiddle steps, with a portable body and faster per-type overrides.
pub(crate) trait Twiddle: FftNum + Sized {
    /// `x` (`h + 1` bins) from the half-length spectrum `z` (`h` bins).
    fn r2c_post(z: &[Complex<Self>], tw: &[Complex<Self>], x: &mut [Complex<Self>]) {
        r2c_post_scalar(z, tw, x, 1);
    }
    /// The half-length spectrum `y` (`h` bins) to inverse-transform, from `x` (`h + 1` bins;
    /// the imaginary parts of `x[0]` and `x[h]` are ignored).
    fn c2r_pre(x: &[Complex<Self>], tw: &[Complex<Self>], y: &mut [Complex<Self>]) {
        c2r_pre_scalar(x, tw, y, 1);
    }
}

impl Twiddle for f64 {}

impl Twiddle for f32 {
    fn r2c_post(z: &[Complex<f32>], tw: &[Complex<f32>], x: &mut [Complex<f32>]) {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::has_avx() {
            // SAFETY: AVX is available.
            let k = unsafe { avx::r2c_post(z, tw, x) };
            r2c_post_scalar(z, tw, x, k);
            return;
        }
        r2c_post_scalar(z, tw, x, 1);
    }

    fn c2r_pre(x: &[Complex<f32>], tw: &[Complex<f32>], y: &mut [Complex<f32>]) {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::has_avx() {
            // SAFETY: AVX is available.
            let k = unsafe { avx::c2r_pre(x, tw, y) };
            c2r_pre_scalar(x, tw, y, k);
            return;
        }
        c2r_pre_scalar(x, tw, y, 1);
    }
}

/// The forward twiddle step for the pairs `k0..=tw.len()` (and the ends when `k0 == 1`).
fn r2c_post_scalar<T: FftNum>(
    z: &[Complex<T>],
    tw: &[Complex<T>],
    x: &mut [Complex<T>],
    k0: usize,
) {
    let h = z.len();
    assert_eq!(x.len(), h + 1, "r2c_post: output length");
    assert!(2 * tw.len() < h.max(1), "r2c_post: twiddles");
    let zero = T::zero();
    let half = T::from_f64(0.5).unwrap_or_else(T::zero);
    if k0 == 1 {
        let z0 = z[0];
        x[0] = Complex::new(z0.re + z0.im, zero);
        x[h] = Complex::new(z0.re - z0.im, zero);
        if h.is_multiple_of(2) && h > 0 {
            x[h / 2] = z[h / 2].conj();
        }
    }
    for k in k0..=tw.len() {
        let w = tw[k - 1];
        let (a, b) = (z[k], z[h - k]);
        let (s, d) = (a + b, a - b);
        let otr = w.re * s.im + w.im * d.re;
        let oti = w.im * s.im - w.re * d.re;
        x[k] = Complex::new(half * s.re + otr, half * d.im + oti);
        x[h - k] = Complex::new(half * s.re - otr, oti - half * d.im);
    }
}

/// The inverse twiddle step for the pairs `k0..=tw.len()` (and the ends when `k0 == 1`).
fn c2r_pre_scalar<T: FftNum>(x: &[Complex<T>], tw: &[Complex<T>], y: &mut [Complex<T>], k0: usize) {
    let h = y.len();
    assert_eq!(x.len(), h + 1, "c2r_pre: input length");
    assert!(2 * tw.len() < h.max(1), "c2r_pre: twiddles");
    if k0 == 1 {
        let (a, b) = (x[0].re, x[h].re);
        y[0] = Complex::new(a + b, a - b);
        if h.is_multiple_of(2) && h > 0 {
            let c = x[h / 2];
            y[h / 2] = (c + c).conj();
        }
    }
    for k in k0..=tw.len() {
        let w = tw[k - 1];
        let (a, b) = (x[k], x[h - k]);
        let (s, d) = (a + b, a - b);
        let otr = w.re * s.im + w.im * d.re;
        let oti = w.im * s.im - w.re * d.re;
        y[k] = Complex::new(s.re - otr, d.im - oti);
        y[h - k] = Complex::new(s.re + otr, -oti - d.im);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    use num_complex::Complex;

    /// Four complex values, reversed.
    #[inline]
    #[target_feature(enable = "avx")]
    fn rev(v: __m256) -> __m256 {
        let s = _mm256_permute2f128_ps::<1>(v, v);
        _mm256_permute_ps::<0x4E>(s)
    }

    /// (ldup(s), hdup(s), ldup(d), hdup(d)) of the sum and difference of `a` and `b`.
    #[inline]
    #[target_feature(enable = "avx")]
    fn parts(a: __m256, b: __m256) -> (__m256, __m256, __m256, __m256) {
        let (s, d) = (_mm256_add_ps(a, b), _mm256_sub_ps(a, b));
        (
            _mm256_moveldup_ps(s),
            _mm256_movehdup_ps(s),
            _mm256_moveldup_ps(d),
            _mm256_movehdup_ps(d),
        )
    }

    /// The pairs `1..` of [`super::Twiddle::r2c_post`] in steps of four, plus the ends;
    /// returns the first pair left for the scalar loop.
    ///
    /// # Safety
    /// AVX must be available.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn r2c_post(
        z: &[Complex<f32>],
        tw: &[Complex<f32>],
        x: &mut [Complex<f32>],
    ) -> usize {
        let h = z.len();
        assert_eq!(x.len(), h + 1, "r2c_post: output length");
        assert!(2 * tw.len() < h.max(1), "r2c_post: twiddles");
        let z0 = z[0];
        x[0] = Complex::new(z0.re + z0.im, 0.0);
        x[h] = Complex::new(z0.re - z0.im, 0.0);
        if h.is_multiple_of(2) && h > 0 {
            x[h / 2] = z[h / 2].conj();
        }
        let half = _mm256_set1_ps(0.5);
        let (zp, xp, tp) = (
            z.as_ptr() as *const f32,
            x.as_mut_ptr() as *mut f32,
            tw.as_ptr() as *const f32,
        );
        let mut k = 1;
        // Pairs k..k+4 and h-k-3..=h-k; k + 3 <= tw.len() < h/2 keeps both in bounds and
        // apart.
        // The last group may overlap the previous one (recomputing the same values: the
        // step is out of place), so that no pair is left to the scalar loop.
        while k <= tw.len() && tw.len() >= 4 {
            k = k.min(tw.len() - 3);
            // SAFETY: indices k..k+4 and h-k-3..h-k+1 are < h (z, x have h and h + 1
            // complex values) and tw has k - 1 + 4 <= tw.len() values; loads and stores are
            // unaligned.
            unsafe {
                let a = _mm256_loadu_ps(zp.add(2 * k));
                let b = rev(_mm256_loadu_ps(zp.add(2 * (h - k - 3))));
                let w = _mm256_loadu_ps(tp.add(2 * (k - 1)));
                let (wr, wi) = (_mm256_moveldup_ps(w), _mm256_movehdup_ps(w));
                let (sr, si, dr, di) = parts(a, b);
                let otr = _mm256_add_ps(_mm256_mul_ps(wr, si), _mm256_mul_ps(wi, dr));
                let oti = _mm256_sub_ps(_mm256_mul_ps(wi, si), _mm256_mul_ps(wr, dr));
                let (hs, hd) = (_mm256_mul_ps(half, sr), _mm256_mul_ps(half, di));
                let lo =
                    _mm256_blend_ps::<0b1010_1010>(_mm256_add_ps(hs, otr), _mm256_add_ps(hd, oti));
                let hi =
                    _mm256_blend_ps::<0b1010_1010>(_mm256_sub_ps(hs, otr), _mm256_sub_ps(oti, hd));
                _mm256_storeu_ps(xp.add(2 * k), lo);
                _mm256_storeu_ps(xp.add(2 * (h - k - 3)), rev(hi));
            }
            k += 4;
        }
        k
    }

    /// The pairs `1..` of [`super::Twiddle::c2r_pre`] in steps of four, plus the ends;
    /// returns the first pair left for the scalar loop.
    ///
    /// # Safety
    /// AVX must be available.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn c2r_pre(
        x: &[Complex<f32>],
        tw: &[Complex<f32>],
        y: &mut [Complex<f32>],
    ) -> usize {
        let h = y.len();
        assert_eq!(x.len(), h + 1, "c2r_pre: input length");
        assert!(2 * tw.len() < h.max(1), "c2r_pre: twiddles");
        let (a, b) = (x[0].re, x[h].re);
        y[0] = Complex::new(a + b, a - b);
        if h.is_multiple_of(2) && h > 0 {
            let c = x[h / 2];
            y[h / 2] = (c + c).conj();
        }
        let (xp, yp, tp) = (
            x.as_ptr() as *const f32,
            y.as_mut_ptr() as *mut f32,
            tw.as_ptr() as *const f32,
        );
        let mut k = 1;
        // The last group may overlap the previous one (recomputing the same values: the
        // step is out of place), so that no pair is left to the scalar loop.
        while k <= tw.len() && tw.len() >= 4 {
            k = k.min(tw.len() - 3);
            // SAFETY: as in `r2c_post`, with the roles of the h-long and (h + 1)-long
            // buffers swapped.
            unsafe {
                let a = _mm256_loadu_ps(xp.add(2 * k));
                let b = rev(_mm256_loadu_ps(xp.add(2 * (h - k - 3))));
                let w = _mm256_loadu_ps(tp.add(2 * (k - 1)));
                let (wr, wi) = (_mm256_moveldup_ps(w), _mm256_movehdup_ps(w));
                let (sr, si, dr, di) = parts(a, b);
                let otr = _mm256_add_ps(_mm256_mul_ps(wr, si), _mm256_mul_ps(wi, dr));
                let oti = _mm256_sub_ps(_mm256_mul_ps(wi, si), _mm256_mul_ps(wr, dr));
                let lo =
                    _mm256_blend_ps::<0b1010_1010>(_mm256_sub_ps(sr, otr), _mm256_sub_ps(di, oti));
                let neg = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_add_ps(oti, di));
                let hi = _mm256_blend_ps::<0b1010_1010>(_mm256_add_ps(sr, otr), neg);
                _mm256_storeu_ps(yp.add(2 * k), lo);
                _mm256_storeu_ps(yp.add(2 * (h - k - 3)), rev(hi));
            }
            k += 4;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The twiddle steps (AVX where present) against the scalar ones, for many lengths.
    #[test]
    fn twiddle_steps_match_scalar() {
        let mut planner = rustfft::FftPlanner::<f32>::new();
        for n in [
            2usize, 4, 6, 8, 10, 12, 14, 16, 18, 22, 30, 32, 34, 40, 64, 66, 128, 130,
        ] {
            let p = HalfPlans::new(n, &mut planner);
            let h = n / 2;
            let z: Vec<Complex<f32>> = (0..h)
                .map(|i| Complex::new((i as f32 * 0.37).sin(), (i as f32 * 1.3).cos()))
                .collect();
            let mut x1 = vec![Complex::new(0.0f32, 0.0); h + 1];
            let mut x2 = x1.clone();
            f32::r2c_post(&z, &p.tw_fwd, &mut x1);
            r2c_post_scalar(&z, &p.tw_fwd, &mut x2, 1);
            assert_eq!(x1, x2, "r2c_post n = {n}");
            let mut y1 = vec![Complex::new(0.0f32, 0.0); h];
            let mut y2 = y1.clone();
            f32::c2r_pre(&x1, &p.tw_inv, &mut y1);
            c2r_pre_scalar(&x1, &p.tw_inv, &mut y2, 1);
            assert_eq!(y1, y2, "c2r_pre n = {n}");
        }
    }
}
