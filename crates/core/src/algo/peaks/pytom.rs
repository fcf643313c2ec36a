//! pytom-match-pick 0.14's candidate extraction (`pytom_extract_candidates.py`,
//! `pytom_tm.extract.extract_particles`), on monomorph's primitives:
//!
//! 1. with a top-hat filter: scores × the top-hat mask ([`super::tophat`]);
//! 2. a tomogram mask: score 0 where the mask is ≤ 0;
//! 3. the first and last `r = int(D / 2 / voxel)` planes of every axis set to 0;
//! 4. peaks taken greatest first while above the cut-off (strict `>`), and after each the whole
//!    `(2r + 1)³` cube around it set to 0 (pytom's `spherical_mask(cut_box, r, cut_box // 2)`
//!    passes `cut_box // 2` as the smoothing, not the centre, so its "sphere" has no zero
//!    voxel and the cube goes: Chebyshev suppression, not the ball its documentation says).
//!
//! Ties: pytom takes `nanargmax` of its `(x, y, z)` array, the first maximum in C order of
//! `(x, y, z)`; on monomorph's `(z, y, x)` arrays that is the smallest `(x, y, z)`, i.e.
//! coordinates compared from the last axis to the first.
//!
//! The map is never scanned once per peak: the candidates above the cut come from the device
//! in descending order ([`Reduce::top_k`], enlarged until it holds enough), and the greedy
//! cube suppression runs on the host over a bucket grid.

use std::collections::HashMap;

use ndarray::ArrayViewD;

use super::Peak;
use super::stats::erfcinv;
use super::tophat::{TophatFit, TophatParams, tophat_mask};
use crate::backend::{
    Arr, ArrayMeta, BinaryOp, Elementwise, Filter, Memory, PadMode, Reduce, Resample,
};
use crate::dtype::Float;
use crate::error::{Error, Result};
use crate::shape::expect_shape;

/// pytom's automatic extraction cut-off `erfcinv(2 K / search_space) · √2 · σ` (Rickgauer et
/// al. 2017; no mean term), with `search_space` = voxels × rotations and `σ` the matching run's
/// score standard deviation. `K` must be > 0 and below `search_space / 2` (beyond, the cut
/// would be negative and pytom would extract border zeros).
pub fn pytom_cut_off(n_false_positives: f64, search_space: f64, std: f64) -> Result<f64> {
    if !(n_false_positives.is_finite() && n_false_positives > 0.0) {
        return Err(Error::invalid(
            "n_false_positives",
            format!("expected a number > 0, got {n_false_positives}"),
        ));
    }
    if !(search_space.is_finite() && 2.0 * n_false_positives < search_space) {
        return Err(Error::invalid(
            "n_false_positives",
            format!(
                "{n_false_positives} is too many: 2K must be below the search space (voxels × \
                 rotations = {search_space})"
            ),
        ));
    }
    if !(std.is_finite() && std >= 0.0) {
        return Err(Error::invalid(
            "std",
            format!("expected a finite standard deviation >= 0, got {std}"),
        ));
    }
    Ok(erfcinv(2.0 * n_false_positives / search_space) * std::f64::consts::SQRT_2 * std)
}

/// pytom's particle radius in voxels, `int(diameter / 2 / voxel)`; an error when it is 0 (a
/// diameter under two voxels: pytom would then zero the whole map, as `a[-0:]` is all of it)
/// or the diameter is not a positive number.
pub fn pytom_radius(diameter: f64, voxel: f64) -> Result<usize> {
    if !(voxel.is_finite() && voxel > 0.0) {
        return Err(Error::invalid(
            "voxel_size",
            format!("expected a positive voxel size, got {voxel}"),
        ));
    }
    if !(diameter.is_finite() && diameter > 0.0) {
        return Err(Error::invalid(
            "particle_diameter",
            format!("expected a positive diameter, got {diameter}"),
        ));
    }
    let r = (diameter / 2.0 / voxel).floor();
    if r < 1.0 {
        return Err(Error::invalid(
            "particle_diameter",
            format!(
                "{diameter} Å at {voxel} Å per voxel gives a radius int(D/2/voxel) of 0 voxels: \
                 expected a diameter of at least two voxels ({} Å)",
                2.0 * voxel
            ),
        ));
    }
    Ok(r as usize)
}

/// What [`extract_pytom`] does (pytom's `extract_particles` arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct PytomParams {
    /// At most this many particles (pytom's `-n`).
    pub num_peaks: usize,
    /// The exclusion radius `r` in voxels ([`pytom_radius`]): border planes and cube half-width.
    pub radius: usize,
    /// Peaks must score strictly above this ([`pytom_cut_off`], or a given cut; pytom raises a
    /// negative one to 0, and so does this).
    pub cut_off: f64,
    /// The top-hat dual threshold (pytom's `--tophat-filter`), when asked for.
    pub tophat: Option<TophatParams>,
}

/// The result of [`extract_pytom`].
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// The particles in extraction order (greatest first); `rotation` unset.
    pub peaks: Vec<Peak>,
    /// The cut-off used (after raising a negative one to 0).
    pub cut_off: f64,
    /// The top-hat fit, when the filter ran.
    pub tophat: Option<TophatFit>,
}

