//! The loop: every rotation of one job through its score's [`ScoreState`].

use crate::backend::MAX_GROUP;
use crate::backend::host::MOMENT_PASSES;
use crate::backend::{AccumOf, Arr, ArrayMeta, Backend, CorrWindow, FloatOf, IntOf, Moments};
use crate::dtype::Index;
use crate::error::{Error, Result};

use super::MatchParams;
use super::filter::TemplateFilterBuffers;
use super::job::Job;
use super::prepare::{Prepared, pull_back};
use super::state::{Grid, RunningMax, ScoreState};

/// A job's moment accumulators ([`Moments::acc`], its output shape + `[4]`) with their scales.
pub(super) struct JobMoments<'a, B: Backend> {
    /// The accumulators, canonical words (or all zero, `fresh`).
    pub acc: &'a mut Arr<B, i64>,
    /// The scales of the terms.
    pub scale: [f64; 2],
    /// All zero as made: the working form of zero sums on every backend
    /// ([`Correlate::moments_open`](crate::backend::Correlate::moments_open)), passes are
    /// added without an opening (which would fault in and rewrite 32 bytes per voxel).
    pub fresh: bool,
}

/// Runs rotations `rots` (indices into the run's set) of the current template side of `prep`
/// on one job, with the job's
/// buffers and score state `(grid, state)` ([`ScoreState::new`]), updating
/// `best`/`best_index` (the job's output shape; index `base + r` for rotation `r`, so that
/// several templates run in turn keep the first best (template, rotation) pair) and the
/// moments (its shape + `[4]`, with their scales) when given, and pushing one Σ score² per
/// rotation to `ssum_parts` (each summed into the zeroed 1-element `ssum`, kept on the device
/// and read back once per job, not once per rotation). With `group` ≥ 2 (and score
/// statistics, no background, a score other than MCC) the rotations are scored up to `group`
/// at a time ([`ScoreState::score_group`]; a group never straddles a reopening of the
/// moments), with the same results bit for bit; the caller asks for it only on a backend
/// that groups and where the group's products fit ([`super::state::pair_counts`]).
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
        Option<JobMoments<'_, B>>,
    ),
    (ssum, ssum_parts): (&mut Arr<B, f64>, &mut Vec<f64>),
    mut background: Option<&mut Arr<B, FloatOf<B>>>,
    progress: &dyn Fn(usize) -> Result<()>,
    group: usize,
) -> Result<()> {
    let window = CorrWindow { shift: &job.shift };
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
    // Rotations in groups when asked (score statistics on a backend that groups, no
    // background): one score pass updates the maps and the moments for up to `group`
    // rotations; per later rotation of a group its products and its Σ score².
    let grouped = moments.is_some() && background.is_none() && state.pairable();
    let group = if grouped {
        group.clamp(1, MAX_GROUP).min(rots.len().max(1))
    } else {
        1
    };
    let mut slots = Vec::with_capacity(group - 1);
    let mut sums = Vec::with_capacity(group - 1);
    for _ in 1..group {
        slots.push(state.pair_slot(b, grid)?);
        sums.push(b.zeros::<f64>(&[1])?);
    }
    // The backend's working form of the moments, reopened every MOMENT_PASSES passes (one
    // pass per rotation; a group ends at a reopening at the latest), canonical again after
    // the loop. Fresh accumulators are already open.
    if let Some(m) = moments.as_mut().filter(|m| !m.fresh) {
        b.moments_open(m.acc)?;
    }
    let mut r = rots.start;
    while r < rots.end {
        let done = r - rots.start;
        if done > 0
            && done.is_multiple_of(MOMENT_PASSES)
            && let Some(m) = moments.as_mut()
        {
            b.moments_close(m.acc)?;
            b.moments_open(m.acc)?;
        }
        let mut rot = Rotation {
            b,
            prep,
            p,
            tshape,
            tbox: &mut tbox,
            scratch: &mut scratch,
            filter_bufs: filter_bufs.as_mut(),
        };
        let (n, m, off) = rot.prepare(r, state, grid)?;
        // Each scoring call adds its Σ score² to a zeroed accumulator (one part per rotation);
        // the running maps of rotation r, alone or as the first of a group.
        b.fill(ssum, 0.0)?;
        let rm = RunningMax {
            best: &mut *best,
            best_index: &mut *best_index,
            index: idx::<B>(base + r)?,
            ssum: &mut *ssum,
            moments: moments.as_mut().map(|m| Moments {
                acc: &mut *m.acc,
                scale: m.scale,
            }),
        };
        // This group's size: what is left of the rotations and of the opening.
        let k = group
            .min(rots.end - r)
            .min(MOMENT_PASSES - done % MOMENT_PASSES);
        if k >= 2 {
            state.group_first(b, grid, tshape)?;
            let mut ns = vec![n];
            for (q, (slot, s)) in slots
                .iter_mut()
                .zip(sums.iter_mut())
                .take(k - 1)
                .enumerate()
            {
                let (nq, _, _) = rot.prepare(r + 1 + q, state, grid)?;
                state.group_next(b, grid, tshape, slot)?;
                b.fill(s, 0.0)?;
                ns.push(nq);
            }
            let rest = sums[..k - 1]
                .iter_mut()
                .enumerate()
                .map(|(q, s)| Ok((idx::<B>(base + r + 1 + q)?, s)))
                .collect::<Result<Vec<_>>>()?;
            state.score_group(b, grid, &mut slots[..k - 1], &ns, window, rm, rest)?;
            b.insert_block(ssum, &[done], &mut parts)?;
            for (q, s) in sums[..k - 1].iter().enumerate() {
                b.insert_block(s, &[done + 1 + q], &mut parts)?;
            }
            for q in 1..=k {
                progress(done + q)?;
            }
            r += k;
            continue;
        }
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
        r += 1;
    }
    if let Some(m) = moments.as_mut() {
        b.moments_close(m.acc)?;
    }
    ssum_parts.extend(b.download(&parts)?.iter().copied());
    Ok(())
}

