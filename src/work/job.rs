//! The owned job: what to compute, as host arrays and options (`Send + Sync`: it crosses
//! threads of other backends and MPI ranks), run over any rotation range on any backend.

use std::ops::Range;

use ndarray::{ArrayD, IxDyn};

use crate::algo::filters::{FilterSpec, Filters, SpectralFilter};
use crate::algo::matching::{
    Background, BackgroundScores, MatchParams, MatchResult, Score, ScoreMoments, Seeds,
    TemplateInput, background_grid, match_templates_raw_owned,
};
use crate::algo::rotations::RotationSet;
use crate::dispatch::PrecisionChoice;
use crate::host_array::HostArray;
use crate::{Arr, AxisOrder, Backend, Error, FloatOf, Index, IntOf, Interpolation, Real, Result};

use super::control::Control;
use super::input::JobArray;
use super::part::{Maps, Part};

/// Where a job searches: a target-shaped binary scheduling mask and/or one `start..stop` per
/// axis (see [`MatchParams::scheduling_mask`] and [`MatchParams::search_box`]).
#[derive(Debug, Clone, Default)]
pub struct Restriction {
    /// The scheduling mask (target-shaped, 0 or 1).
    pub mask: Option<HostArray>,
    /// One `start..stop` per axis.
    pub ranges: Option<Vec<(usize, usize)>>,
}

/// A further template of a job ([`MatchJob::more_templates`]) and its mask.
#[derive(Debug, Clone)]
pub struct ExtraTemplate {
    /// The template (the shape of the job's first).
    pub template: HostArray,
    /// Its mask (template-shaped); `None`: none, as without [`MatchJob::template_mask`].
    pub mask: Option<HostArray>,
}

/// One template-matching job, owned: host inputs, options, the filters' spec and the search
/// restriction. Build with [`MatchJob::new`] and set fields; run it with an executor
/// ([`super::Serial`], [`super::Threads`]) or piece by piece with [`MatchJob::run_range`] and
/// [`MatchJob::finish`].
#[derive(Debug, Clone)]
pub struct MatchJob {
    /// The target (2-D or 3-D): host data, or a foreign buffer adopted on the device it lives
    /// on ([`JobArray`]).
    pub target: JobArray,
    /// The template (as many axes as the target, no larger), host data or a foreign buffer.
    pub template: JobArray,
    /// Template mask ([`MatchParams::template_mask`]).
    pub template_mask: Option<HostArray>,
    /// Templates 1, 2, … matched in the same pass as `template` (template 0, with
    /// `template_mask`), against one preparation of the target
    /// ([`match_templates_raw`](crate::algo::matching::match_templates_raw)): the maps keep
    /// per voxel the best score over the templates (ties to the lower template), its template
    /// and its rotation. Empty: one template.
    pub more_templates: Vec<ExtraTemplate>,
    /// Target mask ([`MatchParams::target_mask`], MCC).
    pub target_mask: Option<HostArray>,
    /// The rotations searched.
    pub rotations: RotationSet,
    /// The score.
    pub score: Score,
    /// Rotation interpolation.
    pub interpolation: Interpolation,
    /// Symmetric edge padding ([`MatchParams::pad_edges`]).
    pub pad_edges: bool,
    /// Upper bound on the bytes a run may use ([`MatchParams::memory_limit`]).
    pub memory_limit: Option<u64>,
    /// The Fourier filters, built on each backend that runs the job.
    pub filters: Option<FilterSpec>,
    /// Per-voxel score statistics ([`MatchParams::score_stats`]).
    pub score_stats: bool,
    /// Background correction ([`MatchParams::background`]).
    pub background: Option<Background>,
    /// The search restriction.
    pub search: Restriction,
    /// The precision the executors run the job in (their options' precision is replaced).
    pub precision: PrecisionChoice,
    /// How pytme holds the arrays ([`MatchParams::pytme_frame`]): the frame of the scrambling
    /// noise and the rotation's edge test. Filters take theirs from their spec.
    pub pytme_frame: AxisOrder,
    /// A seeded search (local refinement, [`MatchParams::seeds`]): each seed searches its own
    /// rotations of [`MatchJob::rotations`] within its radius. A split into rotation ranges
    /// gives each part the seeds' rotations in its range ([`Seeds::for_range`]), and merges to
    /// the same bits.
    pub seeds: Option<Seeds>,
}

