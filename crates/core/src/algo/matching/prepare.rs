//! Preparation, once per run: every parameter checked first ([`check`], before any FFT), then
//! the target and the template prepared (filters, the score's preprocessing).

use crate::backend::{
    AccumOf, Arr, ArrayMeta, Backend, BinaryOp, BorderMode, FloatOf, Interpolation,
};
use crate::dtype::Real;
use crate::error::{Error, Result, fmt_shape};
use crate::shape::AxisOrder;
use num_traits::{Float as _, Zero};

use super::filter::{TemplateFilter, filter_target};
use super::{MatchParams, Score};

/// Inputs prepared once per run (filters applied to the target, score preprocessing done).
pub(super) struct Prepared<B: Backend> {
    /// The target the jobs read their windows from: filtered and preprocessed; with a target
    /// filter and `pad_edges`, its symmetric extension (see [`Prepared::origin`]).
    pub(super) target: Arr<B, FloatOf<B>>,
    /// Where the target's voxel 0 lies in [`Prepared::target`] (and the target mask): 0, or
    /// `n//2` per axis for the filtered extension. The jobs' window starts are shifted by it.
    pub(super) origin: Vec<isize>,
    pub(super) target_mask: Option<Arr<B, FloatOf<B>>>,
    /// The template filter (weight on the device), applied to every rotated template.
    pub(super) template_filter: Option<TemplateFilter<B>>,
    /// Each template's side, in the run's order (one for [`super::match_template`]).
    pub(super) sides: Vec<Side<B>>,
    /// The side the loop runs now ([`Prepared::side`]).
    pub(super) current: usize,
}

/// One template's side of a run: the template and its mask, prepared.
pub(super) struct Side<B: Backend> {
    /// Template, preprocessed (LCC/CAM); spline coefficients when rotating cubically.
    pub(super) template_src: Arr<B, FloatOf<B>>,
    pub(super) mask: Arr<B, FloatOf<B>>,
    pub(super) mask_sum: AccumOf<B>,
    /// The phase-scrambled template of a background correction, preprocessed like
    /// `template_src` (`background.rs`).
    pub(super) background_src: Option<Arr<B, FloatOf<B>>>,
    /// The mask equals the previous side's, value for value (the target side of a job's
    /// state, which reads the mask for CAM and FLCSphericalMask, can be kept).
    pub(super) same_mask_as_previous: bool,
}

impl<B: Backend> Prepared<B> {
    /// The template side the loop runs now.
    pub(super) fn side(&self) -> &Side<B> {
        &self.sides[self.current]
    }
}

fn check_finite<B: Backend>(b: &B, what: &str, a: &Arr<B, FloatOf<B>>) -> Result<()> {
    let count = b.count_nonfinite(a)?;
    if count > 0 {
        Err(Error::NonFinite {
            what: what.into(),
            count,
        })
    } else {
        Ok(())
    }
}

/// Globally standardises `a` (mean 0, population sd 1) with the statistics of `a`, or of its
/// box `inner = (offset, shape)` (the target inside its filtered extension); a constant array
/// becomes zeros.
fn standardize_global<B: Backend>(
    b: &B,
    a: &mut Arr<B, FloatOf<B>>,
    inner: Option<(&[usize], &[usize])>,
) -> Result<()> {
    // The moments in the accumulator type.
    let acc = <AccumOf<B> as Real>::from_f64;
    let (mean, sd, rms2) = match inner {
        None => {
            let (mean, sd) = b.mean_std(a)?;
            (mean, sd, b.sum_sq(a)? / acc(a.len() as f64))
        }
        Some((offset, shape)) => {
            let mut c = b.zeros::<FloatOf<B>>(shape)?;
            b.crop(a, offset, &mut c)?;
            let (mean, sd) = b.mean_std(&c)?;
            (mean, sd, b.sum_sq(&c)? / acc(c.len() as f64))
        }
    };
    b.scalar_assign(BinaryOp::Sub, a, mean.as_f64())?;
    if sd * sd <= acc(1e-12) * rms2 || sd == acc(0.0) {
        b.fill(a, FloatOf::<B>::from_f64(0.0))
    } else {
        b.scalar_assign(BinaryOp::Mul, a, 1.0 / sd.as_f64())
    }
}

