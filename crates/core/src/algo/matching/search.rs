//! Restricting the search: a box of positions ([`MatchParams::search_box`], pytom-match-pick's
//! `--search-x/y/z`) and a scheduling mask ([`MatchParams::scheduling_mask`], pytme's
//! `--scheduling-mask`).
//!
//! The positions searched are those inside the box and, with a mask, inside the mask. Only the
//! mask's bounding box within the search box is tiled, and a tile holding no mask voxel is
//! skipped (no FFT work for it). Each tile reads its window plus the template's reach from the
//! same extension a whole run reads (on an axis the tile spans whole, in a circular run, the
//! whole run's own grid: no margin), so every searched score is the whole run's score (to the
//! round-off of a different FFT length).
//!
//! Positions not searched are marked as pytme's merge marks the positions no box covered:
//! score `−∞`, rotation index `−1` — also the positions inside a run tile but outside the mask
//! (pytme keeps real scores wherever its boxes happen to reach; here the maps do not depend on
//! how the target was tiled). `−∞` is never a peak for any caller.
//!
//! MCC normalises by maxima over the whole grid, so it is never tiled: with a restriction the
//! whole target is scored and the positions outside are then marked.

use crate::backend::{Arr, Backend, BinaryOp, FloatOf, IntOf, UnaryOp};
use crate::dtype::Real;
use crate::error::{Error, Result, fmt_shape};

use super::job::Job;
use super::plan::plan_box;
use super::{MatchParams, Score};

/// The restriction of one run, validated.
pub(super) struct Region<B: Backend> {
    /// The box searched: `lo..hi` per axis (the search box, shrunk to the mask's bounding box).
    lo: Vec<usize>,
    hi: Vec<usize>,
    /// The mask on the host (row-major, target-shaped), for skipping tiles.
    mask: Option<Vec<bool>>,
    /// The device mask (0/1) of the searched positions, when some positions inside the run
    /// tiles are not searched (a mask; MCC's whole-target run).
    searched: Option<Arr<B, FloatOf<B>>>,
}

/// The searched box of `ranges` on a target of shape `ts`, checked.
fn box_of(ranges: Option<&[(usize, usize)]>, ts: &[usize]) -> Result<(Vec<usize>, Vec<usize>)> {
    let Some(r) = ranges else {
        return Ok((vec![0; ts.len()], ts.to_vec()));
    };
    if r.len() != ts.len() {
        return Err(Error::shape(
            "search_box",
            format!("one range per axis of the target {}", fmt_shape(ts)),
            format!("{} ranges", r.len()),
        ));
    }
    for (k, (&(a, z), &s)) in r.iter().zip(ts).enumerate() {
        if a >= z || z > s {
            return Err(Error::invalid(
                "search_box",
                format!(
                    "axis {k}: range {a}:{z} is empty or outside the target's 0:{s}, expected \
                     START < STOP <= {s}"
                ),
            ));
        }
    }
    Ok((
        r.iter().map(|p| p.0).collect(),
        r.iter().map(|p| p.1).collect(),
    ))
}

