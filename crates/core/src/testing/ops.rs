//! Op-level conformance tests: every op of every family against a host reference.

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;

use super::{Lcg, assert_close, flat, reference};
use crate::backend::*;
use crate::dtype::{Float, Real};
use num_traits::Float as _;

/// Tolerance for results of O(1) float operations in the backend's precision.
pub fn eps<B: Backend>() -> f64 {
    <FloatOf<B> as Float>::EPS.as_f64()
}

fn up<B: Backend, T: crate::Element>(b: &B, a: &ArrayD<T>) -> Arr<B, T> {
    b.upload(a.view()).expect("upload")
}

fn down<B: Backend, T: crate::Element>(b: &B, a: &Arr<B, T>) -> ArrayD<T> {
    b.download(a).expect("download")
}

fn host<B: Backend>(rng: &mut Lcg, shape: &[usize]) -> ArrayD<FloatOf<B>> {
    rng.array::<FloatOf<B>>(shape)
}

fn to_f64<T: Real>(a: &ArrayD<T>) -> ArrayD<f64> {
    a.mapv(|v| v.as_f64())
}

// ---------------------------------------------------------------- memory

pub fn memory_roundtrip<B: Backend>(b: &B) {
    let mut rng = Lcg::new(1);
    for shape in [vec![7], vec![3, 5], vec![4, 3, 6], vec![1, 1, 1]] {
        let h = host::<B>(&mut rng, &shape);
        let d = up(b, &h);
        assert_eq!(d.shape(), &shape[..]);
        assert_eq!(down(b, &d), h, "upload/download of {shape:?}");
        let mut z = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
        assert!(
            down(b, &z)
                .iter()
                .all(|v| *v == FloatOf::<B>::from_f64(0.0))
        );
        b.copy(&d, &mut z).expect("copy");
        assert_eq!(down(b, &z), h);
        b.fill(&mut z, FloatOf::<B>::from_f64(2.5)).expect("fill");
        assert!(down(b, &z).iter().all(|v| v.as_f64() == 2.5));
        let f = b
            .full::<IntOf<B>>(&shape, IntOf::<B>::from_f64(-3.0))
            .expect("full");
        assert!(down(b, &f).iter().all(|v| v.as_f64() == -3.0));
    }
    let h = host::<B>(&mut rng, &[2, 6]);
    let d = b.reshape(up(b, &h), &[3, 4]).expect("reshape");
    assert_eq!(d.shape(), &[3, 4]);
    assert_eq!(flat(&down(b, &d)), flat(&h));
    let c: Arr<B, Complex<FloatOf<B>>> = up(
        b,
        &ArrayD::from_shape_fn(IxDyn(&[3, 2]), |i| {
            Complex::new(
                FloatOf::<B>::from_f64(i[0] as f64),
                FloatOf::<B>::from_f64(i[1] as f64 - 0.5),
            )
        }),
    );
    let back = down(b, &c);
    assert_eq!(back[[2, 1]].re.as_f64(), 2.0);
    assert_eq!(back[[2, 1]].im.as_f64(), 0.5);
    b.synchronize().expect("synchronize");
}

pub fn memory_errors<B: Backend>(b: &B) {
    let h = ArrayD::<FloatOf<B>>::zeros(IxDyn(&[2, 3]));
    let d = up(b, &h);
    let mut wrong = b.zeros::<FloatOf<B>>(&[3, 2]).expect("zeros");
    assert!(matches!(
        b.copy(&d, &mut wrong),
        Err(crate::Error::Shape { .. })
    ));
    assert!(b.reshape(d, &[4, 2]).is_err());
    let huge = b.available_memory().saturating_mul(4).max(1 << 40);
    let err = b
        .zeros::<f64>(&[(huge / 8) as usize])
        .err()
        .expect("allocation larger than the available memory must fail");
    match err {
        crate::Error::OutOfMemory {
            requested,
            available,
            ..
        } => {
            assert!(requested > available);
            let msg = err_msg(requested, available);
            assert!(!msg.is_empty());
        }
        e => panic!("expected OutOfMemory, got {e}"),
    }
}

fn err_msg(requested: u64, available: u64) -> String {
    crate::Error::OutOfMemory {
        what: "x".into(),
        requested,
        available,
    }
    .to_string()
}

pub fn cast_roundtrip<B: Backend>(b: &B) {
    let h = ArrayD::from_shape_fn(IxDyn(&[3, 4]), |i| (i[0] * 4 + i[1]) as f64 - 5.0);
    let d = up(b, &h.mapv(FloatOf::<B>::from_f64));
    let mut i = b.zeros::<IntOf<B>>(&[3, 4]).expect("zeros");
    b.cast(&d, &mut i).expect("cast");
    assert_eq!(flat(&down(b, &i)), flat(&h));
    let mut f = b.zeros::<f64>(&[3, 4]).expect("zeros");
    b.cast(&i, &mut f).expect("cast");
    assert_eq!(down(b, &f), h);
}

// ---------------------------------------------------------------- elementwise

pub fn elementwise_real<B: Backend>(b: &B) {
    let mut rng = Lcg::new(2);
    let shape = [5, 7, 3];
    let (ha, hb) = (host::<B>(&mut rng, &shape), host::<B>(&mut rng, &shape));
    let hb = hb.mapv(|v| v + FloatOf::<B>::from_f64(if v.as_f64() >= 0.0 { 0.5 } else { -0.5 }));
    let (da, db) = (up(b, &ha), up(b, &hb));
    let tol = 4.0 * eps::<B>();
    for op in [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
    ] {
        let mut out = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
        b.binary(op, &da, &db, &mut out).expect("binary");
        let expect: Vec<f64> = ha
            .iter()
            .zip(hb.iter())
            .map(|(&x, &y)| op.apply(x, y).as_f64())
            .collect();
        assert_close(
            &format!("binary {op:?}"),
            &flat(&down(b, &out)),
            &expect,
            tol,
            0.0,
        );
        let mut a2 = b.duplicate(&da).expect("dup");
        b.binary_assign(op, &mut a2, &db).expect("binary_assign");
        assert_close(
            &format!("binary_assign {op:?}"),
            &flat(&down(b, &a2)),
            &expect,
            tol,
            0.0,
        );
        let mut a3 = b.duplicate(&da).expect("dup");
        let s = FloatOf::<B>::from_f64(0.75);
        b.scalar_assign(op, &mut a3, s).expect("scalar_assign");
        let expect: Vec<f64> = ha.iter().map(|&x| op.apply(x, s).as_f64()).collect();
        assert_close(
            &format!("scalar_assign {op:?}"),
            &flat(&down(b, &a3)),
            &expect,
            tol,
            0.0,
        );
    }
    let pos = ha.mapv(|v| v.abs() + FloatOf::<B>::from_f64(0.1));
    for op in [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sqrt,
        UnaryOp::Square,
        UnaryOp::Recip,
        UnaryOp::Exp,
        UnaryOp::Ln,
    ] {
        let mut a = up(b, &pos);
        b.unary_assign(op, &mut a).expect("unary_assign");
        let expect: Vec<f64> = pos.iter().map(|&x| op.apply(x).as_f64()).collect();
        assert_close(
            &format!("unary {op:?}"),
            &flat(&down(b, &a)),
            &expect,
            8.0 * eps::<B>(),
            0.0,
        );
    }
    let mut y = b.duplicate(&db).expect("dup");
    b.axpy(FloatOf::<B>::from_f64(-1.5), &da, &mut y)
        .expect("axpy");
    let expect: Vec<f64> = ha
        .iter()
        .zip(hb.iter())
        .map(|(&x, &y)| y.as_f64() - 1.5 * x.as_f64())
        .collect();
    assert_close("axpy", &flat(&down(b, &y)), &expect, tol, tol);
}

