//! Property tests (proptest), generic over the backend.

use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::{cases, flat, reference};
use crate::backend::*;
use crate::dtype::{Float, Real};

pub(crate) fn runner(default_cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases: cases(default_cases),
        failure_persistence: None,
        ..Config::default()
    })
}

fn shape_strategy(max_rank: usize, max_len: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1..=max_len, 1..=max_rank)
}

/// irfft(rfft(x)) = N·x for random shapes, axes and data.
pub fn prop_fft_roundtrip<B: Backend>(b: &B) {
    let strat = shape_strategy(3, 12).prop_flat_map(|shape| {
        let n: usize = shape.iter().product();
        let rank = shape.len();
        (
            Just(shape),
            proptest::collection::vec(-1.0f64..1.0, n),
            1usize..=rank,
            0usize..rank,
        )
    });
    runner(16)
        .run(&strat, |(shape, data, naxes, first)| {
            let first = first.min(shape.len() - naxes);
            let axes: Vec<usize> = (first..first + naxes).collect();
            let h = ArrayD::from_shape_vec(
                IxDyn(&shape),
                data.iter().map(|&v| FloatOf::<B>::from_f64(v)).collect(),
            )
            .expect("shape");
            let plan = b.fft_plan(&shape, &axes).expect("plan");
            let d = b.upload(h.view()).expect("upload");
            let mut spec = b
                .zeros::<ComplexOf<B>>(plan.complex_shape())
                .expect("zeros");
            b.rfft(&plan, &d, &mut spec).expect("rfft");
            let mut back = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
            b.irfft(&plan, &mut spec, &mut back).expect("irfft");
            let n: usize = axes.iter().map(|&a| shape[a]).product();
            let got = flat(&b.download(&back).expect("download"));
            let tol = 64.0 * <FloatOf<B> as Float>::EPS.as_f64() * (n as f64).log2().max(1.0);
            for (g, e) in got.iter().zip(flat(&h)) {
                prop_assert!((g / n as f64 - e).abs() <= tol, "{g} vs {e}");
            }
            Ok(())
        })
        .expect("FFT round trip property");
}

/// Rotating a smooth volume by R then by Rᵀ (cubic, prefiltered) returns it in the interior.
pub fn prop_rotate_back<B: Backend>(b: &B) {
    let strat = (
        0.0f64..std::f64::consts::TAU,
        -1.0f64..1.0,
        0.0f64..std::f64::consts::TAU,
        0.05f64..0.2,
    );
    runner(8)
        .run(&strat, |(phi, ct, psi, freq)| {
            let n = 20;
            let c = (n as f64 - 1.0) / 2.0;
            let h = ArrayD::from_shape_fn(IxDyn(&[n, n, n]), |i| {
                let r2 = (0..3).map(|k| (i[k] as f64 - c).powi(2)).sum::<f64>();
                FloatOf::<B>::from_f64(
                    (-(r2) * freq * freq).exp() * (1.0 + 0.3 * ((i[0] as f64 - c) * freq).sin()),
                )
            });
            let theta = ct.acos();
            let r = zyz(phi, theta, psi);
            let rt = [r[0], r[3], r[6], r[1], r[4], r[7], r[2], r[5], r[8]];
            let rot = |src: &Arr<B, FloatOf<B>>, m: &[f64; 9]| -> Arr<B, FloatOf<B>> {
                let mut coeffs = b.duplicate(src).expect("dup");
                b.spline_prefilter(&mut coeffs).expect("prefilter");
                let off: Vec<f64> = (0..3)
                    .map(|k| c - (m[3 * k] + m[3 * k + 1] + m[3 * k + 2]) * c)
                    .collect();
                let mut out = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
                b.affine_transform(&coeffs, m, &off, Interpolation::Cubic, &mut out)
                    .expect("rotate");
                out
            };
            let d = b.upload(h.view()).expect("upload");
            let back = b.download(&rot(&rot(&d, &r), &rt)).expect("download");
            for (ix, v) in back.indexed_iter() {
                let r2 = (0..3).map(|k| (ix[k] as f64 - c).powi(2)).sum::<f64>();
                if r2 < (0.3 * n as f64).powi(2) {
                    let e = h[&ix].as_f64();
                    prop_assert!(
                        (v.as_f64() - e).abs() < 0.02,
                        "at {ix:?}: {} vs {e}",
                        v.as_f64()
                    );
                }
            }
            Ok(())
        })
        .expect("rotate back property");
}