/// The box a restriction searches on a target of shape `ts`: the search box `ranges` (the
/// whole target without), shrunk to the bounding box of the scheduling `mask`'s 1s inside it
/// (target-shaped, checked to hold only 0 and 1 and at least one 1 in the box). Host-side, so
/// that a caller can tell which boxes a run searches without a backend.
pub fn searched_box<T: Real>(
    ranges: Option<&[(usize, usize)]>,
    mask: Option<ndarray::ArrayViewD<'_, T>>,
    ts: &[usize],
) -> Result<(Vec<usize>, Vec<usize>)> {
    let (lo, hi) = box_of(ranges, ts)?;
    let Some(mask) = mask else {
        return Ok((lo, hi));
    };
    if mask.shape() != ts {
        return Err(Error::shape(
            "scheduling_mask",
            fmt_shape(ts),
            fmt_shape(mask.shape()),
        ));
    }
    let bad = mask
        .iter()
        .filter(|v| {
            let v = v.as_f64();
            v != 0.0 && v != 1.0
        })
        .count();
    if bad > 0 {
        return Err(Error::invalid(
            "scheduling_mask",
            format!("{bad} value(s) other than 0 and 1, expected a binary mask"),
        ));
    }
    // The mask's bounding box inside the search box.
    let d = ts.len();
    let (mut blo, mut bhi) = (hi.clone(), lo.clone());
    let mut idx = vec![0usize; d];
    for v in mask.iter() {
        if v.as_f64() == 1.0 && (0..d).all(|k| idx[k] >= lo[k] && idx[k] < hi[k]) {
            for k in 0..d {
                blo[k] = blo[k].min(idx[k]);
                bhi[k] = bhi[k].max(idx[k] + 1);
            }
        }
        // The next voxel's index (row-major).
        for k in (0..d).rev() {
            idx[k] += 1;
            if idx[k] < ts[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    if (0..d).any(|k| blo[k] >= bhi[k]) {
        return Err(Error::invalid(
            "scheduling_mask",
            "no voxel is 1 inside the searched box, expected at least one position to search",
        ));
    }
    Ok((blo, bhi))
}

impl<B: Backend> Region<B> {
    /// The restriction of `p` on a target of shape `ts`, or `None` when the whole target is
    /// searched. Errors: ranges that are empty or outside the target; a mask of another shape,
    /// with values other than 0 and 1, or with no voxel inside the search box.
    pub(super) fn new(b: &B, p: &MatchParams<'_, B>, ts: &[usize]) -> Result<Option<Self>> {
        if p.search_box.is_none() && p.scheduling_mask.is_none() {
            return Ok(None);
        }
        let values = p.scheduling_mask.map(|m| b.download(m)).transpose()?;
        let (lo, hi) = searched_box(p.search_box, values.as_ref().map(|v| v.view()), ts)?;
        let host: Option<Vec<bool>> = values.map(|v| v.iter().map(|x| x.as_f64() == 1.0).collect());
        let searched = if host.is_some() || !p.score.tileable() {
            if std::mem::size_of::<FloatOf<B>>() == 4 && p.rotations.len() > 1 << 24 {
                return Err(Error::invalid(
                    "rotations",
                    "more than 2^24 rotations with a restricted search in single precision",
                ));
            }
            let mut s = match p.scheduling_mask {
                Some(m) => b.duplicate(m)?,
                None => b.zeros::<FloatOf<B>>(ts)?,
            };
            if p.scheduling_mask.is_none() || (lo.iter().any(|&v| v > 0) || hi != ts) {
                // Zero outside the box: keep the box's block, clear, put it back.
                let shape: Vec<usize> = lo.iter().zip(&hi).map(|(a, z)| z - a).collect();
                let mut block = b.zeros::<FloatOf<B>>(&shape)?;
                if p.scheduling_mask.is_some() {
                    b.crop(&s, &lo, &mut block)?;
                } else {
                    b.fill(&mut block, FloatOf::<B>::from_f64(1.0))?;
                }
                b.fill(&mut s, FloatOf::<B>::from_f64(0.0))?;
                b.insert_block(&block, &lo, &mut s)?;
            }
            Some(s)
        } else {
            None
        };
        Ok(Some(Region {
            lo,
            hi,
            mask: host,
            searched,
        }))
    }

    /// The jobs of the searched box (tiles when memory or `forced` asks), without the tiles
    /// that hold no mask voxel, and how many were skipped. `pad_edges`: the run reads the
    /// symmetric extension, not the circular grid.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn jobs(
        &self,
        score: Score,
        ts: &[usize],
        tshape: &[usize],
        pad_edges: bool,
        limit: u64,
        forced: Option<&[usize]>,
        sizes: (usize, usize),
        fixed: u64,
    ) -> Result<(Vec<Job>, usize)> {
        let all = plan_box(
            score, ts, tshape, &self.lo, &self.hi, !pad_edges, limit, forced, sizes, fixed,
        )?;
        let Some(mask) = &self.mask else {
            return Ok((all, 0));
        };
        let n = all.len();
        let kept: Vec<Job> = all
            .into_iter()
            .filter(|j| any_in_box(mask, ts, &j.out_offset, &j.out_shape))
            .collect();
        let skipped = n - kept.len();
        Ok((kept, skipped))
    }

    /// Marks the positions not searched in the result maps: score −∞, rotation index −1.
    pub(super) fn mark_outside(
        &self,
        b: &B,
        scores: &mut Arr<B, FloatOf<B>>,
        index: &mut Arr<B, IntOf<B>>,
    ) -> Result<()> {
        let Some(m) = &self.searched else {
            return Ok(()); // nothing outside the box was written
        };
        // Scores: s + ln(m) is s where m = 1 and −∞ where m = 0.
        let mut pen = b.duplicate(m)?;
        b.unary_assign(UnaryOp::Ln, &mut pen)?;
        b.binary_assign(BinaryOp::Add, scores, &pen)?;
        // Index: i·m + m − 1, exact in the float type for the indices checked in `new`.
        let mut fi = pen;
        b.cast(index, &mut fi)?;
        b.binary_assign(BinaryOp::Mul, &mut fi, m)?;
        b.binary_assign(BinaryOp::Add, &mut fi, m)?;
        b.scalar_assign(BinaryOp::Sub, &mut fi, 1.0)?;
        b.cast(&fi, index)
    }

    /// The box searched, `(lo, hi)`: the search box shrunk to the mask's bounding box.
    pub(super) fn bounds(&self) -> (&[usize], &[usize]) {
        (&self.lo, &self.hi)
    }

    /// `true` when the position of row-major index `flat` inside the box ([`Region::bounds`])
    /// is searched: inside the mask, when there is one.
    pub(super) fn in_mask(&self, flat: usize) -> bool {
        self.mask.as_ref().is_none_or(|m| m[flat])
    }

    /// `true` when the region scores fewer positions than the whole target's run would.
    pub(super) fn restricts(&self, ts: &[usize]) -> bool {
        self.mask.is_some() || self.lo.iter().any(|&v| v > 0) || self.hi != ts
    }
}

/// `true` when `mask` (row-major over `shape`) has a voxel in the box `off + [0, len)`.
fn any_in_box(mask: &[bool], shape: &[usize], off: &[usize], len: &[usize]) -> bool {
    let d = shape.len();
    let rows: usize = len[..d - 1].iter().product();
    let mut idx = vec![0usize; d - 1];
    for _ in 0..rows {
        let mut start = 0usize;
        for k in 0..d - 1 {
            start = start * shape[k] + off[k] + idx[k];
        }
        start = start * shape[d - 1] + off[d - 1];
        if mask[start..start + len[d - 1]].iter().any(|&v| v) {
            return true;
        }
        for k in (0..d - 1).rev() {
            idx[k] += 1;
            if idx[k] < len[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_are_checked() {
        assert!(box_of(Some(&[(0, 4), (2, 3)]), &[4, 5]).is_ok());
        for bad in [vec![(0, 5), (0, 5)], vec![(2, 2), (0, 5)], vec![(0, 4)]] {
            let e = box_of(Some(&bad), &[4, 5]).unwrap_err().to_string();
            assert!(e.contains("search_box"), "{e}");
        }
    }

    #[test]
    fn mask_boxes() {
        let mut m = vec![false; 4 * 5];
        m[2 * 5 + 3] = true;
        assert!(any_in_box(&m, &[4, 5], &[2, 3], &[1, 1]));
        assert!(any_in_box(&m, &[4, 5], &[0, 0], &[4, 5]));
        assert!(!any_in_box(&m, &[4, 5], &[0, 0], &[2, 5]));
        assert!(!any_in_box(&m, &[4, 5], &[2, 4], &[2, 1]));
    }
}
