//! pytom-match-pick 0.14's ROC estimate (`pytom_estimate_roc.py`,
//! `pytom_tm.plotting.plist_quality_gaussian_fit`) from the scores of an extraction with cut 0:
//!
//! 1. the histogram of the extracted scores in `bins` equal bins (numpy's, in the scores'
//!    precision), `x` the bin centres, `h` the bin width;
//! 2. the noise Gaussian fixed by the **whole** score map: mean `μ₀`, standard deviation `σ₀`,
//!    amplitude `A₀ = size / (σ₀ √(2π)) · h`;
//! 3. `G(x; μ₀, σ₁, A₀) + G(x; μ₂, σ₂, A₂)` fitted to bins 1.. by the Trust Region Reflective
//!    method ([`crate::algo::fit::least_squares_bounded`], at most 2000 evaluations) from
//!    `(σ₀, x[k], 0.1, y[k])`, `k` the expected particle peak (default `bins // 2`), within
//!    `σ₁ ∈ [σ₀, 1.5 σ₀]`, `μ₂ ∈ [x[⌊bins/4⌋], x[-1]]`, `σ₂ ∈ [0, 0.1]`, `A₂ ∈ [0, y[1]]`;
//! 4. the estimated particles `P = A₂ |σ₂| √(2π) / h`; 50 thresholds `t` from `x[-1]` down to
//!    `x[0]`, `δ = h / ((x[-1] − x[0]) / 50)`; `TP(t) = (1 − Φ((t − μ₂)/σ₂)) · P`, `FP`
//!    accumulating `G(t; μ₀, σ₁, A₀) / δ`; recall `TP / P`, FDR `FP / (TP + FP)`;
//! 5. the threshold maximising `recall · (1 − FDR)` (the first, pytom's "RUC").
//!
//! Quantities pytom keeps in float32 (edges, centres, `h`, the thresholds, `σ₀`, `1.5 σ₀`)
//! are kept in the scores' precision here too. An infeasible start (`y[k] > y[1]`), empty
//! bounds (`y[1] = 0`) or a fit that does not converge are errors: pytom prints a traceback
//! and draws no ROC.

use super::histogram::{centres, histogram};
use super::stats::erfc;
use crate::algo::fit::least_squares_bounded;
use crate::dtype::Float;
use crate::error::{Error, Result};

/// The ROC settings (`--bins`, `--gaussian-peak`).
#[derive(Debug, Clone, PartialEq)]
pub struct RocParams {
    /// Histogram bins (pytom's default 20); at least 5.
    pub bins: usize,
    /// The histogram bin where the particle Gaussian is expected (default `bins // 2`).
    pub peak_index: Option<usize>,
}

impl Default for RocParams {
    fn default() -> Self {
        RocParams {
            bins: 20,
            peak_index: None,
        }
    }
}

/// A Gaussian `amplitude · exp(−(x − mean)² / 2 std²)` (amplitude in histogram counts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gaussian {
    /// Peak height in counts per bin.
    pub amplitude: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
}

impl Gaussian {
    /// Its value at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.amplitude * (-((x - self.mean) * (x - self.mean)) / (2.0 * self.std * self.std)).exp()
    }
}

/// One threshold of the scan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RocPoint {
    /// The score threshold.
    pub threshold: f64,
    /// Estimated recall above it.
    pub recall: f64,
    /// Estimated false discovery rate above it.
    pub fdr: f64,
}

/// The ROC estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Roc {
    /// The threshold maximising recall · (1 − FDR).
    pub threshold: f64,
    /// Its index in [`Roc::curve`] (0 = the highest threshold).
    pub index: usize,
    /// Estimated true particles in the extraction, `P`.
    pub n_particles: f64,
    /// Particles the threshold selects, `(1 − Φ) · P`.
    pub n_selected: f64,
    /// The noise Gaussian: `A₀`, `μ₀` fixed by the map, `σ₁` fitted.
    pub noise: Gaussian,
    /// The particle Gaussian `(A₂, μ₂, σ₂)`.
    pub particles: Gaussian,
    /// Recall at the threshold.
    pub recall: f64,
    /// FDR at the threshold.
    pub fdr: f64,
    /// recall · (1 − FDR) at the threshold.
    pub ruc: f64,
    /// The scan, highest threshold first.
    pub curve: Vec<RocPoint>,
    /// The histogram counts.
    pub counts: Vec<usize>,
    /// Its `bins + 1` edges.
    pub edges: Vec<f64>,
}

fn erf(x: f64) -> f64 {
    1.0 - erfc(x)
}

