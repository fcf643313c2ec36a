//! The exact merges of parts over ranks: per-voxel maxima with the single loop's tie rule,
//! integer moments, background maxima, and the gathered Σ score² partials.

use std::os::raw::{c_int, c_void};

use monomorph_core::algo::matching::background_grid;
use mpi::Count;
use mpi::collective::{SystemOperation, UnsafeUserOperation};
use mpi::datatype::{PartitionMut, UserDatatype};
use mpi::traits::*;

use crate::work::{Maps, MatchJob, Part, replaces, rotation_range};
use crate::{Error, Result};

/// Voxels per reduction call: bounds scratch memory (and MPI's `i32` counts).
const CHUNK: usize = 1 << 22;

/// One voxel's running maximum, moved as opaque bytes (serves f32/i32 and f64/i64).
#[derive(Clone, Copy)]
#[repr(C)]
struct Best<T, I> {
    score: T,
    index: I,
}

// SAFETY: `Best<T, I>` is plain old data of `size_of::<Self>()` bytes without padding (checked
// in `reduce_best` before any transfer); only `keep_first_max` interprets it.
unsafe impl<T: Copy, I: Copy> Equivalence for Best<T, I> {
    type Out = UserDatatype;
    fn equivalent_datatype() -> UserDatatype {
        UserDatatype::contiguous(size_of::<Self>() as Count, &u8::equivalent_datatype())
    }
}

/// The reduction: `invec` holds lower ranks (earlier rotations), `inout` later ones; the later
/// value stays only if it [`replaces`] the earlier one (strictly greater), as in the single loop.
unsafe extern "C" fn keep_first_max<T: PartialOrd + Copy, I: PartialOrd + Default + Copy>(
    invec: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _: *mut mpi::ffi::MPI_Datatype,
) {
    // SAFETY: MPI passes `len` elements of the datatype built by `Best::equivalent_datatype`.
    let n = unsafe { *len } as usize;
    let earlier = unsafe { std::slice::from_raw_parts(invec as *const Best<T, I>, n) };
    let later = unsafe { std::slice::from_raw_parts_mut(inout as *mut Best<T, I>, n) };
    for (e, l) in earlier.iter().zip(later) {
        if !replaces((e.score, e.index), (l.score, l.index)) {
            *l = *e;
        }
    }
}

/// Collective: rank 0's `scores` / `index` become the merge of every rank's maps (each rank's
/// indices already global), the lower rank winning ties. Other ranks' slices are left as they
/// are. Every rank must pass slices of the same length.
fn reduce_best<C: Communicator, T: PartialOrd + Copy, I: PartialOrd + Default + Copy>(
    comm: &C,
    scores: &mut [T],
    index: &mut [I],
) -> Result<()> {
    if size_of::<Best<T, I>>() != size_of::<T>() + size_of::<I>() || scores.len() != index.len() {
        // Same on every rank (types and lengths are the caller's): no collective is skipped
        // by some ranks only.
        return Err(Error::invalid(
            "scores/index",
            "expected equal lengths and an unpadded (score, index) pair",
        ));
    }
    // SAFETY: keep_first_max::<T, I> reads and writes exactly `len` values of Best<T, I>.
    let op = unsafe { UnsafeUserOperation::associative(keep_first_max::<T, I>) };
    let root = comm.process_at_rank(0);
    let is_root = comm.rank() == 0;
    let mut send = Vec::with_capacity(CHUNK.min(scores.len()));
    let mut recv = Vec::with_capacity(if is_root { CHUNK.min(scores.len()) } else { 0 });
    for (s, i) in scores.chunks_mut(CHUNK).zip(index.chunks_mut(CHUNK)) {
        send.clear();
        send.extend(
            s.iter()
                .zip(&*i)
                .map(|(&score, &index)| Best { score, index }),
        );
        if !is_root {
            root.reduce_into(&send[..], &op);
            continue;
        }
        recv.clear();
        recv.extend_from_slice(&send);
        root.reduce_into_root(&send[..], &mut recv[..], &op);
        for ((s, i), b) in s.iter_mut().zip(i.iter_mut()).zip(&recv) {
            (*s, *i) = (b.score, b.index);
        }
    }
    Ok(())
}

/// One 128-bit fixed-point sum (`[low, high]` words) of the score moments, moved as opaque
/// bytes so that MPI never splits a pair.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Wide([i64; 2]);

// SAFETY: plain old data of 16 bytes; only `add_wide` interprets it.
unsafe impl Equivalence for Wide {
    type Out = UserDatatype;
    fn equivalent_datatype() -> UserDatatype {
        UserDatatype::contiguous(size_of::<Self>() as Count, &u8::equivalent_datatype())
    }
}

/// The reduction of the moments: integer sums, exact and order-free.
unsafe extern "C" fn add_wide(
    invec: *mut c_void,
    inout: *mut c_void,
    len: *mut c_int,
    _: *mut mpi::ffi::MPI_Datatype,
) {
    // SAFETY: MPI passes `len` elements of the datatype built by `Wide::equivalent_datatype`.
    let n = unsafe { *len } as usize;
    let a = unsafe { std::slice::from_raw_parts(invec as *const Wide, n) };
    let b = unsafe { std::slice::from_raw_parts_mut(inout as *mut Wide, n) };
    for (x, y) in a.iter().zip(b) {
        monomorph_core::backend::host::moments_merge(&mut y.0, &x.0);
    }
}

