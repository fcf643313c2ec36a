//! Where the work runs: what to compute ([`MatchJob`], owned and `Send + Sync`) apart from
//! where it runs (an executor over a [`Plan`]).
//!
//! A plan cuts the work into items (job, rotation range) — [`Plan::whole`], one job split over
//! workers ([`Plan::split`]), or many jobs balanced over workers that take items on demand
//! ([`Plan::balanced`]). Every item yields one backend-free [`Part`]; [`Part::merge`] (the tie
//! rule per voxel, Σ score² partials kept per range and folded in one loop's order, integer
//! moments, background by maximum) makes any split bit-identical to one loop, and
//! [`MatchJob::finish`] is the only place a result is assembled from parts. A job may hold
//! several templates ([`MatchJob::more_templates`], matched in one pass): its parts then index
//! (template, rotation) pairs, so the same merge ties to the lower template in every executor. One [`Control`]
//! carries progress (rotations over all items), stop, the first failure and a poll hook.
//! The executors — [`Serial`], [`Threads`] (device threads, items on demand) and, with the
//! `mpi` feature, `monomorph::dist::Ranks` (MPI ranks, items on demand from rank 0) — run the
//! same plan; the command, the Python package and a Rust program are all clients of this
//! layer.
//!
//! ```
//! use monomorph::algo::matching::Score;
//! use monomorph::algo::rotations::RotationSet;
//! use monomorph::work::{Control, MatchJob, Plan, Serial};
//! use monomorph::{DispatchOptions, HostArray};
//! use monomorph::ndarray::{ArrayD, IxDyn};
//!
//! let target = ArrayD::from_shape_fn(IxDyn(&[24, 24]), |i| ((i[0] * 7 + i[1] * 3) % 11) as f32);
//! let template = ArrayD::from_shape_fn(IxDyn(&[6, 6]), |i| (i[0] + 2 * i[1]) as f32);
//! let job = MatchJob::new(
//!     HostArray::F32(target),
//!     HostArray::F32(template),
//!     Score::FLC,
//!     RotationSet::uniform(2, 30.0)?,
//! );
//! let plan = Plan::split(job.rotations.len(), 3); // three items, run one after another
//! let jobs = vec![std::sync::Arc::new(job)];
//! let mut parts = Vec::new();
//! Serial::default()
//!     .run(&jobs, &plan, &Control::new(), |done| {
//!         parts.push(done);
//!         Ok::<(), ()>(())
//!     })
//!     .expect("ran");
//! assert_eq!(parts[0].ran.len(), 3);
//! # Ok::<(), monomorph::Error>(())
//! ```
//!
//! # Running on several devices and ranks
//!
//! Why any split gives one process's bits: the loop over rotations keeps per voxel the first
//! best score (strict `>`), and [`replaces`] is that rule for two parts, whatever their order;
//! Σ score² is never summed per part (a sum of per-part totals is 1–2 ulp off) — every part
//! keeps the partial of each (tile, rotation) call and [`Part::ordered_ssum`] folds them in the
//! loop's order; score moments are 128-bit integer sums; background maxima start from +0.
//!
//! * **Device threads** ([`Threads`]): one worker per device, each with its own backend — a CUDA
//!   device, or on the CPU a worker with a rayon pool of its own (the threads shared out). Worker
//!   `k` starts with item `k`; every later item goes to whichever worker is free, so an unequal
//!   list keeps every device busy. `examples/devices.rs` splits one match over two CPU workers
//!   and asserts the merge equals one backend's `match_template` bit for bit:
//!
//!   ```sh
//!   cargo run --release --example devices
//!   ```
//!
//! * **MPI ranks** (feature `mpi`, `monomorph::dist`): `dist::match_template(comm, b, &job,
//!   &control)` runs rank `k`'s [`rotation_range`] and reduces the parts onto rank 0 (a
//!   collective; every fallible step agreed on, so a failure on one rank is the same error on
//!   all). `examples/mpi_match.rs` runs it on two halves of the world:
//!
//!   ```sh
//!   cargo build --release --features mpi --example mpi_match
//!   mpirun -n 4 target/release/examples/mpi_match
//!   ```
//!
//!   Many jobs over the ranks (a list of tomograms): `dist::Ranks::run(jobs, plan, control,
//!   on_done, describe)`, every rank with the same [`Plan`] (e.g. [`Plan::balanced`]). Rank 0
//!   hands out the items as ranks become free and answers them between its own rotations; a
//!   job that is one item is finished (`on_done`) on the rank that ran it, a split job's parts
//!   travel to rank 0 and are merged and finished there; what `on_done` returns (serde) goes to
//!   rank 0 with who ran what. `monomorph match --target-list` under `mpirun` is this executor.
//!
//! * **Your own scheduler**: [`MatchJob::run_range`] (or the [`RunRange`] task) on any
//!   backend gives a [`Part`] for any range; ship parts as you like (they are plain host data),
//!   [`Part::merge`] them in any order and call [`MatchJob::finish`] once.
//!
//! A [`Control`] is shared by the workers of a run: its progress callback sees rotations over
//! all items, [`Control::stop`] (or its poll hook returning `true`, e.g. on Ctrl-C or an MPI
//! stop message) cancels every worker at its next rotation, and the first failure is kept.

mod control;
mod exec;
mod input;
mod job;
mod part;
mod plan;

pub use control::{Control, FailAfter, Failure, PollFn, ProgressFn};
pub use exec::{Done, JobSource, Loader, Ran, RunError, Serial, Threads};
pub use input::JobArray;
pub use job::{ExtraTemplate, MatchJob, Restriction, RunRange, Uploaded};
pub use part::{Maps, Part, merge_best, replaces};
pub use plan::{Item, JobSize, Plan, rotation_range};

/// A job and its parts cross threads and ranks.
#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<MatchJob>();
    is::<Part>();
    is::<Control<'static>>();
}
