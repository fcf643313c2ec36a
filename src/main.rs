//! The `monomorph` command: template matching, peak calling and batched CG on `.npy`/MRC files.
//! See `monomorph --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
