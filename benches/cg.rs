//! Batched CG speed: 3-D Poisson 128³ with the matrix-free 7-point Laplacian, 200 fixed
//! iterations, f32 and f64, next to the memory-bandwidth bound of one iteration.
//!
//! `cargo bench --bench cg` first prints a summary (STREAM triad bandwidth, bytes one CG
//! iteration must move, the bound in ms/iteration, and the measured ms/iteration with its ratio
//! to the bound), then runs the divan benches. Peer: `benches/peers/cg_scipy.py`.
//!
//! Bytes per iteration (STREAM's convention: every array read or written once counts once, no
//! write-allocate traffic): `q = A·d` with `d·q` reads d, writes q (2 vectors, neighbours come
//! from cache); `x += αd, r −= αq` with `r·r` reads d, q, x, r and writes x, r (6);
//! `d = r + βd` reads r, d and writes d (3). 11 vectors of `n` elements per iteration.
//!
//! The pressure solve (issue 31): PhiFlow's pressure Laplacian on 128³ (dx = 0.78125, closed
//! walls and an open top: Neumann except Dirichlet on the upper side of axis 1, a 32×48×40 box
//! obstacle), CG-adaptive (PhiFlow's default) for 200 fixed iterations in f64. Its bytes per
//! iteration: the same 11 vectors plus the stencil's run table (the cells' flags cut into runs
//! of equal flags once per stencil, about 0.2 MB here: the CPU kernel reads it instead of a
//! flags byte per cell): `q = A·d` with `d·q` reads d and the table, writes q (2 vectors +
//! table); `x += αd, r −= αq` with
//! `r·r`, `r·q` reads d, q, x, r, writes x, r (6); `d = r − γd` with the new `d·r` reads r, d,
//! writes d (3). Peer: `benches/peers/cg_phiml.py` (the same system through phiml 1.16's NumPy
//! backend).
//!
//! What the count is and is not: it is what the library's three passes per iteration must
//! stream (every vector of a pass once; the stencil's neighbour lines and the two halo planes
//! of each 8-plane chunk are assumed to come from cache, and write-allocate reads are not
//! counted, as STREAM does not count them). The stencil passes do move no more than their
//! count: they prefetch the upper plane's line (the one line per step that comes from
//! memory) about 16 KiB ahead and write `q` with non-temporal stores, so `q` is not read
//! before being overwritten (the update passes read or write vectors they also read, with no
//! write-allocate traffic to hide). It is not the least any CG iteration could move:
//! computing `d = r − γd` inside the stencil pass (the stencil reading `r` and the old `d`)
//! would save one vector (10), and also moving `x += αd` there, where the old `d` is read
//! anyway, another (9). The bound below is for the passes the library runs.
//!
//! The ratio: each solve is timed [`ROUNDS`] times, each time between two STREAM triads on
//! arrays the size of the CG vectors; a round's bound uses the faster of its two triads, and
//! the summary reports the median ms/iteration and the median of the rounds' ratios, with every
//! round's ratio. The iteration time is that of the iterations after the first (timed through
//! the solve's observer): the bound counts an iteration's bytes, not the solve's setup (its
//! allocations, the initial residual) nor the page faults of the first touch of its fresh
//! vectors in the first iteration (tens of ms per solve on a virtual machine); the whole
//! solve divided by the iterations is printed below it. (On this project's CPUs the 16 MiB triad is partly served by a 32 MiB
//! last-level cache, so its figure moves with the cache's state; the 512 MiB triad, memory
//! alone, is printed once for reference.)
//!
//! Re-run on a quiet machine: `cargo bench --bench cg -- none` (the summary only; `none`
//! filters out the divan benches), several times, next to `uptime`.

use std::time::Instant;

use monomorph::algo::cg::{
    LaplacianOperator, LinearOperator, Method, PoissonOperator, Side, SolveParams,
    conjugate_gradient_observed,
};
use monomorph::prelude::*;
use monomorph::{Boundary, FloatOf, Precision, Real};
use ndarray::{ArrayD, IxDyn};

const GRID: [usize; 3] = [128, 128, 128];
const ITERS: usize = 200;
/// Vectors moved per CG iteration (see the module docs).
const VECTORS_PER_ITER: usize = 11;

fn main() {
    summary();
    divan::main();
}

