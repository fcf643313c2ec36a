//! The CG loop's host round trips, counted: a backend that forwards every op to `Cpu<Double>`
//! and counts the calls that would wait for a device (downloads and every op that returns host
//! values). CG, with or without Jacobi, and CG-adaptive must cross once per iteration (one
//! download of their per-row scalars) and give the CPU's results bit for bit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use monomorph::algo::cg::{
    DenseOperator, LaplacianOperator, LinearOperator, Method, Preconditioner, SolveParams,
    conjugate_gradient, conjugate_gradient_observed,
};
use monomorph::num_complex::Complex;
use monomorph::prelude::*;
use monomorph::testing::Lcg;
use monomorph::{
    Boundary, CsrMatrix, Element, Elementwise, Linalg, Memory, Precond, Ratio, Reduce, UnaryOp,
};
use ndarray::{ArrayD, ArrayViewD, IxDyn};

/// `Cpu<Double>` with counters: `syncs` counts the calls that return host data (each one a
/// device→host round trip on a device backend), `uploads` the host→device copies.
#[derive(Clone, Default)]
struct Counting {
    cpu: Cpu<Double>,
    syncs: Arc<AtomicUsize>,
    uploads: Arc<AtomicUsize>,
}

impl Counting {
    fn sync(&self) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
    }
    fn syncs(&self) -> usize {
        self.syncs.load(Ordering::Relaxed)
    }
}

type A<T> = ArrayD<T>;
type R<T> = monomorph::Result<T>;

impl BackendTypes for Counting {
    type Precision = Double;
    type Array<T: Element> = ArrayD<T>;
    type Fft = <Cpu<Double> as BackendTypes>::Fft;
}

impl Memory for Counting {
    fn zeros<T: Element>(&self, shape: &[usize]) -> R<A<T>> {
        self.cpu.zeros(shape)
    }
    fn upload<T: Element>(&self, host: ArrayViewD<'_, T>) -> R<A<T>> {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.cpu.upload(host)
    }
    fn download<T: Element>(&self, a: &A<T>) -> R<A<T>> {
        self.sync();
        self.cpu.download(a)
    }
    fn copy<T: Element>(&self, src: &A<T>, dst: &mut A<T>) -> R<()> {
        self.cpu.copy(src, dst)
    }
    fn fill<T: Element>(&self, a: &mut A<T>, value: T) -> R<()> {
        self.cpu.fill(a, value)
    }
    fn reshape<T: Element>(&self, a: A<T>, shape: &[usize]) -> R<A<T>> {
        self.cpu.reshape(a, shape)
    }
    fn cast<S: Real, D: Real>(&self, src: &A<S>, dst: &mut A<D>) -> R<()> {
        self.cpu.cast(src, dst)
    }
    fn available_memory(&self) -> u64 {
        self.cpu.available_memory()
    }
    fn synchronize(&self) -> R<()> {
        self.sync();
        self.cpu.synchronize()
    }
}

impl Elementwise for Counting {
    fn binary<T: Float>(&self, op: BinaryOp, a: &A<T>, b: &A<T>, out: &mut A<T>) -> R<()> {
        self.cpu.binary(op, a, b, out)
    }
    fn binary_assign<T: Float>(&self, op: BinaryOp, a: &mut A<T>, b: &A<T>) -> R<()> {
        self.cpu.binary_assign(op, a, b)
    }
    fn scalar_assign<T: Float>(&self, op: BinaryOp, a: &mut A<T>, s: f64) -> R<()> {
        self.cpu.scalar_assign(op, a, s)
    }
    fn unary_assign<T: Float>(&self, op: UnaryOp, a: &mut A<T>) -> R<()> {
        self.cpu.unary_assign(op, a)
    }
    fn axpy<T: Float>(&self, alpha: f64, x: &A<T>, y: &mut A<T>) -> R<()> {
        self.cpu.axpy(alpha, x, y)
    }
    fn complex_mul_conj<T: Float>(
        &self,
        a: &A<Complex<T>>,
        b: &A<Complex<T>>,
        out: &mut A<Complex<T>>,
    ) -> R<()> {
        self.cpu.complex_mul_conj(a, b, out)
    }
    fn complex_mul<T: Float>(
        &self,
        a: &A<Complex<T>>,
        b: &A<Complex<T>>,
        out: &mut A<Complex<T>>,
    ) -> R<()> {
        self.cpu.complex_mul(a, b, out)
    }
    fn complex_scale<T: Float>(&self, a: &mut A<Complex<T>>, s: f64) -> R<()> {
        self.cpu.complex_scale(a, s)
    }
    fn complex_norm_sq<T: Float>(&self, src: &A<Complex<T>>, dst: &mut A<T>) -> R<()> {
        self.cpu.complex_norm_sq(src, dst)
    }
}

