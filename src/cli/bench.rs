//! `monomorph bench`: times one cell of the benchmark matrix (one algorithm, one size, the
//! global backend and precision) with warm-up and repetitions, and the bound it is compared
//! with, measured in the same process. `cargo xtask bench` drives it and collects the JSON.

use std::time::Instant;

use clap::{Args, ValueEnum};
use monomorph::algo::cg::{Boundary, LaplacianOperator, SolveParams, conjugate_gradient};
use monomorph::algo::matching::{MatchParams, Score, match_template};
use monomorph::algo::peaks::{PeakParams, find_peaks};
use monomorph::algo::rotations::RotationSet;
use monomorph::{Backend, BackendTask, BorderMode, ComplexOf, FloatOf};
use ndarray::{ArrayD, IxDyn, Zip};
use serde_json::{Value, json};

use super::error::{CliError, CliResult};
use super::global::{Global, PrecisionArg};
use super::output::check_memory;

/// Options of `monomorph bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// What to time.
    #[arg(long, value_enum)]
    pub algorithm: BenchAlgorithm,
    /// Problem size: `N` (an N³ volume), `NxN` (2-D) or `NxNxN`; for matching `TARGET/TEMPLATE`
    /// (e.g. `128/32`, `1024x1024/48x48`); for stream the element count.
    #[arg(long, value_name = "SIZE")]
    pub size: String,
    /// Timed repetitions.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Untimed warm-up runs.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Rotations per matching run.
    #[arg(long, default_value_t = 64)]
    pub rotations: usize,
    /// CG iterations per run (the tolerance is set so that every run does exactly this many).
    #[arg(long, default_value_t = 50)]
    pub cg_iterations: usize,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    pub json: bool,
}

/// `--algorithm`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchAlgorithm {
    /// Forward + inverse real FFT of a volume.
    Fft,
    /// FLC template matching over a rotation set.
    Matching,
    /// skimage-style peak calling (max filter + compaction + spacing).
    Peaks,
    /// Max filter alone (window 11).
    #[value(name = "maxfilter")]
    MaxFilter,
    /// CG on the Poisson (Laplacian) problem.
    Cg,
    /// STREAM triad `a = b + s·c` on the host (the bandwidth bound).
    Stream,
}

/// Parses `N`, `NxN`, `NxNxN` (a single N means N³), with the library's
/// [`super::args::parse_dims`].
pub fn parse_dims(s: &str) -> Result<Vec<usize>, String> {
    let v = super::args::parse_dims(s)?;
    Ok(if v.len() == 1 { vec![v[0]; 3] } else { v })
}

/// `--size`, parsed for the algorithm it sizes.
#[derive(Debug, Clone)]
enum Size {
    /// Element count (stream).
    Count(usize),
    /// One volume.
    Shape(Vec<usize>),
    /// Target and template shapes (matching).
    Pair(Vec<usize>, Vec<usize>),
}

/// Number of elements of `shape`, `None` on overflow.
fn elements(shape: &[usize]) -> Option<u128> {
    shape
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128))
}