/// A smooth right-hand side with some noise (deterministic).
fn rhs<T: Real>(n: usize) -> ArrayD<T> {
    ArrayD::from_shape_fn(IxDyn(&[1, n]), |i| {
        let k = i[1];
        T::from_f64(((k % 977) as f64 / 977.0 - 0.5) + ((k * 7919) % 101) as f64 * 1e-3)
    })
}

/// Seconds of one solve: the whole call (allocation, initial residual, the iterations, the
/// result), and the iterations after the first (from the end of step 1 to the end of the last
/// step, observed through the solve's observer, which downloads nothing): the steady state of
/// an iteration, without the solve's setup and without the first touch of its freshly
/// allocated vectors (page faults, several ms per 16 MiB on a virtual machine), which the
/// first iteration pays.
#[derive(Clone, Copy)]
struct SolveTime {
    whole: f64,
    after_first: f64,
}

/// Runs `solve` (given the observer to pass on) and times it as [`SolveTime`].
fn time_solve(solve: impl FnOnce(&mut dyn FnMut(usize))) -> SolveTime {
    let t = Instant::now();
    let mut first = None;
    let mut last = t;
    solve(&mut |step| {
        let now = Instant::now();
        if step == 1 {
            first = Some(now);
        }
        last = now;
    });
    let whole = t.elapsed().as_secs_f64();
    let after_first = (last - first.expect("one iteration at least")).as_secs_f64();
    SolveTime { whole, after_first }
}

/// 200 CG iterations on 128³ (tolerances 0, so every iteration runs).
fn run_cg<P: Precision>() -> SolveTime
where
    Cpu<P>: Backend<Precision = P>,
{
    let b = Cpu::<P>::new();
    let n: usize = GRID.iter().product();
    let op = LaplacianOperator::new(&GRID, Boundary::DirichletZero).expect("grid");
    let y = b.upload(rhs::<FloatOf<Cpu<P>>>(n).view()).expect("upload");
    let p = SolveParams::new(Method::Cg).with_tolerances(0.0, 0.0, ITERS);
    time_solve(|obs| {
        let res =
            conjugate_gradient_observed(&b, &op, &y, None, &p, |st| obs(st.step)).expect("cg");
        assert_eq!(res.iterations[0], ITERS, "{:?}", res.message);
    })
}

/// The pressure system of the module docs: grid, sides, spacing and obstacle mask.
fn pressure_system() -> ([usize; 3], Vec<[Side; 2]>, f64, Vec<bool>) {
    let sides = vec![
        [Side::Neumann; 2],
        [Side::Neumann, Side::Dirichlet],
        [Side::Neumann; 2],
    ];
    let [nx, ny, nz] = GRID;
    let mask = (0..nx * ny * nz)
        .map(|i| {
            let (x, y, z) = (i / (ny * nz), (i / nz) % ny, i % nz);
            (48..80).contains(&x) && (40..88).contains(&y) && (44..84).contains(&z)
        })
        .collect();
    (GRID, sides, 100.0 / 128.0, mask)
}

/// 200 CG-adaptive iterations of the 128³ pressure solve with obstacles (f64).
fn run_pressure() -> SolveTime {
    let b = Cpu::<Double>::new();
    let (grid, sides, dx, mask) = pressure_system();
    let n: usize = grid.iter().product();
    let op = PoissonOperator::new(&b, &grid, &sides, &[dx], Some(&mask)).expect("operator");
    let y = b.upload(rhs::<f64>(n).view()).expect("upload");
    let p = SolveParams::new(Method::CgAdaptive).with_tolerances(0.0, 0.0, ITERS);
    time_solve(|obs| {
        let res =
            conjugate_gradient_observed(&b, &op, &y, None, &p, |st| obs(st.step)).expect("cg");
        assert_eq!(res.iterations[0], ITERS, "{:?}", res.message);
    })
}

