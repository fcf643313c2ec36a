//! Orientations a user can trust: the angles `peaks` writes are RELION's, in the (x, y, z)
//! frame, and agree with pytme 0.3.6's `relion4` output; the false-alarm threshold is pytme's
//! postprocess rule (fixtures `tests/fixtures/orientation/`, made by its `reference.py`).

use std::path::Path;

use ndarray::{Array3, ArrayD, IxDyn};

use crate::cli_peaks::{ok, p, scratch};
use crate::common::{fixture, json};

/// RELION's `Euler_angles2matrix(rot, tilt, psi)` element by element (src/euler.cpp): the
/// matrix `A` on (x, y, z); a particle with these angles is `reference(Aᵀ·p)`.
fn relion_a(angles: [f64; 3]) -> [[f64; 3]; 3] {
    let [a, b, g] = angles.map(f64::to_radians);
    let (ca, sa, cb, sb, cg, sg) = (a.cos(), a.sin(), b.cos(), b.sin(), g.cos(), g.sin());
    let (cc, cs, sc, ss) = (cb * ca, cb * sa, sb * ca, sb * sa);
    [
        [cg * cc - sg * sa, cg * cs + sg * ca, -cg * sb],
        [-sg * cc - cg * sa, -sg * cs + cg * ca, sg * sb],
        [sc, ss, cb],
    ]
}

fn max_diff(a: &[[f64; 3]; 3], b: &[[f64; 3]; 3]) -> f64 {
    (0..9)
        .map(|k| (a[k / 3][k % 3] - b[k / 3][k % 3]).abs())
        .fold(0.0, f64::max)
}

/// The asymmetric test particle, a sum of Gaussian blobs, at `q = (x, y, z)` from its centre.
fn particle(q: [f64; 3]) -> f64 {
    const BLOBS: [([f64; 3], f64, f64); 5] = [
        ([0.0, 0.0, 0.0], 1.0, 1.4),
        ([3.0, 0.0, 0.0], 0.8, 0.9),
        ([0.0, 2.5, 0.0], 0.6, 0.9),
        ([0.0, 0.0, 2.0], 0.45, 0.8),
        ([1.5, -1.5, -1.5], 0.5, 0.8),
    ];
    BLOBS
        .iter()
        .map(|(c, amp, w)| {
            let d2: f64 = (0..3).map(|k| (q[k] - c[k]).powi(2)).sum();
            amp * (-d2 / (2.0 * w * w)).exp()
        })
        .sum()
}

/// The data rows of a STAR `data_particles` loop, as (column names, rows of fields).
fn star_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut cols = Vec::new();
    let mut rows = Vec::new();
    let mut in_particles = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("data_") {
            in_particles = l == "data_particles";
            continue;
        }
        if !in_particles || l.is_empty() || l.starts_with('#') || l == "loop_" {
            continue;
        }
        if l.starts_with("_rln") || l.starts_with("_pytme") {
            cols.push(l.split_whitespace().next().unwrap_or_default().to_string());
        } else {
            rows.push(l.split_whitespace().map(str::to_string).collect());
        }
    }
    (cols, rows)
}

fn field(cols: &[String], row: &[String], name: &str) -> f64 {
    let k = cols
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {cols:?}"));
    row[k]
        .parse()
        .unwrap_or_else(|_| panic!("{name}: {}", row[k]))
}

fn angles_of(cols: &[String], row: &[String]) -> [f64; 3] {
    [
        field(cols, row, "_rlnAngleRot"),
        field(cols, row, "_rlnAngleTilt"),
        field(cols, row, "_rlnAnglePsi"),
    ]
}

/// The false-alarm threshold a peaks STAR file says it used.
fn threshold_of(star: &str) -> f64 {
    let line = star
        .lines()
        .find(|l| l.starts_with("# false-alarm threshold "))
        .unwrap_or_else(|| panic!("no threshold comment in {star}"));
    line["# false-alarm threshold ".len()..]
        .split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{line}"))
}

/// Equal as angles (modulo 360°).
fn same_angle(a: f64, b: f64, tol: f64) -> bool {
    let d = (a - b).rem_euclid(360.0);
    d.min(360.0 - d) <= tol
}

