//! Template matching over MPI ranks (feature `mpi`): the executor of the work layer
//! ([`crate::work`]) whose workers are ranks. One job's rotations split into contiguous ranges,
//! one per rank ([`rotation_range`]), each rank's [`Part`] reduced onto rank 0, where
//! [`MatchJob::finish`] assembles the result.
//!
//! The merged result is bit-identical to one process, whatever the number of ranks:
//!
//! * rank `k` of `n` searches rotations [`rotation_range`]`(nrot, n, k)`;
//! * the per-voxel maxima are reduced with [`replaces`], the single loop's strict `>` with ties
//!   kept by the lower rotation index (also for `−0`/`+0`), in an order-free reduction;
//! * Σ score² is not summed per rank (an MPI sum of per-rank totals is 1–2 ulp off): every rank
//!   keeps the partial of each (tile, rotation) call and rank 0 gathers them into the part,
//!   whose ranges [`MatchJob::finish`] folds in the single process's order;
//! * the score moments are integer sums and the background maxima start from +0: exact.
//!
//! Every collective here must be reached by every rank. A step that can fail on some ranks only
//! goes through [`agree`] first, so that all ranks see the same error instead of some waiting
//! forever in the next collective; [`match_template`] does this for its own steps.
//!
//! ```no_run
//! use monomorph::algo::matching::Score;
//! use monomorph::algo::rotations::RotationSet;
//! use monomorph::dist::{self, mpi::traits::Communicator};
//! use monomorph::ndarray::{ArrayD, IxDyn};
//! use monomorph::prelude::*;
//! use monomorph::work::{Control, MatchJob};
//! use monomorph::HostArray;
//!
//! let universe = dist::mpi::initialize().expect("MPI initialised twice");
//! let world = universe.world();
//! let b = Cpu::<Single>::new();
//! let target = HostArray::F32(ArrayD::zeros(IxDyn(&[32, 32, 32])));
//! let template = HostArray::F32(ArrayD::zeros(IxDyn(&[8, 8, 8])));
//! let job = MatchJob::new(target, template, Score::CC, RotationSet::uniform(3, 30.0)?);
//! match dist::match_template(&world, &b, &job, &Control::new()) {
//!     Ok(Some(result)) => println!("rank 0: ssum {}", result.ssum), // the merged result
//!     Ok(None) => {}                                                 // other ranks
//!     Err(e) => eprintln!("{e}"), // every rank: the lowest failing rank's error
//! }
//! # Ok::<(), monomorph::Error>(())
//! ```

use std::fmt;
use std::os::raw::{c_int, c_void};

use monomorph_core::algo::matching::{MatchResult, background_grid};
use mpi::Count;
use mpi::collective::{SystemOperation, UnsafeUserOperation};
use mpi::datatype::{PartitionMut, UserDatatype};
use mpi::traits::*;

pub use crate::work::rotation_range;
use crate::work::{Control, Maps, MatchJob, Part, replaces};
use crate::{Backend, Error, Result};

/// The `mpi` crate (rsmpi) this module is built on, so that a user crate initialises MPI and
/// builds communicators with the same version.
pub use mpi;

/// A failure on one rank, as every rank sees it after [`agree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankError {
    /// The lowest rank that failed.
    pub rank: i32,
    /// That rank's code for the failure (see [`agree_code`]; 1 from [`agree`]).
    pub code: i32,
    /// That rank's error message.
    pub message: String,
}

impl fmt::Display for RankError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}: {}", self.rank, self.message)
    }
}

impl std::error::Error for RankError {}

/// Collective (every rank, at the same point): `Ok` on every rank if every rank's `local` is
/// `Ok`, else the same [`RankError`] on every rank: the lowest failing rank's message (code 1).
pub fn agree<C: Communicator, T, E: fmt::Display>(
    comm: &C,
    local: std::result::Result<T, E>,
) -> std::result::Result<T, RankError> {
    agree_code(comm, local, |_| 1)
}

/// [`agree`] with a code per error (e.g. an exit code), taken from the failing rank.
pub fn agree_code<C: Communicator, T, E: fmt::Display>(
    comm: &C,
    local: std::result::Result<T, E>,
    code: impl Fn(&E) -> i32,
) -> std::result::Result<T, RankError> {
    agree_ranked(comm, local, code, |_| false)
}