/// Worker threads: `RAYON_NUM_THREADS` when set, else the machine's parallelism (what rayon's
/// pool uses).
fn threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&t: &usize| t > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// STREAM triad `a = b + s·c` over `n` elements of `T`, split over [`threads`] scoped threads;
/// best GB/s of `reps` (3 arrays counted once each, STREAM's convention).
fn triad<T: Real + std::ops::Mul<Output = T> + std::ops::Add<Output = T>>(
    n: usize,
    reps: usize,
) -> f64 {
    let mut a = vec![T::from_f64(0.0); n];
    let b = vec![T::from_f64(1.0); n];
    let c = vec![T::from_f64(2.0); n];
    let s = T::from_f64(3.0);
    let per = n.div_ceil(threads());
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        std::thread::scope(|scope| {
            for (k, ac) in a.chunks_mut(per).enumerate() {
                let o = k * per;
                let (bc, cc) = (&b[o..o + ac.len()], &c[o..o + ac.len()]);
                scope.spawn(move || {
                    for i in 0..ac.len() {
                        ac[i] = bc[i] + s * cc[i];
                    }
                });
            }
        });
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&a);
    (3 * n * std::mem::size_of::<T>()) as f64 / best / 1e9
}

/// Best seconds of `reps` calls of `f`.
fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// GB/s of each fused kernel of one f64 CG iteration alone (best of `reps`), with the vectors it
/// moves: where an iteration loses time against the triad. The plain Laplacian's three kernels,
/// then the pressure solve's (stencil with obstacles; the update with `r·q`; the direction
/// update with its dot).
fn kernels(reps: usize) -> Vec<(&'static str, f64)> {
    let b = Cpu::<Double>::new();
    let n: usize = GRID.iter().product();
    let v = |s: f64| {
        b.upload(rhs::<f64>(n).mapv(|x| x * s).view())
            .expect("upload")
    };
    let (d, mut q, mut x, mut r) = (v(1.0), v(0.5), v(0.25), v(2.0));
    let on = [true];
    let gb = |vectors: f64, secs: f64| vectors * (n * 8) as f64 / secs / 1e9;
    let t_lap = best_of(reps, || {
        b.laplacian_dot(&GRID, Boundary::DirichletZero, &d, &mut q, &on)
            .expect("laplacian");
    });
    let t_upd = best_of(reps, || {
        b.axpy_pair_rows(&[1e-9], &d, &q, &mut x, &mut r)
            .expect("update");
    });
    let mut dd = v(1.0);
    let t_xpay = best_of(reps, || {
        b.xpay_rows_where(&r, &[0.5], &mut dd, &on).expect("xpay");
    });
    let (grid, sides, dx, mask) = pressure_system();
    let op = PoissonOperator::new(&b, &grid, &sides, &[dx], Some(&mask)).expect("operator");
    let table = op.stencil().line_runs().bytes() as f64 / (n * 8) as f64;
    let t_st = best_of(reps, || {
        op.apply_dot(&b, &d, &mut q, &on).expect("stencil");
    });
    let t_upd_rq = best_of(reps, || {
        b.axpy_pair_rows_dots(&[1e-9], &d, &q, &mut x, &mut r)
            .expect("update");
    });
    let t_xpay_dot = best_of(reps, || {
        b.xpay_rows_dot(&r, &[0.5], &mut dd, &on).expect("xpay");
    });
    vec![
        ("q = A·d, d·q (2 vectors)", gb(2.0, t_lap)),
        ("x += αd, r −= αq, r·r (6 vectors)", gb(6.0, t_upd)),
        ("d = r + βd (3 vectors)", gb(3.0, t_xpay)),
        (
            "pressure q = A·d, d·q (2 vectors + run table)",
            gb(2.0 + table, t_st),
        ),
        (
            "pressure x += αd, r −= αq, r·r, r·q (6 vectors)",
            gb(6.0, t_upd_rq),
        ),
        ("pressure d = r − γd, d·r (3 vectors)", gb(3.0, t_xpay_dot)),
    ]
}

/// Rounds of the summary: each solve is timed this many times, each time between two triads.
const ROUNDS: usize = 5;

/// One timed solve and the triad bandwidth next to it: STREAM triad on arrays the size of the
/// CG vectors (best of 10) right before and right after the solve, the better of the two kept
/// (the machine is shared: a triad slowed by a neighbour would flatter the ratio, so the bound
/// is the faster one).
fn timed(solve: fn() -> SolveTime, n: usize) -> (SolveTime, f64) {
    let before = triad::<f64>(n, 10);
    let t = solve();
    let after = triad::<f64>(n, 10);
    (t, before.max(after))
}