/// Parses `--size` for `alg` and checks, before allocating anything, that the run's arrays fit
/// in memory (`fsize` bytes a float).
fn parse_size(alg: BenchAlgorithm, s: &str, fsize: u128) -> CliResult<Size> {
    let bad = |m: String| CliError::input(format!("--size {m}"));
    let size = match alg {
        BenchAlgorithm::Stream => match s.trim().parse::<usize>() {
            Ok(n) if n > 0 => Size::Count(n),
            _ => return Err(bad(format!("'{s}': expected an element count > 0"))),
        },
        BenchAlgorithm::Matching => {
            let (ts, ps) = s
                .split_once('/')
                .ok_or_else(|| bad(format!("'{s}': expected TARGET/TEMPLATE, e.g. 128/32")))?;
            let tshape = parse_dims(ts).map_err(bad)?;
            let mut pshape = parse_dims(ps).map_err(bad)?;
            if ps.split(['x', 'X']).count() == 1 {
                pshape.truncate(tshape.len());
            }
            if pshape.len() != tshape.len() {
                return Err(bad(format!(
                    "'{s}': expected a template with as many axes as the target"
                )));
            }
            if pshape.iter().zip(&tshape).any(|(p, t)| p > t) {
                return Err(bad(format!(
                    "'{s}': expected a template no larger than the target"
                )));
            }
            Size::Pair(tshape, pshape)
        }
        _ => Size::Shape(parse_dims(s).map_err(bad)?),
    };
    // A floor of the bytes each cell holds at once (host f64 noise, its converted copy, the
    // device arrays), so that a size far past the machine is an error rather than an
    // allocation abort. Matching tiles its own buffers to the memory left.
    let need = match (&size, alg) {
        (Size::Count(n), _) => (*n as u128).checked_mul(24),
        (Size::Shape(sh), BenchAlgorithm::Fft) => {
            elements(sh).and_then(|n| n.checked_mul(8 + 4 * fsize))
        }
        (Size::Shape(sh), BenchAlgorithm::Cg) => {
            elements(sh).and_then(|n| n.checked_mul(8 + 8 * fsize))
        }
        (Size::Shape(sh), _) => elements(sh).and_then(|n| n.checked_mul(8 + 5 * fsize)),
        (Size::Pair(t, p), _) => elements(t)
            .and_then(|n| n.checked_mul(8 + 4 * fsize))
            .zip(elements(p).and_then(|n| n.checked_mul(3 * (8 + fsize))))
            .and_then(|(a, b)| a.checked_add(b)),
    };
    check_memory("--size", s, need)?;
    Ok(size)
}

/// Median, min, max of a list of seconds.
pub fn stats(t: &[f64]) -> (f64, f64, f64) {
    let mut s = t.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    let med = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    };
    (
        med,
        s.first().copied().unwrap_or(f64::NAN),
        s.last().copied().unwrap_or(f64::NAN),
    )
}

/// Times `f` (which must synchronise the device before returning) `warmup + reps` times.
fn time_reps(
    warmup: usize,
    reps: usize,
    mut f: impl FnMut() -> monomorph::Result<()>,
) -> monomorph::Result<Vec<f64>> {
    for _ in 0..warmup {
        f()?;
    }
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f()?;
        out.push(t.elapsed().as_secs_f64());
    }
    Ok(out)
}

/// A deterministic pseudo-random volume (xorshift), values in [0, 1).
pub fn noise(shape: &[usize], seed: u64) -> ArrayD<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// STREAM triad bandwidth in bytes/s over `n` f64 elements (best of `reps`), on rayon threads.
pub fn stream_triad(n: usize, reps: usize) -> f64 {
    let mut a = ArrayD::<f64>::zeros(IxDyn(&[n]));
    let b = ArrayD::<f64>::from_elem(IxDyn(&[n]), 1.0);
    let c = ArrayD::<f64>::from_elem(IxDyn(&[n]), 2.0);
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(2) {
        let t = Instant::now();
        Zip::from(&mut a)
            .and(&b)
            .and(&c)
            .par_for_each(|a, &b, &c| *a = b + 3.0 * c);
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&a);
    }
    (3 * n * 8) as f64 / best
}

/// The first `n` rotations of an even sampling fine enough to hold `n`.
fn first_rotations(d: usize, n: usize) -> monomorph::Result<RotationSet> {
    let mut step = 60.0;
    loop {
        let set = RotationSet::uniform(d, step)?;
        if set.len() >= n || step < 1.0 {
            let k = n.min(set.len());
            return RotationSet::from_matrices(d, &set.as_flat()[..k * d * d]);
        }
        step *= 0.8;
    }
}

struct Cell {
    args: BenchArgs,
    size: Size,
}

