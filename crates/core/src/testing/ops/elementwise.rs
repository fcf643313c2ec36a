//! Elementwise: real and complex arithmetic, shape errors.

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;
use num_traits::Float as _;

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, assert_close, flat};

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
        b.scalar_assign(op, &mut a3, 0.75).expect("scalar_assign");
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
    b.axpy(-1.5, &da, &mut y).expect("axpy");
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
    b.complex_scale(&mut a, -2.0).expect("scale");
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
    assert!(b.axpy(1.0, &c, &mut a2).is_err());
    let mut bad_out = b.zeros::<FloatOf<B>>(&[6]).expect("zeros");
    assert!(b.binary(BinaryOp::Mul, &a, &a, &mut bad_out).is_err());
}
