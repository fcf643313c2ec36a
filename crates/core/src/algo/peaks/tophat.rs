//! pytom-match-pick 0.14's top-hat peak mask (`pytom_tm.extract.predict_tophat_mask`), the
//! second threshold of its `--tophat-filter`:
//!
//! 1. −∞ (and NaN) → 0; only the other voxels enter the histogram;
//! 2. `T = scipy.ndimage.white_tophat(scores, structure=generate_binary_structure(3, c))`;
//! 3. the histogram of `T` in `bins` equal bins (numpy's, [`super::histogram`]); `x` the bin
//!    centres; the first two bins dropped;
//! 4. `L = log(counts)` (log 0 → 0), `D = gradient(gradient(L))[2:]`;
//! 5. `s = sign(D[1:] · D[:-1])`, zeros replaced by the next, then the previous value; the fit
//!    range is the first `k + 3` points, `k` the first index with `D[k] < 0` and `s[k] = −1`
//!    (0 if none);
//! 6. a Gaussian `a · exp(−(x − μ)² / 2σ²)` fitted to the counts (Levenberg–Marquardt from
//!    `(max count, 0, std of the map)`), then its log fitted to the log counts from there;
//! 7. `cut = erfcinv(2K / (a / (σ√(2π)))) · √2 · σ + μ`; the mask is `T > cut`.
//!
//! # The top-hat with a *structure*
//! scipy's grey morphology given `structure=` (not `footprint=`) uses a full `3×3×3` box whose
//! values are the structure's, 1 on the connectivity neighbourhood and 0 elsewhere: erosion is
//! `min over the box of (s − structure)`, dilation `max of (e + structure)`, reflect border.
//! As `v ↦ v − 1` rounds monotonically, `min(v − 1) = min(v) − 1` exactly, so erosion is
//! `min(min_cross(s) − 1, min_rest(s))` and dilation `max(max_cross(e) + 1, max_rest(e))`:
//! four flat [`Filter::max_filter_footprint`] passes, bit-identical to scipy in `f32`.

use super::histogram::{centres, histogram};
use super::stats::erfcinv;
use crate::algo::fit::leastsq;
use crate::backend::{
    Arr, ArrayMeta, BinaryOp, BorderMode, Elementwise, Filter, Memory, Reduce, UnaryOp,
};
use crate::dtype::Float;
use crate::error::{Error, Result};

/// pytom's top-hat filter settings (`--tophat-connectivity`, `--tophat-bins`,
/// `--number-of-false-positives`).
#[derive(Debug, Clone, PartialEq)]
pub struct TophatParams {
    /// Connectivity of the structure element, 1 (faces), 2 (+ edges) or 3 (the full cube).
    pub connectivity: usize,
    /// Histogram bins (pytom's default 50); at least 6.
    pub bins: usize,
    /// Expected false positives `K` of the cut (pytom's default 1).
    pub n_false_positives: f64,
}

impl Default for TophatParams {
    fn default() -> Self {
        TophatParams {
            connectivity: 1,
            bins: 50,
            n_false_positives: 1.0,
        }
    }
}

/// What the top-hat step found.
#[derive(Debug, Clone, PartialEq)]
pub struct TophatFit {
    /// The cut on the top-hat transform: voxels with `T > cut_off` are kept.
    pub cut_off: f64,
    /// The histogram of `T`: counts and edges.
    pub counts: Vec<usize>,
    /// Its `bins + 1` edges.
    pub edges: Vec<f64>,
    /// Points fitted (from the third bin on).
    pub n_fit_points: usize,
    /// The first fit, `(a, μ, σ)` on the counts.
    pub gauss: [f64; 3],
    /// The second fit, `(a, μ, σ)` on the log counts: the one the cut uses.
    pub log_gauss: [f64; 3],
    /// Voxels in the mask.
    pub mask_voxels: usize,
}

/// The offsets of `generate_binary_structure(3, connectivity)` (true) and the rest of the
/// `3×3×3` box (false), as two flat footprints.
fn split_structure(connectivity: usize) -> (Vec<bool>, Vec<bool>) {
    let mut cross = Vec::with_capacity(27);
    for z in 0..3i32 {
        for y in 0..3i32 {
            for x in 0..3i32 {
                let d = (z - 1).abs() + (y - 1).abs() + (x - 1).abs();
                cross.push(d as usize <= connectivity);
            }
        }
    }
    let rest = cross.iter().map(|c| !c).collect();
    (cross, rest)
}

