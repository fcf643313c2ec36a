//! The command run inside another program (the Python package): the same parser, checks,
//! executors and writers as `monomorph …` on a command line, with in-memory arrays standing
//! for input files, a progress callback and a stop flag instead of a terminal and Ctrl-C, and
//! structured results (called peaks) handed back beside the files ([`Session`]).
//!
//! A flag whose value is [`ARRAY`] reads the array registered for that flag in the
//! [`Session`] instead of a file: what the file reader would have returned, checked by the
//! same code.

use clap::FromArgMatches;

use super::error::{CliError, CliResult};
use super::{Cli, Command};

pub use super::session::{ARRAY, Progress, Session};

/// Runs `monomorph ARGS…` (`args` without the program name) on this thread in `session`;
/// returns the session (its results) and the command's outcome. Only `match`, `peaks`, `roc`
/// and `solve` run here. `--trace FILE` traces this run (one traced run at a time in a
/// process: the trace layer sees the spans of every thread).
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
    super::session::swap(Some(session));
    let done = parsed.and_then(|cli| {
        let g = cli.global;
        // `--trace FILE`: this run's spans, on every thread, until it ends.
        let trace = super::trace::init_embedded(g.trace.as_deref())?;
        let done = match cli.command {
            Command::Match(a) => super::run::run_match(&g, a),
            Command::Peaks(a) if a.query.caller == super::peaks::Caller::Pytom => {
                super::pytom::run_peaks(&g, a)
            }
            Command::Peaks(a) => super::peaks::run(&g, a),
            Command::Roc(a) => super::roc::run(&g, a),
            Command::Solve(a) => super::solve::run(&g, a),
            _ => Err(CliError::input(
                "only match, peaks, roc and solve run here, expected one of them",
            )),
        };
        // The command's own error first; else a trace that could not be written.
        let traced = trace.finish();
        done.and(traced)
    });
    let session = super::session::swap(None).unwrap_or_default();
    (session, done)
}

/// `monomorph devices` as data: the backends compiled in and one entry per device (CPU, then
/// CUDA), each with what the command prints.
pub fn devices() -> serde_json::Value {
    super::devices::as_json()
}

/// What `monomorph SUB --help` prints (the subcommand's flags, the global ones included), or
/// `None` for a subcommand that does not exist.
pub fn help(sub: &str) -> Option<String> {
    let mut cmd = super::command();
    cmd.build();
    let c = cmd.find_subcommand_mut(sub)?;
    Some(c.render_long_help().to_string())
}
