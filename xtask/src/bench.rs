//! `cargo xtask bench`.

/// Options of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> anyhow::Result<()> {
    anyhow::bail!("cargo xtask bench: not built yet")
}