/// A job's arrays on one backend, and the filters built there (whitening reads the target).
pub struct Uploaded<B: Backend> {
    /// The target.
    pub target: Arr<B, FloatOf<B>>,
    /// The template.
    pub template: Arr<B, FloatOf<B>>,
    template_mask: Option<Arr<B, FloatOf<B>>>,
    more: Vec<(Arr<B, FloatOf<B>>, Option<Arr<B, FloatOf<B>>>)>,
    target_mask: Option<Arr<B, FloatOf<B>>>,
    filters: Option<Filters>,
    scheduling_mask: Option<Arr<B, FloatOf<B>>>,
}

impl MatchJob {
    /// A job with pytme's defaults: no masks, cubic interpolation, circular correlation, no
    /// filter, no limit, no statistics, no background, the whole target, the arrays in pytme's
    /// order ([`AxisOrder::Pytme`]); double precision for float64/int64 targets, else single
    /// ([`PrecisionChoice::of_input`]).
    ///
    /// `target` and `template` are host data ([`HostArray`]) or foreign buffers
    /// ([`ForeignBuffer`](crate::backend::ForeignBuffer): the job then runs on the backend of
    /// their device, [`MatchJob::run_whole`] keeping the result there).
    pub fn new(
        target: impl Into<JobArray>,
        template: impl Into<JobArray>,
        score: Score,
        rotations: RotationSet,
    ) -> Self {
        let (target, template) = (target.into(), template.into());
        MatchJob {
            precision: target.precision(),
            target,
            template,
            template_mask: None,
            more_templates: Vec::new(),
            target_mask: None,
            rotations,
            score,
            interpolation: Interpolation::Cubic,
            pad_edges: false,
            memory_limit: None,
            filters: None,
            score_stats: false,
            background: None,
            search: Restriction::default(),
            pytme_frame: AxisOrder::Pytme,
            seeds: None,
        }
    }

    /// Uploads the job's arrays to `b` in its float type (foreign buffers adopted on their
    /// device: [`JobArray::to_backend`]) and builds the filters there.
    pub fn upload<B: Backend>(&self, b: &B) -> Result<Uploaded<B>> {
        // One host copy per array: the stored type is uploaded from its own buffer (a
        // borrowed buffer, `HostArray::Borrowed`, read in place where its owner put it);
        // another type is converted once and the converted array handed over (the CPU backend
        // takes it without a copy). Was: converted (or cloned) first, then copied by the upload.
        // `run_range` hands the uploaded target to the run as its working target, so on the
        // CPU backend this upload is the target's only copy.
        let up = |a: &HostArray| match a.float_view::<FloatOf<B>>() {
            Some(v) => b.upload(v),
            None => b.upload_owned(a.to_float::<FloatOf<B>>()),
        };
        let (target, template) = {
            // The command's `--trace` shows the inputs' upload as its own span.
            #[cfg(feature = "cli")]
            let _s = tracing::info_span!("upload").entered();
            (
                self.target.to_backend(b, "target")?,
                self.template.to_backend(b, "template")?,
            )
        };
        let template_mask = self.template_mask.as_ref().map(up).transpose()?;
        let more = self
            .more_templates
            .iter()
            .map(|t| Ok((up(&t.template)?, t.mask.as_ref().map(up).transpose()?)))
            .collect::<Result<Vec<_>>>()?;
        let target_mask = self.target_mask.as_ref().map(up).transpose()?;
        let scheduling_mask = self.search.mask.as_ref().map(up).transpose()?;
        let filters = self
            .filters
            .as_ref()
            .map(|s| s.build(b, &target, self.template.shape()))
            .transpose()?;
        Ok(Uploaded {
            target,
            template,
            template_mask,
            more,
            target_mask,
            filters,
            scheduling_mask,
        })
    }