/// The median of `v` (the mean of the two middle values for an even count).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Prints one solve's lines over [`ROUNDS`] rounds (each round's bound from the triad measured
/// beside it): the iterations after the first (the steady state the bound describes) as median
/// ms/iteration, the median of the rounds' ratios to the bound and every round's ratio; then
/// the whole solve per iteration (setup and first touch included) the same way.
fn report(name: &str, bytes: f64, solve: fn() -> SolveTime, n: usize) {
    let rounds: Vec<(SolveTime, f64)> = (0..ROUNDS).map(|_| timed(solve, n)).collect();
    let bw: Vec<f64> = rounds.iter().map(|r| r.1).collect();
    println!(
        "{name}: {:.0} MB/iteration; triad {:.1}–{:.1} GB/s",
        bytes / 1e6,
        bw.iter().copied().fold(f64::INFINITY, f64::min),
        bw.iter().copied().fold(0.0, f64::max),
    );
    for (what, per_iter) in [
        (
            "iterations 2..",
            (|t: &SolveTime| t.after_first / (ITERS - 1) as f64) as fn(&SolveTime) -> f64,
        ),
        ("whole solve", |t: &SolveTime| t.whole / ITERS as f64),
    ] {
        let ms: Vec<f64> = rounds.iter().map(|r| per_iter(&r.0) * 1e3).collect();
        let ratios: Vec<f64> = ms
            .iter()
            .zip(&bw)
            .map(|(&m, &b)| m / (bytes / (b * 1e9) * 1e3))
            .collect();
        let mm = median(&ms);
        let list: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "  {what}: {mm:.2} ms/iteration (median of {ROUNDS}; best {:.2}) → {:.2}× the bound \
             (median of the rounds' ratios: {}; {:.1} GB/s achieved)",
            ms.iter().copied().fold(f64::INFINITY, f64::min),
            median(&ratios),
            list.join(" "),
            bytes / (mm * 1e-3) / 1e9,
        );
    }
}

fn summary() {
    let n: usize = GRID.iter().product();
    // The machine's load next to the figures (Linux; the figures mean little on a busy machine).
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    println!("load average (1, 5, 15 min): {}", load());
    println!(
        "CG 3-D Poisson {}³, 7-point Laplacian, {ITERS} iterations, {} threads",
        GRID[0],
        threads()
    );
    println!(
        "assumes: the bound is the bytes one iteration moves (module docs) at the STREAM triad \
         bandwidth on {} MiB arrays (what the CG vectors are; partly cache-resident on CPUs with \
         a large last-level cache), measured before and after each solve (best of 10 each, the \
         faster kept); each solve is timed {ROUNDS} times and the median reported; the ratio is \
         for the iterations after the first (the setup and the first touch of the solve's fresh \
         vectors are not an iteration's bytes), the whole solve per iteration is shown below it",
        (n * 8) >> 20
    );
    println!(
        "STREAM triad on 512 MiB arrays (memory alone): {:.1} GB/s",
        triad::<f64>(1 << 26, 3)
    );
    for (name, size, solve) in [
        ("f32", 4usize, run_cg::<Single> as fn() -> SolveTime),
        ("f64", 8, run_cg::<Double>),
    ] {
        report(name, (VECTORS_PER_ITER * n * size) as f64, solve, n);
    }
    // The pressure solve: 11 f64 vectors and the stencil's run table (its cells' flags, cut into
    // runs of equal flags once per stencil) per iteration.
    let b = Cpu::<Double>::new();
    let (grid, sides, dx, mask) = pressure_system();
    let op = PoissonOperator::new(&b, &grid, &sides, &[dx], Some(&mask)).expect("operator");
    let table = op.stencil().line_runs().bytes();
    report(
        "pressure 128³ (obstacles, Neumann walls, open top, CG-adaptive) f64",
        (VECTORS_PER_ITER * n * 8 + table) as f64,
        run_pressure,
        n,
    );
    for (what, gbs) in kernels(20) {
        println!("  f64 kernel {what}: {gbs:.1} GB/s");
    }
    println!("load average at the end: {}", load());
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn poisson128_cg200_f32(bencher: divan::Bencher) {
    bencher.bench(|| run_cg::<Single>().whole);
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn poisson128_cg200_f64(bencher: divan::Bencher) {
    bencher.bench(|| run_cg::<Double>().whole);
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn pressure128_obstacles_adaptive200_f64(bencher: divan::Bencher) {
    bencher.bench(|| run_pressure().whole);
}
