//! [`Ranks`]: a plan's items over the ranks of `MPI_COMM_WORLD`, handed out on demand by
//! rank 0.
//!
//! Rank 0 hands out the items in plan order: a rank that finishes one asks for the next (point
//! to point), so a slow rank or a large job holds no one else. Rank 0 works too, and answers
//! the others between its own rotations. A job that is one item is finished on the rank that
//! ran it (`on_done` there); the items of a split job travel to rank 0 as parts (maps, Σ score²
//! partials, moments, background) and are merged there with the one merge rule, then finished
//! on rank 0. What `on_done` returns travels to rank 0, which gets every job's value and who
//! ran what. A rank that fails tells rank 0, which stops every busy rank at its next rotation;
//! the run then ends on every rank with the same [`RankError`] naming the failing rank.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use mpi::point_to_point::MatchedReceiveVec;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{RankError, bcast_bytes};
use crate::dispatch::DispatchOptions;
use crate::work::{
    Control, Done, Failure, JobSource, Maps, MatchJob, Part, Plan, Ran, RunError, RunRange,
};
use crate::{Error, Result};

/// Rank 0 to a worker: an item index, [`NO_MORE`] or [`STOP`].
const CTRL: i32 = 0x4c01;
/// A worker to rank 0: an [`Up`] message (JSON).
const UP: i32 = 0x4c02;
/// A worker to rank 0: a part's maps, after its [`Up::Done`].
const DATA: i32 = 0x4c03;
const NO_MORE: i64 = -1;
const STOP: i64 = -2;
/// Time between two progress reports of a worker.
const REPORT_EVERY: Duration = Duration::from_millis(200);
/// Values per data message (MPI counts are `i32`).
const CHUNK: usize = 1 << 26;

/// Runs a plan over the ranks of `MPI_COMM_WORLD` (every rank calls [`Ranks::run`] with the
/// same plan): items on demand from rank 0, each rank on its own backend (`opts`, the jobs'
/// precision replacing `opts.precision`). Rank 0's [`Control`] progress counts every rank's
/// rotations; every rank's control may stop the run (its poll hook is polled between
/// rotations) and sets the test hook ([`Control::fail_after`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Ranks {
    /// This rank's backend.
    pub opts: DispatchOptions,
}

/// A finished job as rank 0 receives it: what `on_done` returned for it (on the rank that
/// finished it) and who ran which rotations (`worker`: the rank), in rotation order.
#[derive(Debug, Clone)]
pub struct Finished<T> {
    /// `on_done`'s value.
    pub value: T,
    /// The job's items as they ran.
    pub ran: Vec<Ran>,
}

/// A worker's message to rank 0.
#[derive(Debug, Serialize, Deserialize)]
enum Up {
    /// Ready for a first item.
    Ready,
    /// Item done (a part's maps follow as [`DATA`] messages); ready for the next.
    Done { item: usize, seconds: f64, res: Res },
    /// This rank failed.
    Failed { code: i32, message: String },
    /// Stopped on rank 0's word.
    Stopped,
    /// Rotations of item `item` done so far, now and then.
    Progress { item: usize, rotations: u64 },
}

/// What a finished item leaves.
#[derive(Debug, Serialize, Deserialize)]
enum Res {
    /// A whole job, finished on its rank: `on_done`'s value.
    Whole(serde_json::Value),
    /// A range of a split job: its Σ score² partials here, its maps as [`DATA`] messages.
    Part {
        /// Voxels of the maps (`None`: no maps, an empty range).
        voxels: Option<usize>,
        ssum_parts: Vec<u64>,
        /// The moments' scales (f64 bits); the moments follow the maps.
        moment_scale: Option<[u64; 2]>,
        /// The background's length and mean count (f64 bits); it follows the moments.
        background: Option<(usize, u64)>,
    },
}

/// An item's outcome on the rank that ran it.
enum Local<T> {
    Whole(T),
    Part(Part),
}

