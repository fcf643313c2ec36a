//! Sub-voxel peak positions as pytme 0.3.6's `PeakCaller.oversample_peaks` finds them: the
//! score map's trigonometric (DFT) interpolant, sampled on a grid `factor` times finer around
//! each peak (Guizar-Sicairos' upsampled DFT), and the sample of largest magnitude.
//!
//! pytme (`tme/analyzer/peaks.py`, `_utils.upsampled_dft`), for a peak at integer `p` and a
//! factor `f`: a region of `U = ceil(1.5 f)` samples per axis, `s = round(U / 2)` (numpy's
//! rounding, half to even), sample `u` at `x = p + (u − s) / f`; the value is
//! `Σ_k F[k] exp(+2πi Σ_a k'_a x_a / n_a)` with `F = fftn(scores)` and `k'` numpy's `fftfreq`
//! integers (`−⌊n/2⌋ … ⌈n/2⌉ − 1`, so the Nyquist term of an even axis is taken at `−n/2`); the
//! first sample (C order) of largest `|value|` gives the position `p + (u − s) / f`.
//!
//! Here the same interpolant is summed in real space, `Σ_j scores[j] Π_a D_a(x_a − j_a)` with
//! `D_n(t) = Σ_{k'} exp(2πi k' t / n)` in closed form, axis by axis, in `f64` on the host
//! (pytme computes in complex128 too): no FFT of the map, `U·N` complex products per peak for a
//! map of `N` voxels, the cost of pytme's first tensor contraction.

use num_complex::Complex64;

use super::Peak;
use crate::backend::{Arr, ArrayMeta, Memory};
use crate::dtype::Float;
use crate::error::{Error, Result, fmt_shape};

/// `D_n(t) = Σ_{k = −⌊n/2⌋}^{⌈n/2⌉−1} exp(2πi k t / n)`: `exp(iπ t (n − 1 − 2⌊n/2⌋)/n) ·
/// sin(π t) / sin(π t / n)`, and `n` where `t` is a multiple of `n`.
fn dirichlet(n: usize, t: f64) -> Complex64 {
    let nf = n as f64;
    let half = (n / 2) as f64;
    let phase = Complex64::from_polar(1.0, std::f64::consts::PI * t * (nf - 1.0 - 2.0 * half) / nf);
    let den = (std::f64::consts::PI * t / nf).sin();
    if den.abs() < 1e-12 {
        // t = q·n: every term is 1 (the phase and the ratio's sign cancel).
        return Complex64::new(nf, 0.0);
    }
    phase * ((std::f64::consts::PI * t).sin() / den)
}

/// Contracts axis `axis` of `data` (shape `shape`) with `kernel` (`u` rows of `shape[axis]`
/// entries): `out[.., v, ..] = Σ_j kernel[v][j] · data[.., j, ..]`.
fn contract<S: Copy>(
    data: &[S],
    shape: &[usize],
    axis: usize,
    kernel: &[Complex64],
    u: usize,
) -> Vec<Complex64>
where
    Complex64: std::ops::Mul<S, Output = Complex64>,
{
    let n = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = vec![Complex64::new(0.0, 0.0); outer * u * inner];
    for o in 0..outer {
        for v in 0..u {
            let krow = &kernel[v * n..(v + 1) * n];
            let dst = &mut out[(o * u + v) * inner..(o * u + v + 1) * inner];
            for (j, &k) in krow.iter().enumerate() {
                let src = &data[(o * n + j) * inner..(o * n + j + 1) * inner];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += k * s;
                }
            }
        }
    }
    out
}

/// The region size `U` and centre `s` of pytme's upsampled DFT for a factor `f`.
fn region(factor: f64) -> (usize, f64) {
    let u = (factor * 1.5).ceil();
    (u as usize, (u / 2.0).round_ties_even())
}

