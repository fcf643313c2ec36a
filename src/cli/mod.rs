//! The `monomorph` command line: argument parsing, the one backend dispatch, and the
//! subcommands (one file each).
//!
//! Exit codes: 0 success; 1 a failure while running (including a failed write of an output or
//! of stdout); 2 a usage or input error (bad flag value, unreadable or malformed input, an
//! output path that cannot be used), found before anything is created. A reader of stdout that
//! goes away early (`| head`) is not an error: printing stops and the command finishes.

/// Prints a line on stdout through [`output::say`]: `say!("{x}")?`.
macro_rules! say {
    ($($t:tt)*) => {
        $crate::cli::output::say(format_args!($($t)*))
    };
}

/// Prints a line on stderr (status, not data); a closed or full stderr is ignored, as there is
/// nowhere left to report it: `note!("{x}")`.
macro_rules! note {
    ($($t:tt)*) => {
        $crate::cli::output::complain(&format!($($t)*))
    };
}

pub mod args;
mod bench;
mod demo;
mod device_input;
mod devices;
pub mod embed;
mod error;
mod filters;
mod global;
mod hand;
mod kept;
mod list;
#[cfg(feature = "mpi")]
mod list_mpi;
mod matched;
mod matching;
mod orientations;
mod output;
mod peak_query;
mod peaks;
mod project;
mod pytom;
mod ranks;
mod roc;
mod rotation_set;
mod run;
mod search;
mod session;
mod solve;
mod templates;
mod trace;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use error::{CliError, CliResult};
pub use global::{Global, PrecisionArg};
use output::complain;

/// Template matching, peak calling and batched conjugate gradient on CPU or CUDA.
///
/// Reads `.npy` (float32/float64, 2-D or 3-D) and MRC (`.mrc`, `.map`, `.rec`) files, plain or
/// compressed (`.gz`, `.bz2`), and writes `.npy`, MRC, CSV/STAR peak lists and PNG slices. Start
/// with `monomorph demo`.
#[derive(Parser, Debug)]
#[command(
    name = "monomorph",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Examples:\n  monomorph demo\n  monomorph match --target tomo.mrc --template ribo.mrc --template-mask mask.mrc --score flc --angular-step 15 --out run1\n  monomorph peaks --scores run1/scores.npy --rotation-index run1/rotation_index.npy --rotations run1/rotations.npy --min-distance 10 --false-positives 1 --out run1/particles.star\n  monomorph solve --laplacian 64x64 --rhs y.npy --out sol\n  monomorph devices"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
// Parsed once per process: the size of the largest variant (match's many flags) costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Synthetic tomogram with planted particles, matched end to end (no input files needed).
    Demo(demo::DemoArgs),
    /// Template matching of a template over a rotation set against a target.
    Match(matching::MatchArgs),
    /// Peak calling on a score map, written as CSV or RELION STAR.
    Peaks(peaks::PeaksArgs),
    /// pytom-match-pick's ROC estimate of a score map: the threshold maximising recall·(1−FDR).
    Roc(roc::RocArgs),
    /// Batched conjugate gradient on dense, CSR or Laplacian systems.
    Solve(solve::SolveArgs),
    /// Every backend compiled in and every device found.
    Devices,
    /// Time one algorithm at one size (the cell `cargo xtask bench` runs).
    Bench(bench::BenchArgs),
}

/// Parses a clap error into one line; `sub`: the subcommand, for the help hint.
fn one_line_clap(e: &clap::Error, sub: Option<&str>) -> String {
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        if !l.is_empty() {
            parts.push(l.trim_start_matches("error:").trim().to_string());
        }
    }
    let help = match sub {
        Some(s) => format!("monomorph {s} --help"),
        None => "monomorph --help".into(),
    };
    format!("{} (see `{help}`)", parts.join(" "))
}

