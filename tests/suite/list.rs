//! `monomorph match --target-list`: each target's folder byte-identical to its single run, one
//! STAR file for all targets whose rows are `monomorph peaks`' rows on each folder, bad lists
//! refused up front (exit 2, nothing created), a failure mid-run (exit 1, no partial folder);
//! and under `mpirun -n 2` / `-n 3` (whole targets and split rotation ranges) the same bytes,
//! and a rank failing mid-run stopping every rank fast.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use monomorph::io::write_mrc;
use ndarray::{ArrayD, IxDyn};

use crate::mpi::{mpi_or_skip, mpirun, noise};

const BIN: &str = env!("CARGO_BIN_EXE_monomorph");

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-list-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn run(bin: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .arg("-q")
        .output()
        .expect("spawn")
}

fn ok(o: Output, what: &str) -> Output {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Three MRC targets (one in a subfolder with a stem that repeats), a template, and the list.
/// Returns the list and (given path, folder name) per target.
fn inputs(dir: &Path, sizes: &[[usize; 3]]) -> (PathBuf, Vec<(String, String)>) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let names = [
        "t1.mrc",
        "sub/t1.mrc",
        "t3.mrc",
        "t4.mrc",
        "t5.mrc",
        "t6.mrc",
    ];
    let folders = ["t1", "t1-2", "t3", "t4", "t5", "t6"];
    let mut text = String::from("# targets\n\n");
    let mut out = Vec::new();
    for (k, sh) in sizes.iter().enumerate() {
        let a = noise(sh, 10 + k as u64);
        write_mrc(dir.join(names[k]), &a, [2.5; 3]).expect("write mrc");
        text.push_str(&format!("{}\n", names[k]));
        out.push((names[k].to_string(), folders[k].to_string()));
    }
    ndarray_npy::write_npy(dir.join("p.npy"), &noise(&[5, 5, 5], 3)).unwrap();
    let list = dir.join("tomos.txt");
    std::fs::write(&list, text).unwrap();
    (list, out)
}

// 130K: several tiles per target, so Σ score² is folded tile by tile across split ranges (the
// whole-target filtering needs ~124 KiB of it). The
// band-pass makes every path (list items, split ranges, MPI ranks) apply the Fourier filters as
// the single run does: a path that dropped them would not give the single run's bytes.
const MATCH: &[&str] = &[
    "-a",
    "60",
    "--memory-limit",
    "130K",
    "--lowpass",
    "6",
    "--highpass",
    "30",
    "--sampling-rate",
    "2.5",
];
// A relative threshold: the band-passed noise scores are too smooth for pytme's false-alarm
// rule to leave peaks on every target (run.json's ssum is compared directly instead).
const PEAKS: &[&str] = &[
    "--min-distance",
    "2",
    "--num-peaks",
    "4",
    "--threshold-rel",
    "0.3",
];

/// `match --target-list LIST -i TEMPLATE … --out OUT --peaks …`.
fn list_args<'a>(tmpl: &'a Path, list: &'a Path, out: &'a Path) -> Vec<&'a str> {
    let mut v = vec!["match", "--target-list", s(list), "-i", s(tmpl)];
    v.extend(MATCH);
    v.extend(["--out", s(out), "--peaks"]);
    v.extend(PEAKS);
    v
}

/// Each target run alone into `single/<folder>`, and `monomorph peaks` on it.
fn singles(dir: &Path, targets: &[(String, String)]) -> PathBuf {
    let single = dir.join("single");
    for (given, folder) in targets {
        let out = single.join(folder);
        let mut a = vec![
            "match".to_string(),
            "-m".into(),
            s(&dir.join(given)).to_owned(),
        ];
        a.extend(["-i".into(), s(&dir.join("p.npy")).to_owned()]);
        a.extend(MATCH.iter().map(|x| x.to_string()));
        a.extend(["--out".into(), s(&out).to_owned()]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        ok(run(Path::new(BIN), &a), "single match");
        let mut pk = vec!["peaks", "--scores"];
        let (sc, ri, ro, st) = (
            out.join("scores.npy"),
            out.join("rotation_index.npy"),
            out.join("rotations.npy"),
            out.join("particles.star"),
        );
        pk.extend([s(&sc), "--rotation-index", s(&ri), "--rotations", s(&ro)]);
        pk.extend(["--out", s(&st)]);
        pk.extend(PEAKS);
        ok(run(Path::new(BIN), &pk), "single peaks");
    }
    single
}

/// The data rows of a STAR file (the lines after the last column line).
fn star_rows(text: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let last = lines.iter().rposition(|l| l.starts_with("_rln")).unwrap();
    lines[last + 1..]
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(String::from).collect())
        .collect()
}

