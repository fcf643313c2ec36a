//! pytme rotates the reversed template (issue 17, item 5a): `tests/fixtures/rotation_edges`.
//!
//! The fixture's rotations are members of pytme's 648-rotation set for which sample points land
//! exactly on the edge of an 8³ box whose edge voxels are non-zero; `reference.py` says how it
//! was made. Rotating the template the direct way (the unreversed template, scipy's coordinates
//! of it) drops or keeps those points opposite to pytme; [`Resample::affine_transform_reversed`]
//! keeps them as pytme does. Both the rotated volumes and the FLC scores are checked, with the
//! direct way as the "before" (fed through `prerotated`), which must be visibly wrong so that the
//! fixture keeps testing what it is for.

use monomorph::algo::matching::{MatchParams, Prerotated, Score, match_template};
use monomorph::algo::rotations::RotationSet;
use monomorph::prelude::*;
use monomorph::{Interpolation, Resample};
use ndarray::{ArrayD, Axis, Ix3, IxDyn};

use crate::common::{json, npy};

const DIR: &str = "rotation_edges";

fn f(name: &str) -> String {
    format!("{DIR}/{name}")
}

/// pytme's transform of rotation `r` about (n − 1)/2: matrix R (float32 → f64), offset
/// `c − R·c` computed in f64 and stored as f32 in the homogeneous matrix.
fn transform(r: &[f32], n: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let d = n.len();
    let c: Vec<f64> = n.iter().map(|&v| (v as f64 - 1.0) / 2.0).collect();
    let m: Vec<f64> = r.iter().map(|&v| v as f64).collect();
    let off = (0..d)
        .map(|h| (c[h] - (0..d).map(|l| m[h * d + l] * c[l]).sum::<f64>()) as f32 as f64)
        .collect();
    (m, off)
}

/// Every rotation of the fixture applied to `vol` (prefiltered when `spline`), reversed
/// (pytme's way) or direct.
fn rotate_all(
    b: &Cpu<Double>,
    vol: &ArrayD<f32>,
    rots: &ArrayD<f32>,
    spline: bool,
    reversed: bool,
) -> Vec<ArrayD<f64>> {
    let n = vol.shape().to_vec();
    let mut src = vol.mapv(|v| v as f64);
    if spline {
        b.spline_prefilter(&mut src).unwrap();
    }
    rots.axis_iter(Axis(0))
        .map(|r| {
            let flat: Vec<f32> = r.iter().copied().collect();
            let (m, off) = transform(&flat, &n);
            let mut out = ArrayD::<f64>::zeros(IxDyn(&n));
            if reversed {
                b.affine_transform_reversed(&src, &m, &off, Interpolation::Cubic, &mut out)
            } else {
                b.affine_transform(&src, &m, &off, Interpolation::Cubic, &mut out)
            }
            .unwrap();
            out
        })
        .collect()
}

fn max_diff(a: &[ArrayD<f64>], want: &ArrayD<f32>) -> (f64, usize) {
    let mut worst = 0.0f64;
    let mut over = 0;
    for (i, got) in a.iter().enumerate() {
        let w = want.index_axis(Axis(0), i);
        for (g, e) in got.iter().zip(w.iter()) {
            let d = (g - *e as f64).abs();
            worst = worst.max(d);
            over += usize::from(d > 1e-3);
        }
    }
    (worst, over)
}

#[test]
fn rotated_templates_and_masks_are_pytmes() {
    let b = Cpu::<Double>::new();
    let rots: ArrayD<f32> = npy(&f("rotations.npy"));
    for (vol, want, spline) in [
        ("template.npy", "rotated_templates.npy", true),
        ("template_mask.npy", "rotated_masks.npy", false),
    ] {
        let v: ArrayD<f32> = npy(&f(vol));
        let want: ArrayD<f32> = npy(&f(want));
        let (after, after_over) = max_diff(&rotate_all(&b, &v, &rots, spline, true), &want);
        let (before, before_over) = max_diff(&rotate_all(&b, &v, &rots, spline, false), &want);
        eprintln!(
            "{vol}: direct (before) max |Δ| {before:.3e} ({before_over} voxels > 1e-3); \
             reversed (after) {after:.3e} ({after_over})"
        );
        assert!(
            before > 0.5 && before_over > 0,
            "{vol}: the fixture must hit the edge"
        );
        // pytme stores float32 (spline coefficients in f64 like ours).
        assert!(after < 1e-5 && after_over == 0, "{vol}: {after:.3e}");
    }
}

/// FLC over the fixture's rotations; `direct` feeds the directly rotated volumes instead.
fn flc(direct: bool) -> (ArrayD<f64>, ArrayD<i64>) {
    let b = Cpu::<Single>::new();
    let up = |a: &ArrayD<f32>| b.upload(a.view()).unwrap();
    let rots: ArrayD<f32> = npy(&f("rotations.npy"));
    let set = RotationSet::from_array(rots.view().into_dimensionality::<Ix3>().unwrap()).unwrap();
    let template: ArrayD<f32> = npy(&f("template.npy"));
    let mask: ArrayD<f32> = npy(&f("template_mask.npy"));
    let target = up(&npy(&f("target.npy")));
    let (t, m) = (up(&template), up(&mask));
    let d = Cpu::<Double>::new();
    let pre = |v: &ArrayD<f32>, spline: bool| -> Vec<_> {
        rotate_all(&d, v, &rots, spline, false)
            .iter()
            .map(|a| up(&a.mapv(|x| x as f32)))
            .collect()
    };
    let (pt, pm) = (pre(&template, true), pre(&mask, false));
    let mut p = MatchParams::new(Score::FLC, set);
    p.template_mask = Some(&m);
    if direct {
        p.prerotated = Some(Prerotated {
            templates: &pt,
            masks: Some(&pm),
        });
    }
    let r = match_template(&b, &target, &t, &p).unwrap();
    (
        b.download(&r.scores).unwrap().mapv(|v| v as f64),
        b.download(&r.rotation_index).unwrap().mapv(|v| v as i64),
    )
}

#[test]
fn flc_scores_are_pytmes() {
    let want: ArrayD<f32> = npy(&f("scores.npy"));
    let want_idx: ArrayD<i32> = npy(&f("rotation_index.npy"));
    let meta = json(&f("case.json"));
    assert_eq!(meta["pytme_version"], "0.3.6");
    let compare = |(s, i): &(ArrayD<f64>, ArrayD<i64>)| {
        let worst = s
            .iter()
            .zip(want.iter())
            .map(|(a, b)| (a - *b as f64).abs())
            .fold(0.0, f64::max);
        let moved = i
            .iter()
            .zip(want_idx.iter())
            .filter(|(a, b)| **a != **b as i64)
            .count();
        (worst, moved)
    };
    let (before, before_moved) = compare(&flc(true));
    let (after, after_moved) = compare(&flc(false));
    eprintln!(
        "FLC vs pytme: direct rotation (before) max |Δ| {before:.3e}, {before_moved} voxels \
         with another best rotation; reversed (after) {after:.3e}, {after_moved}"
    );
    assert!(before > 1e-3 && before_moved > 0, "the fixture must matter");
    assert!(after < 2e-5, "FLC max |Δ| {after:.3e}");
    assert_eq!(
        after_moved, 0,
        "voxels whose best rotation differs from pytme's"
    );
}
