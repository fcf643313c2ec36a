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
//! iteration: the same 11 vectors plus the one-byte cell flags the stencil reads: `q = A·d`
//! with `d·q` reads d and the flags, writes q (2 vectors + flags); `x += αd, r −= αq` with
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
//! Re-run on a quiet machine: `cargo bench --bench cg -- none` (the summary only; `none`
//! filters out the divan benches), several times, next to `uptime`.

use std::time::Instant;

use monomorph::algo::cg::{
    LaplacianOperator, LinearOperator, Method, PoissonOperator, Side, SolveParams,
    conjugate_gradient,
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

/// 200 CG iterations on 128³ (tolerances 0, so every iteration runs); returns seconds.
fn run_cg<P: Precision>() -> f64
where
    Cpu<P>: Backend<Precision = P>,
{
    let b = Cpu::<P>::new();
    let n: usize = GRID.iter().product();
    let op = LaplacianOperator::new(&GRID, Boundary::DirichletZero).expect("grid");
    let y = b.upload(rhs::<FloatOf<Cpu<P>>>(n).view()).expect("upload");
    let p = SolveParams::new(Method::Cg).with_tolerances(0.0, 0.0, ITERS);
    let t = Instant::now();
    let res = conjugate_gradient(&b, &op, &y, None, &p).expect("cg");
    let s = t.elapsed().as_secs_f64();
    assert_eq!(res.iterations[0], ITERS, "{:?}", res.message);
    s
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

/// 200 CG-adaptive iterations of the 128³ pressure solve with obstacles (f64); returns seconds.
fn run_pressure() -> f64 {
    let b = Cpu::<Double>::new();
    let (grid, sides, dx, mask) = pressure_system();
    let n: usize = grid.iter().product();
    let op = PoissonOperator::new(&b, &grid, &sides, &[dx], Some(&mask)).expect("operator");
    let y = b.upload(rhs::<f64>(n).view()).expect("upload");
    let p = SolveParams::new(Method::CgAdaptive).with_tolerances(0.0, 0.0, ITERS);
    let t = Instant::now();
    let res = conjugate_gradient(&b, &op, &y, None, &p).expect("cg");
    let s = t.elapsed().as_secs_f64();
    assert_eq!(res.iterations[0], ITERS, "{:?}", res.message);
    s
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
        ("pressure q = A·d, d·q (2 vectors + flags)", gb(2.125, t_st)),
        (
            "pressure x += αd, r −= αq, r·r, r·q (6 vectors)",
            gb(6.0, t_upd_rq),
        ),
        ("pressure d = r − γd, d·r (3 vectors)", gb(3.0, t_xpay_dot)),
    ]
}

fn summary() {
    let n: usize = GRID.iter().product();
    // The machine's load next to the figures (Linux; the figures mean little on a busy machine).
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "load average (1, 5, 15 min): {}",
            l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        );
    }
    println!(
        "CG 3-D Poisson {}³, 7-point Laplacian, {ITERS} iterations, {} threads",
        GRID[0],
        threads()
    );
    // Rounds interleave the triad and the solves so that both see the same machine load; the
    // best of each is reported (the machine is shared and noisy).
    let (mut bw_vec, mut bw_big, mut t32, mut t64) = (0.0f64, 0.0f64, f64::INFINITY, f64::INFINITY);
    let mut tp = f64::INFINITY;
    for _ in 0..3 {
        // Triad on arrays the size of the CG vectors (what CG streams) and on arrays far larger
        // than the caches (DRAM).
        bw_vec = bw_vec.max(triad::<f64>(n, 10));
        bw_big = bw_big.max(triad::<f64>(1 << 26, 3));
        t32 = t32.min(run_cg::<Single>());
        t64 = t64.min(run_cg::<Double>());
        tp = tp.min(run_pressure());
    }
    println!(
        "STREAM triad (best of 3 rounds): {bw_vec:.1} GB/s on {} MiB arrays, {bw_big:.1} GB/s on 512 MiB arrays",
        (n * 8) >> 20
    );
    for (name, size, secs) in [("f32", 4usize, t32), ("f64", 8usize, t64)] {
        let bytes = (VECTORS_PER_ITER * n * size) as f64;
        let ms = secs * 1e3 / ITERS as f64;
        let bound = bytes / (bw_vec * 1e9) * 1e3;
        println!(
            "{name}: {ms:.2} ms/iteration; {:.0} MB/iteration → bound {bound:.2} ms at {bw_vec:.1} GB/s \
             ({:.2}× the bound; {:.1} GB/s achieved)",
            bytes / 1e6,
            ms / bound,
            bytes / (ms * 1e-3) / 1e9
        );
    }
    {
        // The pressure solve: 11 f64 vectors and the 1-byte cell flags per iteration.
        let bytes = (VECTORS_PER_ITER * n * 8 + n) as f64;
        let ms = tp * 1e3 / ITERS as f64;
        let bound = bytes / (bw_vec * 1e9) * 1e3;
        println!(
            "pressure 128³ (obstacles, Neumann walls, open top, CG-adaptive) f64: {ms:.2} \
             ms/iteration; {:.0} MB/iteration → bound {bound:.2} ms ({:.2}× the bound; {:.1} GB/s)",
            bytes / 1e6,
            ms / bound,
            bytes / (ms * 1e-3) / 1e9
        );
    }
    for (what, gbs) in kernels(20) {
        println!("  f64 kernel {what}: {gbs:.1} GB/s");
    }
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn poisson128_cg200_f32(bencher: divan::Bencher) {
    bencher.bench(run_cg::<Single>);
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn poisson128_cg200_f64(bencher: divan::Bencher) {
    bencher.bench(run_cg::<Double>);
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn pressure128_obstacles_adaptive200_f64(bencher: divan::Bencher) {
    bencher.bench(run_pressure);
}