fn complex_host<B: Backend>(rng: &mut Lcg, shape: &[usize]) -> ArrayD<Complex<FloatOf<B>>> {
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        Complex::new(
            FloatOf::<B>::from_f64(rng.next_f64()),
            FloatOf::<B>::from_f64(rng.next_f64()),
        )
    })
}

pub fn elementwise_complex<B: Backend>(b: &B) {
    let mut rng = Lcg::new(3);
    let shape = [4, 9];
    let (ha, hb) = (
        complex_host::<B>(&mut rng, &shape),
        complex_host::<B>(&mut rng, &shape),
    );
    let (da, db) = (up(b, &ha), up(b, &hb));
    let tol = 8.0 * eps::<B>();
    let split = |a: &ArrayD<Complex<FloatOf<B>>>| -> Vec<f64> {
        a.iter()
            .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
            .collect()
    };
    let mut out = b.zeros::<Complex<FloatOf<B>>>(&shape).expect("zeros");
    b.complex_mul_conj(&da, &db, &mut out).expect("mul_conj");
    let expect: ArrayD<Complex<FloatOf<B>>> =
        ArrayD::from_shape_fn(IxDyn(&shape), |i| ha[&i] * hb[&i].conj());
    assert_close(
        "complex_mul_conj",
        &split(&down(b, &out)),
        &split(&expect),
        tol,
        tol,
    );
    b.complex_mul(&da, &db, &mut out).expect("mul");
    let expect: ArrayD<Complex<FloatOf<B>>> =
        ArrayD::from_shape_fn(IxDyn(&shape), |i| ha[&i] * hb[&i]);
    assert_close(
        "complex_mul",
        &split(&down(b, &out)),
        &split(&expect),
        tol,
        tol,
    );
    let mut a = b.duplicate(&da).expect("dup");
    b.complex_scale(&mut a, FloatOf::<B>::from_f64(-2.0))
        .expect("scale");
    let expect = ha.mapv(|c| c * FloatOf::<B>::from_f64(-2.0));
    assert_close(
        "complex_scale",
        &split(&down(b, &a)),
        &split(&expect),
        tol,
        tol,
    );
    let mut n = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
    b.complex_norm_sq(&da, &mut n).expect("norm_sq");
    let expect: Vec<f64> = ha.iter().map(|c| c.norm_sqr().as_f64()).collect();
    assert_close("complex_norm_sq", &flat(&down(b, &n)), &expect, tol, tol);
}

pub fn elementwise_shape_errors<B: Backend>(b: &B) {
    let a = b.zeros::<FloatOf<B>>(&[2, 3]).expect("zeros");
    let c = b.zeros::<FloatOf<B>>(&[3, 2]).expect("zeros");
    let mut out = b.zeros::<FloatOf<B>>(&[2, 3]).expect("zeros");
    assert!(matches!(
        b.binary(BinaryOp::Add, &a, &c, &mut out),
        Err(crate::Error::Shape { .. })
    ));
    let mut a2 = b.duplicate(&a).expect("dup");
    assert!(b.axpy(FloatOf::<B>::from_f64(1.0), &c, &mut a2).is_err());
    let mut bad_out = b.zeros::<FloatOf<B>>(&[6]).expect("zeros");
    assert!(b.binary(BinaryOp::Mul, &a, &a, &mut bad_out).is_err());
}

// ---------------------------------------------------------------- reduce

pub fn reduce_basic<B: Backend>(b: &B) {
    let mut rng = Lcg::new(4);
    let h = host::<B>(&mut rng, &[33, 65]);
    let h2 = host::<B>(&mut rng, &[33, 65]);
    let d = up(b, &h);
    let d2 = up(b, &h2);
    let v: Vec<f64> = flat(&h);
    let w: Vec<f64> = flat(&h2);
    let sum: f64 = v.iter().sum();
    let tol = 1e-12 * v.len() as f64;
    assert!((b.sum(&d).expect("sum") - sum).abs() <= tol);
    assert!((b.sum_sq(&d).expect("sum_sq") - v.iter().map(|x| x * x).sum::<f64>()).abs() <= tol);
    assert!(
        (b.dot(&d, &d2).expect("dot") - v.iter().zip(&w).map(|(x, y)| x * y).sum::<f64>()).abs()
            <= tol
    );
    let (mn, mx) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, c), &x| {
            (a.min(x), c.max(x))
        });
    assert_eq!(b.min(&d).expect("min").as_f64(), mn);
    assert_eq!(b.max(&d).expect("max").as_f64(), mx);
    let (i, m) = b.argmax(&d).expect("argmax");
    assert_eq!((v[i], m.as_f64()), (mx, mx));
    let mean = sum / v.len() as f64;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
    let (m2, s2) = b.mean_std(&d).expect("mean_std");
    assert!(
        (m2 - mean).abs() < 1e-12 && (s2 - var.sqrt()).abs() < 1e-9,
        "{m2} {s2}"
    );
    let ints = up(
        b,
        &h.mapv(|x| IntOf::<B>::from_f64((x.as_f64() * 100.0).round())),
    );
    let isum: f64 = v.iter().map(|x| (x * 100.0).round()).sum();
    assert_eq!(b.sum(&ints).expect("sum of ints"), isum);
}

pub fn reduce_nan_and_empty<B: Backend>(b: &B) {
    let nan = FloatOf::<B>::nan();
    let h = ArrayD::from_shape_vec(
        IxDyn(&[5]),
        vec![
            nan,
            FloatOf::<B>::from_f64(1.0),
            nan,
            FloatOf::<B>::from_f64(3.0),
            FloatOf::<B>::from_f64(-2.0),
        ],
    )
    .expect("shape");
    let d = up(b, &h);
    assert_eq!(b.max(&d).expect("max").as_f64(), 3.0);
    assert_eq!(b.min(&d).expect("min").as_f64(), -2.0);
    assert_eq!(b.argmax(&d).expect("argmax").0, 3);
    assert_eq!(b.count_nonfinite(&d).expect("count"), 2);
    let top = b.top_k(&d, 10).expect("top_k");
    assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![3, 1, 4]);
    let all_nan = up(b, &ArrayD::from_elem(IxDyn(&[3]), nan));
    assert!(b.max(&all_nan).is_err());
    let empty = b.zeros::<FloatOf<B>>(&[0]).expect("zeros");
    assert!(matches!(b.max(&empty), Err(crate::Error::Empty(_))));
    assert_eq!(b.sum(&empty).expect("sum of empty"), 0.0);
}

