//! A short benchmark of the CUDA backend, printed as one table (run by the device bundle's
//! `run.sh`): template matching (128³/32³ and 256³/48³, FLC and FLCSphericalMask) per
//! rotation next to the cuFFT time of the transforms a rotation needs, the scoring step of one
//! rotation fused and unfused (128³/32³), batched CG on a 256³ Laplacian per iteration with
//! its effective bandwidth, a 512³ max filter at sizes 3 and 21, and `top_k` (k = 1000) of a
//! 512³ map. A failing case is a row of the table and makes the exit code 1 (so `run.sh` fails);
//! the targets the figures are compared with are in `monomorph_cuda::bench`.
//!
//! `cargo run -p monomorph-cuda --release --example device_bench [-- --quick]`

use std::time::Instant;

use monomorph_core::algo::cg::{LaplacianOperator, SolveParams, conjugate_gradient};
use monomorph_core::algo::matching::{MatchParams, Score, match_template};
use monomorph_core::algo::rotations::RotationSet;
use monomorph_core::testing::Lcg;
use monomorph_core::{
    ArrayMeta, Backend, BorderMode, Boundary, Filter, Memory, Result, Single, Spectral, fast_shape,
};
use monomorph_cuda::Cuda;
use monomorph_cuda::bench::{Row, Table};

fn sphere(n: usize) -> ndarray::ArrayD<f32> {
    let c = (n as f64 - 1.0) / 2.0;
    let r2 = (n as f64 / 2.0 - 1.0).powi(2);
    ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[n, n, n]), |i| {
        let d = (i[0] as f64 - c).powi(2) + (i[1] as f64 - c).powi(2) + (i[2] as f64 - c).powi(2);
        if d <= r2 { 1.0 } else { 0.0 }
    })
}

fn rotations(n: usize) -> RotationSet {
    let angles: Vec<[f64; 3]> = (0..n)
        .map(|i| {
            [
                i as f64 * 37.0 % 360.0,
                i as f64 * 13.0 % 180.0,
                i as f64 * 71.0 % 360.0,
            ]
        })
        .collect();
    RotationSet::from_euler_zyz(&angles).expect("rotations")
}

/// Milliseconds of one rfft + one irfft on `shape` (the transforms of one rotation step).
fn fft_pair_ms(b: &Cuda<Single>, shape: &[usize], reps: usize) -> Result<f64> {
    let plan = b.fft_plan(shape, &[0, 1, 2])?;
    let x = b.full::<f32>(shape, 1.0)?;
    let mut spec = b.zeros::<num_complex::Complex<f32>>(&monomorph_core::shape::rfft_shape(
        shape,
        &[0, 1, 2],
    ))?;
    let mut back = b.zeros::<f32>(shape)?;
    b.rfft(&plan, &x, &mut spec)?;
    b.irfft(&plan, &mut spec, &mut back)?;
    b.synchronize()?;
    let t = Instant::now();
    for _ in 0..reps {
        b.rfft(&plan, &x, &mut spec)?;
        b.irfft(&plan, &mut spec, &mut back)?;
    }
    b.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e3 / reps as f64)
}

fn matching(b: &Cuda<Single>, n: usize, m: usize, score: Score, nrot: usize) -> Result<Row> {
    let mut rng = Lcg::new(1);
    let target = b.upload(rng.array::<f32>(&[n, n, n]).view())?;
    let template = b.upload(rng.array::<f32>(&[m, m, m]).view())?;
    let mask = b.upload(sphere(m).view())?;
    let mut p = MatchParams::new(score, rotations(1));
    p.template_mask = Some(&mask);
    // Warm-up: plans, kernels, pool.
    let _ = match_template(b, &target, &template, &p)?;
    b.synchronize()?;
    let one = Instant::now();
    let _ = match_template(b, &target, &template, &p)?;
    b.synchronize()?;
    let t1 = one.elapsed().as_secs_f64();
    p.rotations = rotations(nrot + 1);
    let t = Instant::now();
    let r = match_template(b, &target, &template, &p)?;
    b.synchronize()?;
    let tn = t.elapsed().as_secs_f64();
    let per_rot = (tn - t1) / nrot as f64 * 1e3;
    // FLCSphericalMask needs 1 forward + 1 inverse per rotation; FLC 3 forward + 3 inverse.
    let pairs = if score == Score::FLC { 3.0 } else { 1.0 };
    let fft = fft_pair_ms(b, &fast_shape(&[n, n, n]), 10)? * pairs;
    let _ = r.scores.len();
    Ok(Row::ok(
        format!("match {n}³/{m}³ {score}"),
        format!("{per_rot:.3} ms/rotation"),
        format!(
            "cuFFT floor {fft:.3} ms ({pairs} r2c+c2r), ratio {:.2}, setup {:.0} ms",
            per_rot / fft,
            (t1 * 1e3 - per_rot).max(0.0)
        ),
    ))
}

