//! `monomorph peaks --caller pytom` and `monomorph roc`, run as a user runs them, on the
//! pytom-match-pick oracle cases (`tests/fixtures/pipeline/oracle/`, with the run.json,
//! rotation index and rotations `make_inputs.py` derived from pytom's inputs): the particles,
//! their order, scores and angles, the ROC numbers; and the bad input they refuse.

use std::path::{Path, PathBuf};

use crate::cli_peaks::{fails2, ok, p, scratch};
use crate::common::{fixture, json};

fn case(name: &str, file: &str) -> PathBuf {
    fixture(&format!("pipeline/oracle/{name}/{file}"))
}

/// pytom's STAR rows: the values of the `particles` loop, one Vec per row.
fn pytom_star(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).expect("read star");
    let mut cols = Vec::new();
    let mut rows = Vec::new();
    for l in text.lines().map(str::trim) {
        if l.starts_with('_') {
            cols.push(l.split_whitespace().next().expect("col").to_string());
        } else if !cols.is_empty()
            && !l.is_empty()
            && !l.starts_with('#')
            && !l.starts_with("loop_")
        {
            rows.push(l.split_whitespace().map(String::from).collect());
        }
    }
    (cols, rows)
}

/// `Rz(a)·Ry(b)·Rz(c)` (degrees), row-major.
fn zyz(a: f64, b: f64, c: f64) -> [[f64; 3]; 3] {
    let rz = |t: f64| {
        let (s, c) = t.to_radians().sin_cos();
        [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    };
    let (s, co) = b.to_radians().sin_cos();
    let ry = [[co, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, co]];
    let mul = |x: [[f64; 3]; 3], y: [[f64; 3]; 3]| {
        let mut o = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                o[i][j] = (0..3).map(|k| x[i][k] * y[k][j]).sum();
            }
        }
        o
    };
    mul(mul(rz(a), ry), rz(c))
}

/// The CSV rows `z,y,x,score[,rotation,rot,tilt,psi]`.
fn csv_rows(path: &Path) -> Vec<Vec<f64>> {
    std::fs::read_to_string(path)
        .expect("read csv")
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|v| v.parse().expect("number")).collect())
        .collect()
}

#[test]
fn peaks_pytom_reproduces_the_extraction_with_angles() {
    let d = scratch("pytom-auto");
    let out = d.join("particles.csv");
    let star = d.join("particles.star");
    for o in [&out, &star] {
        ok(&[
            "peaks",
            "--caller",
            "pytom",
            "--scores",
            p(&case("extract_auto", "scores.npy")),
            "--rotation-index",
            p(&case("extract_auto", "rotation_index.npy.gz")),
            "--rotations",
            p(&case("extract_auto", "rotations.npy")),
            "--particle-diameter",
            "60",
            "--num-peaks",
            "40",
            "--out",
            p(o),
        ]);
    }
    let (cols, want) = pytom_star(&case("extract_auto", "pytom_particles.star"));
    let col = |n: &str| cols.iter().position(|c| c == n).expect(n);
    let got = csv_rows(&out);
    assert_eq!(got.len(), want.len());
    assert_eq!(got.len(), 10);
    let cj = json("pipeline/oracle/extract_auto/case.json");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let xyz: Vec<f64> = ["_rlnCoordinateX", "_rlnCoordinateY", "_rlnCoordinateZ"]
            .iter()
            .map(|c| w[col(c)].parse().expect("coordinate"))
            .collect();
        assert_eq!([g[2], g[1], g[0]], [xyz[0], xyz[1], xyz[2]], "particle {k}");
        let score = cj["particles"][k]["rlnLCCmax"].as_f64().expect("score") as f32;
        assert_eq!(g[3] as f32, score, "particle {k}");
        let ang = |c: &str| -> f64 { w[col(c)].parse().expect("angle") };
        let mw = zyz(
            ang("_rlnAngleRot"),
            ang("_rlnAngleTilt"),
            ang("_rlnAnglePsi"),
        );
        let mg = zyz(g[5], g[6], g[7]);
        for i in 0..3 {
            for j in 0..3 {
                assert!(
                    (mw[i][j] - mg[i][j]).abs() < 1e-5,
                    "particle {k} angles {g:?} vs {w:?}"
                );
            }
        }
    }
    let text = std::fs::read_to_string(&star).expect("star");
    assert!(text.contains("_rlnCoordinateX") && text.contains("_rlnAngleRot"));
    assert!(text.contains("cut-off 0.17772"), "{text}");
}

#[test]
fn peaks_pytom_tophat_reproduces_the_dual_threshold() {
    let d = scratch("pytom-tophat");
    let out = d.join("particles.csv");
    let o = ok(&[
        "peaks",
        "--caller",
        "pytom",
        "--scores",
        p(&case("extract_tophat_relion5", "scores.npy")),
        "--particle-diameter",
        "60",
        "--num-peaks",
        "40",
        "--tophat-filter",
        "--tophat-connectivity",
        "1",
        "--tophat-bins",
        "50",
        "--out",
        p(&out),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("11 voxels kept"), "{err}");
    let cj = json("pipeline/oracle/extract_tophat_relion5/case.json");
    let got = csv_rows(&out);
    let want = cj["particles"].as_array().expect("particles");
    assert_eq!(got.len(), want.len());
    let (b, ps) = (7.407407, 1.35);
    let dims = [40.0, 44.0, 32.0];
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        for (axis, key) in ["X", "Y", "Z"].iter().enumerate() {
            let c = w[format!("rlnCenteredCoordinate{key}Angst")]
                .as_f64()
                .expect("c");
            let idx = ((c / ps + dims[axis] * b / 2.0 - 1.0) / b).round();
            assert_eq!(g[2 - axis], idx, "particle {k} axis {key}");
        }
        assert_eq!(g[3] as f32, w["rlnLCCmax"].as_f64().expect("s") as f32);
    }
}