pub fn reduce_rows<B: Backend>(b: &B) {
    let mut rng = Lcg::new(5);
    for (rows, n) in [(1, 1000), (3, 17), (7, 40000)] {
        let (h, h2) = (
            host::<B>(&mut rng, &[rows, n]),
            host::<B>(&mut rng, &[rows, n]),
        );
        let (d, d2) = (up(b, &h), up(b, &h2));
        let sums = b.sum_rows(&d).expect("sum_rows");
        let dots = b.dot_rows(&d, &d2).expect("dot_rows");
        let sqs = b.sum_sq_rows(&d).expect("sum_sq_rows");
        for r in 0..rows {
            let row: Vec<f64> = (0..n).map(|j| h[[r, j]].as_f64()).collect();
            let row2: Vec<f64> = (0..n).map(|j| h2[[r, j]].as_f64()).collect();
            let tol = 1e-12 * n as f64;
            assert!((sums[r] - row.iter().sum::<f64>()).abs() <= tol);
            assert!(
                (dots[r] - row.iter().zip(&row2).map(|(a, c)| a * c).sum::<f64>()).abs() <= tol
            );
            assert!((sqs[r] - row.iter().map(|a| a * a).sum::<f64>()).abs() <= tol);
        }
    }
    let v = b.zeros::<FloatOf<B>>(&[6]).expect("zeros");
    assert!(matches!(b.sum_rows(&v), Err(crate::Error::Shape { .. })));
}

pub fn top_k_ties<B: Backend>(b: &B) {
    let mut rng = Lcg::new(6);
    let h = rng.levels::<FloatOf<B>>(&[50, 41], 7);
    let d = up(b, &h);
    let v = flat(&h);
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&i, &j| v[j].partial_cmp(&v[i]).expect("finite").then(i.cmp(&j)));
    for k in [1, 5, 100, v.len(), v.len() + 3] {
        let got: Vec<usize> = b.top_k(&d, k).expect("top_k").iter().map(|t| t.0).collect();
        assert_eq!(got, order[..k.min(v.len())].to_vec(), "top_k {k}");
    }
    assert!(b.top_k(&d, 0).expect("k = 0").is_empty());
}

// ---------------------------------------------------------------- spectral

fn check_fft<B: Backend>(b: &B, shape: &[usize], axes: &[usize], seed: u64) {
    let mut rng = Lcg::new(seed);
    let h = host::<B>(&mut rng, shape);
    let plan = b.fft_plan(shape, axes).expect("fft_plan");
    assert_eq!(plan.real_shape(), shape);
    let expect = reference::rfft(&to_f64(&h), axes);
    assert_eq!(
        plan.complex_shape(),
        expect.shape(),
        "complex shape for {shape:?} axes {axes:?}"
    );
    let d = up(b, &h);
    let mut spec = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    b.rfft(&plan, &d, &mut spec).expect("rfft");
    let got = down(b, &spec);
    let n: usize = axes.iter().map(|&a| shape[a]).product();
    let scale = (n as f64).sqrt();
    let tol = 16.0 * eps::<B>() * scale * (n as f64).log2().max(1.0);
    let g: Vec<f64> = got
        .iter()
        .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
        .collect();
    let e: Vec<f64> = expect.iter().flat_map(|c| [c.re, c.im]).collect();
    assert_close(&format!("rfft {shape:?} axes {axes:?}"), &g, &e, 0.0, tol);
    let mut back = b.zeros::<FloatOf<B>>(shape).expect("zeros");
    b.irfft(&plan, &mut spec, &mut back).expect("irfft");
    let back: Vec<f64> = flat(&down(b, &back)).iter().map(|v| v / n as f64).collect();
    assert_close(
        &format!("irfft∘rfft {shape:?} axes {axes:?}"),
        &back,
        &flat(&to_f64(&h)),
        0.0,
        tol,
    );
}

pub fn fft_matches_dft<B: Backend>(b: &B) {
    check_fft(b, &[16], &[0], 10);
    check_fft(b, &[15], &[0], 11);
    check_fft(b, &[13], &[0], 12);
    check_fft(b, &[8, 6], &[0, 1], 13);
    check_fft(b, &[7, 9], &[0, 1], 14);
    check_fft(b, &[6, 5, 8], &[0, 1, 2], 15);
    check_fft(b, &[5, 7, 3], &[0, 1, 2], 16);
    check_fft(b, &[12, 10, 14], &[0, 1, 2], 17);
}

pub fn fft_batch_axes<B: Backend>(b: &B) {
    check_fft(b, &[3, 8], &[1], 20);
    check_fft(b, &[4, 6, 10], &[1, 2], 21);
    check_fft(b, &[6, 10, 3], &[0, 1], 22);
    check_fft(b, &[5, 4, 6], &[2], 23);
}

pub fn fft_pruned_equals_full<B: Backend>(b: &B) {
    let shape = [24, 20, 18];
    let box_ = [7, 5, 6];
    let mut rng = Lcg::new(30);
    let small = host::<B>(&mut rng, &box_);
    let mut h = ArrayD::<FloatOf<B>>::zeros(IxDyn(&shape));
    for ((i, j, k), v) in ndarray::Array3::from_shape_vec(box_, small.iter().copied().collect())
        .expect("shape")
        .indexed_iter()
    {
        h[[i, j, k]] = *v;
    }
    let plan = b.fft_plan(&shape, &[0, 1, 2]).expect("plan");
    let d = up(b, &h);
    let mut full = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    let mut pruned = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    b.rfft(&plan, &d, &mut full).expect("rfft");
    b.rfft_pruned(&plan, &d, &box_, &mut pruned)
        .expect("rfft_pruned");
    let f: Vec<f64> = down(b, &full)
        .iter()
        .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
        .collect();
    let p: Vec<f64> = down(b, &pruned)
        .iter()
        .flat_map(|c| [c.re.as_f64(), c.im.as_f64()])
        .collect();
    assert_close("rfft_pruned vs rfft", &p, &f, 0.0, 64.0 * eps::<B>());
}

pub fn fft_plan_errors<B: Backend>(b: &B) {
    assert!(b.fft_plan(&[8, 8], &[2]).is_err(), "axis out of range");
    assert!(b.fft_plan(&[8, 8], &[1, 0]).is_err(), "unsorted axes");
    assert!(b.fft_plan(&[8, 8], &[]).is_err(), "no axes");
    assert!(b.fft_plan(&[8, 0], &[0, 1]).is_err(), "zero-sized shape");
    let plan = b.fft_plan(&[8, 8], &[0, 1]).expect("plan");
    let wrong = b.zeros::<FloatOf<B>>(&[8, 6]).expect("zeros");
    let mut spec = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    assert!(
        b.rfft(&plan, &wrong, &mut spec).is_err(),
        "plan used on the wrong shape"
    );
    let right = b.zeros::<FloatOf<B>>(&[8, 8]).expect("zeros");
    let mut bad_spec = b.zeros::<ComplexOf<B>>(&[8, 8]).expect("zeros");
    assert!(
        b.rfft(&plan, &right, &mut bad_spec).is_err(),
        "wrong spectrum shape"
    );
}

// ---------------------------------------------------------------- resample

