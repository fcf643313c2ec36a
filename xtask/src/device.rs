//! `cargo xtask device`: builds the CUDA test binaries and the device benchmark in release,
//! copies them stripped into a git-ignored bundle folder with a `run.sh`, ready to carry to a
//! GPU machine that has a driver and the CUDA 13 libraries but no Rust.
//!
//! `run.sh` runs, most informative first, the device probe (`Cuda::new`: driver, NVRTC, cuFFT,
//! CUBIN compile and load), the conformance, differential and fixture tests with
//! `MONOMORPH_REQUIRE_CUDA=1` (a skip is a failure), the short benchmark table, then the tests
//! a GPU adds nothing to ([`RUN_SH`]), each step under a timeout clamped to one budget so that
//! the whole script ends within 8 minutes of a 15-minute lease, writing logs under `$OUT` when
//! set (else `./logs`). `run.sh --dry-run` shows every step's timeout, skip and error path
//! without a GPU. The benchmark's figures are compared with the reasoned H200 targets in
//! `monomorph_cuda::bench`'s documentation.

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
    /// Copy `tests/fixtures/matching` and `tests/fixtures/matching-filters` into the bundle
    /// (for a run outside the working tree).
    #[arg(long)]
    fixtures: bool,
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

/// The bundle's script. Every step runs under `timeout` clamped to what is left of one
/// budget (`MONOMORPH_BUDGET_S`, default 450 s), so the whole script ends within 8 minutes
/// (450 s + 5 s kill grace + summary) even when a step hangs, and says which step timed out.
/// The steps, most informative first: `nvidia-smi` with the loader's view of the CUDA
/// libraries (`ldconfig -p`, `LD_LIBRARY_PATH`), the device probe (`device_bench --probe`:
/// `Cuda::new` and its time), conformance, differential, the other GPU test binaries, the
/// benchmark, then the unit and NVRTC compile tests (both verified without a GPU).
/// `run.sh --dry-run` (or `MONOMORPH_DRY_RUN=1`) runs no GPU work: for every step it prints
/// its timeout and command, lists the tests of each binary, shows which CUDA libraries are
/// found and what their absence does, runs the probe's and the benchmark's no-device error
/// paths, and proves the timeout and the out-of-budget skip paths on stub steps.
pub const RUN_SH: &str = r#"#!/usr/bin/env bash
# monomorph CUDA bundle: the device probe (Cuda::new), conformance + differential + fixture
# tests, the short benchmark, then the unit and NVRTC compile tests. Needs an NVIDIA driver and
# the CUDA 13 libraries (libnvrtc, libcufft).
# Usage: run.sh [--dry-run]   (or MONOMORPH_DRY_RUN=1); MONOMORPH_BUDGET_S caps the whole run.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
LOG="${OUT:-$HERE/logs}"
mkdir -p "$LOG"
DRY="${MONOMORPH_DRY_RUN:-0}"
[ "${1:-}" = "--dry-run" ] && DRY=1
BUDGET="${MONOMORPH_BUDGET_S:-450}"
START=$(date +%s)
export MONOMORPH_REQUIRE_CUDA=1 MONOMORPH_REQUIRE_NVRTC=1
# pytme's reference maps, for the differential tests (copied in by `cargo xtask device`).
for d in "$HERE/fixtures" "$HERE/../tests/fixtures"; do
  [ -d "$d/matching" ] && { export MONOMORPH_FIXTURES="$(cd "$d" && pwd)"; break; }