fn idx<B: Backend>(r: usize) -> Result<IntOf<B>> {
    IntOf::<B>::from_usize(r)
        .ok_or_else(|| Error::invalid("rotations", format!("index {r} overflows the index type")))
}

/// What preparing a rotation's template uses (the loop's buffers).
struct Rotation<'a, 'p, B: Backend> {
    b: &'a B,
    prep: &'a Prepared<B>,
    p: &'a MatchParams<'p, B>,
    tshape: &'a [usize],
    tbox: &'a mut Arr<B, FloatOf<B>>,
    scratch: &'a mut Arr<B, FloatOf<B>>,
    filter_bufs: Option<&'a mut TemplateFilterBuffers<B>>,
}

impl<B: Backend> Rotation<'_, '_, B> {
    /// Rotation `r`'s template (and the score's mask) rotated, filtered and standardised, its
    /// box written into the grid's FFT buffer; returns the mask sum and the rotation's
    /// pull-back `(matrix, offset)`.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &mut self,
        r: usize,
        state: &mut ScoreState<B>,
        grid: &mut Grid<B>,
    ) -> Result<(AccumOf<B>, Vec<f64>, Vec<f64>)> {
        let (b, p, prep) = (self.b, self.p, self.prep);
        let single = std::mem::size_of::<FloatOf<B>>() == 4;
        let (m, off) = pull_back(p.rotations.matrix(r), self.tshape, single, p.pytme_frame);
        // Rotated template (and the score's mask) in the template box.
        match &p.prerotated {
            Some(pr) => b.copy(&pr.templates[r], self.tbox)?,
            None => b.affine_transform_reversed_in(
                &prep.side().template_src,
                &m,
                &off,
                p.interpolation,
                p.pytme_frame,
                self.tbox,
            )?,
        }
        // The template filter acts on the rotated template (the wedge is fixed in the target's
        // frame), before the score's normalisation; the mask is not filtered.
        if let (Some(f), Some(bufs)) = (&prep.template_filter, self.filter_bufs.as_deref_mut()) {
            f.apply(b, bufs, self.tbox)?;
        }
        let n = state.rotate_mask(b, p, prep, r, (&m, &off))?;
        state.standardize(b, prep, self.tbox, n, self.scratch)?;
        b.write_corner(self.tbox, &mut grid.tpad)?;
        Ok((n, m, off))
    }
}
