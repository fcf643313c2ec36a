//! The command run inside another program (the Python package): the same parser, checks,
//! executors and writers as `monomorph …` on a command line, with in-memory arrays standing
//! for input files, a progress callback and a stop flag instead of a terminal and Ctrl-C, and
//! structured results (called peaks) handed back beside the files.
//!
//! A flag whose value is [`ARRAY`] reads the array registered for that flag in the
//! [`Session`] instead of a file: what the file reader would have returned, checked by the
//! same code.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::FromArgMatches;
use monomorph::io::Volume;

use super::error::{CliError, CliResult};
use super::{Cli, Command};

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
    /// Structured results by name (`peaks`), filled by the command.
    pub results: HashMap<String, serde_json::Value>,
    /// The command line, for run.json's `command`.
    pub argv: Vec<String>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// The array registered for `flag` when `path` is [`ARRAY`]: `None` for a real path;
/// an input error when the flag has no array (a second read of the same input).
pub fn take_array(flag: &str, path: &Path) -> Option<CliResult<Volume>> {
    if path != Path::new(ARRAY) {
        return None;
    }
    let got = SESSION.with(|s| s.borrow_mut().as_mut().and_then(|s| s.arrays.remove(flag)));
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

/// The command line of this thread's session, if any (run.json's `command`).
pub fn argv() -> Option<Vec<String>> {
    SESSION.with(|s| s.borrow().as_ref().map(|s| s.argv.clone()))
}

/// Runs `monomorph ARGS…` (`args` without the program name) on this thread in `session`;
/// returns the session (its results) and the command's outcome. Only `match`, `peaks`, `roc`
/// and `solve` run here; `--trace` is refused (it installs a process-wide logger).
pub fn run(args: Vec<String>, mut session: Session) -> (Session, CliResult<()>) {
    let mut argv = vec!["monomorph".to_string()];
    argv.extend(args);
    session.argv = argv.clone();
    let sub = argv.get(1).filter(|a| !a.starts_with('-')).cloned();
    let cmd = super::command();
    let argv = super::glue_negative_values(argv.into_iter().map(Into::into).collect(), &cmd);
    let parsed = cmd
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|e| CliError::input(super::one_line_clap(&e, sub.as_deref())));
    SESSION.with(|s| *s.borrow_mut() = Some(session));
    let done = parsed.and_then(|cli| {
        let g = cli.global;
        if let Some(t) = &g.trace {
            return Err(CliError::input(format!(
                "--trace {}: not available here, expected the command line for a trace",
                t.display()
            )));
        }
        match cli.command {
            Command::Match(a) => super::run::run_match(&g, a),
            Command::Peaks(a) if a.caller == super::peaks::Caller::Pytom => {
                super::pytom::run_peaks(&g, a)
            }
            Command::Peaks(a) => super::peaks::run(&g, a),
            Command::Roc(a) => super::roc::run(&g, a),
            Command::Solve(a) => super::solve::run(&g, a),
            _ => Err(CliError::input(
                "only match, peaks, roc and solve run here, expected one of them",
            )),
        }
    });
    let session = SESSION.with(|s| s.borrow_mut().take()).unwrap_or_default();
    (session, done)
}

/// `monomorph devices` as data: the backends compiled in and one entry per device (CPU, then
/// CUDA), each with what the command prints.
pub fn devices() -> serde_json::Value {
    super::devices::as_json()
}
