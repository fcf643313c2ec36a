//! Shared helpers of the subcommands: reading inputs, the output folder, `run.json`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use monomorph::io::{HostArray, Volume, read_array};
use serde_json::{Value, json};

use super::{CliError, CliResult, Global};

/// Reads a `.npy` or MRC input named by flag `flag`, checking that it is `dims`-D (any of) and
/// holds only finite values.
pub fn read_input(flag: &str, path: &Path, dims: &[usize]) -> CliResult<Volume> {
    let v = read_array(path).map_err(|e| CliError::from(e).about(flag))?;
    let shape = v.data.shape();
    if !dims.contains(&shape.len()) {
        let want = dims
            .iter()
            .map(|d| format!("{d}-D"))
            .collect::<Vec<_>>()
            .join(" or ");
        return Err(CliError::input(format!(
            "{flag} {}: a {}-D array of shape {:?}, expected {want}",
            path.display(),
            shape.len(),
            shape
        )));
    }
    if shape.contains(&0) {
        return Err(CliError::input(format!(
            "{flag} {}: empty array of shape {shape:?}, expected data",
            path.display()
        )));
    }
    let bad = v.data.count_nonfinite();
    if bad > 0 {
        return Err(CliError::input(format!(
            "{flag} {}: {bad} NaN or infinite value(s), expected finite values",
            path.display()
        )));
    }
    Ok(v)
}

/// Reads a `.npy` without checks beyond the format.
pub fn read_npy_input(flag: &str, path: &Path) -> CliResult<HostArray> {
    monomorph::io::read_npy(path).map_err(|e| CliError::from(e).about(flag))
}

/// Creates the output folder (and parents) and checks that it can be written to.
pub fn prepare_out_dir(dir: &Path) -> CliResult<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| {
        CliError::input(format!(
            "--out {}: cannot create the folder: {e}, expected a writable folder",
            dir.display()
        ))
    })?;
    let probe = dir.join(".monomorph-write-test");
    std::fs::write(&probe, b"").map_err(|e| {
        CliError::input(format!(
            "--out {}: cannot write there: {e}, expected a writable folder",
            dir.display()
        ))
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(dir.to_path_buf())
}

/// Checks that a file can be created at `path` (its folder exists and is writable).
pub fn check_out_file(flag: &str, path: &Path) -> CliResult<()> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(CliError::input(format!(
            "{flag} {}: the folder {} does not exist, expected a path in an existing folder",
            path.display(),
            parent.display()
        )));
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(|_| ())
        .map_err(|e| {
            CliError::input(format!(
                "{flag} {}: cannot write: {e}, expected a writable file",
                path.display()
            ))
        })
}

/// Peak resident memory of this process in bytes (VmHWM), when the OS reports it.
pub fn peak_memory_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Named wall-clock timings.
#[derive(Debug, Default)]
pub struct Timings {
    items: Vec<(String, f64)>,
}

impl Timings {
    /// Runs `f` and records its wall time under `name`.
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.items
            .push((name.to_string(), t.elapsed().as_secs_f64()));
        r
    }
    /// As a JSON object of seconds.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (n, s) in &self.items {
            m.insert(format!("{n}_s"), json!(s));
        }
        Value::Object(m)
    }
}

/// The common part of `run.json`: versions, backend, precision, machine.
pub fn run_info(g: &Global, backend_name: &str, device: &str) -> Value {
    json!({
        "monomorph_version": env!("CARGO_PKG_VERSION"),
        "command": std::env::args().collect::<Vec<_>>(),
        "backend": backend_name,
        "device": device,
        "precision": format!("{:?}", g.precision).to_lowercase(),
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "features": {
            "cpu": cfg!(feature = "cpu"),
            "cuda": cfg!(feature = "cuda"),
        },
    })
}

/// Writes pretty JSON to `path`.
pub fn write_json(path: &Path, v: &Value) -> CliResult<()> {
    let text = serde_json::to_string_pretty(v).map_err(|e| CliError::failure(e.to_string()))?;
    std::fs::write(path, text + "\n")
        .map_err(|e| CliError::failure(format!("{}: cannot write: {e}", path.display())))
}

/// Parses a byte count with an optional K/M/G/T unit (powers of 1024): the library's
/// [`monomorph::io::args::parse_bytes`].
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    monomorph::io::args::parse_bytes(s)
}

/// `v` as `f64` (monomorph's `Real::as_f64`).
pub fn f64_of<T: monomorph::Real>(v: T) -> f64 {
    v.as_f64()
}
