//! The `monomorph` command, run as a user runs it: every subcommand on the peer fixtures, the
//! error cases (one line, exit code 2 for input errors), and randomized inputs to the `.npy` and
//! MRC readers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use monomorph::io::HostArray;
use monomorph::io::mrc::{decode_mrc, encode_mrc};
use monomorph::io::npy::{decode_npy, encode_npy};
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;

use crate::common::{fixture, json, npy};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_monomorph"))
}

/// A fresh, empty scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run monomorph")
}

fn ok(args: &[&str]) -> Output {
    let o = run(args);
    assert!(
        o.status.success(),
        "monomorph {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    o
}

/// Runs a command that must fail with `code` and print exactly one line on stderr containing
/// every string of `needles`; no panic, no backtrace.
fn fails(args: &[&str], code: i32, needles: &[&str]) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(
        o.status.code(),
        Some(code),
        "monomorph {args:?}: stderr {err}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "monomorph {args:?}: expected one line, got {err:?}"
    );
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    for n in needles {
        assert!(
            err.contains(n),
            "monomorph {args:?}: {err:?} does not mention {n:?}"
        );
    }
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn read_f32(path: &Path) -> ArrayD<f32> {
    match monomorph::io::read_npy(path).expect("read output") {
        HostArray::F32(a) => a,
        other => panic!(
            "{}: expected float32, got {}",
            path.display(),
            other.dtype()
        ),
    }
}

/// Rows of a CSV peak list (header skipped), every field parsed as f64.
fn read_csv(path: &Path) -> (String, Vec<Vec<f64>>) {
    let text = std::fs::read_to_string(path).expect("read csv");
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default().to_string();
    let rows = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split(',')
                .map(|v| v.parse::<f64>().expect("number"))
                .collect()
        })
        .collect();
    (header, rows)
}

#[test]
fn match_reproduces_pytme_scores() {
    let cases = [
        ("2d_cc", "cc"),
        ("2d_lcc", "lcc"),
        ("2d_ncc", "ncc"),
        ("2d_flc", "flc"),
        ("2d_flcsphericalmask", "flc-sphere"),
        ("2d_flc_padded", "flc"),
        ("2d_mcc", "mcc"),
        ("3d_cc", "cc"),
        ("3d_flc", "flc"),
    ];
    let dir = scratch("match");
    for (case, score) in cases {
        let f = |name: &str| fixture(&format!("matching/{case}/{name}"));
        let meta = json(&format!("matching/{case}/case.json"));
        let out = dir.join(case);
        let (target, template, rotations) =
            (f("target.npy"), f("template.npy"), f("rotations.npy"));
        let mut args = vec![
            "-q",
            "match",
            "--target",
            p(&target),
            "--template",
            p(&template),
            "--rotations",
            p(&rotations),
            "--score",
            score,
            "--out",
            p(&out),
        ];
        let (tm, gm) = (f("template_mask.npy"), f("target_mask.npy"));
        if tm.exists() {
            args.extend(["--template-mask", p(&tm)]);
        }
        if gm.exists() {
            args.extend(["--target-mask", p(&gm)]);
        }
        let padded = meta["pad_target_edges"].as_bool().unwrap_or(false);
        if padded {
            args.push("--pad-edges");
        }
        ok(&args);
        let got = read_f32(&out.join("scores.npy"));
        let want = npy::<f32>(&format!("matching/{case}/scores.npy"));
        assert_eq!(got.shape(), want.shape(), "{case}");
        let tol = &meta["tolerances"];
        let max_abs = want.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
        let allowed = tol["score_abs"]
            .as_f64()
            .unwrap_or(0.0)
            .max(tol["score_rel_to_max_abs"].as_f64().unwrap_or(0.0) * max_abs);
        // Padded cases: index 0 on axes where the template is even differs on purpose (pytme's
        // off-by-one, fixtures/README.md).
        let tshape = npy::<f32>(&format!("matching/{case}/template.npy"))
            .shape()
            .to_vec();
        let mut worst = 0f64;
        for (idx, (a, b)) in got
            .indexed_iter()
            .zip(want.iter())
            .map(|((i, a), b)| (i, (a, b)))
        {
            if padded && (0..tshape.len()).any(|k| tshape[k].is_multiple_of(2) && idx[k] == 0) {
                continue;
            }
            worst = worst.max((*a as f64 - *b as f64).abs());
        }
        assert!(
            worst <= allowed,
            "{case}: max |Δscore| {worst:e} > {allowed:e}"
        );
        // The other outputs exist with the contract's dtypes and shapes.
        match monomorph::io::read_npy(out.join("rotation_index.npy")).expect("rotation_index") {
            HostArray::I32(ri) => assert_eq!(ri.shape(), want.shape()),
            other => panic!("rotation_index.npy is {}", other.dtype()),
        }
        let rots = read_f32(&out.join("rotations.npy"));
        assert_eq!(
            rots.shape()[0],
            npy::<f32>(&format!("matching/{case}/rotations.npy")).shape()[0]
        );
        let run_json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
                .expect("json");
        assert_eq!(run_json["backend"], "cpu");
        assert!(run_json["timings"]["match_s"].as_f64().is_some());
        assert!(run_json["peak_memory_bytes"].as_u64().unwrap_or(0) > 0);
    }
}