impl Reduce for Counting {
    fn sum<T: Real>(&self, a: &A<T>) -> R<AccumOf<Self>> {
        self.sync();
        self.cpu.sum(a)
    }
    fn sum_sq<T: Float>(&self, a: &A<T>) -> R<AccumOf<Self>> {
        self.sync();
        self.cpu.sum_sq(a)
    }
    fn dot<T: Float>(&self, a: &A<T>, b: &A<T>) -> R<AccumOf<Self>> {
        self.sync();
        self.cpu.dot(a, b)
    }
    fn min<T: Real>(&self, a: &A<T>) -> R<T> {
        self.sync();
        self.cpu.min(a)
    }
    fn max<T: Real>(&self, a: &A<T>) -> R<T> {
        self.sync();
        self.cpu.max(a)
    }
    fn argmax<T: Real>(&self, a: &A<T>) -> R<(usize, T)> {
        self.sync();
        self.cpu.argmax(a)
    }
    fn top_k<T: Real>(&self, a: &A<T>, k: usize) -> R<Vec<(usize, T)>> {
        self.sync();
        self.cpu.top_k(a, k)
    }
    fn count_nonfinite<T: Float>(&self, a: &A<T>) -> R<usize> {
        self.sync();
        self.cpu.count_nonfinite(a)
    }
    fn sum_rows<T: Float>(&self, a: &A<T>) -> R<Vec<AccumOf<Self>>> {
        self.sync();
        self.cpu.sum_rows(a)
    }
    fn dot_rows<T: Float>(&self, a: &A<T>, b: &A<T>) -> R<Vec<AccumOf<Self>>> {
        self.sync();
        self.cpu.dot_rows(a, b)
    }
    fn sum_sq_rows<T: Float>(&self, a: &A<T>) -> R<Vec<AccumOf<Self>>> {
        self.sync();
        self.cpu.sum_sq_rows(a)
    }
}