#[test]
fn planted_particle_angles_follow_relions_definition() {
    let dir = scratch("planted");
    let (n, m) = (28usize, 13usize);
    let planted = [30.0, 50.0, 70.0];
    let centre = [13usize, 11, 15]; // (z, y, x)
    // Template on its grid: array (z, y, x), particle coordinates (x, y, z) from the centre.
    let c = (m as f64 - 1.0) / 2.0;
    let template = ArrayD::from_shape_fn(IxDyn(&[m, m, m]), |i| {
        particle([i[2] as f64 - c, i[1] as f64 - c, i[0] as f64 - c]) as f32
    });
    let mask = ArrayD::from_shape_fn(IxDyn(&[m, m, m]), |i| {
        let d2: f64 = (0..3).map(|k| (i[k] as f64 - c).powi(2)).sum();
        if d2.sqrt() <= c { 1.0f32 } else { 0.0 }
    });
    // Planted by RELION's definition in (x, y, z): particle(p) = reference(Aᵀ·p).
    let a = relion_a(planted);
    let target = ArrayD::from_shape_fn(IxDyn(&[n, n, n]), |i| {
        let pxyz = [
            i[2] as f64 - centre[2] as f64,
            i[1] as f64 - centre[1] as f64,
            i[0] as f64 - centre[0] as f64,
        ];
        let q: [f64; 3] = std::array::from_fn(|r| (0..3).map(|k| a[k][r] * pxyz[k]).sum());
        particle(q) as f32
    });
    let (tp, mp, gp) = (dir.join("t.npy"), dir.join("m.npy"), dir.join("g.npy"));
    ndarray_npy::write_npy(&tp, &template).expect("write");
    ndarray_npy::write_npy(&mp, &mask).expect("write");
    ndarray_npy::write_npy(&gp, &target).expect("write");
    // Candidates: the planted angles; the angles whose own ZYZ matrix, taken in array-index
    // order (z, y, x), is the planted rotation (what reading angles without the change of
    // frame would make of them); the inverse; and a few others.
    let a_zyx = {
        // R_xyz = Aᵀ; on (z, y, x): P·Aᵀ·P.
        let mut r = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                r[i][j] = a[2 - j][2 - i];
            }
        }
        r
    };
    let confused = monomorph::algo::rotations::matrix_to_euler_zyz(&a_zyx);
    let lines = [
        planted,
        confused,
        [-70.0, -50.0, -30.0],
        [70.0, 50.0, 30.0],
        [0.0, 0.0, 0.0],
        [30.0, 130.0, 70.0],
    ];
    let csv: String = std::iter::once("rot,tilt,psi\n".to_string())
        .chain(
            lines
                .iter()
                .map(|l| format!("{},{},{}\n", l[0], l[1], l[2])),
        )
        .collect();
    let euler = dir.join("angles.csv");
    std::fs::write(&euler, csv).expect("write");
    let run = dir.join("run");
    ok(&[
        "-q",
        "match",
        "--target",
        p(&gp),
        "--template",
        p(&tp),
        "--template-mask",
        p(&mp),
        "--score",
        "flc",
        "--euler",
        p(&euler),
        "--out",
        p(&run),
    ]);
    for ext in ["star", "csv"] {
        let out = dir.join(format!("peaks.{ext}"));
        ok(&[
            "-q",
            "peaks",
            "--scores",
            p(&run.join("scores.npy")),
            "--rotation-index",
            p(&run.join("rotation_index.npy")),
            "--rotations",
            p(&run.join("rotations.npy")),
            "--num-peaks",
            "1",
            "--out",
            p(&out),
        ]);
        let text = std::fs::read_to_string(&out).expect("read peaks");
        let (pos_xyz, angles, score) = if ext == "star" {
            let (cols, rows) = star_rows(&text);
            assert_eq!(rows.len(), 1, "{text}");
            let r = &rows[0];
            let pos = [
                field(&cols, r, "_rlnCoordinateX"),
                field(&cols, r, "_rlnCoordinateY"),
                field(&cols, r, "_rlnCoordinateZ"),
            ];
            let s = field(&cols, r, "_rlnAutopickFigureOfMerit");
            (pos, angles_of(&cols, r), s)
        } else {
            let mut l = text.lines();
            assert_eq!(l.next(), Some("z,y,x,score,rotation,rot,tilt,psi"));
            let v: Vec<f64> = l
                .next()
                .expect("one row")
                .split(',')
                .map(|x| x.parse().expect("number"))
                .collect();
            ([v[2], v[1], v[0]], [v[5], v[6], v[7]], v[3])
        };
        assert_eq!(
            pos_xyz,
            [centre[2] as f64, centre[1] as f64, centre[0] as f64],
            "{ext}: {text}"
        );
        assert!(score > 0.99, "{ext}: score {score}: {text}");
        let got = relion_a(angles);
        assert!(
            max_diff(&got, &a) < 1e-5,
            "{ext}: angles {angles:?} are not RELION's {planted:?}: {text}"
        );
        for k in 0..3 {
            assert!(same_angle(angles[k], planted[k], 1e-4), "{ext}: {angles:?}");
        }
    }
}