fn zyz(phi: f64, theta: f64, psi: f64) -> [f64; 9] {
    let rz = |a: f64| [a.cos(), -a.sin(), 0.0, a.sin(), a.cos(), 0.0, 0.0, 0.0, 1.0];
    let ry = |a: f64| [a.cos(), 0.0, a.sin(), 0.0, 1.0, 0.0, -a.sin(), 0.0, a.cos()];
    let mul = |a: [f64; 9], b: [f64; 9]| {
        let mut m = [0.0; 9];
        for i in 0..3 {
            for j in 0..3 {
                m[3 * i + j] = (0..3).map(|k| a[3 * i + k] * b[3 * k + j]).sum();
            }
        }
        m
    };
    mul(mul(rz(phi), ry(theta)), rz(psi))
}

/// The separable max filter equals brute force on random maps with ties, any size and mode.
pub fn prop_max_filter_brute<B: Backend>(b: &B) {
    let modes = prop_oneof![
        Just(BorderMode::Nearest),
        Just(BorderMode::Reflect),
        Just(BorderMode::Mirror),
        Just(BorderMode::Wrap),
        (-2.0f64..3.0).prop_map(|c| BorderMode::Constant(c.round())),
    ];
    let strat = shape_strategy(3, 9).prop_flat_map(move |shape| {
        let n: usize = shape.iter().product();
        let rank = shape.len();
        (
            Just(shape),
            proptest::collection::vec(0u8..4, n),
            proptest::collection::vec(1usize..7, rank),
            modes.clone(),
        )
    });
    runner(24)
        .run(&strat, |(shape, data, size, mode)| {
            let h = ArrayD::from_shape_vec(
                IxDyn(&shape),
                data.iter()
                    .map(|&v| FloatOf::<B>::from_f64(v as f64))
                    .collect(),
            )
            .expect("shape");
            let d = b.upload(h.view()).expect("upload");
            let mut out = b.zeros::<FloatOf<B>>(&shape).expect("zeros");
            b.max_filter(&d, &size, mode, &mut out).expect("max_filter");
            let e = reference::max_filter(&h.mapv(|v| v.as_f64()), &size, mode);
            prop_assert_eq!(flat(&b.download(&out).expect("download")), flat(&e));
            Ok(())
        })
        .expect("max filter property");
}

/// Reductions equal f64 sums of the same values.
pub fn prop_reductions_f64<B: Backend>(b: &B) {
    let strat = proptest::collection::vec(-1e3f64..1e3, 1..70000);
    runner(12)
        .run(&strat, |data| {
            let h = ArrayD::from_shape_vec(
                IxDyn(&[data.len()]),
                data.iter().map(|&v| FloatOf::<B>::from_f64(v)).collect(),
            )
            .expect("shape");
            let vals = flat(&h);
            let d = b.upload(h.view()).expect("upload");
            let s: f64 = vals.iter().sum();
            let s2: f64 = vals.iter().map(|v| v * v).sum();
            let scale = vals.iter().map(|v| v.abs()).sum::<f64>().max(1.0);
            prop_assert!((b.sum(&d).expect("sum").as_f64() - s).abs() <= 1e-12 * scale);
            prop_assert!(
                (b.sum_sq(&d).expect("sum_sq").as_f64() - s2).abs() <= 1e-12 * s2.max(1.0)
            );
            prop_assert!((b.dot(&d, &d).expect("dot").as_f64() - s2).abs() <= 1e-12 * s2.max(1.0));
            let mx = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            prop_assert_eq!(b.max(&d).expect("max").as_f64(), mx);
            Ok(())
        })
        .expect("reductions property");
}
