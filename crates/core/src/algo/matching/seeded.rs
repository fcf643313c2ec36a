//! Seeded search (local refinement): each seed searches its own rotations in its own
//! neighbourhood ([`MatchParams::seeds`]).
//!
//! A seed is a position and a range of the run's rotations (e.g. a cone around the particle's
//! orientation from a coarse search). For every seed the run scores only the box around it
//! (its neighbourhood's bounding box, `position ± ⌊radius⌋` per axis, clipped to the target
//! and to a [search box](MatchParams::search_box) / [scheduling
//! mask](MatchParams::scheduling_mask) when given) and only the seed's rotations, through the
//! same jobs a [restricted search](super#restricting-the-search) runs: each box reads its
//! window and the template's reach from the extension the whole run reads, after the target
//! was filtered and preprocessed once for the whole run, so the scores inside are the whole
//! run's with those rotations (to FFT round-off) and the work is proportional to the boxes,
//! not to the target.
//!
//! The neighbourhood of a seed at `s` with radii `r` is the ellipsoid `Σ (y_k/r_k)² ≤ 1` over
//! the axes with `r_k > 0` (and `y_k = 0` on an axis with `r_k = 0`), where `y = x − s` for a
//! seed without a pose ([`Seed::pose`]), and `y = R·(x − s)` for a seed with pose `R` (a matrix
//! of the set: the particle's own axes, so the radii lie along the particle's `z, y, x` axes
//! `Rᵀ·e_k`, as the template rotated by `R` holds them). That is pytme's
//! `--orientations-uncertainty` acceptance ellipsoid, which pytme orients by each seed's
//! rotation when the radii differ (`create_mask(…, orientation=Rᵀ)`, `y = R·(x − s)` in pytme's
//! pull-back convention, the one of [`RotationSet`](crate::algo::rotations::RotationSet)); a
//! sphere is the same either way. With a pose, the test allows round-off of `1e-9` (a point on
//! the surface of an axis-aligned pose stays inside).
//! Where neighbourhoods overlap, the maps keep the one merge rule: the greater score, ties to
//! the lower rotation index. Positions in no neighbourhood hold score −∞ and rotation index
//! −1, as for the other restrictions. `ssum` is Σ score² over every box scored (each seed's
//! whole box, for its rotations) / (target voxels · rotations); [`MatchResult::ssum_parts`]
//! holds one partial per (template, rotation) of the set, each the left fold over the seeds
//! (in order) and their tiles that ran that rotation, so a run split into rotation ranges
//! ([`Seeds::for_range`]) folds to the same bits.

use std::ops::Range;

use crate::backend::{Arr, ArrayMeta, Backend, FloatOf, IntOf};
use crate::dtype::{Index, Real};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::fast_shape;

use super::job::Job;
use super::plan::plan_box;
use super::prepare::Prepared;
use super::run::run_job;
use super::search::Region;
use super::state::ScoreState;
use super::{MatchParams, MatchResult, Score, shift_windows, window_extension};

/// One seed of a [`Seeds`] search: where it is, which rotations it searches and how its
/// neighbourhood is oriented.
#[derive(Debug, Clone, PartialEq)]
pub struct Seed {
    /// Its voxel, one index per axis of the target (array order, `(z, y, x)`).
    pub position: Vec<usize>,
    /// Its rotations: indices `start..end` into [`MatchParams::rotations`]. Seeds may share
    /// rotations (two particles seen alike).
    pub rotations: Range<usize>,
    /// Its pose: a `d × d` rotation matrix, row-major, in array-index axes and the pull-back
    /// convention of the rotation sets (the particle's pose, e.g. the seed's own rotation
    /// before its cone). The neighbourhood's radii then lie along the particle's axes (module
    /// docs); `None`: along the target's axes.
    pub pose: Option<Vec<f64>>,
}

/// Round-off allowed by the neighbourhood test of a seed with a pose.
const POSE_EPS: f64 = 1e-9;

impl Seed {
    /// Component `k` of `y = R·(x − s)` (or of `x − s` without a pose) for a position `x`
    /// (computed in place: the test runs per voxel of a box).
    fn local(&self, x: &[usize], k: usize) -> f64 {
        let d = |j: usize| x[j] as f64 - self.position[j] as f64;
        match &self.pose {
            None => d(k),
            Some(r) => {
                let n = x.len();
                (0..n).map(|j| r[k * n + j] * d(j)).sum()
            }
        }
    }