/// The column index of `name` in a STAR file's last loop.
fn column(text: &str, name: &str) -> usize {
    let last = text.rfind("loop_").unwrap();
    let cols: Vec<&str> = text[last..]
        .lines()
        .filter(|l| l.starts_with("_rln"))
        .collect();
    cols.iter().position(|l| l.starts_with(name)).unwrap()
}

/// `out` holds, per target, the single run's bytes, and one STAR of every target's rows.
fn same_as_singles(out: &Path, single: &Path, targets: &[(String, String)], what: &str) {
    for (_, folder) in targets {
        for f in [
            "scores.npy",
            "rotation_index.npy",
            "rotations.npy",
            "scores.mrc",
        ] {
            assert!(
                read(&out.join(folder).join(f)) == read(&single.join(folder).join(f)),
                "{what}: {folder}/{f} differs from its single run"
            );
        }
        let js = |d: &Path| -> serde_json::Value {
            serde_json::from_slice(&read(&d.join(folder).join("run.json"))).unwrap()
        };
        let (a, b) = (js(out), js(single));
        for k in ["ssum", "score_statistics", "tiles"] {
            assert_eq!(a[k], b[k], "{what}: {folder} run.json {k}");
        }
        assert!(b["tiles"].as_u64() > Some(1), "{what}: {folder} not tiled");
    }
    let star = String::from_utf8(read(&out.join("particles.star"))).unwrap();
    assert!(
        star.contains("data_optics") && star.contains("\t2.5\n"),
        "{star}"
    );
    let mic = column(&star, "_rlnMicrographName");
    let rows = star_rows(&star);
    let mut at = 0;
    for (given, folder) in targets {
        let one = String::from_utf8(read(&single.join(folder).join("particles.star"))).unwrap();
        let want = star_rows(&one);
        for w in &want {
            let got = &rows[at];
            at += 1;
            assert_eq!(got[mic], *given, "{what}: {folder}");
            // Every column but the micrograph's (peaks names the file only) is peaks' own.
            let strip = |r: &Vec<String>| {
                let mut r = r.clone();
                r.remove(mic);
                r
            };
            assert_eq!(strip(got), strip(w), "{what}: {folder}");
        }
    }
    assert_eq!(at, rows.len(), "{what}: extra rows");
    assert!(
        rows.len() >= targets.len(),
        "{what}: too few peaks to compare"
    );
}

