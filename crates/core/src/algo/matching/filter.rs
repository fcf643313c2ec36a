//! Applying the spectral filters ([`SpectralFilter`]) where pytme 0.3.6 applies them
//! (`matching_utils.py::setup_filter`, `matching_scores.py::_create_filter_func`).
//!
//! * The target, once per run and on the whole target (so tiles do not change it): zero-padded
//!   at the high end to its FFT grid, `irfft(rfft(f) · H_target)`, cropped back. With
//!   [`MatchParams::pad_edges`](super::MatchParams::pad_edges) the symmetrically extended target
//!   is filtered instead (as pytme filters its padded target), on the FFT grid of the extension
//!   (pytme's `fast_shape`), and the jobs read their windows from it (see [`filter_target`]).
//! * Each rotated template, on its own box (circular), before the score's normalisation:
//!   `t ← irfft(rfft(t) · H_template, s = template box)` ([`TemplateFilter`]). The mask is never
//!   filtered.
//!
//! The weights are made point-symmetric on the planes of the halved axis that a real inverse
//! FFT reads as real (DC, and Nyquist for an even length): `H'(k) = (H(k) + H(−k))/2` there
//! ([`symmetrize_half_grid`]). FFTW and pocketfft drop the imaginary part those planes get
//! from a weight that is not symmetric (pytme's gridded filters are not, notes §7.3), which is
//! the same as using `H'`; with `H'` every backend's c2r gives pytme's numbers whatever order
//! it runs its passes in.
//!
//! A weight equal to 1 everywhere (DC included) is the identity and is skipped, so such a
//! filter gives the unfiltered run bit for bit.

use ndarray::{ArrayD, IxDyn};

use crate::algo::filters::SpectralFilter;
use crate::backend::{Arr, ArrayMeta, Backend, ComplexOf, FftPlan, FloatOf, WindowExtension};
use crate::dtype::Real;
use crate::error::{Error, Result, fmt_shape};
use crate::shape::{fast_shape, rfft_shape};

type F<B> = FloatOf<B>;
type C<B> = ComplexOf<B>;

/// Checks a weight returned by a [`SpectralFilter`] for the box `shape` (`what` names it):
/// the rfft half-grid shape and finite values. Returns `None` for the identity (all ones).
pub(super) fn checked_weight(
    what: &str,
    w: Option<ArrayD<f64>>,
    shape: &[usize],
) -> Result<Option<ArrayD<f64>>> {
    let Some(w) = w else { return Ok(None) };
    let axes: Vec<usize> = (0..shape.len()).collect();
    let want = rfft_shape(shape, &axes);
    if w.shape() != want.as_slice() {
        return Err(Error::shape(
            what,
            format!(
                "the rfft half grid {} of the box {}",
                fmt_shape(&want),
                fmt_shape(shape)
            ),
            fmt_shape(w.shape()),
        ));
    }
    let bad = w.iter().filter(|v| !v.is_finite()).count();
    if bad > 0 {
        return Err(Error::NonFinite {
            what: what.into(),
            count: bad,
        });
    }
    if w.iter().all(|&v| v == 1.0) {
        return Ok(None);
    }
    Ok(Some(w))
}

/// Makes a half-grid weight point-symmetric on the planes of the last (halved) axis that a c2r
/// reads as real: `H'(k) = (H(k) + H(−k))/2` on `k_last = 0` and, for an even full length
/// `n_last`, on `k_last = n_last/2`; `−k` is taken modulo the box on the other axes. Other
/// planes are unchanged (a real half-grid weight acts as its point-symmetric extension there).
pub fn symmetrize_half_grid(w: &mut ArrayD<f64>, n_last: usize) {
    let d = w.ndim();
    if d == 0 {
        return;
    }
    let shape = w.shape().to_vec();
    let mut planes = vec![0usize];
    if n_last.is_multiple_of(2) && n_last / 2 < shape[d - 1] && n_last / 2 != 0 {
        planes.push(n_last / 2);
    }
    let orig = w.clone();
    let other: Vec<usize> = shape[..d - 1].to_vec();
    let count: usize = other.iter().product();
    let mut idx = vec![0usize; d];
    let mut mirror = vec![0usize; d];
    for &p in &planes {
        for flat in 0..count {
            let mut rem = flat;
            for k in (0..d - 1).rev() {
                idx[k] = rem % other[k];
                mirror[k] = (other[k] - idx[k]) % other[k];
                rem /= other[k];
            }
            idx[d - 1] = p;
            mirror[d - 1] = p;
            let a = orig[IxDyn(&idx)];
            let b = orig[IxDyn(&mirror)];
            w[IxDyn(&idx)] = 0.5 * (a + b);
        }
    }
}

