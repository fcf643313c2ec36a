//! The session of a command run inside another program ([`super::embed`]): in-memory arrays
//! standing for input files, a progress callback and a stop flag, and the structured results
//! handed back. The commands' own code reads it here (the lower floor); `embed` runs them.
//!
//! A flag whose value is [`ARRAY`] reads the array registered for that flag in the
//! [`Session`] instead of a file: what the file reader would have returned, checked by the
//! same code. An output flag (`--out`) whose value is [`ARRAY`] writes no file: the arrays
//! and JSON documents the files would hold are handed to the session instead
//! ([`Session::outputs`], [`Session::results`]), moved, not copied.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use monomorph::backend::{ExportedBuffer, ForeignBuffer};
use monomorph::io::{HostArray, Volume};

use super::error::{CliError, CliResult};

/// The value of a file flag that names the array registered for that flag.
pub const ARRAY: &str = "(array)";

/// A progress callback: rotations done, rotations in all.
pub type Progress = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// What an embedding program gives one command run.
#[derive(Default)]
pub struct Session {
    /// In-memory inputs by flag (`--target`), read where the flag's value is [`ARRAY`].
    pub arrays: HashMap<String, Volume>,
    /// Inputs that live on a device (or are to be matched as if they did) by flag: buffers
    /// another program owns, read where the flag's value is [`ARRAY`] before
    /// [`Session::arrays`]. `match` adopts them on the backend of their device and keeps its
    /// result there ([`Session::exported`]); its values are never read on the host.
    pub foreign: HashMap<String, ForeignBuffer>,
    /// Output arrays kept on the backend that computed them (a run over [`Session::foreign`]
    /// inputs), by file stem, handed over where they live (no download).
    pub exported: HashMap<String, ExportedBuffer>,
    /// Called with (done, total) as the matching proceeds.
    pub progress: Option<Progress>,
    /// Show the command's progress bar on stderr (when it is a terminal).
    pub bar: bool,
    /// Set by the embedding program to stop the run at its next rotation.
    pub stop: Arc<AtomicBool>,
    /// Structured results by name (`peaks`; `run` and `result`, the JSON documents run.json
    /// and result.json hold), filled by the command.
    pub results: HashMap<String, serde_json::Value>,
    /// The arrays the command's output files hold, by file stem (`scores`, `rotation_index`,
    /// `x`, …; `targets/K/scores` for target K of a `--target-list`): the same values as the
    /// `.npy` files, bit for bit, moved out of the command.
    pub outputs: HashMap<String, HostArray>,
    /// Text inputs by the path under [`ARRAY`] that stands for them (`run.json` for
    /// `--match-run (array)`, `euler.csv` for `--euler (array)/euler.csv`).
    pub documents: HashMap<String, String>,
    /// The command line, for run.json's `command`.
    pub argv: Vec<String>,
    /// Set by the command (leave it default): while a run of many targets writes one, what
    /// `hand_over` and `emit` get is kept apart under `targets/K/NAME` (K its 0-based
    /// place in the list), and arrays only when `keep`, i.e. no file holds them.
    pub target: Option<(usize, bool)>,
    /// Set by the command (leave it default): in a run of many targets, arrays read for a
    /// flag stay in the session (each target reads the templates again) and are copied out
    /// instead of moved.
    pub keep_inputs: bool,
}

/// The session of this thread, shared with the threads a run starts ([`Shared::enter`]).
type Cell = Arc<Mutex<Session>>;

thread_local! {
    static SESSION: RefCell<Option<Cell>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's session, if any (a poisoned lock is taken over: the session
/// holds data only).
fn with<R>(f: impl FnOnce(Option<&mut Session>) -> R) -> R {
    SESSION.with(|s| {
        let cell = s.borrow().clone();
        match cell {
            Some(c) => {
                let mut g: MutexGuard<'_, Session> = c.lock().unwrap_or_else(|e| e.into_inner());
                f(Some(&mut g))
            }
            None => f(None),
        }
    })
}

/// This thread's session as a handle for the threads a run starts (device threads load
/// targets and read the templates there).
#[derive(Clone, Default)]
pub struct Shared(Option<Cell>);

impl Shared {
    /// The session of this thread (an empty handle outside one).
    pub fn current() -> Self {
        Shared(SESSION.with(|s| s.borrow().clone()))
    }
    /// Runs `f` with this session as the calling thread's (the thread's own, if any, is
    /// restored after).
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.0.is_none() {
            return f();
        }
        let before = SESSION.with(|s| s.replace(self.0.clone()));
        let r = f();
        SESSION.with(|s| s.replace(before));
        r
    }
}

/// While the returned guard lives, arrays read for a flag stay in this thread's session (a
/// run of many targets reads the templates once per target).
pub fn keep_inputs() -> impl Drop {
    set_keep(true);
    Restore(|| set_keep(false))
}

fn set_keep(on: bool) {
    with(|s| {
        if let Some(s) = s {
            s.keep_inputs = on;
        }
    });
}

/// While the returned guard lives, outputs handed to this thread's session belong to target
/// `k` of a list: kept under `targets/K/NAME`, the arrays only when `keep_arrays` (the
/// outputs are in memory; otherwise the files hold them).
pub fn for_target(k: usize, keep_arrays: bool) -> impl Drop {
    with(|s| {
        if let Some(s) = s {
            s.target = Some((k, keep_arrays));
        }
    });
    Restore(|| {
        with(|s| {
            if let Some(s) = s {
                s.target = None;
            }
        })
    })
}

/// Runs its closure when dropped.
struct Restore<F: FnMut()>(F);

