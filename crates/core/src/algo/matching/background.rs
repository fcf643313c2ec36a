//! pytme 0.3.6's `background_correction="phase-scrambling"` ([`MatchParams::background`]).
//!
//! A phase-scrambled copy of the template (`matching_utils.py::scramble_phases`, seed 42:
//! `irfftn(|rfftn(t)| · N/max(|N|, ε))` with `N = rfftn(default_rng(42).standard_normal(shape,
//! float32))`, ε = the float type's `finfo.resolution`, negated when the sign of its sum
//! differs from the template's) is scrambled after the score's preprocessing of the template
//! (LCC's Laplacian, CAM's standardisation), as pytme scrambles its template after the setup.
//! Every rotation, it is rotated, filtered and standardised exactly like the template (same
//! mask and mask sum: FLC's rotated mask), scored with the same normalisation, and its scores
//! kept as a running maximum that starts at 0: `bg = max(0, max_R score_bg)`. After all
//! rotations, `bg ← bg − mean(bg)` and the scores become `max_R score − bg`.
//!
//! The mean is pytme's: over its `fast` box, i.e. the whole FFT grid `fast_shape(target)` of a
//! circular run (the positions beyond the target included), and with `pad_edges` the target's
//! positions summed over `Π fast_shape(target + n − 1)` (pytme zeroes the padding's scores).
//! So the bg map is kept on that grid, tiles of the padding included, and merged across MPI
//! ranks and list items by maximum before the mean is taken once, from the merged map, with a
//! fixed summation order (f64, C order): the same bits for any number of ranks or tiles per
//! rank. Tiles change the scores at round-off, as they do without the correction.
//!
//! pytme draws the noise on the template as it holds it: for MRC inputs, (x, y, z)
//! ([`MatchParams::pytme_frame`](super::MatchParams::pytme_frame) [`AxisOrder::Reversed`]), so
//! the draws are laid out in C order over the reversed shape and transposed here.
//!
//! Departures from pytme, stated: pytme's mean is a float32 pairwise sum (here f64, rounded
//! once); with several joblib jobs pytme subtracts each job's own background from that job's
//! maxima (the result then depends on `-n`), here always the background over all rotations
//! (pytme's result with one job). MCC and pre-rotated templates are refused.

use ndarray::{ArrayD, Dimension, IxDyn};
use num_complex::Complex;

use crate::algo::filters::npy_rng::standard_normal_f32;
use crate::backend::{Arr, ArrayMeta, Backend, ComplexOf, FloatOf};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::shape::{AxisOrder, fast_shape};

type F<B> = FloatOf<B>;

/// Background corrections of the scores (pytme's `--background-correction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Background {
    /// Scores minus the mean-centred maximum over rotations of a phase-scrambled template's
    /// scores (pytme's `phase-scrambling`).
    PhaseScrambling,
}

impl Background {
    /// pytme's name.
    pub fn name(self) -> &'static str {
        match self {
            Background::PhaseScrambling => "phase-scrambling",
        }
    }
}

impl std::str::FromStr for Background {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "phase-scrambling" => Ok(Background::PhaseScrambling),
            _ => Err(Error::invalid(
                "background_correction",
                format!("unknown background correction `{s}`; expected phase-scrambling"),
            )),
        }
    }
}

/// The background scores of a run (or of some of its rotations), before the correction: the
/// running maximum (from 0) of the scrambled template's scores on pytme's grid, and the count
/// its mean divides by.
pub struct BackgroundScores<B: Backend> {
    /// `max(0, max_R score_bg)` on [`background_grid`]'s shape.
    pub map: Arr<B, F<B>>,
    /// The positions pytme's mean divides by.
    pub count: f64,
}

/// The shape of the background map and the count of its mean: the FFT grid of a circular run
/// and its size; with `pad_edges` the target, over pytme's `Π fast_shape(target + n − 1)`.
pub fn background_grid(target: &[usize], tshape: &[usize], pad_edges: bool) -> (Vec<usize>, f64) {
    if pad_edges {
        let ext: Vec<usize> = target.iter().zip(tshape).map(|(t, n)| t + n - 1).collect();
        let count = fast_shape(&ext).iter().map(|&v| v as f64).product();
        (target.to_vec(), count)
    } else {
        let f = fast_shape(target);
        let count = f.iter().map(|&v| v as f64).product();
        (f, count)
    }
}

