//! The argument checks of the [`Correlate`](super::Correlate) ops, shared by every backend (the
//! defaults, the CPU and CUDA call them first), so that the same mistake reads the same
//! everywhere. Each `check_<op>` covers what its op needs before it touches memory; a backend
//! adds only its own capability limits (CUDA's axis count).

use super::super::{check_fft_arrays, check_rfft_pruned_nonzero, same_shape_named};
use super::WindowExtension;
use super::{CorrSpectrum, CorrWindow, Normalization, RunningMax, ScoreNorm, SpectralNorm};
use crate::backend::{Arr, ArrayMeta, BackendTypes, ComplexOf, FftPlan, FloatOf};
use crate::dtype::{Element, Index};
use crate::error::{Error, Result, fmt_shape};

/// `src` placed at `offset` (the corner when `None`) lies inside `dst`, with as many axes.
fn check_block(op: &str, src: &[usize], offset: Option<&[usize]>, dst: &[usize]) -> Result<()> {
    let d = src.len();
    let off = |k: usize| offset.map_or(0, |o| o[k]);
    if dst.len() != d
        || offset.is_some_and(|o| o.len() != d)
        || (0..d).any(|k| off(k) + src[k] > dst[k])
    {
        let at = match offset {
            Some(o) => format!("{o:?}"),
            None => "the corner".into(),
        };
        return Err(Error::shape(
            op,
            format!("a block inside {}", fmt_shape(dst)),
            format!("{} at {at}", fmt_shape(src)),
        ));
    }
    Ok(())
}

/// The checks of [`Correlate::write_corner`](super::Correlate::write_corner): `src` fits in
/// `dst`'s corner, with as many axes.
pub fn check_write_corner(src: &[usize], dst: &[usize]) -> Result<()> {
    check_block("write_corner", src, None, dst)
}

/// The checks of [`Correlate::insert_block`](super::Correlate::insert_block): one offset per
/// axis, and the block inside `dst`.
pub fn check_insert_block(src: &[usize], offset: &[usize], dst: &[usize]) -> Result<()> {
    check_block("insert_block", src, Some(offset), dst)
}

/// The checks of [`Correlate::gather_window`](super::Correlate::gather_window): `dst`, `start`
/// and `len` with `src`'s axes; a periodic extension's period per axis, no shorter than `src`;
/// a source with data unless `dst` is empty.
pub fn check_gather_window(
    src: &[usize],
    start: &[isize],
    len: &[usize],
    ext: WindowExtension<'_>,
    dst: &[usize],
) -> Result<()> {
    let d = src.len();
    if dst.len() != d || start.len() != d || len.len() != d {
        return Err(Error::shape(
            "gather_window",
            format!(
                "dst, start and len with {d} axes like src {}",
                fmt_shape(src)
            ),
            format!("dst {}, start {start:?}, len {len:?}", fmt_shape(dst)),
        ));
    }
    if let WindowExtension::Periodic(p) = ext
        && (p.len() != d || p.iter().zip(src).any(|(p, s)| p < s))
    {
        return Err(Error::shape(
            "gather_window: period",
            format!("≥ {}", fmt_shape(src)),
            fmt_shape(p),
        ));
    }
    if src.contains(&0) && !dst.contains(&0) {
        return Err(Error::Empty(format!(
            "gather_window: src {}",
            fmt_shape(src)
        )));
    }
    Ok(())
}

/// The window of a correlation on the FFT grid `grid` read at output shape `out`: at least one
/// axis, the same axes for both, one shift per axis, a grid with data.
fn check_window(op: &str, grid: &[usize], window: CorrWindow<'_>, out: &[usize]) -> Result<()> {
    let d = grid.len();
    if d == 0 || out.len() != d || window.shift.len() != d {
        return Err(Error::shape(
            format!("{op}: window"),
            format!(
                "an output with the axes of the grid {} (at least one), one shift per axis",
                fmt_shape(grid)
            ),
            format!("output {} and shift {:?}", fmt_shape(out), window.shift),
        ));
    }
    if grid.contains(&0) {
        return Err(Error::Empty(format!("{op}: FFT grid {}", fmt_shape(grid))));
    }
    Ok(())
}