/// Milliseconds per call of `f` (after one warm-up call), over `reps` calls queued back to
/// back and one synchronisation.
fn per_call_ms(b: &Cuda<Single>, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    b.synchronize()?;
    let t = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    b.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e3 / reps as f64)
}

/// The scoring step of one FLCSphericalMask rotation on an `n`³ grid with an `m`³ template
/// box, fused (`rfft_pruned_mul_conj` → `irfft_score_max_update`) and unfused (full rfft →
/// `complex_mul_conj` → irfft → `score_max_update`, the trait defaults' sequence), beside
/// the pruned and full forward transforms alone and one R2C + one C2R of cuFFT.
fn match_step(b: &Cuda<Single>, n: usize, m: usize, reps: usize) -> Result<Row> {
    use monomorph_core::{CorrWindow, Correlate, Elementwise, FftPlan, Normalization, RunningMax};
    type C = num_complex::Complex<f32>;
    let shape = [n, n, n];
    let (nz, out) = ([m, m, m], [n - m + 1; 3]);
    let plan = b.fft_plan(&shape, &[0, 1, 2])?;
    let cs = plan.complex_shape().to_vec();
    let mut rng = Lcg::new(4);
    let mut tb = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&shape));
    let small = rng.array::<f32>(&nz);
    tb.slice_each_axis_mut(|ax| ndarray::Slice::from(0..m.min(ax.len)))
        .assign(&small);
    let t = b.upload(tb.view())?;
    let f = b.upload(rng.array::<f32>(&shape).view())?;
    let mut sf = b.zeros::<C>(&cs)?;
    b.rfft(&plan, &f, &mut sf)?;
    let den = b.full::<f32>(&out, 1.0)?;
    let mut x = b.zeros::<C>(&cs)?;
    let mut y = b.corr_spectrum(&plan)?;
    let mut work = vec![b.zeros::<f32>(&shape)?];
    let mut best = b.full::<f32>(&out, f32::NEG_INFINITY)?;
    let mut bi = b.zeros::<i32>(&out)?;
    let mut ss = b.zeros::<f64>(&[1])?;
    let shift = [-((m / 2) as isize); 3];
    let window = CorrWindow { shift: &shift };
    let scale = 1.0 / (n * n * n) as f32;
    let fused = per_call_ms(b, reps, || {
        b.rfft_pruned_mul_conj(&plan, &t, &nz, &mut x, &[&sf], &mut [&mut y])?;
        let rm = RunningMax {
            best: &mut best,
            best_index: &mut bi,
            index: 1,
            ssum: &mut ss,
            moments: None,
        };
        let norm = Normalization::Denominator {
            scale,
            inv_den: &den,
        };
        b.irfft_score_max_update(&plan, &mut y, norm, &mut work, window, rm)
    })?;
    let unfused = per_call_ms(b, reps, || {
        b.rfft(&plan, &t, &mut x)?;
        b.complex_mul_conj(&sf, &x, y.scratch())?;
        b.irfft(&plan, y.scratch(), &mut work[0])?;
        let rm = RunningMax {
            best: &mut best,
            best_index: &mut bi,
            index: 2,
            ssum: &mut ss,
            moments: None,
        };
        let norm = Normalization::Denominator {
            scale,
            inv_den: &den,
        };
        b.score_max_update(&work[0], norm, window, rm)
    })?;
    let pruned = per_call_ms(b, reps, || b.rfft_pruned(&plan, &t, &nz, &mut x))?;
    let full = per_call_ms(b, reps, || b.rfft(&plan, &t, &mut x))?;
    let pair = fft_pair_ms(b, &shape, reps)?;
    Ok(Row::ok(
        format!("match step {n}³/{m}³ FLCSphericalMask (f32)"),
        format!("{fused:.3} ms fused"),
        format!(
            "unfused {unfused:.3} ms; r2c pruned {pruned:.3} / full {full:.3} ms; cuFFT r2c+c2r \
             {pair:.3} ms; fused/cuFFT {:.2} (target ≤ 1.3 with the rotation, per-rotation row)",
            fused / pair
        ),
    ))
}

