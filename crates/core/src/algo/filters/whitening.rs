//! Spectral whitening as pytme 0.3.6 estimates it (`filters/whitening.py`, `curve.py`): the
//! mean log periodogram of Hann-windowed target patches, averaged over frequency shells
//! (weighted by the sampled wedge for a tomogram), smoothed by scipy's
//! `make_smoothing_spline` (GCV lambda), turned into `1/sqrt(power)`, and evaluated on any box
//! with PCHIP (`Curve`).
//!
//! The patch spectra are computed with the backend's own `rfft` (so this runs on CUDA too);
//! everything else is small host work.

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;

use super::grid::{axis_freq, int_freq, norm_at};
use super::npy_rng::choose_sorted;
use super::spline::{Pchip, natural_spline_eval, smoothing_spline_gcv};
use super::wedge::{ContinuousWedge, step_wedge};
use crate::backend::{Backend, ComplexOf, FftPlan, FloatOf};
use crate::dtype::Real;
use crate::error::{Error, Result};

const EULER_GAMMA: f64 = 0.5772156649015329;

/// pytme's patch edge and patch budget (`match_template.py::setup_filter` and
/// `estimate_radial_noise_spectrum`): `P = min(max(64, 2^ceil(log2 max template)), 256,
/// min target)`, even, at least 8; `max_patches = clip(round(1024 · 64³ / P³), 64, 1024)`.
pub fn patch_parameters(
    template_shape: &[usize],
    target_shape: &[usize],
) -> Result<(usize, usize)> {
    let tmax = template_shape.iter().copied().max().unwrap_or(1).max(1);
    let mut p = 64usize.max(tmax.next_power_of_two());
    let tmin = target_shape.iter().copied().min().unwrap_or(0);
    p = p.min(256).min(tmin);
    let ratio = 1024.0 * 64f64.powi(3) / (p as f64).powi(3);
    let max_patches = round_half_even(ratio).clamp(64.0, 1024.0) as usize;
    p -= p % 2;
    if p < 8 {
        return Err(Error::invalid(
            "whiten-spectrum",
            format!("the target is too small to estimate a spectrum (patch edge {p} < 8)"),
        ));
    }
    Ok((p, max_patches))
}

fn round_half_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - v.signum()
    } else {
        r
    }
}

fn window_starts(n: usize, length: usize, step: usize) -> Vec<usize> {
    let mut s: Vec<usize> = (0..=n - length).step_by(step).collect();
    if *s.last().expect("length <= n") != n - length {
        s.push(n - length);
    }
    s
}

/// numpy's `np.quantile` (linear) of `v`, with numpy's two-sided lerp.
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = (s.len() - 1) as f64 * q;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(s.len() - 1);
    let t = pos - lo as f64;
    let (a, b) = (s[lo], s[hi]);
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// Where the whitening's tilt geometry comes from (pytme frame axes).
#[derive(Clone, Debug)]
pub struct ShellWeighting<'a> {
    /// Tilt angles (degrees): two for a continuous wedge, more for a tilt series.
    pub angles: &'a [f64],
    /// Opening axis (pytme frame).
    pub opening: usize,
    /// Tilt axis (pytme frame).
    pub tilt: usize,
}