impl<F: FnMut()> Drop for Restore<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// The key of output `name` in the session: `targets/K/NAME` while target K of a list is
/// written.
fn key_of(s: &Session, name: &str) -> String {
    match s.target {
        Some((k, _)) => format!("targets/{k}/{name}"),
        None => name.to_string(),
    }
}

/// The part of `path` under [`ARRAY`] (`""` for [`ARRAY`] itself), when `path` starts with
/// it.
fn under_array(path: &Path) -> Option<String> {
    let rest = path.strip_prefix(ARRAY).ok()?;
    Some(rest.to_string_lossy().into_owned())
}

/// Whether `path` stands for memory of this thread's session ([`ARRAY`] or a path under it)
/// rather than a file: always `false` outside a session, where `(array)` is a plain name.
pub fn in_memory(path: &Path) -> bool {
    under_array(path).is_some() && active()
}

/// The array registered for `flag` when `path` is [`ARRAY`] (or, for a folder flag such as
/// `--csr`, the file `(array)/NAME` under it: registered as `--csr/NAME`); `None` for a real
/// path; an input error when the flag has no array (a second read of the same input).
pub fn take_array(flag: &str, path: &Path) -> Option<CliResult<Volume>> {
    let rest = under_array(path)?;
    if !rest.is_empty() && !active() {
        return None;
    }
    let key = if rest.is_empty() {
        flag.to_string()
    } else {
        let base = flag.split_whitespace().next().unwrap_or(flag);
        format!("{base}/{rest}")
    };
    let got = with(|s| {
        let s = s?;
        if s.keep_inputs {
            s.arrays.get(&key).cloned()
        } else {
            s.arrays.remove(&key)
        }
    });
    Some(got.ok_or_else(|| {
        CliError::input(format!(
            "{flag} {ARRAY}: no array given for this flag, expected an array or a path"
        ))
    }))
}

/// The device buffer registered for `flag` when `path` is [`ARRAY`] ([`Session::foreign`]),
/// taken out of the session; `None` otherwise (then the flag's host array, if any, is read).
pub fn take_foreign(flag: &str, path: &Path) -> Option<ForeignBuffer> {
    if under_array(path)?.is_empty() {
        with(|s| s?.foreign.remove(flag))
    } else {
        None
    }
}

/// Hands an output array kept on its backend to the embedding program under `name` (dropped,
/// which frees it, outside a session).
pub fn hand_over_exported(name: &str, e: ExportedBuffer) {
    with(|s| {
        if let Some(s) = s {
            let key = key_of(s, name);
            s.exported.insert(key, e);
        }
    });
}

/// The hooks of the session running on this thread (none outside one): progress, stop, bar.
#[derive(Clone, Default)]
pub struct Hooks {
    progress: Option<Progress>,
    stop: Option<Arc<AtomicBool>>,
    bar: bool,
}

impl Hooks {
    /// Reads the hooks of this thread's session (cheap clones, usable from any thread).
    pub fn current() -> Self {
        with(|s| match s {
            Some(s) => Hooks {
                progress: s.progress.clone(),
                stop: Some(s.stop.clone()),
                bar: s.bar,
            },
            None => Hooks::default(),
        })
    }
    /// Whether the progress bar is hidden: `quiet` on a command line; in a session, unless
    /// the embedding program asked for it.
    pub fn quiet(&self, quiet: bool) -> bool {
        if self.stop.is_some() {
            !self.bar
        } else {
            quiet
        }
    }
    /// Reports progress to the embedding program.
    pub fn progress(&self, done: u64, total: u64) {
        if let Some(p) = &self.progress {
            p(done, total);
        }
    }
    /// Whether the embedding program asked the run to stop.
    pub fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

/// Hands a structured result to the embedding program (nothing outside a session).
pub fn emit(name: &str, value: impl FnOnce() -> serde_json::Value) {
    with(|s| {
        if let Some(s) = s {
            let key = key_of(s, name);
            s.results.insert(key, value());
        }
    });
}

/// Hands an output array to the embedding program under `name` (the file's stem), moved
/// (dropped outside a session, and for a list's target whose files hold it). `make` runs
/// only where the array is kept.
pub fn hand_over(name: &str, make: impl FnOnce() -> HostArray) {
    with(|s| {
        if let Some(s) = s
            && s.target.is_none_or(|(_, keep)| keep)
        {
            let key = key_of(s, name);
            s.outputs.insert(key, make());
        }
    });
}

/// Whether this thread runs a command inside an embedding program.
pub fn active() -> bool {
    SESSION.with(|s| s.borrow().is_some())
}

/// The text the session gives for `path` under [`ARRAY`] (`(array)/run.json`), if any; `None`
/// for a real path, so the caller reads the file.
pub fn document(path: &Path) -> Option<String> {
    let rest = under_array(path)?;
    with(|s| s.and_then(|s| s.documents.get(&rest).cloned()))
}

/// The command line of this thread's session, if any (run.json's `command`).
pub fn argv() -> Option<Vec<String>> {
    with(|s| s.map(|s| s.argv.clone()))
}

/// Makes `session` this thread's session (`None` ends it, returning the one there was; the
/// threads it was shared with have ended by then).
pub(super) fn swap(session: Option<Session>) -> Option<Session> {
    let before = SESSION.with(|s| s.replace(session.map(|s| Arc::new(Mutex::new(s)))));
    before.map(|c| match Arc::try_unwrap(c) {
        Ok(m) => m.into_inner().unwrap_or_else(|e| e.into_inner()),
        Err(c) => std::mem::take(&mut *c.lock().unwrap_or_else(|e| e.into_inner())),
    })
}
