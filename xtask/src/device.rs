//! `cargo xtask device`.

/// Options of `cargo xtask device`.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("cargo xtask device: not built yet")
}
