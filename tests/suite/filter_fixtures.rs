//! The CPU filters against scipy: every `mf_*` query of `tests/fixtures/peaks/*`
//! (`np.argwhere(ndi.maximum_filter(score, **params) == score)`) and the stored filtered maps
//! reproduced exactly, plus a brute-force property test over all modes and odd/even sizes.

use monomorph::prelude::*;
use monomorph::{BorderMode, Precision, Real};
use ndarray::{ArrayD, Dimension, IxDyn};
use proptest::prelude::*;

use crate::common::{fixture, json, npy};

const CASES: [&str; 4] = ["field2d_256", "plateau_ties_2d", "border_2d", "constant_2d"];

fn mode_of(params: &serde_json::Value) -> BorderMode {
    let cval = params["cval"].as_f64().unwrap_or(0.0);
    match params["mode"].as_str().unwrap_or("reflect") {
        "nearest" => BorderMode::Nearest,
        "reflect" => BorderMode::Reflect,
        "mirror" => BorderMode::Mirror,
        "wrap" => BorderMode::Wrap,
        "constant" => BorderMode::Constant(cval),
        m => panic!("unknown mode {m}"),
    }
}

/// scipy's filtered map for one query's parameters, on the backend `Cpu<P>`.
fn filtered<P: Precision>(
    score: &ArrayD<P::Float>,
    params: &serde_json::Value,
) -> ArrayD<P::Float> {
    let cpu = Cpu::<P>::new();
    let mode = mode_of(params);
    let mut out = ArrayD::<P::Float>::zeros(score.shape());
    if let Some(fp) = params.get("footprint") {
        let rows = fp.as_array().expect("footprint rows");
        let fshape = vec![rows.len(), rows[0].as_array().expect("row").len()];
        let flat: Vec<bool> = rows
            .iter()
            .flat_map(|r| {
                r.as_array()
                    .expect("row")
                    .iter()
                    .map(|v| v.as_i64() != Some(0))
            })
            .collect();
        cpu.max_filter_footprint(score, &flat, &fshape, mode, &mut out)
            .expect("max_filter_footprint");
    } else {
        let size = params["size"].as_u64().expect("size") as usize;
        cpu.max_filter(score, &vec![size; score.ndim()], mode, &mut out)
            .expect("max_filter");
    }
    out
}

/// Coordinates where `a == b`, raster order (np.argwhere).
fn argwhere_eq<T: PartialEq>(a: &ArrayD<T>, b: &ArrayD<T>) -> Vec<Vec<i64>> {
    a.indexed_iter()
        .zip(b.iter())
        .filter(|((_, x), y)| *x == *y)
        .map(|((i, _), _)| i.slice().iter().map(|&v| v as i64).collect())
        .collect()
}

fn rows_of(q: &ArrayD<i32>) -> Vec<Vec<i64>> {
    if q.ndim() != 2 {
        return Vec::new();
    }
    q.outer_iter()
        .map(|r| r.iter().map(|&v| v as i64).collect())
        .collect()
}

