//! Memory: allocation, transfers, casts, errors.

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, flat};

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
