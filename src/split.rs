//! The rotation set split into contiguous ranges, and the exact merge of the ranges' results:
//! what MPI ranks (`monomorph::dist`, feature `mpi`), the command's device threads
//! (`--devices`) and its list scheduler all use, so there is one merge rule.
//!
//! A merged result is bit-identical to
//! [`match_template`](monomorph_core::algo::matching::match_template) over the whole set:
//!
//! * part `k` of `n` searches [`rotation_range`]`(nrot, n, k)`, the `k`-th contiguous range,
//!   with rotation indices into the whole set ([`match_range`]);
//! * per voxel, a part's value replaces the one kept so far only as the single loop would have
//!   replaced it ([`replaces`]): a strictly greater score wins, and equal scores (also `−0` and
//!   `+0`) keep the lower rotation index, so parts merge in any order;
//! * Σ score² is not added per part (a sum of per-part totals is 1–2 ulp off): every part keeps
//!   the partial of each (tile, rotation) call, and [`order_ssum`] folds them in the single
//!   loop's order (tile by tile, rotations in order within a tile).

use std::ops::Range;

use monomorph_core::algo::matching::{
    BackgroundScores, MatchParams, MatchResult, Prerotated, ScoreMoments, background_grid,
    match_template_raw,
};
use monomorph_core::algo::rotations::RotationSet;
use ndarray::{ArrayD, IxDyn};

use crate::{Arr, ArrayMeta, Backend, Error, FloatOf, Index, IntOf, Real, Result};

/// The rotations part `rank` of `size` searches: `nrot` split into contiguous ranges, in part
/// order, whose lengths differ by at most one (empty when there are more parts than rotations).
pub fn rotation_range(nrot: usize, size: usize, rank: usize) -> Range<usize> {
    let size = size.max(1);
    nrot * rank / size..nrot * (rank + 1) / size
}

/// The merge rule, per voxel: whether `(score, index)` of one part replaces `kept`, the value
/// kept so far from other parts (indices into the whole rotation set, negative for none), as
/// one loop over all rotations in order would have kept it: the greater score wins; equal
/// scores (and `−0`/`+0`) keep the lower index; a part without a value (negative index) never
/// replaces one, and a value always replaces none. NaN is never stored by the loop.
#[inline]
pub fn replaces<T: PartialOrd, I: PartialOrd + Default>(kept: (T, I), new: (T, I)) -> bool {
    let none = I::default();
    if new.1 < none {
        false
    } else if kept.1 < none || new.0 > kept.0 {
        true
    } else if kept.0 > new.0 {
        false
    } else {
        new.1 < kept.1
    }
}

/// Merges a part's maps (`scores`, `index`) into the maps kept so far (`kept_scores`,
/// `kept_index`) by [`replaces`]: parts of disjoint rotation ranges merged in any order give
/// the single loop's maps. The four slices have one length (checked).
pub fn merge_into<T: PartialOrd + Copy, I: PartialOrd + Default + Copy>(
    kept_scores: &mut [T],
    kept_index: &mut [I],
    scores: &[T],
    index: &[I],
) -> Result<()> {
    let n = kept_scores.len();
    if kept_index.len() != n || scores.len() != n || index.len() != n {
        return Err(Error::invalid(
            "parts",
            format!(
                "maps of {n}, {}, {} and {} voxels, expected one length",
                kept_index.len(),
                scores.len(),
                index.len()
            ),
        ));
    }
    for ((ks, ki), (&s, &i)) in kept_scores
        .iter_mut()
        .zip(kept_index.iter_mut())
        .zip(scores.iter().zip(index))
    {
        if replaces((*ks, *ki), (s, i)) {
            (*ks, *ki) = (s, i);
        }
    }
    Ok(())
}

/// Σ score² partials of the parts of one match, `(first rotation, rotations, partials tile by
/// tile)` in any order, put in the single loop's order (tile by tile, rotations in order within
/// a tile): the partials (what one process's [`MatchResult::ssum_parts`] holds), their left
/// fold from zero, and the tile count. Errors when the parts do not cover `0..nrot` exactly
/// once or ran different tile counts. Empty parts are allowed.
pub fn order_ssum(
    parts: &[(usize, usize, &[f64])],
    nrot: usize,
) -> std::result::Result<(Vec<f64>, f64, usize), String> {
    let mut parts: Vec<&(usize, usize, &[f64])> = parts.iter().filter(|p| p.1 > 0).collect();
    parts.sort_by_key(|p| p.0);
    let covered: usize = parts.iter().map(|p| p.1).sum();
    let contiguous = parts.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0);
    if parts.is_empty() || covered != nrot || parts[0].0 != 0 || !contiguous {
        return Err(format!("the parts do not cover the {nrot} rotations once"));
    }
    let tiles = parts[0].2.len() / parts[0].1;
    if parts.iter().any(|p| p.2.len() != tiles * p.1) {
        let per: Vec<usize> = parts.iter().map(|p| p.2.len()).collect();
        return Err(format!(
            "the parts ran different tile counts (partials per part {per:?})"
        ));
    }
    let mut ordered = Vec::with_capacity(tiles * nrot);
    for t in 0..tiles {
        for (_, len, p) in &parts {
            ordered.extend_from_slice(&p[t * len..(t + 1) * len]);
        }
    }
    let sum = ordered.iter().fold(0.0f64, |a, &p| a + p);
    Ok((ordered, sum, tiles))
}

