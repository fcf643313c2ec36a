//! Restricted searches (`MatchParams::search_box`, `MatchParams::scheduling_mask`): the scores
//! searched equal a full run's, the rest is marked not searched (−∞, −1), tiles outside the
//! mask are skipped, and no peak caller reports a position not searched. Sub-voxel peaks and
//! pytme's score window against pytme 0.3.6 (`tests/fixtures/peak-oversampling`).

use monomorph::FloatOf;
use monomorph::algo::matching::{MatchParams, Prerotated, Score, match_template};
use monomorph::algo::peaks::{
    Peak, PeakParams, PytmeParams, RecursiveMask, call_peaks_fast, call_peaks_maximum_filter,
    call_peaks_recursive, find_peaks, oversample_peaks,
};
use monomorph::algo::rotations::RotationSet;
use monomorph::prelude::*;
use ndarray::{ArrayD, Axis, Dimension, IxDyn};

use crate::common::{json, npy};

struct Case {
    score: Score,
    pad: bool,
    target: ArrayD<f32>,
    template: ArrayD<f32>,
    mask: Option<ArrayD<f32>>,
    rotations: RotationSet,
    rot_templates: Vec<ArrayD<f32>>,
    rot_masks: Option<Vec<ArrayD<f32>>>,
}

fn load(name: &str) -> Case {
    let f = |x: &str| format!("matching/{name}/{x}");
    let has = |x: &str| crate::common::fixture(&f(x)).exists();
    let meta = json(&f("case.json"));
    let rot: ArrayD<f32> = npy(&f("rotations.npy"));
    let rot = rot.into_dimensionality::<ndarray::Ix3>().unwrap();
    let split = |a: ArrayD<f32>| -> Vec<ArrayD<f32>> {
        a.axis_iter(Axis(0)).map(|v| v.to_owned()).collect()
    };
    Case {
        score: meta["score"].as_str().unwrap().parse().unwrap(),
        pad: meta["pad_target_edges"].as_bool().unwrap(),
        target: npy(&f("target.npy")),
        template: npy(&f("template.npy")),
        mask: has("template_mask.npy").then(|| npy(&f("template_mask.npy"))),
        rotations: RotationSet::from_array(rot.view()).unwrap(),
        rot_templates: split(npy(&f("rotated_templates.npy"))),
        rot_masks: has("rotated_masks.npy").then(|| split(npy(&f("rotated_masks.npy")))),
    }
}

type B = Cpu<Single>;

fn up(b: &B, a: &ArrayD<f32>) -> Arr<B, FloatOf<B>> {
    b.upload(a.view()).unwrap()
}

/// What a restricted (or full) run gives back on the host.
struct Run {
    scores: ArrayD<f64>,
    index: ArrayD<i64>,
    tiles: usize,
}

/// Runs case `c` (pytme's pre-rotated volumes, rotations `rots` of the case) with a search box,
/// a scheduling mask and a forced tile shape.
fn run(
    b: &B,
    c: &Case,
    rots: &[usize],
    search_box: Option<&[(usize, usize)]>,
    smask: Option<&ArrayD<f32>>,
    tile: Option<Vec<usize>>,
) -> Run {
    let target = up(b, &c.target);
    let template = up(b, &c.template);
    let mask = c.mask.as_ref().map(|m| up(b, m));
    let sm = smask.map(|m| up(b, m));
    let d = c.rotations.dim();
    let flat: Vec<f64> = rots
        .iter()
        .flat_map(|&r| c.rotations.matrix(r).to_vec())
        .collect();
    let rt: Vec<_> = rots.iter().map(|&r| up(b, &c.rot_templates[r])).collect();
    let rm: Option<Vec<_>> = c
        .rot_masks
        .as_ref()
        .map(|v| rots.iter().map(|&r| up(b, &v[r])).collect());
    let mut p = MatchParams::new(c.score, RotationSet::from_matrices(d, &flat).unwrap());
    p.template_mask = mask.as_ref();
    p.pad_edges = c.pad;
    p.tile_shape = tile;
    p.search_box = search_box;
    p.scheduling_mask = sm.as_ref();
    p.prerotated = Some(Prerotated {
        templates: &rt,
        masks: rm.as_deref(),
    });
    let r = match_template(b, &target, &template, &p).unwrap();
    Run {
        scores: b.download(&r.scores).unwrap().mapv(|v| v as f64),
        index: b.download(&r.rotation_index).unwrap().mapv(|v| v as i64),
        tiles: r.tiles,
    }
}