/// Uploads a half-grid weight for a box of `shape` as complex values `H'(k) / Π shape`
/// (symmetrised, with the inverse FFT's normalisation folded in), once per run.
fn upload_weight<B: Backend>(b: &B, mut w: ArrayD<f64>, shape: &[usize]) -> Result<Arr<B, C<B>>> {
    symmetrize_half_grid(&mut w, shape[shape.len() - 1]);
    let scale = 1.0 / shape.iter().map(|&n| n as f64).product::<f64>();
    let c: ArrayD<C<B>> =
        w.mapv(|v| C::<B>::new(F::<B>::from_f64(v * scale), F::<B>::from_f64(0.0)));
    b.upload(c.view())
}

/// The template filter of a run: its plan on the template box and its weight, on the device.
pub(super) struct TemplateFilter<B: Backend> {
    plan: B::Fft,
    weight: Arr<B, C<B>>,
    /// `max |H|`: the filter scales a template's 2-norm by at most this.
    gain: f64,
}

/// The two template-box spectra [`TemplateFilter::apply`] works in (one set per job).
pub(super) struct TemplateFilterBuffers<B: Backend> {
    spec: Arr<B, C<B>>,
    prod: Arr<B, C<B>>,
}

impl<B: Backend> TemplateFilter<B> {
    /// The template filter of `filters` for a template box of `tshape`; `None` when it has none
    /// (or its weight is the identity).
    pub(super) fn new(
        b: &B,
        filters: &dyn SpectralFilter,
        tshape: &[usize],
    ) -> Result<Option<Self>> {
        let w = checked_weight("template filter", filters.template_weight(tshape)?, tshape)?;
        let Some(w) = w else { return Ok(None) };
        let gain = w.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let axes: Vec<usize> = (0..tshape.len()).collect();
        let plan = b.fft_plan(tshape, &axes)?;
        let weight = upload_weight(b, w, tshape)?;
        Ok(Some(TemplateFilter { plan, weight, gain }))
    }

    /// `max |H|` of the weight (the symmetrised weight's is no larger).
    pub(super) fn gain(&self) -> f64 {
        self.gain
    }

    /// Bytes of the weight and of one job's [`TemplateFilterBuffers`] (three template-box half
    /// spectra) for a template box of `tshape` and float size `fsize`.
    pub(super) fn bytes(tshape: &[usize], fsize: usize) -> u64 {
        let axes: Vec<usize> = (0..tshape.len()).collect();
        let n: usize = rfft_shape(tshape, &axes).iter().product();
        3 * n as u64 * 2 * fsize as u64
    }

    /// The spectra one job filters in.
    pub(super) fn buffers(&self, b: &B) -> Result<TemplateFilterBuffers<B>> {
        Ok(TemplateFilterBuffers {
            spec: b.zeros(self.plan.complex_shape())?,
            prod: b.zeros(self.plan.complex_shape())?,
        })
    }

    /// `t ← irfft(rfft(t) · H_template)` on the template box (circular), on the device.
    pub(super) fn apply(
        &self,
        b: &B,
        bufs: &mut TemplateFilterBuffers<B>,
        t: &mut Arr<B, F<B>>,
    ) -> Result<()> {
        b.rfft(&self.plan, t, &mut bufs.spec)?;
        b.complex_mul(&bufs.spec, &self.weight, &mut bufs.prod)?;
        b.irfft(&self.plan, &mut bufs.prod, t)
    }
}

/// The target as the scores read it after the target filter.
pub(super) struct FilteredTarget<B: Backend> {
    /// The filtered target, or with `pad_edges` its filtered symmetric extension.
    pub(super) target: Arr<B, F<B>>,
    /// Where the target's voxel 0 lies in `target` (`n//2` per axis for the extension, else 0):
    /// the jobs' window starts are shifted by it.
    pub(super) origin: Vec<isize>,
}

/// The shape the target filter works on: the target, or with `pad_edges` its symmetric
/// extension by `n − 1` per axis (`n//2` before, the rest after, the windows' own margins).
pub(super) fn filtered_shape(ts: &[usize], tshape: &[usize], pad_edges: bool) -> Vec<usize> {
    if pad_edges {
        ts.iter().zip(tshape).map(|(t, n)| t + n - 1).collect()
    } else {
        ts.to_vec()
    }
}

/// Peak bytes of [`filter_target`] beyond the caller's arrays (float size `fsize`): the filtered
/// array, three half spectra of its FFT grid (spectrum, weight, product) and the host's f64
/// weight.
pub(super) fn target_filter_bytes(
    ts: &[usize],
    tshape: &[usize],
    pad_edges: bool,
    fsize: usize,
) -> u64 {
    let shape = filtered_shape(ts, tshape, pad_edges);
    let fast = fast_shape(&shape);
    let axes: Vec<usize> = (0..fast.len()).collect();
    let half: u64 = rfft_shape(&fast, &axes).iter().product::<usize>() as u64;
    let real: u64 = shape.iter().product::<usize>() as u64 * fsize as u64;
    real + 3 * half * 2 * fsize as u64 + half * 8
}