/// The whitening profile (`estimate_radial_noise_spectrum`): `P/2 + 1` values over 0 ..
/// Nyquist, `w[0] = 0`, max 1, float32-rounded.
///
/// `target` is the target as read (array frame); `perm[a]` is the array axis of pytme axis `a`
/// (identity, or reversed for (z, y, x) arrays), so that the patches, the half grid of the
/// shell average and the float32 `|k|` are pytme's.
pub fn whitening_profile<B: Backend>(
    b: &B,
    target: &crate::backend::Arr<B, FloatOf<B>>,
    template_shape: &[usize],
    perm: &[usize],
    wedge: Option<ShellWeighting<'_>>,
) -> Result<Vec<f64>> {
    use crate::backend::ArrayMeta;
    let shape = target.shape().to_vec();
    let d = shape.len();
    let (p, max_patches) = patch_parameters(template_shape, &shape)?;
    let mean_log = mean_log_periodogram(b, target, &shape, perm, p, max_patches)?;
    let pshape_full = vec![p; d];
    // the wedge weight on the P box in pytme's frame (binary; /max is a no-op)
    let weight_full: Option<Box<dyn Fn(&[i64]) -> f64>> = match wedge {
        None => None,
        Some(w) if w.angles.len() == 2 => {
            let cw =
                ContinuousWedge::new((w.angles[0], w.angles[1]), &pshape_full, w.opening, w.tilt);
            let ps = pshape_full.clone();
            Some(Box::new(
                move |u: &[i64]| if cw.keeps(u, &ps) { 1.0 } else { 0.0 },
            ))
        }
        Some(w) => {
            let angles: Vec<f64> = w.angles.iter().map(|&a| a as f32 as f64).collect();
            let full = step_wedge(&pshape_full, &angles, w.opening, w.tilt, false)?;
            let ps = pshape_full.clone();
            Some(Box::new(move |u: &[i64]| {
                let idx: Vec<usize> = u
                    .iter()
                    .zip(&ps)
                    .map(|(&ui, &n)| ui.rem_euclid(n as i64) as usize)
                    .collect();
                full[IxDyn(&idx)]
            }))
        }
    };
    // shells over pytme's half grid (pytme's last axis halved)
    let nb = p / 2 + 1;
    let spc = 2 * (nb - 1);
    let mut wsum = vec![0f64; nb];
    let mut wlog = vec![0f64; nb];
    let mut hshape = pshape_full.clone();
    hshape[d - 1] = nb;
    let total: usize = hshape.iter().product();
    let mut up = vec![0i64; d];
    let mut ua = vec![0i64; d];
    let mut fq = vec![0f32; d];
    let mut aidx = vec![0usize; d];
    for lin in 0..total {
        let mut rem = lin;
        for a in (0..d).rev() {
            let i = rem % hshape[a];
            rem /= hshape[a];
            if a == d - 1 {
                up[a] = int_freq(i, p);
                fq[a] = (i as f64 / spc as f64) as f32;
            } else {
                up[a] = int_freq(i, p);
                fq[a] = axis_freq(up[a], p, Some(1.0));
            }
        }
        let mut acc = 0f32;
        for &v in &fq {
            acc += v * v;
        }
        let shell = ((acc.sqrt() * spc as f32) + 0.5).floor() as usize;
        if shell >= nb {
            continue;
        }
        let w = weight_full.as_ref().map_or(1.0, |f| f(&up));
        if w == 0.0 {
            continue;
        }
        // the value at this frequency from the array-frame half grid (point symmetry)
        for a in 0..d {
            ua[perm[a]] = up[a];
        }
        let last = ua[d - 1].rem_euclid(p as i64) as usize;
        let sign = if last <= p / 2 { 1 } else { -1 };
        for a in 0..d {
            aidx[a] = (sign * ua[a]).rem_euclid(p as i64) as usize;
        }
        wsum[shell] += w;
        wlog[shell] += w * mean_log[IxDyn(&aidx)];
    }
    let q: Vec<f64> = (0..nb)
        .map(|i| (i as f64 / spc as f64) as f32 as f64)
        .collect();
    let prof: Vec<f64> = (0..nb)
        .map(|i| {
            if wsum[i] == 0.0 {
                f64::NAN
            } else {
                (wlog[i] / wsum[i] + EULER_GAMMA).exp()
            }
        })
        .collect();
    Ok(profile_to_weights(&q, &prof))
}

/// Smooths the shell profile in log space and returns `1/sqrt(model)`, `w[0] = 0`, max 1,
/// float32-rounded (`_smooth_profile` and the tail of `estimate_radial_noise_spectrum`).
pub fn profile_to_weights(q: &[f64], prof: &[f64]) -> Vec<f64> {
    let good: Vec<usize> = (0..prof.len())
        .filter(|&i| prof[i].is_finite() && prof[i] > 0.0)
        .collect();
    let model: Vec<f64> = if good.is_empty() {
        prof.to_vec()
    } else {
        let x: Vec<f64> = good.iter().map(|&i| q[i]).collect();
        let y: Vec<f64> = good.iter().map(|&i| prof[i].ln()).collect();
        if good.len() < 4 {
            q.iter().map(|&qi| interp(qi, &x, &y).exp()).collect()
        } else {
            let (_lam, f, gamma) = smoothing_spline_gcv(&x, &y);
            if good.len() == prof.len() {
                f.iter().map(|v| v.exp()).collect()
            } else {
                q.iter()
                    .map(|&qi| natural_spline_eval(&x, &f, &gamma, qi).exp())
                    .collect()
            }
        }
    };
    let mut w: Vec<f64> = model
        .iter()
        .map(|&m| if m > 0.0 { 1.0 / m.sqrt() } else { 0.0 })
        .collect();
    w[0] = 0.0;
    let mx = w
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .max(1e-30);
    w.iter().map(|v| (v / mx) as f32 as f64).collect()
}

/// numpy's `np.interp` (clamped at both ends).
fn interp(xi: f64, x: &[f64], y: &[f64]) -> f64 {
    if xi <= x[0] {
        return y[0];
    }
    if xi >= x[x.len() - 1] {
        return y[y.len() - 1];
    }
    let j = x.partition_point(|&v| v <= xi) - 1;
    y[j] + (y[j + 1] - y[j]) * (xi - x[j]) / (x[j + 1] - x[j])
}

