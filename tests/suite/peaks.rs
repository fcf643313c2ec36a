//! Peak calling against the peers (`tests/fixtures/peaks/*`: scikit-image `peak_local_max`,
//! pytme `max_filter_coordinates` and `PeakCallerMaximumFilter`), against brute-force
//! references (proptest), and on bad input. Every test runs with `Cpu<Single>` and
//! `Cpu<Double>`. (The `mf_*` queries — scipy `maximum_filter` equality — are checked by
//! `filter_fixtures`.)

use monomorph::algo::peaks::{
    ExcludeBorder, Footprint, Peak, PeakParams, PytmeParams, RecursiveMask, attach_rotations,
    call_peaks_fast, call_peaks_maximum_filter, call_peaks_recursive, false_alarm_threshold,
    find_peaks, find_peaks_with_rotations, max_filter_coordinates, refine_parabolic,
};
use monomorph::prelude::*;
use monomorph::{Precision, Real};
use ndarray::{Array3, ArrayD, IxDyn};
use proptest::prelude::*;
use serde_json::Value;

use crate::common::{json, npy};

const CASES: [&str; 4] = ["field2d_256", "plateau_ties_2d", "border_2d", "constant_2d"];

fn rows(a: &ArrayD<i32>) -> Vec<Vec<usize>> {
    if a.is_empty() {
        return Vec::new();
    }
    let a = a
        .view()
        .into_dimensionality::<ndarray::Ix2>()
        .expect("(k, d) coordinates");
    a.outer_iter()
        .map(|r| r.iter().map(|&v| v as usize).collect())
        .collect()
}

fn coords(p: &[Peak]) -> Vec<Vec<usize>> {
    p.iter().map(|p| p.coord.clone()).collect()
}

fn score_of<P: Precision>(case: &str) -> ArrayD<P::Float> {
    let s: ArrayD<f32> = npy(&format!("peaks/{case}/score.npy"));
    s.mapv(|v| <P::Float as Real>::from_f64(v as f64))
}

/// skimage arguments of a fixture query as [`PeakParams`].
fn sk_params(p: &Value) -> PeakParams {
    let mut out = PeakParams::with_min_distance(p["min_distance"].as_u64().unwrap_or(1) as usize);
    out.threshold_abs = p["threshold_abs"].as_f64();
    out.threshold_rel = p["threshold_rel"].as_f64();
    out.num_peaks = p["num_peaks"].as_u64().map(|n| n as usize);
    if let Some(pn) = p["p_norm"].as_f64() {
        out.p_norm = pn;
    }
    match &p["exclude_border"] {
        Value::Bool(b) => out.exclude_border = ExcludeBorder::Bool(*b),
        Value::Number(n) => {
            out.exclude_border = ExcludeBorder::Width(n.as_u64().expect("width") as usize)
        }
        Value::Array(v) => {
            out.exclude_border = ExcludeBorder::PerAxis(
                v.iter()
                    .map(|x| x.as_u64().expect("width") as usize)
                    .collect(),
            )
        }
        _ => {}
    }
    if let Value::Array(rows) = &p["footprint"] {
        let shape = vec![rows.len(), rows[0].as_array().expect("row").len()];
        let mask = rows
            .iter()
            .flat_map(|r| {
                r.as_array()
                    .expect("row")
                    .iter()
                    .map(|v| v.as_i64() == Some(1))
            })
            .collect();
        out.footprint = Some(Footprint { mask, shape });
    }
    out
}

