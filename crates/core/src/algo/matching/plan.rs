//! Planning: the jobs (tiles, `job.rs`) a run is split into, and the bytes each needs.

use crate::backend::{Backend, ComplexOf, FloatOf, IntOf, array_bytes};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::fast_shape;

use super::Score;
use super::job::{Job, circular_job, window_job};
use super::state::buffer_counts;

/// Estimated peak bytes of matching an output box `out` on an FFT grid `fast` (the caller's
/// arrays excluded; the full result maps included).
pub fn estimate_bytes<B: Backend>(
    score: Score,
    target: &[usize],
    out: &[usize],
    fast: &[usize],
) -> Result<u64> {
    let _ = (
        array_bytes::<FloatOf<B>>(&[1])?,
        array_bytes::<ComplexOf<B>>(&[1])?,
    );
    estimate_sized(
        score,
        target,
        out,
        fast,
        std::mem::size_of::<FloatOf<B>>(),
        std::mem::size_of::<IntOf<B>>(),
        0,
    )
}

/// [`estimate_bytes`] for element sizes `fsize` (float) and `isize_` (index) in bytes, plus
/// `fixed` bytes every job needs whatever its size (the template filter's spectra).
pub(super) fn estimate_sized(
    score: Score,
    target: &[usize],
    out: &[usize],
    fast: &[usize],
    fsize: usize,
    isize_: usize,
    fixed: u64,
) -> Result<u64> {
    let (nr, nc) = buffer_counts(score);
    let n = |s: &[usize]| -> Result<u64> {
        crate::shape::checked_len(s)
            .map(|v| v as u64)
            .ok_or_else(|| Error::invalid("shape", format!("{s:?} overflows")))
    };
    let (fs, is) = (fsize as u64, isize_ as u64);
    let r = n(fast)? * fs;
    let c = n(&crate::shape::rfft_shape(
        fast,
        &(0..fast.len()).collect::<Vec<_>>(),
    ))? * 2
        * fs;
    let o = n(out)? * (fs + is);
    let full = n(target)? * (fs + is);
    let den = if matches!(score, Score::CAM | Score::FLCSphericalMask) {
        n(out)? * fs
    } else {
        0
    };
    Ok(nr * r + nc * c + o + full + den + fixed)
}

/// Splits the target into jobs (tiles) that fit `limit` bytes; every job needs `fixed` bytes
/// besides its FFT-grid arrays (see [`estimate_sized`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn plan_jobs(
    score: Score,
    target: &[usize],
    tshape: &[usize],
    pad_edges: bool,
    limit: u64,
    forced: Option<&[usize]>,
    sizes: (usize, usize),
    fixed: u64,
) -> Result<(Vec<Job>, bool)> {
    let est = |out: &[usize], fast: &[usize]| {
        estimate_sized(score, target, out, fast, sizes.0, sizes.1, fixed)
    };
    let d = target.len();
    let whole = if pad_edges {
        window_job(&vec![0; d], target, tshape, true)
    } else {
        circular_job(target, tshape)
    };
    let mut tile: Vec<usize> = match forced {
        Some(t) => {
            if t.len() != d || t.contains(&0) {
                return Err(Error::shape(
                    "tile_shape",
                    format!("{d} positive sizes"),
                    format!("{t:?}"),
                ));
            }
            t.iter().zip(target).map(|(&a, &b)| a.min(b)).collect()
        }
        None => {
            if est(&whole.out_shape, &whole.fast)? <= limit {
                return Ok((vec![whole], false));
            }
            target.to_vec()
        }
    };
    if forced.is_none() {
        tile = fit_tile(score, target, tshape, tile, limit, &est)?;
    }
    if tile == target && forced.is_none() {
        return Ok((vec![whole], false));
    }
    if !score.tileable() {
        return Err(Error::invalid(
            "target",
            "MCC cannot be tiled (it normalises by maxima over the whole grid): raise the memory limit",
        ));
    }
    // Every combination of per-axis tile starts: tiles of the target, then (circular runs) of
    // the padding up to the FFT grid, whose scores only enter `ssum`. A tile never straddles
    // the target's edge.
    let grid = if pad_edges {
        target.to_vec()
    } else {
        fast_shape(target)
    };
    let segments: Vec<Vec<(usize, usize)>> = (0..d)
        .map(|k| {
            let inside = (0..target[k]).step_by(tile[k]);
            let beyond = (target[k]..grid[k]).step_by(tile[k]);
            inside
                .map(|a| (a, tile[k].min(target[k] - a)))
                .chain(beyond.map(|a| (a, tile[k].min(grid[k] - a))))
                .collect()
        })
        .collect();
    let jobs = grid_cells(&segments)
        .into_iter()
        .map(|(off, out)| {
            let inside = (0..d).all(|k| off[k] < target[k]);
            window_job(&off, &out, tshape, inside)
        })
        .collect();
    Ok((jobs, true))
}

