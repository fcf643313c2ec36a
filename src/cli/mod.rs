//! The `monomorph` command line: argument parsing, the one backend dispatch, and the
//! subcommands (one file each).

mod bench;
mod demo;
mod devices;
mod error;
mod matching;
mod output;
mod peaks;
mod solve;
mod trace;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use monomorph::dispatch::{BackendChoice, DispatchOptions, PrecisionChoice};

pub use error::{CliError, CliResult};

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

/// Options every subcommand accepts.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Backend: `auto` picks CUDA when compiled in and a device is present, else the CPU.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto, global = true, help_heading = "Global options")]
    pub backend: BackendArg,
    /// Float precision of the computation (scores are always written as float32). The default,
    /// `auto`, follows the main input (the target of `match`, the scores of `peaks`, the rhs of
    /// `solve`): double for a float64 file, single otherwise; `demo` and `bench` run single.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Auto, global = true, help_heading = "Global options")]
    pub precision: PrecisionArg,
    /// Write a Chrome/Perfetto trace of every instrumented step to FILE.json.
    #[arg(
        long,
        value_name = "FILE.json",
        global = true,
        help_heading = "Global options"
    )]
    pub trace: Option<PathBuf>,
    /// Print nothing but errors (no progress bar, no table).
    #[arg(long, short = 'q', global = true, help_heading = "Global options")]
    pub quiet: bool,
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true, help_heading = "Global options")]
    pub verbose: u8,
}

/// `--backend`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendArg {
    /// The CPU (rayon threads).
    Cpu,
    /// CUDA device 0.
    Cuda,
    /// CUDA when available, else the CPU.
    Auto,
}

/// `--precision`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrecisionArg {
    /// The main input's: float64 / int64 in, double; anything else, single.
    Auto,
    /// float32 / int32.
    Single,
    /// float64 / int64.
    Double,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Synthetic tomogram with planted particles, matched end to end (no input files needed).
    Demo(demo::DemoArgs),
    /// Template matching of a template over a rotation set against a target.
    Match(matching::MatchArgs),
    /// Peak calling on a score map, written as CSV or RELION STAR.
    Peaks(peaks::PeaksArgs),
    /// Batched conjugate gradient on dense, CSR or Laplacian systems.
    Solve(solve::SolveArgs),
    /// Every backend compiled in and every device found.
    Devices,
    /// Time one algorithm at one size (the cell `cargo xtask bench` runs).
    Bench(bench::BenchArgs),
}

impl Global {
    /// The dispatch options these flags ask for.
    pub fn dispatch(&self, memory_limit: Option<u64>) -> DispatchOptions {
        DispatchOptions {
            backend: match self.backend {
                BackendArg::Cpu => BackendChoice::Cpu,
                BackendArg::Cuda => BackendChoice::Cuda,
                BackendArg::Auto => BackendChoice::Auto,
            },
            precision: match self.precision {
                PrecisionArg::Single | PrecisionArg::Auto => PrecisionChoice::Single,
                PrecisionArg::Double => PrecisionChoice::Double,
            },
            memory_limit,
        }
    }

    /// These flags with `--precision auto` resolved for the main input `data` (read from `path`
    /// by `flag`): double for float64 data. An explicit `--precision single` on float64 values
    /// that overflow float32 is an input error naming the file, never a silent infinity.
    pub fn for_input(
        &self,
        flag: &str,
        path: &std::path::Path,
        data: &monomorph::io::HostArray,
    ) -> CliResult<Global> {
        let mut g = self.clone();
        g.precision = match (self.precision, PrecisionChoice::of_input(data)) {
            (PrecisionArg::Auto, PrecisionChoice::Double) => PrecisionArg::Double,
            (PrecisionArg::Auto, PrecisionChoice::Single) => PrecisionArg::Single,
            (p, _) => p,
        };
        if g.precision == PrecisionArg::Single
            && let Some(v) = data.first_beyond_f32()
        {
            return Err(CliError::input(format!(
                "{flag} {}: holds {v:e}, beyond the float32 range, expected --precision double (the default for {} data)",
                path.display(),
                data.dtype()
            )));
        }
        Ok(g)
    }
}

/// Parses a clap error into one line.
fn one_line_clap(e: &clap::Error) -> String {
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
    let sub = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let help = match sub {
        Some(s) => format!("monomorph {s} --help"),
        None => "monomorph --help".into(),
    };
    format!("{} (see `{help}`)", parts.join(" "))
}

/// Entry point: parse, run, print one line on error.
pub fn main() -> ExitCode {
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
        eprintln!("error: internal error (a bug, please report it): {one}{at}");
        std::process::exit(error::EXIT_FAILURE as i32);
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::from(error::EXIT_USAGE)
                }
                _ => {
                    eprintln!("error: {}", one_line_clap(&e));
                    ExitCode::from(error::EXIT_USAGE)
                }
            };
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code)
        }
    }
}

fn run(cli: Cli) -> CliResult<()> {
    let g = cli.global;
    let _guard = trace::init(g.verbose, g.quiet, g.trace.as_deref())?;
    // demo and bench read no input for `--precision auto` to follow: it is single there.
    let fixed = Global {
        precision: match g.precision {
            PrecisionArg::Auto => PrecisionArg::Single,
            p => p,
        },
        ..g.clone()
    };
    match cli.command {
        Command::Demo(a) => demo::run(&fixed, a),
        Command::Match(a) => matching::run(&g, a),
        Command::Peaks(a) => peaks::run(&g, a),
        Command::Solve(a) => solve::run(&g, a),
        Command::Devices => devices::run(&g),
        Command::Bench(a) => bench::run(&fixed, a),
    }
}
