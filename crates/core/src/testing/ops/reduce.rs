//! Reduce: sums, extrema, row reductions, top-k.

use ndarray::{ArrayD, IxDyn};
use num_traits::Float as _;

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, flat};

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
    // The sums come in the backend's accumulator type.
    let (s, s2, dt): (AccumOf<B>, AccumOf<B>, AccumOf<B>) = (
        b.sum(&d).expect("sum"),
        b.sum_sq(&d).expect("sum_sq"),
        b.dot(&d, &d2).expect("dot"),
    );
    assert!((s.as_f64() - sum).abs() <= tol);
    assert!((s2.as_f64() - v.iter().map(|x| x * x).sum::<f64>()).abs() <= tol);
    assert!((dt.as_f64() - v.iter().zip(&w).map(|(x, y)| x * y).sum::<f64>()).abs() <= tol);
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
    let (m2, s2): (AccumOf<B>, AccumOf<B>) = b.mean_std(&d).expect("mean_std");
    let (m2, s2) = (m2.as_f64(), s2.as_f64());
    assert!(
        (m2 - mean).abs() < 1e-12 && (s2 - var.sqrt()).abs() < 1e-9,
        "{m2} {s2}"
    );
    let ints = up(
        b,
        &h.mapv(|x| IntOf::<B>::from_f64((x.as_f64() * 100.0).round())),
    );
    let isum: f64 = v.iter().map(|x| (x * 100.0).round()).sum();
    assert_eq!(b.sum(&ints).expect("sum of ints").as_f64(), isum);
}

/// The accumulator is overflow-safe for the float type: sums, squares and dot products that
/// the float type cannot hold (2²⁴ + 7 in `f32`; (2²⁴)² + 7 in `f64`) come back exact.
pub fn reduce_accumulates_beyond_the_float_type<B: Backend>(b: &B) {
    assert!(std::mem::size_of::<AccumOf<B>>() >= std::mem::size_of::<FloatOf<B>>());
    let f = FloatOf::<B>::from_f64;
    let mut v = vec![f(1.0); 8];
    v[0] = f(16_777_216.0); // 2^24
    let d = up(
        b,
        &ArrayD::from_shape_vec(IxDyn(&[1, 8]), v).expect("shape"),
    );
    let want = 16_777_223.0;
    assert_eq!(b.sum(&d).expect("sum").as_f64(), want);
    assert_eq!(b.sum_rows(&d).expect("sum_rows")[0].as_f64(), want);
    let ints = up(
        b,
        &ArrayD::from_shape_vec(IxDyn(&[3]), vec![IntOf::<B>::from_f64(i32::MAX as f64); 3])
            .expect("shape"),
    );
    assert_eq!(
        b.sum(&ints).expect("sum of ints").as_f64(),
        3.0 * i32::MAX as f64
    );
    // Squares: 4096² = 2^24 is exact in f32, 2^24 + 7 of them is not.
    let mut q = vec![f(1.0); 8];
    q[0] = f(4096.0);
    let dq = up(
        b,
        &ArrayD::from_shape_vec(IxDyn(&[1, 8]), q).expect("shape"),
    );
    assert_eq!(b.sum_sq(&dq).expect("sum_sq").as_f64(), want);
    assert_eq!(b.dot(&dq, &dq).expect("dot").as_f64(), want);
    assert_eq!(b.sum_sq_rows(&dq).expect("sum_sq_rows")[0].as_f64(), want);
    assert_eq!(b.dot_rows(&dq, &dq).expect("dot_rows")[0].as_f64(), want);
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
    assert_eq!(b.sum(&empty).expect("sum of empty").as_f64(), 0.0);
}

pub fn reduce_rows<B: Backend>(b: &B) {
    let mut rng = Lcg::new(5);
    for (rows, n) in [(1, 1000), (3, 17), (7, 40000)] {
        let (h, h2) = (
            host::<B>(&mut rng, &[rows, n]),
            host::<B>(&mut rng, &[rows, n]),
        );
        let (d, d2) = (up(b, &h), up(b, &h2));
        let f64s = |v: Vec<AccumOf<B>>| -> Vec<f64> { v.into_iter().map(|x| x.as_f64()).collect() };
        let sums = f64s(b.sum_rows(&d).expect("sum_rows"));
        let dots = f64s(b.dot_rows(&d, &d2).expect("dot_rows"));
        let sqs = f64s(b.sum_sq_rows(&d).expect("sum_sq_rows"));
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