/// The command's parser: every flag that takes a value accepts a negative number as that value
/// (`--threshold-rel -0.5`, `--min-distance -1`), so that the flag's own check names it,
/// instead of clap taking `-0.5` for an unknown flag.
fn command() -> clap::Command {
    fn negatives(c: clap::Command) -> clap::Command {
        c.mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(negatives)
    }
    // The peak query flags are declared once (peaks::PeakFlags); `match` takes them with
    // --target-list --peaks only.
    let cmd = Cli::command().mut_subcommand("match", |m| {
        peaks::PEAK_FLAG_IDS
            .iter()
            .fold(m, |m, id| m.mut_arg(*id, |a| a.requires("peaks")))
    });
    negatives(cmd)
}

/// The spellings (`--name`, `-c`) of the flags whose values are numbers, in `c` and its
/// subcommands.
fn numeric_flags(c: &clap::Command, out: &mut Vec<String>) {
    use std::any::TypeId;
    let numeric = [
        TypeId::of::<f64>(),
        TypeId::of::<f32>(),
        TypeId::of::<usize>(),
        TypeId::of::<u64>(),
        TypeId::of::<u32>(),
        TypeId::of::<i64>(),
        TypeId::of::<i32>(),
    ];
    for a in c.get_arguments() {
        let t = a.get_value_parser().type_id();
        if a.get_action().takes_values() && numeric.iter().any(|n| t == *n) {
            out.extend(a.get_long().map(|l| format!("--{l}")));
            out.extend(a.get_short().map(|s| format!("-{s}")));
        }
    }
    for s in c.get_subcommands() {
        numeric_flags(s, out);
    }
}

/// The command line with every value that starts with a hyphen but is not a plain number
/// (`-inf`, `-1G`) glued to its numeric flag (`--threshold-rel=-inf`), so that it reaches the
/// flag's check instead of being taken for an unknown flag. A following flag (`--angular-step
/// --out`) is left alone: clap then says the value is missing.
fn glue_negative_values(
    args: Vec<std::ffi::OsString>,
    c: &clap::Command,
) -> Vec<std::ffi::OsString> {
    let mut flags = Vec::new();
    numeric_flags(c, &mut flags);
    let mut out: Vec<std::ffi::OsString> = Vec::with_capacity(args.len());
    for a in args {
        let glue = a
            .to_str()
            .is_some_and(|v| v.len() > 1 && v.starts_with('-') && !v.starts_with("--"))
            && out
                .last()
                .and_then(|p| p.to_str())
                .is_some_and(|p| flags.iter().any(|f| f == p));
        match out.last_mut() {
            Some(prev) if glue => {
                prev.push("=");
                prev.push(&a);
            }
            _ => out.push(a),
        }
    }
    out
}

/// Entry point: parse, run, print one line on error.
pub fn main() -> ExitCode {
    // The last resort: a panic is a bug; say so in one line and exit 1. Never panics itself.
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let one = what.split_whitespace().collect::<Vec<_>>().join(" ");
        complain(&format!(
            "error: internal error (a bug, please report it): {one}{at}"
        ));
        std::process::exit(error::EXIT_FAILURE as i32);
    }));
    let cmd = command();
    let args = glue_negative_values(std::env::args_os().collect(), &cmd);
    let parsed = cmd
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => match e.print() {
                    Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
                        complain(&format!("error: stdout: cannot write: {err}"));
                        ExitCode::from(error::EXIT_FAILURE)
                    }
                    _ => ExitCode::SUCCESS,
                },
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::from(error::EXIT_USAGE)
                }
                _ => {
                    let sub = std::env::args_os()
                        .nth(1)
                        .map(|a| a.to_string_lossy().into_owned())
                        .filter(|a| !a.starts_with('-'));
                    complain(&format!("error: {}", one_line_clap(&e, sub.as_deref())));
                    ExitCode::from(error::EXIT_USAGE)
                }
            };
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Under a launcher, an error every rank agreed on ("rank K: …") is printed once,
            // by rank 0 (already, under MPI: before the other ranks exit).
            let shown = ranks::PRINTED.load(std::sync::atomic::Ordering::Relaxed);
            if !shown && (ranks::launched_rank() == 0 || !e.message.starts_with("rank ")) {
                complain(&format!("error: {e}"));
            }
            ExitCode::from(e.code)
        }
    }
}