/// Every op forwards to the CPU's own (its default bodies included, which run inside the CPU
/// backend and are not counted: on a device they are fused kernels); the ops that return host
/// values count one round trip.
impl Linalg for Counting {
    fn matvec_dense<T: Float>(&self, a: &A<T>, x: &A<T>, y: &mut A<T>) -> R<()> {
        self.cpu.matvec_dense(a, x, y)
    }
    fn matvec_csr<T: Float>(&self, _: &CsrMatrix<Self, T>, _: &A<T>, _: &mut A<T>) -> R<()> {
        Err(monomorph::Error::invalid(
            "matvec_csr",
            "not used by this test",
        ))
    }
    fn laplacian<T: Float>(&self, g: &[usize], bc: Boundary, x: &A<T>, y: &mut A<T>) -> R<()> {
        self.cpu.laplacian(g, bc, x, y)
    }
    fn stencil<T: Float>(
        &self,
        _: &monomorph::PoissonStencil<Self>,
        _: &A<T>,
        _: &mut A<T>,
    ) -> R<()> {
        Err(monomorph::Error::invalid(
            "stencil",
            "not used by this test",
        ))
    }
    fn scale_rows<T: Float>(&self, alpha: &[T], x: &mut A<T>) -> R<()> {
        self.cpu.scale_rows(alpha, x)
    }
    fn axpy_rows<T: Float>(&self, alpha: &[T], x: &A<T>, y: &mut A<T>) -> R<()> {
        self.cpu.axpy_rows(alpha, x, y)
    }
    fn xpay_rows<T: Float>(&self, x: &A<T>, beta: &[T], y: &mut A<T>) -> R<()> {
        self.cpu.xpay_rows(x, beta, y)
    }
    fn axpy_pair_rows<T: Float>(
        &self,
        alpha: &[T],
        d: &A<T>,
        q: &A<T>,
        x: &mut A<T>,
        r: &mut A<T>,
    ) -> R<Vec<f64>> {
        self.sync();
        self.cpu.axpy_pair_rows(alpha, d, q, x, r)
    }
    fn axpy_pair_rows_dots<T: Float>(
        &self,
        alpha: &[T],
        d: &A<T>,
        q: &A<T>,
        x: &mut A<T>,
        r: &mut A<T>,
    ) -> R<(Vec<f64>, Vec<f64>)> {
        self.sync();
        self.cpu.axpy_pair_rows_dots(alpha, d, q, x, r)
    }
    fn xpay_rows_where<T: Float>(&self, x: &A<T>, beta: &[T], y: &mut A<T>, on: &[bool]) -> R<()> {
        self.cpu.xpay_rows_where(x, beta, y, on)
    }
    fn xpay_rows_dot<T: Float>(
        &self,
        x: &A<T>,
        beta: &[T],
        y: &mut A<T>,
        on: &[bool],
    ) -> R<Vec<f64>> {
        self.sync();
        self.cpu.xpay_rows_dot(x, beta, y, on)
    }
    fn laplacian_dot<T: Float>(
        &self,
        g: &[usize],
        bc: Boundary,
        x: &A<T>,
        y: &mut A<T>,
        on: &[bool],
    ) -> R<Vec<f64>> {
        self.sync();
        self.cpu.laplacian_dot(g, bc, x, y, on)
    }
    fn matvec_dense_dot<T: Float>(
        &self,
        a: &A<T>,
        x: &A<T>,
        y: &mut A<T>,
        on: &[bool],
    ) -> R<Vec<f64>> {
        self.sync();
        self.cpu.matvec_dense_dot(a, x, y, on)
    }
    fn laplacian_dot_into<T: Float>(
        &self,
        g: &[usize],
        bc: Boundary,
        x: &A<T>,
        y: &mut A<T>,
        mask: &A<i32>,
        s: &mut A<f64>,
        slot: usize,
    ) -> R<()> {
        self.cpu.laplacian_dot_into(g, bc, x, y, mask, s, slot)
    }
    fn matvec_dense_dot_into<T: Float>(
        &self,
        a: &A<T>,
        x: &A<T>,
        y: &mut A<T>,
        mask: &A<i32>,
        s: &mut A<f64>,
        slot: usize,
    ) -> R<()> {
        self.cpu.matvec_dense_dot_into(a, x, y, mask, s, slot)
    }
    fn axpy_pair_rows_ratio<T: Float>(
        &self,
        s: &mut A<f64>,
        ratio: Ratio,
        mask: &A<i32>,
        d: &A<T>,
        q: &A<T>,
        x: &mut A<T>,
        r: &mut A<T>,
        rr: usize,
        precond: Option<Precond<'_, Self, T>>,
        rq: Option<usize>,
    ) -> R<()> {
        let precond = precond.map(|p| Precond::<Cpu<Double>, T> {
            w: p.w,
            z: p.z,
            slot: p.slot,
        });
        self.cpu
            .axpy_pair_rows_ratio(s, ratio, mask, d, q, x, r, rr, precond, rq)
    }
    fn xpay_rows_ratio<T: Float>(
        &self,
        x: &A<T>,
        s: &mut A<f64>,
        ratio: Ratio,
        mask: &A<i32>,
        y: &mut A<T>,
        dot: Option<usize>,
    ) -> R<()> {
        self.cpu.xpay_rows_ratio(x, s, ratio, mask, y, dot)
    }
}