#[test]
fn roc_reproduces_pytom_estimate_roc() {
    let d = scratch("pytom-roc");
    let out = d.join("roc.json");
    let png = d.join("roc.png");
    ok(&[
        "roc",
        "--scores",
        p(&case("roc", "scores.npy")),
        "--particle-diameter",
        "60",
        "--num-peaks",
        "72",
        "--bins",
        "20",
        "--out",
        p(&out),
        "--png",
        p(&png),
    ]);
    let got: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("roc.json")).expect("json");
    let want = &json("pipeline/oracle/roc/case.json")["roc"];
    let close = |g: &serde_json::Value, w: f64, what: &str| {
        let g = g.as_f64().unwrap_or_else(|| panic!("{what} missing"));
        assert!((g - w).abs() <= 1e-3 * w.abs(), "{what}: {g} vs {w}");
    };
    close(
        &got["threshold"],
        want["threshold"].as_f64().expect("t"),
        "threshold",
    );
    let popt = &want["curve_fit"]["popt (sigma_1, mu_2, sigma_2, A_2)"];
    close(
        &got["noise"]["std"],
        popt[0].as_f64().expect("s1"),
        "noise std",
    );
    close(
        &got["particles"]["mean"],
        popt[1].as_f64().expect("m2"),
        "particles mean",
    );
    close(
        &got["particles"]["std"],
        popt[2].as_f64().expect("s2"),
        "particles std",
    );
    close(
        &got["particles"]["amplitude"],
        popt[3].as_f64().expect("a2"),
        "particles amplitude",
    );
    let noise = &want["noise (mean, std, size of the whole score map)"];
    close(
        &got["noise"]["mean"],
        noise[0].as_f64().expect("m0"),
        "noise mean",
    );
    let k = want["optimal_index"].as_u64().expect("k") as usize;
    close(
        &got["recall"],
        want["recall"][k].as_f64().expect("r"),
        "recall",
    );
    close(&got["fdr"], want["fdr"][k].as_f64().expect("f"), "fdr");
    assert!((got["n_particles"].as_f64().expect("n") - 34.1).abs() < 0.05);
    assert_eq!(got["curve"].as_array().expect("curve").len(), 50);
    assert_eq!(
        got["histogram"]["counts"].as_array().expect("counts").len(),
        20
    );
    assert_eq!(
        got["histogram"]["edges"].as_array().expect("edges").len(),
        21
    );
    let bytes = std::fs::read(&png).expect("png");
    assert_eq!(&bytes[1..4], b"PNG");
}

#[test]
fn bad_particle_diameters_and_connectivity_exit_2() {
    let scores = case("extract_auto", "scores.npy");
    let d = scratch("pytom-bad");
    let out = d.join("x.csv");
    let base = |extra: &[&str]| -> String {
        let mut a = vec![
            "peaks",
            "--caller",
            "pytom",
            "--scores",
            p(&scores),
            "--num-peaks",
            "5",
            "--out",
            p(&out),
        ];
        a.extend_from_slice(extra);
        fails2(&a)
    };
    for (dia, why) in [
        ("0", "positive"),
        ("-20", "positive"),
        ("5", "smaller than a voxel"),
        ("15", "radius"),
    ] {
        let e = base(&["--particle-diameter", dia]);
        assert!(
            e.contains("--particle-diameter") && e.contains(why),
            "{dia}: {e}"
        );
    }
    for c in ["0", "4"] {
        let e = base(&["--particle-diameter", "60", "--tophat-connectivity", c]);
        assert!(e.contains("--tophat-connectivity"), "{e}");
    }
    let e = base(&[]);
    assert!(e.contains("--particle-diameter"), "{e}");
    let e = fails2(&[
        "peaks",
        "--scores",
        p(&scores),
        "--particle-diameter",
        "60",
        "--out",
        p(&out),
    ]);
    assert!(
        e.contains("--particle-diameter") && e.contains("--caller pytom"),
        "{e}"
    );
    let e = fails2(&[
        "roc",
        "--scores",
        p(&scores),
        "--particle-diameter",
        "0",
        "--out",
        p(&d.join("r.json")),
    ]);
    assert!(e.contains("--particle-diameter"), "{e}");
    assert!(!out.exists() && !d.join("r.json").exists());
}

#[test]
fn flat_histograms_are_refused_not_cut() {
    let d = scratch("pytom-flat");
    // a constant map: every extracted score equal, no histogram to fit
    let flat = d.join("flat.npy");
    let a = ndarray::ArrayD::<f32>::from_elem(ndarray::IxDyn(&[20, 20, 20]), 0.3);
    ndarray_npy::write_npy(&flat, &a).expect("write");
    let e = fails2(&[
        "roc",
        "--scores",
        p(&flat),
        "--particle-diameter",
        "60",
        "--sampling-rate",
        "10",
        "--num-peaks",
        "20",
        "--out",
        p(&d.join("roc.json")),
    ]);
    assert!(
        e.contains("--scores") && (e.contains("fit") || e.contains("Gaussian")),
        "{e}"
    );
    assert!(!d.join("roc.json").exists());
    let e = fails2(&[
        "peaks",
        "--caller",
        "pytom",
        "--scores",
        p(&flat),
        "--particle-diameter",
        "60",
        "--sampling-rate",
        "10",
        "--num-peaks",
        "20",
        "--threshold-abs",
        "0.1",
        "--tophat-filter",
        "--out",
        p(&d.join("x.csv")),
    ]);
    assert!(e.contains("--tophat-filter"), "{e}");
    assert!(!d.join("x.csv").exists());
}