/// pytom's ROC estimate (module docs) from the extracted scores `lcc` (any order) and the
/// whole score map's mean, standard deviation and number of voxels.
pub fn estimate_roc<T: Float>(
    lcc: &[T],
    map_mean: f64,
    map_std: f64,
    map_size: usize,
    p: &RocParams,
) -> Result<Roc> {
    let bins = p.bins;
    if bins < 5 {
        return Err(Error::invalid(
            "bins",
            format!("{bins} bins: the two-Gaussian fit of 4 parameters needs at least 5"),
        ));
    }
    let k = p.peak_index.unwrap_or(bins / 2);
    if k >= bins {
        return Err(Error::invalid(
            "peak_index",
            format!("{k} is not a bin of {bins}"),
        ));
    }
    if !(map_std.is_finite() && map_std > 0.0 && map_mean.is_finite()) {
        return Err(Error::invalid(
            "scores",
            format!(
                "the score map has mean {map_mean} and standard deviation {map_std}: no noise Gaussian"
            ),
        ));
    }
    let too_flat = |why: String| Error::invalid("scores", why);
    if lcc.iter().filter(|v| v.is_finite()).count() < 2 {
        return Err(too_flat(format!(
            "{} extracted score(s): the ROC histogram needs more particles (--num-peaks)",
            lcc.len()
        )));
    }
    let (counts, edges) = histogram(lcc, bins).expect("finite scores");
    let xt: Vec<T> = centres(&edges);
    let x: Vec<f64> = xt.iter().map(|v| v.as_f64()).collect();
    let y: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
    let h_t = edges[1] - edges[0];
    let h = h_t.as_f64();
    let s0_t = T::from_f64(map_std);
    let s0 = s0_t.as_f64();
    let m0_t = T::from_f64(map_mean);
    let m0 = m0_t.as_f64();
    let a0 = map_size as f64 / (s0 * (2.0 * std::f64::consts::PI).sqrt()) * h;
    let p0 = [s0, x[k], 0.1, y[k]];
    let lb = [s0, x[bins / 4], 0.0, 0.0];
    let ub = [(s0_t * T::from_f64(1.5)).as_f64(), x[bins - 1], 0.1, y[1]];
    let g =
        |x: f64, mu: f64, sd: f64, amp: f64| amp * (-((x - mu) * (x - mu)) / (2.0 * sd * sd)).exp();
    let xs = &x[1..];
    let ys = &y[1..];
    let fit = least_squares_bounded(
        |q, out| {
            for i in 0..xs.len() {
                out[i] = g(xs[i], m0, q[0], a0) + g(xs[i], q[1], q[2], q[3]) - ys[i];
            }
        },
        &p0,
        &lb,
        &ub,
        xs.len(),
        Some(2000),
    )
    .map_err(|e| {
        too_flat(format!(
            "the score histogram cannot be fitted with two Gaussians ({e}; start {p0:?}, bounds \
             {lb:?} .. {ub:?}): too few or too flat a particle population; pytom stops here \
             too. Try another --num-peaks or --bins"
        ))
    })?;
    let q = fit.x;
    let (s1, mu2, s2, a2) = (q[0], q[1], q[2], q[3]);
    let total = a2 * s2.abs() * (2.0 * std::f64::consts::PI).sqrt() / h;
    let steps = 50;
    let (x_first, x_last) = (xt[0], xt[bins - 1]);
    let delta_t = x_last - x_first;
    let step_t = delta_t / T::from_f64((steps - 1) as f64);
    let mut grid: Vec<T> = (0..steps)
        .map(|i| T::from_f64(i as f64) * step_t + x_first)
        .collect();
    grid[steps - 1] = x_last;
    grid.reverse();
    let roc_step = delta_t / T::from_f64(steps as f64);
    let delta = (h_t / roc_step).as_f64();
    let cdf = |t: f64| 0.5 * (1.0 + erf((t - mu2) / (std::f64::consts::SQRT_2 * s2)));
    let mut fp = 0.0;
    let mut curve = Vec::with_capacity(steps);
    for &t in &grid {
        let tp = (1.0 - cdf(t.as_f64())) * total;
        let d = (t - m0_t).as_f64();
        fp += a0 * (-(d * d) / (2.0 * s1 * s1)).exp() / delta;
        curve.push(RocPoint {
            threshold: t.as_f64(),
            recall: tp / total,
            fdr: fp / (tp + fp),
        });
    }
    let rect: Vec<f64> = curve.iter().map(|c| c.recall * (1.0 - c.fdr)).collect();
    let mut best = 0;
    for (i, &r) in rect.iter().enumerate() {
        if r > rect[best] || rect[best].is_nan() && !r.is_nan() {
            best = i;
        }
    }
    let c = curve[best];
    if !(c.threshold.is_finite() && total.is_finite() && rect[best].is_finite()) {
        return Err(too_flat(format!(
            "the two-Gaussian fit gives no usable ROC (particle Gaussian amplitude {a2}, mean \
             {mu2}, sigma {s2})"
        )));
    }
    Ok(Roc {
        threshold: c.threshold,
        index: best,
        n_particles: total,
        n_selected: (1.0 - cdf(c.threshold)) * total,
        noise: Gaussian {
            amplitude: a0,
            mean: m0,
            std: s1,
        },
        particles: Gaussian {
            amplitude: a2,
            mean: mu2,
            std: s2,
        },
        recall: c.recall,
        fdr: c.fdr,
        ruc: rect[best],
        curve,
        counts,
        edges: edges.iter().map(|e| e.as_f64()).collect(),
    })
}
