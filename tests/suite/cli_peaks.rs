//! `monomorph peaks` (and the inputs it shares with `match`): huge window and border values,
//! rotation validation identical to `match`, the Euler CSV header rule, the false-alarm rule
//! reported and checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use monomorph::algo::peaks::{
    ExcludeBorder, PeakParams, PytmeParams, call_peaks_maximum_filter, call_peaks_recursive,
    find_peaks,
};
use monomorph::prelude::*;
use ndarray::{Array3, ArrayD, IxDyn};

use crate::common::fixture;

pub(crate) fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_monomorph"))
}

/// A fresh, empty scratch folder for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-peaks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

pub(crate) fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

pub(crate) fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run monomorph")
}

pub(crate) fn ok(args: &[&str]) -> Output {
    let o = run(args);
    assert!(
        o.status.success(),
        "monomorph {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    o
}

/// Runs a command that must fail with exit code 2 and one `error:` line; returns that line.
pub(crate) fn fails2(args: &[&str]) -> String {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "monomorph {args:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "monomorph {args:?}: {err:?}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    lines[0].to_string()
}

/// Runs the command and kills it if it has not finished within `limit` (then the test fails):
/// a hang or runaway allocation must not stall the suite.
fn ok_within(args: &[&str], limit: Duration) -> Output {
    let mut child = bin()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn monomorph");
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("monomorph {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("output");
    assert!(
        o.status.success(),
        "monomorph {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A reproducible pseudo-random 3-D map.
fn noise_map(n: usize, seed: u64) -> ArrayD<f32> {
    let mut s = seed;
    ArrayD::from_shape_fn(IxDyn(&[n, n, n]), |_| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32) / (1u64 << 24) as f32
    })
}

#[test]
fn huge_min_distance_is_instant_and_equals_the_map_size() {
    let dir = scratch("huge-md");
    let n = 24;
    let map = noise_map(n, 7);
    let scores = dir.join("s.npy");
    ndarray_npy::write_npy(&scores, &map).expect("write");
    for caller in ["skimage", "maxfilter", "recursive"] {
        let mut outs = Vec::new();
        // 2n + 1 already reaches across the map from every voxel (window, box and spacing).
        for md in ["49", "1000000", "18446744073709551615"] {
            let out = dir.join(format!("{caller}-{}.csv", md.len()));
            ok_within(
                &[
                    "-q",
                    "peaks",
                    "--scores",
                    p(&scores),
                    "--caller",
                    caller,
                    "--min-distance",
                    md,
                    "--exclude-border",
                    "0",
                    "--out",
                    p(&out),
                ],
                Duration::from_secs(60),
            );
            outs.push(std::fs::read_to_string(&out).expect("csv"));
        }
        assert!(outs[0].lines().count() >= 2, "{caller}: no peak");
        for o in &outs[1..] {
            assert_eq!(o, &outs[0], "{caller}");
        }
    }
    // A huge border leaves nothing, at once.
    let out = dir.join("border.csv");
    ok_within(
        &[
            "-q",
            "peaks",
            "--scores",
            p(&scores),
            "--exclude-border",
            "1000000000",
            "--min-distance",
            "1000000000",
            "--num-peaks",
            "1000000000000",
            "--out",
            p(&out),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(
        std::fs::read_to_string(&out).expect("csv").lines().count(),
        1
    );
}

#[test]
fn huge_windows_in_the_library_equal_the_map_size() {
    let b = Cpu::<Single>::new();
    let n = 20;
    let map = noise_map(n, 3);
    let s = b.upload(map.view()).expect("upload");
    let at = |md: usize| {
        let params = PeakParams {
            min_distance: md,
            exclude_border: ExcludeBorder::Bool(false),
            ..PeakParams::default()
        };
        find_peaks(&b, &s, &params).expect("find_peaks")
    };
    let want = at(2 * n + 1);
    assert_eq!(want.len(), 1);
    assert_eq!(at(1_000_000), want);
    assert_eq!(at(usize::MAX), want);
    let pytme = |md: usize| PytmeParams {
        min_distance: md,
        ..PytmeParams::default()
    };
    let want = call_peaks_maximum_filter(&b, &s, &pytme(2 * n + 1)).expect("maxfilter");
    for md in [1_000_000, usize::MAX] {
        assert_eq!(
            call_peaks_maximum_filter(&b, &s, &pytme(md)).expect("maxfilter"),
            want
        );
    }
    let want = call_peaks_recursive::<_, f32, i32>(&b, &s, &pytme(2 * n + 1), None).expect("rec");
    for md in [1_000_000, usize::MAX] {
        let got = call_peaks_recursive::<_, f32, i32>(&b, &s, &pytme(md), None).expect("rec");
        assert_eq!(got, want);
    }
}

/// `(n, 3, 3)` rotation files: one fine, one scaled (not orthonormal), one with a NaN.
fn bad_rotations(dir: &Path) -> [(PathBuf, &'static str); 2] {
    let mut scaled = Array3::<f32>::zeros((2, 3, 3));
    for k in 0..3 {
        scaled[[0, k, k]] = 1.0;
        scaled[[1, k, k]] = 1.1;
    }
    let mut nan = scaled.clone();
    nan[[1, 0, 0]] = 1.0;
    nan[[1, 1, 1]] = 1.0;
    nan[[1, 2, 2]] = 1.0;
    nan[[1, 0, 1]] = f32::NAN;
    let a = dir.join("scaled.npy");
    let c = dir.join("nan.npy");
    ndarray_npy::write_npy(&a, &scaled).expect("write");
    ndarray_npy::write_npy(&c, &nan).expect("write");
    [(a, "not orthonormal"), (c, "non-finite")]
}

#[test]
fn peaks_rejects_bad_rotations_exactly_as_match() {
    let dir = scratch("bad-rot");
    let c = "matching/3d_cc";
    let (t, m) = (
        fixture(&format!("{c}/target.npy")),
        fixture(&format!("{c}/template.npy")),
    );
    let scores = dir.join("s.npy");
    let index = dir.join("ri.npy");
    ndarray_npy::write_npy(&scores, &noise_map(8, 1)).expect("write");
    ndarray_npy::write_npy(&index, &ArrayD::<i32>::zeros(IxDyn(&[8, 8, 8]))).expect("write");
    for (rot, what) in bad_rotations(&dir) {
        let em = fails2(&[
            "match",
            "--target",
            p(&t),
            "--template",
            p(&m),
            "--rotations",
            p(&rot),
            "--out",
            p(&dir.join("o")),
        ]);
        let ep = fails2(&[
            "peaks",
            "--scores",
            p(&scores),
            "--rotation-index",
            p(&index),
            "--rotations",
            p(&rot),
            "--out",
            p(&dir.join("p.csv")),
        ]);
        assert!(em.contains(what) && em.contains("--rotations"), "{em}");
        assert_eq!(ep, em, "peaks and match must say the same");
    }
}

#[test]
fn euler_csv_header_only_without_numbers() {
    let dir = scratch("euler-csv");
    let c = "matching/3d_cc";
    let (t, m) = (
        fixture(&format!("{c}/target.npy")),
        fixture(&format!("{c}/template.npy")),
    );
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "10,20\n1,2,3\n").expect("write");
    let e = fails2(&[
        "match",
        "--target",
        p(&t),
        "--template",
        p(&m),
        "--euler",
        p(&bad),
        "--out",
        p(&dir.join("o1")),
    ]);
    assert!(e.contains("line 1") && e.contains("10,20"), "{e}");
    let good = dir.join("good.csv");
    std::fs::write(&good, "rot,tilt,psi\n0,0,0\n10,20,30\n").expect("write");
    ok(&[
        "-q",
        "match",
        "--target",
        p(&t),
        "--template",
        p(&m),
        "--euler",
        p(&good),
        "--score",
        "cc",
        "--out",
        p(&dir.join("o2")),
    ]);
    let rots: Array3<f32> =
        ndarray_npy::read_npy(dir.join("o2/rotations.npy")).expect("rotations.npy");
    assert_eq!(rots.dim(), (2, 3, 3));
}

#[test]
fn false_positive_rule_is_reported_and_checked() {
    let dir = scratch("fp-rule");
    let case = fixture("orientation/cube24");
    let scores = dir.join("scores.npy");
    std::fs::copy(case.join("pytme_scores.npy"), &scores).expect("copy");
    // No run.json: the map-sigma fallback, with a warning and a STAR comment.
    let star = dir.join("a.star");
    let o = ok(&[
        "peaks",
        "--scores",
        p(&scores),
        "--caller",
        "maxfilter",
        "--false-positives",
        "1",
        "--out",
        p(&star),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning:") && err.contains("map-sigma fallback"),
        "{err}"
    );
    let text = std::fs::read_to_string(&star).expect("star");
    assert!(text.contains("# false-alarm threshold") && text.contains("map-sigma fallback"));
    // A --match-run that does not fit the scores is an input error.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::write(
        other.join("run.json"),
        r#"{"score_statistics": {"ssum": 0.01, "n_rotations": 24, "shape": [16, 32, 32]}}"#,
    )
    .expect("write");
    let e = fails2(&[
        "peaks",
        "--scores",
        p(&scores),
        "--match-run",
        p(&other),
        "--false-positives",
        "1",
        "--out",
        p(&star),
    ]);
    assert!(e.contains("--match-run") && e.contains("shape"), "{e}");
    // Too many false positives for the voxels x rotations.
    std::fs::write(
        other.join("run.json"),
        r#"{"score_statistics": {"ssum": 0.01, "n_rotations": 1, "shape": [32, 32, 32]}}"#,
    )
    .expect("write");
    let e = fails2(&[
        "peaks",
        "--scores",
        p(&scores),
        "--match-run",
        p(&other),
        "--false-positives",
        "20000",
        "--out",
        p(&star),
    ]);
    assert!(e.contains("--false-positives"), "{e}");
}

/// A score map holding NaN is refused (exit 2, naming --scores, the count and the remedy)
/// unless `--allow-nan` says NaN means "never a peak"; then the peaks are those of the map
/// without the NaN voxels, and the NaN voxel is not one of them.
#[test]
fn nan_scores_are_refused_unless_allowed() {
    let dir = scratch("nan-scores");
    let mut m = Array3::<f32>::zeros((12, 12, 12));
    m[[3, 3, 3]] = 1.0;
    m[[8, 8, 8]] = 0.5;
    m[[6, 6, 6]] = f32::NAN;
    m[[6, 6, 7]] = f32::NAN;
    let scores = dir.join("s.npy");
    ndarray_npy::write_npy(&scores, &m).expect("write");
    let out = dir.join("p.csv");
    let line = fails2(&[
        "peaks",
        "--scores",
        p(&scores),
        "--min-distance",
        "1",
        "--out",
        p(&out),
    ]);
    for needle in ["--scores", "s.npy", "2 NaN", "--allow-nan"] {
        assert!(line.contains(needle), "{line:?} lacks {needle:?}");
    }
    assert!(!out.exists(), "nothing written on a refused map");
    ok(&[
        "-q",
        "peaks",
        "--scores",
        p(&scores),
        "--min-distance",
        "1",
        "--allow-nan",
        "--out",
        p(&out),
    ]);
    let text = std::fs::read_to_string(&out).expect("peaks csv");
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows[0].starts_with("3,3,3,") && rows[1].starts_with("8,8,8,"),
        "{text}"
    );
}