/// Best minus second-best score per voxel over the case's rotations (one run per rotation).
fn margins(b: &B, c: &Case) -> ArrayD<f64> {
    let mut best = ArrayD::from_elem(c.target.shape(), f64::NEG_INFINITY);
    let mut second = best.clone();
    for r in 0..c.rotations.len() {
        let s = run(b, c, &[r], None, None, None).scores;
        for ((bv, sv), &v) in best.iter_mut().zip(second.iter_mut()).zip(s.iter()) {
            if v > *bv {
                *sv = *bv;
                *bv = v;
            } else if v > *sv {
                *sv = v;
            }
        }
    }
    best - second
}

/// `searched` positions hold the full run's scores (to round-off) and rotation (where not
/// tied); the others −∞ and −1.
fn check_against_full(
    name: &str,
    full: &Run,
    part: &Run,
    margin: &ArrayD<f64>,
    searched: impl Fn(&IxDyn) -> bool,
) {
    let scale = full.scores.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let (mut inside, mut worst) = (0usize, 0.0f64);
    for (idx, &v) in full.scores.indexed_iter() {
        let (s, i) = (part.scores[&idx], part.index[&idx]);
        if searched(&idx) {
            inside += 1;
            worst = worst.max((s - v).abs());
            if margin[&idx] > 1e-4 * scale {
                assert_eq!(i, full.index[&idx], "{name}: rotation at {idx:?}");
            }
        } else {
            assert!(
                s == f64::NEG_INFINITY && i == -1,
                "{name}: {idx:?} not searched but holds {s} / {i}"
            );
        }
    }
    assert!(inside > 0);
    assert!(
        worst <= 2e-6 * scale,
        "{name}: searched scores differ from the full run's by {worst:.3e}"
    );
}

fn in_box(r: &[(usize, usize)]) -> impl Fn(&IxDyn) -> bool + '_ {
    move |idx: &IxDyn| {
        idx.as_array_view()
            .iter()
            .zip(r)
            .all(|(&i, &(a, z))| i >= a && i < z)
    }
}

#[test]
fn search_box_scores_equal_the_full_run() {
    let b = B::new();
    for (name, r, tile) in [
        ("2d_flc", vec![(30, 91), (150, 256)], None),
        ("2d_flc", vec![(0, 40), (17, 200)], Some(vec![32, 64])),
        ("2d_flc_padded", vec![(100, 180), (0, 60)], None),
        ("3d_cc", vec![(10, 30), (0, 48), (5, 20)], None),
    ] {
        let c = load(name);
        let all: Vec<usize> = (0..c.rotations.len()).collect();
        let full = run(&b, &c, &all, None, None, None);
        let part = run(&b, &c, &all, Some(&r), None, tile.clone());
        let m = margins(&b, &c);
        check_against_full(name, &full, &part, &m, in_box(&r));
        // The work is the box's: one tile, or the box's tiles only.
        let want = match &tile {
            None => 1,
            Some(t) => r
                .iter()
                .zip(t)
                .map(|(&(a, z), &t)| (z - a).div_ceil(t))
                .product(),
        };
        assert_eq!(part.tiles, want, "{name}");
    }
}

/// A target-shaped mask: 1 inside the disc/ball of radius `rad` about `c`.
fn ball(shape: &[usize], c: &[f64], rad: f64) -> ArrayD<f32> {
    ArrayD::from_shape_fn(IxDyn(shape), |ix| {
        let r2: f64 = ix
            .as_array_view()
            .iter()
            .zip(c)
            .map(|(&i, &c)| (i as f64 - c).powi(2))
            .sum();
        if r2 <= rad * rad { 1.0 } else { 0.0 }
    })
}

