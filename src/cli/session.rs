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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// `x`, …): the same values as the `.npy` files, bit for bit, moved out of the command.
    pub outputs: HashMap<String, HostArray>,
    /// Text inputs by the path under [`ARRAY`] that stands for them (`run.json` for
    /// `--match-run (array)`, `euler.csv` for `--euler (array)/euler.csv`).
    pub documents: HashMap<String, String>,
    /// The command line, for run.json's `command`.
    pub argv: Vec<String>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
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
    under_array(path).is_some() && SESSION.with(|s| s.borrow().is_some())
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
    let got = SESSION.with(|s| s.borrow_mut().as_mut().and_then(|s| s.arrays.remove(&key)));
    Some(got.ok_or_else(|| {
        CliError::input(format!(
            "{flag} {ARRAY}: no array given for this flag, expected an array or a path"
        ))
    }))
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
        SESSION.with(|s| match s.borrow().as_ref() {
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
    SESSION.with(|s| {
        if let Some(s) = s.borrow_mut().as_mut() {
            s.results.insert(name.to_string(), value());
        }
    });
}

/// Hands an output array to the embedding program under `name` (the file's stem), moved
/// (dropped outside a session). `make` runs only in a session.
pub fn hand_over(name: &str, make: impl FnOnce() -> HostArray) {
    SESSION.with(|s| {
        if let Some(s) = s.borrow_mut().as_mut() {
            s.outputs.insert(name.to_string(), make());
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
    SESSION.with(|s| {
        s.borrow()
            .as_ref()
            .and_then(|s| s.documents.get(&rest).cloned())
    })
}

/// The command line of this thread's session, if any (run.json's `command`).
pub fn argv() -> Option<Vec<String>> {
    SESSION.with(|s| s.borrow().as_ref().map(|s| s.argv.clone()))
}

/// Makes `session` this thread's session (`None` ends it, returning the one there was).
pub(super) fn swap(session: Option<Session>) -> Option<Session> {
    SESSION.with(|s| std::mem::replace(&mut *s.borrow_mut(), session))
}