/// The checks of
/// [`Correlate::inverse_denominator`](super::Correlate::inverse_denominator): `c2` shaped like
/// `c1`, and the window from their grid to `out`.
pub fn check_inverse_denominator(
    c1: &[usize],
    c2: &[usize],
    window: CorrWindow<'_>,
    out: &[usize],
) -> Result<()> {
    same_shape_named(|| "inverse_denominator: c2 vs c1".into(), c1, c2)?;
    check_window("inverse_denominator", c1, window, out)
}

/// `best_index` shaped like `best`, `ssum` of one element.
fn check_running_max<B: BackendTypes, T: Element, I: Index>(
    op: &str,
    rm: &RunningMax<'_, B, T, I>,
) -> Result<()> {
    same_shape_named(
        || format!("{op}: best_index vs best"),
        rm.best.shape(),
        rm.best_index.shape(),
    )?;
    same_shape_named(|| format!("{op}: ssum"), &[1], rm.ssum.shape())?;
    if let Some(m) = &rm.moments {
        let mut want = rm.best.shape().to_vec();
        want.push(4);
        same_shape_named(
            || format!("{op}: moments vs best + [4]"),
            &want,
            m.acc.shape(),
        )?;
        if !m.scale.iter().all(|s| s.is_finite() && *s > 0.0) {
            return Err(Error::invalid(
                format!("{op}: moments"),
                format!("scales must be positive and finite (got {:?})", m.scale),
            ));
        }
    }
    Ok(())
}

/// A normalisation's arrays (by shape): a denominator shaped like the output, the mask
/// correlations (`c1`, `c2`) like the correlation (`grid`, named `grid_name`).
fn check_norm<S>(
    op: &str,
    norm: Normalization<S, &[usize], &[usize]>,
    grid: &[usize],
    grid_name: &str,
    out: &[usize],
) -> Result<()> {
    let mut q = 0;
    norm.try_map(
        |inv_den| same_shape_named(|| format!("{op}: inv_den vs best"), out, inv_den),
        |c| {
            q += 1;
            same_shape_named(|| format!("{op}: c{q} vs {grid_name}"), grid, c)
        },
    )?;
    Ok(())
}

/// The checks of [`Correlate::score_max_update`](super::Correlate::score_max_update): the
/// running maximum's arrays, the window from `corr`'s grid to `best`, the normalisation's
/// arrays.
pub fn check_score_max_update<B: BackendTypes, T: Element, I: Index>(
    corr: &Arr<B, T>,
    norm: &ScoreNorm<'_, B, T>,
    window: CorrWindow<'_>,
    rm: &RunningMax<'_, B, T, I>,
) -> Result<()> {
    const OP: &str = "score_max_update";
    check_running_max(OP, rm)?;
    let out = rm.best.shape();
    check_window(OP, corr.shape(), window, out)?;
    let shapes = norm.as_ref().map(|d| d.shape(), |c| c.shape());
    check_norm(OP, shapes, corr.shape(), "corr", out)
}