#[test]
fn scheduling_mask_skips_tiles_and_marks_the_outside() {
    let b = B::new();
    let c = load("2d_flc");
    let all: Vec<usize> = (0..c.rotations.len()).collect();
    let m = margins(&b, &c);
    let full = run(&b, &c, &all, None, None, None);
    // A disc inside the tiles [64, 128) × [128, 192) of a 64-voxel tiling (16 tiles).
    let mask = ball(c.target.shape(), &[96.0, 160.0], 25.0);
    let tiled = run(&b, &c, &all, None, Some(&mask), Some(vec![64, 64]));
    assert_eq!(tiled.tiles, 1, "tiles outside the mask must be skipped");
    let inside = |idx: &IxDyn| mask[idx] == 1.0;
    check_against_full("2d_flc masked, tiled", &full, &tiled, &m, inside);
    let whole = run(&b, &c, &all, None, Some(&mask), None);
    check_against_full("2d_flc masked", &full, &whole, &m, inside);
    // A mask and a box: their intersection.
    let r = [(0usize, 100usize), (0usize, 256usize)];
    let both = run(&b, &c, &all, Some(&r), Some(&mask), Some(vec![64, 64]));
    let inter = |idx: &IxDyn| mask[idx] == 1.0 && in_box(&r)(idx);
    check_against_full("2d_flc masked and boxed", &full, &both, &m, inter);

    // No caller reports a position not searched, even when the real peaks run out.
    let s = up(&b, &tiled.scores.mapv(|v| v as f32));
    let ri = b.upload(tiled.index.view()).unwrap();
    let rots = c.rotations.to_array();
    let many = PytmeParams {
        num_peaks: 5000,
        min_distance: 2,
        ..PytmeParams::default()
    };
    let tmask = up(&b, c.mask.as_ref().unwrap());
    let calls = [
        (
            "skimage",
            find_peaks(&b, &s, &PeakParams::with_min_distance(2)).unwrap(),
        ),
        (
            "maxfilter",
            call_peaks_maximum_filter(&b, &s, &many).unwrap(),
        ),
        ("fast", call_peaks_fast(&b, &s, &many).unwrap()),
        (
            "recursive",
            call_peaks_recursive::<_, f32, i64>(&b, &s, &many, None).unwrap(),
        ),
        (
            "recursive with mask",
            call_peaks_recursive(
                &b,
                &s,
                &many,
                Some(RecursiveMask {
                    mask: &tmask,
                    rotations: Some((&ri, rots.view())),
                }),
            )
            .unwrap(),
        ),
    ];
    for (name, peaks) in calls {
        assert!(!peaks.is_empty(), "{name}");
        for p in &peaks {
            assert!(
                mask[IxDyn(&p.coord)] == 1.0 && p.score.is_finite(),
                "{name}: peak at {:?} ({}) outside the mask",
                p.coord,
                p.score
            );
        }
    }
}

#[test]
fn restricted_searches_refuse_bad_regions() {
    let b = B::new();
    let c = load("2d_flc");
    let target = up(&b, &c.target);
    let template = up(&b, &c.template);
    let tm = up(&b, c.mask.as_ref().unwrap());
    let rots = RotationSet::from_matrices(2, c.rotations.matrix(0)).unwrap();
    let check = |sb: Option<&[(usize, usize)]>, sm: Option<&ArrayD<f32>>, what: &str| {
        let sm = sm.map(|m| up(&b, m));
        let mut p = MatchParams::new(Score::FLC, rots.clone());
        p.template_mask = Some(&tm);
        p.search_box = sb;
        p.scheduling_mask = sm.as_ref();
        let e = match_template(&b, &target, &template, &p).err().unwrap();
        assert!(e.to_string().contains(what), "{e}");
    };
    check(Some(&[(0, 10)]), None, "search_box");
    check(Some(&[(5, 5), (0, 10)]), None, "search_box");
    check(Some(&[(0, 10), (0, 257)]), None, "search_box");
    let shape = c.target.shape();
    check(None, Some(&ArrayD::zeros(IxDyn(shape))), "scheduling_mask");
    check(
        None,
        Some(&ArrayD::from_elem(IxDyn(shape), 0.5)),
        "scheduling_mask",
    );
    check(
        None,
        Some(&ArrayD::ones(IxDyn(&[10, 10]))),
        "scheduling_mask",
    );
    // A mask whose ones all lie outside the box.
    let mask = ball(shape, &[200.0, 200.0], 5.0);
    check(Some(&[(0, 100), (0, 100)]), Some(&mask), "scheduling_mask");
}

