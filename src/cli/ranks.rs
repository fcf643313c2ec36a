//! The command under an MPI launcher (`mpirun`, `srun`): detection, and with the `mpi` feature
//! `monomorph match` split over the ranks ([`monomorph::dist`]).
//!
//! Every rank reads and checks the inputs itself; each fallible step is agreed on
//! ([`monomorph::dist::agree_code`]) before the next collective, so a failure on one rank ends
//! every rank with the same one-line error (`error: rank K: …`), printed by rank 0, instead of
//! a hang. The exit code is the failing rank's when that is rank 0 (an input error everyone
//! shares: 2), else 1 (a failure of that rank while running).

/// The number of ranks this process was started as one of, from the launcher's environment
/// (Open MPI's `mpirun`, MPICH/Intel `mpiexec` and Slurm's `srun` with PMI), or `None` when
/// not started by a launcher.
pub fn launched_ranks() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_SIZE",
        "SLURM_STEP_NUM_TASKS",
    ]
    .iter()
    .filter(|v| **v != "SLURM_STEP_NUM_TASKS" || std::env::var_os("SLURM_PROCID").is_some())
    .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// This process's rank from the launcher's environment (0 when not launched).
pub fn launched_rank() -> usize {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
    .unwrap_or(0)
}

/// The error of a binary without the `mpi` feature started as one of `n` > 1 ranks: it would
/// otherwise run the whole job `n` times, writing the same files.
#[cfg(not(feature = "mpi"))]
pub fn unsupported(n: usize) -> super::error::CliError {
    super::error::CliError::input(format!(
        "started as one of {n} MPI ranks (mpirun/srun), but this monomorph was built without \
         MPI support: rebuild it with `cargo build --release --features mpi`, or run it once, \
         without mpirun"
    ))
}

/// The message of a rank that stopped early because another rank failed.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub const ECHO: &str = "stopped: another rank failed";

/// Set when the command's error was already printed (by rank 0, under MPI, before the other
/// ranks exit: a launcher may kill rank 0 as soon as another rank exits non-zero).
pub static PRINTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This process's rank on its node, from the launcher's environment (Open MPI, Slurm, MPICH,
/// PMIx), or `None` when the launcher does not say.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn local_rank() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
        "PMIX_LOCAL_RANK",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// The CUDA device of node-local rank `local`: the `local`-th of `--devices` (modulo its
/// length) when given, else `local` modulo the `visible` devices.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn rank_device(
    local: usize,
    devices: Option<&super::matching::Devices>,
    visible: usize,
) -> usize {
    match devices {
        Some(d) if !d.0.is_empty() => d.0[local % d.0.len()],
        _ => local % visible.max(1),
    }
}

/// Without MPI there is nothing to agree with: `local` itself.
#[cfg(not(feature = "mpi"))]
pub fn agree_all<T>(local: super::error::CliResult<T>) -> super::error::CliResult<T> {
    local
}

#[cfg(feature = "mpi")]
pub use with_mpi::*;

#[cfg(feature = "mpi")]
mod with_mpi {
    use std::time::Instant;

    use monomorph::dist::mpi::topology::SimpleCommunicator;
    use monomorph::dist::mpi::traits::*;
    use monomorph::dist::{self, RankError, Ranks};
    use monomorph::work::{Control, Done, Plan, Ran, RunError};
    use serde_json::json;
    use tracing::info_span;

    use monomorph::dispatch::BackendChoice;

    use super::super::global::BackendArg;
    use super::super::matched::{Finish, write};
    use super::super::matching::{
        Devices, MatchArgs, job_dispatch, match_error, prepare, test_hook,
    };
    use super::super::output::Outputs;

    use super::super::error::{CliError, CliResult};
    use super::super::global::Global;
    use super::super::trace::progress;