/// Every cell of the grid whose axis `k` is cut into `segments[k]` (`(start, length)` pairs),
/// as `(offsets, lengths)`, the last axis fastest; none when an axis has no segment.
fn grid_cells(segments: &[Vec<(usize, usize)>]) -> Vec<(Vec<usize>, Vec<usize>)> {
    let d = segments.len();
    let mut cells = Vec::new();
    if segments.iter().any(|s| s.is_empty()) {
        return cells;
    }
    let mut idx = vec![0usize; d];
    loop {
        cells.push((
            (0..d).map(|k| segments[k][idx[k]].0).collect(),
            (0..d).map(|k| segments[k][idx[k]].1).collect(),
        ));
        let mut k = d;
        loop {
            if k == 0 {
                return cells;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < segments[k].len() {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Halves the largest axis of `tile` until a tile's estimate (`est(out, fast)`) fits `limit`;
/// refuses when tiles would become smaller than the template.
fn fit_tile(
    score: Score,
    target: &[usize],
    tshape: &[usize],
    mut tile: Vec<usize>,
    limit: u64,
    est: &dyn Fn(&[usize], &[usize]) -> Result<u64>,
) -> Result<Vec<usize>> {
    loop {
        let len: Vec<usize> = tile.iter().zip(tshape).map(|(o, n)| o + n - 1).collect();
        if est(&tile, &fast_shape(&len))? <= limit {
            return Ok(tile);
        }
        // Halve the largest tile axis; give up when tiles would be smaller than the template.
        let (k, &big) = tile
            .iter()
            .enumerate()
            .max_by_key(|(_, v)| **v)
            .unwrap_or((0, &0));
        if big <= tshape[k].max(8) {
            let (nr, nc) = buffer_counts(score);
            return Err(Error::OutOfMemory {
                what: format!(
                    "template matching ({score}, target {}, template {}, {nr} real + {nc} complex FFT buffers per tile)",
                    fmt_shape(target),
                    fmt_shape(tshape)
                ),
                requested: est(&tile, &fast_shape(&len))?,
                available: limit,
            });
        }
        tile[k] = big.div_ceil(2);
    }
}

/// A job of a restricted search: the [`window_job`] of the output box `offset + [0, out)`,
/// except on the axes where `whole[k]` (the box spans the whole target on that axis, in one
/// segment, in a circular run): there it reads the full run's circular grid, as
/// [`circular_job`] does (the target zero-padded to `fast_shape(target)`, output `x` read at
/// `(x − n/2) mod fast`), instead of a window of `target + n − 1` padded to a fast length
/// (e.g. 154 for 128 + 24 − 1, where the full run's 128 is a power of two). The scores are
/// the whole run's either way; the grid is smaller and never of a slower length.
fn box_job(
    offset: &[usize],
    out: &[usize],
    target: &[usize],
    tshape: &[usize],
    whole: &[bool],
) -> Job {
    let mut job = window_job(offset, out, tshape, true);
    for k in (0..out.len()).filter(|&k| whole[k]) {
        let f = crate::shape::next_fast_len(target[k]);
        job.start[k] = 0;
        job.len[k] = f;
        job.fast[k] = f;
        job.shift[k] = -((tshape[k] / 2) as isize);
    }
    job
}

/// The jobs that score exactly the box `lo..hi` of the target (a restricted search, see
/// `search.rs`): one window job when it fits `limit` bytes (and no `forced` tile shape), else
/// tiles of the box. Each reads its window and the template's margin from the extension the
/// whole run reads, so its scores are the whole run's. In a `circular` run (not padded
/// edges), an axis the box and its tiles span entirely is read on the full run's circular grid
/// ([`box_job`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn plan_box(
    score: Score,
    target: &[usize],
    tshape: &[usize],
    lo: &[usize],
    hi: &[usize],
    circular: bool,
    limit: u64,
    forced: Option<&[usize]>,
    sizes: (usize, usize),
    fixed: u64,
) -> Result<Vec<Job>> {
    let est = |out: &[usize], fast: &[usize]| {
        estimate_sized(score, target, out, fast, sizes.0, sizes.1, fixed)
    };
    let d = target.len();
    let shape: Vec<usize> = lo.iter().zip(hi).map(|(a, z)| z - a).collect();
    let tile: Vec<usize> = match forced {
        Some(t) => {
            if t.len() != d || t.contains(&0) {
                return Err(Error::shape(
                    "tile_shape",
                    format!("{d} positive sizes"),
                    format!("{t:?}"),
                ));
            }
            t.iter().zip(&shape).map(|(&a, &b)| a.min(b)).collect()
        }
        None => fit_tile(score, target, tshape, shape.clone(), limit, &est)?,
    };
    let segments: Vec<Vec<(usize, usize)>> = (0..d)
        .map(|k| {
            (lo[k]..hi[k])
                .step_by(tile[k])
                .map(|a| (a, tile[k].min(hi[k] - a)))
                .collect()
        })
        .collect();
    // The window's grid is never smaller than the circular one (fast lengths grow with the
    // length), so the tile that fits `limit` as windows fits on the mixed grid too.
    let whole: Vec<bool> = (0..d)
        .map(|k| circular && lo[k] == 0 && hi[k] == target[k] && tile[k] >= target[k])
        .collect();
    Ok(grid_cells(&segments)
        .into_iter()
        .map(|(off, out)| box_job(&off, &out, target, tshape, &whole))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_cover_the_target_once() {
        let (jobs, tiled) = plan_jobs(
            Score::FLC,
            &[50, 40],
            &[8, 7],
            false,
            u64::MAX,
            Some(&[16, 16]),
            (4, 4),
            0,
        )
        .unwrap();
        assert!(tiled);
        let mut seen = vec![0u8; 50 * 40];
        for j in &jobs {
            for a in 0..j.out_shape[0] {
                for c in 0..j.out_shape[1] {
                    seen[(j.out_offset[0] + a) * 40 + j.out_offset[1] + c] += 1;
                }
            }
            assert_eq!(j.len, vec![j.out_shape[0] + 7, j.out_shape[1] + 6]);
            assert_eq!(
                j.start,
                vec![j.out_offset[0] as isize - 4, j.out_offset[1] as isize - 3]
            );
        }
        assert!(seen.iter().all(|&v| v == 1));
    }

    #[test]
    fn memory_limit_splits_and_refuses_when_hopeless() {
        let (jobs, tiled) = plan_jobs(
            Score::FLC,
            &[128, 128, 128],
            &[32, 32, 32],
            false,
            60 << 20,
            None,
            (4, 4),
            0,
        )
        .unwrap();
        assert!(tiled && jobs.len() > 1);
        for j in &jobs {
            assert!(
                estimate_sized(Score::FLC, &[128; 3], &j.out_shape, &j.fast, 4, 4, 0).unwrap()
                    <= 60 << 20
            );
        }
        let (jobs, tiled) = plan_jobs(
            Score::FLC,
            &[64, 64],
            &[8, 8],
            false,
            u64::MAX,
            None,
            (4, 4),
            0,
        )
        .unwrap();
        assert!(
            !tiled
                && jobs.len() == 1
                && jobs[0].fast == vec![64, 64]
                && jobs[0].shift == vec![-4, -4]
        );
        let e =
            plan_jobs(Score::FLC, &[64, 64], &[8, 8], false, 1000, None, (4, 4), 0).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
        let e = plan_jobs(
            Score::MCC,
            &[64, 64],
            &[8, 8],
            false,
            0,
            Some(&[32, 32]),
            (4, 4),
            0,
        )
        .unwrap_err();
        assert!(e.to_string().contains("MCC cannot be tiled"), "{e}");
    }

    #[test]
    fn a_box_reads_the_circular_grid_on_the_axes_it_spans() {
        // `--search-z 40:88` on 128³ with a 24³ template: y and x are spanned, so they keep
        // the full run's grid (128, shift −12) instead of a 151-long window on 154.
        let plan = |circular: bool, forced: Option<&[usize]>| {
            plan_box(
                Score::FLC,
                &[128, 128, 128],
                &[24, 24, 24],
                &[40, 0, 0],
                &[88, 128, 128],
                circular,
                u64::MAX,
                forced,
                (4, 4),
                0,
            )
            .unwrap()
        };
        let jobs = plan(true, None);
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(j.fast, vec![72, 128, 128]);
        assert_eq!(j.len, vec![71, 128, 128]);
        assert_eq!(j.start, vec![28, 0, 0]);
        assert_eq!(j.shift, vec![0, -12, -12]);
        assert_eq!(
            (j.out_offset.clone(), j.out_shape.clone()),
            (vec![40, 0, 0], vec![48, 128, 128])
        );
        // Padded edges read the symmetric extension: windows on every axis.
        assert_eq!(plan(false, None)[0].fast, vec![72, 154, 154]);
        // An axis cut into tiles is read as windows; the one still whole stays circular.
        let tiled = plan(true, Some(&[48, 64, 128]));
        assert_eq!(tiled.len(), 2);
        for j in &tiled {
            assert_eq!(
                (j.fast.clone(), j.shift.clone()),
                (vec![72, 88, 128], vec![0, 0, -12])
            );
        }
    }
}
