//! `monomorph match --target-list` under MPI: dynamic balancing over the ranks.
//!
//! Every rank reads the list; the ranks check the targets up front between them (rank k the
//! k-th, (k + n)-th, … target), agree on the first error, and share each target's size. The
//! work items are then whole targets when there are at least as many targets as ranks, else
//! each target's rotations split into ⌈ranks / targets⌉ contiguous ranges; the largest items
//! come first. Rank 0 hands them out: a rank that finishes one asks for the next (point to
//! point), so a slow rank or a large target holds no one else. Rank 0 works too, and answers
//! the others between its own rotations.
//!
//! A whole target is written by the rank that ran it, exactly as its single run writes it; the
//! ranges of a split target are merged on rank 0 exactly (the greater score, ties to the lower
//! rotation index; Σ score² folded in one loop's order), which then writes it. Peak rows travel
//! to rank 0, which writes particles.star and list.json at the end. A rank that fails tells
//! rank 0, which stops every busy rank at its next rotation; the job then ends on every rank
//! with rank 0's one-line error naming the failing rank.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Instant;

use monomorph::dist;
use monomorph::dist::mpi::collective::SystemOperation;
use monomorph::dist::mpi::point_to_point::MatchedReceiveVec;
use monomorph::dist::mpi::topology::SimpleCommunicator;
use monomorph::dist::mpi::traits::*;
use monomorph::work::{Control, Item, JobSize, Maps, Part, Plan, RunRange};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::list::{
    Entry, Ran, TargetDone, in_list, peak_query, precheck, read_list, target_args, write_summary,
    write_target,
};
use super::matching::{Finish, MatchArgs, job_dispatch, match_error, prepare, test_hook};
use super::output::{Outputs, check_out_dir};
use super::peaks::PeakQuery;
use super::ranks::rank_outcome;
use super::trace::progress;

/// Rank 0 to a worker: an item index, [`NO_MORE`] or [`STOP`].
const CTRL: i32 = 0x4c01;
/// A worker to rank 0: an [`Up`] message (JSON).
const UP: i32 = 0x4c02;
/// A worker to rank 0: a part's maps, after its [`Up::Done`].
const DATA: i32 = 0x4c03;
const NO_MORE: i64 = -1;
const STOP: i64 = -2;
/// Seconds between two progress reports of a worker.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_millis(200);
/// Values per data message (MPI counts are `i32`).
const CHUNK: usize = 1 << 26;

/// A worker's message to rank 0.
#[derive(Debug, Serialize, Deserialize)]
enum Up {
    /// Ready for a first item.
    Ready,
    /// Item done (a part's maps follow as [`DATA`] messages); ready for the next.
    Done { item: usize, seconds: f64, res: Res },
    /// This rank failed.
    Failed { code: u8, message: String },
    /// Stopped on rank 0's word.
    Stopped,
    /// Steps of item `item` done so far (tiles × rotations, of `total`), now and then.
    Progress {
        item: usize,
        done: usize,
        total: usize,
    },
}

/// What a finished item leaves.
#[derive(Debug, Serialize, Deserialize)]
enum Res {
    /// A whole target, written.
    Whole(TargetDone),
    /// A range: its Σ score² partials here, its maps as [`DATA`] messages.
    Part {
        voxels: usize,
        ssum_parts: Vec<u64>,
        /// `--score-stats`: the moments' scales (f64 bits); the moments follow the maps.
        moment_scale: Option<[u64; 2]>,
        /// `--background-correction`: the background's length and mean count (f64 bits);
        /// the background follows the moments.
        background: Option<(usize, u64)>,
    },
}

/// An item's outcome on the rank that ran it.
enum Local {
    Whole(TargetDone),
    Part(Part),
}