/// pytme's `standardize(t, m, Σm)` in place (`scratch` is template-shaped); with `mask = None`
/// the whole box (`m = 1`). A template constant inside the mask becomes zeros.
pub(super) fn standardize_masked<B: Backend>(
    b: &B,
    t: &mut Arr<B, FloatOf<B>>,
    mask: Option<(&Arr<B, FloatOf<B>>, AccumOf<B>)>,
    scratch: &mut Arr<B, FloatOf<B>>,
) -> Result<()> {
    // One backend op, so that a device keeps the sums on the device (no host round trip per
    // rotation).
    b.standardize_masked(t, mask, scratch)
}

/// Checks every parameter against the inputs before any work (no FFT, no copy): shapes, the
/// rotations' dimension, finite values, the masks, the score's needs and the pre-rotated
/// volumes.
pub(super) fn check<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    template: &Arr<B, FloatOf<B>>,
    template_mask: Option<&Arr<B, FloatOf<B>>>,
    p: &MatchParams<'_, B>,
) -> Result<()> {
    let (ts, ms) = (target.shape(), template.shape());
    if !(ts.len() == 2 || ts.len() == 3) {
        return Err(Error::shape("target", "a 2-D or 3-D array", fmt_shape(ts)));
    }
    if ms.len() != ts.len() {
        return Err(Error::shape(
            "template",
            format!("{} axes like the target {}", ts.len(), fmt_shape(ts)),
            format!("{} axes {}", ms.len(), fmt_shape(ms)),
        ));
    }
    crate::shape::expect_nonempty("target", ts)?;
    crate::shape::expect_nonempty("template", ms)?;
    if ms.iter().zip(ts).any(|(m, t)| m > t) {
        return Err(Error::shape(
            "template",
            format!("no axis larger than the target {}", fmt_shape(ts)),
            fmt_shape(ms),
        ));
    }
    if p.rotations.dim() != ts.len() {
        return Err(Error::shape(
            "rotations",
            format!("{0}×{0} matrices for a {0}-D target", ts.len()),
            format!("{0}×{0} matrices", p.rotations.dim()),
        ));
    }
    check_finite(b, "target", target)?;
    check_finite(b, "template", template)?;
    if let Some(m) = template_mask {
        if m.shape() != ms {
            return Err(Error::shape(
                "template_mask",
                fmt_shape(ms),
                fmt_shape(m.shape()),
            ));
        }
        check_finite(b, "template_mask", m)?;
        let mask_sum = b.sum(m)?;
        if p.score.uses_template_mask() && (mask_sum.is_nan() || mask_sum <= AccumOf::<B>::zero()) {
            return Err(Error::invalid(
                "template_mask",
                format!("must have a positive sum (got {mask_sum})"),
            ));
        }
    }
    if p.score == Score::MCC {
        let Some(tm) = p.target_mask else {
            return Err(Error::invalid("target_mask", "MCC needs a target mask"));
        };
        if tm.shape() != ts {
            return Err(Error::shape(
                "target_mask",
                fmt_shape(ts),
                fmt_shape(tm.shape()),
            ));
        }
        check_finite(b, "target_mask", tm)?;
        if b.sum(tm)? <= AccumOf::<B>::zero() {
            return Err(Error::invalid("target_mask", "must have a positive sum"));
        }
    }
    if p.background.is_some() && (p.prerotated.is_some() || p.score == Score::MCC) {
        return Err(Error::invalid(
            "background_correction",
            format!(
                "phase scrambling needs a template to rotate and a score other than MCC (got {}{})",
                p.score,
                if p.prerotated.is_some() {
                    " with pre-rotated templates"
                } else {
                    ""
                }
            ),
        ));
    }
    match &p.prerotated {
        Some(pr) => check_prerotated(pr, p, ms),
        None => Ok(()),
    }
}

/// The pre-rotated volumes: one template (and, for the scores that rotate it, one mask) per
/// rotation, each template-shaped.
fn check_prerotated<B: Backend>(
    pr: &super::Prerotated<'_, B>,
    p: &MatchParams<'_, B>,
    ms: &[usize],
) -> Result<()> {
    let n = p.rotations.len();
    if pr.templates.len() != n {
        return Err(Error::shape(
            "prerotated templates",
            format!("{n} (one per rotation)"),
            pr.templates.len(),
        ));
    }
    for (i, t) in pr.templates.iter().enumerate() {
        if t.shape() != ms {
            return Err(Error::shape(
                format!("prerotated template {i}"),
                fmt_shape(ms),
                fmt_shape(t.shape()),
            ));
        }
    }
    if !p.score.rotates_mask() {
        return Ok(());
    }
    match pr.masks {
        Some(m) if m.len() == n => {
            for (i, t) in m.iter().enumerate() {
                if t.shape() != ms {
                    return Err(Error::shape(
                        format!("prerotated mask {i}"),
                        fmt_shape(ms),
                        fmt_shape(t.shape()),
                    ));
                }
            }
            Ok(())
        }
        Some(m) => Err(Error::shape("prerotated masks", format!("{n}"), m.len())),
        None => Err(Error::invalid(
            "prerotated",
            format!("{} needs rotated masks", p.score),
        )),
    }
}