fn cg(b: &Cuda<Single>, n: usize, iters: usize) -> Result<Row> {
    let grid = [n, n, n];
    let len = n * n * n;
    let mut rng = Lcg::new(2);
    let y = b.upload(rng.array::<f32>(&[1, len]).view())?;
    let op = LaplacianOperator::new(&grid, Boundary::DirichletZero)?;
    // Tolerance 0: every run does exactly `k` iterations. The setup of a solve (the initial
    // and final true residuals, allocations) is the same for 2 and for `iters` iterations, so
    // their difference is the loop alone.
    let timed = |k: usize| -> Result<(f64, usize)> {
        let params = SolveParams::default().with_tolerances(0.0, 0.0, k);
        b.synchronize()?;
        let t = Instant::now();
        let r = conjugate_gradient(b, &op, &y, None, &params)?;
        b.synchronize()?;
        Ok((t.elapsed().as_secs_f64() * 1e3, r.iterations[0]))
    };
    timed(2)?; // warm-up: kernels, pool
    let (t2, i2) = timed(2)?;
    let (tn, it) = timed(iters)?;
    let ms = (tn - t2) / (it - i2).max(1) as f64;
    // Minimum traffic per CG iteration: A·d (read d, write q), x += αd, r −= αq with r·r
    // (read x,d,r,q, write x,r), d = r + βd (read r,d, write d): 11 vectors of f32. The dots
    // ride in the same passes; the per-row scalars cross to the host once (32 bytes).
    let gbs = 11.0 * len as f64 * 4.0 / (ms * 1e-3) / 1e9;
    Ok(Row::ok(
        format!("CG Laplacian {n}³ (f32)"),
        format!("{ms:.3} ms/iteration"),
        format!(
            "{it} iterations (loop only: {tn:.1} ms minus a {i2}-iteration solve), {gbs:.0} GB/s \
             effective (11 vectors/iteration; target ≥ 3360 = 70 % of 4.8 TB/s), setup {:.1} ms",
            (t2 - i2 as f64 * ms).max(0.0)
        ),
    ))
}

fn max_filter(b: &Cuda<Single>, n: usize, size: usize) -> Result<Row> {
    let mut rng = Lcg::new(3);
    let src = b.upload(rng.array::<f32>(&[n, n, n]).view())?;
    let mut dst = b.zeros::<f32>(&[n, n, n])?;
    b.max_filter(&src, &[size; 3], BorderMode::Reflect, &mut dst)?;
    b.synchronize()?;
    let t = Instant::now();
    let reps = 3;
    for _ in 0..reps {
        b.max_filter(&src, &[size; 3], BorderMode::Reflect, &mut dst)?;
    }
    b.synchronize()?;
    let ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
    Ok(Row::ok(
        format!("max filter {n}³ size {size} (f32)"),
        format!("{ms:.2} ms"),
        format!(
            "{:.0} GB/s effective (3 passes, read+write; target: size 21 ≤ 1.2 × size 3)",
            6.0 * (n * n * n) as f64 * 4.0 / (ms * 1e-3) / 1e9
        ),
    ))
}

fn top_k(b: &Cuda<Single>, n: usize, k: usize) -> Result<Row> {
    use monomorph_core::Reduce;
    let mut rng = Lcg::new(4);
    let src = b.upload(rng.array::<f32>(&[n, n, n]).view())?;
    let _ = b.top_k(&src, k)?;
    let t = Instant::now();
    let reps = 3;
    for _ in 0..reps {
        let _ = b.top_k(&src, k)?;
    }
    let ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
    Ok(Row::ok(
        format!("top_k {n}³ k {k} (f32)"),
        format!("{ms:.2} ms"),
        format!(
            "{:.0} GB/s per read of the map (radix passes + compaction read it 3–5 times)",
            (n * n * n) as f64 * 4.0 / (ms * 1e-3) / 1e9
        ),
    ))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let b = match Cuda::<Single>::new(0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("device_bench: {e}");
            std::process::exit(2);
        }
    };
    println!("# {}", b.device().description);
    println!("# device: {}", b.device().name);
    let nrot = if quick { 4 } else { 16 };
    type Case<'a> = (String, Box<dyn Fn() -> Result<Row> + 'a>);
    let cases: Vec<Case> = vec![
        (
            "match 128³/32³ FLCSphericalMask".into(),
            Box::new(|| matching(&b, 128, 32, Score::FLCSphericalMask, nrot)),
        ),
        (
            "match step 128³/32³ FLCSphericalMask (f32)".into(),
            Box::new(|| match_step(&b, 128, 32, if quick { 10 } else { 50 })),
        ),
        (
            "match 128³/32³ FLC".into(),
            Box::new(|| matching(&b, 128, 32, Score::FLC, nrot)),
        ),
        (
            "match 256³/48³ FLCSphericalMask".into(),
            Box::new(|| matching(&b, 256, 48, Score::FLCSphericalMask, nrot / 2)),
        ),
        (
            "match 256³/48³ FLC".into(),
            Box::new(|| matching(&b, 256, 48, Score::FLC, nrot / 2)),
        ),
        (
            "CG Laplacian 256³ (f32)".into(),
            Box::new(|| cg(&b, 256, if quick { 20 } else { 100 })),
        ),
        (
            "max filter 512³ size 3 (f32)".into(),
            Box::new(|| max_filter(&b, 512, 3)),
        ),
        (
            "max filter 512³ size 21 (f32)".into(),
            Box::new(|| max_filter(&b, 512, 21)),
        ),
        (
            "top_k 512³ k 1000 (f32)".into(),
            Box::new(|| top_k(&b, 512, 1000)),
        ),
    ];
    let mut table = Table::default();
    for (name, case) in cases {
        eprintln!("device_bench: {name}");
        table.push(&name, case());
    }
    print!("{}", table.render());
    if table.failures() > 0 {
        eprintln!("device_bench: {} case(s) failed", table.failures());
    }
    std::process::exit(table.exit_code());
}
