//! Executors: the same plan run serially or on device threads (items on demand), each
//! handing every finished job, merged, to the caller's callback.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::dispatch::{BackendChoice, DefaultBackend, DispatchOptions};
use crate::{Backend, BackendTask, Error, Result};

use super::control::{Control, Failure};
use super::job::MatchJob;
use super::part::Part;
use super::plan::Plan;

/// Where an executor gets its jobs: loaded when their first item starts and dropped when
/// their last one is merged, so a long list holds only the jobs in flight. A slice of shared
/// jobs is one; so is a closure that reads a job from its files.
pub trait JobSource: Sync {
    /// Job `k` of the plan.
    fn job(&self, k: usize) -> Result<Arc<MatchJob>>;
    /// The number of jobs.
    fn len(&self) -> usize;
    /// Whether there is no job.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl JobSource for [Arc<MatchJob>] {
    fn job(&self, k: usize) -> Result<Arc<MatchJob>> {
        self.get(k)
            .cloned()
            .ok_or_else(|| Error::invalid("plan", format!("job {k} of {}", self.len())))
    }
    fn len(&self) -> usize {
        <[Arc<MatchJob>]>::len(self)
    }
}

impl JobSource for Vec<Arc<MatchJob>> {
    fn job(&self, k: usize) -> Result<Arc<MatchJob>> {
        self.as_slice().job(k)
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// Jobs made on demand by a closure (`n` of them), e.g. read from their files.
pub struct Loader<F> {
    /// The number of jobs.
    pub n: usize,
    /// Makes job `k`.
    pub load: F,
}

impl<F: Fn(usize) -> Result<MatchJob> + Sync> JobSource for Loader<F> {
    fn job(&self, k: usize) -> Result<Arc<MatchJob>> {
        (self.load)(k).map(Arc::new)
    }
    fn len(&self) -> usize {
        self.n
    }
}

/// The jobs in flight: each loaded once for all its items.
struct Cache<'a> {
    source: &'a dyn JobSource,
    plan: &'a Plan,
    /// Job → (the job, items of it not yet started).
    held: Mutex<HashMap<usize, (Arc<MatchJob>, usize)>>,
}

impl<'a> Cache<'a> {
    fn new(source: &'a dyn JobSource, plan: &'a Plan) -> Self {
        Cache {
            source,
            plan,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// The job of item `k` (loaded by its first item; forgotten when its last one starts).
    fn get(&self, k: usize) -> Result<Arc<MatchJob>> {
        let job = self.plan.items[k].job;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let entry = match held.remove(&job) {
            Some(e) => e,
            None => (self.source.job(job)?, self.plan.parts_of(job)),
        };
        let (j, left) = (entry.0.clone(), entry.1 - 1);
        if left > 0 {
            held.insert(job, (entry.0, left));
        }
        Ok(j)
    }
}

/// Who ran which rotations of a job, and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// The worker (0 for a serial run; a device thread's position in its list; a rank).
    pub worker: usize,
    /// The rotations.
    pub range: Range<usize>,
    /// Wall seconds of the item.
    pub seconds: f64,
}

/// A finished job: the merge of all its parts (turn it into the result with
/// [`MatchJob::finish`]) and who ran what.
#[derive(Debug)]
pub struct Done {
    /// The job's index.
    pub job: usize,
    /// The job.
    pub matching: Arc<MatchJob>,
    /// Its parts, merged: every rotation once.
    pub part: Part,
    /// Its items as they ran, in rotation order.
    pub ran: Vec<Ran>,
}

/// Why a run did not finish.
#[derive(Debug)]
pub enum RunError<E> {
    /// A worker failed (the first failure; the others were stopped).
    Worker(Failure),
    /// Stopped by [`Control::stop`] or the control's poll hook, no worker having failed.
    Stopped,
    /// The callback failed (the workers were stopped).
    Callback(E),
}

/// The parts of the jobs being merged, as items finish (any order).
struct Assembly {
    left: HashMap<usize, usize>,
    parts: HashMap<usize, (Part, Vec<Ran>)>,
}

/// A job's part and record while its items run.
type Merging = (Part, Vec<Ran>);

impl Assembly {
    fn new(plan: &Plan) -> Self {
        let mut left = HashMap::new();
        for it in &plan.items {
            *left.entry(it.job).or_insert(0) += 1;
        }
        Assembly {
            left,
            parts: HashMap::new(),
        }
    }