fn check_case<P: Precision>(case: &str) -> usize {
    let meta = json(&format!("peaks/{case}/case.json"));
    let score32: ArrayD<f32> = npy(&format!("peaks/{case}/score.npy"));
    let score = score32.mapv(|v| <P::Float as Real>::from_f64(v as f64));
    let mut checked = 0;
    for q in meta["queries"].as_array().expect("queries") {
        let id = q["id"].as_str().expect("id");
        if !id.starts_with("mf_") {
            continue;
        }
        let f = filtered::<P>(&score, &q["params"]);
        let expected: ArrayD<i32> = npy(&format!(
            "peaks/{case}/{}",
            q["expected"].as_str().expect("file")
        ));
        let got = argwhere_eq(&f, &score);
        let want = rows_of(&expected);
        assert_eq!(
            got.len(),
            q["count"].as_u64().expect("count") as usize,
            "{case}/{id} count"
        );
        assert_eq!(got, want, "{case}/{id}: coordinates differ from scipy");
        if let Some(file) = q.get("filtered").and_then(|v| v.as_str()) {
            let map: ArrayD<f32> = npy(&format!("peaks/{case}/{file}"));
            let map = map.mapv(|v| <P::Float as Real>::from_f64(v as f64));
            assert_eq!(
                f, map,
                "{case}/{id}: filtered map differs from scipy's {file}"
            );
        }
        checked += 1;
    }
    // The stored size-5 maps (also where no query names them).
    for (file, mode) in [
        ("maxfilter_size5_nearest.npy", BorderMode::Nearest),
        ("maxfilter_size5_constant0.npy", BorderMode::Constant(0.0)),
    ] {
        if !fixture(&format!("peaks/{case}/{file}")).exists() {
            continue;
        }
        let map: ArrayD<f32> = npy(&format!("peaks/{case}/{file}"));
        let map = map.mapv(|v| <P::Float as Real>::from_f64(v as f64));
        let mut out = ArrayD::<P::Float>::zeros(score.shape());
        Cpu::<P>::new()
            .max_filter(&score, &[5, 5], mode, &mut out)
            .expect("max_filter");
        assert_eq!(out, map, "{case}: {file}");
        checked += 1;
    }
    checked
}

#[test]
fn mf_queries_match_scipy_exactly_single() {
    for case in CASES {
        let n = check_case::<monomorph::Single>(case);
        println!("{case}: {n} max-filter checks equal scipy exactly (f32)");
        assert!(n >= 7, "{case}: only {n} mf checks found");
    }
}

#[test]
fn mf_queries_match_scipy_exactly_double() {
    for case in CASES {
        let n = check_case::<monomorph::Double>(case);
        assert!(n >= 7, "{case}: only {n} mf checks found");
    }
}

#[test]
fn laplace_matches_the_lcc_fixture() {
    // pytme's LCC template is scipy.ndimage.laplace(template) (mode reflect, float32); the
    // fixture stores it rotated, and the identity rotation is rotations.npy[0]. The cubic
    // spline at integer coordinates is exact up to round-off, so compare loosely here; the
    // strict check is in resample_fixtures.
    let t: ArrayD<f32> = npy("matching/2d_lcc/template.npy");
    let rot: ArrayD<f32> = npy("matching/2d_lcc/rotated_templates.npy");
    let cpu = Cpu::<Single>::new();
    let mut lap = ArrayD::<f32>::zeros(t.shape());
    cpu.laplace(&t, BorderMode::Reflect, &mut lap)
        .expect("laplace");
    let first = rot.index_axis(ndarray::Axis(0), 0);
    let err = lap
        .iter()
        .zip(first.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        err < 1e-4,
        "laplace vs identity-rotated LCC template: {err}"
    );
}

#[test]
fn laplace_brute_force_all_modes() {
    let cpu = Cpu::<Double>::new();
    let a = ArrayD::from_shape_fn(IxDyn(&[4, 5, 3]), |i| {
        ((i[0] * 7 + i[1] * 3 + i[2] * 11) % 13) as f64 - 6.0
    });
    for mode in [
        BorderMode::Nearest,
        BorderMode::Reflect,
        BorderMode::Mirror,
        BorderMode::Wrap,
        BorderMode::Constant(1.5),
    ] {
        let mut out = ArrayD::<f64>::zeros(a.shape());
        cpu.laplace(&a, mode, &mut out).expect("laplace");
        for (i, &o) in out.indexed_iter() {
            let mut want = 0.0;
            for k in 0..3 {
                let at = |p: isize| -> f64 {
                    match ref_index(p, a.shape()[k], mode) {
                        Some(j) => {
                            let mut q = i.slice().to_vec();
                            q[k] = j;
                            a[IxDyn(&q)]
                        }
                        None => cval(mode),
                    }
                };
                let p = i[k] as isize;
                want += at(p - 1) - 2.0 * at(p) + at(p + 1);
            }
            assert!(
                (o - want).abs() < 1e-12,
                "{mode:?} at {:?}: {o} vs {want}",
                i.slice()
            );
        }
    }
}