/// One part of a split match, on the host: its rotations' running maxima (indices into the
/// whole rotation set) and Σ score² partials.
pub struct Part<B: Backend> {
    /// The rotations this part searched ([`rotation_range`]).
    pub range: Range<usize>,
    /// Best score per voxel over `range` (the lowest value where empty).
    pub scores: ArrayD<FloatOf<B>>,
    /// Index into the whole rotation set of the best rotation per voxel (−1 where none).
    pub rotation_index: ArrayD<IntOf<B>>,
    /// Σ score² of each (tile, rotation) call, tile by tile ([`MatchResult::ssum_parts`]).
    pub ssum_parts: Vec<f64>,
    /// With [`MatchParams::score_stats`]: the score moments over `range` (target shape +
    /// `[4]`; zeros for an empty range) and their scales (`[0, 0]` for an empty range).
    pub moments: Option<(ArrayD<i64>, [f64; 2])>,
    /// With [`MatchParams::background`]: the background scores over `range`, not yet
    /// subtracted (zeros for an empty range; see [`BackgroundScores`]), and their mean's count.
    pub background: Option<(ArrayD<FloatOf<B>>, f64)>,
}

/// Runs rotations `range` of `params.rotations` (any contiguous range: a rank's, a thread's, a
/// work item handed out by a scheduler) and downloads the result, with rotation indices into
/// the whole set. An empty range returns empty maps without touching the backend.
pub fn match_range<B: Backend>(
    b: &B,
    target: &Arr<B, FloatOf<B>>,
    template: &Arr<B, FloatOf<B>>,
    params: &MatchParams<'_, B>,
    range: Range<usize>,
) -> Result<Part<B>> {
    let nrot = params.rotations.len();
    if range.end > nrot || range.start > range.end {
        return Err(Error::invalid(
            "range",
            format!("rotations {range:?} of a set of {nrot}"),
        ));
    }
    let shape = IxDyn(target.shape());
    if range.is_empty() {
        let mut m = target.shape().to_vec();
        m.push(4);
        return Ok(Part {
            range,
            scores: ArrayD::from_elem(shape.clone(), <FloatOf<B> as Real>::lowest()),
            rotation_index: ArrayD::from_elem(shape, IntOf::<B>::from_i64(-1)),
            ssum_parts: Vec::new(),
            moments: params
                .score_stats
                .then(|| (ArrayD::zeros(IxDyn(&m)), [0.0; 2])),
            background: params.background.map(|_| {
                let (g, count) =
                    background_grid(target.shape(), template.shape(), params.pad_edges);
                (
                    ArrayD::from_elem(IxDyn(&g), FloatOf::<B>::from_f64(0.0)),
                    count,
                )
            }),
        });
    }
    let d = params.rotations.dim();
    let flat = &params.rotations.as_flat()[range.start * d * d..range.end * d * d];
    let prerotated =
        match &params.prerotated {
            Some(p) => Some(Prerotated {
                templates: p.templates.get(range.clone()).ok_or_else(|| {
                    Error::invalid("prerotated", "fewer templates than rotations")
                })?,
                masks: match p.masks {
                    Some(m) => Some(m.get(range.clone()).ok_or_else(|| {
                        Error::invalid("prerotated", "fewer masks than rotations")
                    })?),
                    None => None,
                },
            }),
            None => None,
        };
    // Every other parameter (masks, filters, limits, the callback) is the caller's: the struct
    // update copies them all, so a field added to MatchParams is carried here without an edit
    // (or, if it is not Copy, fails to compile until it is handled).
    let sub = MatchParams {
        rotations: RotationSet::from_matrices(d, flat)?,
        prerotated,
        tile_shape: params.tile_shape.clone(),
        ..*params
    };
    // Uncorrected: the background is subtracted once, after the merge.
    let r = match_template_raw(b, target, template, &sub)?;
    let scores = b.download(&r.scores)?;
    let mut rotation_index = b.download(&r.rotation_index)?;
    for v in rotation_index.iter_mut() {
        if let Some(i) = v.to_usize() {
            *v = IntOf::<B>::from_usize(i + range.start).ok_or_else(|| {
                Error::invalid("rotations", "a rotation index overflows the index type")
            })?;
        }
    }
    let moments = match &r.moments {
        Some(m) => Some((b.download(&m.acc)?, m.scale)),
        None => None,
    };
    let background = match &r.background {
        Some(bg) => Some((b.download(&bg.map)?, bg.count)),
        None => None,
    };
    Ok(Part {
        range,
        scores,
        rotation_index,
        ssum_parts: r.ssum_parts,
        moments,
        background,
    })
}