#[test]
fn a_list_writes_each_target_as_its_single_run_and_one_star() {
    let dir = scratch("same");
    let (list, targets) = inputs(&dir, &[[20, 18, 16], [18, 18, 18], [16, 20, 14]]);
    let tmpl = dir.join("p.npy");
    let single = singles(&dir, &targets);
    let out = dir.join("out");
    ok(run(Path::new(BIN), &list_args(&tmpl, &list, &out)), "list");
    same_as_singles(&out, &single, &targets, "one process");
    let info: serde_json::Value = serde_json::from_slice(&read(&out.join("list.json"))).unwrap();
    assert_eq!(info["targets"][1]["folder"], "t1-2", "{info}");
    // Nothing staged is left behind.
    let hidden = std::fs::read_dir(&out)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(hidden, 0);

    // Under MPI: whole targets on 2 and 3 ranks, split ranges (2 targets, 3 ranks), same bytes.
    let Some(bin) = mpi_or_skip() else { return };
    let two = dir.join("two.txt");
    std::fs::write(&two, "t1.mrc\nsub/t1.mrc\n").unwrap();
    for (n, l, ts) in [
        (2, &list, &targets[..]),
        (3, &list, &targets[..]),
        (3, &two, &targets[..2]),
    ] {
        let out = dir.join(format!("mpi{n}-{}", ts.len()));
        let mut c = mpirun();
        c.args(["-n", &n.to_string(), "-q", "--timeout", "120"])
            .arg(&bin);
        let o = c
            .args(list_args(&tmpl, l, &out))
            .arg("-q")
            .output()
            .unwrap();
        let o = ok(o, &format!("{n} ranks"));
        assert!(
            o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        same_as_singles(
            &out,
            &single,
            ts,
            &format!("{n} ranks, {} targets", ts.len()),
        );
        let info: serde_json::Value =
            serde_json::from_slice(&read(&out.join("list.json"))).unwrap();
        assert_eq!(info["ranks"], n, "{info}");
        if ts.len() < n {
            // Split: each target's rotations ran as 2 ranges.
            assert_eq!(
                info["targets"][0]["ran"].as_array().unwrap().len(),
                2,
                "{info}"
            );
        }
    }
}

#[test]
fn a_bad_list_entry_stops_before_any_work() {
    let dir = scratch("bad");
    let (list, _) = inputs(&dir, &[[20, 18, 16], [18, 18, 18]]);
    let tmpl = dir.join("p.npy");
    let out = dir.join("out");
    let line = |o: &Output| {
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{err}");
        let l: Vec<&str> = err.lines().collect();
        assert_eq!(l.len(), 1, "{err}");
        assert!(!out.exists(), "{err}");
        l[0].to_string()
    };
    // A missing file on line 4, after a good one.
    std::fs::write(&list, "t1.mrc\n# comment\n\nmissing.mrc\n").unwrap();
    let e = line(&run(Path::new(BIN), &list_args(&tmpl, &list, &out)));
    assert!(
        e.contains("tomos.txt line 4") && e.contains("missing.mrc"),
        "{e}"
    );
    // A 2-D target in a 3-D list (the template is 3-D).
    let flat = ArrayD::<f32>::zeros(IxDyn(&[20, 20]));
    ndarray_npy::write_npy(dir.join("flat.npy"), &flat).unwrap();
    std::fs::write(&list, "t1.mrc\nflat.npy\n").unwrap();
    let e = line(&run(Path::new(BIN), &list_args(&tmpl, &list, &out)));
    assert!(e.contains("line 2") && e.contains("flat.npy"), "{e}");
    // The same file twice; a STAR list without a path column; an empty list.
    std::fs::write(&list, "t1.mrc\n./t1.mrc\n").unwrap();
    let e = line(&run(Path::new(BIN), &list_args(&tmpl, &list, &out)));
    assert!(e.contains("listed twice"), "{e}");
    let star = dir.join("tomos.star");
    std::fs::write(&star, "data_\nloop_\n_rlnTomoName #1\nTS_1\n").unwrap();
    let e = line(&run(Path::new(BIN), &list_args(&tmpl, &star, &out)));
    assert!(e.contains("_rlnMicrographName"), "{e}");
    std::fs::write(&list, "# nothing\n").unwrap();
    let e = line(&run(Path::new(BIN), &list_args(&tmpl, &list, &out)));
    assert!(e.contains("lists no target"), "{e}");
    // A STAR list: paths from the current folder.
    std::fs::write(
        &star,
        format!(
            "data_\nloop_\n_rlnTomoName #1\n_rlnMicrographName #2\nTS_1 {}\n",
            s(&dir.join("t1.mrc"))
        ),
    )
    .unwrap();
    ok(
        run(Path::new(BIN), &list_args(&tmpl, &star, &out)),
        "star list",
    );
    assert!(out.join("t1/scores.npy").is_file());
}

#[test]
fn a_failure_mid_run_leaves_no_partial_target() {
    let dir = scratch("mid");
    let (list, _) = inputs(&dir, &[[20, 18, 16], [18, 18, 18]]);
    let tmpl = dir.join("p.npy");
    let out = dir.join("out");
    // The test hook fails a matching loop after 3 rotations: the first target.
    let o = Command::new(BIN)
        .args(list_args(&tmpl, &list, &out))
        .env("MONOMORPH_TEST_FAIL_AFTER", "3")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("injected failure"), "{err}");
    assert!(!out.exists(), "a partial output folder: {err}");
}

#[test]
fn mpi_a_rank_failing_mid_list_stops_every_rank_fast() {
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("mpifail");
    // Enough work that, without the stop, the healthy ranks would run for minutes.
    let sizes = [[40, 40, 40]; 4];
    let (list, _) = inputs(&dir, &sizes);
    let tmpl = dir.join("p.npy");
    let out = dir.join("out");
    let mut args = list_args(&tmpl, &list, &out);
    let at = args.iter().position(|a| *a == "60").unwrap();
    args[at] = "6";
    let at = args.iter().position(|a| *a == "130K").unwrap();
    args[at] = "64M";
    let t = Instant::now();
    let mut c = mpirun();
    c.args(["-q", "--timeout", "100", "-n", "1"])
        .arg(&bin)
        .args(&args);
    c.args([":", "-n", "1", "env", "MONOMORPH_TEST_FAIL_AFTER=2"])
        .arg(&bin)
        .args(&args);
    c.args([":", "-n", "1"]).arg(&bin).args(&args);
    let o = c.output().expect("spawn mpirun");
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(15), "took {took:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("error: rank 1: injected failure"),
        "{err}"
    );
    assert!(!out.exists(), "a partial output folder: {err}");
}