fn fft_pair<B: Backend>(
    b: &B,
    shape: &[usize],
) -> monomorph::Result<impl FnMut() -> monomorph::Result<()>> {
    let axes: Vec<usize> = (0..shape.len()).collect();
    let plan = b.fft_plan(shape, &axes)?;
    let host = noise(shape, 1).mapv(<FloatOf<B> as monomorph::Real>::from_f64);
    let x = b.upload(host.view())?;
    let cshape = monomorph::shape::rfft_shape(shape, &axes);
    let mut spec = b.zeros::<ComplexOf<B>>(&cshape)?;
    let mut y = b.zeros::<FloatOf<B>>(shape)?;
    Ok(move || {
        b.rfft(&plan, &x, &mut spec)?;
        b.irfft(&plan, &mut spec, &mut y)?;
        b.synchronize()
    })
}

impl BackendTask for Cell {
    type Output = Value;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Value> {
        let a = &self.args;
        let bad = || monomorph::Error::invalid("--size", "does not fit the algorithm");
        let fsize = std::mem::size_of::<FloatOf<B>>() as f64;
        let mut extra = serde_json::Map::new();
        let times = match a.algorithm {
            BenchAlgorithm::Stream => {
                let Size::Count(n) = self.size else {
                    return Err(bad());
                };
                let bw = stream_triad(n, a.reps);
                extra.insert("bandwidth_bytes_per_s".into(), json!(bw));
                vec![(3 * n * 8) as f64 / bw]
            }
            BenchAlgorithm::Fft => {
                let Size::Shape(shape) = &self.size else {
                    return Err(bad());
                };
                let n: usize = shape.iter().product();
                let mut f = fft_pair(b, shape)?;
                let t = time_reps(a.warmup, a.reps, &mut f)?;
                // 2 transforms × 2.5 N log2 N flops each (real FFT).
                extra.insert("flops".into(), json!(5.0 * n as f64 * (n as f64).log2()));
                t
            }
            BenchAlgorithm::Peaks | BenchAlgorithm::MaxFilter => {
                let Size::Shape(shape) = &self.size else {
                    return Err(bad());
                };
                let n: usize = shape.iter().product();
                let host = noise(shape, 2).mapv(<FloatOf<B> as monomorph::Real>::from_f64);
                let s = b.upload(host.view())?;
                let mut dst = b.zeros::<FloatOf<B>>(shape)?;
                let params = PeakParams::with_min_distance(5);
                let window = vec![11usize; shape.len()];
                let alg = a.algorithm;
                let mut npk = 0usize;
                let t = time_reps(a.warmup, a.reps, || {
                    if alg == BenchAlgorithm::Peaks {
                        npk = find_peaks(b, &s, &params)?.len();
                    } else {
                        b.max_filter(&s, &window, BorderMode::Nearest, &mut dst)?;
                    }
                    b.synchronize()
                })?;
                // Bound: one read and one write of the map.
                extra.insert("bytes".into(), json!(2.0 * n as f64 * fsize));
                if alg == BenchAlgorithm::Peaks {
                    extra.insert("peaks".into(), json!(npk));
                }
                t
            }
            BenchAlgorithm::Cg => {
                let Size::Shape(grid) = &self.size else {
                    return Err(bad());
                };
                let n: usize = grid.iter().product();
                let op = LaplacianOperator::new(grid, Boundary::DirichletZero)?;
                let host = noise(&[1, n], 3).mapv(<FloatOf<B> as monomorph::Real>::from_f64);
                let y = b.upload(host.view())?;
                // rtol 0 and atol 0: every run does exactly cg_iterations iterations.
                let params = SolveParams::default().with_tolerances(0.0, 0.0, a.cg_iterations);
                let mut its = 0usize;
                let t = time_reps(a.warmup, a.reps, || {
                    let r = conjugate_gradient(b, &op, &y, None, &params)?;
                    its = r.iterations.first().copied().unwrap_or(0);
                    b.synchronize()
                })?;
                // Bound: per iteration CG streams ~12 vectors (stencil read/write, 2 dots,
                // 2 axpys, the direction update); plus the initial residual.
                extra.insert("iterations".into(), json!(its));
                extra.insert(
                    "bytes".into(),
                    json!(12.0 * n as f64 * fsize * its.max(1) as f64),
                );
                t
            }
            BenchAlgorithm::Matching => {
                let Size::Pair(tshape, pshape) = &self.size else {
                    return Err(bad());
                };
                let d = tshape.len();
                let rots = first_rotations(d, a.rotations)?;
                let f = <FloatOf<B> as monomorph::Real>::from_f64;
                let target = b.upload(noise(tshape, 4).mapv(f).view())?;
                let template = b.upload(noise(pshape, 5).mapv(f).view())?;
                let c: Vec<f64> = pshape.iter().map(|&n| (n as f64 - 1.0) / 2.0).collect();
                let mask_host = ArrayD::from_shape_fn(IxDyn(pshape), |i| {
                    let r2: f64 = (0..d).map(|k| (i[k] as f64 - c[k]).powi(2)).sum();
                    if r2.sqrt() <= c[0] { f(1.0) } else { f(0.0) }
                });
                let mask = b.upload(mask_host.view())?;
                let mut params = MatchParams::new(Score::FLC, rots);
                params.template_mask = Some(&mask);
                let t = time_reps(a.warmup, a.reps, || {
                    let r = match_template(b, &target, &template, &params)?;
                    std::hint::black_box(&r.scores);
                    b.synchronize()
                })?;
                extra.insert("rotations".into(), json!(a.rotations));
                extra.insert("score".into(), json!("FLC"));
                extra.insert("fft_shape".into(), json!(monomorph::fast_shape(tshape)));
                t
            }
        };
        let (med, min, max) = stats(&times);
        let mut v = json!({
            "algorithm": format!("{:?}", a.algorithm).to_lowercase(),
            "size": a.size,
            "backend": b.name(),
            "device": b.device().name,
            "precision": <B::Precision as monomorph::Precision>::NAME,
            "reps": times.len(),
            "warmup": a.warmup,
            "times_s": times,
            "median_s": med,
            "min_s": min,
            "max_s": max,
        });
        if let Some(o) = v.as_object_mut() {
            o.extend(extra);
        }
        Ok(v)
    }
}