/// Collective: rank 0's `acc` becomes the sum of every rank's score moments (4 words per voxel,
/// see [`Moments`](monomorph_core::backend::Moments)), exact whatever the number of ranks; and
/// every rank learns the scales (those of any rank that ran rotations: they depend on the
/// inputs only). Every rank must pass the same length (zeros where it ran no rotation, with
/// scales `[0, 0]`).
fn reduce_moments<C: Communicator>(comm: &C, acc: &mut [i64], scale: [f64; 2]) -> Result<[f64; 2]> {
    let mut all = [0.0f64; 2];
    comm.all_reduce_into(&scale[..], &mut all[..], SystemOperation::max());
    if !acc.len().is_multiple_of(2) {
        return Err(Error::invalid("moments", "an odd number of words"));
    }
    // SAFETY: add_wide reads and writes exactly `len` values of Wide.
    let op = unsafe { UnsafeUserOperation::commutative(add_wide) };
    let root = comm.process_at_rank(0);
    let is_root = comm.rank() == 0;
    let mut send: Vec<Wide> = Vec::with_capacity(CHUNK.min(acc.len() / 2));
    let mut recv: Vec<Wide> = Vec::with_capacity(if is_root { send.capacity() } else { 0 });
    for words in acc.chunks_mut(2 * CHUNK) {
        send.clear();
        send.extend(words.chunks_exact(2).map(|w| Wide([w[0], w[1]])));
        if !is_root {
            root.reduce_into(&send[..], &op);
            continue;
        }
        recv.clear();
        recv.resize(send.len(), Wide::default());
        root.reduce_into_root(&send[..], &mut recv[..], &op);
        for (w, r) in words.chunks_exact_mut(2).zip(&recv) {
            w.copy_from_slice(&r.0);
        }
    }
    Ok(all)
}

/// The identity maps of `job` (what a rank with no rotations contributes): scores −∞, index
/// −1, zero moments and background.
fn identity_maps(job: &MatchJob) -> Maps {
    let ts = job.target.shape();
    let voxels: usize = ts.iter().product();
    Maps {
        scores: vec![f64::NEG_INFINITY; voxels],
        index: vec![-1; voxels],
        moments: job.score_stats.then(|| (vec![0; 4 * voxels], [0.0; 2])),
        background: job.background.map(|_| {
            let (g, count) = background_grid(ts, job.template.shape(), job.pad_edges);
            (vec![0.0; g.iter().product()], count)
        }),
    }
}

/// Collective: every rank's part of `job` (its rotations, [`Part::empty`] when it ran none)
/// merged onto rank 0 with the one merge rule: `Some` on rank 0, `None` elsewhere. Every rank
/// must call it after its own part succeeded (e.g. through [`agree`]). An error here is local
/// to rank 0 (after the collectives), so [`agree`] on it.
pub fn reduce<C: Communicator>(comm: &C, job: &MatchJob, part: Part) -> Result<Option<Part>> {
    let (size, rank) = (comm.size() as usize, comm.rank() as usize);
    let mut maps = part.maps.unwrap_or_else(|| identity_maps(job));
    reduce_best(comm, &mut maps.scores, &mut maps.index)?;
    if let Some((acc, scale)) = maps.moments.as_mut() {
        *scale = reduce_moments(comm, acc, *scale)?;
    }
    let root = comm.process_at_rank(0);
    if let Some((map, _)) = maps.background.as_mut() {
        // Background maxima (from +0; never −0 or NaN): MPI's MAX is exact on them.
        if rank == 0 {
            let mut recv = vec![0.0f64; map.len()];
            for (s, r) in map.chunks(CHUNK).zip(recv.chunks_mut(CHUNK)) {
                root.reduce_into_root(s, r, SystemOperation::max());
            }
            *map = recv;
        } else {
            for s in map.chunks(CHUNK) {
                root.reduce_into(s, SystemOperation::max());
            }
        }
    }
    // Σ score² partials of every rank's range, gathered (ranges known from the split).
    let mine: Vec<f64> = part.ranges.into_iter().flat_map(|(_, p)| p).collect();
    let n = mine.len() as Count;
    if rank != 0 {
        root.gather_into(&n);
        root.gather_varcount_into(&mine[..]);
        return Ok(None);
    }
    let mut counts = vec![0 as Count; size];
    root.gather_into_root(&n, &mut counts[..]);
    let displs: Vec<Count> = counts
        .iter()
        .scan(0 as Count, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect();
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let mut all = vec![0.0f64; total];
    root.gather_varcount_into_root(
        &mine[..],
        &mut PartitionMut::new(&mut all[..], counts.clone(), &displs[..]),
    );
    let nrot = job.rotations.len();
    let ranges = (0..size)
        .map(|k| {
            let at = displs[k] as usize;
            (
                rotation_range(nrot, size, k),
                all[at..at + counts[k] as usize].to_vec(),
            )
        })
        .collect();
    Ok(Some(Part {
        ranges,
        maps: Some(maps),
    }))
}