/// The end of a run as rank 0 broadcasts it: `None`, or (rank, code, message).
type Outcome = Option<(i32, i32, String)>;

impl Ranks {
    /// Ranks on the backend of `opts`.
    pub fn new(opts: DispatchOptions) -> Self {
        Ranks { opts }
    }

    /// Collective: runs `plan` over `jobs` (every rank loads the jobs of the items it runs,
    /// and rank 0 those it finishes). `on_done` gets each job where its parts are: on the rank
    /// that ran it when it is one item, else on rank 0 after the merge; its value goes to rank
    /// 0. `describe` words a failure of this rank, `(code, message)` (e.g. an exit code), for
    /// every rank. Rank 0 gets `Some` of every job's [`Finished`], in job order; the others
    /// `None`; on a failure every rank gets the first failing rank's [`RankError`].
    pub fn run<T, E>(
        &self,
        jobs: &dyn JobSource,
        plan: &Plan,
        control: &Control<'_>,
        mut on_done: impl FnMut(Done) -> std::result::Result<T, E>,
        describe: impl Fn(RunError<E>) -> (i32, String),
    ) -> std::result::Result<Option<Vec<Finished<T>>>, RankError>
    where
        T: Serialize + DeserializeOwned + Send,
    {
        let world = SimpleCommunicator::world();
        if let Some(i) = plan.items.iter().find(|i| i.job >= jobs.len()) {
            // The same on every rank: no message is left waiting.
            let error = Error::invalid(
                "plan",
                format!("an item of job {} of {}", i.job, jobs.len()),
            );
            let (code, message) = describe(RunError::Worker(Failure {
                worker: 0,
                error,
                injected: false,
            }));
            return Err(RankError {
                rank: 0,
                code,
                message,
            });
        }
        control.set_total(plan.rotations());
        let run = Run {
            opts: self.opts,
            jobs,
            plan,
            control,
            rank: world.rank() as usize,
        };
        let (outcome, finished) = if world.rank() == 0 {
            match run.coordinate(&mut on_done, &describe) {
                Ok(f) => (None, Some(f)),
                Err(e) => (Some(e), None),
            }
        } else {
            run.work(&mut on_done, &describe);
            (None, None)
        };
        // Every rank learns rank 0's outcome.
        let mut buf = serde_json::to_vec(&outcome).unwrap_or_default();
        bcast_bytes(&world, 0, &mut buf);
        match serde_json::from_slice::<Outcome>(&buf) {
            Ok(None) => Ok(finished),
            Ok(Some((rank, code, message))) => Err(RankError {
                rank,
                code,
                message,
            }),
            Err(e) => Err(RankError {
                rank: 0,
                code: 1,
                message: format!("rank 0's outcome did not arrive: {e}"),
            }),
        }
    }
}

/// One rank's view of a run.
struct Run<'a, 'c> {
    opts: DispatchOptions,
    jobs: &'a dyn JobSource,
    plan: &'a Plan,
    control: &'a Control<'c>,
    rank: usize,
}

