//! Where `monomorph match` runs, chosen once from the flags: one process (the library's
//! [`Serial`] executor), device threads (`--devices`: [`Threads`], items on demand), or MPI
//! ranks (`ranks.rs` for one target, `list_mpi.rs` for a list). Each finished job is written
//! in the executor's callback; no other file of the command knows the modes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use monomorph::work::{
    Control, Done, Failure, JobSource, Loader, MatchJob, Plan, Ran, RunError, Serial, Threads,
};
use serde_json::json;
use tracing::info_span;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::list::{self, Entry, TargetDone};
use super::matched::{Finish, Matched, write};
use super::matching::{Job, MatchArgs, Prepared, job_dispatch, match_error, prepare, test_hook};
use super::output::{Outputs, check_out_dir};
use super::peaks::PeakQuery;
use super::trace::progress;

/// Runs `monomorph match`.
pub fn run_match(g: &Global, a: MatchArgs) -> CliResult<()> {
    if a.list.target_list.is_none() && a.list.peaks {
        // Clap's `requires` does not fire for this flag here; refused rather than ignored.
        return Err(CliError::input(
            "--peaks: only with --target-list (peaks of many targets in one STAR file); for one \
             target run `monomorph peaks --scores OUT/scores.npy` on the output folder",
        ));
    }
    if let Some(n) = a.check_hand {
        let other = if a.list.target_list.is_some() {
            Some("--target-list")
        } else if super::ranks::launched_ranks().is_some_and(|r| r > 1) {
            Some("mpirun (MPI ranks)")
        } else {
            None
        };
        if let Some(other) = other {
            return Err(CliError::input(format!(
                "--check-hand {n}: not with {other}, expected one target in one process \
                 (--devices may split it)"
            )));
        }
    }
    if let (Some(u), Some(_)) = (&a.rotation.orientations_uncertainty, &a.list.target_list) {
        return Err(CliError::input(format!(
            "--orientations-uncertainty {}: not with --target-list (the seeds' positions are \
             one target's), expected one --target",
            u.show()
        )));
    }
    #[cfg(feature = "mpi")]
    if let Some(world) = super::ranks::world() {
        return match a.list.target_list {
            Some(_) => super::list_mpi::run(&world, g, &a),
            None => super::ranks::run_match(&world, g, &a),
        };
    }
    let exec = Exec::new(g, &a);
    match a.list.target_list {
        Some(_) => run_list(g, &a, &exec),
        None => run_one(g, &a, &exec),
    }
}

/// The executor of a run in one process.
enum Exec {
    /// Items in order in this thread.
    Serial(Serial),
    /// `--devices`: one thread per device.
    Threads(Threads),
}

impl Exec {
    fn new(g: &Global, a: &MatchArgs) -> Self {
        let opts = g.dispatch(a.memory_limit);
        match &a.devices {
            Some(d) => Exec::Threads(Threads::new(opts, d.0.clone())),
            None => Exec::Serial(Serial { opts }),
        }
    }

    /// The plan of jobs of `nrots` rotations: each whole, or each split over the devices
    /// (items handed out on demand, in list order).
    fn plan(&self, nrots: &[usize]) -> Plan {
        match self {
            Exec::Serial(_) => Plan::whole(nrots),
            Exec::Threads(t) => Plan {
                items: nrots
                    .iter()
                    .enumerate()
                    .flat_map(|(j, &n)| {
                        Plan::split(n, t.devices.len())
                            .items
                            .into_iter()
                            .map(move |mut it| {
                                it.job = j;
                                it
                            })
                    })
                    .collect(),
            },
        }
    }