    /// MPI, initialised by [`init`] when the process was started by a launcher; finalised on drop.
    pub struct Mpi(#[allow(dead_code)] monomorph::dist::mpi::environment::Universe);

    /// Initialises MPI when started by a launcher (funneled: only the main thread calls MPI;
    /// rayon threads compute). Without a launcher nothing is initialised (no MPI start-up cost).
    pub fn init() -> CliResult<Option<Mpi>> {
        if super::launched_ranks().is_none() {
            return Ok(None);
        }
        match dist::mpi::initialize_with_threading(dist::mpi::Threading::Funneled) {
            Some((u, _)) => Ok(Some(Mpi(u))),
            None => Err(CliError::failure("MPI could not be initialised")),
        }
    }

    /// The world communicator when MPI is initialised with more than one rank.
    pub fn world() -> Option<SimpleCommunicator> {
        if !dist::mpi::environment::is_initialized() || dist::mpi::environment::is_finalized() {
            return None;
        }
        let w = SimpleCommunicator::world();
        (w.size() > 1).then_some(w)
    }

    /// Collective when MPI runs over several ranks ([`agree`] on the world), else `local`.
    pub fn agree_all<T>(local: CliResult<T>) -> CliResult<T> {
        match world() {
            Some(w) => agree(&w, local),
            None => local,
        }
    }

    /// The end of a command under MPI: rank 0 prints its error (agreed, or one every rank
    /// found alike, such as a refused flag), then tells every rank whether it did, so that
    /// the line is printed once and no rank's exit ends the job before it is out. A rank
    /// whose error rank 0 did not share is left to print its own.
    pub fn finish(done: &CliResult<()>) {
        let Some(w) = world() else { return };
        let mut rank0_failed = u8::from(done.is_err());
        if let Err(e) = done
            && w.rank() == 0
        {
            super::super::output::complain(&format!("error: {e}"));
        }
        // Also the barrier: no rank leaves before rank 0 has printed.
        w.process_at_rank(0).broadcast_into(&mut rank0_failed);
        if rank0_failed == 1 {
            super::PRINTED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if done.is_err() && w.rank() != 0 {
            // Rank 0's line still has to pass through the launcher's output forwarding.
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }

    /// The agreed error as the command reports it: the failing rank's code when that is rank 0,
    /// else 1 (that rank failed while running).
    fn cli(e: RankError) -> CliError {
        let code = if e.rank == 0 { e.code as u8 } else { 1 };
        CliError {
            code,
            message: e.to_string(),
        }
    }

    /// [`dist::agree_code`] for the command's errors.
    fn agree<T>(world: &SimpleCommunicator, local: CliResult<T>) -> CliResult<T> {
        dist::agree_code(world, local, |e: &CliError| e.code as i32).map_err(cli)
    }

    /// This rank's device under `--backend cuda` (or `auto` finding CUDA): the node-local
    /// rank's ([`super::rank_device`]), `None` for the CPU. Collective (the node-local rank
    /// comes from the launcher's environment, else from a shared-memory split of `world`).
    pub fn rank_device(
        world: &SimpleCommunicator,
        g: &Global,
        devices: Option<&Devices>,
    ) -> Option<usize> {
        let shared = world.split_shared(world.rank()).rank() as usize;
        let local = super::local_rank().unwrap_or(shared);
        let opts = g.dispatch(None);
        let cuda = match opts.backend {
            BackendChoice::Cuda => true,
            BackendChoice::Auto => monomorph::dispatch::cuda_device_count() > 0,
            BackendChoice::Cpu => false,
        };
        cuda.then(|| super::rank_device(local, devices, monomorph::dispatch::cuda_device_count()))
    }

    /// `g` for this rank: its CUDA device chosen ([`rank_device`]; the backend then `cuda`,
    /// so `auto` does not open device 0 on every rank), and the device table of all ranks
    /// (−1: the CPU). Collective.
    pub fn rank_global(
        world: &SimpleCommunicator,
        g: &Global,
        devices: Option<&Devices>,
    ) -> (Global, Vec<i64>) {
        let dev = rank_device(world, g, devices);
        let mut g = g.clone();
        g.ranks = true;
        if let Some(d) = dev {
            g.device = Some(d);
            g.backend = BackendArg::Cuda;
        }
        let mine = dev.map_or(-1, |d| d as i64);
        let mut all = vec![0i64; world.size() as usize];
        world.all_gather_into(&mine, &mut all[..]);
        (g, all)
    }

    /// `monomorph match` on one target over the ranks of `world`: the job's rotations split
    /// into one contiguous range per rank ([`Plan::split`]), run by the library's [`Ranks`]
    /// (items on demand from rank 0, parts merged on rank 0, bit-identical to one process for
    /// any split), rank 0 writing the outputs when the merged job is done.
    pub fn run_match(world: &SimpleCommunicator, g: &Global, a: &MatchArgs) -> CliResult<()> {
        let t0 = Instant::now();
        let (rank, size) = (world.rank(), world.size() as usize);
        let (g, devices) = rank_global(world, g, a.devices.as_ref());
        let (p, job) = agree(world, prepare(&g, a))?;
        let out = agree(
            world,
            if rank == 0 {
                Outputs::in_dir("--out", &a.out).map(Some)
            } else {
                Ok(None)
            },
        )?;
        let _span = info_span!("match", rank, ranks = size).entered();
        let mem = job.job.memory_limit;
        let plan = Plan::split(job.job.rotations.len(), size);
        // One bar, on rank 0, counting every rank's rotations (the executor reports them).
        let pb = progress(plan.rotations(), "rotations", p.g.quiet || rank != 0);
        let control = Control::new()
            .with_progress(|d, _| pb.set_position(d))
            .fail_after(test_hook(None));
        let opts = p.g.dispatch(a.memory_limit);
        let jobs = vec![job.job.clone()];
        // Rank 0's outputs, written when the merged job is done (on rank 0: the job is split).
        let mut held = out.map(|out| (p, out));
        let on_done = |d: Done| -> CliResult<()> {
            let (mut p, out) = held.take().ok_or_else(|| {
                CliError::failure("the match finished on a rank that does not write it")
            })?;
            let t1 = Instant::now();
            let finish = Finish {
                job: &job,
                part: d.part,
                match_s: t0.elapsed().as_secs_f64(),
            };
            let mut m = {
                let _s = info_span!("merge").entered();
                monomorph::dispatch(job_dispatch(&p.g, &job, a.memory_limit), finish)
                    .map_err(|e| match_error(e, mem))?
            };
            m.dist = Some(mpi_json(&devices, size, &d.ran, t1.elapsed().as_secs_f64()));
            p.timings.record("total", t0.elapsed().as_secs_f64());
            write(a, p, out, m)
        };
        let describe = |e: RunError<CliError>| -> (i32, String) {
            let e = rank_error(e, mem);
            (i32::from(e.code), e.message)
        };
        let ran = Ranks::new(opts).run(&jobs, &plan, &control, on_done, describe);
        pb.finish_and_clear();
        ran.map(|_| ()).map_err(cli)
    }

    /// The command's error for a rank's run that did not finish: the callback's own error, the
    /// echo of a stop, or the worker's failure (an injected one named as such).
    pub fn rank_error(e: RunError<CliError>, memory_limit: Option<u64>) -> CliError {
        match e {
            RunError::Callback(e) => e,
            RunError::Stopped => CliError::failure(super::ECHO),
            RunError::Worker(f) => match f.error {
                monomorph::Error::Cancelled { done, .. } if f.injected => CliError::failure(
                    format!("injected failure after {done} rotations (MONOMORPH_TEST_FAIL_AFTER)"),
                ),
                e => match_error(e, memory_limit),
            },
        }
    }

    /// run.json's `mpi` for one target: the ranks, each rank's matching seconds and rotations,
    /// the merge's seconds on rank 0 (finishing the merged parts), and which rank ran which
    /// rotations (on which device) for how long, one entry per item in rotation order.
    fn mpi_json(devices: &[i64], size: usize, ran: &[Ran], merge_s: f64) -> serde_json::Value {
        let mut times = vec![0.0f64; size];
        let mut rotations = vec![0usize; size];
        for r in ran {
            if let (Some(t), Some(n)) = (times.get_mut(r.worker), rotations.get_mut(r.worker)) {
                *t += r.seconds;
                *n += r.range.len();
            }
        }
        let ran: Vec<serde_json::Value> = ran
            .iter()
            .map(|r| {
                let d = devices.get(r.worker).copied().unwrap_or(-1);
                json!({
                    "rank": r.worker,
                    "rotations": [r.range.start, r.range.end],
                    "seconds": r.seconds,
                    "device": (d >= 0).then_some(d),
                })
            })
            .collect();
        json!({
            "ranks": size,
            "rank_match_s": times,
            "merge_s": merge_s,
            "rotations_per_rank": rotations,
            "ran": ran,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_take_devices_by_node_local_rank() {
        use super::super::matching::Devices;
        // Without --devices: the local rank modulo the visible devices.
        let got: Vec<usize> = (0..6).map(|l| rank_device(l, None, 4)).collect();
        assert_eq!(got, [0, 1, 2, 3, 0, 1]);
        // With --devices 2,3: local rank i takes the i-th, in turn.
        let d = Devices(vec![2, 3]);
        let got: Vec<usize> = (0..5).map(|l| rank_device(l, Some(&d), 4)).collect();
        assert_eq!(got, [2, 3, 2, 3, 2]);
        assert_eq!(rank_device(3, None, 0), 0);
    }
}