impl Run<'_, '_> {
    /// A control for one item on this rank: the run's test hook, `progress` and `poll`.
    fn item_control<'f>(
        &self,
        progress: impl Fn(u64, u64) + Send + Sync + 'f,
        poll: impl Fn() -> bool + Send + Sync + 'f,
    ) -> Control<'f> {
        Control::new()
            .with_progress(progress)
            .with_poll(poll)
            .fail_after(self.control.fail_after_hook())
    }

    /// Runs item `k` on this rank under `control` (the rank is its worker 0).
    fn run_item(
        &self,
        k: usize,
        control: &Control<'_>,
    ) -> Result<(std::sync::Arc<MatchJob>, Part)> {
        let it = &self.plan.items[k];
        let job = self.jobs.job(it.job)?;
        let opts = DispatchOptions {
            precision: job.precision,
            ..self.opts
        };
        let task = RunRange {
            job: &job,
            range: it.range.clone(),
            control,
            worker: 0,
        };
        let part = crate::dispatch(opts, task)?;
        Ok((job, part))
    }

    /// An item's outcome: a whole job finished here (`on_done`), or a range's part.
    fn outcome<T, E>(
        &self,
        k: usize,
        control: &Control<'_>,
        ran: Result<(std::sync::Arc<MatchJob>, Part)>,
        seconds: f64,
        on_done: &mut impl FnMut(Done) -> std::result::Result<T, E>,
    ) -> std::result::Result<Local<T>, RunError<E>> {
        let it = &self.plan.items[k];
        let (matching, part) = ran.map_err(|e| failure(control, e))?;
        if !self.plan.is_whole(k) {
            return Ok(Local::Part(part));
        }
        let done = Done {
            job: it.job,
            matching,
            part,
            ran: vec![Ran {
                worker: self.rank,
                range: it.range.clone(),
                seconds,
            }],
        };
        on_done(done).map(Local::Whole).map_err(RunError::Callback)
    }

    /// A worker rank: asks rank 0 for items until there are none or rank 0 says stop.
    fn work<T: Serialize, E>(
        &self,
        on_done: &mut impl FnMut(Done) -> std::result::Result<T, E>,
        describe: &impl Fn(RunError<E>) -> (i32, String),
    ) {
        let world = SimpleCommunicator::world();
        let root = world.process_at_rank(0);
        let mut up = Up::Ready;
        let mut maps: Option<Maps> = None;
        loop {
            send_up(&world, &up, maps.as_ref());
            if matches!(up, Up::Failed { .. } | Up::Stopped) {
                return;
            }
            let (k, _) = root.receive_with_tag::<i64>(CTRL);
            let Some(k) = usize::try_from(k)
                .ok()
                .filter(|&k| k < self.plan.items.len())
            else {
                return;
            };
            let stopped = AtomicBool::new(false);
            let reported = Mutex::new(Instant::now());
            // Called on this (the MPI) thread between rotations.
            let control = self.item_control(
                |done, _| {
                    let mut last = reported.lock().unwrap_or_else(|e| e.into_inner());
                    if last.elapsed() >= REPORT_EVERY {
                        // Rank 0's count takes this item's rotations as they go.
                        *last = Instant::now();
                        let p = Up::Progress {
                            item: k,
                            rotations: done,
                        };
                        send_up(&SimpleCommunicator::world(), &p, None);
                    }
                },
                || {
                    let w = SimpleCommunicator::world();
                    if let Some((m, _)) =
                        w.process_at_rank(0).immediate_matched_probe_with_tag(CTRL)
                    {
                        let _: (i64, _) = m.matched_receive();
                        stopped.store(true, Relaxed);
                        return true;
                    }
                    self.control.poll_now()
                },
            );
            let t = Instant::now();
            let ran = self.run_item(k, &control);
            let out = self.outcome(k, &control, ran, t.elapsed().as_secs_f64(), on_done);
            let seconds = t.elapsed().as_secs_f64();
            maps = None;
            up = match out {
                _ if stopped.load(Relaxed) => Up::Stopped,
                Ok(Local::Whole(v)) => match serde_json::to_value(&v) {
                    Ok(v) => Up::Done {
                        item: k,
                        seconds,
                        res: Res::Whole(v),
                    },
                    Err(e) => Up::Failed {
                        code: 1,
                        message: format!("a finished job's value cannot be sent: {e}"),
                    },
                },
                Ok(Local::Part(p)) => {
                    let res = part_header(&p);
                    maps = p.maps;
                    Up::Done {
                        item: k,
                        seconds,
                        res,
                    }
                }
                Err(e) => {
                    let (code, message) = describe(e);
                    Up::Failed { code, message }
                }
            };
        }
    }

    /// Rank 0: hands out the items, runs its own, merges and finishes split jobs; every job's
    /// [`Finished`], or the first failure (rank, code, message).
    fn coordinate<T: DeserializeOwned + Send, E>(
        &self,
        on_done: &mut impl FnMut(Done) -> std::result::Result<T, E>,
        describe: &impl Fn(RunError<E>) -> (i32, String),
    ) -> std::result::Result<Vec<Finished<T>>, (i32, i32, String)> {
        let size = SimpleCommunicator::world().size() as usize;
        let total = self.plan.rotations();
        let coord = Mutex::new(Coord::new(self.plan, size));
        let lock = || coord.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let mut c = lock();
            c.serve();
            while let Some(j) = c.ready.pop() {
                let m = c.merges.remove(&j).unwrap_or_default();
                if c.stopping {
                    continue;
                }
                // Other ranks wait for rank 0 while it finishes; that is short next to matching.
                let mut ran = c.ran[j].clone();
                ran.sort_by_key(|r| (r.range.start, r.range.end));
                let done = self.jobs.job(j).map(|matching| Done {
                    job: j,
                    matching,
                    part: m.part,
                    ran,
                });
                let finished = match done {
                    Ok(d) => on_done(d).map_err(RunError::Callback),
                    Err(e) => Err(failure(&Control::new(), e)),
                };
                match finished {
                    Ok(v) => c.done[j] = Some(v),
                    Err(e) => {
                        let (code, message) = describe(e);
                        c.fail(0, code, message);
                    }
                }
            }
            if let Some(k) = c.take() {
                drop(c);
                // Between its own rotations rank 0 answers the others.
                let control = self.item_control(
                    |d, _| {
                        let mut c = lock();
                        c.serve();
                        self.control.report(c.rotations_done() + d, total);
                    },
                    || lock().stopping || self.control.poll_now(),
                );
                let t = Instant::now();
                let ran = self.run_item(k, &control);
                let out = self.outcome(k, &control, ran, t.elapsed().as_secs_f64(), on_done);
                let seconds = t.elapsed().as_secs_f64();
                let mut c = lock();
                match out {
                    _ if c.stopping => {}
                    Ok(out) => c.record(k, 0, seconds, out),
                    Err(e) => {
                        let (code, message) = describe(e);
                        c.fail(0, code, message);
                    }
                }
                self.control.report(c.rotations_done(), total);
                continue;
            }
            if c.all_finished() && c.ready.is_empty() {
                break;
            }
            c.serve_one();
            self.control.report(c.rotations_done(), total);
        }
        let mut c = lock();
        if let Some(e) = c.error.take() {
            return Err(e);
        }
        let done = std::mem::take(&mut c.done);
        let ran = std::mem::take(&mut c.ran);
        done.into_iter()
            .zip(ran)
            .map(|(v, mut ran)| {
                ran.sort_by_key(|r| (r.range.start, r.range.end));
                v.map(|value| Finished { value, ran })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or((0, 1, "internal error: a job was not run".into()))
    }
}

