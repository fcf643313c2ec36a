//! Template matching over MPI ranks (feature `mpi`): the executors of the work layer
//! ([`crate::work`]) whose workers are ranks. [`match_template`]: one job's rotations split
//! into contiguous ranges, one per rank ([`rotation_range`]), each rank's
//! [`Part`](crate::work::Part) reduced onto rank 0 ([`reduce`]), where [`MatchJob::finish`]
//! assembles the result. [`Ranks`]: a plan of many jobs, items handed out on demand by rank 0
//! (see its module for the protocol).
//!
//! The merged result is bit-identical to one process, whatever the number of ranks:
//!
//! * rank `k` of `n` searches rotations [`rotation_range`]`(nrot, n, k)`;
//! * the per-voxel maxima are reduced with [`replaces`](crate::work::replaces), the single loop's strict `>` with ties
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

use monomorph_core::algo::matching::MatchResult;
use mpi::collective::SystemOperation;
use mpi::traits::*;

use crate::Backend;
pub use crate::work::rotation_range;
use crate::work::{Control, MatchJob};

mod merge;
mod schedule;

pub use merge::reduce;
pub use schedule::{Finished, Ranks};

/// The `mpi` crate (rsmpi) this module is built on, so that a user crate initialises MPI and
/// builds communicators with the same version.
pub use mpi;

/// A failure on one rank, as every rank sees it after [`agree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankError {
    /// The lowest rank that failed.
    pub rank: i32,
    /// That rank's code for the failure (an exit code from [`Ranks`]; 1 from [`agree`]).
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
pub(crate) fn agree_code<C: Communicator, T, E: fmt::Display>(
    comm: &C,
    local: std::result::Result<T, E>,
    code: impl Fn(&E) -> i32,
) -> std::result::Result<T, RankError> {
    let (rank, size) = (comm.rank(), comm.size());
    let mine = if local.is_ok() { size } else { rank };
    let mut lowest = size;
    comm.all_reduce_into(&mine, &mut lowest, SystemOperation::min());
    if lowest == size {
        return local.map_err(|_| unreachable_error());
    }
    let first = lowest;
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

/// Only reached if MPI's MIN reduction were wrong: every rank reported success.
fn unreachable_error() -> RankError {
    RankError {
        rank: -1,
        code: 1,
        message: "internal error: ranks disagree on a failure".into(),
    }
}

/// Collective: rank `from`'s bytes to every rank (length first).
pub(crate) fn bcast_bytes<C: Communicator>(comm: &C, from: i32, buf: &mut Vec<u8>) {
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