/// Merges the parts of one match (disjoint ranges covering `rotations`, any order) on the host
/// and uploads the result to `b`: what [`match_template`](monomorph_core::algo::matching::match_template)
/// over all of `rotations` returns, bit for bit.
pub fn merge_parts<B: Backend>(
    b: &B,
    parts: Vec<Part<B>>,
    rotations: &RotationSet,
) -> Result<MatchResult<B>> {
    let nrot = rotations.len();
    let ssum: Vec<(usize, usize, &[f64])> = parts
        .iter()
        .map(|p| (p.range.start, p.range.len(), &p.ssum_parts[..]))
        .collect();
    let (ssum_parts, sum, tiles) =
        order_ssum(&ssum, nrot).map_err(|m| Error::invalid("parts", m))?;
    let mut it = parts.into_iter();
    let Some(mut kept) = it.next() else {
        return Err(Error::invalid("parts", "no parts"));
    };
    for p in it {
        let (Some(ks), Some(ki)) = (
            kept.scores.as_slice_memory_order_mut(),
            kept.rotation_index.as_slice_memory_order_mut(),
        ) else {
            return Err(Error::invalid("parts", "expected contiguous maps"));
        };
        let (Some(s), Some(i)) = (
            p.scores.as_slice_memory_order(),
            p.rotation_index.as_slice_memory_order(),
        ) else {
            return Err(Error::invalid("parts", "expected contiguous maps"));
        };
        merge_into(ks, ki, s, i)?;
        // Moments are integer sums and background maxima start from +0: both exact in any
        // order.
        match (kept.moments.as_mut(), p.moments) {
            (Some((a, sa)), Some((m, sm))) => {
                let (Some(a), Some(m)) = (a.as_slice_memory_order_mut(), m.as_slice_memory_order())
                else {
                    return Err(Error::invalid("parts", "expected contiguous moments"));
                };
                monomorph_core::backend::host::moments_merge(a, m);
                if *sa == [0.0; 2] {
                    *sa = sm;
                }
            }
            (None, None) => {}
            _ => return Err(Error::invalid("parts", "moments in some parts only")),
        }
        match (kept.background.as_mut(), p.background) {
            (Some((a, _)), Some((m, _))) => {
                for (x, y) in a.iter_mut().zip(m.iter()) {
                    if *y > *x {
                        *x = *y;
                    }
                }
            }
            (None, None) => {}
            _ => return Err(Error::invalid("parts", "a background in some parts only")),
        }
    }
    let voxels: usize = kept.scores.len();
    let mut r = MatchResult {
        scores: b.upload(kept.scores.view())?,
        rotation_index: b.upload(kept.rotation_index.view())?,
        rotations: rotations.clone(),
        n_rotations: nrot,
        ssum: sum / (voxels as f64 * nrot as f64),
        ssum_parts,
        tiles,
        background: match kept.background {
            Some((map, count)) => Some(BackgroundScores {
                map: b.upload(map.view())?,
                count,
            }),
            None => None,
        },
        background_shift: None,
        moments: match kept.moments {
            Some((acc, scale)) => Some(ScoreMoments {
                acc: b.upload(acc.view())?,
                scale,
            }),
            None => None,
        },
    };
    // Every part's background is merged: subtract it once.
    r.apply_background(b)?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_the_single_loops_in_any_order() {
        // Later parts: strictly greater wins; ties and -0/+0 keep the lower index.
        assert!(replaces((1.0, 0), (2.0, 5)));
        assert!(!replaces((1.0, 0), (1.0, 5)));
        assert!(replaces((1.0, 5), (1.0, 0)));
        assert!(!replaces((-0.0, 0), (0.0, 3)));
        assert!(replaces((0.0, 3), (-0.0, 0)));
        assert!(replaces((f64::MIN, -1), (f64::MIN, 2)));
        assert!(!replaces((1.0, 2), (f64::MIN, -1)));
        assert!(!replaces((f64::MIN, -1), (f64::MIN, -1)));
    }

    #[test]
    fn ssum_is_ordered_tile_by_tile() {
        // Two tiles; parts [0, 2) and [2, 3) given out of order, and an empty part.
        let a = [1.0, 2.0, 10.0, 20.0];
        let b = [3.0, 30.0];
        let parts: [(usize, usize, &[f64]); 3] = [(2, 1, &b), (3, 0, &[]), (0, 2, &a)];
        let (o, s, t) = order_ssum(&parts, 3).unwrap();
        assert_eq!((o, s, t), (vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0], 66.0, 2));
        assert!(order_ssum(&parts[..2], 3).is_err());
    }
}