/// `scipy.ndimage.white_tophat(src, structure=generate_binary_structure(3, connectivity))`
/// of a 3-D map (module docs): `src − dilation(erosion(src))`, reflect border. NaN and ±∞
/// are the caller's to remove.
pub fn white_tophat<B, T>(b: &B, src: &Arr<B, T>, connectivity: usize) -> Result<Arr<B, T>>
where
    B: Memory + Elementwise + Filter,
    T: Float,
{
    if src.shape().len() != 3 {
        return Err(Error::invalid(
            "scores",
            format!("the top-hat needs a 3-D map, got {}-D", src.shape().len()),
        ));
    }
    if !(1..=3).contains(&connectivity) {
        return Err(Error::invalid(
            "connectivity",
            format!("expected 1, 2 or 3, got {connectivity}"),
        ));
    }
    let shape = src.shape().to_vec();
    let (cross, rest) = split_structure(connectivity);
    let fp = [3usize, 3, 3];
    let mode = BorderMode::Reflect;
    let has_rest = rest.iter().any(|&r| r);
    // erosion: e = min(min_cross(s) − 1, min_rest(s)) = −max(max_cross(−s) + 1, max_rest(−s))
    let mut neg = b.duplicate(src)?;
    b.unary_assign(UnaryOp::Neg, &mut neg)?;
    let mut e = b.zeros::<T>(&shape)?;
    b.max_filter_footprint(&neg, &cross, &fp, mode, &mut e)?;
    b.scalar_assign(BinaryOp::Add, &mut e, 1.0)?;
    let mut tmp = b.zeros::<T>(&shape)?;
    if has_rest {
        b.max_filter_footprint(&neg, &rest, &fp, mode, &mut tmp)?;
        b.binary_assign(BinaryOp::Max, &mut e, &tmp)?;
    }
    b.unary_assign(UnaryOp::Neg, &mut e)?;
    // dilation: d = max(max_cross(e) + 1, max_rest(e)) (the structure is symmetric)
    let mut d = neg; // reuse the buffer
    b.max_filter_footprint(&e, &cross, &fp, mode, &mut d)?;
    b.scalar_assign(BinaryOp::Add, &mut d, 1.0)?;
    if has_rest {
        b.max_filter_footprint(&e, &rest, &fp, mode, &mut tmp)?;
        b.binary_assign(BinaryOp::Max, &mut d, &tmp)?;
    }
    let mut out = b.zeros::<T>(&shape)?;
    b.binary(BinaryOp::Sub, src, &d, &mut out)?;
    Ok(out)
}

/// numpy's `gradient` of a 1-D array with unit spacing (first-order edges); needs 2 values.
fn gradient(f: &[f64]) -> Vec<f64> {
    let n = f.len();
    (0..n)
        .map(|i| {
            if i == 0 {
                f[1] - f[0]
            } else if i == n - 1 {
                f[n - 1] - f[n - 2]
            } else {
                (f[i + 1] - f[i - 1]) / 2.0
            }
        })
        .collect()
}

