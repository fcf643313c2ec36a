//! `monomorph match --scheduling-mask / --search-z/-y/-x` and `monomorph peaks --max-score /
//! --min-score / --peak-oversampling`, run as a user runs them.

use std::path::Path;

use ndarray::{ArrayD, Dimension, IxDyn};

use crate::cli_peaks::{fails2, ok, p, scratch};
use crate::common::{fixture, json};

fn read_f32(path: &Path) -> ArrayD<f32> {
    match monomorph::io::read_npy(path).expect("read") {
        monomorph::io::HostArray::F32(a) => a,
        other => panic!("{}: {}", path.display(), other.dtype()),
    }
}

fn read_i32(path: &Path) -> ArrayD<i32> {
    match monomorph::io::read_npy(path).expect("read") {
        monomorph::io::HostArray::I32(a) => a,
        other => panic!("{}: {}", path.display(), other.dtype()),
    }
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// `match` of the 3d_cc fixture (CC, 10 rotations) into `out` with `extra` flags.
fn match3d(out: &Path, extra: &[&str]) {
    let f = |x: &str| fixture(&format!("matching/3d_cc/{x}"));
    let (t, m, r) = (f("target.npy"), f("template.npy"), f("rotations.npy"));
    let mut args = vec![
        "match",
        "-m",
        p(&t),
        "-i",
        p(&m),
        "-s",
        "cc",
        "--rotations",
        p(&r),
        "-o",
        p(out),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    ok(&args);
}

/// Searched positions equal the full run's (scores to round-off, rotations where the score
/// differs from the second best, checked through the scores of both); the rest is −∞ / −1.
fn check(full: &Path, part: &Path, searched: impl Fn(&[usize]) -> bool) {
    let (s0, i0) = (
        read_f32(&full.join("scores.npy")),
        read_i32(&full.join("rotation_index.npy")),
    );
    let (s1, i1) = (
        read_f32(&part.join("scores.npy")),
        read_i32(&part.join("rotation_index.npy")),
    );
    let scale = s0.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let (mut n, mut worst, mut moved) = (0usize, 0.0f32, 0usize);
    for (idx, &v) in s0.indexed_iter() {
        let ix: Vec<usize> = idx.as_array_view().to_vec();
        if searched(&ix) {
            n += 1;
            worst = worst.max((s1[&idx] - v).abs());
            moved += usize::from(i1[&idx] != i0[&idx]);
        } else {
            assert!(
                s1[&idx] == f32::NEG_INFINITY && i1[&idx] == -1,
                "{ix:?}: not searched, holds {} / {}",
                s1[&idx],
                i1[&idx]
            );
        }
    }
    assert!(n > 0);
    assert!(worst <= 2e-6 * scale, "searched scores differ by {worst}");
    // Exact ties aside, the best rotation is the full run's.
    assert!(moved * 1000 <= n, "{moved} of {n} voxels changed rotation");
}

#[test]
fn search_ranges_score_as_the_full_run() {
    let d = scratch("search-ranges");
    let (full, part, tiled) = (d.join("full"), d.join("part"), d.join("tiled"));
    match3d(&full, &[]);
    match3d(
        &part,
        &[
            "--search-z",
            "12:30",
            "--search-y",
            ":40",
            "--search-x",
            "5:",
        ],
    );
    let inside = |ix: &[usize]| (12..30).contains(&ix[0]) && ix[1] < 40 && ix[2] >= 5;
    check(&full, &part, inside);
    let j = run_json(&part);
    assert_eq!(
        j["search"]["ranges"],
        serde_json::json!([[12, 30], [0, 40], [5, 48]])
    );
    assert_eq!(j["tiles"], 1);
    // Tiled by memory: the same scores, tiles of the box only.
    match3d(
        &tiled,
        &[
            "--search-z",
            "12:30",
            "--search-y",
            ":40",
            "--search-x",
            "5:",
            "--memory-limit",
            "3M",
        ],
    );
    assert!(run_json(&tiled)["tiles"].as_u64().unwrap() > 1);
    check(&full, &tiled, inside);
    // Peaks only inside the box, with every caller.
    for caller in ["skimage", "maxfilter", "recursive"] {
        let csv = d.join(format!("{caller}.csv"));
        ok(&[
            "peaks",
            "--scores",
            p(&tiled.join("scores.npy")),
            "--caller",
            caller,
            "--min-distance",
            "3",
            "--num-peaks",
            "3000",
            "--out",
            p(&csv),
            "--quiet",
        ]);
        let rows = peak_rows(&csv);
        assert!(!rows.is_empty(), "{caller}");
        for r in rows {
            let ix: Vec<usize> = r[..3].iter().map(|&v| v as usize).collect();
            assert!(
                inside(&ix) && r[3].is_finite(),
                "{caller}: peak {r:?} outside"
            );
        }
    }
    // pytme's false-alarm rule over the searched positions (run.json beside the scores).
    ok(&[
        "peaks",
        "--scores",
        p(&part.join("scores.npy")),
        "--false-positives",
        "1",
        "--out",
        p(&d.join("fa.csv")),
        "--quiet",
    ]);
}

/// Rows of a CSV peak list, fields as f64.
fn peak_rows(csv: &Path) -> Vec<Vec<f64>> {
    std::fs::read_to_string(csv)
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

#[test]
fn scheduling_mask_skips_tiles_and_no_peak_lies_outside() {
    let d = scratch("sched-mask");
    let (full, tiled, masked) = (d.join("full"), d.join("tiled"), d.join("masked"));
    let mask = ArrayD::from_shape_fn(IxDyn(&[48, 48, 48]), |ix| {
        let r2 = (ix[0] as f64 - 10.0).powi(2)
            + (ix[1] as f64 - 12.0).powi(2)
            + (ix[2] as f64 - 36.0).powi(2);
        if r2 <= 49.0 { 1.0f32 } else { 0.0 }
    });
    let mpath = d.join("mask.npy");
    ndarray_npy::write_npy(&mpath, &mask).unwrap();
    match3d(&full, &[]);
    match3d(&tiled, &["--memory-limit", "3M"]);
    match3d(
        &masked,
        &["--memory-limit", "3M", "--scheduling-mask", p(&mpath)],
    );
    let (all, some) = (
        run_json(&tiled)["tiles"].as_u64().unwrap(),
        run_json(&masked)["tiles"].as_u64().unwrap(),
    );
    assert!(
        some < all && some >= 1,
        "tiles: {some} with the mask, {all} without"
    );
    let j = run_json(&masked);
    assert!(
        j["search"]["scheduling_mask"]
            .as_str()
            .unwrap()
            .ends_with("mask.npy")
    );
    check(&full, &masked, |ix| mask[IxDyn(ix)] == 1.0);
    for caller in ["skimage", "maxfilter", "recursive"] {
        let csv = d.join(format!("{caller}.csv"));
        ok(&[
            "peaks",
            "--scores",
            p(&masked.join("scores.npy")),
            "--caller",
            caller,
            "--min-distance",
            "2",
            "--num-peaks",
            "2000",
            "--out",
            p(&csv),
            "--quiet",
        ]);
        let rows = peak_rows(&csv);
        assert!(!rows.is_empty(), "{caller}");
        for r in rows {
            let ix: Vec<usize> = r[..3].iter().map(|&v| v as usize).collect();
            assert!(
                mask[IxDyn(&ix)] == 1.0,
                "{caller}: peak {r:?} outside the mask"
            );
        }
    }
}

#[test]
fn bad_search_flags_exit_2_naming_the_flag() {
    let d = scratch("search-bad");
    let f = |x: &str| fixture(&format!("matching/3d_cc/{x}"));
    let (t, m) = (f("target.npy"), f("template.npy"));
    let out = d.join("out");
    let base = [
        "match",
        "-m",
        p(&t),
        "-i",
        p(&m),
        "-s",
        "cc",
        "-a",
        "90",
        "-o",
        p(&out),
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let fails = |extra: &[&str], needle: &str| {
        let args = with(extra);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let e = fails2(&a);
        assert!(e.contains(needle), "{extra:?}: {e}");
    };
    fails(&["--search-z", "5:5"], "--search-z");
    fails(&["--search-y", "0:49"], "--search-y");
    fails(&["--search-x", "a:b"], "--search-x");
    fails(&["--search-x", "12"], "--search-x");
    let write = |name: &str, a: ArrayD<f32>| {
        let path = d.join(name);
        ndarray_npy::write_npy(&path, &a).unwrap();
        path
    };
    let shape = IxDyn(&[48, 48, 48]);
    let small = write("small.npy", ArrayD::ones(IxDyn(&[48, 48, 47])));
    let half = write("half.npy", ArrayD::from_elem(shape.clone(), 0.5));
    let empty = write("empty.npy", ArrayD::zeros(shape.clone()));
    let mut corner = ArrayD::zeros(shape);
    corner[[40, 40, 40]] = 1.0;
    let corner = write("corner.npy", corner);
    fails(&["--scheduling-mask", p(&small)], "--scheduling-mask");
    fails(&["--scheduling-mask", p(&half)], "--scheduling-mask");
    fails(&["--scheduling-mask", p(&empty)], "--scheduling-mask");
    fails(
        &["--scheduling-mask", p(&corner), "--search-z", "0:20"],
        "--scheduling-mask",
    );
    // 2-D targets have no z.
    let f2 = |x: &str| fixture(&format!("matching/2d_cc/{x}"));
    let (t2, m2) = (f2("target.npy"), f2("template.npy"));
    let e = fails2(&[
        "match",
        "-m",
        p(&t2),
        "-i",
        p(&m2),
        "-a",
        "90",
        "-o",
        p(&out),
        "--search-z",
        "0:4",
    ]);
    assert!(e.contains("--search-z"), "{e}");
    assert!(!out.exists(), "a refused run must write nothing");
    // Peak flags.
    let scores = fixture("peak-oversampling/map3d.npy");
    let csv = d.join("p.csv");
    for (flag, v) in [
        ("--peak-oversampling", "0"),
        ("--peak-oversampling", "nan"),
        ("--max-score", "nan"),
    ] {
        let e = fails2(&["peaks", "--scores", p(&scores), flag, v, "--out", p(&csv)]);
        assert!(e.contains(flag), "{e}");
    }
    let e = fails2(&[
        "peaks",
        "--scores",
        p(&scores),
        "--min-score",
        "0.5",
        "--max-score",
        "0.2",
        "--out",
        p(&csv),
    ]);
    assert!(e.contains("--max-score"), "{e}");
}

#[test]
fn peaks_min_max_score_and_oversampling_are_pytmes() {
    let d = scratch("peaks-pytme");
    let case = json("peak-oversampling/case.json");
    let scores = fixture("peak-oversampling/map3d.npy");
    for q in case["maxfilter"].as_array().unwrap() {
        let csv = d.join("mf.csv");
        let s = |k: &str| q[k].to_string();
        ok(&[
            "peaks",
            "--scores",
            p(&scores),
            "--caller",
            "maxfilter",
            "--min-score",
            &s("min_score"),
            "--max-score",
            &s("max_score"),
            "--min-distance",
            &s("min_distance"),
            "--num-peaks",
            &s("num_peaks"),
            "--out",
            p(&csv),
            "--quiet",
        ]);
        let rows = peak_rows(&csv);
        let want = q["positions"].as_array().unwrap();
        assert_eq!(rows.len(), want.len(), "{q}");
        for (r, w) in rows.iter().zip(want) {
            let w: Vec<f64> = w
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(r[..3], w[..], "{q}");
        }
    }
    // Sub-voxel positions: pytme's caller's peaks (min_distance 3, min_score 0.1, 6 peaks),
    // oversampled.
    for o in case["oversampling"].as_array().unwrap() {
        if o["map"] != "map3d" {
            continue;
        }
        let f = o["factor"].to_string();
        let (csv, star) = (d.join("os.csv"), d.join("os.star"));
        let flags = |out: &Path| -> Vec<String> {
            [
                "peaks",
                "--scores",
                p(&scores),
                "--caller",
                "maxfilter",
                "--min-distance",
                "3",
                "--min-score",
                "0.1",
                "--num-peaks",
                "6",
                "--peak-oversampling",
                &f,
                "--out",
                p(out),
                "--quiet",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        for out in [&csv, &star] {
            let a = flags(out);
            ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        }
        let rows = peak_rows(&csv);
        let want = o["expected"].as_array().unwrap();
        assert!(
            !rows.is_empty() && rows.len() + 1 == want.len(),
            "factor {f}"
        );
        for (r, w) in rows.iter().zip(want) {
            for (x, y) in r[..3].iter().zip(w.as_array().unwrap()) {
                assert!(
                    (x - y.as_f64().unwrap()).abs() < 1e-9,
                    "factor {f}: {r:?} vs {w}"
                );
            }
        }
        // The STAR file has the same fractional coordinates (x, y, z = axes 2, 1, 0).
        let text = std::fs::read_to_string(&star).unwrap();
        let first = text
            .lines()
            .find(|l| {
                l.split_whitespace().count() >= 4 && l.chars().next().unwrap().is_ascii_digit()
            })
            .unwrap();
        let xyz: Vec<f64> = first
            .split_whitespace()
            .take(3)
            .map(|v| v.parse().unwrap())
            .collect();
        let w: Vec<f64> = want[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(xyz, vec![w[2], w[1], w[0]], "{text}");
    }
}

#[test]
fn help_lists_the_search_and_peak_flags() {
    let o = ok(&["match", "--help"]);
    let h = String::from_utf8_lossy(&o.stdout);
    for s in [
        "--scheduling-mask",
        "--search-z",
        "--search-y",
        "--search-x",
        "--max-score",
        "--min-score",
        "--peak-oversampling",
    ] {
        assert!(h.contains(s), "match --help lacks {s}");
    }
    let o = ok(&["peaks", "--help"]);
    let h = String::from_utf8_lossy(&o.stdout);
    for s in ["--max-score", "--min-score", "--peak-oversampling"] {
        assert!(h.contains(s), "peaks --help lacks {s}");
    }
}

#[test]
fn list_mode_restricts_and_calls_peaks_as_one_run() {
    let d = scratch("search-list");
    let f = |x: &str| fixture(&format!("matching/3d_cc/{x}"));
    let (t, m, r) = (f("target.npy"), f("template.npy"), f("rotations.npy"));
    let list = d.join("list.txt");
    std::fs::write(&list, format!("{}\n", p(&t))).unwrap();
    let (one, many) = (d.join("one"), d.join("many"));
    let flags = [
        "-s",
        "cc",
        "--rotations",
        p(&r),
        "--search-z",
        "12:30",
        "--quiet",
    ];
    let mut a = vec!["match", "-m", p(&t), "-i", p(&m), "-o", p(&one)];
    a.extend_from_slice(&flags);
    ok(&a);
    // A maximum below the best score (CC scores are not bounded by 1).
    let best = read_f32(&one.join("scores.npy"))
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let hi = format!("{}", best / 2.0);
    let mut a = vec![
        "match",
        "--target-list",
        p(&list),
        "-i",
        p(&m),
        "-o",
        p(&many),
        "--peaks",
        "--caller",
        "maxfilter",
        "--max-score",
        &hi,
        "--peak-oversampling",
        "2",
        "--min-distance",
        "4",
    ];
    a.extend_from_slice(&flags);
    ok(&a);
    let s1 = std::fs::read(one.join("scores.npy")).unwrap();
    let s2 = std::fs::read(many.join("target").join("scores.npy")).unwrap();
    assert!(s1 == s2, "the list's folder differs from the single run");
    let star = std::fs::read_to_string(many.join("particles.star")).unwrap();
    let rows: Vec<Vec<String>> = star
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .filter(|v: &Vec<String>| v.len() >= 7)
        .collect();
    assert!(!rows.is_empty(), "{star}");
    for r in rows {
        let z: f64 = r[2].parse().unwrap();
        let score: f64 = r[r.len() - 1].parse().unwrap();
        assert!(
            (11.0..30.0).contains(&z) && score <= (best / 2.0) as f64 + 1e-3,
            "{r:?}"
        );
    }
}