    /// The half-widths of the bounding box of its neighbourhood with radii `radius`, per
    /// axis: `⌊r_j⌋` without a pose, else `⌊√Σ_k (R_kj · r_k)²⌋` (the extent of the rotated
    /// ellipsoid along axis `j`, with the test's round-off allowance).
    fn half_widths(&self, radius: &[f64]) -> Vec<usize> {
        match &self.pose {
            None => radius.iter().map(|r| r.floor() as usize).collect(),
            Some(m) => {
                let n = radius.len();
                (0..n)
                    .map(|j| {
                        let h = (0..n)
                            .map(|k| (m[k * n + j] * radius[k]).powi(2))
                            .sum::<f64>()
                            .sqrt();
                        (h * (1.0 + POSE_EPS) + POSE_EPS).floor() as usize
                    })
                    .collect()
            }
        }
    }
}

/// A seeded search: every seed searches only its own rotations within `radius` of its
/// position (module docs of `seeded.rs`; [`MatchParams::seeds`]).
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use monomorph::prelude::*;
/// use monomorph::algo::matching::{Seed, Seeds};
/// use monomorph::ndarray::{Array2, Ix2, s};
///
/// let b = Cpu::<Single>::new();
/// let template = Array2::from_shape_fn((7, 7), |(y, x)| ((y * 7 + x * 3) % 5) as f32);
/// let mut target = Array2::<f32>::zeros((48, 48));
/// target.slice_mut(s![20..27, 8..15]).assign(&template); // centre (23, 11)
/// let (t, p) = (b.upload_array(&target)?, b.upload_array(&template)?);
///
/// // Two seeds, each with its own 12 angles: the coarse guesses (22, 12) and (40, 40).
/// let one = RotationSet::uniform(2, 30.0)?;
/// let mut flat = one.as_flat().to_vec();
/// flat.extend_from_slice(one.as_flat());
/// let rotations = RotationSet::from_matrices(2, &flat)?; // seed 0: 0..12, seed 1: 12..24
/// let seeds = Seeds::new(
///     vec![
///         Seed { position: vec![22, 12], rotations: 0..12, pose: None },
///         Seed { position: vec![40, 40], rotations: 12..24, pose: None },
///     ],
///     vec![2.0, 2.0],
/// );
/// let mut params = MatchParams::new(Score::FLC, rotations);
/// params.seeds = Some(&seeds);
/// let result = match_template(&b, &t, &p, &params)?;
///
/// let scores = b.download_as::<f32, Ix2>(&result.scores)?;
/// let index = b.download_as::<i64, Ix2>(&result.rotation_index)?;
/// assert!(scores[[23, 11]] > 0.99 && index[[23, 11]] == 0); // found, seed 0's identity
/// assert_eq!(scores[[22, 15]], f32::NEG_INFINITY); // 3 voxels away: not searched
/// assert!(index[[40, 42]] >= 12 && index[[40, 43]] == -1); // seed 1's own rotations only
/// # Ok::<(), monomorph::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Seeds {
    /// The seeds, in order.
    pub seeds: Vec<Seed>,
    /// The neighbourhood's radius in voxels per axis of the target (finite, ≥ 0; one value
    /// per axis).
    pub radius: Vec<f64>,
}

impl Seeds {
    /// Seeds with the neighbourhood radius `radius` (one per axis).
    pub fn new(seeds: Vec<Seed>, radius: Vec<f64>) -> Self {
        Seeds { seeds, radius }
    }

    /// What a part of the run that searches rotations `range` of the set searches: each
    /// seed's rotations within `range`, re-based to `range.start` (the set of such a part is
    /// rotations `range`); seeds with none there are dropped, the others keep their order.
    pub fn for_range(&self, range: Range<usize>) -> Seeds {
        let seeds = self
            .seeds
            .iter()
            .filter_map(|s| {
                let lo = s.rotations.start.max(range.start);
                let hi = s.rotations.end.min(range.end);
                (lo < hi).then(|| Seed {
                    position: s.position.clone(),
                    rotations: lo - range.start..hi - range.start,
                    pose: s.pose.clone(),
                })
            })
            .collect();
        Seeds {
            seeds,
            radius: self.radius.clone(),
        }
    }