/// Steps 3–7 of the module docs on a histogram of the top-hat transform (`counts` and the bin
/// `centres`, one per bin): the cut, the points fitted and both fits. `map_std` is the
/// standard deviation of the score map (the fit's starting σ). An error names
/// what made the histogram unusable (too few bins, an empty bin in the fit range, a fit that
/// does not converge or gives no finite cut): pytom stops with a traceback there.
pub fn tophat_cut(
    counts: &[usize],
    centres: &[f64],
    map_std: f64,
    n_false_positives: f64,
) -> Result<(f64, usize, [f64; 3], [f64; 3])> {
    let bins = counts.len();
    let flat = |why: String| Error::invalid("tophat_bins", why);
    if bins < 6 || centres.len() != bins {
        return Err(flat(format!(
            "{bins} bins: the top-hat histogram needs at least 6"
        )));
    }
    let x: Vec<f64> = centres[2..].to_vec();
    let y: Vec<f64> = counts[2..].iter().map(|&c| c as f64).collect();
    let ylog: Vec<f64> = y
        .iter()
        .map(|&c| if c > 0.0 { c.ln() } else { 0.0 })
        .collect();
    let d2: Vec<f64> = gradient(&gradient(&ylog))[2..].to_vec();
    let nm = d2.len() - 1;
    let mut sign: Vec<f64> = (0..nm)
        .map(|i| {
            let p = d2[i + 1] * d2[i];
            if p > 0.0 {
                1.0
            } else if p < 0.0 {
                -1.0
            } else {
                0.0
            }
        })
        .collect();
    let rolled: Vec<f64> = (0..nm).map(|i| sign[(i + 1) % nm]).collect();
    for i in 0..nm {
        if sign[i] == 0.0 {
            sign[i] = rolled[i];
        }
    }
    let rolled: Vec<f64> = (0..nm).map(|i| sign[(i + nm - 1) % nm]).collect();
    for i in 0..nm {
        if sign[i] == 0.0 {
            sign[i] = rolled[i];
        }
    }
    let k = (0..nm)
        .find(|&i| d2[i] < 0.0 && sign[i] == -1.0)
        .unwrap_or(0);
    let n_fit = (k + 3).min(x.len());
    let (xf, yf) = (&x[..n_fit], &y[..n_fit]);
    if let Some(i) = yf.iter().position(|&c| c == 0.0) {
        return Err(flat(format!(
            "the top-hat histogram is too flat to fit: bin {} of the fit range (the first {n_fit} \
             bins after the two dropped) is empty (log 0); try fewer --tophat-bins",
            i + 3
        )));
    }
    let ymax = counts.iter().copied().max().unwrap_or(0) as f64;
    let g = |x: f64, p: &[f64]| p[0] * (-((x - p[1]) * (x - p[1])) / (2.0 * p[2] * p[2])).exp();
    let failed = |what: &str, e: String| {
        flat(format!(
            "the top-hat histogram is too flat to fit: the {what} fit failed ({e}); pytom stops \
             here too"
        ))
    };
    let c1 = leastsq(
        |p, out| {
            for i in 0..n_fit {
                out[i] = g(xf[i], p) - yf[i];
            }
        },
        &[ymax, 0.0, map_std],
        n_fit,
    )
    .map_err(|e| failed("Gaussian", e.to_string()))?
    .x;
    let ly: Vec<f64> = yf.iter().map(|c| c.ln()).collect();
    let c2 = leastsq(
        |p, out| {
            for i in 0..n_fit {
                out[i] = g(xf[i], p).ln() - ly[i];
            }
        },
        &c1,
        n_fit,
    )
    .map_err(|e| failed("log-Gaussian", e.to_string()))?
    .x;
    let space = c2[0] / (c2[2] * (2.0 * std::f64::consts::PI).sqrt());
    let cut = erfcinv(2.0 * n_false_positives / space) * std::f64::consts::SQRT_2 * c2[2] + c2[1];
    if !cut.is_finite() || !(space > 2.0 * n_false_positives) {
        return Err(flat(format!(
            "the top-hat histogram fit gives no cut (amplitude {}, mean {}, sigma {}: {space} \
             background voxels for {n_false_positives} false positive(s))",
            c2[0], c2[1], c2[2]
        )));
    }
    Ok((cut, n_fit, [c1[0], c1[1], c1[2]], [c2[0], c2[1], c2[2]]))
}

/// pytom's top-hat mask of a 3-D score map (module docs) as a 0/1 device map, with the fit.
pub fn tophat_mask<B, T>(
    b: &B,
    scores: &Arr<B, T>,
    p: &TophatParams,
) -> Result<(Arr<B, T>, TophatFit)>
where
    B: Memory + Elementwise + Reduce + Filter,
    T: Float,
{
    if !(p.n_false_positives.is_finite() && p.n_false_positives > 0.0) {
        return Err(Error::invalid(
            "n_false_positives",
            format!("expected a number > 0, got {}", p.n_false_positives),
        ));
    }
    // −∞ (not searched) and NaN → 0, kept out of the histogram
    let host = b.download(scores)?;
    let searched: Vec<bool> = host.iter().map(|v| v.is_finite()).collect();
    let all = searched.iter().all(|&s| s);
    let src = if all {
        b.duplicate(scores)?
    } else {
        b.upload_owned(host.mapv(|v| if v.is_finite() { v } else { T::zero() }))?
    };
    let (_, map_std) = b.mean_std(&src)?;
    let map_std = T::from_f64(crate::dtype::Real::as_f64(map_std)).as_f64();
    let t = white_tophat(b, &src, p.connectivity)?;
    let th = b.download(&t)?;
    let values: Vec<T> = th
        .iter()
        .zip(&searched)
        .filter(|(_, s)| **s)
        .map(|(v, _)| *v)
        .collect();
    let (counts, edges) = histogram(&values, p.bins).ok_or_else(|| {
        Error::invalid(
            "scores",
            "no searched (finite) score to build the top-hat histogram from",
        )
    })?;
    let edges64: Vec<f64> = edges.iter().map(|e| e.as_f64()).collect();
    // the centres as numpy computes them, in T
    let c: Vec<f64> = centres(&edges).iter().map(|v| v.as_f64()).collect();
    let (cut, n_fit, gauss, log_gauss) = tophat_cut(&counts, &c, map_std, p.n_false_positives)?;
    let mask = th.mapv(|v| {
        if v.as_f64() > cut {
            T::one()
        } else {
            T::zero()
        }
    });
    let mask_voxels = mask.iter().filter(|v| **v == T::one()).count();
    let dm = b.upload_owned(mask)?;
    Ok((
        dm,
        TophatFit {
            cut_off: cut,
            counts,
            edges: edges64,
            n_fit_points: n_fit,
            gauss,
            log_gauss,
            mask_voxels,
        },
    ))
}