/// Runs `monomorph bench`.
pub fn run(g: &Global, a: BenchArgs) -> CliResult<()> {
    for (flag, v) in [
        ("--reps", a.reps),
        ("--rotations", a.rotations),
        ("--cg-iterations", a.cg_iterations),
    ] {
        if v == 0 {
            return Err(CliError::input(format!("{flag} 0: expected at least 1")));
        }
    }
    let fsize = match g.precision {
        // `auto` reaches here as single (bench reads no input to follow).
        PrecisionArg::Single | PrecisionArg::Auto => 4,
        PrecisionArg::Double => 8,
    };
    let size = parse_size(a.algorithm, &a.size, fsize)?;
    let json_out = a.json;
    let v = monomorph::dispatch(g.dispatch(None), Cell { args: a, size })?;
    if json_out {
        say!("{v}")?;
    } else {
        say!(
            "{} {} on {} ({}): median {:.4} s, min {:.4} s, max {:.4} s over {} reps",
            v["algorithm"].as_str().unwrap_or("?"),
            v["size"].as_str().unwrap_or("?"),
            v["backend"].as_str().unwrap_or("?"),
            v["precision"].as_str().unwrap_or("?"),
            v["median_s"].as_f64().unwrap_or(f64::NAN),
            v["min_s"].as_f64().unwrap_or(f64::NAN),
            v["max_s"].as_f64().unwrap_or(f64::NAN),
            v["reps"]
        )?;
    }
    Ok(())
}