    fn control<'a>(&self, progress: impl Fn(u64, u64) + Send + Sync + 'a) -> Control<'a> {
        let devices = match self {
            Exec::Serial(_) => None,
            Exec::Threads(t) => Some(t.devices.as_slice()),
        };
        Control::new()
            .with_progress(progress)
            .fail_after(test_hook(devices))
    }

    fn run<E>(
        &self,
        jobs: &dyn JobSource,
        plan: &Plan,
        control: &Control<'_>,
        on_done: impl FnMut(Done) -> Result<(), E>,
    ) -> Result<(), RunError<E>> {
        match self {
            Exec::Serial(s) => s.run(jobs, plan, control, on_done),
            Exec::Threads(t) => t.run(jobs, plan, control, on_done),
        }
    }

    /// run.json's `devices`: which device ran which rotations (threads only).
    fn devices_json(&self, ran: &[Ran], merge_s: f64) -> Option<serde_json::Value> {
        let Exec::Threads(t) = self else { return None };
        let workers: Vec<serde_json::Value> = ran
            .iter()
            .map(|r| {
                json!({
                    "device": t.devices[r.worker],
                    "threads": t.threads(r.worker),
                    "rotations": [r.range.start, r.range.end],
                    "seconds": r.seconds,
                })
            })
            .collect();
        Some(json!({
            "backend": if t.cpu() { "cpu" } else { "cuda" },
            "workers": workers,
            "merge_s": merge_s,
        }))
    }

    /// The command's error for a run that did not finish.
    fn error(&self, e: RunError<CliError>, memory_limit: Option<u64>) -> CliError {
        let f: Failure = match e {
            RunError::Callback(e) => return e,
            RunError::Stopped => return CliError::failure("stopped"),
            RunError::Worker(f) => f,
        };
        let e = match (&self, f.injected, &f.error) {
            (Exec::Threads(t), true, _) => CliError::failure(format!(
                "injected failure after {} rotations (MONOMORPH_TEST_FAIL_DEVICE)",
                test_hook(Some(&t.devices)).map_or(0, |h| h.steps)
            )),
            (Exec::Serial(_), true, monomorph::Error::Cancelled { done, .. }) => CliError::failure(
                format!("injected failure after {done} rotations (MONOMORPH_TEST_FAIL_AFTER)"),
            ),
            _ => match_error(f.error, memory_limit),
        };
        match self {
            Exec::Threads(t) => CliError {
                code: e.code,
                message: format!("device {}: {}", t.devices[f.worker], e.message),
            },
            Exec::Serial(_) => e,
        }
    }
}

/// One target: `monomorph match --target`.
fn run_one(g: &Global, a: &MatchArgs, exec: &Exec) -> CliResult<()> {
    let (mut p, job) = prepare(g, a)?;
    let out = Outputs::in_dir("--out", &a.out)?;
    // Embedded (the Python package): its progress callback, bar choice and stop flag.
    let hooks = super::session::Hooks::current();
    let pb = progress(p.n_rot as u64, "rotations", hooks.quiet(p.g.quiet));
    let control = exec
        .control(|d, t| {
            pb.set_length(t);
            pb.set_position(d);
            hooks.progress(d, t);
        })
        .with_poll(|| hooks.stopped());
    if job.job.target.host().is_none() {
        // A target on a device: matched there, the result kept there.
        let ran = super::kept::run_kept(a, p, &job, out, &control);
        pb.finish_and_clear();
        return ran;
    }
    // --check-hand: the mirrored template is a second job of the same plan.
    let mut jobs = vec![job.job.clone()];
    jobs.extend(job.mirrored.iter().cloned());
    let plan = exec.plan(&vec![p.n_rot; jobs.len()]);
    let mut opts = job_dispatch(&p.g, &job, a.memory_limit);
    if let Some(d) = &a.devices {
        opts.device = d.0[0];
    }
    let t0 = Instant::now();
    let mut matched = None;
    let mut mirrored_scores = None;
    let _span = info_span!("match", score = %job.job.score, rotations = p.n_rot).entered();
    let ran = p.timings.time("total", || {
        let _s = info_span!("match_template").entered();
        exec.run(&jobs, &plan, &control, |done| {
            if done.job == 1 {
                let task = super::hand::FinishScores {
                    job: &done.matching,
                    part: done.part,
                };
                mirrored_scores = Some(
                    monomorph::dispatch(opts, task).map_err(|e| match_error(e, a.memory_limit))?,
                );
                return Ok(());
            }
            let (match_s, t1) = (t0.elapsed().as_secs_f64(), Instant::now());
            let finish = Finish {
                job: &job,
                part: done.part,
                match_s,
            };
            let mut m =
                monomorph::dispatch(opts, finish).map_err(|e| match_error(e, a.memory_limit))?;
            m.devices = exec.devices_json(&done.ran, t1.elapsed().as_secs_f64());
            matched = Some(m);
            Ok(())
        })
    });
    pb.finish_and_clear();
    ran.map_err(|e| exec.error(e, a.memory_limit))?;
    let mut m = matched.ok_or_else(|| CliError::failure("the match did not finish"))?;
    if let Some(n) = a.check_hand {
        let mirrored = mirrored_scores
            .ok_or_else(|| CliError::failure("the mirrored match did not finish"))?;
        let side = job.job.template.shape().iter().copied().min().unwrap_or(2);
        m.check_hand = Some(super::hand::check_hand(
            &p.g, n, side, &m.scores, &mirrored,
        )?);
    }
    write(a, p, out, m)
}