#[test]
fn peak_candidates_raster_order_border_and_nan() {
    let cpu = Cpu::<Single>::new();
    let mut s = ArrayD::<f32>::zeros(IxDyn(&[6, 7]));
    s[[1, 1]] = 5.0;
    s[[3, 4]] = 2.0;
    s[[3, 5]] = 2.0; // plateau tie: both equal the filtered map
    s[[0, 6]] = 9.0; // border
    s[[4, 2]] = f32::NAN;
    let mut f = ArrayD::<f32>::zeros(s.shape());
    cpu.max_filter(&s, &[3, 3], BorderMode::Nearest, &mut f)
        .expect("mf");
    let c = cpu.peak_candidates(&s, &f, 0.0, &[1, 1]).expect("pc");
    assert_eq!(c, vec![(7 + 1, 5.0), (3 * 7 + 4, 2.0), (3 * 7 + 5, 2.0)]);
    let all = cpu.peak_candidates(&s, &f, 0.0, &[0, 0]).expect("pc");
    assert_eq!(all[0], (6, 9.0));
    assert!(all.iter().all(|(_, v)| !v.is_nan()));
    // strict threshold
    let none = cpu.peak_candidates(&s, &f, 9.0, &[0, 0]).expect("pc");
    assert!(none.is_empty());
    assert!(cpu.peak_candidates(&s, &f, 0.0, &[1]).is_err());
}

#[test]
fn max_filter_rejects_bad_input() {
    let cpu = Cpu::<Single>::new();
    let a = ArrayD::<f32>::zeros(IxDyn(&[4, 4]));
    let mut out = ArrayD::<f32>::zeros(IxDyn(&[4, 4]));
    let mut wrong = ArrayD::<f32>::zeros(IxDyn(&[4, 5]));
    assert!(
        cpu.max_filter(&a, &[3], BorderMode::Nearest, &mut out)
            .is_err()
    );
    assert!(
        cpu.max_filter(&a, &[3, 0], BorderMode::Nearest, &mut out)
            .is_err()
    );
    assert!(
        cpu.max_filter(&a, &[3, 3], BorderMode::Nearest, &mut wrong)
            .is_err()
    );
    assert!(
        cpu.max_filter(&a, &[3, 3], BorderMode::Constant(f64::NAN), &mut out)
            .is_err()
    );
    assert!(
        cpu.max_filter_footprint(&a, &[false; 9], &[3, 3], BorderMode::Nearest, &mut out)
            .is_err()
    );
    assert!(
        cpu.max_filter_footprint(&a, &[true; 8], &[3, 3], BorderMode::Nearest, &mut out)
            .is_err()
    );
    assert!(cpu.laplace(&a, BorderMode::Reflect, &mut wrong).is_err());
    // NaN input: no panic
    let mut n = ArrayD::<f32>::zeros(IxDyn(&[5, 5]));
    n[[2, 2]] = f32::NAN;
    let mut o = ArrayD::<f32>::zeros(IxDyn(&[5, 5]));
    cpu.max_filter(&n, &[3, 3], BorderMode::Reflect, &mut o)
        .expect("nan input");
}

// ---------------------------------------------------------------------------------------------
// brute-force reference (scipy's extension rules, by repeated reflection)

fn ref_index(mut p: isize, n: usize, mode: BorderMode) -> Option<usize> {
    let n = n as isize;
    if (0..n).contains(&p) {
        return Some(p as usize);
    }
    match mode {
        BorderMode::Constant(_) => None,
        BorderMode::Nearest => Some(p.clamp(0, n - 1) as usize),
        BorderMode::Wrap => {
            while p < 0 {
                p += n;
            }
            while p >= n {
                p -= n;
            }
            Some(p as usize)
        }
        BorderMode::Reflect => {
            while p < 0 || p >= n {
                p = if p < 0 { -p - 1 } else { 2 * n - 1 - p };
            }
            Some(p as usize)
        }
        BorderMode::Mirror => {
            if n == 1 {
                return Some(0);
            }
            while p < 0 || p >= n {
                p = if p < 0 { -p } else { 2 * n - 2 - p };
            }
            Some(p as usize)
        }
    }
}