pub fn pad_crop_flip_roll<B: Backend>(b: &B) {
    let mut rng = Lcg::new(40);
    let h = host::<B>(&mut rng, &[3, 4, 5]);
    let d = up(b, &h);
    let mut p = b.zeros::<FloatOf<B>>(&[6, 6, 8]).expect("zeros");
    b.pad(&d, &[1, 2, 0], PadMode::Zero, &mut p).expect("pad");
    let hp = down(b, &p);
    for ((i, j, k), v) in
        ndarray::Array3::from_shape_fn((6, 6, 8), |(i, j, k)| hp[[i, j, k]]).indexed_iter()
    {
        let inside = (1..4).contains(&i) && (2..6).contains(&j) && k < 5;
        let expect = if inside {
            h[[i - 1, j - 2, k]].as_f64()
        } else {
            0.0
        };
        assert_eq!(v.as_f64(), expect, "pad at {:?}", (i, j, k));
    }
    let mut c = b.zeros::<FloatOf<B>>(&[3, 4, 5]).expect("zeros");
    b.crop(&p, &[1, 2, 0], &mut c).expect("crop");
    assert_eq!(down(b, &c), h);
    let mut f = b.zeros::<FloatOf<B>>(&[3, 4, 5]).expect("zeros");
    b.flip(&d, &[0, 2], &mut f).expect("flip");
    let hf = down(b, &f);
    for ((i, j, k), _) in ndarray::Array3::<u8>::zeros((3, 4, 5)).indexed_iter() {
        assert_eq!(hf[[i, j, k]], h[[2 - i, j, 4 - k]]);
    }
    let mut r = b.zeros::<FloatOf<B>>(&[3, 4, 5]).expect("zeros");
    b.roll(&d, &[1, -1, 7], &mut r).expect("roll");
    let hr = down(b, &r);
    for ((i, j, k), _) in ndarray::Array3::<u8>::zeros((3, 4, 5)).indexed_iter() {
        let src = [(i + 3 - 1) % 3, (j + 1) % 4, (k + 5 * 2 - 7) % 5];
        assert_eq!(hr[[i, j, k]], h[IxDyn(&src)], "roll at {:?}", (i, j, k));
    }
    let ints = up(
        b,
        &ArrayD::from_shape_fn(IxDyn(&[4, 4]), |i| {
            IntOf::<B>::from_f64((i[0] * 4 + i[1]) as f64)
        }),
    );
    let mut ic = b.zeros::<IntOf<B>>(&[2, 2]).expect("zeros");
    b.crop(&ints, &[1, 2], &mut ic).expect("crop ints");
    assert_eq!(flat(&down(b, &ic)), vec![6.0, 7.0, 10.0, 11.0]);
}

pub fn pad_symmetric<B: Backend>(b: &B) {
    let h = ArrayD::from_shape_fn(IxDyn(&[3, 4]), |i| {
        FloatOf::<B>::from_f64((i[0] * 4 + i[1]) as f64)
    });
    let d = up(b, &h);
    let mut p = b.zeros::<FloatOf<B>>(&[7, 9]).expect("zeros");
    b.pad(&d, &[2, 3], PadMode::Symmetric, &mut p)
        .expect("pad symmetric");
    let hp = down(b, &p);
    // numpy: np.pad(h, ((2,2),(3,2)), mode="symmetric")
    let sym = |i: isize, n: usize| reference::extend(i, n, BorderMode::Reflect).expect("reflect");
    for i in 0..7 {
        for j in 0..9 {
            let (si, sj) = (sym(i as isize - 2, 3), sym(j as isize - 3, 4));
            assert_eq!(hp[[i, j]], h[[si, sj]], "symmetric pad at ({i}, {j})");
        }
    }
}

pub fn resample_errors<B: Backend>(b: &B) {
    let d = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    let mut small = b.zeros::<FloatOf<B>>(&[3, 3]).expect("zeros");
    assert!(
        b.pad(&d, &[0, 0], PadMode::Zero, &mut small).is_err(),
        "pad into a smaller array"
    );
    let mut big = b.zeros::<FloatOf<B>>(&[5, 5]).expect("zeros");
    assert!(
        b.crop(&d, &[0, 0], &mut big).is_err(),
        "crop larger than source"
    );
    assert!(
        b.crop(&d, &[2, 0], &mut small).is_err(),
        "crop out of range"
    );
    let mut same = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    assert!(
        b.flip(&d, &[2], &mut same).is_err(),
        "flip axis out of range"
    );
    assert!(
        b.roll(&d, &[1], &mut same).is_err(),
        "roll with one shift for two axes"
    );
    let m3 = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    assert!(
        b.affine_transform(&d, &m3, &[0.0, 0.0], Interpolation::Linear, &mut same)
            .is_err(),
        "3×3 matrix for a 2-D array"
    );
    let mut v3 = b.zeros::<FloatOf<B>>(&[4, 4, 4]).expect("zeros");
    assert!(
        b.affine_transform(
            &d,
            &[1.0, 0.0, 0.0, 1.0],
            &[0.0, 0.0],
            Interpolation::Cubic,
            &mut v3
        )
        .is_err(),
        "dst rank differs"
    );
    assert!(
        b.affine_transform(
            &d,
            &[f64::NAN, 0.0, 0.0, 1.0],
            &[0.0, 0.0],
            Interpolation::Cubic,
            &mut same
        )
        .is_err(),
        "non-finite matrix"
    );
}

pub fn affine_identity_and_shift<B: Backend>(b: &B) {
    let mut rng = Lcg::new(50);
    let h = host::<B>(&mut rng, &[9, 10, 11]);
    let id = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    let mut coeffs = up(b, &h);
    b.spline_prefilter(&mut coeffs).expect("prefilter");
    for interp in [Interpolation::Linear, Interpolation::Cubic] {
        let src = if interp == Interpolation::Cubic {
            &coeffs
        } else {
            &up(b, &h)
        };
        let mut out = b.zeros::<FloatOf<B>>(&[9, 10, 11]).expect("zeros");
        b.affine_transform(src, &id, &[0.0, 0.0, 0.0], interp, &mut out)
            .expect("identity");
        assert_close(
            &format!("identity {interp:?}"),
            &flat(&down(b, &out)),
            &flat(&to_f64(&h)),
            0.0,
            64.0 * eps::<B>(),
        );
        // shift by +1 along axis 2: out[..., k] = h[..., k + 1], zero past the edge
        b.affine_transform(src, &id, &[0.0, 0.0, 1.0], interp, &mut out)
            .expect("shift");
        let ho = down(b, &out);
        for i in 0..9 {
            for j in 0..10 {
                for k in 0..10 {
                    let (g, e) = (ho[[i, j, k]].as_f64(), h[[i, j, k + 1]].as_f64());
                    assert!(
                        (g - e).abs() <= 64.0 * eps::<B>(),
                        "shift {interp:?} at {:?}: {g} vs {e}",
                        (i, j, k)
                    );
                }
            }
        }
    }
}

pub fn rotate_quarter_turn_exact<B: Backend>(b: &B) {
    // A 90° turn about the centre maps the grid onto itself: interpolation must return the
    // permuted samples (pull-back dst[o] = src[R (o - c) + c]).
    let n = 8;
    let mut rng = Lcg::new(60);
    let h = host::<B>(&mut rng, &[n, n, n]);
    let r = [1.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 1.0, 0.0];
    let c = (n as f64 - 1.0) / 2.0;
    let off = [
        c - (r[0] * c + r[1] * c + r[2] * c),
        c - (r[3] * c + r[4] * c + r[5] * c),
        c - (r[6] * c + r[7] * c + r[8] * c),
    ];
    let mut coeffs = up(b, &h);
    b.spline_prefilter(&mut coeffs).expect("prefilter");
    let mut out = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
    b.affine_transform(&coeffs, &r, &off, Interpolation::Cubic, &mut out)
        .expect("rotate");
    let ho = down(b, &out);
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                // source = R (o - c) + c = (i, -(k - c) + c, (j - c) + c) = (i, n-1-k, j)
                let e = h[[i, n - 1 - k, j]].as_f64();
                let g = ho[[i, j, k]].as_f64();
                assert!(
                    (g - e).abs() <= 128.0 * eps::<B>(),
                    "quarter turn at {:?}: {g} vs {e}",
                    (i, j, k)
                );
            }
        }
    }
}