/// The mean log periodogram over the patches, on the array-frame rfft half grid of the patch.
fn mean_log_periodogram<B: Backend>(
    b: &B,
    target: &crate::backend::Arr<B, FloatOf<B>>,
    shape: &[usize],
    perm: &[usize],
    p: usize,
    max_patches: usize,
) -> Result<ArrayD<f64>> {
    let d = shape.len();
    let host = b.download(target)?;
    let step = ((p as f64 * 0.5 + 0.5) as usize).max(1);
    // Hann window, float32, multiplied in pytme's axis order
    let w1: Vec<f32> = (0..p)
        .map(|n| {
            let m = (p + 2) as f64;
            let k = (n + 1) as f64;
            (0.5 - 0.5 * (2.0 * std::f64::consts::PI * k / (m - 1.0)).cos()) as f32
        })
        .collect();
    let pshape = vec![p; d];
    let window = ArrayD::from_shape_fn(IxDyn(&pshape), |ix| {
        let mut v = 1f32;
        for &ax in perm {
            v *= w1[ix[ax]];
        }
        v as f64
    });
    let wpow: f64 = window.iter().map(|v| v * v).sum();
    // window offsets, itertools.product order over pytme's axes
    let starts: Vec<Vec<usize>> = (0..d)
        .map(|a| window_starts(shape[perm[a]], p, step))
        .collect();
    let n_all: usize = starts.iter().map(Vec::len).product();
    let chosen: Vec<usize> = if max_patches > 0 && n_all > max_patches {
        choose_sorted(42, n_all, max_patches)
    } else {
        (0..n_all).collect()
    };
    let plan = b.fft_plan(&pshape, &(0..d).collect::<Vec<_>>())?;
    let mut spec = b.zeros::<ComplexOf<B>>(plan.complex_shape())?;
    let hshape = plan.complex_shape().to_vec();
    let mut logs: Vec<ArrayD<f64>> = Vec::with_capacity(chosen.len());
    let mut vars = Vec::with_capacity(chosen.len());
    for &c in &chosen {
        let mut rem = c;
        let mut off = vec![0usize; d];
        for a in (0..d).rev() {
            let k = rem % starts[a].len();
            rem /= starts[a].len();
            off[perm[a]] = starts[a][k];
        }
        let patch = host
            .slice_each_axis(|ax| {
                let o = off[ax.axis.index()];
                ndarray::Slice::from(o..o + p)
            })
            .mapv(|v| v.as_f64());
        let n = patch.len() as f64;
        let mean = patch.sum() / n;
        let centred = patch.mapv(|v| v - mean);
        vars.push(centred.iter().map(|v| v * v).sum::<f64>() / n);
        let windowed = (&centred * &window).mapv(<FloatOf<B> as Real>::from_f64);
        let dev = b.upload(windowed.view())?;
        b.rfft(&plan, &dev, &mut spec)?;
        let ft: ArrayD<Complex<FloatOf<B>>> = b.download(&spec)?;
        logs.push(ft.mapv(|z| {
            let (re, im) = (z.re.as_f64(), z.im.as_f64());
            ((re * re + im * im) / wpow).max(1e-12).ln()
        }));
    }
    let keep: Vec<bool> = if logs.len() >= 10 {
        let thr = quantile(&vars, 0.9);
        vars.iter().map(|&v| v <= thr).collect()
    } else {
        vec![true; logs.len()]
    };
    let kept = keep.iter().filter(|&&k| k).count();
    let mut mean = ArrayD::<f64>::zeros(IxDyn(&hshape));
    for (l, &k) in logs.iter().zip(&keep) {
        if k {
            mean += l;
        }
    }
    mean.mapv_inplace(|v| v / kept as f64);
    Ok(mean)
}

/// pytme's `Curve`: `spectrum[i]` sits at `i / (len - 1)` of Nyquist; the weight at integer
/// frequency `u` of `shape` is PCHIP at `|k|` on the `q = 0.5` grid (`u / int(n/2)`), 0 beyond
/// Nyquist, negative values clipped to 0.
#[derive(Clone, Debug)]
pub struct Curve {
    pchip: Pchip,
}

impl Curve {
    /// The curve through `spectrum`.
    pub fn new(spectrum: &[f64]) -> Self {
        let m = spectrum.len();
        let x: Vec<f64> = (0..m)
            .map(|i| (i as f64 / (m - 1) as f64) as f32 as f64)
            .collect();
        Curve {
            pchip: Pchip::new(&x, spectrum),
        }
    }

    /// The weight at integer frequency `u` of a box of `shape`.
    pub fn at(&self, u: &[i64], shape: &[usize]) -> f64 {
        let k = norm_at(u, shape, Some(0.5)) as f64;
        let v = self.pchip.eval(k);
        if v.is_nan() { 0.0 } else { v.max(0.0) }
    }
}