    /// Merges item `k`'s part; the job when it is complete.
    fn add(
        &mut self,
        plan: &Plan,
        k: usize,
        matching: Arc<MatchJob>,
        part: Part,
        ran: Ran,
    ) -> Result<Option<Done>> {
        let job = plan.items[k].job;
        let (acc, runs) = self.parts.entry(job).or_default();
        acc.merge(part)?;
        runs.push(ran);
        let left = self.left.entry(job).or_insert(1);
        *left -= 1;
        if *left > 0 {
            return Ok(None);
        }
        let (part, mut ran): Merging = self.parts.remove(&job).unwrap_or_default();
        ran.sort_by_key(|r| (r.range.start, r.range.end));
        Ok(Some(Done {
            job,
            matching,
            part,
            ran,
        }))
    }
}

/// What a worker reports after each item.
struct Report {
    item: usize,
    job: Arc<MatchJob>,
    worker: usize,
    /// `None` when the item failed (the failure went to the control).
    part: Option<Part>,
    seconds: f64,
}

/// A worker's items on one backend: from `first`, then those `next` hands out while their
/// jobs run in this backend's precision (the first that does not is returned).
struct WorkerTask<'a, 'c, N, S> {
    jobs: &'a Cache<'a>,
    plan: &'a Plan,
    control: &'a Control<'c>,
    worker: usize,
    first: (usize, Arc<MatchJob>),
    next: &'a mut N,
    send: &'a mut S,
}

impl<N: FnMut() -> Option<usize>, S: FnMut(Report)> BackendTask for WorkerTask<'_, '_, N, S> {
    type Output = Option<(usize, Arc<MatchJob>)>;
    fn run<B: Backend>(self, b: &B) -> Result<Self::Output> {
        let (mut k, mut job) = self.first;
        loop {
            let range = self.plan.items[k].range.clone();
            let t = Instant::now();
            let part = match job.run_range(b, range.clone(), self.control, self.worker) {
                Ok(p) => {
                    self.control.item_done(self.worker, range.len());
                    Some(p)
                }
                Err(e) => {
                    self.control.fail(self.worker, e);
                    None
                }
            };
            let failed = part.is_none();
            (self.send)(Report {
                item: k,
                job: job.clone(),
                worker: self.worker,
                part,
                seconds: t.elapsed().as_secs_f64(),
            });
            if failed || self.control.stopped() {
                return Ok(None);
            }
            let Some(n) = (self.next)() else {
                return Ok(None);
            };
            let next = match self.jobs.get(n) {
                Ok(j) => j,
                Err(e) => {
                    self.control.fail(self.worker, e);
                    return Ok(None);
                }
            };
            if next.precision != job.precision {
                return Ok(Some((n, next)));
            }
            (k, job) = (n, next);
        }
    }
}

/// Runs a worker's items from `first` on (re-dispatching when the precision changes).
fn work<N: FnMut() -> Option<usize>, S: FnMut(Report)>(
    base: DispatchOptions,
    jobs: &Cache<'_>,
    plan: &Plan,
    control: &Control<'_>,
    worker: usize,
    first: Option<usize>,
    mut next: N,
    mut send: S,
) {
    let Some(k) = first else { return };
    let mut pending = match jobs.get(k) {
        Ok(j) => Some((k, j)),
        Err(e) => {
            control.fail(worker, e);
            return;
        }
    };
    while let Some((k, job)) = pending {
        if control.stopped() {
            return;
        }
        let opts = DispatchOptions {
            precision: job.precision,
            ..base
        };
        let task = WorkerTask {
            jobs,
            plan,
            control,
            worker,
            first: (k, job),
            next: &mut next,
            send: &mut send,
        };
        match crate::dispatch(opts, task) {
            Ok(left) => pending = left,
            Err(e) => {
                // The backend did not start.
                control.fail(worker, e);
                return;
            }
        }
    }
}

/// Checks that the plan's jobs exist.
fn check_plan(jobs: &dyn JobSource, plan: &Plan) -> Result<()> {
    match plan.items.iter().find(|i| i.job >= jobs.len()) {
        Some(i) => Err(Error::invalid(
            "plan",
            format!("an item of job {} of {}", i.job, jobs.len()),
        )),
        None => Ok(()),
    }
}

/// The end of a run: the first failure, a stop, or the callback's error.
fn outcome<E>(control: &Control<'_>, cb: Option<E>) -> std::result::Result<(), RunError<E>> {
    if let Some(f) = control.take_failure() {
        return Err(RunError::Worker(f));
    }
    if let Some(e) = cb {
        return Err(RunError::Callback(e));
    }
    if control.stopped() {
        return Err(RunError::Stopped);
    }
    Ok(())
}

/// Runs a plan's items in order in the calling thread, on one backend per precision.
#[derive(Debug, Clone, Copy, Default)]
pub struct Serial {
    /// The backend (the jobs' precision replaces `opts.precision`).
    pub opts: DispatchOptions,
}

impl Serial {
    /// Runs `plan` over `jobs`; `on_done` gets each job as soon as all its items are merged,
    /// in the calling thread.
    pub fn run<E>(
        &self,
        jobs: &dyn JobSource,
        plan: &Plan,
        control: &Control<'_>,
        mut on_done: impl FnMut(Done) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), RunError<E>> {
        check_plan(jobs, plan).map_err(|e| worker_error(control, e))?;
        control.set_total(plan.rotations());
        let cache = Cache::new(jobs, plan);
        let mut assembly = Assembly::new(plan);
        let mut cb_error = None;
        let mut next = 1;
        let items = plan.items.len();
        work(
            self.opts,
            &cache,
            plan,
            control,
            0,
            (items > 0).then_some(0),
            || {
                next += 1;
                (next - 1 < items).then_some(next - 1)
            },
            |r: Report| receive(plan, &mut assembly, r, control, &mut on_done, &mut cb_error),
        );
        outcome(control, cb_error)
    }
}

fn worker_error<E>(control: &Control<'_>, e: Error) -> RunError<E> {
    control.fail(0, e);
    match control.take_failure() {
        Some(f) => RunError::Worker(f),
        None => RunError::Stopped,
    }
}

/// Handles one report: merges the part, hands a finished job to `on_done`.
fn receive<E>(
    plan: &Plan,
    assembly: &mut Assembly,
    r: Report,
    control: &Control<'_>,
    on_done: &mut impl FnMut(Done) -> std::result::Result<(), E>,
    cb_error: &mut Option<E>,
) {
    let Some(part) = r.part else { return };
    if control.stopped() {
        return;
    }
    let ran = Ran {
        worker: r.worker,
        range: plan.items[r.item].range.clone(),
        seconds: r.seconds,
    };
    match assembly.add(plan, r.item, r.job, part, ran) {
        Ok(Some(done)) => {
            if let Err(e) = on_done(done) {
                cb_error.get_or_insert(e);
                control.stop();
            }
        }
        Ok(None) => {}
        Err(e) => {
            control.fail(r.worker, e);
        }
    }
}

/// Runs a plan on device threads, one backend each: CUDA devices (ordinals as CUDA numbers
/// them), or with the CPU backend one worker per listed id, each with a thread pool of its
/// own sharing rayon's threads (`T` threads over `n` workers give each `T / n`, the first
/// `T % n` one more). Worker `k` first runs item `k`; then each free worker takes the next
/// item on demand, so a slow device or a large item holds no one else.
#[derive(Debug, Clone)]
pub struct Threads {
    /// The backend (`Auto` resolved once; the jobs' precision replaces `opts.precision`).
    pub opts: DispatchOptions,
    /// The devices, one worker each.
    pub devices: Vec<usize>,
}

impl Threads {
    /// Workers on `devices` with the backend of `opts`.
    pub fn new(opts: DispatchOptions, devices: Vec<usize>) -> Self {
        let backend = match opts.backend {
            BackendChoice::Auto => DefaultBackend::new().backend,
            b => b,
        };
        Threads {
            opts: DispatchOptions { backend, ..opts },
            devices,
        }
    }

