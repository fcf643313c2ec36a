//! One backend-free part of a match and the one merge.
//!
//! A [`Part`] holds what a run over some rotations of one job leaves: per voxel the best score
//! and its rotation index (indices into the job's whole rotation set), widened exactly to
//! `f64` / `i64`; the Σ score² partial of each (tile, rotation) call, kept per range; the
//! score moments (exact integer sums) and the background maxima. [`Part::merge`] is the only
//! merge: parts of disjoint rotation ranges merged in any order give one loop's maps
//! ([`replaces`]), and [`Part::empty`] is its identity, so parts form a monoid.
//! [`MatchJob::finish`](super::MatchJob::finish) turns the merge of every range into the
//! [`MatchResult`](crate::algo::matching::MatchResult), the only place a result is assembled.

use std::ops::Range;

use crate::{Error, Result};

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

/// The maps of a part: best score and rotation index per voxel (C order), the moments and the
/// background (on the background grid).
#[derive(Debug, Clone, PartialEq)]
pub struct Maps {
    /// Best score per voxel, widened to `f64` (exact); −∞ where no rotation scored.
    pub scores: Vec<f64>,
    /// Index into the job's rotation set of the best rotation per voxel (−1 where none); with
    /// several templates ([`MatchJob::more_templates`](super::MatchJob::more_templates)) the
    /// index of the best (template, rotation) pair, `template · rotations + rotation`, so that
    /// [`replaces`] ties to the lower template, then the lower rotation.
    pub index: Vec<i64>,
    /// With score statistics: the score moments (4 words per voxel, exact integer sums) and
    /// their scales.
    pub moments: Option<(Vec<i64>, [f64; 2])>,
    /// With a background correction: the background maxima (widened to `f64`, exact; not yet
    /// subtracted) and their mean's count.
    pub background: Option<(Vec<f64>, f64)>,
}

/// One part of a job's result: the rotations it covers and its maps (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Part {
    /// The rotation ranges merged into this part, each with its Σ score² partials (one per
    /// (tile, rotation) call, tile by tile; with several templates one per (tile, template,
    /// rotation), each (tile, template) block in turn).
    pub ranges: Vec<(Range<usize>, Vec<f64>)>,
    /// The maps; `None` for the empty part (no rotation run yet).
    pub maps: Option<Maps>,
}

impl Part {
    /// The identity of [`Part::merge`]: no rotation, no maps.
    pub fn empty() -> Self {
        Part::default()
    }

    /// A part of rotations `range` with its partials and maps.
    pub fn new(range: Range<usize>, ssum_parts: Vec<f64>, maps: Maps) -> Self {
        Part {
            ranges: vec![(range, ssum_parts)],
            maps: Some(maps),
        }
    }

    /// The rotations this part covers.
    pub fn rotations(&self) -> usize {
        self.ranges.iter().map(|(r, _)| r.len()).sum()
    }

    /// Merges `other` into this part: the one merge rule ([`replaces`] per voxel, moments
    /// added as exact integers, background by maximum). Exact and order-free for parts of
    /// disjoint rotation ranges; [`Part::empty`] changes nothing. Errors when the maps do not
    /// match (lengths, statistics or background in one part only).
    pub fn merge(&mut self, other: Part) -> Result<()> {
        self.ranges.extend(other.ranges);
        let Some(o) = other.maps else { return Ok(()) };
        let Some(m) = self.maps.as_mut() else {
            self.maps = Some(o);
            return Ok(());
        };
        merge_best(&mut m.scores, &mut m.index, &o.scores, &o.index)?;
        match (&mut m.moments, o.moments) {
            (Some((a, _)), Some((p, _))) if a.len() == p.len() => {
                crate::backend::host::moments_merge(a, &p)
            }
            (None, None) => {}
            _ => return Err(Error::invalid("parts", "score moments in some parts only")),
        }
        match (&mut m.background, o.background) {
            (Some((a, _)), Some((p, _))) if a.len() == p.len() => {
                // Background maxima (from +0, never −0 or NaN): exact in any order.
                for (x, y) in a.iter_mut().zip(p) {
                    if y > *x {
                        *x = y;
                    }
                }
            }
            (None, None) => {}
            _ => return Err(Error::invalid("parts", "a background in some parts only")),
        }
        Ok(())
    }

