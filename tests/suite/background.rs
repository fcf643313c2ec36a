//! pytme 0.3.6's phase-scrambling background correction (`MatchParams::background`,
//! `match --background-correction phase-scrambling`) against pytme's own output
//! (`tests/fixtures/phase-scrambling/`, made by `reference.py` there): numpy's float32 normal
//! draws bit for bit, the scrambled template, and the corrected scores; tiled = untiled; the
//! command's flag and its errors. MPI byte identity is in `mpi.rs`.

use monomorph::algo::filters::standard_normal_f32;
use monomorph::algo::matching::{Background, MatchParams, Score, match_template};
use monomorph::algo::rotations::RotationSet;
use monomorph::prelude::*;
use ndarray::ArrayD;

use crate::common::{json, npy};

const CASES: [(&str, Score); 3] = [
    ("3d_flc", Score::FLC),
    ("2d_cc", Score::CC),
    ("2d_ncc", Score::NCC),
];

fn f(case: &str, name: &str) -> ArrayD<f32> {
    npy(&format!("phase-scrambling/{case}/{name}"))
}

#[test]
fn numpy_float32_normal_draws_are_reproduced_bit_for_bit() {
    for (case, _) in CASES {
        let want = f(case, "normal.npy");
        let got = standard_normal_f32(42, want.len());
        let same = want
            .iter()
            .zip(&got)
            .filter(|(a, b)| a.to_bits() == b.to_bits())
            .count();
        assert_eq!(
            same,
            want.len(),
            "{case}: {} of {} draws differ",
            want.len() - same,
            want.len()
        );
    }
}

/// Runs a case on `b` with or without the correction, optionally tiled.
fn run<B: Backend>(
    b: &B,
    case: &str,
    score: Score,
    bg: bool,
    tile: Option<Vec<usize>>,
) -> ArrayD<f64> {
    let up = |a: &ArrayD<f32>| {
        b.upload(
            a.mapv(|v| monomorph::FloatOf::<B>::from_f64(v as f64))
                .view(),
        )
        .unwrap()
    };
    let (t, p, m) = (
        up(&f(case, "target.npy")),
        up(&f(case, "template.npy")),
        up(&f(case, "template_mask.npy")),
    );
    let rot = f(case, "rotations.npy");
    let d = rot.shape()[1];
    let flat: Vec<f64> = rot.iter().map(|&v| v as f64).collect();
    let mut params = MatchParams::new(score, RotationSet::from_matrices(d, &flat).unwrap());
    params.template_mask = Some(&m);
    params.background = bg.then_some(Background::PhaseScrambling);
    params.tile_shape = tile;
    let r = match_template(b, &t, &p, &params).unwrap();
    assert!(
        r.background.is_none(),
        "match_template applies the correction"
    );
    b.download(&r.scores).unwrap().mapv(monomorph::Real::as_f64)
}

fn max_abs(a: &ArrayD<f64>) -> f64 {
    a.iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

#[test]
fn corrected_scores_equal_pytmes() {
    let b = Cpu::<Single>::new();
    for (case, score) in CASES {
        let meta = json(&format!("phase-scrambling/{case}/case.json"));
        assert_eq!(meta["score"], score.name());
        let want = f(case, "scores.npy").mapv(|v| v as f64);
        let want_raw = f(case, "scores_raw.npy").mapv(|v| v as f64);
        let got = run(&b, case, score, true, None);
        let raw = run(&b, case, score, false, None);
        let scale = max_abs(&want_raw);
        // The uncorrected scores first (monomorph's own spline rotation against scipy's), then
        // the correction alone, then the corrected scores.
        let e_raw = max_abs(&(&raw - &want_raw)) / scale;
        let e_corr = max_abs(&((&got - &raw) - (&want - &want_raw))) / scale;
        let e = max_abs(&(&got - &want)) / scale;
        eprintln!(
            "{case}: relative max |diff| raw {e_raw:.2e}, correction {e_corr:.2e}, corrected {e:.2e}"
        );
        assert!(
            max_abs(&(&want - &want_raw)) > 1e-3 * scale,
            "{case}: no correction to check"
        );
        assert!(
            e_raw <= 1e-5 && e_corr <= 1e-5 && e <= 1e-5,
            "{case}: {e_raw} {e_corr} {e}"
        );
    }
}

#[test]
fn a_tiled_corrected_run_equals_the_untiled_one() {
    let b = Cpu::<Single>::new();
    for (case, score, tile) in [
        ("3d_flc", Score::FLC, vec![9, 13, 24]),
        ("2d_cc", Score::CC, vec![15, 11]),
    ] {
        let whole = run(&b, case, score, true, None);
        let tiled = run(&b, case, score, true, Some(tile));
        let e = max_abs(&(&whole - &tiled)) / max_abs(&whole);
        assert!(e <= 1e-5, "{case}: tiled differs by {e}");
    }
}

#[test]
fn mcc_and_prerotated_templates_are_refused() {
    let b = Cpu::<Single>::new();
    let t = b
        .upload(ArrayD::<f32>::ones(ndarray::IxDyn(&[16, 16])).view())
        .unwrap();
    let p = b
        .upload(ArrayD::<f32>::ones(ndarray::IxDyn(&[4, 4])).view())
        .unwrap();
    let mut params = MatchParams::new(Score::MCC, RotationSet::uniform(2, 90.0).unwrap());
    params.target_mask = Some(&t);
    params.background = Some(Background::PhaseScrambling);
    let e = match_template(&b, &t, &p, &params)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("background_correction"), "{e}");
}

#[cfg(feature = "cli")]
#[test]
fn the_command_takes_the_flag_and_names_it_in_its_errors() {
    let dir = std::env::temp_dir().join(format!("monomorph-bg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fx = |n: &str| crate::common::fixture(&format!("phase-scrambling/2d_cc/{n}"));
    let (t, p, r) = (fx("target.npy"), fx("template.npy"), fx("rotations.npy"));
    let out = dir.join("out");
    let cmd = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_monomorph"))
            .args([
                "match",
                "-m",
                t.to_str().unwrap(),
                "-i",
                p.to_str().unwrap(),
            ])
            .args(["--rotations", r.to_str().unwrap(), "-s", "cc", "-q"])
            .args(["--out", out.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = cmd(&["--background-correction", "phase-scrambling"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: ArrayD<f32> = ndarray_npy::read_npy(out.join("scores.npy")).unwrap();
    let want = f("2d_cc", "scores.npy");
    let e = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        e <= 1e-5 * want.iter().fold(0.0f32, |m, v| m.max(v.abs())),
        "{e}"
    );
    let o = cmd(&["--background-correction", "phase-randomization"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--background-correction") && err.contains("phase-scrambling"),
        "{err}"
    );
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error")).count(),
        1,
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
