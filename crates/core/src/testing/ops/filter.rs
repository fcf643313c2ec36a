//! Filter: max filters, Laplacian, peak candidates, gather.

use ndarray::{ArrayD, IxDyn};
use num_traits::Float as _;

use super::*;
use crate::backend::*;
use crate::dtype::Real;
use crate::testing::{Lcg, assert_close, flat, reference};

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