fn sk_case<P: Precision>(case: &str) -> usize
where
    Cpu<P>: Backend,
{
    let b = Cpu::<P>::new();
    let meta = json(&format!("peaks/{case}/case.json"));
    let score = b.upload(score_of::<P>(case).view()).expect("upload");
    let mut n = 0;
    for q in meta["queries"].as_array().expect("queries") {
        let id = q["id"].as_str().expect("id");
        if !id.starts_with("sk_") {
            continue;
        }
        let params = sk_params(&q["params"]);
        let got = find_peaks(&b, &score, &params).unwrap_or_else(|e| panic!("{case}/{id}: {e}"));
        let want = rows(&npy(&format!(
            "peaks/{case}/{}",
            q["expected"].as_str().expect("file")
        )));
        assert_eq!(want.len() as u64, q["count"].as_u64().expect("count"));
        assert_eq!(coords(&got), want, "{case}/{id} ({})", P::NAME);
        // Scores are the map's values, best first.
        assert!(
            got.windows(2).all(|w| w[0].score >= w[1].score),
            "{case}/{id} order"
        );
        n += 1;
    }
    n
}

#[test]
fn skimage_queries_exact() {
    let mut n = 0;
    for case in CASES {
        n += sk_case::<Single>(case);
        n += sk_case::<Double>(case);
    }
    assert_eq!(n, 2 * 4 * 12, "every sk_* query checked");
}

fn tme_mfc_case<P: Precision>(case: &str) -> usize
where
    Cpu<P>: Backend,
{
    let b = Cpu::<P>::new();
    let meta = json(&format!("peaks/{case}/case.json"));
    let score = b.upload(score_of::<P>(case).view()).expect("upload");
    let mut n = 0;
    for q in meta["queries"].as_array().expect("queries") {
        let id = q["id"].as_str().expect("id");
        if !id.starts_with("tme_mfc_") {
            continue;
        }
        let p = &q["params"];
        let md = p["min_distance"].as_u64().expect("md") as usize;
        let got = max_filter_coordinates(&b, &score, md, p["min_score"].as_f64())
            .unwrap_or_else(|e| panic!("{case}/{id}: {e}"));
        let want = rows(&npy(&format!(
            "peaks/{case}/{}",
            q["expected"].as_str().expect("file")
        )));
        assert_eq!(got, want, "{case}/{id} ({})", P::NAME);
        n += 1;
    }
    n
}

#[test]
fn pytme_max_filter_coordinates_exact() {
    let mut n = 0;
    for case in CASES {
        n += tme_mfc_case::<Single>(case);
        n += tme_mfc_case::<Double>(case);
    }
    assert_eq!(n, 2 * 4 * 4);
}

/// pytme's PeakCallerMaximumFilter, non-fragile queries: the score sequence above pytme's fill
/// value exactly, and the coordinates of every peak whose score is unique (pytme breaks ties
/// with unstable sorts).
fn tme_pc_case<P: Precision>(case: &str) -> usize
where
    Cpu<P>: Backend,
{
    let b = Cpu::<P>::new();
    let meta = json(&format!("peaks/{case}/case.json"));
    let score = b.upload(score_of::<P>(case).view()).expect("upload");
    let mut n = 0;
    for q in meta["queries"].as_array().expect("queries") {
        let id = q["id"].as_str().expect("id");
        if !id.starts_with("tme_pc_") || q.get("fragile").is_some() {
            continue;
        }
        let p = &q["params"];
        let params = PytmeParams {
            num_peaks: p["num_peaks"].as_u64().expect("n") as usize,
            min_distance: p["min_distance"].as_u64().expect("md") as usize,
            min_boundary_distance: p["min_boundary_distance"].as_u64().unwrap_or(0) as usize,
            min_score: p["min_score"].as_f64(),
            max_score: p["max_score"].as_f64(),
        };
        let got = call_peaks_maximum_filter(&b, &score, &params)
            .unwrap_or_else(|e| panic!("{case}/{id}: {e}"));
        let want = rows(&npy(&format!(
            "peaks/{case}/{}",
            q["expected"].as_str().expect("file")
        )));
        let want_s: ArrayD<f32> = npy(&format!(
            "peaks/{case}/{}",
            q["scores"].as_str().expect("scores")
        ));
        let want_s: Vec<f32> = want_s.iter().copied().collect();
        let map: ArrayD<f32> = npy(&format!("peaks/{case}/score.npy"));
        // pytme fills missing peaks with flat-background points (and drops its placeholder
        // rows); compare what lies above the background.
        let fill = want_s.iter().copied().fold(f32::INFINITY, f32::min);
        let fragile_fill = q.get("fragile_ties").is_some();
        let keep = if fragile_fill {
            want_s.iter().filter(|&&s| s > fill).count()
        } else {
            want_s.len()
        };
        assert!(
            got.len() >= keep,
            "{case}/{id}: {} peaks, want at least {keep}",
            got.len()
        );
        for k in 0..keep {
            assert_eq!(
                got[k].score as f32,
                want_s[k],
                "{case}/{id} score #{k} ({})",
                P::NAME
            );
            let unique = map.iter().filter(|&&s| s == want_s[k]).count() == 1;
            if unique {
                assert_eq!(got[k].coord, want[k], "{case}/{id} peak #{k} ({})", P::NAME);
            }
        }
        if !fragile_fill {
            assert_eq!(got.len(), want.len(), "{case}/{id} count");
        }
        n += 1;
    }
    n
}

