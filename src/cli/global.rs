//! The options every subcommand accepts (`--backend`, `--precision`, `--trace`, `-q`, `-v`) and
//! what they resolve to: the backend dispatch, the precision of an input.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use monomorph::dispatch::{BackendChoice, DispatchOptions, PrecisionChoice};

use super::error::{CliError, CliResult};

/// Options every subcommand accepts.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Backend: `auto` picks CUDA when compiled in and a device is present, else the CPU.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto, global = true, help_heading = "Global options")]
    pub backend: BackendArg,
    /// Float precision of the computation (scores are always written as float32). The default,
    /// `auto`, follows the main input (the target of `match`, the scores of `peaks`; for
    /// `solve` every float input: rhs, x0, matrix or CSR values): double for a float64 file,
    /// single otherwise; `demo` and `bench` run single.
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
    /// The CUDA device this process uses (not a flag: set from `match --devices` and the
    /// node-local rank under MPI); `None`: device 0.
    #[arg(skip)]
    pub device: Option<usize>,
    /// This process is one of several MPI ranks (not a flag: set where the command runs over
    /// ranks), so `match --devices` picks a rank's device instead of splitting over threads.
    #[arg(skip)]
    pub ranks: bool,
}

/// `--backend`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendArg {
    /// The CPU (rayon threads).
    Cpu,
    /// CUDA (device 0; `match --devices` and MPI ranks choose others).
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
            device: self.device.unwrap_or(0),
            threads: None,
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
        self.for_inputs(&[(flag, path, data)])
    }

    /// [`Global::for_input`] for an input that lives on a device: `--precision auto` from its
    /// type (float64: double). Its values are not read here: the backend that adopts it
    /// refuses non-finite values, and float64 values beyond the float32 range become infinite
    /// in single precision and are refused there ([`monomorph::work::JobArray::to_backend`]).
    pub fn for_device_input(&self, f: &monomorph::backend::ForeignBuffer) -> Global {
        let mut g = self.clone();
        if self.precision == PrecisionArg::Auto {
            g.precision = if f.dtype() == monomorph::DType::F64 {
                PrecisionArg::Double
            } else {
                PrecisionArg::Single
            };
        }
        g
    }

    /// [`Global::for_input`] for a command with several float inputs (`solve`'s rhs, x0 and
    /// operator): under `--precision auto` one float64 input makes the run double, so no
    /// input is narrowed silently; the float32 range check applies to every input.
    pub fn for_inputs(
        &self,
        inputs: &[(&str, &std::path::Path, &monomorph::io::HostArray)],
    ) -> CliResult<Global> {
        let mut g = self.clone();
        if self.precision == PrecisionArg::Auto {
            let double = inputs
                .iter()
                .any(|(_, _, d)| PrecisionChoice::of_input(d) == PrecisionChoice::Double);
            g.precision = if double {
                PrecisionArg::Double
            } else {
                PrecisionArg::Single
            };
        }
        if g.precision == PrecisionArg::Single {
            for (flag, path, data) in inputs {
                if let Some(v) = data.first_beyond_f32() {
                    return Err(CliError::input(format!(
                        "{flag} {}: holds {v:e}, beyond the float32 range, expected --precision double (the default for {} data)",
                        path.display(),
                        data.dtype()
                    )));
                }
            }
        }
        Ok(g)
    }
}