/// pytme's `PeakCaller.oversample_peaks(scores, positions, factor)` (module docs): the
/// sub-voxel position of every peak, in the map's index order. A factor of 1 or less samples
/// only whole voxels around the peak (pytme accepts any factor `> 0`).
///
/// Reads the whole map once to the host. Positions not searched (−∞, a restricted match) are
/// taken as 0 (pytme's interpolant would be NaN everywhere). Errors: a factor that is not
/// finite and `> 0` (or asks for more than 1024 samples per axis), a map with NaN or +∞, a
/// peak outside the map or with the wrong number of axes.
pub fn oversample_peaks<B: Memory, T: Float>(
    b: &B,
    scores: &Arr<B, T>,
    peaks: &[Peak],
    factor: f64,
) -> Result<Vec<Vec<f64>>> {
    if !(factor.is_finite() && factor > 0.0 && factor * 1.5 <= 1024.0) {
        return Err(Error::invalid(
            "oversampling factor",
            format!("expected a number > 0 and at most 682, got {factor}"),
        ));
    }
    let shape = scores.shape().to_vec();
    let d = shape.len();
    for p in peaks {
        if p.coord.len() != d || p.coord.iter().zip(&shape).any(|(&x, &s)| x >= s) {
            return Err(Error::invalid(
                "peaks",
                format!(
                    "coordinate {:?} is not inside the map {}",
                    p.coord,
                    fmt_shape(&shape)
                ),
            ));
        }
    }
    if peaks.is_empty() {
        return Ok(Vec::new());
    }
    let host = b.download(scores)?;
    let mut bad = 0usize;
    // −∞ marks a position not searched (a restricted match): 0 in the interpolant.
    let data: Vec<f64> = host
        .iter()
        .map(|&v| {
            let v = v.as_f64();
            if v == f64::NEG_INFINITY {
                0.0
            } else {
                if !v.is_finite() {
                    bad += 1;
                }
                v
            }
        })
        .collect();
    if bad > 0 {
        return Err(Error::NonFinite {
            what: "scores (sub-voxel positions need a map without NaN or +inf)".into(),
            count: bad,
        });
    }
    let (u, s) = region(factor);
    let mut out = Vec::with_capacity(peaks.len());
    for p in peaks {
        let mut cur: Vec<Complex64> = Vec::new();
        let mut cur_shape = shape.clone();
        for a in (0..d).rev() {
            let n = shape[a];
            let pa = p.coord[a] as f64;
            let off = s - pa * factor;
            let kernel: Vec<Complex64> = (0..u)
                .flat_map(|v| {
                    let x = (v as f64 - off) / factor;
                    (0..n).map(move |j| dirichlet(n, x - j as f64))
                })
                .collect();
            cur = if a == d - 1 {
                contract(&data, &cur_shape, a, &kernel, u)
            } else {
                contract(&cur, &cur_shape, a, &kernel, u)
            };
            cur_shape[a] = u;
        }
        // The first sample of largest magnitude (numpy's argmax, C order).
        let (mut best, mut best_v) = (0usize, f64::NEG_INFINITY);
        for (i, c) in cur.iter().enumerate() {
            let v = c.norm();
            if v > best_v {
                (best, best_v) = (i, v);
            }
        }
        let mut pos = vec![0.0; d];
        let mut rest = best;
        for a in (0..d).rev() {
            let ua = rest % u;
            rest /= u;
            pos[a] = p.coord[a] as f64 + (ua as f64 - s) / factor;
        }
        out.push(pos);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirichlet_is_the_sum() {
        for n in [1usize, 2, 5, 8, 9] {
            for t in [0.0, 0.3, -1.7, 2.0, n as f64, -(n as f64) * 2.0, 4.25] {
                let want: Complex64 = (-((n / 2) as i64)..(n as i64 - (n / 2) as i64))
                    .map(|k| {
                        Complex64::from_polar(
                            1.0,
                            2.0 * std::f64::consts::PI * k as f64 * t / n as f64,
                        )
                    })
                    .sum();
                let got = dirichlet(n, t);
                assert!((got - want).norm() < 1e-9, "n {n} t {t}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn regions_round_half_to_even() {
        assert_eq!(region(8.0), (12, 6.0));
        assert_eq!(region(2.0), (3, 2.0));
        assert_eq!(region(3.0), (5, 2.0));
        assert_eq!(region(7.0), (11, 6.0));
        assert_eq!(region(1.0), (2, 1.0));
    }
}