    /// The boxes the seeds search inside the searched box `lo..hi` (the whole target
    /// without a restriction; see [`searched_box`](super::searched_box)): each seed's
    /// neighbourhood's bounding box (`position ± ⌊radius⌋` per axis without a pose, the rotated
    /// ellipsoid's extent with one) clipped to it, for every seed with rotations whose clipped
    /// box is not empty, in seed order.
    pub fn boxes<'a>(
        &'a self,
        lo: &'a [usize],
        hi: &'a [usize],
    ) -> impl Iterator<Item = (&'a Seed, Vec<usize>, Vec<usize>)> + 'a {
        self.seeds.iter().filter_map(move |s| {
            if s.rotations.is_empty() {
                return None;
            }
            let half = s.half_widths(&self.radius);
            let blo: Vec<usize> = (0..lo.len())
                .map(|k| s.position[k].saturating_sub(half[k]).max(lo[k]))
                .collect();
            let bhi: Vec<usize> = (0..hi.len())
                .map(|k| (s.position[k] + half[k] + 1).min(hi[k]))
                .collect();
            let empty = blo.iter().zip(&bhi).any(|(a, z)| a >= z);
            (!empty).then_some((s, blo, bhi))
        })
    }

    /// `true` when position `x` lies in the neighbourhood of `seed` (module docs).
    pub fn contains(&self, seed: &Seed, x: &[usize]) -> bool {
        let eps = if seed.pose.is_some() { POSE_EPS } else { 0.0 };
        let mut q = 0.0;
        for (k, &r) in self.radius.iter().enumerate().take(x.len()) {
            let y = seed.local(x, k);
            if r <= 0.0 {
                if y.abs() > eps {
                    return false;
                }
            } else {
                q += (y / r) * (y / r);
            }
        }
        q <= 1.0 + eps
    }

    /// Checks the seeds against a target of shape `ts` and a set of `nrot` rotations.
    pub(super) fn check(&self, ts: &[usize], nrot: usize) -> Result<()> {
        if self.radius.len() != ts.len() {
            return Err(Error::shape(
                "seeds",
                format!("one radius per axis of the target {}", fmt_shape(ts)),
                format!("{} radii", self.radius.len()),
            ));
        }
        if let Some(r) = self.radius.iter().find(|r| !(r.is_finite() && **r >= 0.0)) {
            return Err(Error::invalid(
                "seeds",
                format!("radius {r}: expected a finite number of voxels, 0 or more"),
            ));
        }
        for (k, s) in self.seeds.iter().enumerate() {
            let inside =
                s.position.len() == ts.len() && s.position.iter().zip(ts).all(|(p, n)| p < n);
            if !inside {
                return Err(Error::invalid(
                    "seeds",
                    format!(
                        "seed {k} at {:?} is not a voxel of the target {}",
                        s.position,
                        fmt_shape(ts)
                    ),
                ));
            }
            if let Some(m) = &s.pose
                && !is_rotation(m, ts.len())
            {
                return Err(Error::invalid(
                    "seeds",
                    format!(
                        "seed {k}: its pose {m:?} is not a {d} × {d} rotation matrix",
                        d = ts.len()
                    ),
                ));
            }
            if s.rotations.start > s.rotations.end || s.rotations.end > nrot {
                return Err(Error::invalid(
                    "seeds",
                    format!(
                        "seed {k}: rotations {:?} are not a range of the set of {nrot}",
                        s.rotations
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `true` for a `d × d` row-major matrix of finite values with orthonormal rows (within
/// `1e-6`).
fn is_rotation(m: &[f64], d: usize) -> bool {
    if m.len() != d * d || m.iter().any(|v| !v.is_finite()) {
        return false;
    }
    (0..d).all(|i| {
        (0..d).all(|j| {
            let dot: f64 = (0..d).map(|k| m[i * d + k] * m[j * d + k]).sum();
            (dot - if i == j { 1.0 } else { 0.0 }).abs() <= 1e-6
        })
    })
}

/// Refuses what a seeded search cannot combine with: MCC (it normalises by maxima over the
/// whole grid), score statistics and a background correction (their per-voxel rotation count
/// would differ between neighbourhoods).
pub(super) fn check<B: Backend>(p: &MatchParams<'_, B>, seeds: &Seeds, ts: &[usize]) -> Result<()> {
    let refuse = |what: &str| {
        Err(Error::invalid(
            "seeds",
            format!("a seeded search is not defined with {what}"),
        ))
    };
    if !p.score.tileable() {
        return refuse("MCC (it normalises over the whole grid)");
    }
    if p.score_stats {
        return refuse("score statistics");
    }
    if p.background.is_some() {
        return refuse("a background correction");
    }
    if p.prerotated.is_some() {
        return refuse("pre-rotated templates");
    }
    seeds.check(ts, p.rotations.len())
}

/// The sizes a run's jobs are planned with: the memory limit, the element sizes
/// `(float, index)` and the bytes every job needs besides its FFT grids.
pub(super) struct Sizing {
    pub(super) limit: u64,
    pub(super) sizes: (usize, usize),
    pub(super) fixed: u64,
}

/// The seeded run of [`super::run_templates`], once the target is prepared: every seed's box,
/// its rotations for every template, merged into target-shaped maps (index `t · rotations +
/// r`).
#[allow(clippy::too_many_arguments)]
pub(super) fn run<B: Backend>(
    b: &B,
    prep: &mut Prepared<B>,
    params: &MatchParams<'_, B>,
    seeds: &Seeds,
    region: Option<&Region<B>>,
    (ts, tshape): (&[usize], &[usize]),
    sizing: Sizing,
    ntemplates: usize,
) -> Result<MatchResult<B>> {
    let nrot = params.rotations.len();
    // Plan every seed first (the progress total).
    let whole = (vec![0; ts.len()], ts.to_vec());
    let (rlo, rhi) = region.map_or((&whole.0[..], &whole.1[..]), |r| r.bounds());
    let mut planned: Vec<(&Seed, Vec<Job>)> = Vec::new();
    for (s, lo, hi) in seeds.boxes(rlo, rhi) {
        let mut jobs = plan_box(
            params.score,
            ts,
            tshape,
            &lo,
            &hi,
            !params.pad_edges,
            sizing.limit,
            params.tile_shape.as_deref(),
            sizing.sizes,
            sizing.fixed,
        )?;
        shift_windows(&mut jobs, &prep.origin);
        planned.push((s, jobs));
    }
    let total: usize = planned
        .iter()
        .map(|(s, j)| j.len() * s.rotations.len())
        .sum::<usize>()
        * ntemplates;
    let fast_full = fast_shape(ts);
    let ext = window_extension(params.pad_edges, &fast_full);
    let lowest = <FloatOf<B> as Real>::lowest();
    let none = IntOf::<B>::from_i64(-1);
    let mut scores = b.full(ts, lowest)?;
    let mut index = b.full(ts, none)?;
    let mut partials = vec![0.0f64; ntemplates * nrot];
    let mut ssum = b.zeros::<f64>(&[1])?;
    let mask_state = matches!(params.score, Score::CAM | Score::FLCSphericalMask);
    let (mut step, mut tiles) = (0usize, 0usize);
    for (seed, jobs) in &planned {
        let rots = seed.rotations.clone();
        for job in jobs {
            tiles += 1;
            let mut best = b.full(&job.out_shape, lowest)?;
            let mut best_index = b.full(&job.out_shape, none)?;
            prep.current = 0;
            let (mut grid, mut state, _) = ScoreState::new(b, params, prep, job, ext, tshape)?;
            for t in 0..ntemplates {
                prep.current = t;
                if t > 0 && mask_state && !prep.sides[t].same_mask_as_previous {
                    (grid, state, _) = ScoreState::new(b, params, prep, job, ext, tshape)?;
                }
                let progress = |r: usize| super::report_progress(params, step + r, total);
                let mut parts = Vec::with_capacity(rots.len());
                run_job(
                    b,
                    prep,
                    params,
                    job,
                    (&mut grid, &mut state),
                    t * nrot,
                    rots.clone(),
                    tshape,
                    (&mut best, &mut best_index, None),
                    (&mut ssum, &mut parts),
                    None,
                    &progress,
                    // Seeded runs have no score statistics: nothing to group.
                    1,
                )?;
                step += rots.len();
                for (r, p) in rots.clone().zip(parts) {
                    partials[t * nrot + r] += p;
                }
            }
            merge_box(
                b,
                (seeds, seed),
                region,
                job,
                (&best, &best_index),
                (&mut scores, &mut index),
            )?;
        }
    }
    let ssum_total = partials.iter().fold(0.0f64, |a, &p| a + p);
    let voxels: usize = ts.iter().product();
    Ok(MatchResult {
        scores,
        rotation_index: index,
        rotations: params.rotations.clone(),
        n_rotations: nrot,
        ssum: ssum_total / (voxels as f64 * nrot as f64 * ntemplates as f64),
        ssum_parts: partials,
        tiles,
        moments: None,
        background: None,
        background_shift: None,
        template_index: None,
    })
}

/// Merges a seed's box maps `(best, best_index)` (job `job`'s output box) into the run's maps
/// at the positions of the seed's neighbourhood (and of the region's mask): the greater score
/// wins, ties to the lower index. Only the box crosses to the host.
fn merge_box<B: Backend>(
    b: &B,
    (seeds, at): (&Seeds, &Seed),
    region: Option<&Region<B>>,
    job: &Job,
    (best, best_index): (&Arr<B, FloatOf<B>>, &Arr<B, IntOf<B>>),
    (scores, index): (&mut Arr<B, FloatOf<B>>, &mut Arr<B, IntOf<B>>),
) -> Result<()> {
    let (off, shape) = (&job.out_offset, &job.out_shape);
    let ts = scores.shape().to_vec();
    let mut ks = b.zeros::<FloatOf<B>>(shape)?;
    let mut ki = b.full(shape, IntOf::<B>::from_i64(-1))?;
    b.crop(scores, off, &mut ks)?;
    b.crop(index, off, &mut ki)?;
    let (mut hs, mut hi) = (b.download(&ks)?, b.download(&ki)?);
    let (ns, ni) = (b.download(best)?, b.download(best_index)?);
    let mut x = vec![0usize; ts.len()];
    for (((u, s), i), (&n, &m)) in hs
        .indexed_iter_mut()
        .zip(hi.iter_mut())
        .zip(ns.iter().zip(ni.iter()))
    {
        for k in 0..ts.len() {
            x[k] = off[k] + u[k];
        }
        if !seeds.contains(at, &x) {
            continue;
        }
        if let Some(r) = region {
            let flat = x.iter().zip(&ts).fold(0usize, |a, (&v, &n)| a * n + v);
            if !r.in_mask(flat) {
                continue;
            }
        }
        // The one merge rule: a value replaces none; the greater score wins; ties (−0 and +0
        // included) keep the lower index.
        let replaces =
            m.to_usize().is_some() && (i.to_usize().is_none() || n > *s || (!(*s > n) && m < *i));
        if replaces {
            (*s, *i) = (n, m);
        }
    }
    b.insert_block(&b.upload_owned(hs)?, off, scores)?;
    b.insert_block(&b.upload_owned(hi)?, off, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbourhoods_and_ranges() {
        let s = Seeds::new(
            vec![
                Seed {
                    position: vec![5, 5, 5],
                    rotations: 0..4,
                    pose: None,
                },
                Seed {
                    position: vec![1, 2, 3],
                    rotations: 4..10,
                    pose: None,
                },
            ],
            vec![2.0, 1.0, 0.0],
        );
        let s0 = &s.seeds[0];
        assert!(s.contains(s0, &[7, 5, 5]));
        assert!(!s.contains(s0, &[7, 6, 5]));
        assert!(!s.contains(s0, &[5, 5, 6]));
        let r = s.for_range(3..6);
        assert_eq!(r.seeds[0].rotations, 0..1);
        assert_eq!(r.seeds[1].rotations, 1..3);
        assert_eq!(s.for_range(5..10).seeds.len(), 1);
        assert!(s.check(&[8, 8, 8], 10).is_ok());
        assert!(s.check(&[8, 8, 8], 9).is_err());
        assert!(s.check(&[8, 8, 5], 10).is_err());
        let mut bad = s.clone();
        bad.radius[0] = f64::NAN;
        assert!(bad.check(&[8, 8, 8], 10).is_err());
        let mut bad = s.clone();
        bad.seeds[0].pose = Some(vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0]);
        assert!(bad.check(&[8, 8, 8], 10).is_err());
        bad.seeds[0].pose = Some(vec![1.0; 4]);
        assert!(bad.check(&[8, 8, 8], 10).is_err());
    }

    /// The ellipsoid of a seed with a pose lies along the particle's axes (pytme orients its
    /// acceptance ellipsoid by the seed's rotation): radii (z, y, x) = (3, 1, 0) with the pose
    /// `R` that takes array axis z to y (`y = R·d`: `y_z = d_y`, `y_y = −d_z`, `y_x = d_x`),
    /// so the long radius lies along the target's y. Checked against every voxel of the box
    /// by brute force, and the box is the rotated ellipsoid's.
    #[test]
    fn a_pose_orients_the_neighbourhood() {
        let r = vec![0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let seed = |pose| Seed {
            position: vec![5, 5, 5],
            rotations: 0..1,
            pose,
        };
        let s = Seeds::new(vec![seed(Some(r)), seed(None)], vec![3.0, 1.0, 0.0]);
        assert!(s.check(&[12, 12, 12], 1).is_ok());
        let (posed, plain) = (&s.seeds[0], &s.seeds[1]);
        // Along the target's y up to 3, along z up to 1; none off the plane x = 5.
        for (x, inside) in [
            ([5, 8, 5], true),
            ([5, 2, 5], true),
            ([6, 5, 5], true),
            ([7, 5, 5], false),
            ([5, 9, 5], false),
            ([5, 5, 6], false),
            ([6, 7, 5], false), // (1/1)² + (2/3)² > 1
        ] {
            assert_eq!(s.contains(posed, &x), inside, "{x:?}");
        }
        // Without the pose, the long radius lies along z, as before.
        assert!(s.contains(plain, &[8, 5, 5]) && !s.contains(plain, &[5, 8, 5]));
        let boxes: Vec<_> = s.boxes(&[0, 0, 0], &[12, 12, 12]).collect();
        assert_eq!(
            (boxes[0].1.clone(), boxes[0].2.clone()),
            (vec![4, 2, 5], vec![7, 9, 6])
        );
        assert_eq!(
            (boxes[1].1.clone(), boxes[1].2.clone()),
            (vec![2, 4, 5], vec![9, 7, 6])
        );
        // A general pose: the box holds every point of the neighbourhood, and its faces touch it.
        let (a, b) = (0.7f64, 0.3f64);
        let (ca, sa, cb, sb) = (a.cos(), a.sin(), b.cos(), b.sin());
        let m = vec![ca, -sa * cb, sa * sb, sa, ca * cb, -ca * sb, 0.0, sb, cb];
        let s = Seeds::new(vec![seed(Some(m))], vec![4.0, 2.5, 1.5]);
        let (_, lo, hi) = s.boxes(&[0, 0, 0], &[12, 12, 12]).next().unwrap();
        let mut touch = [[false; 2]; 3];
        for z in 0..12 {
            for y in 0..12 {
                for x in 0..12 {
                    let p = [z, y, x];
                    if s.contains(&s.seeds[0], &p) {
                        assert!((0..3).all(|k| lo[k] <= p[k] && p[k] < hi[k]), "{p:?}");
                        for k in 0..3 {
                            touch[k][0] |= p[k] == lo[k];
                            touch[k][1] |= p[k] + 1 == hi[k];
                        }
                    }
                }
            }
        }
        assert_eq!(touch, [[true; 2]; 3], "{lo:?}..{hi:?}");
    }

    #[test]
    fn boxes_are_clipped_to_the_searched_box() {
        let seed = |position: Vec<usize>, rotations| Seed {
            position,
            rotations,
            pose: None,
        };
        let s = Seeds::new(
            vec![
                seed(vec![5, 5, 5], 0..4),
                seed(vec![1, 2, 3], 4..10),
                seed(vec![6, 6, 6], 10..10), // no rotations: no box
            ],
            vec![2.0, 1.5, 0.0],
        );
        let ts = [8, 8, 8];
        let whole: Vec<_> = s
            .boxes(&[0, 0, 0], &ts)
            .map(|(s, lo, hi)| (s.position.clone(), lo, hi))
            .collect();
        assert_eq!(
            whole,
            vec![
                (vec![5, 5, 5], vec![3, 4, 5], vec![8, 7, 6]),
                (vec![1, 2, 3], vec![0, 1, 3], vec![4, 4, 4]),
            ]
        );
        // A search box and a scheduling mask: the second seed's box is outside.
        let mut mask = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&ts));
        mask[[6, 5, 5]] = 1.0;
        mask[[4, 7, 5]] = 1.0;
        let ranges = [(2, 8), (0, 8), (4, 8)];
        let (lo, hi) =
            super::super::searched_box(Some(&ranges[..]), Some(mask.view()), &ts).unwrap();
        assert_eq!((lo.clone(), hi.clone()), (vec![4, 5, 5], vec![7, 8, 6]));
        let clipped: Vec<_> = s.boxes(&lo, &hi).map(|(_, lo, hi)| (lo, hi)).collect();
        assert_eq!(clipped, vec![(vec![4, 5, 5], vec![7, 7, 6])]);
        // What Region::new refuses, refused alike.
        mask[[0, 0, 0]] = 0.5;
        assert!(super::super::searched_box(None, Some(mask.view()), &ts).is_err());
        assert!(super::super::searched_box::<f32>(Some(&ranges[..2]), None, &ts).is_err());
    }
}