pub fn spline_prefilter_interpolates<B: Backend>(b: &B) {
    // Cubic interpolation of prefiltered coefficients of a linear ramp is the ramp itself
    // (B-splines reproduce polynomials of degree ≤ 3); the mirror boundary perturbs the
    // coefficients by ~0.27^k at k samples from an edge, so check ≥ 8 samples inside.
    let n = 32;
    let h = ArrayD::from_shape_fn(IxDyn(&[n, n]), |i| {
        FloatOf::<B>::from_f64(0.25 * i[0] as f64 + 0.5 * i[1] as f64)
    });
    let mut coeffs = up(b, &h);
    b.spline_prefilter(&mut coeffs).expect("prefilter");
    let mut out = b.zeros::<FloatOf<B>>(&[n, n]).expect("zeros");
    b.affine_transform(
        &coeffs,
        &[1.0, 0.0, 0.0, 1.0],
        &[0.5, 0.25],
        Interpolation::Cubic,
        &mut out,
    )
    .expect("half shift");
    let ho = down(b, &out);
    for i in 8..n - 9 {
        for j in 8..n - 9 {
            let e = 0.25 * (i as f64 + 0.5) + 0.5 * (j as f64 + 0.25);
            let g = ho[[i, j]].as_f64();
            assert!(
                (g - e).abs() < 1e-3_f64.max(1e4 * eps::<B>()),
                "ramp at ({i}, {j}): {g} vs {e}"
            );
        }
    }
}

// ---------------------------------------------------------------- filter

const MODES: [BorderMode; 5] = [
    BorderMode::Nearest,
    BorderMode::Reflect,
    BorderMode::Mirror,
    BorderMode::Wrap,
    BorderMode::Constant(0.25),
];

pub fn max_filter_matches_brute<B: Backend>(b: &B) {
    let mut rng = Lcg::new(70);
    for shape in [vec![23], vec![9, 14], vec![6, 7, 8]] {
        let h = rng.levels::<FloatOf<B>>(&shape, 9);
        let d = up(b, &h);
        for mode in MODES {
            for s in [1usize, 2, 3, 4, 5, 8] {
                let size = vec![s; shape.len()];
                let mut out = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
                b.max_filter(&d, &size, mode, &mut out).expect("max_filter");
                let e = reference::max_filter(&to_f64(&h), &size, mode);
                assert_eq!(
                    flat(&down(b, &out)),
                    flat(&e),
                    "max_filter {shape:?} size {s} {mode:?}"
                );
            }
        }
        if shape.len() == 2 {
            let mut out = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
            b.max_filter(&d, &[3, 6], BorderMode::Nearest, &mut out)
                .expect("anisotropic");
            let e = reference::max_filter(&to_f64(&h), &[3, 6], BorderMode::Nearest);
            assert_eq!(flat(&down(b, &out)), flat(&e), "anisotropic max_filter");
        }
    }
    let ints = rng.levels::<IntOf<B>>(&[10, 10], 5);
    let mut out = b.zeros::<IntOf<B>>(&[10, 10]).expect("zeros");
    b.max_filter(&up(b, &ints), &[3, 3], BorderMode::Nearest, &mut out)
        .expect("int max_filter");
    assert_eq!(
        flat(&down(b, &out)),
        flat(&reference::max_filter(
            &to_f64(&ints),
            &[3, 3],
            BorderMode::Nearest
        ))
    );
    let d = up(b, &ints);
    assert!(
        b.max_filter(&d, &[3], BorderMode::Nearest, &mut out)
            .is_err(),
        "size per axis"
    );
    assert!(
        b.max_filter(&d, &[0, 3], BorderMode::Nearest, &mut out)
            .is_err(),
        "zero size"
    );
}

pub fn max_filter_footprint_matches_brute<B: Backend>(b: &B) {
    let mut rng = Lcg::new(71);
    let h = rng.levels::<FloatOf<B>>(&[12, 11], 6);
    let d = up(b, &h);
    let cross = [false, true, false, true, true, true, false, true, false];
    let odd = [true, false, false, true, true, false];
    for (fp, fs) in [(&cross[..], &[3usize, 3][..]), (&odd[..], &[2, 3][..])] {
        for mode in MODES {
            let mut out = b.zeros::<FloatOf<B>>(&[12, 11]).expect("zeros");
            b.max_filter_footprint(&d, fp, fs, mode, &mut out)
                .expect("footprint");
            let e = reference::max_filter_footprint(&to_f64(&h), fp, fs, mode);
            assert_eq!(flat(&down(b, &out)), flat(&e), "footprint {fs:?} {mode:?}");
        }
    }
}

pub fn laplace_matches_reference<B: Backend>(b: &B) {
    let mut rng = Lcg::new(72);
    for shape in [vec![17], vec![8, 9], vec![5, 6, 7]] {
        let h = host::<B>(&mut rng, &shape);
        let d = up(b, &h);
        for mode in MODES {
            let mut out = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
            b.laplace(&d, mode, &mut out).expect("laplace");
            let e = reference::laplace(&to_f64(&h), mode);
            assert_close(
                &format!("laplace {shape:?} {mode:?}"),
                &flat(&down(b, &out)),
                &flat(&e),
                0.0,
                16.0 * eps::<B>(),
            );
        }
    }
}

pub fn peak_candidates_compacts<B: Backend>(b: &B) {
    let mut rng = Lcg::new(73);
    let shape = [20, 30];
    let mut h = rng.levels::<FloatOf<B>>(&shape, 12);
    h[[5, 5]] = FloatOf::<B>::nan();
    let d = up(b, &h);
    let mut f = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
    b.max_filter(&d, &[3, 3], BorderMode::Nearest, &mut f)
        .expect("max_filter");
    let hf = down(b, &f);
    let thr = FloatOf::<B>::from_f64(3.0);
    let border = [2usize, 3];
    let got = b
        .peak_candidates(&d, &f, thr, &border)
        .expect("peak_candidates");
    let mut expect = Vec::new();
    for i in 0..shape[0] {
        for j in 0..shape[1] {
            let v = h[[i, j]];
            let inside = i >= border[0]
                && i < shape[0] - border[0]
                && j >= border[1]
                && j < shape[1] - border[1];
            if inside && v == hf[[i, j]] && v > thr {
                expect.push((i * shape[1] + j, v.as_f64()));
            }
        }
    }
    let got: Vec<(usize, f64)> = got.iter().map(|&(i, v)| (i, v.as_f64())).collect();
    assert_eq!(got, expect);
    assert!(
        !got.iter().any(|&(i, _)| i == 5 * 30 + 5),
        "NaN is never a candidate"
    );
    let wrong = b.zeros::<FloatOf<B>>(&[30, 20]).expect("zeros");
    assert!(b.peak_candidates(&d, &wrong, thr, &border).is_err());
}

// ---------------------------------------------------------------- linalg

