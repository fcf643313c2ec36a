//! The `monomorph` command: template matching, peak calling and batched CG on `.npy`/MRC files.
//! See `monomorph --help`.
#![forbid(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