/// Runs monomorph's match + peaks on a pytme fixture case; returns (peaks STAR text, stderr).
fn monomorph_star(case: &Path, dir: &Path) -> String {
    let run = dir.join("run");
    ok(&[
        "-q",
        "match",
        "--target",
        p(&case.join("target.mrc")),
        "--template",
        p(&case.join("template.mrc")),
        "--template-mask",
        p(&case.join("mask.mrc")),
        "--score",
        "flc",
        "--rotations",
        p(&case.join("rotations.npy")),
        "--out",
        p(&run),
    ]);
    let star = dir.join("peaks.star");
    ok(&[
        "-q",
        "peaks",
        "--scores",
        p(&run.join("scores.npy")),
        "--rotation-index",
        p(&run.join("rotation_index.npy")),
        "--rotations",
        p(&run.join("rotations.npy")),
        "--caller",
        "maxfilter",
        "--min-distance",
        "5",
        "--false-positives",
        "1",
        "--out",
        p(&star),
    ]);
    std::fs::read_to_string(&star).expect("star")
}

/// Same rows as pytme's STAR: coordinates exactly, angles modulo 360° and as rotations, scores
/// to float32 round-off.
fn assert_same_particles(ours: &str, theirs: &str, what: &str) {
    let (oc, or) = star_rows(ours);
    let (tc, tr) = star_rows(theirs);
    assert_eq!(or.len(), tr.len(), "{what}: peak count\n{ours}\n{theirs}");
    for (o, t) in or.iter().zip(&tr) {
        for ax in ["_rlnCoordinateX", "_rlnCoordinateY", "_rlnCoordinateZ"] {
            assert_eq!(field(&oc, o, ax), field(&tc, t, ax), "{what}: {ax}\n{ours}");
        }
        let (ao, at) = (angles_of(&oc, o), angles_of(&tc, t));
        assert!(
            max_diff(&relion_a(ao), &relion_a(at)) < 1e-4,
            "{what}: {ao:?} vs pytme {at:?}"
        );
        for k in 0..3 {
            assert!(same_angle(ao[k], at[k], 1e-3), "{what}: {ao:?} vs {at:?}");
        }
        let (so, st) = (
            field(&oc, o, "_rlnAutopickFigureOfMerit"),
            field(&tc, t, "_pytmeScore"),
        );
        assert!((so - st).abs() < 1e-4, "{what}: score {so} vs {st}");
    }
}

#[test]
fn star_output_matches_pytme_relion4() {
    for name in ["cube24", "set216"] {
        let case = fixture(&format!("orientation/{name}"));
        let info = json(&format!("orientation/{name}/case.json"));
        let dir = scratch(&format!("pytme-{name}"));
        let ours = monomorph_star(&case, &dir);
        let theirs = std::fs::read_to_string(case.join("pytme.star")).expect("pytme.star");
        // Header: pytme's coordinate and angle columns, in its order, and the micrograph.
        let (oc, _) = star_rows(&ours);
        let (tc, _) = star_rows(&theirs);
        assert_eq!(oc[..6], tc[..6], "{name}: columns {oc:?} vs {tc:?}");
        assert!(oc.contains(&"_rlnMicrographName".to_string()), "{oc:?}");
        assert!(ours.contains("# version 40001") && theirs.contains("# version 40001"));
        // RELION 3.1+'s optics block with pytme's pixel size (the MRC target's voxel size).
        let pixel = |s: &str| -> f64 {
            let i = s.find("data_optics").expect("data_optics block");
            let row = s[i..]
                .lines()
                .find(|l| l.trim_start().starts_with('1'))
                .expect("optics row");
            row.split_whitespace()
                .nth(2)
                .expect("pixel size")
                .parse()
                .expect("number")
        };
        assert_eq!(pixel(&ours), pixel(&theirs), "{name}: pixel size");
        assert!(oc.contains(&"_rlnOpticsGroup".to_string()), "{oc:?}");
        assert_same_particles(&ours, &theirs, name);
        // Every planted particle is called with its rotation.
        let (_, rows) = star_rows(&ours);
        assert_eq!(
            rows.len() as u64,
            info["pytme_peaks"].as_u64().expect("pytme_peaks")
        );
        // pytme's rule from our own run's statistics: pytme's threshold to float round-off.
        let want = info["threshold"].as_f64().expect("threshold");
        let got = threshold_of(&ours);
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "{name}: threshold {got} vs pytme {want}"
        );
        assert!(ours.contains("pytme's postprocess rule"), "{ours}");
    }
}