done
# GPU containers mount the driver's libraries (libcuda) under /usr/local/nvidia.
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/targets/sbsa-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
for d in $(timeout 20 python3 -c 'import sys,glob; [print(p) for s in sys.path for p in glob.glob(s+"/nvidia/*/lib")]' 2>/dev/null); do
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
status=0
summary=""
# What the dynamic loader finds of the CUDA libraries, and the search path it was given: a
# failed Cuda::new is diagnosed by the same run.
loader_log() {
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-<unset>}"
  echo "ldconfig -p | grep -E 'libcuda|libnvrtc|libcufft':"
  { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -E 'libcuda|libnvrtc|libcufft' \
    || echo "  (none in the loader cache)"
}
# step NAME CAP_S LOGFILE CMD...: runs CMD under a timeout of min(CAP_S, budget left), logs it,
# and records one summary row. Exit 124/137 = timed out.
step() {
  local name=$1 cap=$2 log=$3
  shift 3
  local left=$(( BUDGET - ($(date +%s) - START) ))
  local t=$cap
  [ "$left" -lt "$t" ] && t=$left
  if [ "$t" -le 0 ]; then
    echo "SKIPPED: step $name (no time left of the ${BUDGET} s budget)"
    summary="$summary
| $name | skipped | 0 s | no time left of the ${BUDGET} s budget"
    status=1
    return
  fi
  if [ "$DRY" = 1 ]; then
    echo "dry-run: step $name, timeout ${t} s (cap ${cap} s): $*"
    return
  fi
  local s0=$(date +%s)
  timeout -k 5 "$t" "$@" > "$log" 2>&1
  local rc=$?
  local line
  line="$(grep -E '^test result' "$log" | tail -1)"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "TIMEOUT: step $name exceeded its ${t} s timeout (log: $log)"
    line="TIMED OUT after ${t} s; ${line:-no result line}"
  fi
  summary="$summary
| $name | rc=$rc | $(( $(date +%s) - s0 )) s | ${line:-no result line}"
  if [ $rc -ne 0 ]; then
    status=1
    grep -E 'panicked|FAILED|failures:|error' "$log" | head -40
  fi
}

