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
pub const ECHO: &str = "stopped: another rank failed";

/// Whether `e` is [`ECHO`].
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn is_echo(e: &super::error::CliError) -> bool {
    e.message == ECHO
}

/// A rank's loop result as the command reports it: a stop asked by another rank (the control's
/// poll hook) is [`ECHO`], an injected failure says so, the rest is a matching error.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn rank_outcome<T>(
    control: &monomorph::work::Control<'_>,
    local: monomorph::Result<T>,
    mem: Option<u64>,
) -> super::error::CliResult<T> {
    let e = match local {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if !control.fail(0, e) {
        return Err(super::error::CliError::failure(ECHO));
    }
    match control.take_failure() {
        Some(f) => match f.error {
            monomorph::Error::Cancelled { done, .. } if f.injected => {
                Err(super::error::CliError::failure(format!(
                    "injected failure after {done} rotations (MONOMORPH_TEST_FAIL_AFTER)"
                )))
            }
            e => Err(super::matching::match_error(e, mem)),
        },
        None => Err(super::error::CliError::failure(ECHO)),
    }
}

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
    use monomorph::dist::mpi::point_to_point::MatchedReceiveVec;
    use monomorph::dist::mpi::topology::SimpleCommunicator;
    use monomorph::dist::mpi::traits::*;
    use monomorph::dist::{self, RankError};
    use monomorph::work::{Control, rotation_range};
    use monomorph::{Backend, BackendTask};
    use serde_json::json;
    use tracing::info_span;

    use monomorph::dispatch::BackendChoice;

    use super::super::global::BackendArg;
    use super::super::matching::{
        Devices, Job, MatchArgs, Matched, match_error, prepare, test_hook, write,
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

    /// The end of a command under MPI: rank 0 prints the (agreed) error, then every rank waits
    /// for it, so that no rank's exit ends the job before the line is out.
    pub fn finish(done: &CliResult<()>) {
        let Some(w) = world() else { return };
        if let Err(e) = done
            && w.rank() == 0
        {
            super::super::output::complain(&format!("error: {e}"));
            super::PRINTED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        w.barrier();
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

    /// [`agree`] where a rank that stopped because another failed ([`ECHO`]) is not the
    /// failure reported.
    fn agree_echo<T>(world: &SimpleCommunicator, local: CliResult<T>) -> CliResult<T> {
        dist::agree_ranked(world, local, |e: &CliError| e.code as i32, super::is_echo).map_err(cli)
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

    /// `monomorph match` over the ranks of `world`: rank 0 writes the outputs.
    pub fn run_match(world: &SimpleCommunicator, g: &Global, a: &MatchArgs) -> CliResult<()> {
        let root = world.rank() == 0;
        let (g, devices) = rank_global(world, g, a.devices.as_ref());
        let (mut p, job) = agree(world, prepare(&g, a))?;
        let out = agree(
            world,
            if root {
                Outputs::in_dir("--out", &a.out).map(Some)
            } else {
                Ok(None)
            },
        )?;
        let task = RankTask {
            job,
            quiet: p.g.quiet,
            world,
            devices,
        };
        let mut entered = false;
        let done = p.timings.time("total", || {
            monomorph::dispatch(
                p.g.dispatch(a.memory_limit),
                Entered {
                    task,
                    entered: &mut entered,
                },
            )
        });
        let matched = match done {
            Ok(r) => r?,
            // The backend could not start on this rank: meet the others at their first agree.
            Err(e) if !entered => return agree(world, Err(match_error(e, a.memory_limit))),
            Err(e) => return Err(match_error(e, a.memory_limit)),
        };
        let written = match (out, matched) {
            (Some(out), Some(m)) => write(a, p, out, m),
            _ => Ok(()),
        };
        agree(world, written)
    }

    /// Marks that the backend started and the task runs (for the agreement on a failed start).
    struct Entered<'a, 'w> {
        task: RankTask<'w>,
        entered: &'a mut bool,
    }

    impl BackendTask for Entered<'_, '_> {
        type Output = CliResult<Option<Matched>>;
        fn run<B: Backend>(self, b: &B) -> monomorph::Result<Self::Output> {
            *self.entered = true;
            Ok(self.task.run_on(b))
        }
    }

    /// This rank's share of a match.
    struct RankTask<'w> {
        job: Job,
        quiet: bool,
        world: &'w SimpleCommunicator,
        /// Every rank's CUDA device (−1: the CPU), for run.json.
        devices: Vec<i64>,
    }

    impl RankTask<'_> {
        /// Every step agreed; the merged result on rank 0.
        fn run_on<B: Backend>(self, b: &B) -> CliResult<Option<Matched>> {
            let (world, job) = (self.world, &self.job);
            let (rank, size) = (world.rank(), world.size() as usize);
            let _span = info_span!("match", backend = b.name(), rank, ranks = size).entered();
            let mem = job.job.memory_limit;
            agree(world, Ok(()))?; // every rank's backend started
            let nrot = job.job.rotations.len();
            let ranges: Vec<std::ops::Range<usize>> =
                (0..size).map(|k| rotation_range(nrot, size, k)).collect();
            // One bar, on rank 0 (the others are quiet), counting every rank's rotations: the
            // others report theirs to rank 0 as they go ([`Reports`]).
            let pb = progress(nrot as u64, "rotations", self.quiet);
            let reports = Reports::new(world, &ranges);
            // After every rotation: stop early when another rank failed (it sent a stop); the
            // bar counts. The callbacks run on the thread that called MPI (funneled).
            let control = Control::new()
                .with_progress(|done, total| {
                    if let Some(all) = reports.step(done as usize, total as usize) {
                        pb.set_position(all);
                    }
                })
                .with_poll(|| dist::stop_requested(&SimpleCommunicator::world()))
                .fail_after(test_hook(None));
            let t0 = std::time::Instant::now();
            let local = {
                let _s = info_span!("match_part").entered();
                // One control per rank: the rank is its worker 0.
                job.job
                    .run_range(b, ranges[rank as usize].clone(), &control, 0)
            };
            let match_s = t0.elapsed().as_secs_f64();
            let local = super::rank_outcome(&control, local, mem);
            if matches!(&local, Err(e) if !super::is_echo(e)) {
                // This rank failed: the others stop within a rotation, not at their loops' end
                // (before rank 0 waits for their ends below).
                dist::send_stop(world);
            }
            // Every rank reports its end (whatever the outcome) and rank 0 waits for all of
            // them, so no report is left unreceived and the bar reaches every rank's count.
            let counted = reports.finish();
            if let Some(all) = counted {
                pb.set_position(all);
            }
            let part = agree_echo(world, local)?;
            pb.finish_and_clear();
            // Every rank's matching time, for run.json.
            let root = world.process_at_rank(0);
            let mut times = vec![0.0f64; if rank == 0 { size } else { 0 }];
            if rank == 0 {
                root.gather_into_root(&match_s, &mut times[..]);
            } else {
                root.gather_into(&match_s);
            }
            let t1 = std::time::Instant::now();
            let merged = {
                let _s = info_span!("merge").entered();
                dist::reduce(world, &job.job, part)
                    .and_then(|p| p.map(|p| job.job.finish(b, p)).transpose())
            };
            let merge_s = t1.elapsed().as_secs_f64();
            let finished =
                merged.and_then(|m| m.map(|r| job.matched(b, r, match_s + merge_s)).transpose());
            let mut m = agree(world, finished.map_err(|e| match_error(e, mem)))?;
            if let Some(m) = m.as_mut() {
                let ran: Vec<serde_json::Value> = (0..size)
                    .map(|k| {
                        json!({
                            "rank": k,
                            "rotations": [ranges[k].start, ranges[k].end],
                            "seconds": times[k],
                            "device": (self.devices[k] >= 0).then_some(self.devices[k]),
                        })
                    })
                    .collect();
                m.dist = Some(json!({
                    "ranks": size,
                    "rank_match_s": times,
                    "merge_s": merge_s,
                    "rotations_per_rank": ranges.iter().map(|r| r.len()).collect::<Vec<_>>(),
                    "ran": ran,
                    // What rank 0's bar counted: every rank's rotations at the end, and the
                    // reports that moved it while the ranks ran.
                    "progress": { "counted": counted, "reports": reports.received() },
                }));
            }
            Ok(m)
        }
    }

    /// The tag of [`Reports`]' messages.
    const PROGRESS_TAG: dist::mpi::Tag = 0x570a;
    /// Seconds between two reports of a rank.
    const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

    /// Progress of a split match, counted on rank 0 as the ranks go: each other rank sends
    /// `[done, total, final]` (its steps: tiles × rotations) to rank 0, point to point, at most
    /// every [`REPORT_EVERY`] from its progress callback and once at its end; rank 0 reads them
    /// between its own rotations (no collective in the loop), and after its own loop waits
    /// for every rank's end.
    struct Reports {
        /// This rank.
        rank: i32,
        /// Each rank's rotations.
        lens: Vec<usize>,
        /// Rank 0: each rank's last (done, total, finished).
        seen: std::sync::Mutex<Vec<(u64, u64, bool)>>,
        /// Rank 0: reports received from each rank before its end (run.json).
        reports: std::sync::Mutex<Vec<u64>>,
        /// Other ranks: when this rank last reported (`None`: not yet; the first step is
        /// reported at once), and its last step.
        last: std::sync::Mutex<(Option<std::time::Instant>, [i64; 2])>,
    }

    impl Reports {
        fn new(world: &SimpleCommunicator, ranges: &[std::ops::Range<usize>]) -> Self {
            let lens: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
            let seen = lens.iter().map(|_| (0, 0, false)).collect();
            Reports {
                rank: world.rank(),
                lens,
                seen: std::sync::Mutex::new(seen),
                reports: std::sync::Mutex::new(vec![0; ranges.len()]),
                last: std::sync::Mutex::new((None, [0, 0])),
            }
        }

        /// Rotations of every rank done so far, in rotation units.
        fn count(&self, seen: &[(u64, u64, bool)]) -> u64 {
            seen.iter()
                .zip(&self.lens)
                .map(|(&(d, t, fin), &n)| {
                    if fin {
                        n as u64
                    } else {
                        (d * n as u64).checked_div(t).unwrap_or(0)
                    }
                })
                .sum()
        }

        /// Reads every report already here (rank 0).
        fn drain(&self, seen: &mut [(u64, u64, bool)], wait_for_all: bool) {
            // On the thread that called MPI (funneled), like every progress callback.
            let world = SimpleCommunicator::world();
            let mut reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let pending = seen.iter().skip(1).any(|s| !s.2);
                if wait_for_all && pending {
                    let (v, st) = world
                        .any_process()
                        .receive_vec_with_tag::<i64>(PROGRESS_TAG);
                    Self::note(seen, &mut reports, st.source_rank(), &v);
                    continue;
                }
                let Some(m) = world
                    .any_process()
                    .immediate_matched_probe_with_tag(PROGRESS_TAG)
                else {
                    return;
                };
                let (v, st) = m.matched_receive_vec::<i64>();
                Self::note(seen, &mut reports, st.source_rank(), &v);
            }
        }

        fn note(seen: &mut [(u64, u64, bool)], reports: &mut [u64], from: i32, v: &[i64]) {
            if let (Some(s), [d, t, f]) = (seen.get_mut(from as usize), v) {
                *s = (*d as u64, *t as u64, *f != 0);
                if *f == 0 {
                    reports[from as usize] += 1;
                }
            }
        }

        /// Rank 0, after [`Reports::finish`]: the reports each rank sent before its end.
        fn received(&self) -> Vec<u64> {
            self.reports
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        }

        /// After a step of this rank: rank 0 counts (`Some`: every rank's rotations so far);
        /// another rank reports now and then (`None`).
        fn step(&self, done: usize, total: usize) -> Option<u64> {
            if self.rank == 0 {
                let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                seen[0] = (done as u64, total as u64, false);
                self.drain(&mut seen, false);
                return Some(self.count(&seen));
            }
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            last.1 = [done as i64, total as i64];
            if last.0.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
                last.0 = Some(std::time::Instant::now());
                let msg = [done as i64, total as i64, 0];
                SimpleCommunicator::world()
                    .process_at_rank(0)
                    .send_with_tag(&msg[..], PROGRESS_TAG);
            }
            None
        }

        /// This rank's loop ended: another rank says so; rank 0 waits for every rank's end.
        fn finish(&self) -> Option<u64> {
            if self.rank == 0 {
                let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                seen[0].2 = true;
                self.drain(&mut seen, true);
                return Some(self.count(&seen));
            }
            let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let msg = [last.1[0], last.1[1], 1];
            SimpleCommunicator::world()
                .process_at_rank(0)
                .send_with_tag(&msg[..], PROGRESS_TAG);
            None
        }
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