pub fn dense_matvec<B: Backend>(b: &B) {
    let mut rng = Lcg::new(80);
    let (a, x) = (host::<B>(&mut rng, &[6, 5]), host::<B>(&mut rng, &[3, 5]));
    let mut y = b.zeros::<FloatOf<B>>(&[3, 6]).expect("zeros");
    b.matvec_dense(&up(b, &a), &up(b, &x), &mut y)
        .expect("matvec_dense");
    let e = reference::matvec(&to_f64(&a), &to_f64(&x));
    assert_close(
        "matvec_dense",
        &flat(&down(b, &y)),
        &flat(&e),
        0.0,
        16.0 * eps::<B>(),
    );
    // one matrix per entry
    let per = host::<B>(&mut rng, &[3, 6, 5]);
    b.matvec_dense(&up(b, &per), &up(b, &x), &mut y)
        .expect("per-entry matvec");
    let hy = down(b, &y);
    for e in 0..3 {
        let ae = ArrayD::from_shape_fn(IxDyn(&[6, 5]), |i| per[[e, i[0], i[1]]].as_f64());
        let xe = ArrayD::from_shape_fn(IxDyn(&[1, 5]), |i| x[[e, i[1]]].as_f64());
        let ye = reference::matvec(&ae, &xe);
        for i in 0..6 {
            assert!((hy[[e, i]].as_f64() - ye[[0, i]]).abs() <= 16.0 * eps::<B>());
        }
    }
    let bad = b.zeros::<FloatOf<B>>(&[3, 4]).expect("zeros");
    assert!(b.matvec_dense(&up(b, &a), &bad, &mut y).is_err());
}

pub fn csr_matvec<B: Backend>(b: &B) {
    // 4×5 matrix with an empty row
    let indptr = ArrayD::from_shape_vec(IxDyn(&[5]), vec![0i64, 2, 2, 5, 6]).expect("shape");
    let indices = ArrayD::from_shape_vec(IxDyn(&[6]), vec![0i64, 3, 1, 2, 4, 0]).expect("shape");
    let vals = [1.0, -2.0, 0.5, 3.0, 1.5, -1.0];
    let data = ArrayD::from_shape_vec(
        IxDyn(&[6]),
        vals.iter().map(|&v| FloatOf::<B>::from_f64(v)).collect(),
    )
    .expect("shape");
    let flat_i64 = |a: &ArrayD<i64>| a.iter().copied().collect::<Vec<i64>>();
    let a = CsrMatrix::<B, FloatOf<B>>::from_parts(
        b,
        4,
        5,
        &flat_i64(&indptr),
        &flat_i64(&indices),
        data.view(),
    )
    .expect("valid CSR");
    let mut dense = ArrayD::<f64>::zeros(IxDyn(&[4, 5]));
    for r in 0..4 {
        for p in indptr[r] as usize..indptr[r + 1] as usize {
            dense[[r, indices[p] as usize]] = vals[p];
        }
    }
    let mut rng = Lcg::new(81);
    let x = host::<B>(&mut rng, &[2, 5]);
    let mut y = b.zeros::<FloatOf<B>>(&[2, 4]).expect("zeros");
    b.matvec_csr(&a, &up(b, &x), &mut y).expect("matvec_csr");
    let e = reference::matvec(&dense, &to_f64(&x));
    assert_close(
        "matvec_csr",
        &flat(&down(b, &y)),
        &flat(&e),
        0.0,
        16.0 * eps::<B>(),
    );
}

pub fn laplacian_stencil<B: Backend>(b: &B) {
    let mut rng = Lcg::new(82);
    for grid in [vec![9], vec![5, 7], vec![4, 5, 6], vec![1, 6]] {
        let n: usize = grid.iter().product();
        let x = host::<B>(&mut rng, &[2, n]);
        for (bc, periodic) in [(Boundary::DirichletZero, false), (Boundary::Periodic, true)] {
            let mut y = b.zeros::<FloatOf<B>>(&[2, n]).expect("zeros");
            b.laplacian(&grid, bc, &up(b, &x), &mut y)
                .expect("laplacian");
            let e = reference::laplacian(&grid, periodic, &to_f64(&x));
            assert_close(
                &format!("laplacian {grid:?} {bc:?}"),
                &flat(&down(b, &y)),
                &flat(&e),
                0.0,
                32.0 * eps::<B>(),
            );
        }
    }
    let x = b.zeros::<FloatOf<B>>(&[2, 10]).expect("zeros");
    let mut y = b.zeros::<FloatOf<B>>(&[2, 10]).expect("zeros");
    assert!(
        b.laplacian(&[3, 3], Boundary::DirichletZero, &x, &mut y)
            .is_err(),
        "grid size mismatch"
    );
    assert!(
        b.laplacian(&[1, 1, 2, 5], Boundary::DirichletZero, &x, &mut y)
            .is_err(),
        "4-D grid"
    );
}

pub fn row_ops<B: Backend>(b: &B) {
    let mut rng = Lcg::new(83);
    let (x, y0) = (host::<B>(&mut rng, &[3, 50]), host::<B>(&mut rng, &[3, 50]));
    let alpha: Vec<FloatOf<B>> = [0.5, -1.0, 2.0]
        .iter()
        .map(|&v| FloatOf::<B>::from_f64(v))
        .collect();
    let (dx, tol) = (up(b, &x), 8.0 * eps::<B>());
    let mut y = up(b, &y0);
    b.axpy_rows(&alpha, &dx, &mut y).expect("axpy_rows");
    let e: Vec<f64> = (0..150)
        .map(|i| {
            y0[[i / 50, i % 50]].as_f64() + alpha[i / 50].as_f64() * x[[i / 50, i % 50]].as_f64()
        })
        .collect();
    assert_close("axpy_rows", &flat(&down(b, &y)), &e, tol, tol);
    let mut y = up(b, &y0);
    b.xpay_rows(&dx, &alpha, &mut y).expect("xpay_rows");
    let e: Vec<f64> = (0..150)
        .map(|i| {
            x[[i / 50, i % 50]].as_f64() + alpha[i / 50].as_f64() * y0[[i / 50, i % 50]].as_f64()
        })
        .collect();
    assert_close("xpay_rows", &flat(&down(b, &y)), &e, tol, tol);
    let mut y = up(b, &y0);
    b.scale_rows(&alpha, &mut y).expect("scale_rows");
    let e: Vec<f64> = (0..150)
        .map(|i| alpha[i / 50].as_f64() * y0[[i / 50, i % 50]].as_f64())
        .collect();
    assert_close("scale_rows", &flat(&down(b, &y)), &e, tol, tol);
    assert!(b.scale_rows(&alpha[..2], &mut y).is_err(), "alpha per row");
}

pub fn cg_update_fused<B: Backend>(b: &B) {
    let mut rng = Lcg::new(84);
    let shape = [3, 40000];
    let (d, q, x0, r0) = (
        host::<B>(&mut rng, &shape),
        host::<B>(&mut rng, &shape),
        host::<B>(&mut rng, &shape),
        host::<B>(&mut rng, &shape),
    );
    let alpha: Vec<FloatOf<B>> = [0.3, 0.0, -1.25]
        .iter()
        .map(|&v| FloatOf::<B>::from_f64(v))
        .collect();
    let (mut x, mut r) = (up(b, &x0), up(b, &r0));
    let rr = b
        .cg_update_xr(&alpha, &up(b, &d), &up(b, &q), &mut x, &mut r)
        .expect("cg_update_xr");
    let (hx, hr) = (down(b, &x), down(b, &r));
    for row in 0..3 {
        let a = alpha[row];
        let mut acc = 0.0;
        for j in 0..shape[1] {
            let ex = x0[[row, j]] + a * d[[row, j]];
            let er = r0[[row, j]] - a * q[[row, j]];
            assert!((hx[[row, j]].as_f64() - ex.as_f64()).abs() <= 4.0 * eps::<B>());
            assert!((hr[[row, j]].as_f64() - er.as_f64()).abs() <= 4.0 * eps::<B>());
            acc += hr[[row, j]].as_f64().powi(2);
        }
        assert!(
            (rr[row] - acc).abs() <= 1e-9 * acc.max(1.0),
            "row {row}: {} vs {acc}",
            rr[row]
        );
    }
}