if [ "$DRY" = 1 ]; then
  echo "dry-run: budget ${BUDGET} s for all steps (each step's timeout is clamped to what is left)"
  for lib in libcuda.so libnvrtc.so libcufft.so; do
    found=""
    for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
      ls "$d"/$lib* >/dev/null 2>&1 && found="$d" && break
    done
    if [ -n "$found" ]; then echo "dry-run: $lib found in $found"
    else echo "dry-run: $lib NOT found: every CUDA test fails (MONOMORPH_REQUIRE_CUDA=1 makes a skip a failure) and device_bench exits 2"; fi
  done
  echo "dry-run: pytme fixtures: ${MONOMORPH_FIXTURES:-NOT found (pytme_fixtures_on_the_gpu and filter_fixtures_on_the_gpu fail under MONOMORPH_REQUIRE_CUDA=1)}"
  echo "dry-run: the nvidia-smi step also logs the loader's view:"
  loader_log | sed 's/^/dry-run:   /'
  echo "dry-run: the probe (Cuda::new) without a device (its error path):"
  timeout 60 "$HERE/bin/device_bench" --probe > "$LOG/probe-dry.txt" 2>&1
  rc=$?
  head -5 "$LOG/probe-dry.txt"
  echo "dry-run: device_bench --probe exit code $rc here (2: no device; 0: Cuda::new worked)"
  for t in "$HERE"/tests/*; do
    n=$(timeout 20 "$t" --list 2>/dev/null | grep -c ': test$')
    echo "dry-run: $(basename "$t") runs here and holds $n tests"
  done
  echo "dry-run: the benchmark's rows (device_bench --list):"
  timeout 20 "$HERE/bin/device_bench" BENCH_ARGS --list 2>&1 | sed 's/^/dry-run:   /'
  echo "dry-run: device_bench without a device (its error path):"
  timeout 20 "$HERE/bin/device_bench" --quick > "$LOG/bench-dry.txt" 2>&1
  rc=$?
  head -3 "$LOG/bench-dry.txt"
  echo "dry-run: device_bench exit code $rc here (2: no device; 1: a case failed; 0: all ran)"
  echo "dry-run: the timeout path, on a stub step that hangs:"
  DRY=0
  step timeout-probe 1 "$LOG/timeout-probe.log" sleep 30
  echo "dry-run: the skip path, on a stub step with no budget left:"
  B0=$BUDGET BUDGET=0
  step skip-probe 1 "$LOG/skip-probe.log" true
  BUDGET=$B0 DRY=1 status=0 summary=""
fi

export -f loader_log 2>/dev/null
step nvidia-smi 15 "$LOG/nvidia-smi.txt" bash -c 'nvidia-smi || true; loader_log'
# The device probe first: Cuda::new (driver, NVRTC, cuFFT, the CUBIN) tells why everything
# after it would fail.
step probe 60 "$LOG/probe.txt" "$HERE/bin/device_bench" --probe
# Then the GPU tests, most informative first; the unit and NVRTC compile tests (verified
# without a GPU too) after the benchmark.
order=""
for pat in 'test-conformance*' 'test-differential*'; do
  for t in "$HERE"/tests/$pat; do [ -e "$t" ] && order="$order $t"; done
done
for t in "$HERE"/tests/*; do
  case " $order " in *" $t "*) ;; *) case "$(basename "$t")" in test-kernels*|lib-*) ;; *) order="$order $t" ;; esac ;; esac
done
for t in $order; do
  name="$(basename "$t")"
  case "$name" in test-conformance*) cap=120 ;; test-differential*) cap=150 ;; *) cap=60 ;; esac
  step "$name" $cap "$LOG/$name.log" "$t"
done
step device_bench 150 "$LOG/bench.txt" "$HERE/bin/device_bench" BENCH_ARGS
for t in "$HERE"/tests/lib-* "$HERE"/tests/test-kernels*; do
  case "$(basename "$t")" in lib-*) cap=30 ;; *) cap=120 ;; esac
  [ -e "$t" ] && step "$(basename "$t")" $cap "$LOG/$(basename "$t").log" "$t"
done
if [ "$DRY" = 1 ]; then
  echo "dry-run: done in $(( $(date +%s) - START )) s; nothing ran on a GPU"
  exit 0
fi
echo "| step | exit | time | result"
echo "|---|---|---|---"
echo "${summary#?}"
echo
cat "$LOG/bench.txt" 2>/dev/null
echo "run.sh: $(( $(date +%s) - START )) s of the ${BUDGET} s budget, exit $status"
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
    // The pytme fixtures the differential tests compare the GPU with (≈ 9 MiB): run.sh finds
    // them in the carried working tree (`../tests/fixtures`); `--fixtures` copies them in for
    // a bundle run elsewhere.
    for sub in ["matching", "matching-filters"] {
        let fixtures = Path::new("tests/fixtures").join(sub);
        if a.fixtures && fixtures.is_dir() {
            copy_dir(&fixtures, &a.out.join("fixtures").join(sub))?;
        }
    }
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

fn copy_dir(src: &Path, dst: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dst)?;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &to)?;
        } else {
            std::fs::copy(e.path(), &to)
                .with_context(|| format!("copying {}", e.path().display()))?;
        }
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

#[cfg(test)]
mod tests {
    use super::RUN_SH;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// A bundle of stub executables: a passing unit-test binary, a conformance binary that
    /// hangs, a failing kernels binary and a benchmark whose case failed.
    fn stub_bundle(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mm-run-sh-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tests")).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let list = "[ \"${1:-}\" = --list ] && { echo 'a: test'; echo 'b: test'; exit 0; }\n";
        let write = |p: &Path, body: &str| {
            std::fs::write(p, format!("#!/usr/bin/env bash\n{list}{body}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        write(
            &dir.join("tests/lib-monomorph_cuda"),
            "echo 'test result: ok. 2 passed'",
        );
        write(&dir.join("tests/test-conformance"), "sleep 100");
        write(
            &dir.join("tests/test-differential"),
            "echo 'test result: ok. 3 passed'",
        );
        write(
            &dir.join("tests/test-kernels"),
            "echo 'test x ... FAILED'; exit 101",
        );
        write(
            &dir.join("bin/device_bench"),
            "echo '| case | time | note'; echo '| x | FAILED | boom'; exit 1",
        );
        std::fs::write(dir.join("run.sh"), RUN_SH.replace("BENCH_ARGS", "--quick")).unwrap();
        dir
    }

    fn run(dir: &Path, args: &[&str], budget: &str) -> (i32, String, Duration) {
        let t = Instant::now();
        let out = Command::new("bash")
            .arg(dir.join("run.sh"))
            .args(args)
            .env("MONOMORPH_BUDGET_S", budget)
            .env("OUT", dir.join("logs"))
            // A GPU machine may have no LD_LIBRARY_PATH at all (`set -u` must not trip on it).
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .expect("bash");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text, t.elapsed())
    }

    #[test]
    fn a_hanging_step_times_out_within_the_budget_and_fails_the_run() {
        if Command::new("timeout").arg("--version").output().is_err() {
            return; // coreutils' timeout is on every machine the bundle targets
        }
        let dir = stub_bundle("hang");
        let (rc, out, took) = run(&dir, &[], "6");
        assert_eq!(rc, 1, "{out}");
        assert!(
            out.contains("TIMEOUT: step test-conformance exceeded"),
            "{out}"
        );
        assert!(out.contains("SKIPPED: step device_bench"), "{out}");
        // The probe ran before the hanging conformance step; the unit tests come after the
        // benchmark, so they are skipped too.
        assert!(out.contains("| probe | rc=1"), "{out}");
        assert!(out.contains("SKIPPED: step lib-monomorph_cuda"), "{out}");
        assert!(
            took < Duration::from_secs(6 + 5 + 5),
            "took {took:?}\n{out}"
        );
        // With time for every step, the failing benchmark and kernels binaries fail the run.
        std::fs::write(
            dir.join("tests/test-conformance"),
            "#!/usr/bin/env bash\nexit 0\n",
        )
        .unwrap();
        let (rc, out, _) = run(&dir, &[], "60");
        assert_eq!(rc, 1, "{out}");
        assert!(out.contains("| device_bench | rc=1"), "{out}");
        assert!(
            out.contains("| x | FAILED | boom"),
            "the table is still printed: {out}"
        );
        assert!(out.contains("| test-kernels | rc=101"), "{out}");
        assert!(out.contains("| lib-monomorph_cuda | rc=0"), "{out}");
        // The nvidia-smi step logs the loader's view of the CUDA libraries.
        let smi = std::fs::read_to_string(dir.join("logs/nvidia-smi.txt")).unwrap();
        assert!(
            smi.contains("LD_LIBRARY_PATH=") && smi.contains("ldconfig -p"),
            "{smi}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dry_run_shows_every_step_with_its_timeout() {
        if Command::new("timeout").arg("--version").output().is_err() {
            return;
        }
        let dir = stub_bundle("dry");
        let (rc, out, took) = run(&dir, &["--dry-run"], "450");
        assert_eq!(rc, 0, "{out}");
        let wants = [
            "dry-run: step nvidia-smi, timeout 15 s",
            "dry-run: step probe, timeout 60 s",
            "dry-run: step test-conformance, timeout 120 s",
            "dry-run: step test-differential, timeout 150 s",
            "dry-run: step device_bench, timeout 150 s",
            "dry-run: step lib-monomorph_cuda, timeout 30 s",
            "dry-run: step test-kernels, timeout 120 s",
        ];
        // Every step, in the order that tells the most first.
        let mut at = 0;
        for want in wants {
            let i = out[at..]
                .find(want)
                .unwrap_or_else(|| panic!("missing {want:?} (in this order) in:\n{out}"));
            at += i + want.len();
        }
        for want in [
            "dry-run: test-conformance runs here and holds 2 tests",
            "device_bench exit code 1",
            "device_bench --probe exit code 1",
            "TIMEOUT: step timeout-probe exceeded its 1 s timeout",
            "SKIPPED: step skip-probe (no time left",
            "dry-run:   LD_LIBRARY_PATH=",
            "dry-run:   ldconfig -p | grep -E",
            "dry-run: the benchmark's rows (device_bench --list):",
        ] {
            assert!(out.contains(want), "missing {want:?} in:\n{out}");
        }
        assert!(took < Duration::from_secs(30), "{took:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
