//! The loop: every rotation of one job through its score's [`ScoreState`].

use crate::backend::host::MOMENT_PASSES;
use crate::backend::{Arr, ArrayMeta, Backend, CorrWindow, FloatOf, IntOf, Moments};
use crate::dtype::Index;
use crate::error::{Error, Result};

use super::MatchParams;
use super::job::Job;
use super::prepare::{Prepared, pull_back};
use super::state::{Grid, RunningMax, ScoreState};

/// Runs rotations `rots` (indices into the run's set) of the current template side of `prep`
/// on one job, with the job's
/// buffers and score state `(grid, state)` ([`ScoreState::new`]), updating
/// `best`/`best_index` (the job's output shape; index `base + r` for rotation `r`, so that
/// several templates run in turn keep the first best (template, rotation) pair) and the
/// moments (its shape + `[4]`, with their scales) when given, and pushing one Σ score² per
/// rotation to `ssum_parts` (each summed into the zeroed 1-element `ssum`, kept on the device
/// and read back once per job, not once per rotation).
#[allow(clippy::too_many_arguments)]
pub(super) fn run_job<B: Backend>(
    b: &B,
    prep: &Prepared<B>,
    p: &MatchParams<'_, B>,
    job: &Job,
    (grid, state): (&mut Grid<B>, &mut ScoreState<B>),
    base: usize,
    rots: std::ops::Range<usize>,
    tshape: &[usize],
    (best, best_index, mut moments): (
        &mut Arr<B, FloatOf<B>>,
        &mut Arr<B, IntOf<B>>,
        Option<(&mut Arr<B, i64>, [f64; 2])>,
    ),
    (ssum, ssum_parts): (&mut Arr<B, f64>, &mut Vec<f64>),
    mut background: Option<&mut Arr<B, FloatOf<B>>>,
    progress: &dyn Fn(usize) -> Result<()>,
) -> Result<()> {
    let window = CorrWindow { shift: &job.shift };
    let single = std::mem::size_of::<FloatOf<B>>() == 4;
    let mut tbox = b.zeros::<FloatOf<B>>(tshape)?;
    let mut scratch = b.zeros::<FloatOf<B>>(tshape)?;
    let mut parts = b.zeros::<f64>(&[rots.len()])?;
    let mut filter_bufs = match &prep.template_filter {
        Some(f) => Some(f.buffers(b)?),
        None => None,
    };
    // The background pass's index map and Σ score² are not results (pytme's `ssum` has the
    // template's scores only).
    let mut bg_aux = match (&background, &prep.side().background_src) {
        (Some(bg), Some(_)) => Some((b.zeros::<IntOf<B>>(bg.shape())?, b.zeros::<f64>(&[1])?)),
        _ => None,
    };
    // The backend's working form of the moments, reopened every MOMENT_PASSES passes (one
    // pass per rotation), canonical again after the loop.
    if let Some((acc, _)) = moments.as_mut() {
        b.moments_open(acc)?;
    }
    for r in rots.clone() {
        let done = r - rots.start;
        if done > 0
            && done.is_multiple_of(MOMENT_PASSES)
            && let Some((acc, _)) = moments.as_mut()
        {
            b.moments_close(acc)?;
            b.moments_open(acc)?;
        }
        let (m, off) = pull_back(p.rotations.matrix(r), tshape, single, p.pytme_frame);
        // Rotated template (and the score's mask) in the template box.
        match &p.prerotated {
            Some(pr) => b.copy(&pr.templates[r], &mut tbox)?,
            None => b.affine_transform_reversed_in(
                &prep.side().template_src,
                &m,
                &off,
                p.interpolation,
                p.pytme_frame,
                &mut tbox,
            )?,
        }
        // The template filter acts on the rotated template (the wedge is fixed in the target's
        // frame), before the score's normalisation; the mask is not filtered.
        if let (Some(f), Some(bufs)) = (&prep.template_filter, filter_bufs.as_mut()) {
            f.apply(b, bufs, &mut tbox)?;
        }
        let n = state.rotate_mask(b, p, prep, r, (&m, &off))?;
        state.standardize(b, prep, &mut tbox, n, &mut scratch)?;
        b.write_corner(&tbox, &mut grid.tpad)?;
        // Each scoring call adds its Σ score² to a zeroed accumulator (one part per call).
        b.fill(ssum, 0.0)?;
        let rm = RunningMax {
            best: &mut *best,
            best_index: &mut *best_index,
            index: idx::<B>(base + r)?,
            ssum: &mut *ssum,
            moments: moments.as_mut().map(|(acc, scale)| Moments {
                acc: &mut **acc,
                scale: *scale,
            }),
        };
        state.score(b, grid, tshape, &mut tbox, n, window, rm)?;
        b.insert_block(ssum, &[done], &mut parts)?;
        // The scrambled template, rotated, filtered, standardised and scored like the template
        // (same mask and mask sum), into the background's running maximum.
        if let (Some(bg), Some(src), Some((bix, bss))) = (
            background.as_deref_mut(),
            &prep.side().background_src,
            bg_aux.as_mut(),
        ) {
            b.affine_transform_reversed_in(
                src,
                &m,
                &off,
                p.interpolation,
                p.pytme_frame,
                &mut tbox,
            )?;
            if let (Some(f), Some(bufs)) = (&prep.template_filter, filter_bufs.as_mut()) {
                f.apply(b, bufs, &mut tbox)?;
            }
            state.standardize(b, prep, &mut tbox, n, &mut scratch)?;
            b.write_corner(&tbox, &mut grid.tpad)?;
            let rm = RunningMax {
                best: bg,
                best_index: bix,
                index: idx::<B>(base + r)?,
                ssum: bss,
                moments: None,
            };
            state.score(b, grid, tshape, &mut tbox, n, window, rm)?;
        }
        progress(done + 1)?;
    }
    if let Some((acc, _)) = moments.as_mut() {
        b.moments_close(acc)?;
    }
    ssum_parts.extend(b.download(&parts)?.iter().copied());
    Ok(())
}

fn idx<B: Backend>(r: usize) -> Result<IntOf<B>> {
    IntOf::<B>::from_usize(r)
        .ok_or_else(|| Error::invalid("rotations", format!("index {r} overflows the index type")))
}