/// pytme's `scramble_phases(t, seed=42)` on the backend's FFT (see the module docs), with the
/// noise drawn as pytme draws it on the template it holds (`frame`: for
/// [`AxisOrder::Reversed`], in C order over the reversed shape, then transposed here). The
/// rest is the same in either frame: `|rfftn(t)|·N/|N|` is the spectrum of a real array.
pub(super) fn scramble_phases<B: Backend>(
    b: &B,
    t: &Arr<B, F<B>>,
    frame: AxisOrder,
) -> Result<Arr<B, F<B>>> {
    let shape = t.shape().to_vec();
    let n: usize = shape.iter().product();
    let axes: Vec<usize> = (0..shape.len()).collect();
    let plan = b.fft_plan(&shape, &axes)?;
    let cshape = crate::shape::rfft_shape(&shape, &axes);
    let spectrum = |a: &Arr<B, F<B>>| -> Result<ArrayD<Complex<f64>>> {
        let mut s = b.zeros::<ComplexOf<B>>(&cshape)?;
        b.rfft(&plan, a, &mut s)?;
        Ok(b.download(&s)?
            .mapv(|c| Complex::new(c.re.as_f64(), c.im.as_f64())))
    };
    let amp = spectrum(t)?;
    let noise: Vec<F<B>> = standard_normal_f32(42, n)
        .into_iter()
        .map(|v| F::<B>::from_f64(v as f64))
        .collect();
    let pshape: Vec<usize> = frame.perm(shape.len()).iter().map(|&a| shape[a]).collect();
    let noise = ArrayD::from_shape_vec(IxDyn(&pshape), noise)
        .map_err(|e| Error::invalid("phase scrambling", e.to_string()))?;
    let noise = match frame {
        AxisOrder::Pytme => noise,
        AxisOrder::Reversed => noise.reversed_axes().as_standard_layout().into_owned(),
    };
    let nspec = spectrum(&b.upload_owned(noise)?)?;
    // numpy's finfo(dtype).resolution of the template's float type.
    let eps = if std::mem::size_of::<F<B>>() == 4 {
        1e-6
    } else {
        1e-15
    };
    let scale = 1.0 / n as f64;
    let prod = ndarray::Zip::from(&amp).and(&nspec).map_collect(|a, z| {
        let c = z / z.norm().max(eps) * a.norm() * scale;
        Complex::new(F::<B>::from_f64(c.re), F::<B>::from_f64(c.im))
    });
    let mut prod: Arr<B, ComplexOf<B>> = b.upload_owned(prod)?;
    let mut out = b.zeros::<F<B>>(&shape)?;
    b.irfft(&plan, &mut prod, &mut out)?;
    let sign = |v: f64| {
        if v > 0.0 {
            1
        } else if v < 0.0 {
            -1
        } else {
            0
        }
    };
    if sign(b.sum(&out)?.as_f64()) != sign(b.sum(t)?.as_f64()) {
        b.scalar_assign(crate::backend::BinaryOp::Mul, &mut out, -1.0)?;
    }
    Ok(out)
}

/// `scores ← scores − (bg − mean(bg))` on the target (the corner of the bg map), once, after
/// every rotation's background is in `bg` (see the module docs for the mean). Returns the
/// per-voxel shift subtracted, `bg − mean(bg)` (target-shaped).
pub fn apply_background<B: Backend>(
    b: &B,
    scores: &mut Arr<B, F<B>>,
    bg: &BackgroundScores<B>,
) -> Result<Arr<B, F<B>>> {
    let map = b.download(&bg.map)?;
    let sum = map.iter().fold(0.0f64, |a, v| a + v.as_f64());
    let mean = F::<B>::from_f64(sum / bg.count);
    let mut s = b.download(scores)?;
    let ts = s.shape().to_vec();
    if map.ndim() != ts.len() || map.shape().iter().zip(&ts).any(|(m, t)| m < t) {
        return Err(Error::shape(
            "background map",
            format!("at least the target {ts:?}"),
            format!("{:?}", map.shape()),
        ));
    }
    let mut shift = s.clone();
    for ((i, v), sh) in s.indexed_iter_mut().zip(shift.iter_mut()) {
        *sh = map[i.slice()] - mean;
        *v -= *sh;
    }
    let up = b.upload(s.view())?;
    b.copy(&up, scores)?;
    b.upload_owned(shift)
}