/// A list: `monomorph match --target-list` in one process. Every target is checked first;
/// then each is read again when its first item starts (only the targets in flight are held)
/// and written as soon as its items are merged.
fn run_list(g: &Global, a: &MatchArgs, exec: &Exec) -> CliResult<()> {
    let t0 = Instant::now();
    // Embedded: every target (its check, then its run) reads the templates given as arrays.
    let _keep = super::session::keep_inputs();
    let path = a.list.target_list.clone().unwrap_or_default();
    let entries = list::read_list(&path, !a.metadata.no_tomogram_metadata)?;
    let q = list::peak_query(&a.list)?;
    check_out_dir("--out", &a.out)?;
    let sizes = entries
        .iter()
        .map(|e| list::precheck(g, a, &path, e, q.as_ref()))
        .collect::<CliResult<Vec<_>>>()?;
    let existed = a.out.exists();
    let nrots: Vec<usize> = sizes.iter().map(|s| s.rotations as usize).collect();
    // Embedded (the Python package): its progress callback, bar choice and stop flag; its
    // arrays are read on the device threads too.
    let hooks = super::session::Hooks::current();
    let shared = super::session::Shared::current();
    let pb = progress(
        nrots.iter().sum::<usize>() as u64,
        "rotations",
        hooks.quiet(g.quiet),
    );
    let control = exec
        .control(|d, t| {
            pb.set_position(d);
            hooks.progress(d, t);
        })
        .with_poll(|| hooks.stopped());
    let quiet = Global {
        quiet: true,
        ..g.clone()
    };
    let plan = exec.plan(&nrots);
    // Each target's checked run, kept from its loading to its writing; a failed load's
    // command error (the file changed since the check).
    let held: Mutex<HashMap<usize, (Prepared, Job)>> = Mutex::new(HashMap::new());
    let load_error: Mutex<Option<CliError>> = Mutex::new(None);
    let loader = Loader {
        n: entries.len(),
        load: |k: usize| -> monomorph::Result<MatchJob> {
            let e = &entries[k];
            let ta = list::target_args(a, e);
            match shared.enter(|| prepare(&quiet, &ta)) {
                Ok((p, job)) => {
                    let j = (*job.job).clone();
                    held.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(k, (p, job));
                    Ok(j)
                }
                Err(err) => {
                    let err = list::in_list(err, &path, e);
                    let msg = err.message.clone();
                    *load_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                    Err(monomorph::Error::invalid("target", msg))
                }
            }
        },
    };
    let mut done: Vec<Option<TargetDone>> = vec![None; entries.len()];
    let mut ran_list: Vec<Vec<list::Ran>> = vec![Vec::new(); entries.len()];
    let ran = exec.run(&loader, &plan, &control, |d: Done| -> CliResult<()> {
        let k = d.job;
        let (p, job) = held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&k)
            .ok_or_else(|| CliError::failure("a target finished before it was read"))?;
        let seconds: f64 = d.ran.iter().map(|r| r.seconds).sum();
        let td = {
            // Embedded: this target's outputs kept apart (arrays only without files).
            let _t = super::session::for_target(k, super::session::in_memory(&a.out));
            finish_target(&quiet, a, &entries[k], p, &job, d, exec, q.as_ref())?
        };
        done[k] = Some(td);
        ran_list[k] = vec![list::Ran {
            rank: 0,
            rotations: [0, nrots[k]],
            seconds,
        }];
        Ok(())
    });
    pb.finish_and_clear();
    if let Err(e) = ran {
        list::remove_if_new(&a.out, existed);
        let loaded = load_error.lock().unwrap_or_else(|e| e.into_inner()).take();
        return Err(match (loaded, e) {
            (Some(l), RunError::Worker(_)) => l,
            (_, e) => exec.error(e, a.memory_limit),
        });
    }
    let done: Option<Vec<TargetDone>> = done.into_iter().collect();
    let done = done.ok_or_else(|| CliError::failure("internal error: a target was not run"))?;
    let wall = t0.elapsed().as_secs_f64();
    list::write_summary(a, &path, &entries, &done, &ran_list, 1, wall, g.quiet)
}

/// Writes a finished target of a list (its folder, as its single run does) and calls its
/// peaks.
#[allow(clippy::too_many_arguments)]
fn finish_target(
    quiet: &Global,
    a: &MatchArgs,
    e: &Entry,
    p: Prepared,
    job: &Job,
    d: Done,
    exec: &Exec,
    q: Option<&PeakQuery>,
) -> CliResult<TargetDone> {
    let ta = list::target_args(a, e);
    let out = Outputs::in_dir("--out", &ta.out)?;
    let match_s: f64 = d.ran.iter().map(|r| r.seconds).sum();
    let t1 = Instant::now();
    let mut opts = job_dispatch(&p.g, job, ta.memory_limit);
    if let Exec::Threads(t) = exec {
        opts.device = t.devices[0];
    }
    let finish = Finish {
        job,
        part: d.part,
        match_s,
    };
    let mut m: Matched =
        monomorph::dispatch(opts, finish).map_err(|err| match_error(err, ta.memory_limit))?;
    m.devices = exec.devices_json(&d.ran, t1.elapsed().as_secs_f64());
    list::write_target(
        quiet,
        &ta,
        p,
        out,
        m,
        q,
        a.list.star_format.unwrap_or_default(),
    )
}
