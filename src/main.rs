//! The `monomorph` command: template matching, peak calling and batched CG on `.npy`/MRC files.
//! See `monomorph --help`. The command lives in the library (`monomorph::cli`, hidden) so that
//! the Python package runs the same parser, checks and writers in-process.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    monomorph::cli::main()
}
