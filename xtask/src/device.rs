//! `cargo xtask device`: builds the CUDA test binaries and the device benchmark in release,
//! copies them stripped into a git-ignored bundle folder with a `run.sh`, ready to carry to a
//! GPU machine that has a driver and the CUDA 13 libraries but no Rust.
//!
//! `run.sh` runs every test binary with `MONOMORPH_REQUIRE_CUDA=1` (a skip is a failure), then
//! the short benchmark table, writing logs under `$OUT` when set (else `./logs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// Options of `cargo xtask device`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder (git-ignored).
    #[arg(long, default_value = "device-bundle")]
    out: PathBuf,
    /// Pass `--quick` to the benchmark (fewer rotations and iterations).
    #[arg(long)]
    quick: bool,
}

/// Executables of one cargo invocation (`tests_only`: the test harnesses, not the examples
/// `cargo test` also builds).
fn executables(args: &[&str], tests_only: bool) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .arg("--message-format=json")
        .output()
        .with_context(|| format!("running cargo {args:?}"))?;
    if !out.status.success() {
        bail!(
            "cargo {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" || (tests_only && v["profile"]["test"] != true) {
            continue;
        }
        if let Some(exe) = v["executable"].as_str() {
            let name = v["target"]["name"].as_str().unwrap_or("bin").to_string();
            let kind = v["target"]["kind"][0].as_str().unwrap_or("bin").to_string();
            found.push((format!("{kind}-{name}"), PathBuf::from(exe)));
        }
    }
    Ok(found)
}

fn copy_stripped(src: &Path, dst: &Path) -> anyhow::Result<()> {
    std::fs::copy(src, dst).with_context(|| format!("copying {}", src.display()))?;
    let stripped = Command::new("strip")
        .arg("--strip-all")
        .arg(dst)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !stripped {
        eprintln!(
            "warning: could not strip {} (is binutils installed?)",
            dst.display()
        );
    }
    Ok(())
}

const RUN_SH: &str = r#"#!/usr/bin/env bash
# monomorph CUDA bundle: conformance + differential + NVRTC tests, then a short benchmark.
# Needs an NVIDIA driver and the CUDA 13 libraries (libnvrtc, libcufft) on the library path.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
LOG="${OUT:-$HERE/logs}"
mkdir -p "$LOG"
export MONOMORPH_REQUIRE_CUDA=1 MONOMORPH_REQUIRE_NVRTC=1
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/targets/sbsa-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
for d in $(python3 -c 'import sys,glob; [print(p) for s in sys.path for p in glob.glob(s+"/nvidia/*/lib")]' 2>/dev/null); do
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
(nvidia-smi || true) > "$LOG/nvidia-smi.txt" 2>&1
status=0
summary=""
for t in "$HERE"/tests/*; do
  name="$(basename "$t")"
  start=$(date +%s)
  timeout 300 "$t" > "$LOG/$name.log" 2>&1
  rc=$?
  line="$(grep -E '^test result' "$LOG/$name.log" | tail -1)"
  summary="$summary
| $name | rc=$rc | $(( $(date +%s) - start )) s | ${line:-no result line}"
  if [ $rc -ne 0 ]; then
    status=1
    grep -E 'panicked|FAILED|failures:' "$LOG/$name.log" | head -40
  fi
done
echo "| test binary | exit | time | result"
echo "|---|---|---|---"
echo "${summary#?}"
echo
timeout 420 "$HERE/bin/device_bench" BENCH_ARGS 2>&1 | tee "$LOG/bench.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
"#;

pub fn run(a: Args) -> anyhow::Result<()> {
    let tests = executables(
        &["test", "-p", "monomorph-cuda", "--release", "--no-run"],
        true,
    )?;
    let bench = executables(
        &[
            "build",
            "-p",
            "monomorph-cuda",
            "--release",
            "--example",
            "device_bench",
        ],
        false,
    )?;
    if tests.is_empty() {
        bail!("cargo reported no CUDA test executables");
    }
    let bench = bench
        .into_iter()
        .find(|(n, _)| n.ends_with("device_bench"))
        .context("device_bench example was not built")?;
    if a.out.exists() {
        std::fs::remove_dir_all(&a.out).with_context(|| format!("clearing {}", a.out.display()))?;
    }
    std::fs::create_dir_all(a.out.join("tests"))?;
    std::fs::create_dir_all(a.out.join("bin"))?;
    for (name, exe) in &tests {
        copy_stripped(exe, &a.out.join("tests").join(name))?;
    }
    copy_stripped(&bench.1, &a.out.join("bin").join("device_bench"))?;
    let script = RUN_SH.replace("BENCH_ARGS", if a.quick { "--quick" } else { "" });
    let run_sh = a.out.join("run.sh");
    std::fs::write(&run_sh, script)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&run_sh, std::fs::Permissions::from_mode(0o755))?;
    }
    let mut total = 0u64;
    for entry in walk(&a.out)? {
        total += entry.metadata()?.len();
    }
    println!(
        "bundle {}: {} test binaries + device_bench, {:.1} MiB; run `{}/run.sh` on the GPU machine",
        a.out.display(),
        tests.len(),
        total as f64 / (1024.0 * 1024.0),
        a.out.display()
    );
    if total > 48 * 1024 * 1024 {
        bail!("bundle is {total} bytes, over the 48 MiB budget (64 MiB carry limit)");
    }
    Ok(())
}

fn walk(dir: &Path) -> anyhow::Result<Vec<std::fs::DirEntry>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            out.extend(walk(&e.path())?);
        } else {
            out.push(e);
        }
    }
    Ok(out)
}