    /// Σ score² partials of the ranges, in one loop's order over `0..nrot` (tile by tile,
    /// rotations in order within a tile): the partials, their left fold from zero, and the
    /// tile count. Errors when the ranges do not cover `0..nrot` exactly once or ran different
    /// tile counts.
    pub fn ordered_ssum(&self, nrot: usize) -> Result<(Vec<f64>, f64, usize)> {
        let mut parts: Vec<&(Range<usize>, Vec<f64>)> =
            self.ranges.iter().filter(|p| !p.0.is_empty()).collect();
        parts.sort_by_key(|p| p.0.start);
        let covered: usize = parts.iter().map(|p| p.0.len()).sum();
        let contiguous = parts.windows(2).all(|w| w[0].0.end == w[1].0.start);
        if parts.is_empty() || covered != nrot || parts[0].0.start != 0 || !contiguous {
            return Err(Error::invalid(
                "parts",
                format!("the parts do not cover the {nrot} rotations once"),
            ));
        }
        let tiles = parts[0].1.len() / parts[0].0.len();
        if parts.iter().any(|p| p.1.len() != tiles * p.0.len()) {
            let per: Vec<usize> = parts.iter().map(|p| p.1.len()).collect();
            return Err(Error::invalid(
                "parts",
                format!("the parts ran different tile counts (partials per part {per:?})"),
            ));
        }
        let mut ordered = Vec::with_capacity(tiles * nrot);
        for t in 0..tiles {
            for (r, p) in &parts {
                ordered.extend_from_slice(&p[t * r.len()..(t + 1) * r.len()]);
            }
        }
        let sum = ordered.iter().fold(0.0f64, |a, &p| a + p);
        Ok((ordered, sum, tiles))
    }
}

/// Merges a part's maps (`scores`, `index`) into the maps kept so far by [`replaces`]. The
/// four slices have one length (checked).
pub fn merge_best<T: PartialOrd + Copy, I: PartialOrd + Default + Copy>(
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

    fn part(start: usize, scores: Vec<f64>, index: Vec<i64>) -> Part {
        Part::new(
            start..start + 2,
            vec![start as f64, start as f64 + 1.0],
            Maps {
                scores,
                index,
                moments: Some((
                    vec![start as i64, -1, -1, 0, -5, -1, 0, 1, 1, 0, 0, 0],
                    [1.0; 2],
                )),
                background: Some((vec![start as f64, 1.0], 2.0)),
            },
        )
    }

    #[test]
    fn parts_form_a_monoid_and_merge_as_one_loop() {
        // Voxel 0: equal 1.0 at rotations 1 and 2 (1 wins); voxel 1: -0 at 0, +0 at 3 (0
        // wins); voxel 2: none in the first part.
        let a = part(0, vec![1.0, -0.0, f64::NEG_INFINITY], vec![1, 0, -1]);
        let b = part(2, vec![1.0, 0.0, 0.5], vec![2, 3, 3]);
        for order in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
            let mut m = Part::empty();
            for p in order {
                m.merge(p).unwrap();
                m.merge(Part::empty()).unwrap();
            }
            let maps = m.maps.as_ref().unwrap();
            assert_eq!(maps.index, [1, 0, 3]);
            assert_eq!(maps.scores[1].to_bits(), (-0.0f64).to_bits());
            // The moments add as 128-bit integers ([low, high] words; carries included).
            assert_eq!(
                maps.moments.as_ref().unwrap().0,
                [2, -2, -2, 1, -10, -1, 0, 2, 2, 0, 0, 0]
            );
            assert_eq!(maps.background.as_ref().unwrap().0, [2.0, 1.0]);
            let (o, s, t) = m.ordered_ssum(4).unwrap();
            assert_eq!((o, s, t), (vec![0.0, 1.0, 2.0, 3.0], 6.0, 1));
        }
        let mut only_a = a.clone();
        only_a.merge(Part::empty()).unwrap();
        assert_eq!(only_a, a);
        assert!(a.ordered_ssum(4).is_err());
    }

    #[test]
    fn ssum_is_ordered_tile_by_tile() {
        // Two tiles; ranges [0, 2) and [2, 3) merged out of order, and an empty range.
        let maps = || Maps {
            scores: vec![0.0],
            index: vec![0],
            moments: None,
            background: None,
        };
        let mut m = Part::new(2..3, vec![3.0, 30.0], maps());
        m.merge(Part::new(3..3, vec![], maps())).unwrap();
        m.merge(Part::new(0..2, vec![1.0, 2.0, 10.0, 20.0], maps()))
            .unwrap();
        let (o, s, t) = m.ordered_ssum(3).unwrap();
        assert_eq!((o, s, t), (vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0], 66.0, 2));
        let mut bad = Part::new(0..2, vec![1.0, 2.0, 10.0, 20.0], maps());
        bad.merge(Part::new(2..3, vec![3.0], maps())).unwrap();
        assert!(bad.ordered_ssum(3).is_err());
    }
}