/// Checks the inputs ([`check`], before any work), then runs the preprocessing: the target
/// filtered and preprocessed once, each template (with its mask) preprocessed. `templates`
/// pairs each template with its mask (the one of `p` for a single template); all share one
/// shape.
pub(super) fn prepare<B: Backend>(
    b: &B,
    target: TargetArg<'_, B>,
    templates: &[super::TemplateInput<'_, B>],
    p: &MatchParams<'_, B>,
) -> Result<Prepared<B>> {
    let Some(first) = templates.first() else {
        return Err(Error::invalid("templates", "no template"));
    };
    let ms = first.template.shape().to_vec();
    for (k, t) in templates.iter().enumerate() {
        if t.template.shape() != ms.as_slice() {
            return Err(Error::shape(
                format!("template {k}"),
                format!("the shape of template 0 {}", fmt_shape(&ms)),
                fmt_shape(t.template.shape()),
            ));
        }
        check(b, target.get(), t.template, t.mask, p)?;
    }
    if templates.len() > 1 && (p.prerotated.is_some() || p.background.is_some() || p.score_stats) {
        return Err(Error::invalid(
            "templates",
            "several templates in one run: not with pre-rotated templates, a background \
             correction or score statistics",
        ));
    }
    let (tgt, origin, target_mask) = prepare_target(b, target, &ms, p)?;
    let template_filter = match p.filters {
        Some(f) => TemplateFilter::new(b, f, &ms)?,
        None => None,
    };
    let mut sides: Vec<Side<B>> = Vec::with_capacity(templates.len());
    let mut previous_mask: Option<Vec<u64>> = None;
    for t in templates {
        let mask = match t.mask {
            Some(m) => b.duplicate(m)?,
            None => b.full(&ms, FloatOf::<B>::from_f64(1.0))?,
        };
        let mask_sum = b.sum(&mask)?;
        // Compared on the host (template-sized, once per run), only when there are several.
        let mut same_mask_as_previous = false;
        if templates.len() > 1 {
            let host: Vec<u64> = b
                .download(&mask)?
                .iter()
                .map(|v| v.as_f64().to_bits())
                .collect();
            same_mask_as_previous = previous_mask.as_ref() == Some(&host);
            previous_mask = Some(host);
        }
        let (template_src, background_src) = prepare_template(b, t.template, p)?;
        sides.push(Side {
            template_src,
            mask,
            mask_sum,
            background_src,
            same_mask_as_previous,
        });
    }
    Ok(Prepared {
        target: tgt,
        origin,
        target_mask,
        template_filter,
        sides,
        current: 0,
    })
}

/// The target of a run: the caller's array, copied into the run's working target (which the
/// score's preprocessing may change), or one the run takes as that working target (no copy).
pub(super) enum TargetArg<'a, B: Backend> {
    /// Read, and copied where the run needs its own (unfiltered: the working target).
    Borrowed(&'a Arr<B, FloatOf<B>>),
    /// Taken: the working target itself when no filter makes a new one.
    Owned(Arr<B, FloatOf<B>>),
}

impl<B: Backend> TargetArg<'_, B> {
    /// The target.
    pub(super) fn get(&self) -> &Arr<B, FloatOf<B>> {
        match self {
            TargetArg::Borrowed(t) => t,
            TargetArg::Owned(t) => t,
        }
    }
}