#[test]
fn pytme_peak_caller_maximum_filter() {
    let mut n = 0;
    for case in CASES {
        n += tme_pc_case::<Single>(case);
        n += tme_pc_case::<Double>(case);
    }
    assert_eq!(n, 2 * 4, "field2d_256 ×2, border_2d ×1, plateau_ties_2d ×1");
}

// ---------------------------------------------------------------------------------------------
// Brute-force references.

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        c[k] = i % shape[k];
        i /= shape[k];
    }
    c
}

/// scikit-image `peak_local_max` (box footprint), written the slow and obvious way.
fn brute_peak_local_max(a: &ArrayD<f64>, p: &PeakParams) -> Vec<Vec<usize>> {
    let shape = a.shape().to_vec();
    let md = p.min_distance;
    let vals: Vec<f64> = a.iter().copied().collect();
    let finite: Vec<f64> = vals.iter().copied().filter(|v| !v.is_nan()).collect();
    if finite.is_empty() {
        return Vec::new();
    }
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut thr = p.threshold_abs.unwrap_or(lo);
    if let Some(r) = p.threshold_rel {
        thr = thr.max(r * hi);
    }
    let border: Vec<usize> = match &p.exclude_border {
        ExcludeBorder::Bool(true) => vec![md; shape.len()],
        ExcludeBorder::Bool(false) => vec![0; shape.len()],
        ExcludeBorder::Width(w) => vec![*w; shape.len()],
        ExcludeBorder::PerAxis(v) => v.clone(),
    };
    let v = |c: &[usize]| {
        let x = a[IxDyn(c)];
        if x.is_nan() { f64::NEG_INFINITY } else { x }
    };
    let n = vals.len();
    let mut is_max = vec![true; n];
    if md > 0 && n > 1 {
        for i in 0..n {
            let c = unravel(i, &shape);
            for j in 0..n {
                let d = unravel(j, &shape);
                // nearest mode = clip the window: every in-range voxel within md (Chebyshev).
                if c.iter().zip(&d).all(|(&x, &y)| x.abs_diff(y) <= md) && v(&d) > v(&c) {
                    is_max[i] = false;
                    break;
                }
            }
        }
        if lo == hi {
            return Vec::new();
        }
    }
    let mut cand: Vec<(usize, f64)> = (0..n)
        .filter(|&i| is_max[i])
        .filter(|&i| {
            let c = unravel(i, &shape);
            c.iter()
                .zip(&shape)
                .zip(&border)
                .all(|((&x, &s), &w)| w == 0 || (x >= w && x + w < s))
        })
        .map(|i| (i, v(&unravel(i, &shape))))
        .filter(|&(_, x)| x > thr)
        .collect();
    cand.sort_by(|x, y| y.1.partial_cmp(&x.1).unwrap().then(x.0.cmp(&y.0)));
    let mut kept: Vec<Vec<usize>> = Vec::new();
    for (i, _) in cand {
        let c = unravel(i, &shape);
        let close = md > 1
            && kept.iter().any(|k| {
                let d: Vec<f64> = k
                    .iter()
                    .zip(&c)
                    .map(|(&x, &y)| x.abs_diff(y) as f64)
                    .collect();
                let dist = if p.p_norm.is_infinite() {
                    d.iter().copied().fold(0.0, f64::max)
                } else {
                    d.iter()
                        .map(|x| x.powf(p.p_norm))
                        .sum::<f64>()
                        .powf(1.0 / p.p_norm)
                };
                dist < md as f64
            });
        if !close {
            kept.push(c);
        }
    }
    kept.truncate(p.num_peaks.unwrap_or(usize::MAX));
    kept
}

