//! The complementary error function and its inverse in `f64`, and the false-alarm threshold.

use crate::error::{Error, Result};

const FRAC_2_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// erf(x) for |x| < 2 by the series `2/√π · e^{−x²} · Σ 2ⁿ x^{2n+1} / (1·3·…·(2n+1))`
/// (all terms positive: no cancellation).
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    let mut n = 0.0;
    loop {
        n += 1.0;
        term *= 2.0 * x2 / (2.0 * n + 1.0);
        sum += term;
        if term.abs() <= sum.abs() * 1e-17 || n > 500.0 {
            break;
        }
    }
    FRAC_2_SQRT_PI * (-x2).exp() * sum
}

/// erfc(x) for x ≥ 1.5 by the continued fraction
/// `e^{−x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))`, evaluated with Lentz's method.
fn erfc_cf(x: f64) -> f64 {
    let tiny = 1e-300;
    let mut f = x;
    let mut c = x;
    let mut d = 0.0;
    for k in 1..2000 {
        let a = k as f64 / 2.0;
        d = x + a * d;
        if d == 0.0 {
            d = tiny;
        }
        c = x + a / c;
        if c == 0.0 {
            c = tiny;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / (f * std::f64::consts::PI.sqrt())
}

/// The complementary error function `erfc(x) = 1 − erf(x)` in `f64` (relative error ≈ 1e-15).
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 1.5 {
        1.0 - erf_series(x)
    } else if x > 27.3 {
        0.0
    } else {
        erfc_cf(x)
    }
}

/// The inverse complementary error function: the `x` with `erfc(x) = y`, for `y` in `[0, 2]`
/// (`erfcinv(0) = +∞`, `erfcinv(2) = −∞`, NaN outside). An initial guess (Winitzki's
/// approximation, written on `ln y` so that tiny `y` keep their precision) is refined by Newton
/// steps on `ln erfc(x) − ln y`, which converge to full `f64` precision in a few steps.
pub fn erfcinv(y: f64) -> f64 {
    if y.is_nan() || !(0.0..=2.0).contains(&y) {
        return f64::NAN;
    }
    if y == 0.0 {
        return f64::INFINITY;
    }
    if y == 2.0 {
        return f64::NEG_INFINITY;
    }
    if y > 1.0 {
        return -erfcinv(2.0 - y);
    }
    if y == 1.0 {
        return 0.0;
    }
    // ln(1 − z²) with z = 1 − y is ln(y) + ln(2 − y): no cancellation for tiny y.
    let a = 0.147;
    let l = y.ln() + (2.0 - y).ln();
    let t = 2.0 / (std::f64::consts::PI * a) + l / 2.0;
    let mut x = ((t * t - l / a).sqrt() - t).sqrt();
    let ln_y = y.ln();
    for _ in 0..50 {
        let e = erfc(x);
        if e <= 0.0 {
            break;
        }
        // g(x) = ln erfc(x) − ln y, g'(x) = −(2/√π) e^{−x²} / erfc(x).
        let g = e.ln() - ln_y;
        let dg = -FRAC_2_SQRT_PI * (-x * x).exp() / e;
        if dg == 0.0 || !dg.is_finite() {
            break;
        }
        let step = g / dg;
        x -= step;
        if step.abs() <= 1e-16 * x.abs().max(1e-300) {
            break;
        }
    }
    x
}

/// pytme's `--n-false-positives` score threshold (Rickgauer et al. 2017): the score above which
/// at most `k` false positives are expected among `n_voxels · n_rotations` independent Gaussian
/// scores of standard deviation `sigma`: `erfcinv(2k / (n_voxels · n_rotations)) · √2 · σ`.
///
/// Errors: `k` not finite and positive, `n_voxels` or `n_rotations` zero, `sigma` negative or
/// not finite, or `2k` not below `n_voxels · n_rotations` (the threshold would not be finite).
///
/// ```
/// use monomorph_core::algo::peaks::false_alarm_threshold;
/// let t = false_alarm_threshold(1.0, 100 * 100 * 100, 1000, 0.05)?;
/// // scipy: erfcinv(2e-9) = 4.24109001256018
/// assert!((t - 0.05 * 2f64.sqrt() * 4.24109001256018).abs() < 1e-12);
/// # Ok::<(), monomorph_core::Error>(())
/// ```
pub fn false_alarm_threshold(
    k: f64,
    n_voxels: usize,
    n_rotations: usize,
    sigma: f64,
) -> Result<f64> {
    if !(k.is_finite() && k > 0.0) {
        return Err(Error::invalid(
            "k",
            format!("expected a finite number of false positives > 0, got {k}"),
        ));
    }
    if n_voxels == 0 || n_rotations == 0 {
        return Err(Error::invalid(
            "n_voxels, n_rotations",
            format!("expected both > 0, got {n_voxels} and {n_rotations}"),
        ));
    }
    if !(sigma.is_finite() && sigma >= 0.0) {
        return Err(Error::invalid(
            "sigma",
            format!("expected a finite value >= 0, got {sigma}"),
        ));
    }
    let trials = n_voxels as f64 * n_rotations as f64;
    let y = 2.0 * k / trials;
    if y >= 2.0 {
        return Err(Error::invalid(
            "k",
            format!(
                "2k = {} must be below n_voxels · n_rotations = {trials}",
                2.0 * k
            ),
        ));
    }
    Ok(erfcinv(y) * std::f64::consts::SQRT_2 * sigma)
}

/// The number of voxels of a map of `shape` at least `border[k]` voxels from both ends of every
/// axis `k` (pytme's `np.size(scores[mbd:-mbd, …])`); 0 when a border leaves nothing. `border`
/// has one entry per axis (missing entries count as 0).
pub fn voxels_inside_border(shape: &[usize], border: &[usize]) -> usize {
    shape
        .iter()
        .enumerate()
        .map(|(k, &s)| s.saturating_sub(border.get(k).copied().unwrap_or(0).saturating_mul(2)))
        .fold(1usize, |a, n| a.saturating_mul(n))
}

/// pytme 0.3.6's `postprocess --n-false-positives k` threshold from a matching run's statistics
/// (`tme/scripts/postprocess.py` and `matching_utils.minimum_score_from_fp`):
/// `σ = √ssum` with `ssum` rounded to `f32` and the square root taken in `f32` (postprocess
/// stores the variance as `np.float32` and takes `np.sqrt` of it), then
/// [`false_alarm_threshold`]`(k, n_voxels, n_rotations, σ)`, where `ssum` is the matching's
/// `Σ score² / (voxels · rotations)` (see `MatchResult::ssum`), `n_voxels` the voxels inside the
/// peak-calling border ([`voxels_inside_border`]) and `n_rotations` the number of rotations
/// searched. Errors: those of [`false_alarm_threshold`], and `ssum` negative or not finite.
pub fn pytme_false_alarm_threshold(
    k: f64,
    ssum: f64,
    n_voxels: usize,
    n_rotations: usize,
) -> Result<f64> {
    if !(ssum.is_finite() && ssum >= 0.0) {
        return Err(Error::invalid(
            "ssum",
            format!("expected a finite mean squared score >= 0, got {ssum}"),
        ));
    }
    let sigma = (ssum as f32).sqrt() as f64;
    false_alarm_threshold(k, n_voxels, n_rotations, sigma)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfcinv_matches_scipy() {
        // (y, scipy.special.erfcinv(y))
        let cases = [
            (1e-300, 26.209469960516124),
            (1e-100, 15.065574702592647),
            (1e-20, 6.601580622355143),
            (1e-10, 4.572824967389486),
            (1e-05, 3.1234132743408756),
            (0.01, 1.8213863677184499),
            (0.1, 1.1630871536766743),
            (0.5, 0.4769362762044699),
            (0.9, 0.08885599049425769),
            (1.0, 0.0),
            (1.3, -0.27246271472675443),
            (1.9, -1.1630871536766738),
            (1.99999, -3.1234132743398733),
            (1.999999999999, -5.042021094113473),
        ];
        for (y, want) in cases {
            let want: f64 = want;
            let got = erfcinv(y);
            let tol = 1e-14 * want.abs().max(1e-2);
            assert!(
                (got - want).abs() <= tol,
                "erfcinv({y}) = {got}, want {want}"
            );
        }
        assert_eq!(erfcinv(0.0), f64::INFINITY);
        assert_eq!(erfcinv(2.0), f64::NEG_INFINITY);
        assert!(erfcinv(-0.1).is_nan() && erfcinv(2.1).is_nan() && erfcinv(f64::NAN).is_nan());
    }

    #[test]
    fn erfc_known_values() {
        // scipy.special.erfc
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.4795001221869535),
            (1.0, 0.15729920705028513),
            (2.0, 0.004677734981047266),
            (5.0, 1.5374597944280347e-12),
            (-1.0, 1.8427007929497148),
        ] {
            let got = erfc(x);
            assert!(
                (got - want).abs() <= 2e-15 * want,
                "erfc({x}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn pytme_rule_matches_postprocess() {
        // tests/fixtures/orientation/cube24: pytme 0.3.6 postprocess logged
        // "Determined cutoff --min-score 0.26362378697064776" for ssum (float32) 0.0031399…,
        // 32³ voxels, 24 rotations, 1 false positive.
        let case = [
            (
                0.0031399030704051256_f64,
                32 * 32 * 32,
                24,
                0.26362378697064776_f64,
            ),
            (0.003037890652194619, 32 * 32 * 32, 216, 0.283010474753463),
        ];
        for (ssum, n, r, want) in case {
            let got = pytme_false_alarm_threshold(1.0, ssum, n, r).unwrap();
            assert!(
                (got - want).abs() <= 4.0 * f64::EPSILON * want,
                "{got} vs {want}"
            );
        }
        assert!(pytme_false_alarm_threshold(1.0, f64::NAN, 10, 10).is_err());
        assert!(pytme_false_alarm_threshold(1.0, -1.0, 10, 10).is_err());
        assert_eq!(voxels_inside_border(&[32, 32, 32], &[0, 0, 0]), 32768);
        assert_eq!(voxels_inside_border(&[32, 20], &[5, 5]), 22 * 10);
        assert_eq!(voxels_inside_border(&[32, 20], &[5, 10]), 0);
        assert_eq!(voxels_inside_border(&[32], &[usize::MAX]), 0);
    }

    #[test]
    fn false_alarm_threshold_checks_arguments() {
        assert!(false_alarm_threshold(0.0, 10, 10, 1.0).is_err());
        assert!(false_alarm_threshold(1.0, 0, 10, 1.0).is_err());
        assert!(false_alarm_threshold(1.0, 10, 10, -1.0).is_err());
        assert!(false_alarm_threshold(100.0, 10, 10, 1.0).is_err());
        let t = false_alarm_threshold(50.0, 10, 10, 2.0).unwrap();
        assert!(t.abs() < 1e-15, "k = half the trials is the median: {t}");
    }
}