#[test]
fn match_writes_mrc_with_the_target_voxel_size_and_png() {
    let dir = scratch("match-mrc");
    let target = npy::<f32>("matching/3d_flc/target.npy");
    let tpath = dir.join("target.mrc");
    monomorph::io::write_mrc(&tpath, &target, [2.5, 2.5, 2.5]).expect("write mrc");
    let out = dir.join("out");
    let tmpl = fixture("matching/3d_flc/template.npy");
    let rots = fixture("matching/3d_flc/rotations.npy");
    ok(&[
        "-q",
        "match",
        "--target",
        p(&tpath),
        "--template",
        p(&tmpl),
        "--rotations",
        p(&rots),
        "--score",
        "flc-sphere",
        "--out",
        p(&out),
        "--png",
    ]);
    let m = monomorph::io::read_mrc(out.join("scores.mrc")).expect("scores.mrc");
    assert_eq!(m.voxel_size, [2.5, 2.5, 2.5]);
    assert_eq!(m.data, read_f32(&out.join("scores.npy")));
    let png = std::fs::read(out.join("scores.png")).expect("png");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn peaks_reproduce_skimage_queries() {
    let dir = scratch("peaks");
    let case = "peaks/field2d_256";
    let meta = json(&format!("{case}/case.json"));
    let scores = fixture(&format!("{case}/score.npy"));
    let mut checked = 0;
    for q in meta["queries"].as_array().expect("queries") {
        let id = q["id"].as_str().unwrap_or_default();
        let tool = q["tool"].as_str().unwrap_or_default();
        let prm = &q["params"];
        let caller = match tool {
            "skimage.feature.peak_local_max" => "skimage",
            "pytme PeakCallerMaximumFilter" => "maxfilter",
            _ => continue,
        };
        // Footprints, tuple borders and p-norms are library options, not command flags.
        if prm.get("footprint").is_some()
            || prm.get("p_norm").is_some()
            || prm["exclude_border"].is_array()
        {
            continue;
        }
        let out = dir.join(format!("{id}.csv"));
        let md = prm["min_distance"].as_u64().unwrap_or(1).to_string();
        let mut args: Vec<String> = [
            "-q",
            "peaks",
            "--scores",
            p(&scores),
            "--caller",
            caller,
            "--min-distance",
            &md,
            "--out",
            p(&out),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut flag = |name: &str, v: String| {
            args.push(name.into());
            args.push(v);
        };
        if let Some(v) = prm["threshold_abs"].as_f64().or(prm["min_score"].as_f64()) {
            flag("--threshold-abs", v.to_string());
        }
        if let Some(v) = prm["threshold_rel"].as_f64() {
            flag("--threshold-rel", v.to_string());
        }
        if let Some(v) = prm["num_peaks"].as_u64() {
            flag("--num-peaks", v.to_string());
        }
        match &prm["exclude_border"] {
            serde_json::Value::Bool(false) => flag("--exclude-border", "0".into()),
            serde_json::Value::Number(n) => flag("--exclude-border", n.to_string()),
            _ => {}
        }
        if let Some(v) = prm["min_boundary_distance"].as_u64() {
            flag("--exclude-border", v.to_string());
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&argv);
        let (header, rows) = read_csv(&out);
        assert_eq!(header, "y,x,score", "{id}");
        let want = npy::<i32>(&format!(
            "{case}/{}",
            q["expected"].as_str().unwrap_or_default()
        ));
        let want: Vec<Vec<f64>> = want
            .outer_iter()
            .map(|r| r.iter().map(|&v| v as f64).collect())
            .collect();
        let got: Vec<Vec<f64>> = rows.iter().map(|r| r[..2].to_vec()).collect();
        if caller == "maxfilter" {
            // pytme's own order is an unstable sort: compare as sets.
            let mut a = got.clone();
            let mut b = want.clone();
            a.sort_by(|x, y| x.partial_cmp(y).unwrap_or(std::cmp::Ordering::Equal));
            b.sort_by(|x, y| x.partial_cmp(y).unwrap_or(std::cmp::Ordering::Equal));
            assert_eq!(a, b, "{id}");
        } else {
            assert_eq!(got, want, "{id}");
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} queries checked");
}

#[test]
fn peaks_with_rotations_write_euler_angles_and_star() {
    let dir = scratch("peaks-rot");
    let c = "matching/3d_flc";
    let (s, ri, r) = (
        fixture(&format!("{c}/scores.npy")),
        fixture(&format!("{c}/rotation_index.npy")),
        fixture(&format!("{c}/rotations.npy")),
    );
    let csv = dir.join("p.csv");
    ok(&[
        "-q",
        "peaks",
        "--scores",
        p(&s),
        "--rotation-index",
        p(&ri),
        "--rotations",
        p(&r),
        "--num-peaks",
        "4",
        "--out",
        p(&csv),
    ]);
    let (header, rows) = read_csv(&csv);
    assert_eq!(header, "z,y,x,score,rotation,rot,tilt,psi");
    assert_eq!(rows.len(), 4);
    let ri_map = npy::<i32>(&format!("{c}/rotation_index.npy"));
    for row in &rows {
        let idx = [row[0] as usize, row[1] as usize, row[2] as usize];
        assert_eq!(row[4] as i32, ri_map[idx]);
    }
    let star = dir.join("p.star");
    ok(&[
        "-q",
        "peaks",
        "--scores",
        p(&s),
        "--rotation-index",
        p(&ri),
        "--rotations",
        p(&r),
        "--num-peaks",
        "4",
        "--out",
        p(&star),
    ]);
    let text = std::fs::read_to_string(&star).expect("star");
    for col in [
        "_rlnCoordinateX",
        "_rlnCoordinateZ",
        "_rlnAngleRot",
        "_rlnAngleTilt",
        "_rlnAnglePsi",
        "_rlnAutopickFigureOfMerit",
    ] {
        assert!(text.contains(col), "{col} missing");
    }
}

#[test]
fn solve_reproduces_cg_cases() {
    let dir = scratch("solve");
    let cases: [(&str, Vec<String>); 4] = [
        (
            "spd50_cg_f64",
            vec![
                "--matrix".into(),
                p(&fixture("cg/spd50_cg_f64/A.npy")).into(),
            ],
        ),
        (
            "spd50_cg_adaptive_f64",
            vec![
                "--matrix".into(),
                p(&fixture("cg/spd50_cg_adaptive_f64/A.npy")).into(),
                "--method".into(),
                "cg-adaptive".into(),
            ],
        ),
        (
            "poisson2d_csr_f64",
            vec!["--csr".into(), p(&fixture("cg/poisson2d_csr_f64")).into()],
        ),
        (
            "poisson2d_stencil_f64",
            vec!["--laplacian".into(), "32x32".into()],
        ),
    ];
    for (case, op) in cases {
        let f = |n: &str| fixture(&format!("cg/{case}/{n}"));
        let rtol = npy::<f64>(&format!("cg/{case}/rtol.npy"))[0].to_string();
        let atol = npy::<f64>(&format!("cg/{case}/atol.npy"))[0].to_string();
        let max_iter = npy::<i32>(&format!("cg/{case}/max_iter.npy"))
            .iter()
            .next()
            .copied()
            .unwrap_or(1000)
            .to_string();
        let out = dir.join(case);
        let (y, x0) = (f("y.npy"), f("x0.npy"));
        let mut args: Vec<String> = vec![
            "-q".into(),
            "--precision".into(),
            "double".into(),
            "solve".into(),
        ];
        args.extend(op);
        for (k, v) in [
            ("--rhs", p(&y)),
            ("--x0", p(&x0)),
            ("--rtol", &rtol),
            ("--atol", &atol),
            ("--max-iter", &max_iter),
            ("--out", p(&out)),
        ] {
            args.push(k.into());
            args.push(v.into());
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&argv);
        let x = match monomorph::io::read_npy(out.join("x.npy")).expect("x.npy") {
            HostArray::F64(a) => a,
            other => panic!("x.npy is {}", other.dtype()),
        };
        let want = npy::<f64>(&format!("cg/{case}/seed_x.npy"));
        let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-300);
        let err = x
            .iter()
            .zip(want.iter())
            .fold(0f64, |m, (a, b)| m.max((a - b).abs()))
            / scale;
        let allowed = if case == "spd50_cg_adaptive_f64" {
            1e-8
        } else {
            1e-9
        };
        assert!(err < allowed, "{case}: max relative |Δx| {err:e}");
        let r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("result.json")).expect("result.json"),
        )
        .expect("json");
        let seed = &json(&format!("cg/{case}/case.json"))["expected_seed"];
        for k in ["converged", "diverged"] {
            assert_eq!(r[k], seed[k], "{case}: {k}");
        }
        if case == "spd50_cg_adaptive_f64" {
            // Order-sensitive in the last bits (tests/suite/cg.rs, ORDER_SENSITIVE): the
            // reference itself gives 101-104 iterations under other valid summation orders.
            let it = r["iterations"][0].as_i64().expect("iterations");
            assert!((101..=104).contains(&it), "{case}: iterations {it}");
            let fe = r["function_evaluations"][0]
                .as_i64()
                .expect("function_evaluations");
            let seed_gap = seed["function_evaluations"][0]
                .as_i64()
                .expect("seed fevals")
                - seed["iterations"][0].as_i64().expect("seed iterations");
            assert_eq!(
                fe - it,
                seed_gap,
                "{case}: function evaluations - iterations"
            );
        } else {
            for k in ["iterations", "function_evaluations"] {
                assert_eq!(r[k], seed[k], "{case}: {k}");
            }
        }
        assert!(r["message"].is_array());
        assert!(out.join("residual.npy").exists());
    }
}