    /// The matching parameters of this job over its uploaded arrays (no progress callback).
    pub fn params<'a, B: Backend>(&'a self, up: &'a Uploaded<B>) -> MatchParams<'a, B> {
        self.params_of(
            up.template_mask.as_ref(),
            up.target_mask.as_ref(),
            up.filters.as_ref(),
            up.scheduling_mask.as_ref(),
        )
    }

    /// [`MatchJob::params`] over the uploaded arrays one by one (template mask, target mask,
    /// filters, scheduling mask), for a caller that moved the target out of [`Uploaded`].
    fn params_of<'a, B: Backend>(
        &'a self,
        template_mask: Option<&'a Arr<B, FloatOf<B>>>,
        target_mask: Option<&'a Arr<B, FloatOf<B>>>,
        filters: Option<&'a Filters>,
        scheduling_mask: Option<&'a Arr<B, FloatOf<B>>>,
    ) -> MatchParams<'a, B> {
        let mut p = MatchParams::new(self.score, self.rotations.clone());
        p.template_mask = template_mask;
        p.target_mask = target_mask;
        p.filters = filters.map(|f| f as &dyn SpectralFilter);
        p.pad_edges = self.pad_edges;
        p.interpolation = self.interpolation;
        p.memory_limit = self.memory_limit;
        p.score_stats = self.score_stats;
        p.background = self.background;
        p.scheduling_mask = scheduling_mask;
        p.search_box = self.search.ranges.as_deref();
        p.pytme_frame = self.pytme_frame;
        p.seeds = self.seeds.as_ref();
        p
    }

    /// Runs rotations `range` of the job on `b` as worker `worker` of `control` (progress,
    /// stop, test hooks), and downloads the result as a [`Part`] (rotation indices into the
    /// whole set). An empty range is [`Part::empty`], without touching the backend.
    pub fn run_range<B: Backend>(
        &self,
        b: &B,
        range: Range<usize>,
        control: &Control<'_>,
        worker: usize,
    ) -> Result<Part> {
        let nrot = self.rotations.len();
        if range.end > nrot || range.start > range.end {
            return Err(Error::invalid(
                "range",
                format!("rotations {range:?} of a set of {nrot}"),
            ));
        }
        if range.is_empty() {
            return Ok(Part::empty());
        }
        let r = self.run_raw(b, range.clone(), control, worker)?;
        let widen = |a: ArrayD<FloatOf<B>>| a.iter().map(|v| v.as_f64()).collect::<Vec<f64>>();
        let scores = widen(b.download(&r.scores)?);
        // Several templates: the part's index is the (template, rotation) pair's,
        // `template · rotations + rotation` over the whole set, so that the one merge rule
        // (greatest score, then the lower index) ties to the lower template, then rotation.
        let templates = match &r.template_index {
            Some(t) => b.download(t)?.iter().map(|v| v.to_usize()).collect(),
            None => vec![Some(0); scores.len()],
        };
        let index = b
            .download(&r.rotation_index)?
            .iter()
            .zip(templates)
            .map(|(v, t)| match (v.to_usize(), t) {
                (Some(u), Some(t)) => (t * nrot + u + range.start) as i64,
                _ => -1,
            })
            .collect();
        // The moments (32 bytes per voxel) taken over, not copied twice: the CPU's own buffer.
        let moments = match r.moments {
            Some(m) => Some((c_order_vec(b.download_owned(m.acc)?), m.scale)),
            None => None,
        };
        let background = match &r.background {
            Some(bg) => Some((widen(b.download(&bg.map)?), bg.count)),
            None => None,
        };
        let maps = Maps {
            scores,
            index,
            moments,
            background,
        };
        Ok(Part::new(range, r.ssum_parts, maps))
    }

    /// Rotations `range` (non-empty, checked by the callers) of the job on `b`: the raw result
    /// (background not yet subtracted, indices into the range's rotations), kept on `b`.
    fn run_raw<B: Backend>(
        &self,
        b: &B,
        range: Range<usize>,
        control: &Control<'_>,
        worker: usize,
    ) -> Result<MatchResult<B>> {
        let nrot = self.rotations.len();
        if range.end > nrot || range.start >= range.end {
            return Err(Error::invalid(
                "range",
                format!("rotations {range:?} of a set of {nrot}"),
            ));
        }
        // The target moves into the run (its working target: no copy of the upload).
        let Uploaded {
            target,
            template,
            template_mask,
            more,
            target_mask,
            filters,
            scheduling_mask,
        } = self.upload(b)?;
        let d = self.rotations.dim();
        let flat = &self.rotations.as_flat()[range.start * d * d..range.end * d * d];
        let seeds = self.seeds.as_ref().map(|s| s.for_range(range.clone()));
        let mut params = self.params_of(
            template_mask.as_ref(),
            target_mask.as_ref(),
            filters.as_ref(),
            scheduling_mask.as_ref(),
        );
        params.rotations = RotationSet::from_matrices(d, flat)?;
        params.seeds = seeds.as_ref();
        let len = range.len();
        let cb = |done: usize, total: usize| control.step(worker, done, total, len);
        params.progress = Some(&cb);
        // Uncorrected: the background is subtracted once, after the merge (`finish`).
        let mut templates = vec![TemplateInput {
            template: &template,
            mask: template_mask.as_ref(),
        }];
        templates.extend(more.iter().map(|(t, m)| TemplateInput {
            template: t,
            mask: m.as_ref(),
        }));
        if templates.len() > 1 {
            params.template_mask = None;
        }
        match_templates_raw_owned(b, target, &templates, &params)
    }

    /// Runs every rotation of the job on `b` (one item, one device) and keeps the result
    /// there: no [`Part`], the maps never downloaded, the inputs adopted on `b`'s device when
    /// they are foreign buffers. Bit for bit what [`MatchJob::finish`] of
    /// [`MatchJob::run_range`] over all rotations gives (scores, indices, Σ score², tiles,
    /// moments, background). Progress and stop as worker `worker` of `control`.
    pub fn run_whole<B: Backend>(
        &self,
        b: &B,
        control: &Control<'_>,
        worker: usize,
    ) -> Result<MatchResult<B>> {
        let nrot = self.rotations.len();
        control.set_total(nrot as u64);
        let mut r = self.run_raw(b, 0..nrot, control, worker)?;
        control.item_done(worker, nrot);
        // What `finish` computes from the one part: the partials folded in the loop's order
        // (one range covering every rotation: the order they were made in).
        let ntemplates = 1 + self.more_templates.len();
        let sum = r.ssum_parts.iter().fold(0.0f64, |a, &p| a + p);
        let voxels: usize = self.target.shape().iter().product();
        r.ssum = sum / (voxels as f64 * nrot as f64 * ntemplates as f64);
        r.tiles = r.ssum_parts.len() / nrot / ntemplates;
        r.rotations = self.rotations.clone();
        r.n_rotations = nrot;
        r.background_shift = None;
        r.apply_background(b)?;
        Ok(r)
    }

    /// The job's result from the merge of parts covering every rotation once: what
    /// [`match_template`](crate::algo::matching::match_template) over the whole set returns,
    /// bit for bit. The only place a result is assembled from parts.
    pub fn finish<B: Backend>(&self, b: &B, part: Part) -> Result<MatchResult<B>> {
        let nrot = self.rotations.len();
        // Several templates: each part's partials are (tile, template) blocks of its range.
        let ntemplates = 1 + self.more_templates.len();
        let (ssum_parts, sum, blocks) = part.ordered_ssum(nrot)?;
        let maps = part
            .maps
            .ok_or_else(|| Error::invalid("parts", "no part holds maps"))?;
        let shape = self.target.shape().to_vec();
        let bad = |e: ndarray::ShapeError| Error::invalid("parts", e.to_string());
        let narrow = |s: &[usize], v: Vec<f64>| -> Result<ArrayD<FloatOf<B>>> {
            ArrayD::from_shape_vec(
                IxDyn(s),
                v.into_iter().map(FloatOf::<B>::from_f64).collect(),
            )
            .map_err(bad)
        };
        let ints = |f: &dyn Fn(i64) -> i64| -> Result<ArrayD<IntOf<B>>> {
            ArrayD::from_shape_vec(
                IxDyn(&shape),
                maps.index
                    .iter()
                    .map(|&i| IntOf::<B>::from_i64(if i < 0 { -1 } else { f(i) }))
                    .collect(),
            )
            .map_err(bad)
        };
        let n = nrot as i64;
        let index = ints(&|i| i % n)?;
        let template_index = match ntemplates {
            1 => None,
            _ => Some(b.upload_owned(ints(&|i| i / n)?)?),
        };
        let voxels: usize = shape.iter().product();
        let mut r = MatchResult {
            scores: b.upload_owned(narrow(&shape, maps.scores)?)?,
            rotation_index: b.upload_owned(index)?,
            rotations: self.rotations.clone(),
            n_rotations: nrot,
            ssum: sum / (voxels as f64 * nrot as f64 * ntemplates as f64),
            ssum_parts,
            tiles: blocks / ntemplates,
            template_index,
            background_shift: None,
            background: match maps.background {
                Some((map, count)) => {
                    let g = background_grid(&shape, self.template.shape(), self.pad_edges).0;
                    Some(BackgroundScores {
                        map: b.upload_owned(narrow(&g, map)?)?,
                        count,
                    })
                }
                None => None,
            },
            moments: match maps.moments {
                Some((words, scale)) => {
                    let mshape: Vec<usize> = shape.iter().copied().chain([4]).collect();
                    let acc = ArrayD::from_shape_vec(IxDyn(&mshape), words).map_err(bad)?;
                    Some(ScoreMoments {
                        acc: b.upload_owned(acc)?,
                        scale,
                    })
                }
                None => None,
            },
        };
        // Every rotation's background is merged in: subtract it once.
        r.apply_background(b)?;
        Ok(r)
    }
}