/// [`agree_code`] where some errors are only echoes of another rank's failure (`echo`: e.g. a
/// rank that stopped its loop because another rank sent [`send_stop`]): the lowest rank with a
/// real error is reported; an echo only when no rank has a real error.
pub fn agree_ranked<C: Communicator, T, E: fmt::Display>(
    comm: &C,
    local: std::result::Result<T, E>,
    code: impl Fn(&E) -> i32,
    echo: impl Fn(&E) -> bool,
) -> std::result::Result<T, RankError> {
    let (rank, size) = (comm.rank(), comm.size());
    let mine = match &local {
        Ok(_) => 2 * size,
        Err(e) if echo(e) => size + rank,
        Err(_) => rank,
    };
    let mut lowest = 2 * size;
    comm.all_reduce_into(&mine, &mut lowest, SystemOperation::min());
    if lowest == 2 * size {
        return local.map_err(|_| unreachable_error());
    }
    let first = lowest % size;
    let (mut c, mut msg) = match &local {
        Err(e) if rank == first => (code(e), e.to_string().into_bytes()),
        _ => (0, Vec::new()),
    };
    let root = comm.process_at_rank(first);
    root.broadcast_into(&mut c);
    bcast_bytes(comm, first, &mut msg);
    Err(RankError {
        rank: first,
        code: c,
        message: String::from_utf8_lossy(&msg).into_owned(),
    })
}

/// The tag of [`send_stop`]'s messages.
pub const STOP_TAG: mpi::Tag = 0x5709;

/// Point to point, not collective: tells every other rank of `comm` to stop early (this rank
/// failed). The others see it through [`stop_requested`], e.g. from a progress callback, and
/// then meet this rank at the next [`agree`] instead of finishing their loops first. The
/// messages are a few bytes (sent eagerly, so this does not wait for the receivers); one that
/// is never received (its rank had finished) is dropped at `MPI_Finalize`.
pub fn send_stop<C: Communicator>(comm: &C) {
    let rank = comm.rank();
    for k in (0..comm.size()).filter(|&k| k != rank) {
        comm.process_at_rank(k).send_with_tag(&rank, STOP_TAG);
    }
}

/// Point to point, non-blocking: whether another rank sent [`send_stop`] (the message is
/// received, so a later call says `false` again unless more arrived).
pub fn stop_requested<C: Communicator>(comm: &C) -> bool {
    let mut seen = false;
    while let Some(m) = comm
        .any_process()
        .immediate_matched_probe_with_tag(STOP_TAG)
    {
        let (_, _): (i32, _) = m.0.matched_receive();
        seen = true;
    }
    seen
}

/// Only reached if MPI's MIN reduction were wrong: every rank reported success.
fn unreachable_error() -> RankError {
    RankError {
        rank: -1,
        code: 1,
        message: "internal error: ranks disagree on a failure".into(),
    }
}

/// Collective: rank `from`'s bytes to every rank (length first).
pub fn bcast_bytes<C: Communicator>(comm: &C, from: i32, buf: &mut Vec<u8>) {
    let root = comm.process_at_rank(from);
    let mut len = buf.len() as u64;
    root.broadcast_into(&mut len);
    buf.resize(len as usize, 0);
    for chunk in buf.chunks_mut(CHUNK_BYTES) {
        root.broadcast_into(chunk);
    }
}

/// MPI counts are `i32`: large buffers move in chunks of at most this many bytes.
const CHUNK_BYTES: usize = 1 << 30;
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

/// Collective: `job` over the ranks of `comm`, each searching its [`rotation_range`] as worker
/// `rank` of `control`: the merged result on rank 0 (bit-identical to one process), `None` on
/// the others, and on a failure of any rank the same [`RankError`] on every rank.
pub fn match_template<B: Backend, C: Communicator>(
    comm: &C,
    b: &B,
    job: &MatchJob,
    control: &Control<'_>,
) -> std::result::Result<Option<MatchResult<B>>, RankError> {
    let (size, rank) = (comm.size() as usize, comm.rank() as usize);
    let range = rotation_range(job.rotations.len(), size, rank);
    let part = agree(comm, job.run_range(b, range, control, rank))?;
    let merged = reduce(comm, job, part).and_then(|p| p.map(|p| job.finish(b, p)).transpose());
    agree(comm, merged)
}
