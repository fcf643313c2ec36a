//! `monomorph match --target-list` under MPI: the list over the ranks with the library's
//! [`Ranks`] executor (items on demand from rank 0).
//!
//! Every rank reads the list; the ranks check the targets up front between them (rank k the
//! k-th, (k + n)-th, … target), agree on the first error, and share each target's size. The
//! work items are then whole targets when there are at least as many targets as ranks, else
//! each target's rotations split into ⌈ranks / targets⌉ contiguous ranges; the largest items
//! come first ([`Plan::balanced`]). A whole target is written by the rank that ran it, exactly
//! as its single run writes it; a split target is merged and written on rank 0. Peak rows
//! travel to rank 0, which writes particles.star and list.json at the end. A failure on any
//! rank ends the job on every rank with rank 0's one-line error naming the failing rank.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use monomorph::dist::mpi::collective::SystemOperation;
use monomorph::dist::mpi::topology::SimpleCommunicator;
use monomorph::dist::mpi::traits::*;
use monomorph::dist::{Finished, Ranks};
use monomorph::work::{Done, JobSize, Loader, MatchJob, Plan, Ran, RunError};
use serde_json::json;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::list::{
    Entry, TargetDone, in_list, peak_query, precheck, read_list, target_args, write_summary,
    write_target,
};
use super::matched::Finish;
use super::matching::{Job, MatchArgs, Prepared, job_dispatch, match_error, prepare, test_hook};
use super::output::{Outputs, check_out_dir};
use super::peaks::PeakQuery;
use super::trace::progress;

/// [`monomorph::dist::agree_code`] keeping the failing rank's exit code.
fn agree<T>(world: &SimpleCommunicator, local: CliResult<T>) -> CliResult<T> {
    monomorph::dist::agree_code(world, local, |e: &CliError| e.code as i32).map_err(|e| CliError {
        code: e.code as u8,
        message: e.to_string(),
    })
}

/// Runs `monomorph match --target-list` over the ranks of `world`.
pub fn run(world: &SimpleCommunicator, g: &Global, a: &MatchArgs) -> CliResult<()> {
    let t0 = Instant::now();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    // Each rank on its node-local device; `--devices` chooses among devices here, it does not
    // split a rank's work over threads.
    let (g, devices) = super::ranks::rank_global(world, g, a.devices.as_ref());
    let g = &g;
    let a = &MatchArgs {
        devices: None,
        ..a.clone()
    };
    // Before any rank can create it (none does before the agreements below).
    let existed = a.out.exists();
    let list = a.list.target_list.clone().unwrap_or_default();
    let parsed = read_list(&list, !a.metadata.no_tomogram_metadata).and_then(|e| {
        let q = peak_query(&a.list)?;
        check_out_dir("--out", &a.out)?;
        Ok((e, q))
    });
    let (entries, q) = agree(world, parsed)?;
    let n = entries.len();
    let plan = plan_list(world, g, a, &list, &entries, q.as_ref())?;
    let quiet = Global {
        quiet: true,
        ..g.clone()
    };
    // One bar, on rank 0, counting every rank's rotations.
    let pb = progress(plan.rotations(), "rotations", g.quiet || rank != 0);
    let control = monomorph::work::Control::new()
        .with_progress(|d, _| pb.set_position(d))
        .fail_after(test_hook(None));
    // Each target's checked run, kept from its loading to its writing (a whole target on the
    // rank that runs it, a split one on rank 0); a failed load's command error.
    let held: Mutex<HashMap<usize, (Prepared, Job)>> = Mutex::new(HashMap::new());
    let load_error: Mutex<Option<CliError>> = Mutex::new(None);
    let loader = Loader {
        n,
        load: |k: usize| -> monomorph::Result<MatchJob> {
            let e = &entries[k];
            match prepare(&quiet, &target_args(a, e)) {
                Ok((p, job)) => {
                    let j = (*job.job).clone();
                    if rank == 0 || plan.parts_of(k) == 1 {
                        held.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(k, (p, job));
                    }
                    Ok(j)
                }
                Err(err) => {
                    let err = in_list(err, &list, e);
                    let msg = err.message.clone();
                    *load_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                    Err(monomorph::Error::invalid("target", msg))
                }
            }
        },
    };
    let on_done = |d: Done| -> CliResult<TargetDone> {
        let k = d.job;
        let (p, job) = held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&k)
            .ok_or_else(|| CliError::failure("a target finished before it was read"))?;
        let e = &entries[k];
        let ta = target_args(a, e);
        let out = Outputs::in_dir("--out", &ta.out)?;
        let finish = Finish {
            job: &job,
            part: d.part,
            match_s: d.ran.iter().map(|r| r.seconds).sum(),
        };
        let mut m = monomorph::dispatch(job_dispatch(&p.g, &job, ta.memory_limit), finish)
            .map_err(|err| match_error(err, ta.memory_limit))?;
        // run.json's `mpi` says which rank ran which rotations.
        m.dist = Some(mpi_json(&devices, size, &d.ran));
        write_target(
            &quiet,
            &ta,
            p,
            out,
            m,
            q.as_ref(),
            a.list.star_format.unwrap_or_default(),
        )
    };
    let describe = |e: RunError<CliError>| -> (i32, String) {
        // A target that failed to load: the command's own error for it.
        let loaded = match &e {
            RunError::Worker(_) => load_error.lock().unwrap_or_else(|e| e.into_inner()).take(),
            _ => None,
        };
        let e = loaded.unwrap_or_else(|| super::ranks::rank_error(e, a.memory_limit));
        (i32::from(e.code), e.message)
    };
    let ran =
        Ranks::new(g.dispatch(a.memory_limit)).run(&loader, &plan, &control, on_done, describe);
    pb.finish_and_clear();
    let finished = match ran {
        Ok(f) => f,
        Err(e) => {
            if rank == 0 {
                // Every rank has finished, its unfinished target's folder removed.
                super::list::remove_if_new(&a.out, existed);
            }
            return Err(CliError {
                code: u8::try_from(e.code).unwrap_or(1),
                message: e.to_string(),
            });
        }
    };
    // Rank 0 writes particles.star and list.json; every rank learns how that went.
    let written = match finished {
        Some(f) => {
            let (done, ran): (Vec<TargetDone>, Vec<Vec<super::list::Ran>>) = f
                .into_iter()
                .map(|Finished { value, ran }| (value, ran.iter().map(list_ran).collect()))
                .unzip();
            let wall = t0.elapsed().as_secs_f64();
            write_summary(a, &list, &entries, &done, &ran, size, wall, g.quiet)
        }
        None => Ok(()),
    };
    agree(world, written)
}