/// The elements of `a` in C order: its own buffer, without a copy, when `a` is in standard
/// layout (as a download is).
fn c_order_vec<T: Clone>(a: ArrayD<T>) -> Vec<T> {
    if !a.is_standard_layout() {
        return a.iter().cloned().collect();
    }
    let n = a.len();
    // Standard layout: the `n` elements lie in order from the offset.
    let (mut v, offset) = a.into_raw_vec_and_offset();
    let offset = offset.unwrap_or(0);
    v.truncate(offset + n);
    v.drain(..offset);
    v
}

/// [`MatchJob::run_range`] as a [`BackendTask`](crate::BackendTask), for a caller that picks
/// the backend at run time ([`dispatch`](fn@crate::dispatch)).
pub struct RunRange<'a, 'c> {
    /// The job.
    pub job: &'a MatchJob,
    /// The rotations.
    pub range: Range<usize>,
    /// Progress, stop and hooks.
    pub control: &'a Control<'c>,
    /// The worker this runs as.
    pub worker: usize,
}

impl crate::BackendTask for RunRange<'_, '_> {
    type Output = Part;
    fn run<B: Backend>(self, b: &B) -> Result<Part> {
        self.job.run_range(b, self.range, self.control, self.worker)
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{ArrayD, IxDyn, s};

    use super::c_order_vec;

    #[test]
    fn c_order_vec_is_the_elements_in_c_order_whatever_the_layout() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), (0..6).collect()).unwrap();
        assert_eq!(c_order_vec(a.clone()), vec![0, 1, 2, 3, 4, 5]);
        // Transposed: not standard layout.
        assert_eq!(c_order_vec(a.t().to_owned()), vec![0, 3, 1, 4, 2, 5]);
        let mut t = a.clone().reversed_axes();
        assert_eq!(c_order_vec(t.clone()), vec![0, 3, 1, 4, 2, 5]);
        // Sliced in place: standard layout from an offset into a longer buffer.
        t = a.clone();
        t.slice_collapse(s![1.., ..]);
        assert!(t.is_standard_layout());
        assert_eq!(c_order_vec(t), vec![3, 4, 5]);
        let mut u = a;
        u.slice_collapse(s![..1, ..]);
        assert_eq!(c_order_vec(u), vec![0, 1, 2]);
        assert!(c_order_vec(ArrayD::<i64>::zeros(IxDyn(&[0, 3]))).is_empty());
    }
}
