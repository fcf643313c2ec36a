//! Developer tasks: `cargo xtask bench` (the benchmark matrix) and `cargo xtask device`
//! (the GPU bundle).

mod bench;
mod device;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "monomorph developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the benchmark matrix (algorithms × backends × sizes × precisions).
    Bench(bench::Args),
    /// Build the CUDA test and bench binaries into a bundle for a GPU machine.
    Device(device::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Bench(a) => bench::run(a),
        Command::Device(a) => device::run(a),
    }
}
