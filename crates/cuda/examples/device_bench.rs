//! A short benchmark of the CUDA backend, printed as a table row by row as its cases finish
//! (run by the device bundle's `run.sh`): the time of `Cuda::new` (the NVRTC CUBIN and the
//! module load every process pays); template matching (128³/32³ and 256³/48³, FLC and
//! FLCSphericalMask) per rotation next to the cuFFT time of the transforms a rotation needs;
//! pytom-match-pick's timing problem (a 462×478×250 tomogram, a 34³ template and mask, FLC and
//! FLCSphericalMask; plain, with score statistics, with a wedge and a CTF) as rotations per
//! second and the projected wall time of its 12.85° search (7112 rotations; pytom-match-pick:
//! 193 s on a GTX 1080 Ti), and peak calling on its score map; the scoring step of one
//! rotation fused and unfused (128³/32³); batched CG on a 256³ Laplacian per iteration with
//! its effective bandwidth against the device's peak; a 512³ max filter at sizes 3 and 21;
//! and `top_k` (k = 1000) of a 512³ map. Each row names its bound and the ratio to it. A case
//! that fails or panics is a FAILED row and makes the exit code 1 (so `run.sh` fails); the
//! other cases still run. The targets the figures are compared with are in
//! `monomorph_cuda::bench`.
//!
//! `cargo run -p monomorph-cuda --release --example device_bench [-- --quick | --probe | --list]`
//! (`--probe`: `Cuda::new` and the device's facts only, exit 2 without a device; `--list`: the
//! rows a run prints, without a device).

use std::time::Instant;