#[test]
fn false_alarm_threshold_equals_pytme_postprocess_on_its_scores() {
    for name in ["cube24", "set216"] {
        let case = fixture(&format!("orientation/{name}"));
        let info = json(&format!("orientation/{name}/case.json"));
        let dir = scratch(&format!("pytme-scores-{name}"));
        // pytme's own score map and statistics, as a run folder with its run.json.
        let scores: ArrayD<f32> =
            crate::common::npy(&format!("orientation/{name}/pytme_scores.npy"));
        let shape = scores.shape().to_vec();
        ndarray_npy::write_npy(dir.join("scores.npy"), &scores).expect("write");
        let stats = serde_json::json!({"score_statistics": {
            "ssum": info["pytme_ssum"], "n_rotations": info["n_rotations"], "shape": shape,
        }});
        std::fs::write(dir.join("run.json"), stats.to_string()).expect("write");
        let star = dir.join("p.star");
        let o = ok(&[
            "peaks",
            "--scores",
            p(&dir.join("scores.npy")),
            "--caller",
            "maxfilter",
            "--min-distance",
            "5",
            "--false-positives",
            "1",
            "--out",
            p(&star),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("warning"), "{err}");
        let ours = std::fs::read_to_string(&star).expect("star");
        let want = info["threshold"].as_f64().expect("threshold");
        let got = threshold_of(&ours);
        assert!(
            (got - want).abs() <= 4.0 * f64::EPSILON * want,
            "{name}: threshold {got} vs pytme postprocess {want}"
        );
        assert_eq!(
            info["threshold_logged"].as_f64(),
            Some(want),
            "{name}: the fixture's threshold is the one pytme logged"
        );
        let theirs = std::fs::read_to_string(case.join("pytme.star")).expect("pytme.star");
        let (oc, or) = star_rows(&ours);
        let (tc, tr) = star_rows(&theirs);
        assert_eq!(or.len(), tr.len(), "{name}\n{ours}\n{theirs}");
        for (o, t) in or.iter().zip(&tr) {
            for ax in ["_rlnCoordinateX", "_rlnCoordinateY", "_rlnCoordinateZ"] {
                assert_eq!(field(&oc, o, ax), field(&tc, t, ax), "{name}: {ax}");
            }
        }
    }
}

#[test]
fn rotations_file_is_pytmes_set_in_array_index_order() {
    // The fixture's rotations.npy is pytme's set (acting on x, y, z) with reversed axes; our
    // RELION angles of each are scipy's ZYZ of pytme's matrix: check on the planted ones.
    for name in ["cube24", "set216"] {
        let info = json(&format!("orientation/{name}/case.json"));
        let rots: Array3<f32> =
            ndarray_npy::read_npy(fixture(&format!("orientation/{name}/rotations.npy")))
                .expect("rotations.npy");
        for pl in info["planted"].as_array().expect("planted") {
            let k = pl["pytme_rotation"].as_u64().expect("index") as usize;
            let want: Vec<f64> = pl["relion_angles"]
                .as_array()
                .expect("angles")
                .iter()
                .map(|v| v.as_f64().expect("angle"))
                .collect();
            let m: Vec<f64> = rots
                .slice(ndarray::s![k, .., ..])
                .iter()
                .map(|&v| v as f64)
                .collect();
            let got = monomorph::algo::rotations::relion_euler_of(&m).expect("3x3");
            let wa = [want[0], want[1], want[2]];
            assert!(
                max_diff(&relion_a(got), &relion_a(wa)) < 1e-5,
                "{got:?} vs {wa:?}"
            );
        }
    }
}
