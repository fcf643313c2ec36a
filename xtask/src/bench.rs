//! `cargo xtask bench`: the benchmark matrix over algorithms × backends × sizes × precisions.
//!
//! Builds the `monomorph` binary once in release (with `--features cuda` when CUDA is asked
//! for), then runs `monomorph bench --json` once per cell — warm-up and repetitions happen inside
//! the cell, the device is synchronised inside the timed region — and writes `DIR/bench.json`
//! (machine, versions, git revision, every run's times) and `DIR/bench.md` (one table per
//! algorithm: median, min–max, throughput, distance to the bound measured in the same run).
//!
//! Bounds: matching and FFT cells are compared with the bare FFTs they need (one forward and one
//! inverse transform of the padded target per rotation, timed by an `fft` cell of that shape);
//! the max filter, peaks and CG with their bytes moved divided by the STREAM-triad bandwidth
//! measured at the start of the run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// Options of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Backends, comma separated (cpu, cuda).
    #[arg(long, default_value = "cpu", value_delimiter = ',')]
    backends: Vec<String>,
    /// Algorithms, comma separated (matching, peaks, maxfilter, cg, fft).
    #[arg(
        long,
        default_value = "matching,peaks,maxfilter,cg,fft",
        value_delimiter = ','
    )]
    algorithms: Vec<String>,
    /// Sizes: small, medium, large, or an explicit list `ALG=SIZE;ALG=SIZE` / `SIZE,SIZE`.
    #[arg(long, default_value = "medium")]
    sizes: String,
    /// Precisions, comma separated (single, double).
    #[arg(long, default_value = "single", value_delimiter = ',')]
    precision: Vec<String>,
    /// A quick pass (medium sizes, 3 repetitions, 16 rotations): under two minutes on 2 cores.
    #[arg(long)]
    quick: bool,
    /// Timed repetitions per cell (default 5, quick 3).
    #[arg(long)]
    reps: Option<usize>,
    /// Output folder for bench.json and bench.md.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Use this already built `monomorph` binary instead of building one (e.g. inside the GPU
    /// bundle, where there is no cargo).
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// Compare with an earlier bench.json and print the changes (regressions first).
    #[arg(long, value_name = "FILE")]
    compare: Option<PathBuf>,
}

/// Sizes per algorithm for a named set. Matching sizes are `TARGET/TEMPLATE`.
fn preset(name: &str, alg: &str) -> Vec<String> {
    let v: &[&str] = match (name, alg) {
        ("small", "matching") => &["64/16", "512x512/32x32"],
        ("small", "peaks" | "maxfilter") => &["128"],
        ("small", "cg") => &["32"],
        ("small", "fft") => &["64", "128"],
        ("medium", "matching") => &["128/32", "1024x1024/48x48"],
        ("medium", "peaks" | "maxfilter") => &["256"],
        ("medium", "cg") => &["64", "128"],
        ("medium", "fft") => &["128", "256"],
        ("large", "matching") => &[
            "128/24",
            "192/32",
            "256/48",
            "1024x1024/48x48",
            "2048x2048/64x64",
        ],
        ("large", "peaks" | "maxfilter") => &["256", "512"],
        ("large", "cg") => &["64", "128", "256"],
        ("large", "fft") => &["128", "192", "256", "512"],
        _ => &[],
    };
    v.iter().map(|s| s.to_string()).collect()
}