/// Applies the target filter of `filters` to `target` (template box `tshape`), once per run:
/// zero-padded at the high end to `fast_shape`, `irfft(rfft(·) · H_target)`, cropped back.
/// With `pad_edges` the target is first extended symmetrically by `n − 1` per axis (`n//2`
/// before), as pytme filters its padded target, and the extension is returned (its `origin`
/// says where the target starts). `None` when there is no target filter (or it is the identity).
/// Refuses ([`Error::OutOfMemory`]) when its transient arrays exceed `limit` bytes.
pub(super) fn filter_target<B: Backend>(
    b: &B,
    filters: &dyn SpectralFilter,
    target: &Arr<B, F<B>>,
    tshape: &[usize],
    pad_edges: bool,
    limit: u64,
) -> Result<Option<FilteredTarget<B>>> {
    let ts = target.shape().to_vec();
    let shape = filtered_shape(&ts, tshape, pad_edges);
    let fast = fast_shape(&shape);
    let Some(w) = checked_weight("target filter", filters.target_weight(&fast)?, &fast)? else {
        return Ok(None);
    };
    let need = target_filter_bytes(&ts, tshape, pad_edges, std::mem::size_of::<F<B>>());
    if need > limit {
        return Err(Error::OutOfMemory {
            what: format!(
                "filtering the target {} on its FFT grid {}",
                fmt_shape(&ts),
                fmt_shape(&fast)
            ),
            requested: need,
            available: limit,
        });
    }
    let origin: Vec<isize> = if pad_edges {
        tshape.iter().map(|&n| (n / 2) as isize).collect()
    } else {
        vec![0; ts.len()]
    };
    let axes: Vec<usize> = (0..fast.len()).collect();
    let plan = b.fft_plan(&fast, &axes)?;
    let mut spec = b.zeros::<C<B>>(plan.complex_shape())?;
    {
        // The target (or its extension) top-left in the zeroed FFT grid.
        let mut pad = b.zeros::<F<B>>(&fast)?;
        let start: Vec<isize> = origin.iter().map(|&o| -o).collect();
        b.gather_window(target, &start, &shape, WindowExtension::Symmetric, &mut pad)?;
        b.rfft(&plan, &pad, &mut spec)?;
    }
    let mut prod = b.zeros::<C<B>>(plan.complex_shape())?;
    {
        let weight = upload_weight(b, w, &fast)?;
        b.complex_mul(&spec, &weight, &mut prod)?;
    }
    drop(spec);
    let mut full = b.zeros::<F<B>>(&fast)?;
    b.irfft(&plan, &mut prod, &mut full)?;
    drop(prod);
    let mut out = b.zeros::<F<B>>(&shape)?;
    b.crop(&full, &vec![0; shape.len()], &mut out)?;
    Ok(Some(FilteredTarget {
        target: out,
        origin,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetrised_planes_are_point_symmetric_and_the_rest_unchanged() {
        // (5, 4, 4) box → half grid (5, 4, 3); planes k = 0 and k = 2 (Nyquist).
        let mut w = ArrayD::from_shape_fn(IxDyn(&[5, 4, 3]), |i| {
            (i[0] * 12 + i[1] * 3 + i[2]) as f64 * 0.1 + 1.0
        });
        let before = w.clone();
        symmetrize_half_grid(&mut w, 4);
        for a in 0..5 {
            for c in 0..4 {
                for p in [0, 2] {
                    let m = [(5 - a) % 5, (4 - c) % 4, p];
                    assert_eq!(w[IxDyn(&[a, c, p])], w[IxDyn(&m)]);
                    let mean = 0.5 * (before[IxDyn(&[a, c, p])] + before[IxDyn(&m)]);
                    assert_eq!(w[IxDyn(&[a, c, p])], mean);
                }
                assert_eq!(w[IxDyn(&[a, c, 1])], before[IxDyn(&[a, c, 1])]);
            }
        }
        // Odd last axis: only the DC plane.
        let mut w = ArrayD::from_shape_fn(IxDyn(&[3, 3]), |i| (i[0] * 3 + i[1]) as f64);
        let before = w.clone();
        symmetrize_half_grid(&mut w, 5);
        assert_eq!(w[[1, 0]], 0.5 * (before[[1, 0]] + before[[2, 0]]));
        assert_eq!(w[[1, 2]], before[[1, 2]]);
        assert_eq!(w[[2, 1]], before[[2, 1]]);
    }

    #[test]
    fn weights_are_checked_and_the_identity_is_dropped() {
        let ones = ArrayD::from_elem(IxDyn(&[4, 3]), 1.0);
        assert!(checked_weight("w", Some(ones), &[4, 4]).unwrap().is_none());
        let e = checked_weight("w", Some(ArrayD::zeros(IxDyn(&[4, 4]))), &[4, 4]).unwrap_err();
        assert!(e.to_string().contains("(4, 3)"), "{e}");
        let mut nan = ArrayD::from_elem(IxDyn(&[4, 3]), 0.5);
        nan[[1, 1]] = f64::NAN;
        assert!(checked_weight("w", Some(nan), &[4, 4]).is_err());
        assert!(checked_weight("w", None, &[4, 4]).unwrap().is_none());
    }
}