    /// Whether the workers are CPU workers.
    pub fn cpu(&self) -> bool {
        self.opts.backend != BackendChoice::Cuda
    }

    /// Rayon threads of worker `k` (CPU workers), `None` on CUDA.
    pub fn threads(&self, k: usize) -> Option<usize> {
        let n = self.devices.len().max(1);
        #[cfg(feature = "cpu")]
        let t = crate::Cpu::<crate::Single>::new().threads();
        #[cfg(not(feature = "cpu"))]
        let t = 1;
        self.cpu().then(|| t / n + usize::from(k < t % n))
    }

    /// Runs `plan` over `jobs`; `on_done` gets each job as soon as all its items are merged,
    /// in the calling thread, while the workers go on.
    pub fn run<E>(
        &self,
        jobs: &dyn JobSource,
        plan: &Plan,
        control: &Control<'_>,
        mut on_done: impl FnMut(Done) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), RunError<E>> {
        check_plan(jobs, plan).map_err(|e| worker_error(control, e))?;
        control.set_total(plan.rotations());
        let n = self.devices.len();
        let items = plan.items.len();
        let cursor = Mutex::new(n);
        let next = || {
            let mut c = cursor.lock().unwrap_or_else(|e| e.into_inner());
            *c += 1;
            (*c - 1 < items).then_some(*c - 1)
        };
        let cache = Cache::new(jobs, plan);
        let mut assembly = Assembly::new(plan);
        let mut cb_error = None;
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel::<Report>();
            for k in 0..n {
                let tx = tx.clone();
                let opts = DispatchOptions {
                    device: self.devices[k],
                    threads: self.threads(k),
                    ..self.opts
                };
                let (next, cache) = (&next, &cache);
                s.spawn(move || {
                    let send = |r: Report| {
                        let _ = tx.send(r);
                    };
                    let first = (k < items).then_some(k);
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        work(opts, cache, plan, control, k, first, next, send)
                    }));
                    if ran.is_err() {
                        control.fail(k, Error::invalid("worker", "a device thread panicked"));
                    }
                });
            }
            drop(tx);
            for r in rx {
                receive(plan, &mut assembly, r, control, &mut on_done, &mut cb_error);
            }
        });
        outcome(control, cb_error)
    }
}