// ---------------------------------------------------------------- correlate

pub fn running_max_strict<B: Backend>(b: &B) {
    let shape = [2, 3];
    let f = |v: &[f64]| {
        ArrayD::from_shape_vec(
            IxDyn(&shape),
            v.iter().map(|&x| FloatOf::<B>::from_f64(x)).collect(),
        )
        .expect("shape")
    };
    let mut best = b
        .full::<FloatOf<B>>(&shape, FloatOf::<B>::neg_infinity())
        .expect("full");
    let mut idx = b
        .full::<IntOf<B>>(&shape, IntOf::<B>::from_f64(-1.0))
        .expect("full");
    let s0 = f(&[1.0, 2.0, 3.0, 0.0, f64::NAN, -1.0]);
    let s1 = f(&[1.0, 5.0, 2.0, 0.5, 7.0, f64::NAN]);
    b.running_max(&up(b, &s0), &mut best, &mut idx, IntOf::<B>::from_f64(0.0))
        .expect("running_max");
    b.running_max(&up(b, &s1), &mut best, &mut idx, IntOf::<B>::from_f64(1.0))
        .expect("running_max");
    assert_eq!(flat(&down(b, &best)), vec![1.0, 5.0, 3.0, 0.5, 7.0, -1.0]);
    assert_eq!(
        flat(&down(b, &idx)),
        vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0],
        "ties keep the earlier rotation; NaN never wins"
    );
}

/// A random array zero outside the corner box `nonzero`.
fn boxed<B: Backend>(rng: &mut Lcg, shape: &[usize], nonzero: &[usize]) -> ArrayD<FloatOf<B>> {
    let mut h = host::<B>(rng, shape);
    for (i, v) in h.indexed_iter_mut() {
        if (0..shape.len()).any(|k| i[k] >= nonzero[k]) {
            *v = FloatOf::<B>::from_f64(0.0);
        }
    }
    h
}

fn spectrum<B: Backend>(b: &B, plan: &B::Fft, h: &ArrayD<FloatOf<B>>) -> Arr<B, ComplexOf<B>> {
    let mut s = b
        .zeros::<ComplexOf<B>>(plan.complex_shape())
        .expect("zeros");
    b.rfft(plan, &up(b, h), &mut s).expect("rfft");
    s
}

/// The fused matching pipeline (`rfft_pruned_mul_conj` → `irfft_score_max_update`) equals
/// `rfft_pruned` → `complex_mul_conj` → `irfft` → `score_max_update` for every normalisation,
/// on geometries that take each CPU path (fused slabs or rows; the products fused with the
/// slowest axis' transforms or formed after a full forward), with the circular window and a
/// smaller, shifted one; and rejects mismatched factor/output counts.
pub fn fused_pipeline_equals_unfused<B: Backend>(b: &B) {
    #[allow(clippy::type_complexity)]
    let cases: [(&[usize], &[usize], &[usize], &[isize]); 6] = [
        (&[24, 20, 18], &[7, 5, 6], &[24, 20, 18], &[-3, -2, -4]),
        (&[24, 20, 18], &[7, 5, 6], &[13, 15, 9], &[5, -7, 2]),
        (
            &[96, 96, 96],
            &[24, 24, 24],
            &[96, 96, 96],
            &[-12, -12, -12],
        ),
        (&[96, 96, 96], &[24, 24, 24], &[60, 70, 50], &[20, -5, 7]),
        (&[1024, 520], &[40, 33], &[1024, 520], &[-20, -16]),
        (&[40, 36], &[9, 8], &[21, 30], &[3, 33]),
    ];
    let mut rng = Lcg::new(91);
    for (fast, nz, out, shift) in cases {
        let axes: Vec<usize> = (0..fast.len()).collect();
        let plan = b.fft_plan(fast, &axes).expect("plan");
        let cs = plan.complex_shape().to_vec();
        let f = host::<B>(&mut rng, fast);
        let f2 = f.mapv(|v| v * v);
        let (sf, sf2) = (spectrum(b, &plan, &f), spectrum(b, &plan, &f2));
        let t = up(b, &boxed::<B>(&mut rng, fast, nz));
        let m = up(b, &boxed::<B>(&mut rng, fast, nz).mapv(|v| v.abs()));
        let den = up(b, &host::<B>(&mut rng, out));
        let window = CorrWindow { shift };
        let scale = FloatOf::<B>::from_f64(1.0 / f.len() as f64);
        let (n, e) = (FloatOf::<B>::from_f64(30.0), FloatOf::<B>::from_f64(1e-3));
        let zeros = || b.zeros::<ComplexOf<B>>(&cs).expect("zeros");
        for kind in 0..3 {
            let run = |fused: bool| {
                let (mut x, mut y, mut y1, mut y2) = (zeros(), zeros(), zeros(), zeros());
                let mut work: Vec<Arr<B, FloatOf<B>>> =
                    (0..3).map(|_| b.zeros(fast).expect("zeros")).collect();
                // Earlier rotations: a running max to beat, and an index to keep.
                let mut best = up(b, &host::<B>(&mut Lcg::new(5), out));
                let mut idx = b
                    .full::<IntOf<B>>(out, IntOf::<B>::from_f64(0.0))
                    .expect("full");
                let mut ssum = b.full::<f64>(&[1], 0.5).expect("full");
                let index = IntOf::<B>::from_f64(3.0);
                if fused {
                    b.rfft_pruned_mul_conj(&plan, &t, nz, &mut x, &[&sf], &mut [&mut y])
                        .expect("rfft_pruned_mul_conj");
                    if kind == 2 {
                        b.rfft_pruned_mul_conj(
                            &plan,
                            &m,
                            nz,
                            &mut x,
                            &[&sf, &sf2],
                            &mut [&mut y1, &mut y2],
                        )
                        .expect("rfft_pruned_mul_conj");
                    }
                    let norm = match kind {
                        0 => SpectralNorm::Scaled { scale },
                        1 => SpectralNorm::Denominator {
                            scale,
                            inv_den: &den,
                        },
                        _ => SpectralNorm::LocalNorm {
                            scale,
                            c1: &mut y1,
                            c2: &mut y2,
                            n,
                            eps: e,
                        },
                    };
                    b.irfft_score_max_update(
                        &plan, &mut y, norm, &mut work, window, &mut best, &mut idx, index,
                        &mut ssum,
                    )
                    .expect("irfft_score_max_update");
                } else {
                    let (w0, wr) = work.split_at_mut(1);
                    b.rfft_pruned(&plan, &t, nz, &mut x).expect("rfft_pruned");
                    b.complex_mul_conj(&sf, &x, &mut y)
                        .expect("complex_mul_conj");
                    b.irfft(&plan, &mut y, &mut w0[0]).expect("irfft");
                    if kind == 2 {
                        b.rfft_pruned(&plan, &m, nz, &mut x).expect("rfft_pruned");
                        b.complex_mul_conj(&sf, &x, &mut y1)
                            .expect("complex_mul_conj");
                        b.complex_mul_conj(&sf2, &x, &mut y2)
                            .expect("complex_mul_conj");
                        b.irfft(&plan, &mut y1, &mut wr[0]).expect("irfft");
                        b.irfft(&plan, &mut y2, &mut wr[1]).expect("irfft");
                    }
                    let norm = match kind {
                        0 => ScoreNorm::Scaled { scale },
                        1 => ScoreNorm::Denominator {
                            scale,
                            inv_den: &den,
                        },
                        _ => ScoreNorm::LocalNorm {
                            scale,
                            c1: &wr[0],
                            c2: &wr[1],
                            n,
                            eps: e,
                        },
                    };
                    b.score_max_update(&w0[0], norm, window, &mut best, &mut idx, index, &mut ssum)
                        .expect("score_max_update");
                }
                (down(b, &best), down(b, &idx), down(b, &ssum)[[0]])
            };
            let (fb, fi, fs) = run(true);
            let (ub, ui, us) = run(false);
            let what = format!("fused pipeline (norm {kind}) on {fast:?} box {nz:?} → {out:?}");
            assert!(flat(&fi) == flat(&ui), "{what}: indices differ");
            assert!(
                fi.iter().any(|&v| v == IntOf::<B>::from_f64(3.0)),
                "{what}: nothing updated"
            );
            assert_close(&format!("{what}: best"), &flat(&fb), &flat(&ub), 0.0, 0.0);
            assert_close(&format!("{what}: ssum"), &[fs], &[us], 1e-9, 0.0);
        }
        let (mut x, mut one) = (zeros(), zeros());
        assert!(
            b.rfft_pruned_mul_conj(&plan, &t, nz, &mut x, &[&sf, &sf2], &mut [&mut one])
                .is_err(),
            "two factors, one output"
        );
    }
}

