//! `monomorph solve --laplacian … --boundary --spacing --obstacles --trajectory --method auto`:
//! the PhiFlow plume oracle through the command, singular systems (exit 3 when inconsistent),
//! the trajectory, what result.json records, and bad input (exit 2 naming the flag, nothing
//! written).

use std::path::{Path, PathBuf};

use ndarray::{ArrayD, IxDyn};

use crate::cg_pressure::{check_plume, plume};
use crate::cli_peaks::{p, run};
use crate::common::fixture;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "monomorph-cli-pressure-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

fn save<T: ndarray_npy::WritableElement>(
    dir: &Path,
    name: &str,
    shape: &[usize],
    v: Vec<T>,
) -> PathBuf {
    let path = dir.join(name);
    let a = ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape");
    ndarray_npy::write_npy(&path, &a).expect("write npy");
    path
}

fn result_json(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("result.json")).expect("result.json");
    serde_json::from_str(&text).expect("json")
}

fn read(out: &Path, name: &str) -> ArrayD<f64> {
    ndarray_npy::read_npy(out.join(name)).expect("npy")
}

fn usizes(v: &serde_json::Value) -> Vec<usize> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("int") as usize)
        .collect()
}

/// The plume oracle through the command: every step as one batch, PhiFlow's default solve
/// (`--method auto`, its tolerances), the boundary spec and spacing of the case.
fn plume_through_cli(name: &str) {
    let c = plume(name);
    let d = scratch(name);
    let out = d.join("out");
    let grid: Vec<String> = c.grid.iter().map(|g| g.to_string()).collect();
    let spacing: Vec<String> = c.spacing.iter().map(|g| g.to_string()).collect();
    let m = &c.meta;
    let o = run(&[
        "solve",
        "--laplacian",
        &grid.join("x"),
        "--boundary",
        m["boundary_spec"].as_str().expect("spec"),
        "--spacing",
        &spacing.join(","),
        "--obstacles",
        p(&fixture(&format!("cg/{name}/obstacles.npy"))),
        "--rhs",
        p(&fixture(&format!("cg/{name}/rhs.npy"))),
        "--method",
        "auto",
        "--rtol",
        &m["rtol"].to_string(),
        "--atol",
        &m["atol"].to_string(),
        "--max-iter",
        &m["max_iter"].to_string(),
        "--out",
        p(&out),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = result_json(&out);
    check_plume(&c, &read(&out, "x.npy"), &usizes(&r["iterations"]), name);
    assert_eq!(r["method"], "auto");
    assert_eq!(r["obstacle_count"], m["obstacle_count"]);
    assert_eq!(r["boundary"], m["boundary"]);
    assert_eq!(r["spacing"], m["spacing"]);
    let singular = m["singular"].as_bool().expect("singular");
    assert_eq!(r["null_space_dimension"], if singular { 1 } else { 0 });
}

#[test]
fn phiflow_plume_2d_through_the_command() {
    plume_through_cli("plume2d");
}

#[test]
fn phiflow_plume_3d_through_the_command() {
    plume_through_cli("plume3d");
}

/// An all-Neumann solve: a right-hand side of zero mean converges (exit 0) to the zero-mean
/// solution; one with a mean is inconsistent, exit 3, and result.json says why.
#[test]
fn singular_pressure_solves_exit_3_only_when_inconsistent() {
    let d = scratch("singular");
    let n = 16 * 12;
    let raw: Vec<f64> = (0..n)
        .map(|i| ((i * 37) % 23) as f64 / 23.0 - 0.4)
        .collect();
    let mean = raw.iter().sum::<f64>() / n as f64;
    let ok: Vec<f64> = raw.iter().map(|v| v - mean).collect();
    let good = save(&d, "good.npy", &[n], ok);
    let bad = save(&d, "bad.npy", &[n], raw);
    for (spec, rhs, code) in [
        ("neumann", &good, 0),
        ("zero-gradient,periodic", &good, 0),
        ("neumann", &bad, 3),
    ] {
        let out = d.join(format!("out-{code}-{}", spec.replace(',', "_")));
        let o = run(&[
            "solve",
            "--laplacian",
            "16x12",
            "--boundary",
            spec,
            "--spacing",
            "0.5,2",
            "--rhs",
            p(rhs),
            "--method",
            "auto",
            "--rtol",
            "1e-9",
            "--out",
            p(&out),
        ]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{spec}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = result_json(&out);
        assert_eq!(r["null_space_dimension"], 1);
        if code == 0 {
            let x = read(&out, "x.npy");
            let s: f64 = x.iter().sum();
            assert!(s.abs() < 1e-9, "{spec}: x sums to {s}");
        } else {
            assert_eq!(r["converged"][0], false);
            let msg = r["message"][0].as_str().expect("message");
            assert!(msg.contains("null space"), "{msg}");
        }
    }
}

/// `--trajectory` writes every iterate; the state at step k is what `--max-iter k` returns.
#[test]
fn the_trajectory_holds_every_iterate() {
    let d = scratch("trajectory");
    let n = 10 * 9;
    let y: Vec<f64> = (0..2 * n)
        .map(|i| ((i * 13) % 17) as f64 / 17.0 - 0.5)
        .collect();
    let rhs = save(&d, "y.npy", &[2, n], y);
    let mask: Vec<u8> = (0..n).map(|i| (i / 9 == 4 && i % 9 > 1) as u8).collect();
    let obs = save(&d, "mask.npy", &[10, 9], mask);
    let base = |out: &Path, k: &str| {
        let o = run(&[
            "solve",
            "--laplacian",
            "10x9",
            "--boundary",
            "dirichlet,neumann:dirichlet",
            "--obstacles",
            p(&obs),
            "--rhs",
            p(&rhs),
            "--max-iter",
            k,
            "--trajectory",
            "--out",
            p(out),
        ]);
        assert!(
            matches!(o.status.code(), Some(0 | 3)),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let full = d.join("full");
    base(&full, "1000");
    let t = read(&full, "trajectory.npy");
    let r = result_json(&full);
    let steps = r["trajectory_steps"].as_u64().expect("steps") as usize;
    assert_eq!(t.shape(), &[steps + 1, 2, n]);
    let x = read(&full, "x.npy");
    assert!(
        t.index_axis(ndarray::Axis(0), steps) == x.view(),
        "last state = x"
    );
    assert!(
        t.index_axis(ndarray::Axis(0), 0).iter().all(|&v| v == 0.0),
        "step 0 = x0"
    );
    let k = 4;
    let part = d.join("part");
    base(&part, &k.to_string());
    let xk = read(&part, "x.npy");
    let dk = (&t.index_axis(ndarray::Axis(0), k) - &xk)
        .mapv(f64::abs)
        .fold(0.0f64, |a, &v| a.max(v));
    assert!(dk <= 1e-6, "step {k}: {dk:e}");
    assert!(!part.join("trajectory.npy").exists() || part.join("trajectory.npy").is_file());
}

/// Bad input: exit 2, one `error:` line naming the flag, nothing written.
#[test]
fn bad_pressure_input_names_the_flag_and_writes_nothing() {
    let d = scratch("bad");
    let n = 8 * 6;
    let rhs = save(&d, "y.npy", &[n], vec![0.5f64; n]);
    let wrong = save(&d, "wrong.npy", &[6, 8], vec![0u8; n]);
    let flat = save(&d, "flat.npy", &[n], vec![0u8; n]);
    let all = save(&d, "all.npy", &[8, 6], vec![1u8; n]);
    let two = save(
        &d,
        "two.npy",
        &[8, 6],
        (0..n).map(|i| (i == 5) as i32 * 2).collect(),
    );
    let nan = save(
        &d,
        "nan.npy",
        &[8, 6],
        (0..n)
            .map(|i| if i == 3 { f64::NAN } else { 0.0 })
            .collect(),
    );
    let boolean = save(
        &d,
        "bool.npy",
        &[8, 6],
        (0..n).map(|i| i == 7).collect::<Vec<bool>>(),
    );
    let out = d.join("out");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--obstacles", p(&wrong)], "--obstacles"),
        (vec!["--obstacles", p(&flat)], "--obstacles"),
        (vec!["--obstacles", p(&all)], "--obstacles"),
        (vec!["--obstacles", p(&two)], "--obstacles"),
        (vec!["--obstacles", p(&nan)], "--obstacles"),
        (vec!["--boundary", "sticky"], "--boundary"),
        (
            vec!["--boundary", "neumann,neumann,dirichlet"],
            "--boundary",
        ),
        (vec!["--boundary", "neumann:dirichlet"], "--boundary"),
        (vec!["--boundary", "periodic:neumann,neumann"], "--boundary"),
        (
            vec!["--boundary", "neumann:dirichlet:periodic,neumann"],
            "--boundary",
        ),
        (vec!["--boundary", ""], "--boundary"),
        (vec!["--spacing", "0"], "--spacing"),
        (vec!["--spacing", "-0.5"], "--spacing"),
        (vec!["--spacing", "nan"], "--spacing"),
        (vec!["--spacing", "inf"], "--spacing"),
        (vec!["--spacing", "1,2,3"], "--spacing"),
        (vec!["--spacing", "one"], "--spacing"),
        (vec!["--boundary", "neumann", "--periodic"], "--periodic"),
    ];
    for (extra, flag) in cases {
        let mut args = vec![
            "solve",
            "--laplacian",
            "8x6",
            "--rhs",
            p(&rhs),
            "--out",
            p(&out),
        ];
        args.extend(extra.iter().copied());
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            lines[0].starts_with("error: ") && !err.contains("panicked"),
            "{err}"
        );
        assert!(err.contains(flag), "{extra:?}: {err} does not name {flag}");
        assert!(!out.exists(), "{extra:?}: --out was created");
    }
    // --obstacles, --boundary and --spacing need --laplacian.
    let o = run(&[
        "solve",
        "--matrix",
        p(&rhs),
        "--rhs",
        p(&rhs),
        "--boundary",
        "neumann",
        "--out",
        p(&out),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
    // A bool mask is accepted (the one obstacle counted).
    let o = run(&[
        "solve",
        "--laplacian",
        "8x6",
        "--rhs",
        p(&rhs),
        "--obstacles",
        p(&boolean),
        "--out",
        p(&out),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(result_json(&out)["obstacle_count"], 1);
}