/// Starts rayon's global thread pool now (`RAYON_NUM_THREADS` threads, else one per core),
/// so that threads the OS refuses (a count past a memory cap or a thread limit) are one error
/// line naming the variable, not a panic inside the first parallel loop.
fn start_threads() -> CliResult<()> {
    // Each thread maps a stack (2 MiB, rayon's default) and a signal stack: a count whose
    // stacks cannot fit is refused before any is spawned (a thread whose signal stack fails
    // to map panics inside std, out of reach of the error below).
    if let Ok(n) = std::env::var("RAYON_NUM_THREADS")
        && let Ok(k) = n.trim().parse::<u64>()
        && let Some(avail) = output::available_memory()
    {
        let need = k.saturating_mul((2 << 20) + (64 << 10));
        if need > avail {
            return Err(CliError::input(format!(
                "RAYON_NUM_THREADS={n}: {k} threads need about {} of stacks but only {} are \
                 available, expected fewer (or unset it: one thread per core)",
                monomorph::error::fmt_bytes(need),
                monomorph::error::fmt_bytes(avail)
            )));
        }
    }
    match rayon::ThreadPoolBuilder::new().build_global() {
        Ok(()) => Ok(()),
        Err(e) => match std::env::var("RAYON_NUM_THREADS") {
            Ok(n) => Err(CliError::input(format!(
                "RAYON_NUM_THREADS={n}: cannot start that many threads ({e}), expected fewer \
                 (or unset it: one thread per core)"
            ))),
            Err(_) => Err(CliError::failure(format!(
                "cannot start the worker threads: {e}"
            ))),
        },
    }
}

fn run(cli: Cli) -> CliResult<()> {
    start_threads()?;
    let g = cli.global;
    let launched = ranks::launched_ranks().filter(|&n| n > 1);
    #[cfg(not(feature = "mpi"))]
    if let Some(n) = launched {
        // Every rank fails alike: rank 0 alone says so.
        let e = ranks::unsupported(n);
        return Err(CliError {
            message: format!("rank {}: {}", ranks::launched_rank(), e.message),
            ..e
        });
    }
    #[cfg(feature = "mpi")]
    {
        let _mpi = ranks::init()?; // MPI_Finalize on drop, after the command
        let done = if ranks::world().is_some() && !matches!(cli.command, Command::Match(_)) {
            Err(CliError::input(format!(
                "rank {}: only `monomorph match` runs over MPI ranks; run this command once, without mpirun",
                ranks::launched_rank()
            )))
        } else {
            run_command(cli.command, g, launched)
        };
        ranks::finish(&done);
        done
    }
    #[cfg(not(feature = "mpi"))]
    run_command(cli.command, g, launched)
}

fn run_command(command: Command, mut g: Global, launched: Option<usize>) -> CliResult<()> {
    if launched.is_some() && ranks::launched_rank() > 0 {
        // One progress bar and one summary (rank 0's); a trace per rank: FILE.rankK.json.
        g.quiet = true;
        let k = ranks::launched_rank();
        g.trace = g.trace.map(|t| t.with_extension(format!("rank{k}.json")));
    }
    // Under MPI, every rank learns whether every rank's trace file could be created.
    let trace = ranks::agree_all(trace::init(g.verbose, g.quiet, g.trace.as_deref()))?;
    // demo and bench read no input for `--precision auto` to follow: it is single there.
    let fixed = Global {
        precision: match g.precision {
            PrecisionArg::Auto => PrecisionArg::Single,
            p => p,
        },
        ..g.clone()
    };
    let done = match command {
        Command::Demo(a) => demo::run(&fixed, a),
        Command::Match(a) => run::run_match(&g, a),
        Command::Peaks(a) if a.query.caller == peaks::Caller::Pytom => pytom::run_peaks(&g, a),
        Command::Peaks(a) => peaks::run(&g, a),
        Command::Roc(a) => roc::run(&g, a),
        Command::Solve(a) => solve::run(&g, a),
        Command::Devices => devices::run(&g),
        Command::Bench(a) => bench::run(&fixed, a),
    };
    // The command's own error first; else a trace that could not be written.
    let traced = trace.finish();
    done.and(traced)
}