/// The command's context, the same on every rank.
struct Ctx<'a> {
    g: &'a Global,
    quiet: Global,
    a: &'a MatchArgs,
    /// Ranks in the job.
    size: usize,
    /// Every rank's CUDA device (−1: the CPU).
    devices: Vec<i64>,
    list: &'a Path,
    entries: Vec<Entry>,
    q: Option<PeakQuery>,
    infos: Vec<JobSize>,
    /// The items ([`Plan::balanced`]): whole targets, or ranges of targets when there are
    /// fewer targets than ranks; the largest first.
    plan: Plan,
}

/// [`dist::agree_code`] keeping the failing rank's exit code.
fn agree<T>(world: &SimpleCommunicator, local: CliResult<T>) -> CliResult<T> {
    dist::agree_code(world, local, |e: &CliError| e.code as i32).map_err(|e| CliError {
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
    let mut local = vec![0u64; 2 * n];
    let checked = (rank..n).step_by(size).try_for_each(|k| {
        let i = precheck(g, a, &list, &entries[k], q.as_ref())?;
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
    let plan = Plan::balanced(&infos, size);
    let ctx = Ctx {
        g,
        quiet: Global {
            quiet: true,
            ..g.clone()
        },
        a,
        size,
        devices,
        list: &list,
        entries,
        q,
        infos,
        plan,
    };
    let failed = if rank == 0 {
        let failed = coordinate(world, &ctx, t0);
        if failed.is_some() {
            // Every worker has finished, its unfinished target's folder removed.
            super::list::remove_if_new(&a.out, existed);
        }
        failed
    } else {
        work(world, &ctx);
        None
    };
    // Every rank learns rank 0's outcome.
    let mut buf = serde_json::to_vec(&failed).unwrap_or_default();
    dist::bcast_bytes(world, 0, &mut buf);
    match serde_json::from_slice::<Option<(i32, u8, String)>>(&buf) {
        Ok(None) => Ok(()),
        Ok(Some((r, code, message))) => Err(CliError {
            code,
            message: format!("rank {r}: {message}"),
        }),
        Err(e) => Err(CliError::failure(format!(
            "rank 0's outcome did not arrive: {e}"
        ))),
    }
}

/// Sends `up` (and a part's maps) to rank 0.
fn send_up(world: &SimpleCommunicator, up: &Up, part: Option<&Maps>) {
    let root = world.process_at_rank(0);
    let bytes = serde_json::to_vec(up).unwrap_or_default();
    root.send_with_tag(&bytes[..], UP);
    if let Some(p) = part {
        for c in p.scores.chunks(CHUNK) {
            root.send_with_tag(c, DATA);
        }
        for c in p.index.chunks(CHUNK) {
            root.send_with_tag(c, DATA);
        }
        if let Some((m, _)) = &p.moments {
            for c in m.chunks(CHUNK) {
                root.send_with_tag(c, DATA);
            }
        }
        if let Some((m, _)) = &p.background {
            for c in m.chunks(CHUNK) {
                root.send_with_tag(c, DATA);
            }
        }
    }
}

/// Runs item `k` on this rank under `control` (progress, stop, hooks): a whole target is
/// written here, a range comes back as its part.
fn run_item(ctx: &Ctx<'_>, k: usize, control: &Control<'_>) -> CliResult<Local> {
    let it = &ctx.plan.items[k];
    let e = &ctx.entries[it.job];
    let ta = target_args(ctx.a, e);
    let (mut p, job) = prepare(&ctx.quiet, &ta).map_err(|err| in_list(err, ctx.list, e))?;
    let whole = ctx.plan.is_whole(k);
    let out = if whole {
        Some(Outputs::in_dir("--out", &ta.out)?)
    } else {
        None
    };
    let rank = SimpleCommunicator::world().rank();
    let opts = job_dispatch(&p.g, &job, ta.memory_limit);
    let t = Instant::now();
    let task = RunRange {
        job: &job.job,
        range: it.range.clone(),
        control,
        worker: 0,
    };
    let part = p.timings.time("total", || monomorph::dispatch(opts, task));
    let part = rank_outcome(control, part, ta.memory_limit)?;
    let Some(out) = out else {
        return Ok(Local::Part(part));
    };
    // A whole target: written by this rank as its single run writes it, run.json's `mpi`
    // saying which rank ran it.
    let finish = Finish {
        job: &job,
        part,
        match_s: t.elapsed().as_secs_f64(),
    };
    let mut m =
        monomorph::dispatch(opts, finish).map_err(|err| match_error(err, ta.memory_limit))?;
    let ran = Ran {
        rank,
        rotations: [it.range.start, it.range.end],
        seconds: m.match_s,
    };
    m.dist = Some(mpi_json(ctx, &[ran]));
    let done = write_target(
        &ctx.quiet,
        &ta,
        p,
        out,
        m,
        ctx.q.as_ref(),
        ctx.a.list.star_format.unwrap_or_default(),
    )?;
    Ok(Local::Whole(done))
}

/// run.json's `mpi` for a target of the list: the ranks, and which rank ran which rotations
/// (on which device) for how long.
fn mpi_json(ctx: &Ctx<'_>, ran: &[Ran]) -> serde_json::Value {
    let mut ran = ran.to_vec();
    ran.sort_by_key(|r| r.rotations[0]);
    let ran: Vec<serde_json::Value> = ran
        .iter()
        .map(|r| {
            let d = ctx.devices.get(r.rank as usize).copied().unwrap_or(-1);
            json!({
                "rank": r.rank, "rotations": r.rotations, "seconds": r.seconds,
                "device": (d >= 0).then_some(d),
            })
        })
        .collect();
    json!({ "ranks": ctx.size, "ran": ran })
}

/// A worker rank: asks rank 0 for items until there are none or rank 0 says stop.
fn work(world: &SimpleCommunicator, ctx: &Ctx<'_>) {
    let root = world.process_at_rank(0);
    let mut up = Up::Ready;
    let mut part: Option<Part> = None;
    loop {
        send_up(world, &up, part.as_ref().and_then(|p| p.maps.as_ref()));
        if matches!(up, Up::Failed { .. } | Up::Stopped) {
            return;
        }
        let (k, _) = root.receive_with_tag::<i64>(CTRL);
        let Ok(k) = usize::try_from(k) else { return };
        let stopped = AtomicBool::new(false);
        let reported = Mutex::new(Instant::now());
        // Called on this (the MPI) thread between rotations.
        let control = Control::new()
            .with_progress(|done, total| {
                let mut last = reported.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= REPORT_EVERY {
                    // Rank 0's bar counts this item's rotations as they go.
                    *last = Instant::now();
                    let p = Up::Progress {
                        item: k,
                        done: done as usize,
                        total: total as usize,
                    };
                    send_up(&SimpleCommunicator::world(), &p, None);
                }
            })
            .with_poll(|| {
                let w = SimpleCommunicator::world();
                if let Some((m, _)) = w.process_at_rank(0).immediate_matched_probe_with_tag(CTRL) {
                    let _: (i64, _) = m.matched_receive();
                    stopped.store(true, Relaxed);
                    return true;
                }
                dist::stop_requested(&w)
            })
            .fail_after(test_hook(None));
        let t = Instant::now();
        let r = run_item(ctx, k, &control);
        let seconds = t.elapsed().as_secs_f64();
        part = None;
        up = match r {
            _ if stopped.load(Relaxed) => Up::Stopped,
            Ok(Local::Whole(done)) => Up::Done {
                item: k,
                seconds,
                res: Res::Whole(done),
            },
            Ok(Local::Part(p)) => {
                let maps = p.maps.as_ref();
                let ssum_parts = p
                    .ranges
                    .iter()
                    .flat_map(|(_, v)| v.iter().map(|x| x.to_bits()));
                let res = Res::Part {
                    voxels: maps.map_or(0, |m| m.scores.len()),
                    ssum_parts: ssum_parts.collect(),
                    moment_scale: maps
                        .and_then(|m| m.moments.as_ref())
                        .map(|(_, s)| s.map(f64::to_bits)),
                    background: maps
                        .and_then(|m| m.background.as_ref())
                        .map(|(m, c)| (m.len(), c.to_bits())),
                };
                part = Some(p);
                Up::Done {
                    item: k,
                    seconds,
                    res,
                }
            }
            Err(e) => Up::Failed {
                code: e.code,
                message: e.message,
            },
        };
    }
}

/// A worker as rank 0 sees it.
#[derive(Debug, Clone, Copy, Default)]
struct Worker {
    busy: bool,
    stop_sent: bool,
    finished: bool,
}

/// A split target's merge so far.
#[derive(Default)]
struct Merge {
    part: Part,
    left: usize,
    seconds: f64,
}

/// Rank 0's bookkeeping.
struct Coord {
    next: usize,
    workers: Vec<Worker>,
    stopping: bool,
    error: Option<(i32, u8, String)>,
    done_rot: u64,
    /// Rotations done of each rank's current item (from its progress reports).
    inflight: Vec<u64>,
    merges: HashMap<usize, Merge>,
    ready: Vec<usize>,
    done: Vec<Option<TargetDone>>,
    ran: Vec<Vec<Ran>>,
}

impl Coord {
    fn ctrl(k: usize, v: i64) {
        SimpleCommunicator::world()
            .process_at_rank(k as i32)
            .send_with_tag(&v, CTRL);
    }

    /// Records a failure (the first one is reported) and stops every busy worker.
    fn fail(&mut self, rank: i32, code: u8, message: String) {
        if self.error.is_none() {
            self.error = Some((rank, code, message));
        }
        if !self.stopping {
            self.stopping = true;
            for (k, w) in self.workers.iter_mut().enumerate().skip(1) {
                if w.busy && !w.finished && k as i32 != rank {
                    Coord::ctrl(k, STOP);
                    w.stop_sent = true;
                }
            }
        }
    }

    /// Answers worker `k`, which waits for its next item.
    fn assign(&mut self, ctx: &Ctx<'_>, k: usize) {
        let w = &mut self.workers[k];
        w.busy = false;
        if self.stopping {
            if !w.stop_sent {
                Coord::ctrl(k, STOP);
            }
            w.finished = true;
        } else if let Some(i) = (self.next < ctx.plan.items.len()).then_some(self.next) {
            self.next += 1;
            w.busy = true;
            Coord::ctrl(k, i as i64);
        } else {
            Coord::ctrl(k, NO_MORE);
            w.finished = true;
        }
    }

    /// The next item for rank 0 itself.
    fn take(&mut self, ctx: &Ctx<'_>) -> Option<usize> {
        (!self.stopping && self.next < ctx.plan.items.len()).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    /// Records item `k`'s outcome, run by `rank`.
    fn record(&mut self, ctx: &Ctx<'_>, k: usize, rank: i32, seconds: f64, out: Local) {
        let it: &Item = &ctx.plan.items[k];
        self.done_rot += it.range.len() as u64;
        self.ran[it.job].push(Ran {
            rank,
            rotations: [it.range.start, it.range.end],
            seconds,
        });
        match out {
            Local::Whole(d) => self.done[it.job] = Some(d),
            Local::Part(p) => {
                let m = self.merges.entry(it.job).or_insert_with(|| Merge {
                    left: ctx.plan.parts_of(it.job),
                    ..Merge::default()
                });
                m.seconds += seconds;
                if let Err(e) = m.part.merge(p) {
                    let e = CliError::failure(format!("merging the parts of a target: {e}"));
                    self.fail(0, e.code, e.message);
                    return;
                }
                m.left -= 1;
                if m.left == 0 {
                    self.ready.push(it.job);
                }
            }
        }
    }

    /// Handles one message from a worker.
    fn handle(&mut self, ctx: &Ctx<'_>, src: i32, bytes: &[u8]) {
        let w = SimpleCommunicator::world();
        let k = src as usize;
        let up: Up = match serde_json::from_slice(bytes) {
            Ok(u) => u,
            Err(e) => Up::Failed {
                code: 1,
                message: format!("unreadable message to rank 0: {e}"),
            },
        };
        if !matches!(up, Up::Progress { .. })
            && let Some(f) = self.inflight.get_mut(k)
        {
            *f = 0;
        }
        match up {
            Up::Progress { item, done, total } => {
                if let (Some(it), Some(f)) = (ctx.plan.items.get(item), self.inflight.get_mut(k)) {
                    let len = it.range.len() as u64;
                    *f = (done as u64 * len).checked_div(total as u64).unwrap_or(0);
                }
            }
            Up::Ready => self.assign(ctx, k),
            Up::Done { item, seconds, res } => {
                let out = match res {
                    Res::Whole(d) => Local::Whole(d),
                    Res::Part {
                        voxels,
                        ssum_parts,
                        moment_scale,
                        background,
                    } => {
                        // Always received, also when stopping: the worker waits in its send.
                        let from = w.process_at_rank(src);
                        let mut scores = Vec::with_capacity(voxels);
                        while scores.len() < voxels {
                            scores.extend(from.receive_vec_with_tag::<f64>(DATA).0);
                        }
                        let mut index = Vec::with_capacity(voxels);
                        while index.len() < voxels {
                            index.extend(from.receive_vec_with_tag::<i64>(DATA).0);
                        }
                        let moments = moment_scale.map(|sc| {
                            let mut m = Vec::with_capacity(4 * voxels);
                            while m.len() < 4 * voxels {
                                m.extend(from.receive_vec_with_tag::<i64>(DATA).0);
                            }
                            (m, sc.map(f64::from_bits))
                        });
                        let background = background.map(|(len, count)| {
                            let mut m = Vec::with_capacity(len);
                            while m.len() < len {
                                m.extend(from.receive_vec_with_tag::<f64>(DATA).0);
                            }
                            (m, f64::from_bits(count))
                        });
                        let it = &ctx.plan.items[item.min(ctx.plan.items.len() - 1)];
                        let ssum_parts = ssum_parts.into_iter().map(f64::from_bits).collect();
                        let maps = Maps {
                            scores,
                            index,
                            moments,
                            background,
                        };
                        Local::Part(Part::new(it.range.clone(), ssum_parts, maps))
                    }
                };
                if item < ctx.plan.items.len() && !self.stopping {
                    self.record(ctx, item, src, seconds, out);
                }
                self.assign(ctx, k);
            }
            Up::Failed { code, message } => {
                self.workers[k].busy = false;
                self.workers[k].finished = true;
                self.fail(src, code, message);
            }
            Up::Stopped => {
                self.workers[k].busy = false;
                self.workers[k].finished = true;
            }
        }
    }

    /// Handles every message already here (non-blocking).
    fn serve(&mut self, ctx: &Ctx<'_>) {
        let w = SimpleCommunicator::world();
        while let Some(msg) = w.any_process().immediate_matched_probe_with_tag(UP) {
            let (bytes, status) = msg.matched_receive_vec::<u8>();
            self.handle(ctx, status.source_rank(), &bytes);
        }
    }

    /// Waits for one message and handles it.
    fn serve_one(&mut self, ctx: &Ctx<'_>) {
        let w = SimpleCommunicator::world();
        let (bytes, status) = w
            .any_process()
            .matched_probe_with_tag(UP)
            .matched_receive_vec::<u8>();
        self.handle(ctx, status.source_rank(), &bytes);
    }

    /// Rotations done so far by every rank, rank 0's current item aside.
    fn rotations_done(&self) -> u64 {
        self.done_rot + self.inflight.iter().sum::<u64>()
    }

    fn all_finished(&self) -> bool {
        self.workers.iter().skip(1).all(|w| w.finished)
    }
}

/// Writes split target `t` from its merged parts (rank 0).
fn finish_split(ctx: &Ctx<'_>, t: usize, m: Merge, ran: &[Ran]) -> CliResult<TargetDone> {
    let e = &ctx.entries[t];
    let ta = target_args(ctx.a, e);
    let (p, job) = prepare(&ctx.quiet, &ta).map_err(|err| in_list(err, ctx.list, e))?;
    let out = Outputs::in_dir("--out", &ta.out)?;
    let task = Finish {
        job: &job,
        part: m.part,
        match_s: m.seconds,
    };
    let mut matched = monomorph::dispatch(job_dispatch(&p.g, &job, ta.memory_limit), task)
        .map_err(|e| match_error(e, ta.memory_limit))?;
    matched.dist = Some(mpi_json(ctx, ran));
    write_target(
        &ctx.quiet,
        &ta,
        p,
        out,
        matched,
        ctx.q.as_ref(),
        ctx.a.list.star_format.unwrap_or_default(),
    )
}

/// Rank 0: hands out the items, runs its own, merges and writes; `Some` failure (rank, exit
/// code, message) or `None`.
fn coordinate(world: &SimpleCommunicator, ctx: &Ctx<'_>, t0: Instant) -> Option<(i32, u8, String)> {
    let size = world.size() as usize;
    let n = ctx.entries.len();
    let total: u64 = ctx.infos.iter().map(|i| i.rotations).sum();
    let pb = progress(total, "rotations", ctx.g.quiet);
    let coord = Mutex::new(Coord {
        next: 0,
        workers: vec![Worker::default(); size],
        stopping: false,
        error: None,
        done_rot: 0,
        inflight: vec![0; size],
        merges: HashMap::new(),
        ready: Vec::new(),
        done: vec![None; n],
        ran: vec![Vec::new(); n],
    });
    let lock = || coord.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let mut c = lock();
        c.serve(ctx);
        while let Some(t) = c.ready.pop() {
            let m = c.merges.remove(&t).unwrap_or_default();
            if c.stopping {
                continue;
            }
            // Other ranks wait for rank 0 while it writes; the write is short next to matching.
            let ran = c.ran[t].clone();
            match finish_split(ctx, t, m, &ran) {
                Ok(d) => c.done[t] = Some(d),
                Err(e) => c.fail(0, e.code, e.message),
            }
        }
        if let Some(k) = c.take(ctx) {
            drop(c);
            // Between its own rotations rank 0 answers the others.
            let control = Control::new()
                .with_progress(|d, _| {
                    let mut c = lock();
                    c.serve(ctx);
                    pb.set_position(c.rotations_done() + d);
                })
                .with_poll(|| lock().stopping || dist::stop_requested(&SimpleCommunicator::world()))
                .fail_after(test_hook(None));
            let t = Instant::now();
            let r = run_item(ctx, k, &control);
            let seconds = t.elapsed().as_secs_f64();
            let mut c = lock();
            match r {
                _ if c.stopping => {}
                Ok(out) => c.record(ctx, k, 0, seconds, out),
                Err(e) => c.fail(0, e.code, e.message),
            }
            pb.set_position(c.rotations_done());
            continue;
        }
        if c.all_finished() && c.ready.is_empty() {
            break;
        }
        c.serve_one(ctx);
        pb.set_position(c.rotations_done());
    }
    pb.finish_and_clear();
    let mut c = lock();
    if let Some(e) = c.error.take() {
        return Some(e);
    }
    let done: Option<Vec<TargetDone>> = c.done.iter().cloned().collect();
    let Some(done) = done else {
        return Some((0, 1, "internal error: a target was not run".into()));
    };
    for r in c.ran.iter_mut() {
        r.sort_by_key(|x| x.rotations[0]);
    }
    let wall = t0.elapsed().as_secs_f64();
    write_summary(
        ctx.a,
        ctx.list,
        &ctx.entries,
        &done,
        &c.ran,
        size,
        wall,
        ctx.g.quiet,
    )
    .err()
    .map(|e| (0, e.code, e.message))
}