/// pytom's order of equal scores: the smallest `(x, y, z)` first, i.e. the coordinates of a
/// `(z, y, x)` array compared from the last axis.
fn pytom_key(coord: &[usize]) -> Vec<usize> {
    coord.iter().rev().copied().collect::<Vec<usize>>()
}

/// The bucket of `c` in the grid of accepted peaks: `coord / (r + 1) + 1` per axis (from 1,
/// so that the neighbouring buckets are `cell − 1 ..= cell + 1`).
fn cell_of(c: &[usize], r: usize) -> Vec<usize> {
    c.iter().map(|&v| v / (r + 1) + 1).collect()
}

/// Is `c` within Chebyshev distance `r` of an accepted peak? (`grid` holds the accepted peaks
/// by [`cell_of`].)
fn suppressed(grid: &HashMap<Vec<usize>, Vec<Vec<usize>>>, c: &[usize], r: usize) -> bool {
    let cell = cell_of(c, r);
    let nd = c.len();
    let mut off = vec![0usize; nd];
    loop {
        let key: Vec<usize> = (0..nd).map(|k| cell[k] + off[k] - 1).collect();
        if let Some(list) = grid.get(&key)
            && list
                .iter()
                .any(|p| p.iter().zip(c).all(|(a, b)| a.abs_diff(*b) <= r))
        {
            return true;
        }
        let mut k = 0;
        loop {
            if k == nd {
                return false;
            }
            off[k] += 1;
            if off[k] < 3 {
                break;
            }
            off[k] = 0;
            k += 1;
        }
    }
}

/// pytom-match-pick 0.14's `extract_particles` on a device score map (module docs): the
/// particles in extraction order with their scores. `tomogram_mask` (the map's shape): scores
/// where it is false are 0 (pytom's `score[mask <= 0] = 0`). −∞ (positions not searched) and
/// NaN are never particles; in the top-hat step they count as 0 and stay out of its histogram.
pub fn extract_pytom<B, T>(
    b: &B,
    scores: &Arr<B, T>,
    tomogram_mask: Option<ArrayViewD<'_, bool>>,
    p: &PytomParams,
) -> Result<Extracted>
where
    B: Memory + Elementwise + Reduce + Filter + Resample,
    T: Float,
{
    let shape = scores.shape().to_vec();
    if shape.is_empty() || shape.contains(&0) {
        return Err(Error::Empty("scores".into()));
    }
    if p.cut_off.is_nan() {
        return Err(Error::invalid("cut_off", "expected a number, got NaN"));
    }
    let cut = p.cut_off.max(0.0);
    let mut v = b.duplicate(scores)?;
    let tophat = match &p.tophat {
        Some(tp) => {
            let (mask, fit) = tophat_mask(b, scores, tp)?;
            b.binary_assign(BinaryOp::Mul, &mut v, &mask)?;
            Some(fit)
        }
        None => None,
    };
    if let Some(m) = tomogram_mask {
        expect_shape(
            "tomogram_mask (must match the score map)",
            &shape,
            m.shape(),
        )?;
        let host = m.mapv(|x| if x { T::one() } else { T::zero() });
        let dm = b.upload_owned(host)?;
        b.binary_assign(BinaryOp::Mul, &mut v, &dm)?;
    }
    let r = p.radius;
    if shape.iter().any(|&s| s <= 2 * r) {
        // every voxel is within r of a border: pytom zeroes the whole map
        return Ok(Extracted {
            peaks: Vec::new(),
            cut_off: cut,
            tophat,
        });
    }
    if r > 0 {
        let inner: Vec<usize> = shape.iter().map(|s| s - 2 * r).collect();
        let mut crop = b.zeros::<T>(&inner)?;
        b.crop(&v, &vec![r; shape.len()], &mut crop)?;
        b.pad(&crop, &vec![r; shape.len()], PadMode::Zero, &mut v)?;
    }
    let total = v.len();
    let mut k = (16 * p.num_peaks).clamp(1, total);
    loop {
        let cand = b.top_k(&v, k)?;
        // With a full list, the smallest value may continue past it: only values above it
        // are complete.
        let complete = cand.len() < k || k == total;
        let floor = if complete {
            None
        } else {
            cand.last().map(|c| c.1)
        };
        let mut ranked: Vec<(f64, Vec<usize>)> = cand
            .iter()
            .filter(|(_, val)| floor.is_none_or(|f| *val > f))
            .map(|&(i, val)| (val.as_f64(), super::unravel(i, &shape)))
            .collect();
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| pytom_key(&a.1).cmp(&pytom_key(&b.1)))
        });
        let mut peaks = Vec::new();
        let mut grid: HashMap<Vec<usize>, Vec<Vec<usize>>> = HashMap::new();
        let mut ended = false;
        for (val, c) in ranked {
            if peaks.len() == p.num_peaks || val <= cut || val.is_nan() {
                ended = true;
                break;
            }
            if suppressed(&grid, &c, r) {
                continue;
            }
            grid.entry(cell_of(&c, r)).or_default().push(c.clone());
            peaks.push(Peak {
                coord: c,
                score: val,
                rotation: None,
            });
        }
        if ended || complete || peaks.len() == p.num_peaks {
            return Ok(Extracted {
                peaks,
                cut_off: cut,
                tophat,
            });
        }
        k = (k * 4).min(total);
    }
}