#[test]
fn oversampled_peaks_are_pytmes() {
    let b = B::new();
    let case = json("peak-oversampling/case.json");
    for o in case["oversampling"].as_array().unwrap() {
        let map: ArrayD<f32> = npy(&format!(
            "peak-oversampling/{}.npy",
            o["map"].as_str().unwrap()
        ));
        let s = up(&b, &map);
        let f = o["factor"].as_f64().unwrap();
        let peaks: Vec<Peak> = o["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| Peak {
                coord: p
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as usize)
                    .collect(),
                score: 0.0,
                rotation: None,
            })
            .collect();
        let got = oversample_peaks(&b, &s, &peaks, f).unwrap();
        for (g, want) in got.iter().zip(o["expected"].as_array().unwrap()) {
            let w: Vec<f64> = want
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            for (x, y) in g.iter().zip(&w) {
                assert!((x - y).abs() < 1e-9, "factor {f}: {g:?} vs pytme {w:?}");
            }
        }
        // Double precision gives the same positions.
        let bd = Cpu::<Double>::new();
        let sd = bd.upload(map.mapv(|v| v as f64).view()).unwrap();
        assert_eq!(oversample_peaks(&bd, &sd, &peaks, f).unwrap(), got);
    }
    let map: ArrayD<f32> = npy("peak-oversampling/map2d.npy");
    let s = up(&b, &map);
    let p = [Peak {
        coord: vec![1, 1],
        score: 0.0,
        rotation: None,
    }];
    for f in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e6] {
        assert!(oversample_peaks(&b, &s, &p, f).is_err(), "factor {f}");
    }
    let outside = [Peak {
        coord: vec![24, 0],
        ..p[0].clone()
    }];
    assert!(oversample_peaks(&b, &s, &outside, 2.0).is_err());
    let mut nan = map.clone();
    nan[[0, 0]] = f32::NAN;
    assert!(oversample_peaks(&b, &up(&b, &nan), &p, 2.0).is_err());
    // −∞ (not searched) is 0 in the interpolant.
    let (mut ninf, mut zero) = (map.clone(), map.clone());
    ninf[[0, 0]] = f32::NEG_INFINITY;
    zero[[0, 0]] = 0.0;
    assert_eq!(
        oversample_peaks(&b, &up(&b, &ninf), &p, 3.0).unwrap(),
        oversample_peaks(&b, &up(&b, &zero), &p, 3.0).unwrap()
    );
}

#[test]
fn maxfilter_score_window_is_pytmes() {
    let b = B::new();
    let case = json("peak-oversampling/case.json");
    let map: ArrayD<f32> = npy("peak-oversampling/map3d.npy");
    let s = up(&b, &map);
    for q in case["maxfilter"].as_array().unwrap() {
        let p = PytmeParams {
            num_peaks: q["num_peaks"].as_u64().unwrap() as usize,
            min_distance: q["min_distance"].as_u64().unwrap() as usize,
            min_boundary_distance: 0,
            min_score: q["min_score"].as_f64(),
            max_score: q["max_score"].as_f64(),
        };
        let got = call_peaks_maximum_filter(&b, &s, &p).unwrap();
        let want: Vec<Vec<usize>> = q["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                p.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as usize)
                    .collect()
            })
            .collect();
        let coords: Vec<Vec<usize>> = got.iter().map(|p| p.coord.clone()).collect();
        assert_eq!(coords, want, "{q}");
    }
}