/// The ranks check the targets between them (rank k the k-th, (k + n)-th, … target), agree on
/// the first error and share each target's size: the items of the list over the ranks.
fn plan_list(
    world: &SimpleCommunicator,
    g: &Global,
    a: &MatchArgs,
    list: &Path,
    entries: &[Entry],
    q: Option<&PeakQuery>,
) -> CliResult<Plan> {
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let n = entries.len();
    let mut local = vec![0u64; 2 * n];
    let checked = (rank..n).step_by(size).try_for_each(|k| {
        let i = precheck(g, a, list, &entries[k], q)?;
        (local[2 * k], local[2 * k + 1]) = (i.voxels, i.rotations);
        Ok(())
    });
    agree(world, checked)?;
    let mut all = vec![0u64; 2 * n];
    world.all_reduce_into(&local[..], &mut all[..], SystemOperation::sum());
    let infos: Vec<JobSize> = all
        .chunks(2)
        .map(|c| JobSize {
            voxels: c[0],
            rotations: c[1],
        })
        .collect();
    Ok(Plan::balanced(&infos, size))
}

/// list.json's record of an item.
fn list_ran(r: &Ran) -> super::list::Ran {
    super::list::Ran {
        rank: r.worker as i32,
        rotations: [r.range.start, r.range.end],
        seconds: r.seconds,
    }
}

/// run.json's `mpi` for a target of the list: the ranks, and which rank ran which rotations
/// (on which device) for how long.
fn mpi_json(devices: &[i64], size: usize, ran: &[Ran]) -> serde_json::Value {
    let ran: Vec<serde_json::Value> = ran
        .iter()
        .map(|r| {
            let d = devices.get(r.worker).copied().unwrap_or(-1);
            json!({
                "rank": r.worker, "rotations": [r.range.start, r.range.end], "seconds": r.seconds,
                "device": (d >= 0).then_some(d),
            })
        })
        .collect();
    json!({ "ranks": size, "ran": ran })
}