/// `gather_window` equals the host kernel for both extensions, negative and past-the-end
/// starts and a window shorter than the destination, on a volume large enough to be split.
pub fn gather_window_matches_host<B: Backend>(b: &B) {
    let mut rng = Lcg::new(92);
    let sshape = [37, 40, 20];
    let src = host::<B>(&mut rng, &sshape);
    let dshape = [50, 41, 23];
    let period = [64, 48, 27];
    for ext in [
        WindowExtension::Periodic(&period),
        WindowExtension::Symmetric,
    ] {
        for (start, len) in [
            ([-5isize, 3, -7], [45usize, 38, 23]),
            ([30, -41, 50], [50, 41, 10]),
        ] {
            let mut want =
                ArrayD::<FloatOf<B>>::from_elem(IxDyn(&dshape), FloatOf::<B>::from_f64(7.0));
            host::gather_window(
                src.as_slice().expect("contiguous"),
                &sshape,
                &start,
                &len,
                ext,
                want.as_slice_mut().expect("contiguous"),
                &dshape,
            )
            .expect("host gather_window");
            let mut got = up(
                b,
                &ArrayD::from_elem(IxDyn(&dshape), FloatOf::<B>::from_f64(7.0)),
            );
            b.gather_window(&up(b, &src), &start, &len, ext, &mut got)
                .expect("gather_window");
            assert!(
                down(b, &got) == want,
                "gather_window {ext:?} start {start:?} len {len:?}"
            );
        }
    }
}

/// Transforms over axes strictly inside the array, where a device plan repeats at offsets
/// of an odd number of reals (`nin·inner` odd): cuFFT wants R2C inputs and C2R outputs
/// aligned to the complex type, so a backend must not hand it those offsets as they are.
/// Also a non-contiguous axis set whose first real step is strided, and odd batch sizes.
pub fn fft_inner_axes_odd_slabs<B: Backend>(b: &B) {
    check_fft(b, &[2, 3, 5], &[1], 120);
    check_fft(b, &[3, 5, 3], &[1], 121);
    check_fft(b, &[3, 3, 5, 3], &[1, 2], 122);
    check_fft(b, &[2, 5, 3, 3], &[0, 2], 123);
    check_fft(b, &[3, 7, 9], &[1], 124);
    check_fft(b, &[5, 3], &[1], 125);
}

/// `gather` returns the values at flat indices in the order given (repeats and all), for a
/// float map and an integer map, rejects an index past the end, and is empty for no indices.
pub fn gather_matches_host<B: Backend>(b: &B) {
    let mut rng = Lcg::new(130);
    let h = host::<B>(&mut rng, &[5, 6, 7]);
    let d = up(b, &h);
    let flat_h = h.as_slice().expect("contiguous");
    let idx = [209usize, 0, 17, 17, 100, 3];
    let got = b.gather(&d, &idx).expect("gather");
    let want: Vec<FloatOf<B>> = idx.iter().map(|&i| flat_h[i]).collect();
    assert!(got == want, "gather {got:?} vs {want:?}");
    let ints = ArrayD::from_shape_fn(IxDyn(&[4, 9]), |i| (i[0] * 100 + i[1]) as i64);
    let di = up(b, &ints);
    assert_eq!(
        b.gather(&di, &[35, 9, 1]).expect("gather i64"),
        vec![308, 100, 1]
    );
    assert!(b.gather(&d, &[210]).is_err(), "index past the end");
    assert!(b.gather(&d, &[]).expect("empty").is_empty());
}

/// The argument rules on which the CPU is the reference and every backend must agree: an
/// empty `affine_transform` source is an error (not zeros), `flip` rejects a repeated axis
/// (not a double flip), `affine_transform` takes 1 to 3 axes, `laplacian_dot` needs one
/// `active` flag per row (a short list is not "all active").
pub fn cpu_reference_argument_rules<B: Backend>(b: &B) {
    let d = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    let mut same = b.zeros::<FloatOf<B>>(&[4, 4]).expect("zeros");
    let e = b
        .flip(&d, &[1, 1], &mut same)
        .expect_err("repeated flip axis");
    assert!(e.to_string().contains("repeated"), "{e}");
    let empty = b.zeros::<FloatOf<B>>(&[0, 4]).expect("zeros");
    let id2 = [1.0, 0.0, 0.0, 1.0];
    let e = b
        .affine_transform(&empty, &id2, &[0.0; 2], Interpolation::Linear, &mut same)
        .expect_err("empty source");
    assert!(matches!(e, crate::Error::Empty(_)), "{e}");
    let mut nothing = b.zeros::<FloatOf<B>>(&[0, 4]).expect("zeros");
    b.affine_transform(&d, &id2, &[0.0; 2], Interpolation::Linear, &mut nothing)
        .expect("an empty destination has nothing to do");
    let mut id4 = [0.0; 16];
    for k in 0..4 {
        id4[k * 5] = 1.0;
    }
    let v4 = b.zeros::<FloatOf<B>>(&[2, 2, 2, 2]).expect("zeros");
    let mut w4 = b.zeros::<FloatOf<B>>(&[2, 2, 2, 2]).expect("zeros");
    assert!(
        b.affine_transform(&v4, &id4, &[0.0; 4], Interpolation::Linear, &mut w4)
            .is_err(),
        "4-D affine_transform"
    );
    let x = b.zeros::<FloatOf<B>>(&[3, 12]).expect("zeros");
    let mut y = b.zeros::<FloatOf<B>>(&[3, 12]).expect("zeros");
    for active in [&[true][..], &[], &[true, false, true, true]] {
        assert!(
            b.laplacian_dot(&[3, 4], Boundary::DirichletZero, &x, &mut y, active)
                .is_err(),
            "laplacian_dot with {} flags for 3 rows",
            active.len()
        );
    }
    let dots = b
        .laplacian_dot(
            &[3, 4],
            Boundary::DirichletZero,
            &x,
            &mut y,
            &[true, false, true],
        )
        .expect("laplacian_dot");
    assert_eq!(dots.len(), 3);
}