#[test]
fn devices_lists_the_cpu_and_says_why_cuda_is_missing() {
    let o = ok(&["devices"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("backends compiled in: cpu"), "{text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("cpu ")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("cuda") && l.contains("unavailable"))
            || cfg!(feature = "cuda"),
        "{text}"
    );
}

#[test]
fn demo_finds_every_planted_particle() {
    let out = scratch("demo");
    ok(&[
        "-q",
        "demo",
        "--size",
        "64",
        "--template-size",
        "16",
        "--particles",
        "4",
        "--angular-step",
        "60",
        "--out",
        p(&out),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(r["found"], 4, "{r}");
    assert_eq!(r["recall"], 1.0);
    for part in r["particles"].as_array().expect("particles") {
        assert!(
            part["position_error"].as_f64().unwrap_or(f64::INFINITY) <= 1.0,
            "{part}"
        );
        assert!(
            part["rotation_error_deg"].as_f64().unwrap_or(f64::INFINITY) < 1.0,
            "{part}"
        );
    }
    for f in [
        "tomogram.mrc",
        "scores.npy",
        "peaks.csv",
        "peaks.star",
        "planted.csv",
        "scores.png",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
}

#[test]
fn bad_inputs_fail_with_one_line_and_exit_code_2() {
    let dir = scratch("errors");
    let good = fixture("matching/2d_cc/target.npy");
    let tmpl = fixture("matching/2d_cc/template.npy");
    let out = dir.join("out");
    let bytes = std::fs::read(&good).expect("fixture");
    // Truncated .npy.
    let trunc = dir.join("trunc.npy");
    std::fs::write(&trunc, &bytes[..bytes.len() - 7]).expect("write");
    fails(
        &[
            "match",
            "--target",
            p(&trunc),
            "--template",
            p(&tmpl),
            "--out",
            p(&out),
        ],
        2,
        &["--target", "trunc.npy", "truncated"],
    );
    // Corrupt .npy (no magic).
    let bad = dir.join("bad.npy");
    std::fs::write(&bad, b"hello world, not an array").expect("write");
    fails(
        &[
            "match",
            "--target",
            p(&bad),
            "--template",
            p(&tmpl),
            "--out",
            p(&out),
        ],
        2,
        &["bad.npy", "expected"],
    );
    // Truncated MRC and a header lying about its size.
    let vol = ArrayD::from_shape_fn(IxDyn(&[8, 8, 8]), |i| (i[0] + i[1] + i[2]) as f32);
    let mrc = encode_mrc(&vol, [1.0; 3]).expect("encode");
    let tm = dir.join("trunc.mrc");
    std::fs::write(&tm, &mrc[..mrc.len() - 100]).expect("write");
    fails(
        &["peaks", "--scores", p(&tm), "--out", p(&dir.join("p.csv"))],
        2,
        &["trunc.mrc", "truncated"],
    );
    let mut lying = mrc.clone();
    lying[0..4].copy_from_slice(&9i32.to_le_bytes());
    let lm = dir.join("lying.mrc");
    std::fs::write(&lm, &lying).expect("write");
    fails(
        &["peaks", "--scores", p(&lm), "--out", p(&dir.join("p.csv"))],
        2,
        &["lying.mrc", "header"],
    );
    // NaN voxels.
    let mut nan = npy::<f32>("matching/2d_cc/target.npy");
    nan[[3, 4]] = f32::NAN;
    let nanp = dir.join("nan.npy");
    monomorph::io::write_npy(&nanp, &nan).expect("write");
    fails(
        &[
            "match",
            "--target",
            p(&nanp),
            "--template",
            p(&tmpl),
            "--out",
            p(&out),
        ],
        2,
        &["nan.npy", "NaN"],
    );
    // Mismatched shapes: a 3-D template for a 2-D target; a mask of the wrong shape.
    let t3 = fixture("matching/3d_cc/template.npy");
    fails(
        &[
            "match",
            "--target",
            p(&good),
            "--template",
            p(&t3),
            "--out",
            p(&out),
        ],
        2,
        &["--template", "expected"],
    );
    let m3 = fixture("matching/2d_flc/template_mask.npy");
    let t2small = dir.join("small.npy");
    monomorph::io::write_npy(&t2small, &ArrayD::<f32>::ones(IxDyn(&[5, 5]))).expect("write");
    fails(
        &[
            "match",
            "--target",
            p(&good),
            "--template",
            p(&t2small),
            "--template-mask",
            p(&m3),
            "--score",
            "flc",
            "--out",
            p(&out),
        ],
        2,
        &["--template-mask", "shape"],
    );
    let y = fixture("cg/spd50_cg_f64/y.npy");
    fails(
        &[
            "solve",
            "--laplacian",
            "7x7",
            "--rhs",
            p(&y),
            "--out",
            p(&out),
        ],
        2,
        &["--laplacian", "49"],
    );
    // Unwritable --out (a path below a regular file).
    let file = dir.join("file");
    std::fs::write(&file, b"x").expect("write");
    let under = file.join("sub");
    fails(
        &[
            "match",
            "--target",
            p(&good),
            "--template",
            p(&tmpl),
            "--out",
            p(&under),
        ],
        2,
        &["--out", "sub"],
    );
    // A missing input and an unknown flag value.
    fails(
        &[
            "peaks",
            "--scores",
            p(&dir.join("missing.npy")),
            "--out",
            p(&dir.join("p.csv")),
        ],
        2,
        &["missing.npy"],
    );
    fails(
        &[
            "match",
            "--target",
            p(&good),
            "--template",
            p(&tmpl),
            "--score",
            "xcorr",
            "--out",
            p(&out),
        ],
        2,
        &["xcorr"],
    );
    fails(&["solve"], 2, &["required"]);
}

#[test]
fn cuda_request_without_cuda_is_a_clear_error() {
    let tmpl = fixture("matching/2d_cc/template.npy");
    let good = fixture("matching/2d_cc/target.npy");
    let out = scratch("cuda");
    if cfg!(feature = "cuda") {
        // Built with CUDA: without a device the message is the device's; with one it runs.
        let o = run(&[
            "--backend",
            "cuda",
            "match",
            "--target",
            p(&good),
            "--template",
            p(&tmpl),
            "--out",
            p(&out),
        ]);
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("unavailable") || err.contains("CUDA"), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    } else {
        fails(
            &[
                "--backend",
                "cuda",
                "match",
                "--target",
                p(&good),
                "--template",
                p(&tmpl),
                "--out",
                p(&out),
            ],
            2,
            &["cuda", "not compiled", "--features cuda"],
        );
    }
}

#[test]
fn help_texts_list_every_subcommand_and_flag() {
    let o = ok(&["--help"]);
    let h = String::from_utf8_lossy(&o.stdout);
    for s in [
        "demo",
        "match",
        "peaks",
        "solve",
        "devices",
        "bench",
        "--backend",
        "--precision",
        "--trace",
        "--quiet",
    ] {
        assert!(h.contains(s), "--help lacks {s}");
    }
    let o = ok(&["match", "--help"]);
    let h = String::from_utf8_lossy(&o.stdout);
    for s in [
        "--target",
        "--template",
        "--template-mask",
        "--target-mask",
        "--score",
        "--rotations",
        "--angular-step",
        "--euler",
        "--interpolation",
        "--pad-edges",
        "--memory-limit",
        "--out",
        "--png",
    ] {
        assert!(h.contains(s), "match --help lacks {s}");
    }
}

#[test]
fn trace_writes_a_chrome_trace() {
    let dir = scratch("trace");
    let c = "matching/2d_cc";
    let trace = dir.join("trace.json");
    let (t, m, r) = (
        fixture(&format!("{c}/target.npy")),
        fixture(&format!("{c}/template.npy")),
        fixture(&format!("{c}/rotations.npy")),
    );
    ok(&[
        "-q",
        "--trace",
        p(&trace),
        "match",
        "--target",
        p(&t),
        "--template",
        p(&m),
        "--rotations",
        p(&r),
        "--score",
        "cc",
        "--out",
        p(&dir.join("o")),
    ]);
    let text = std::fs::read_to_string(&trace).expect("trace");
    let v: serde_json::Value = serde_json::from_str(&text).expect("trace is JSON");
    let names: Vec<&str> = v
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for span in ["match_template", "upload", "download"] {
        assert!(names.contains(&span), "{span}: {names:?}");
    }
}

// ---- Randomized inputs to the readers: never a panic, always a clear error or a value. ----

fn valid_npy() -> Vec<u8> {
    encode_npy(&ArrayD::from_shape_fn(IxDyn(&[3, 4, 5]), |i| {
        (i[0] * 20 + i[1] * 5 + i[2]) as f32
    }))
}

fn valid_mrc() -> Vec<u8> {
    encode_mrc(
        &ArrayD::from_shape_fn(IxDyn(&[3, 4, 5]), |i| (i[0] + i[1] + i[2]) as f32),
        [1.0; 3],
    )
    .expect("encode")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn npy_reader_survives_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_npy(&data);
        let mut with_magic = b"\x93NUMPY\x01\x00".to_vec();
        with_magic.extend_from_slice(&data);
        let _ = decode_npy(&with_magic);
    }

    #[test]
    fn npy_reader_survives_truncation_and_mutation(cut in 0usize..400, pos in 0usize..400, byte in any::<u8>()) {
        let full = valid_npy();
        let cut = cut.min(full.len());
        if cut < full.len() {
            prop_assert!(decode_npy(&full[..cut]).is_err());
        }
        let mut m = full.clone();
        let pos = pos % m.len();
        m[pos] = byte;
        let _ = decode_npy(&m);
    }

    #[test]
    fn mrc_reader_survives_truncation_and_header_mutation(cut in 0usize..1300, word in 0usize..56, value in any::<i32>()) {
        let full = valid_mrc();
        let cut = cut.min(full.len());
        if cut < full.len() {
            prop_assert!(decode_mrc(&full[..cut]).is_err());
        }
        let mut m = full.clone();
        m[4 * word..4 * word + 4].copy_from_slice(&value.to_le_bytes());
        let _ = decode_mrc(&m);
    }

    #[test]
    fn mrc_reader_survives_random_bytes(data in proptest::collection::vec(any::<u8>(), 1024..1400)) {
        let _ = decode_mrc(&data);
    }
}

#[test]
fn npy_reader_round_trips_every_dtype_and_order() {
    let a = ArrayD::from_shape_fn(IxDyn(&[2, 3]), |i| (i[0] * 3 + i[1]) as f64 - 2.0);
    for (descr, size) in [
        ("<f4", 4),
        (">f4", 4),
        ("<f8", 8),
        (">f8", 8),
        ("<i4", 4),
        (">i4", 4),
        ("<i8", 8),
        (">i8", 8),
    ] {
        for fortran in [false, true] {
            let mut h = format!(
                "{{'descr': '{descr}', 'fortran_order': {}, 'shape': (2, 3), }}",
                if fortran { "True" } else { "False" }
            );
            while (10 + h.len() + 1) % 64 != 0 {
                h.push(' ');
            }
            h.push('\n');
            let mut f = b"\x93NUMPY\x01\x00".to_vec();
            f.extend_from_slice(&(h.len() as u16).to_le_bytes());
            f.extend_from_slice(h.as_bytes());
            let order: Vec<f64> = if fortran {
                a.t().iter().copied().collect()
            } else {
                a.iter().copied().collect()
            };
            for v in order {
                let be = descr.starts_with('>');
                let bytes: Vec<u8> = match (&descr[1..], be) {
                    ("f4", false) => (v as f32).to_le_bytes().to_vec(),
                    ("f4", true) => (v as f32).to_be_bytes().to_vec(),
                    ("f8", false) => v.to_le_bytes().to_vec(),
                    ("f8", true) => v.to_be_bytes().to_vec(),
                    ("i4", false) => (v as i32).to_le_bytes().to_vec(),
                    ("i4", true) => (v as i32).to_be_bytes().to_vec(),
                    ("i8", false) => (v as i64).to_le_bytes().to_vec(),
                    _ => (v as i64).to_be_bytes().to_vec(),
                };
                assert_eq!(bytes.len(), size);
                f.extend_from_slice(&bytes);
            }
            let got = decode_npy(&f).unwrap_or_else(|e| panic!("{descr} fortran={fortran}: {e}"));
            assert_eq!(got.to_float::<f64>(), a, "{descr} fortran={fortran}");
        }
    }
}