/// The checks of
/// [`Correlate::rfft_pruned_mul_conj`](super::Correlate::rfft_pruned_mul_conj): `input` and
/// `spec` of the plan's shapes, `nonzero` inside the input, one output per factor, each of the
/// plan's complex shape.
pub fn check_rfft_pruned_mul_conj<B: BackendTypes>(
    plan: &B::Fft,
    input: &[usize],
    nonzero: &[usize],
    spec: &[usize],
    factors: &[&Arr<B, ComplexOf<B>>],
    outs: &[&mut CorrSpectrum<B>],
) -> Result<()> {
    const OP: &str = "rfft_pruned_mul_conj";
    check_fft_arrays(plan, OP, input, spec)?;
    check_rfft_pruned_nonzero(input, nonzero)?;
    if factors.len() != outs.len() {
        return Err(Error::shape(
            format!("{OP}: outs"),
            format!("{} arrays (one per factor)", factors.len()),
            outs.len(),
        ));
    }
    let cs = plan.complex_shape();
    for (q, f) in factors.iter().enumerate() {
        same_shape_named(|| format!("{OP}: factors[{q}] vs spec"), cs, f.shape())?;
    }
    for (q, o) in outs.iter().enumerate() {
        same_shape_named(
            || format!("{OP}: outs[{q}] vs spec"),
            cs,
            o.layout().shape(),
        )?;
    }
    Ok(())
}

/// The checks of
/// [`Correlate::irfft_score_max_update`](super::Correlate::irfft_score_max_update): the
/// running maximum's arrays; products of the plan's complex shape; an output with the grid's
/// axes, no longer than the grid on any axis; the normalisation's arrays;
/// [`Normalization::correlations`] work arrays of the plan's real shape.
pub fn check_irfft_score_max_update<B: BackendTypes, I: Index>(
    plan: &B::Fft,
    spec: &CorrSpectrum<B>,
    norm: &SpectralNorm<'_, B>,
    work: &[Arr<B, FloatOf<B>>],
    window: CorrWindow<'_>,
    rm: &RunningMax<'_, B, FloatOf<B>, I>,
) -> Result<()> {
    const OP: &str = "irfft_score_max_update";
    check_running_max(OP, rm)?;
    let (fast, cs, out) = (plan.real_shape(), plan.complex_shape(), rm.best.shape());
    same_shape_named(
        || format!("{OP}: spec vs the plan's"),
        cs,
        spec.layout().shape(),
    )?;
    check_window(OP, fast, window, out)?;
    if let Some(k) = (0..fast.len()).find(|&k| out[k] > fast[k]) {
        return Err(Error::shape(
            format!("{OP}: best"),
            format!("at most the FFT grid {} on every axis", fmt_shape(fast)),
            format!("{} (axis {k})", fmt_shape(out)),
        ));
    }
    let shapes = norm.as_ref().map(|d| d.shape(), |c| c.layout().shape());
    check_norm(OP, shapes, cs, "spec", out)?;
    let need = norm.correlations();
    if work.len() < need {
        return Err(Error::shape(
            format!("{OP}: work"),
            format!("{need} arrays of the grid {}", fmt_shape(fast)),
            format!("{} arrays", work.len()),
        ));
    }
    for (q, w) in work[..need].iter().enumerate() {
        same_shape_named(|| format!("{OP}: work[{q}] vs the grid"), fast, w.shape())?;
    }
    Ok(())
}

/// The checks of
/// [`Correlate::combine_masked_correlations`](super::Correlate::combine_masked_correlations):
/// the five other correlations (`[c_fm, c_tt, c_f2m, c_tt2, c_tm]`) shaped like `c_ft`.
pub fn check_combine_masked_correlations(c_ft: &[usize], rest: [&[usize]; 5]) -> Result<()> {
    for (name, a) in ["c_fm", "c_tt", "c_f2m", "c_tt2", "c_tm"].iter().zip(rest) {
        same_shape_named(
            || format!("combine_masked_correlations: {name} vs c_ft"),
            c_ft,
            a,
        )?;
    }
    Ok(())
}

/// The checks of [`Correlate::standardize_masked`](super::Correlate::standardize_masked): the
/// mask and the scratch have the template's shape.
pub fn check_standardize_masked(
    t: &[usize],
    mask: Option<&[usize]>,
    scratch: &[usize],
) -> Result<()> {
    const OP: &str = "standardize_masked";
    if let Some(m) = mask {
        same_shape_named(|| format!("{OP}: mask vs template"), t, m)?;
    }
    same_shape_named(|| format!("{OP}: scratch vs template"), t, scratch)
}
