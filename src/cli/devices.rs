//! `monomorph devices`.

use monomorph::{Backend, BackendTask};

use super::error::CliResult;
use super::global::Global;

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / 1073741824.0)
}

fn describe<B: Backend>(b: &B) -> String {
    let d = b.device();
    format!(
        "  {:<5} {}  ({}; memory {} total, {} free; {} processors)",
        d.kind.to_string(),
        d.name,
        d.description,
        gib(d.total_memory),
        gib(d.free_memory),
        d.processors
    )
}

struct Describe;

impl BackendTask for Describe {
    type Output = String;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<String> {
        Ok(describe(b))
    }
}

/// Lists the compiled-in backends and their devices.
pub fn run(_g: &Global) -> CliResult<()> {
    let mut compiled = Vec::new();
    if cfg!(feature = "cpu") {
        compiled.push("cpu");
    }
    if cfg!(feature = "cuda") {
        compiled.push("cuda");
    }
    say!(
        "monomorph {}: backends compiled in: {}",
        env!("CARGO_PKG_VERSION"),
        compiled.join(", ")
    )?;
    say!("devices:")?;
    let cpu = monomorph::dispatch(
        monomorph::dispatch::DispatchOptions {
            backend: monomorph::BackendChoice::Cpu,
            ..Default::default()
        },
        Describe,
    );
    match cpu {
        Ok(s) => say!("{s}")?,
        Err(e) => say!("  cpu   unavailable: {e}")?,
    }
    match monomorph::dispatch::cuda_unavailable_reason() {
        None => {
            let s = monomorph::dispatch(
                monomorph::dispatch::DispatchOptions {
                    backend: monomorph::BackendChoice::Cuda,
                    ..Default::default()
                },
                Describe,
            );
            match s {
                Ok(s) => say!("{s}")?,
                Err(e) => say!("  cuda  unavailable: {e}")?,
            }
        }
        Some(why) => say!("  cuda  unavailable: {why}")?,
    }
    let auto = if monomorph::dispatch::cuda_unavailable_reason().is_none() {
        "cuda"
    } else {
        "cpu"
    };
    say!("--backend auto uses: {auto}")?;
    Ok(())
}