use monomorph_core::algo::cg::{LaplacianOperator, SolveParams, conjugate_gradient};
use monomorph_core::algo::matching::{MatchParams, Score, match_template};
use monomorph_core::algo::rotations::RotationSet;
use monomorph_core::testing::Lcg;
use monomorph_core::{
    Backend, BorderMode, Boundary, Filter, Memory, Result, Single, Spectral, fast_shape,
};
use monomorph_cuda::Cuda;
use monomorph_cuda::bench::{
    PYTOM_1080TI_SECONDS, PYTOM_PROBLEM, PYTOM_ROTATIONS_12_85, Projection, Row, Table,
    peak_bandwidth_gbs,
};

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
    let (per_rot, setup) = per_rotation_ms(b, &target, &template, &mut p, nrot)?;
    // FLCSphericalMask needs 1 forward + 1 inverse per rotation; FLC 3 forward + 3 inverse.
    let pairs = if score == Score::FLC { 3.0 } else { 1.0 };
    let fft = fft_pair_ms(b, &fast_shape(&[n, n, n]), 10)? * pairs;
    Ok(Row::ok(
        format!("match {n}³/{m}³ {score}"),
        format!("{per_rot:.3} ms/rotation"),
        format!(
            "bound: cuFFT {fft:.3} ms ({pairs} r2c+c2r), ratio {:.2}; setup {setup:.0} ms",
            per_rot / fft,
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
    let peak = peak_gbs(b);
    Ok(Row::ok(
        format!("CG Laplacian {n}³ (f32)"),
        format!("{ms:.3} ms/iteration"),
        format!(
            "{gbs:.0} GB/s effective (11 vectors/iteration); bound: peak DRAM {peak:.0} GB/s, \
             ratio {:.2} (target ≥ 0.70); {it} iterations (loop only: {tn:.1} ms minus a \
             {i2}-iteration solve), setup {:.1} ms",
            gbs / peak,
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
    let gbs = 6.0 * (n * n * n) as f64 * 4.0 / (ms * 1e-3) / 1e9;
    Ok(Row::ok(
        format!("max filter {n}³ size {size} (f32)"),
        format!("{ms:.2} ms"),
        format!(
            "{gbs:.0} GB/s effective (3 passes, read+write); bound: peak DRAM {:.0} GB/s, ratio \
             {:.2} (target: size 21 ≤ 1.2 × size 3)",
            peak_gbs(b),
            gbs / peak_gbs(b)
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
    let bound = 3.0 * (n * n * n) as f64 * 4.0 / (peak_gbs(b) * 1e9) * 1e3;
    Ok(Row::ok(
        format!("top_k {n}³ k {k} (f32)"),
        format!("{ms:.2} ms"),
        format!(
            "{:.0} GB/s per read of the map (radix passes + compaction read it 3–5 times); \
             bound: 3 reads at peak DRAM {:.0} GB/s = {bound:.3} ms, ratio {:.2}",
            (n * n * n) as f64 * 4.0 / (ms * 1e-3) / 1e9,
            peak_gbs(b),
            ms / bound
        ),
    ))
}

/// The device's peak DRAM bandwidth in GB/s (from its memory clock and bus width), or the
/// H200's 4800 when the driver does not say.
fn peak_gbs(b: &Cuda<Single>) -> f64 {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let ctx = b.stream().context();
    let clock = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    let bus = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    match (clock, bus) {
        (Ok(c), Ok(w)) => peak_bandwidth_gbs(c as i64, w as i64).unwrap_or(4800.0),
        _ => 4800.0,
    }
}

/// What pytom-match-pick's problem adds to a plain run.
#[derive(Clone, Copy, PartialEq)]
enum Extra {
    Plain,
    ScoreStats,
    WedgeCtf,
}

/// pytom-match-pick's timing problem (a 462×478×250 tomogram, a 34³ template and spherical
/// mask) per rotation with `score`, and the projected wall time of its 12.85° search.
fn pytom_problem(b: &Cuda<Single>, score: Score, extra: Extra, nrot: usize) -> Result<Row> {
    use monomorph_core::algo::filters::{CtfSpec, FilterSpec, WedgeSpec};
    let (tshape, m) = PYTOM_PROBLEM;
    let mut rng = Lcg::new(5);
    let target = b.upload(rng.array::<f32>(&tshape).view())?;
    let template = b.upload(rng.array::<f32>(&[m, m, m]).view())?;
    let mask = b.upload(sphere(m).view())?;
    let filters = if extra == Extra::WedgeCtf {
        let mut spec = FilterSpec::new(10.0);
        spec.wedge = Some(WedgeSpec::Continuous { a: 60.0, b: 60.0 });
        spec.ctf = Some(CtfSpec::Single {
            defocus: 30000.0,
            phase_shift: 0.0,
        });
        Some(spec.build(b, &target, &[m, m, m])?)
    } else {
        None
    };
    let mut p = MatchParams::new(score, rotations(1));
    p.template_mask = Some(&mask);
    p.score_stats = extra == Extra::ScoreStats;
    p.filters = filters
        .as_ref()
        .map(|f| f as &dyn monomorph_core::algo::filters::SpectralFilter);
    let (per_rot, setup) = per_rotation_ms(b, &target, &template, &mut p, nrot)?;
    let grid = fast_shape(&tshape);
    let pairs = if score == Score::FLC { 3.0 } else { 1.0 };
    let fft = fft_pair_ms(b, &grid, 5)? * pairs;
    let proj = Projection::new(per_rot, setup, PYTOM_ROTATIONS_12_85);
    let what = match extra {
        Extra::Plain => "",
        Extra::ScoreStats => " --score-stats",
        Extra::WedgeCtf => " wedge+CTF",
    };
    Ok(Row::ok(
        format!(
            "pytom {}×{}×{}/{m}³ {score}{what}",
            tshape[0], tshape[1], tshape[2]
        ),
        format!("{per_rot:.2} ms/rotation"),
        format!(
            "{:.0} rotations/s; 12.85° search ({PYTOM_ROTATIONS_12_85} rotations) projected \
             {:.1} s (pytom-match-pick {PYTOM_1080TI_SECONDS:.0} s on a GTX 1080 Ti: ×{:.1}); \
             bound: cuFFT {fft:.2} ms ({pairs} r2c+c2r on {:?}), ratio {:.2}; setup {setup:.0} ms",
            proj.rotations_per_s,
            proj.wall_s,
            PYTOM_1080TI_SECONDS / proj.wall_s,
            grid,
            per_rot / fft
        ),
    ))
}

/// Per-rotation time of `p` (the difference of a run of `nrot + 1` rotations and one of 1,
/// after a warm-up) and the one-off setup in ms.
fn per_rotation_ms(
    b: &Cuda<Single>,
    target: &monomorph_core::Arr<Cuda<Single>, f32>,
    template: &monomorph_core::Arr<Cuda<Single>, f32>,
    p: &mut MatchParams<'_, Cuda<Single>>,
    nrot: usize,
) -> Result<(f64, f64)> {
    p.rotations = rotations(1);
    let _ = match_template(b, target, template, p)?;
    b.synchronize()?;
    let one = Instant::now();
    let _ = match_template(b, target, template, p)?;
    b.synchronize()?;
    let t1 = one.elapsed().as_secs_f64() * 1e3;
    p.rotations = rotations(nrot + 1);
    let t = Instant::now();
    let _ = match_template(b, target, template, p)?;
    b.synchronize()?;
    let tn = t.elapsed().as_secs_f64() * 1e3;
    let per_rot = (tn - t1) / nrot as f64;
    Ok((per_rot, (t1 - per_rot).max(0.0)))
}

/// Peak calling (max filter, candidates, minimum distance 17: half the template) on the
/// FLCSphericalMask map of pytom-match-pick's problem, against the max filter's traffic at the
/// device's peak bandwidth.
fn pytom_peaks(b: &Cuda<Single>, reps: usize) -> Result<Row> {
    use monomorph_core::algo::peaks::{PeakParams, find_peaks};
    let (tshape, m) = PYTOM_PROBLEM;
    let mut rng = Lcg::new(6);
    let target = b.upload(rng.array::<f32>(&tshape).view())?;
    let template = b.upload(rng.array::<f32>(&[m, m, m]).view())?;
    let mask = b.upload(sphere(m).view())?;
    let mut p = MatchParams::new(Score::FLCSphericalMask, rotations(2));
    p.template_mask = Some(&mask);
    let r = match_template(b, &target, &template, &p)?;
    let params = PeakParams::with_min_distance(m / 2);
    let mut found = find_peaks(b, &r.scores, &params)?.len();
    b.synchronize()?;
    let t = Instant::now();
    for _ in 0..reps {
        found = find_peaks(b, &r.scores, &params)?.len();
    }
    b.synchronize()?;
    let ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
    let voxels: usize = tshape.iter().product();
    // The separable max filter reads and writes the map once per axis: 6 map-sized transfers.
    let bound = 6.0 * voxels as f64 * 4.0 / (peak_gbs(b) * 1e9) * 1e3;
    Ok(Row::ok(
        format!(
            "pytom peaks {}×{}×{} min distance {}",
            tshape[0],
            tshape[1],
            tshape[2],
            m / 2
        ),
        format!("{ms:.2} ms"),
        format!(
            "{found} peaks; bound: the max filter's 6 map transfers at {:.0} GB/s = {bound:.2} \
             ms, ratio {:.2}",
            peak_gbs(b),
            ms / bound
        ),
    ))
}

/// `--probe`: `Cuda::new` (driver, NVRTC, cuFFT, the CUBIN compile and load), timed, and the
/// device's facts; exit 2 with the reason without a device.
fn probe(made: Result<Cuda<Single>>, new_ms: f64) -> ! {
    let libs = monomorph_cuda::libraries();
    println!(
        "# libraries: driver {}, NVRTC {}, cuFFT {}; driver CUDA {}, NVRTC {}",
        libs.driver,
        libs.nvrtc,
        libs.cufft,
        monomorph_cuda::driver_version(),
        monomorph_cuda::nvrtc_version()
    );
    match made {
        Ok(b) => {
            let i = b.info();
            println!("# {}", b.device().description);
            println!(
                "Cuda::new: {new_ms:.0} ms; {} sm_{}{}, {} SMs, {:.1} GiB ({:.1} GiB free), \
                 peak DRAM {:.0} GB/s, kernels {}",
                i.name,
                i.compute_capability.0,
                i.compute_capability.1,
                i.multiprocessors,
                i.total_memory as f64 / (1u64 << 30) as f64,
                i.free_memory as f64 / (1u64 << 30) as f64,
                peak_gbs(&b),
                i.kernel_image
            );
            std::process::exit(0);
        }
        Err(e) => {
            println!("device_bench --probe: Cuda::new failed after {new_ms:.0} ms: {e}");
            std::process::exit(2);
        }
    }
}

/// A named case of the benchmark, run on the backend it is given.
type Case = (String, Box<dyn FnOnce(&Cuda<Single>) -> Result<Row>>);

/// The benchmark's cases after `Cuda::new`, in the order run (named without a device, for
/// `--list`).
fn cases(quick: bool) -> Vec<Case> {
    let nrot = if quick { 4 } else { 16 };
    let pytom_rot = if quick { 2 } else { 8 };
    let mut cases: Vec<Case> = vec![
        (
            "match 128³/32³ FLCSphericalMask".into(),
            Box::new(move |b: &Cuda<Single>| matching(b, 128, 32, Score::FLCSphericalMask, nrot)),
        ),
        (
            "match step 128³/32³ FLCSphericalMask (f32)".into(),
            Box::new(move |b: &Cuda<Single>| match_step(b, 128, 32, if quick { 10 } else { 50 })),
        ),
        (
            "match 128³/32³ FLC".into(),
            Box::new(move |b: &Cuda<Single>| matching(b, 128, 32, Score::FLC, nrot)),
        ),
        (
            "match 256³/48³ FLCSphericalMask".into(),
            Box::new(move |b: &Cuda<Single>| {
                matching(b, 256, 48, Score::FLCSphericalMask, nrot / 2)
            }),
        ),
        (
            "match 256³/48³ FLC".into(),
            Box::new(move |b: &Cuda<Single>| matching(b, 256, 48, Score::FLC, nrot / 2)),
        ),
    ];
    for extra in [Extra::Plain, Extra::ScoreStats, Extra::WedgeCtf] {
        for score in [Score::FLC, Score::FLCSphericalMask] {
            let what = match extra {
                Extra::Plain => "",
                Extra::ScoreStats => " --score-stats",
                Extra::WedgeCtf => " wedge+CTF",
            };
            cases.push((
                format!("pytom 462×478×250/34³ {score}{what}"),
                Box::new(move |b: &Cuda<Single>| pytom_problem(b, score, extra, pytom_rot)),
            ));
        }
    }
    cases.extend::<Vec<Case>>(vec![
        (
            "pytom peaks 462×478×250".into(),
            Box::new(move |b: &Cuda<Single>| pytom_peaks(b, if quick { 1 } else { 3 })),
        ),
        (
            "CG Laplacian 256³ (f32)".into(),
            Box::new(move |b: &Cuda<Single>| cg(b, 256, if quick { 20 } else { 100 })),
        ),
        (
            "max filter 512³ size 3 (f32)".into(),
            Box::new(move |b: &Cuda<Single>| max_filter(b, 512, 3)),
        ),
        (
            "max filter 512³ size 21 (f32)".into(),
            Box::new(move |b: &Cuda<Single>| max_filter(b, 512, 21)),
        ),
        (
            "top_k 512³ k 1000 (f32)".into(),
            Box::new(move |b: &Cuda<Single>| top_k(b, 512, 1000)),
        ),
    ]);
    cases
}

fn main() {
    use std::io::Write;
    let quick = std::env::args().any(|a| a == "--quick");
    if std::env::args().any(|a| a == "--list") {
        // The rows a run prints, without a device (run.sh --dry-run shows them).
        println!("{}", Table::header());
        println!("| Cuda::new (NVRTC CUBIN + module load)");
        for (name, _) in cases(quick) {
            println!("| {name}");
        }
        std::process::exit(0);
    }
    let t0 = Instant::now();
    let made = Cuda::<Single>::new(0);
    let new_ms = t0.elapsed().as_secs_f64() * 1e3;
    if std::env::args().any(|a| a == "--probe") {
        probe(made, new_ms);
    }
    let b = match made {
        Ok(b) => b,
        Err(e) => {
            eprintln!("device_bench: {e}");
            std::process::exit(2);
        }
    };
    println!("# {}", b.device().description);
    println!("# device: {}", b.device().name);
    println!("{}", Table::header());
    let mut table = Table::default();
    let image = b.info().kernel_image;
    let row = table.run("Cuda::new", || {
        Ok::<_, String>(Row::ok(
            "Cuda::new (NVRTC CUBIN + module load)",
            format!("{new_ms:.0} ms"),
            format!("paid once by every process; kernels: {image}"),
        ))
    });
    println!("{}", row.line());
    for (name, case) in cases(quick) {
        eprintln!("device_bench: {name}");
        let row = table.run(&name, || case(&b));
        println!("{}", row.line());
        let _ = std::io::stdout().flush();
    }
    if table.failures() > 0 {
        eprintln!("device_bench: {} case(s) failed", table.failures());
    }
    std::process::exit(table.exit_code());
}