fn sizes_for(spec: &str, alg: &str) -> Vec<String> {
    if ["small", "medium", "large"].contains(&spec) {
        return preset(spec, alg);
    }
    // `alg=s1,s2;alg2=s3` or a plain list applying to every algorithm.
    if spec.contains('=') {
        spec.split(';')
            .filter_map(|part| part.split_once('='))
            .filter(|(a, _)| a.trim() == alg)
            .flat_map(|(_, l)| {
                l.split(',')
                    .map(|s| s.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    } else {
        spec.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

fn git_revision() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| t.lines().next().map(|l| l.to_string()))
        .unwrap_or_default();
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    json!({
        "cpu": cpu,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "memory": mem,
        "rustc": rustc,
        "os": std::env::consts::OS,
    })
}

/// Builds the release binary once; returns its path.
fn build(cuda: bool) -> Result<PathBuf> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args([
        "build",
        "--release",
        "-p",
        "monomorph",
        "--bin",
        "monomorph",
    ]);
    if cuda {
        cmd.args(["--features", "cuda"]);
    }
    eprintln!("building: {cmd:?}");
    let st = cmd.status().context("running cargo build")?;
    if !st.success() {
        bail!("cargo build of the bench binary failed");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    Ok(target.join("release").join("monomorph"))
}

/// Runs one cell; `Ok(None)` with a reason when the backend is unavailable.
fn cell(
    bin: &Path,
    backend: &str,
    precision: &str,
    alg: &str,
    size: &str,
    reps: usize,
    rotations: usize,
) -> Result<std::result::Result<Value, String>> {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--quiet",
        "--backend",
        backend,
        "--precision",
        precision,
        "bench",
        "--algorithm",
        alg,
        "--size",
        size,
        "--json",
    ]);
    cmd.args([
        "--reps",
        &reps.to_string(),
        "--rotations",
        &rotations.to_string(),
    ]);
    let o = cmd
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        return Ok(Err(err));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().last().unwrap_or("");
    Ok(Ok(serde_json::from_str(line).with_context(|| {
        format!("parsing the cell output {line:?}")
    })?))
}

fn fmt_s(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// Adds the distance to the bound to each cell.
fn annotate(cells: &mut [Value], stream_bw: Option<f64>) {
    for c in cells.iter_mut() {
        let med = c["median_s"].as_f64().unwrap_or(f64::NAN);
        let alg = c["algorithm"].as_str().unwrap_or("").to_string();
        let (bound_s, kind) = match alg.as_str() {
            "matching" => (c["fft_bound_s"].as_f64(), "bare FFTs"),
            "fft" => (c["flops"].as_f64().map(|_| f64::NAN), ""),
            _ => (
                c["bytes"].as_f64().zip(stream_bw).map(|(b, bw)| b / bw),
                "bytes / STREAM triad",
            ),
        };
        if let Some(b) = bound_s.filter(|b| b.is_finite() && *b > 0.0) {
            c["bound_s"] = json!(b);
            c["bound_kind"] = json!(kind);
            c["times_bound"] = json!(med / b);
        }
        let thr = match alg.as_str() {
            "fft" => c["flops"]
                .as_f64()
                .map(|f| format!("{:.2} GFLOP/s", f / med / 1e9)),
            "matching" => c["rotations"]
                .as_f64()
                .map(|r| format!("{:.1} rot/s", r / med)),
            "cg" => c["iterations"]
                .as_f64()
                .map(|i| format!("{:.1} it/s", i / med)),
            _ => c["bytes"]
                .as_f64()
                .map(|b| format!("{:.2} GB/s", b / med / 1e9)),
        };
        if let Some(t) = thr {
            c["throughput"] = json!(t);
        }
    }
}

fn markdown(doc: &Value) -> String {
    let mut s = String::from("# monomorph benchmark matrix\n\n");
    s += &format!(
        "git {} · {} · {} threads · {}\n\n",
        doc["git_revision"].as_str().unwrap_or("?"),
        doc["machine"]["cpu"].as_str().unwrap_or("?"),
        doc["machine"]["threads"],
        doc["machine"]["rustc"].as_str().unwrap_or("?")
    );
    if let Some(bw) = doc["stream_triad_bytes_per_s"].as_f64() {
        s += &format!("STREAM triad (host, this run): {:.2} GB/s\n\n", bw / 1e9);
    }
    let mut by_alg: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for c in doc["cells"].as_array().into_iter().flatten() {
        by_alg
            .entry(c["algorithm"].as_str().unwrap_or("?").to_string())
            .or_default()
            .push(c);
    }
    for (alg, cells) in by_alg {
        s += &format!(
            "## {alg}\n\n| backend | precision | size | median | min–max | throughput | bound | × bound |\n|---|---|---|---|---|---|---|---|\n"
        );
        for c in cells {
            s += &format!(
                "| {} | {} | {} | {} | {}–{} | {} | {} | {} |\n",
                c["backend"].as_str().unwrap_or("?"),
                c["precision"].as_str().unwrap_or("?"),
                c["size"].as_str().unwrap_or("?"),
                fmt_s(c["median_s"].as_f64().unwrap_or(f64::NAN)),
                fmt_s(c["min_s"].as_f64().unwrap_or(f64::NAN)),
                fmt_s(c["max_s"].as_f64().unwrap_or(f64::NAN)),
                c["throughput"].as_str().unwrap_or("–"),
                c["bound_s"]
                    .as_f64()
                    .map(|b| format!("{} ({})", fmt_s(b), c["bound_kind"].as_str().unwrap_or("")))
                    .unwrap_or_else(|| "–".into()),
                c["times_bound"]
                    .as_f64()
                    .map(|r| format!("{r:.2}×"))
                    .unwrap_or_else(|| "–".into()),
            );
        }
        s += "\n";
    }
    if let Some(sk) = doc["skipped"].as_array().filter(|a| !a.is_empty()) {
        s += "## skipped\n\n";
        for k in sk {
            s += &format!("- {}\n", k.as_str().unwrap_or(""));
        }
    }
    s
}

fn key(c: &Value) -> String {
    format!(
        "{} {} {} {}",
        c["algorithm"].as_str().unwrap_or("?"),
        c["backend"].as_str().unwrap_or("?"),
        c["precision"].as_str().unwrap_or("?"),
        c["size"].as_str().unwrap_or("?")
    )
}

/// Prints the change of every common cell against an earlier bench.json, regressions first.
fn compare(old: &Value, new: &Value) {
    let index: BTreeMap<String, f64> = old["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["median_s"].as_f64().map(|m| (key(c), m)))
        .collect();
    let mut rows: Vec<(f64, String, f64, f64)> = new["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let k = key(c);
            let m = c["median_s"].as_f64()?;
            index.get(&k).map(|&o| (m / o, k, o, m))
        })
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!(
        "\nchange vs {} (git {}): ratio new/old of the medians, regressions first",
        old["date"].as_str().unwrap_or("earlier run"),
        old["git_revision"].as_str().unwrap_or("?")
    );
    for (r, k, o, m) in rows {
        let tag = if r > 1.05 {
            "REGRESSION"
        } else if r < 0.95 {
            "faster"
        } else {
            "same"
        };
        println!(
            "  {tag:<10} {k:<45} {} -> {}  ({:+.1}%)",
            fmt_s(o),
            fmt_s(m),
            (r - 1.0) * 100.0
        );
    }
}

pub fn run(a: Args) -> Result<()> {
    let t0 = Instant::now();
    // --quick keeps the sizes (medium unless given) and cuts repetitions and rotations.
    let sizes = a.sizes.clone();
    let reps = a.reps.unwrap_or(if a.quick { 3 } else { 5 });
    let rotations = if a.quick { 16 } else { 64 };
    for b in &a.backends {
        if !["cpu", "cuda"].contains(&b.as_str()) {
            bail!("--backends: unknown backend '{b}', expected cpu or cuda");
        }
    }
    for p in &a.precision {
        if !["single", "double"].contains(&p.as_str()) {
            bail!("--precision: unknown precision '{p}', expected single or double");
        }
    }
    let known = ["matching", "peaks", "maxfilter", "cg", "fft"];
    for alg in &a.algorithms {
        if !known.contains(&alg.as_str()) {
            bail!(
                "--algorithms: unknown algorithm '{alg}', expected some of {}",
                known.join(", ")
            );
        }
    }
    let bin = match &a.bin {
        Some(b) => b.clone(),
        None => build(a.backends.iter().any(|b| b == "cuda"))?,
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;

    // The bandwidth bound, measured on this machine in this run (256 MiB per array).
    let stream = cell(
        &bin,
        "cpu",
        "double",
        "stream",
        &(32usize << 20).to_string(),
        5,
        1,
    )?;
    let stream_bw = stream
        .as_ref()
        .ok()
        .and_then(|v| v["bandwidth_bytes_per_s"].as_f64());
    if let Some(bw) = stream_bw {
        eprintln!("STREAM triad: {:.2} GB/s", bw / 1e9);
    }
    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    for backend in &a.backends {
        for precision in &a.precision {
            for alg in &a.algorithms {
                for size in sizes_for(&sizes, alg) {
                    let label = format!("{alg} {size} on {backend} ({precision})");
                    eprint!("{label} … ");
                    match cell(&bin, backend, precision, alg, &size, reps, rotations)? {
                        Ok(mut v) => {
                            if alg == "matching" {
                                // The bound: the bare forward + inverse FFT of the padded grid,
                                // once per rotation, measured now.
                                if let Some(fs) = v["fft_shape"].as_array() {
                                    let spec: Vec<String> =
                                        fs.iter().map(|x| x.to_string()).collect();
                                    if let Ok(f) = cell(
                                        &bin,
                                        backend,
                                        precision,
                                        "fft",
                                        &spec.join("x"),
                                        reps,
                                        1,
                                    )? {
                                        let r = v["rotations"].as_f64().unwrap_or(0.0);
                                        v["fft_bound_s"] =
                                            json!(r * f["median_s"].as_f64().unwrap_or(f64::NAN));
                                    }
                                }
                            }
                            eprintln!(
                                "median {}",
                                fmt_s(v["median_s"].as_f64().unwrap_or(f64::NAN))
                            );
                            cells.push(v);
                        }
                        Err(why) => {
                            eprintln!("skipped: {why}");
                            skipped.push(format!("{label}: {why}"));
                        }
                    }
                }
            }
        }
    }
    annotate(&mut cells, stream_bw);
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let doc = json!({
        "date": date,
        "git_revision": git_revision(),
        "machine": machine(),
        "monomorph_version": env!("CARGO_PKG_VERSION"),
        "sizes": sizes,
        "quick": a.quick,
        "reps": reps,
        "rotations": rotations,
        "stream_triad_bytes_per_s": stream_bw,
        "cells": cells,
        "skipped": skipped,
        "wall_s": t0.elapsed().as_secs_f64(),
    });
    let json_path = a.out.join("bench.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")?;
    let md = markdown(&doc);
    std::fs::write(a.out.join("bench.md"), &md)?;
    println!("{md}");
    eprintln!(
        "wrote {} and bench.md in {:.0} s",
        json_path.display(),
        t0.elapsed().as_secs_f64()
    );
    if let Some(p) = &a.compare {
        let old: Value = serde_json::from_str(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("parsing {}", p.display()))?;
        compare(&old, &doc);
    }
    Ok(())
}