/// A worker's error under its item control: its first real failure, or a stop.
fn failure<E>(control: &Control<'_>, e: Error) -> RunError<E> {
    if !control.fail(0, e) {
        return RunError::Stopped;
    }
    match control.take_failure() {
        Some(f) => RunError::Worker(f),
        None => RunError::Stopped,
    }
}

/// The header of a range's part ([`Res::Part`]); its maps follow.
fn part_header(p: &Part) -> Res {
    let maps = p.maps.as_ref();
    let ssum_parts = p
        .ranges
        .iter()
        .flat_map(|(_, v)| v.iter().map(|x| x.to_bits()));
    Res::Part {
        voxels: maps.map(|m| m.scores.len()),
        ssum_parts: ssum_parts.collect(),
        moment_scale: maps
            .and_then(|m| m.moments.as_ref())
            .map(|(_, s)| s.map(f64::to_bits)),
        background: maps
            .and_then(|m| m.background.as_ref())
            .map(|(m, c)| (m.len(), c.to_bits())),
    }
}

/// Sends `up` (and a part's maps) to rank 0.
fn send_up(world: &SimpleCommunicator, up: &Up, maps: Option<&Maps>) {
    let root = world.process_at_rank(0);
    let bytes = serde_json::to_vec(up).unwrap_or_default();
    root.send_with_tag(&bytes[..], UP);
    if let Some(p) = maps {
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

/// Receives `len` values sent in [`CHUNK`]s by `send_up`.
fn receive_chunks<T: Equivalence>(from: &mpi::topology::Process<'_>, len: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        v.extend(from.receive_vec_with_tag::<T>(DATA).0);
    }
    v
}

/// Receives the maps of a range's part from rank `src` and makes the part of item `range`.
fn receive_part(src: i32, range: std::ops::Range<usize>, res: Res) -> Option<Part> {
    let Res::Part {
        voxels,
        ssum_parts,
        moment_scale,
        background,
    } = res
    else {
        return None;
    };
    let ssum_parts: Vec<f64> = ssum_parts.into_iter().map(f64::from_bits).collect();
    let Some(voxels) = voxels else {
        return Some(Part {
            ranges: vec![(range, ssum_parts)],
            maps: None,
        });
    };
    let w = SimpleCommunicator::world();
    let from = w.process_at_rank(src);
    let scores = receive_chunks::<f64>(&from, voxels);
    let index = receive_chunks::<i64>(&from, voxels);
    let moments = moment_scale.map(|sc| {
        (
            receive_chunks::<i64>(&from, 4 * voxels),
            sc.map(f64::from_bits),
        )
    });
    let background =
        background.map(|(len, count)| (receive_chunks::<f64>(&from, len), f64::from_bits(count)));
    let maps = Maps {
        scores,
        index,
        moments,
        background,
    };
    Some(Part::new(range, ssum_parts, maps))
}

/// A worker as rank 0 sees it.
#[derive(Debug, Clone, Copy, Default)]
struct Worker {
    busy: bool,
    stop_sent: bool,
    finished: bool,
}

/// A split job's merge so far.
#[derive(Default)]
struct Merge {
    part: Part,
    left: usize,
}

/// Rank 0's bookkeeping.
struct Coord<'a, T> {
    plan: &'a Plan,
    next: usize,
    workers: Vec<Worker>,
    stopping: bool,
    error: Option<(i32, i32, String)>,
    done_rot: u64,
    /// Rotations done of each rank's current item (from its progress reports).
    inflight: Vec<u64>,
    merges: HashMap<usize, Merge>,
    /// Split jobs whose parts are all merged, to finish.
    ready: Vec<usize>,
    done: Vec<Option<T>>,
    ran: Vec<Vec<Ran>>,
}