/// Round trips and uploads of each iteration of a solve (from the observer), and the result.
fn per_iteration<O: LinearOperator<Counting> + ?Sized>(
    b: &Counting,
    op: &O,
    y: &ArrayD<f64>,
    params: &SolveParams,
) -> (Vec<usize>, usize, ArrayD<f64>, Vec<usize>) {
    let yd = b.upload(y.view()).unwrap();
    let mut marks = Vec::new();
    let mut uploads = 0;
    let res = conjugate_gradient_observed(b, op, &yd, None, params, |st| {
        if st.step == 0 {
            uploads = b.uploads.load(Ordering::Relaxed);
        }
        marks.push(b.syncs());
    })
    .unwrap();
    let uploads = b.uploads.load(Ordering::Relaxed) - uploads;
    let trips = marks.windows(2).map(|w| w[1] - w[0]).collect();
    (
        trips,
        uploads,
        b.cpu.download(&res.x).unwrap(),
        res.iterations,
    )
}

#[test]
fn cg_crosses_to_the_host_once_per_iteration() {
    let b = Counting::default();
    let grid = [9usize, 8, 7];
    let n: usize = grid.iter().product();
    let y: ArrayD<f64> = Lcg::new(41).array(&[3, n]);
    let lap = LaplacianOperator::new(&grid, Boundary::DirichletZero).unwrap();
    let m = 24;
    let a = ArrayD::from_shape_fn(IxDyn(&[m, m]), |i| {
        let (r, c) = (i[0] as f64, i[1] as f64);
        if i[0] == i[1] {
            4.0 + r * 0.3
        } else {
            1.0 / (1.0 + (r - c).abs())
        }
    });
    let dense = DenseOperator::new(&b, a.view()).unwrap();
    let yd: ArrayD<f64> = Lcg::new(42).array(&[3, m]);
    for (method, pre) in [
        (Method::Cg, Preconditioner::None),
        (Method::Cg, Preconditioner::Jacobi),
        (Method::CgAdaptive, Preconditioner::None),
    ] {
        let mut p = SolveParams::new(method);
        p.preconditioner = pre;
        // The entries stop at different iterations, so the mask changes twice on the way.
        p.rtol = vec![1e-2, 1e-8, 1e-5];
        p.max_iter = vec![1000];
        for (name, op, y) in [
            ("laplacian", &lap as &dyn LinearOperator<Counting>, &y),
            ("dense", &dense, &yd),
        ] {
            let (trips, uploads, x, it) = per_iteration(&b, op, y, &p);
            assert!(trips.len() > 5, "{name} {method:?} {pre:?}: {trips:?}");
            assert!(
                trips.iter().all(|&t| t == 1),
                "{name} {method:?} {pre:?}: host round trips per iteration {trips:?}"
            );
            // The mask is uploaded only when it changes: once per entry that stops before the
            // last (the residual restart, if any, adds its own).
            assert!(uploads <= 4, "{name} {method:?} {pre:?}: {uploads} uploads");
            let distinct: std::collections::BTreeSet<_> = it.iter().collect();
            assert!(
                distinct.len() == 3,
                "{name} {method:?} {pre:?}: iterations {it:?}"
            );
            // The same solve on the CPU backend itself, bit for bit.
            let c = &b.cpu;
            let direct = conjugate_gradient(
                c,
                op_on_cpu(name, &grid, &a).as_ref(),
                &c.upload(y.view()).unwrap(),
                None,
                &p,
            )
            .unwrap();
            assert_eq!(
                c.download(&direct.x).unwrap(),
                x,
                "{name} {method:?} {pre:?}"
            );
            assert_eq!(direct.iterations, it);
        }
    }
}

fn op_on_cpu(name: &str, grid: &[usize], a: &ArrayD<f64>) -> Box<dyn LinearOperator<Cpu<Double>>> {
    if name == "laplacian" {
        Box::new(LaplacianOperator::new(grid, Boundary::DirichletZero).unwrap())
    } else {
        Box::new(DenseOperator::new(&Cpu::<Double>::new(), a.view()).unwrap())
    }
}