fn run_find<P: Precision>(a: &ArrayD<f64>, p: &PeakParams) -> Vec<Peak>
where
    Cpu<P>: Backend,
{
    let b = Cpu::<P>::new();
    let x = b
        .upload(a.mapv(<P::Float as Real>::from_f64).view())
        .expect("upload");
    find_peaks(&b, &x, p).expect("find_peaks")
}

fn arb_case() -> impl Strategy<Value = (ArrayD<f64>, PeakParams)> {
    let shape = prop_oneof![
        (1usize..14).prop_map(|a| vec![a]),
        (1usize..10, 1usize..10).prop_map(|(a, b)| vec![a, b]),
        (1usize..6, 1usize..6, 1usize..6).prop_map(|(a, b, c)| vec![a, b, c]),
    ];
    shape.prop_flat_map(|shape| {
        let n: usize = shape.iter().product();
        let nd = shape.len();
        (
            // few distinct values: many ties and plateaus; -9 stands for NaN
            proptest::collection::vec(prop_oneof![9 => 0i32..4, 1 => Just(-9)], n),
            0usize..5,
            prop_oneof![
                Just(ExcludeBorder::Bool(true)),
                Just(ExcludeBorder::Bool(false)),
                (0usize..3).prop_map(ExcludeBorder::Width),
                proptest::collection::vec(0usize..3, nd).prop_map(ExcludeBorder::PerAxis),
            ],
            proptest::option::of(-1i32..4),
            proptest::option::of(0.0f64..1.0),
            proptest::option::of(0usize..6),
            prop_oneof![Just(f64::INFINITY), Just(2.0), Just(1.0)],
        )
            .prop_map(move |(v, md, eb, ta, tr, np, pn)| {
                let a = ArrayD::from_shape_vec(
                    IxDyn(&shape),
                    v.iter()
                        .map(|&x| if x == -9 { f64::NAN } else { x as f64 })
                        .collect(),
                )
                .expect("shape");
                let p = PeakParams {
                    min_distance: md,
                    threshold_abs: ta.map(|t| t as f64 + 0.5 * (t % 2) as f64),
                    threshold_rel: tr,
                    exclude_border: eb,
                    num_peaks: np,
                    footprint: None,
                    p_norm: pn,
                };
                (a, p)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn find_peaks_equals_brute_force((a, p) in arb_case()) {
        let want = brute_peak_local_max(&a, &p);
        let s = run_find::<Single>(&a, &p);
        let d = run_find::<Double>(&a, &p);
        prop_assert_eq!(coords(&s), want.clone());
        prop_assert_eq!(coords(&d), want);
        // Invariants: no NaN, thresholds, spacing.
        let thr_abs = p.threshold_abs.unwrap_or(f64::NEG_INFINITY);
        let hi = a.iter().copied().filter(|v| !v.is_nan()).fold(f64::NEG_INFINITY, f64::max);
        for (i, x) in d.iter().enumerate() {
            prop_assert!(!x.score.is_nan());
            prop_assert!(x.score > thr_abs);
            if let Some(r) = p.threshold_rel { prop_assert!(x.score > r * hi); }
            for y in &d[..i] {
                let cheb = x.coord.iter().zip(&y.coord).map(|(&u, &v)| u.abs_diff(v)).max().unwrap_or(0);
                if p.min_distance > 1 && p.p_norm.is_infinite() {
                    prop_assert!(cheb >= p.min_distance);
                }
                prop_assert!(x.score <= y.score);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Documented results and errors.

fn both<F: Fn(&dyn Fn(&ArrayD<f64>, &PeakParams) -> Vec<Peak>)>(f: F) {
    f(&|a, p| run_find::<Single>(a, p));
    f(&|a, p| run_find::<Double>(a, p));
}

#[test]
fn nan_is_never_a_peak_and_does_not_poison() {
    both(|run| {
        let mut a = ArrayD::<f64>::zeros(IxDyn(&[20, 20]));
        a[[5, 5]] = 3.0;
        a[[14, 14]] = 2.0;
        a[[6, 6]] = f64::NAN;
        a[[13, 13]] = f64::NAN;
        a[[0, 19]] = f64::NAN;
        let p = PeakParams {
            exclude_border: ExcludeBorder::Bool(false),
            ..PeakParams::with_min_distance(3)
        };
        let got = run(&a, &p);
        assert_eq!(coords(&got), vec![vec![5, 5], vec![14, 14]]);
        // threshold_rel uses the max over non-NaN values.
        let p = PeakParams {
            threshold_rel: Some(0.8),
            ..p
        };
        assert_eq!(coords(&run(&a, &p)), vec![vec![5, 5]]);
        // All NaN, or constant apart from NaN: no peaks.
        let all_nan = ArrayD::from_elem(IxDyn(&[8, 8]), f64::NAN);
        assert!(run(&all_nan, &PeakParams::default()).is_empty());
        let mut c = ArrayD::from_elem(IxDyn(&[8, 8]), 1.0);
        c[[3, 3]] = f64::NAN;
        assert!(run(&c, &PeakParams::default()).is_empty());
    });
}

#[test]
fn min_distance_zero_is_every_voxel_above_threshold() {
    both(|run| {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1.0, 5.0, 2.0, 5.0, 0.0, 3.0]).unwrap();
        let got = run(&a, &PeakParams::with_min_distance(0));
        assert_eq!(
            coords(&got),
            vec![vec![0, 1], vec![1, 0], vec![1, 2], vec![0, 2], vec![0, 0]]
        );
    });
}

#[test]
fn border_wider_than_map_gives_no_peaks() {
    both(|run| {
        let mut a = ArrayD::<f64>::zeros(IxDyn(&[9, 9]));
        a[[4, 4]] = 1.0;
        for eb in [
            ExcludeBorder::Width(5),
            ExcludeBorder::PerAxis(vec![0, 100]),
            ExcludeBorder::Bool(true),
        ] {
            let p = PeakParams {
                exclude_border: eb.clone(),
                ..PeakParams::with_min_distance(6)
            };
            assert!(run(&a, &p).is_empty(), "{eb:?}");
        }
        let p = PeakParams {
            exclude_border: ExcludeBorder::Width(4),
            ..PeakParams::with_min_distance(6)
        };
        assert_eq!(coords(&run(&a, &p)), vec![vec![4, 4]]);
    });
}

#[test]
fn bad_parameters_are_errors() {
    let b = Cpu::<Single>::new();
    let a = b
        .upload(ArrayD::<f32>::zeros(IxDyn(&[6, 6])).view())
        .unwrap();
    let bad = [
        PeakParams {
            p_norm: 0.5,
            ..PeakParams::default()
        },
        PeakParams {
            p_norm: f64::NAN,
            ..PeakParams::default()
        },
        PeakParams {
            threshold_abs: Some(f64::NAN),
            ..PeakParams::default()
        },
        PeakParams {
            exclude_border: ExcludeBorder::PerAxis(vec![1]),
            ..PeakParams::default()
        },
        PeakParams {
            footprint: Some(Footprint {
                mask: vec![true; 3],
                shape: vec![3],
            }),
            ..PeakParams::default()
        },
        PeakParams {
            footprint: Some(Footprint {
                mask: vec![true; 8],
                shape: vec![3, 3],
            }),
            ..PeakParams::default()
        },
    ];
    for p in bad {
        assert!(find_peaks(&b, &a, &p).is_err(), "{p:?}");
    }
    let empty = b
        .upload(ArrayD::<f32>::zeros(IxDyn(&[0, 4])).view())
        .unwrap();
    assert!(find_peaks(&b, &empty, &PeakParams::default()).is_err());
    assert!(max_filter_coordinates(&b, &a, 0, None).is_err());
    assert!(
        call_peaks_maximum_filter(
            &b,
            &a,
            &PytmeParams {
                min_distance: 0,
                ..Default::default()
            }
        )
        .is_err()
    );
    assert!(
        call_peaks_fast(
            &b,
            &a,
            &PytmeParams {
                min_distance: 0,
                ..Default::default()
            }
        )
        .is_err()
    );
}

#[test]
fn rotations_are_attached_and_validated() {
    let b = Cpu::<Double>::new();
    let mut a = ArrayD::<f64>::zeros(IxDyn(&[10, 12]));
    a[[2, 3]] = 2.0;
    a[[7, 8]] = 1.0;
    let scores = b.upload(a.view()).unwrap();
    let mut idx = ArrayD::<i64>::zeros(IxDyn(&[10, 12]));
    idx[[2, 3]] = 1;
    idx[[7, 8]] = 2;
    let rot = Array3::from_shape_fn((3, 2, 2), |(k, i, j)| (10 * k + 2 * i + j) as f64);
    let ri = b.upload(idx.view()).unwrap();
    let p = PeakParams::with_min_distance(2);
    let got = find_peaks_with_rotations(&b, &scores, &p, &ri, rot.view()).unwrap();
    assert_eq!(coords(&got), vec![vec![2, 3], vec![7, 8]]);
    assert_eq!(got[0].rotation, Some((1, vec![10.0, 11.0, 12.0, 13.0])));
    assert_eq!(got[1].rotation, Some((2, vec![20.0, 21.0, 22.0, 23.0])));
    // Wrong map shape, wrong matrix size, index out of range.
    let wrong = b
        .upload(ArrayD::<i64>::zeros(IxDyn(&[12, 10])).view())
        .unwrap();
    assert!(matches!(
        find_peaks_with_rotations(&b, &scores, &p, &wrong, rot.view()),
        Err(Error::Shape { .. })
    ));
    let rot3 = Array3::<f64>::zeros((3, 3, 3));
    assert!(find_peaks_with_rotations(&b, &scores, &p, &ri, rot3.view()).is_err());
    idx[[7, 8]] = 3;
    let ri = b.upload(idx.view()).unwrap();
    let mut peaks = find_peaks(&b, &scores, &p).unwrap();
    assert!(attach_rotations(&b, &mut peaks, &[10, 12], &ri, rot.view()).is_err());
}

#[test]
fn false_alarm_threshold_matches_pytme_formula() {
    // scipy: erfcinv(2 * 3 / (64**3 * 100)) * sqrt(2) * 0.02
    let t = false_alarm_threshold(3.0, 64 * 64 * 64, 100, 0.02).unwrap();
    let want = 0.02 * 2f64.sqrt() * 3.6587163560807023;
    assert!((t - want).abs() < 1e-12 * want, "{t} vs {want}");
}

#[test]
fn recursive_masking_box_and_mask() {
    let b = Cpu::<Single>::new();
    let s = score_of::<Single>("field2d_256");
    let scores = b.upload(s.view()).unwrap();
    let params = PytmeParams {
        num_peaks: 30,
        min_distance: 9,
        ..Default::default()
    };
    let got = call_peaks_recursive::<_, f32, i32>(&b, &scores, &params, None).unwrap();
    // pytme's driver drops recursion peaks closer than its integer distance rule (the box
    // masks only ±4 voxels): at most num_peaks remain.
    assert!(!got.is_empty() && got.len() <= 30, "{}", got.len());
    // Best first; the first is the global maximum; no peak inside an earlier peak's box or
    // within pytme's integer distance.
    let gmax = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    assert_eq!(got[0].score as f32, gmax);
    for (i, x) in got.iter().enumerate() {
        for y in &got[..i] {
            assert!(x.score <= y.score);
            let d2: usize = x
                .coord
                .iter()
                .zip(&y.coord)
                .map(|(&u, &v)| u.abs_diff(v).pow(2))
                .sum();
            assert!(d2 >= 100, "{:?} {:?}", x.coord, y.coord);
        }
    }
    // A 9×9 mask of ones, unrotated, masks exactly the box.
    let ones = b
        .upload(ArrayD::<f32>::ones(IxDyn(&[9, 9])).view())
        .unwrap();
    let m = RecursiveMask::<'_, Cpu<Single>, f32, i32> {
        mask: &ones,
        rotations: None,
    };
    let with_mask = call_peaks_recursive(&b, &scores, &params, Some(m)).unwrap();
    assert_eq!(coords(&with_mask), coords(&got));
    // Rotated masks: every peak carries its rotation.
    let idx = b
        .upload(ArrayD::<i32>::from_elem(IxDyn(&[256, 256]), 1).view())
        .unwrap();
    let rot = Array3::from_shape_fn((2, 2, 2), |(k, i, j)| match (k, i == j) {
        (0, d) => d as i32 as f64,
        (_, true) => 0.0,
        (_, false) => {
            if i == 0 {
                -1.0
            } else {
                1.0
            }
        }
    });
    let m = RecursiveMask {
        mask: &ones,
        rotations: Some((&idx, rot.view())),
    };
    let rotated = call_peaks_recursive(&b, &scores, &params, Some(m)).unwrap();
    assert!(!rotated.is_empty());
    assert!(
        rotated
            .iter()
            .all(|p| p.rotation.as_ref().map(|r| r.0) == Some(1))
    );
}

#[test]
fn fast_caller_finds_window_maxima() {
    both_fast::<Single>();
    both_fast::<Double>();
}

fn both_fast<P: Precision>()
where
    Cpu<P>: Backend,
{
    let b = Cpu::<P>::new();
    let s = score_of::<P>("field2d_256");
    let scores = b.upload(s.view()).unwrap();
    let params = PytmeParams {
        num_peaks: 50,
        min_distance: 5,
        ..Default::default()
    };
    let got = call_peaks_fast(&b, &scores, &params).unwrap();
    assert!(!got.is_empty());
    let md = 5isize;
    for p in &got {
        let (r, c) = (p.coord[0] as isize, p.coord[1] as isize);
        for i in (r - md).max(0)..(r + md).min(256) {
            for j in (c - md).max(0)..(c + md).min(256) {
                assert!(s[[i as usize, j as usize]].as_f64() <= p.score);
            }
        }
    }
    // The fast caller's peaks are also maximum-filter peaks with the same distance rule.
    let mf = call_peaks_maximum_filter(
        &b,
        &scores,
        &PytmeParams {
            num_peaks: 10,
            ..params
        },
    )
    .unwrap();
    assert_eq!(got[0].coord, mf[0].coord);
}

#[test]
fn parabolic_refinement() {
    let b = Cpu::<Double>::new();
    // f(x, y) = −(x − 4.3)² − 2 (y − 6.8)²: the parabola is exact.
    let a = ArrayD::from_shape_fn(IxDyn(&[10, 12]), |i| {
        -((i[0] as f64 - 4.3).powi(2)) - 2.0 * (i[1] as f64 - 6.8).powi(2)
    });
    let x = b.upload(a.view()).unwrap();
    let peaks = find_peaks(&b, &x, &PeakParams::with_min_distance(2)).unwrap();
    assert_eq!(coords(&peaks), vec![vec![4, 7]]);
    let r = refine_parabolic(&b, &x, &peaks).unwrap();
    assert!(
        (r[0][0] - 4.3).abs() < 1e-12 && (r[0][1] - 6.8).abs() < 1e-12,
        "{r:?}"
    );
    let outside = Peak {
        coord: vec![10, 0],
        score: 0.0,
        rotation: None,
    };
    assert!(refine_parabolic(&b, &x, &[outside]).is_err());
}