/// The target the jobs read (filtered first, as pytme filters it before the score's setup,
/// then preprocessed), where the target starts in it, and MCC's target mask on its grid.
fn prepare_target<B: Backend>(
    b: &B,
    target: TargetArg<'_, B>,
    ms: &[usize],
    p: &MatchParams<'_, B>,
) -> Result<(Arr<B, FloatOf<B>>, Vec<isize>, Option<Arr<B, FloatOf<B>>>)> {
    let ts = target.get().shape().to_vec();
    let filtered = match p.filters {
        Some(f) => filter_target(
            b,
            f,
            target.get(),
            ms,
            p.pad_edges,
            super::memory_limit(b, p),
        )?,
        None => None,
    };
    let (mut tgt, origin) = match (filtered, target) {
        (Some(ft), _) => (ft.target, ft.origin),
        (None, TargetArg::Borrowed(t)) => (b.duplicate(t)?, vec![0; ts.len()]),
        // The caller's upload is the run's working target: no second copy.
        (None, TargetArg::Owned(t)) => (t, vec![0; ts.len()]),
    };
    let offset: Vec<usize> = origin.iter().map(|&o| o as usize).collect();
    let inner = origin
        .iter()
        .any(|&o| o != 0)
        .then_some((offset.as_slice(), ts.as_slice()));
    match p.score {
        Score::LCC => {
            let mut lap = b.zeros::<FloatOf<B>>(tgt.shape())?;
            b.laplace(&tgt, BorderMode::Reflect, &mut lap)?;
            tgt = lap;
        }
        Score::CAM | Score::NCC => standardize_global(b, &mut tgt, inner)?,
        _ => {}
    }
    let target_mask = match (p.score, p.target_mask) {
        (Score::MCC, Some(tm)) => {
            // The mask on the target's grid (extended like the target when it was).
            let mut tm = b.duplicate(tm)?;
            if inner.is_some() {
                let mut ext = b.zeros::<FloatOf<B>>(tgt.shape())?;
                let start: Vec<isize> = origin.iter().map(|&o| -o).collect();
                b.gather_window(
                    &tm,
                    &start,
                    tgt.shape(),
                    crate::backend::WindowExtension::Symmetric,
                    &mut ext,
                )?;
                tm = ext;
            }
            let mut f = b.duplicate(&tgt)?;
            b.binary(BinaryOp::Mul, &tgt, &tm, &mut f)?;
            tgt = f;
            Some(tm)
        }
        _ => None,
    };
    Ok((tgt, origin, target_mask))
}

/// The template the loop rotates (preprocessed: LCC's Laplacian, CAM's standardisation; spline
/// coefficients when rotating cubically; as given when pre-rotated volumes are used) and the
/// phase-scrambled copy of a background correction, preprocessed alike.
fn prepare_template<B: Backend>(
    b: &B,
    template: &Arr<B, FloatOf<B>>,
    p: &MatchParams<'_, B>,
) -> Result<(Arr<B, FloatOf<B>>, Option<Arr<B, FloatOf<B>>>)> {
    let mut tsrc = b.duplicate(template)?;
    if p.prerotated.is_some() {
        return Ok((tsrc, None));
    }
    match p.score {
        Score::LCC => b.laplace(template, BorderMode::Reflect, &mut tsrc)?,
        Score::CAM => standardize_global(b, &mut tsrc, None)?,
        _ => {}
    }
    // pytme scrambles the template after the score's setup preprocessed it.
    let mut background_src = None;
    if p.background.is_some() {
        let mut bg = super::background::scramble_phases(b, &tsrc, p.pytme_frame)?;
        if p.interpolation == Interpolation::Cubic {
            b.spline_prefilter(&mut bg)?;
        }
        background_src = Some(bg);
    }
    if p.interpolation == Interpolation::Cubic {
        b.spline_prefilter(&mut tsrc)?;
    }
    Ok((tsrc, background_src))
}

/// Matrix and offset of the pull-back rotation about `(n − 1)/2` (rounded to f32 as pytme's
/// float32 homogeneous matrix is, when the backend is single precision). `R·c` is summed in
/// pytme's axis order (`frame`: from the last axis here when pytme holds the transpose).
pub(super) fn pull_back(
    r: &[f64],
    tshape: &[usize],
    single: bool,
    frame: AxisOrder,
) -> (Vec<f64>, Vec<f64>) {
    let d = tshape.len();
    let round = |v: f64| if single { v as f32 as f64 } else { v };
    let m: Vec<f64> = r.iter().map(|&v| round(v)).collect();
    let c: Vec<f64> = tshape.iter().map(|&n| (n as f64 - 1.0) / 2.0).collect();
    let order = frame.perm(d);
    let off = (0..d)
        .map(|i| round(c[i] - order.iter().map(|&j| m[i * d + j] * c[j]).sum::<f64>()))
        .collect();
    (m, off)
}