impl<'a, T: DeserializeOwned> Coord<'a, T> {
    fn new(plan: &'a Plan, size: usize) -> Self {
        let n = plan.jobs();
        Coord {
            plan,
            next: 0,
            workers: vec![Worker::default(); size],
            stopping: false,
            error: None,
            done_rot: 0,
            inflight: vec![0; size],
            merges: HashMap::new(),
            ready: Vec::new(),
            done: (0..n).map(|_| None).collect(),
            ran: vec![Vec::new(); n],
        }
    }

    fn ctrl(k: usize, v: i64) {
        SimpleCommunicator::world()
            .process_at_rank(k as i32)
            .send_with_tag(&v, CTRL);
    }

    /// Records a failure (the first one is reported) and stops every busy worker.
    fn fail(&mut self, rank: i32, code: i32, message: String) {
        if self.error.is_none() {
            self.error = Some((rank, code, message));
        }
        if !self.stopping {
            self.stopping = true;
            for (k, w) in self.workers.iter_mut().enumerate().skip(1) {
                if w.busy && !w.finished && k as i32 != rank {
                    Self::ctrl(k, STOP);
                    w.stop_sent = true;
                }
            }
        }
    }

    /// Answers worker `k`, which waits for its next item.
    fn assign(&mut self, k: usize) {
        let w = &mut self.workers[k];
        w.busy = false;
        if self.stopping {
            if !w.stop_sent {
                Self::ctrl(k, STOP);
            }
            w.finished = true;
        } else if self.next < self.plan.items.len() {
            self.next += 1;
            w.busy = true;
            Self::ctrl(k, (self.next - 1) as i64);
        } else {
            Self::ctrl(k, NO_MORE);
            w.finished = true;
        }
    }