fn cval(mode: BorderMode) -> f64 {
    match mode {
        BorderMode::Constant(c) => c,
        _ => 0.0,
    }
}

fn brute_max(a: &ArrayD<f32>, size: &[usize], mode: BorderMode) -> ArrayD<f32> {
    let shape = a.shape().to_vec();
    let mut out = ArrayD::<f32>::zeros(IxDyn(&shape));
    for (i, o) in out.indexed_iter_mut() {
        let mut best = f32::NEG_INFINITY;
        let total: usize = size.iter().product();
        for flat in 0..total {
            let mut rem = flat;
            let mut q = vec![0usize; shape.len()];
            let mut v = None;
            for k in (0..shape.len()).rev() {
                let off = rem % size[k];
                rem /= size[k];
                let p = i[k] as isize + off as isize - (size[k] / 2) as isize;
                match ref_index(p, shape[k], mode) {
                    Some(j) => q[k] = j,
                    None => v = Some(cval(mode) as f32),
                }
            }
            let v = v.unwrap_or_else(|| a[IxDyn(&q)]);
            best = best.max(v);
        }
        *o = best;
    }
    out
}

fn modes() -> impl Strategy<Value = BorderMode> {
    prop_oneof![
        Just(BorderMode::Nearest),
        Just(BorderMode::Reflect),
        Just(BorderMode::Mirror),
        Just(BorderMode::Wrap),
        (-2i32..3).prop_map(|c| BorderMode::Constant(c as f64)),
    ]
}

fn map_and_sizes() -> impl Strategy<Value = (ArrayD<f32>, Vec<usize>)> {
    prop::collection::vec((1usize..7, 1usize..10), 1..4).prop_flat_map(|dims| {
        let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
        let sizes: Vec<usize> = dims.iter().map(|d| d.1).collect();
        let n: usize = shape.iter().product();
        // few distinct values: many ties and plateaus
        prop::collection::vec(-3i32..4, n).prop_map(move |v| {
            let a =
                ArrayD::from_shape_vec(IxDyn(&shape), v.into_iter().map(|x| x as f32).collect())
                    .expect("shape");
            (a, sizes.clone())
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn max_filter_equals_brute_force((a, size) in map_and_sizes(), mode in modes()) {
        let cpu = Cpu::<Single>::new();
        let mut out = ArrayD::<f32>::zeros(a.shape());
        cpu.max_filter(&a, &size, mode, &mut out).expect("max_filter");
        prop_assert_eq!(&out, &brute_max(&a, &size, mode));
        // the footprint path with an all-true box gives the same
        let fp = vec![true; size.iter().product()];
        let mut out2 = ArrayD::<f32>::zeros(a.shape());
        cpu.max_filter_footprint(&a, &fp, &size, mode, &mut out2).expect("footprint");
        prop_assert_eq!(&out2, &out);
    }
}

#[test]
fn max_filter_large_volume_matches_brute_force_on_a_slab() {
    // big enough to take the parallel path, every axis non-trivial, even and odd sizes
    let shape = [40usize, 33, 37];
    let a = ArrayD::from_shape_fn(IxDyn(&shape), |i| {
        (((i[0] * 131 + i[1] * 71 + i[2] * 37) % 97) as f32 - 40.0) * 0.5
    });
    let size = [4usize, 5, 6];
    let cpu = Cpu::<Single>::new();
    for mode in [
        BorderMode::Nearest,
        BorderMode::Constant(-1.0),
        BorderMode::Wrap,
    ] {
        let mut out = ArrayD::<f32>::zeros(IxDyn(&shape));
        cpu.max_filter(&a, &size, mode, &mut out)
            .expect("max_filter");
        let want = brute_max(&a, &size, mode);
        assert_eq!(out, want, "{mode:?}");
    }
}
