//! One control for every executor: progress in rotations over all items, a stop flag, the
//! first failure, a poll hook, and the test hooks as settings.

use std::ops::ControlFlow;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::Error;

/// Progress callback: `(rotations done, rotations in the plan)` over every item and worker.
pub type ProgressFn<'a> = Box<dyn Fn(u64, u64) + Send + Sync + 'a>;
/// Poll hook, called after every rotation of every worker: `true` stops the run (another MPI
/// rank failed, Ctrl-C). It runs on the worker's thread.
pub type PollFn<'a> = Box<dyn Fn() -> bool + Send + Sync + 'a>;

/// A failure injected by [`Control::fail_after`] (tests of failing workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailAfter {
    /// The worker that fails (`None`: any).
    pub worker: Option<usize>,
    /// After this many of its loop's steps (tiles × rotations).
    pub steps: usize,
}

/// Why a run ended early: the first worker that failed and its error.
#[derive(Debug)]
pub struct Failure {
    /// The worker (a device thread's position in its list, a rank, 0 for serial runs).
    pub worker: usize,
    /// Its error.
    pub error: Error,
    /// The failure was injected by [`Control::fail_after`] (its `Cancelled::done` says when).
    pub injected: bool,
}

/// Progress, stop and first failure of a run, shared by its workers (`Sync`).
///
/// An executor counts progress in rotations: each worker reports its loop's steps through
/// [`Control::step`]; finished items through [`Control::item_done`]. A stop ([`Control::stop`],
/// the poll hook, or a worker's failure) cancels every worker at its next rotation
/// ([`Error::Cancelled`]); the first failure is kept ([`Control::take_failure`]).
pub struct Control<'a> {
    progress: Option<ProgressFn<'a>>,
    poll: Option<PollFn<'a>>,
    fail_after: Option<FailAfter>,
    total: AtomicU64,
    done: AtomicU64,
    /// Each worker's rotations of its current item (slot per worker, grown on demand).
    inflight: Mutex<Vec<u64>>,
    stop: AtomicBool,
    polled: AtomicBool,
    injected: Mutex<Vec<usize>>,
    failure: Mutex<Option<Failure>>,
}

impl Default for Control<'_> {
    fn default() -> Self {
        Control::new()
    }
}

impl std::fmt::Debug for Control<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("done", &self.done.load(Relaxed))
            .field("total", &self.total.load(Relaxed))
            .field("stopped", &self.stopped())
            .finish()
    }
}

impl<'a> Control<'a> {
    /// No callback, no hook.
    pub fn new() -> Self {
        Control {
            progress: None,
            poll: None,
            fail_after: None,
            total: AtomicU64::new(0),
            done: AtomicU64::new(0),
            inflight: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            polled: AtomicBool::new(false),
            injected: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
        }
    }

    /// Calls `f(rotations done, rotations)` as the run goes.
    pub fn with_progress(mut self, f: impl Fn(u64, u64) + Send + Sync + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Polls `f` after every rotation; `true` stops the run.
    pub fn with_poll(mut self, f: impl Fn() -> bool + Send + Sync + 'a) -> Self {
        self.poll = Some(Box::new(f));
        self
    }

    /// Test hook: the worker (or every worker) fails after `steps` steps of its loop, as a
    /// device error would.
    pub fn fail_after(mut self, hook: Option<FailAfter>) -> Self {
        self.fail_after = hook;
        self
    }

    /// Sets the rotations the run counts to (the executor, from its plan).
    pub fn set_total(&self, rotations: u64) {
        self.total.store(rotations, Relaxed);
    }

    /// Asks every worker to stop at its next rotation.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// Whether a stop was asked for (by [`Control::stop`], the poll hook or a failure).
    pub fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }

    /// Whether the poll hook asked for the stop.
    pub fn stopped_by_poll(&self) -> bool {
        self.polled.load(Relaxed)
    }

    /// Called by a worker's loop after every step (`done` of `total` steps of an item of
    /// `len` rotations): counts progress, runs the hooks, and says whether to go on.
    pub fn step(&self, worker: usize, done: usize, total: usize, len: usize) -> ControlFlow<()> {
        if let Some(h) = self.fail_after
            && h.worker.is_none_or(|w| w == worker)
            && done >= h.steps
        {
            lock(&self.injected).push(worker);
            return ControlFlow::Break(());
        }
        if self.stopped() {
            return ControlFlow::Break(());
        }
        let rot = (done as u64 * len as u64)
            .checked_div(total as u64)
            .unwrap_or(0);
        let all = {
            let mut f = lock(&self.inflight);
            if f.len() <= worker {
                f.resize(worker + 1, 0);
            }
            f[worker] = rot;
            self.done.load(Relaxed) + f.iter().sum::<u64>()
        };
        if let Some(p) = &self.progress {
            p(all, self.total.load(Relaxed));
        }
        if let Some(poll) = &self.poll
            && poll()
        {
            self.polled.store(true, Relaxed);
            self.stop();
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// A worker finished an item of `len` rotations.
    pub fn item_done(&self, worker: usize, len: usize) {
        let all = {
            let mut f = lock(&self.inflight);
            if let Some(v) = f.get_mut(worker) {
                *v = 0;
            }
            self.done.fetch_add(len as u64, Relaxed) + len as u64 + f.iter().sum::<u64>()
        };
        if let Some(p) = &self.progress {
            p(all, self.total.load(Relaxed));
        }
    }

    /// Records a worker's error: the first real failure is kept and stops the others; a
    /// cancellation that only echoes a stop is not a failure. Returns whether it was kept.
    pub fn fail(&self, worker: usize, error: Error) -> bool {
        let injected = lock(&self.injected).contains(&worker);
        if matches!(error, Error::Cancelled { .. }) && !injected {
            return false;
        }
        let mut f = lock(&self.failure);
        let first = f.is_none();
        if first {
            *f = Some(Failure {
                worker,
                error,
                injected,
            });
        }
        self.stop();
        first
    }

    /// The test hook of [`Control::fail_after`], for an executor's own per-item controls.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn fail_after_hook(&self) -> Option<FailAfter> {
        self.fail_after
    }

    /// Calls the progress callback with counts the executor made (MPI ranks: every rank's
    /// rotations, counted on rank 0).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn report(&self, done: u64, total: u64) {
        if let Some(p) = &self.progress {
            p(done, total);
        }
    }

    /// Whether a stop was asked for, or the poll hook asks for one now.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn poll_now(&self) -> bool {
        if self.stopped() {
            return true;
        }
        if let Some(poll) = &self.poll
            && poll()
        {
            self.polled.store(true, Relaxed);
            self.stop();
            return true;
        }
        false
    }

    /// The first failure, if any (taken).
    pub fn take_failure(&self) -> Option<Failure> {
        lock(&self.failure).take()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
