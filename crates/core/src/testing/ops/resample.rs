//! Resample: pad, crop, flip, roll, affine transforms, spline prefilter.

use ndarray::{ArrayD, IxDyn};

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, assert_close, flat, reference};

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

/// `affine_transform_reversed` is `flip ∘ affine_transform ∘ flip` (all axes), including the
/// in/out decision at points on the box edge: one of pytme's Karney rotations of an 8³ box
/// (entries 0, ±1 and −5.55e-17; offset rounded to f32) puts sample points exactly on the edge,
/// where the direct transform of the unreversed box decides differently.
pub fn affine_reversed_is_flip_affine_flip<B: Backend>(b: &B) {
    let n = 8;
    let mut rng = Lcg::new(70);
    let h = host::<B>(&mut rng, &[n, n, n]).mapv(|v| v + FloatOf::<B>::from_f64(2.0));
    let (a, s) = (0.797_308_385, 0.603_572_130);
    let karney = [
        0.0,
        a,
        -s,
        0.0,
        -s,
        -a,
        -1.0,
        0.0,
        -5.551_115_123_125_783e-17,
    ];
    let (c1, c2) = (0.3f64.cos(), 0.3f64.sin());
    let generic = [
        c1,
        -c2,
        0.0,
        c2 * 0.6,
        c1 * 0.6,
        -0.8,
        c2 * 0.8,
        c1 * 0.8,
        0.6,
    ];
    let c = (n as f64 - 1.0) / 2.0;
    let all = [0usize, 1, 2];
    for m in [karney, generic] {
        let off: Vec<f64> = (0..3)
            .map(|i| (c - (0..3).map(|j| m[i * 3 + j] * c).sum::<f64>()) as f32 as f64)
            .collect();
        for interp in [Interpolation::Linear, Interpolation::Cubic] {
            let mut src = up(b, &h);
            if interp == Interpolation::Cubic {
                b.spline_prefilter(&mut src).expect("prefilter");
            }
            let mut rev = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.flip(&src, &all, &mut rev).expect("flip");
            let mut tmp = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.affine_transform(&rev, &m, &off, interp, &mut tmp)
                .expect("affine");
            let mut want = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.flip(&tmp, &all, &mut want).expect("flip");
            let mut got = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.affine_transform_reversed(&src, &m, &off, interp, &mut got)
                .expect("reversed");
            let mut direct = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.affine_transform(&src, &m, &off, interp, &mut direct)
                .expect("direct");
            let (w, g, d) = (
                flat(&down(b, &want)),
                flat(&down(b, &got)),
                flat(&down(b, &direct)),
            );
            for (i, (x, y)) in w.iter().zip(&g).enumerate() {
                assert_eq!(*x == 0.0, *y == 0.0, "{interp:?} voxel {i}: {x} vs {y}");
            }
            assert_close("reversed", &g, &w, 0.0, 64.0 * eps::<B>());
            let edge = w
                .iter()
                .zip(&d)
                .filter(|(x, y)| (*x - *y).abs() > 0.1)
                .count();
            if m == karney {
                assert!(
                    edge > 0,
                    "{interp:?}: the Karney rotation must hit the edge"
                );
            } else {
                assert_eq!(edge, 0, "{interp:?}: a generic rotation agrees both ways");
            }
        }
    }
}

/// `affine_transform_reversed_in(…, AxisOrder::Reversed, …)` is what pytme computes on the
/// transposed arrays (an MRC file as pytme holds it): for every rotation `R` of pytme's
/// 648-rotation set (pytme's frame; `P·R·P` here) on an 8³ box with non-zero edge voxels, the
/// transpose of `affine_transform_reversed(srcᵀ, R, offset)` with pytme's offset, including
/// which edge points fall inside. The same call in this frame's own summation order
/// (`affine_transform_reversed`) decides some of those points the other way.
pub fn affine_reversed_in_the_transposed_frame<B: Backend>(b: &B) {
    use crate::algo::rotations::{RotationSet, embedded_quaternions, reverse_axes};
    use crate::shape::AxisOrder;
    let n = 8;
    let mut rng = Lcg::new(71);
    let h = host::<B>(&mut rng, &[n, n, n]).mapv(|v| v + FloatOf::<B>::from_f64(2.0));
    let set = RotationSet::from_pytme_quaternions(&embedded_quaternions("c48u27").expect("set"))
        .expect("pytme's set");
    let c = (n as f64 - 1.0) / 2.0;
    let t = |a: &ArrayD<FloatOf<B>>| a.clone().reversed_axes().as_standard_layout().into_owned();
    for interp in [Interpolation::Linear, Interpolation::Cubic] {
        let mut src = up(b, &h);
        if interp == Interpolation::Cubic {
            b.spline_prefilter(&mut src).expect("prefilter");
        }
        let src_t = up(b, &t(&down(b, &src)));
        let mut differ = 0;
        for r in 0..set.len() {
            // pytme's float32 matrix.
            let m: Vec<f64> = set.matrix(r).iter().map(|&v| v as f32 as f64).collect();
            let rp = reverse_axes(&m, 3);
            // pytme's float32 offset c − R·c, in its own axis order.
            let off_p: Vec<f64> = (0..3)
                .map(|i| (c - (0..3).map(|j| rp[i * 3 + j] * c).sum::<f64>()) as f32 as f64)
                .collect();
            let off: Vec<f64> = off_p.iter().rev().copied().collect();
            let mut tmp = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.affine_transform_reversed(&src_t, &rp, &off_p, interp, &mut tmp)
                .expect("pytme's frame");
            let want = flat(&t(&down(b, &tmp)));
            let mut got = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.affine_transform_reversed_in(&src, &m, &off, interp, AxisOrder::Reversed, &mut got)
                .expect("transposed frame");
            let got = flat(&down(b, &got));
            for (i, (x, y)) in want.iter().zip(&got).enumerate() {
                assert_eq!(
                    *x == 0.0,
                    *y == 0.0,
                    "{interp:?} rotation {r} voxel {i}: {x} vs {y}"
                );
            }
            assert_close("transposed frame", &got, &want, 0.0, 64.0 * eps::<B>());
            let mut own = b.zeros::<FloatOf<B>>(&[n, n, n]).expect("zeros");
            b.affine_transform_reversed(&src, &m, &off, interp, &mut own)
                .expect("own order");
            let own = flat(&down(b, &own));
            differ += usize::from(want.iter().zip(&own).any(|(x, y)| (x - y).abs() > 0.1));
        }
        assert!(
            differ > 0,
            "{interp:?}: no rotation of the set hits the edge differently"
        );
    }
}