    /// The next item for rank 0 itself.
    fn take(&mut self) -> Option<usize> {
        (!self.stopping && self.next < self.plan.items.len()).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    /// Records item `k`'s outcome, run by `rank`.
    fn record(&mut self, k: usize, rank: usize, seconds: f64, out: Local<T>) {
        let it = &self.plan.items[k];
        self.done_rot += it.range.len() as u64;
        self.ran[it.job].push(Ran {
            worker: rank,
            range: it.range.clone(),
            seconds,
        });
        match out {
            Local::Whole(v) => self.done[it.job] = Some(v),
            Local::Part(p) => {
                let m = self.merges.entry(it.job).or_insert_with(|| Merge {
                    left: self.plan.parts_of(it.job),
                    ..Merge::default()
                });
                if let Err(e) = m.part.merge(p) {
                    self.fail(0, 1, format!("merging the parts of a job: {e}"));
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
    fn handle(&mut self, src: i32, bytes: &[u8]) {
        let k = src as usize;
        let up: Up = serde_json::from_slice(bytes).unwrap_or_else(|e| Up::Failed {
            code: 1,
            message: format!("unreadable message to rank 0: {e}"),
        });
        if !matches!(up, Up::Progress { .. })
            && let Some(f) = self.inflight.get_mut(k)
        {
            *f = 0;
        }
        match up {
            Up::Progress { item, rotations } => {
                if let (Some(it), Some(f)) = (self.plan.items.get(item), self.inflight.get_mut(k)) {
                    *f = rotations.min(it.range.len() as u64);
                }
            }
            Up::Ready => self.assign(k),
            Up::Done { item, seconds, res } => {
                let Some(it) = self.plan.items.get(item) else {
                    self.fail(src, 1, format!("rank {src} ran an item not in the plan"));
                    self.workers[k].finished = true;
                    return;
                };
                let out = match res {
                    Res::Whole(v) => serde_json::from_value(v)
                        .map(Local::Whole)
                        .map_err(|e| format!("a finished job's value did not arrive: {e}")),
                    // Always received, also when stopping: the worker waits in its send.
                    res => receive_part(src, it.range.clone(), res)
                        .map(Local::Part)
                        .ok_or_else(|| "no part".to_string()),
                };
                match out {
                    Ok(out) if !self.stopping => self.record(item, k, seconds, out),
                    Ok(_) => {}
                    Err(e) => self.fail(src, 1, e),
                }
                self.assign(k);
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
    fn serve(&mut self) {
        let w = SimpleCommunicator::world();
        while let Some(msg) = w.any_process().immediate_matched_probe_with_tag(UP) {
            let (bytes, status) = msg.matched_receive_vec::<u8>();
            self.handle(status.source_rank(), &bytes);
        }
    }

    /// Waits for one message and handles it.
    fn serve_one(&mut self) {
        let w = SimpleCommunicator::world();
        let (bytes, status) = w
            .any_process()
            .matched_probe_with_tag(UP)
            .matched_receive_vec::<u8>();
        self.handle(status.source_rank(), &bytes);
    }

    /// Rotations done so far by every rank, rank 0's current item aside.
    fn rotations_done(&self) -> u64 {
        self.done_rot + self.inflight.iter().sum::<u64>()
    }

    fn all_finished(&self) -> bool {
        self.workers.iter().skip(1).all(|w| w.finished)
    }
}
