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

/// One device as data: what [`describe`] prints, by field.
fn device_json<B: Backend>(b: &B) -> serde_json::Value {
    let d = b.device();
    serde_json::json!({
        "backend": b.name(),
        "kind": d.kind.to_string(),
        "name": d.name,
        "description": d.description,
        "total_memory": d.total_memory,
        "free_memory": d.free_memory,
        "processors": d.processors,
        "available": true,
    })
}

struct DescribeJson;

impl BackendTask for DescribeJson {
    type Output = serde_json::Value;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<serde_json::Value> {
        Ok(device_json(b))
    }
}

/// What `monomorph devices` prints, as one entry per backend compiled in or not: the CPU,
/// then CUDA (`available: false` and `reason` when it cannot be used), each marked with
/// whether `--backend auto` picks it.
pub fn as_json() -> serde_json::Value {
    let opts = |backend| monomorph::dispatch::DispatchOptions {
        backend,
        ..Default::default()
    };
    let unavailable = |backend: &str, why: String| serde_json::json!({"backend": backend, "kind": backend, "available": false, "reason": why});
    let auto = if monomorph::dispatch::cuda_unavailable_reason().is_none() {
        "cuda"
    } else {
        "cpu"
    };
    let mut out = Vec::new();
    out.push(
        monomorph::dispatch(opts(monomorph::BackendChoice::Cpu), DescribeJson)
            .unwrap_or_else(|e| unavailable("cpu", e.to_string())),
    );
    out.push(match monomorph::dispatch::cuda_unavailable_reason() {
        None => monomorph::dispatch(opts(monomorph::BackendChoice::Cuda), DescribeJson)
            .unwrap_or_else(|e| unavailable("cuda", e.to_string())),
        Some(why) => unavailable("cuda", why.to_string()),
    });
    for d in &mut out {
        let is_auto = d["backend"].as_str().is_some_and(|b| b.starts_with(auto));
        d["auto"] = serde_json::json!(is_auto);
        let cuda = d["backend"].as_str().is_some_and(|b| b.starts_with("cuda"));
        let compiled = [cfg!(feature = "cpu"), cfg!(feature = "cuda")];
        d["compiled"] = serde_json::json!(compiled[usize::from(cuda)]);
    }
    serde_json::Value::Array(out)
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
