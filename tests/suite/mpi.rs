//! `mpirun -n N monomorph match` against one process, byte for byte (3-D FLC and 2-D, tiled
//! and untiled, with ties), a rank that cannot read its input (every rank exits 1, fast, one
//! line), and a binary without the `mpi` feature started by a launcher (refuses).
//!
//! The MPI binary is `MONOMORPH_MPI_BIN` when set (`.ci/run` builds it once with
//! `--features mpi`), else this build's `monomorph` when the suite itself has the feature.
//! Without such a binary or without `mpirun` the MPI tests skip, unless
//! `MONOMORPH_REQUIRE_MPI=1` (CI), where they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};

/// The MPI-enabled `monomorph`, or why there is none.
fn mpi_bin() -> Result<PathBuf, String> {
    let bin = match std::env::var_os("MONOMORPH_MPI_BIN") {
        Some(p) => PathBuf::from(p),
        None if cfg!(feature = "mpi") => PathBuf::from(env!("CARGO_BIN_EXE_monomorph")),
        None => return Err("no MONOMORPH_MPI_BIN and built without --features mpi".into()),
    };
    if !bin.is_file() {
        return Err(format!("MONOMORPH_MPI_BIN {} is not a file", bin.display()));
    }
    match mpirun().arg("--version").output() {
        Ok(o) if o.status.success() => Ok(bin),
        _ => Err("mpirun not found".into()),
    }
}

/// `Some(binary)`, or `None` after saying why the test skips; panics under
/// `MONOMORPH_REQUIRE_MPI=1`.
pub(crate) fn mpi_or_skip() -> Option<PathBuf> {
    match mpi_bin() {
        Ok(b) => Some(b),
        Err(why) => {
            let required = std::env::var("MONOMORPH_REQUIRE_MPI").is_ok_and(|v| v == "1");
            assert!(!required, "MONOMORPH_REQUIRE_MPI=1 but {why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

pub(crate) fn mpirun() -> Command {
    let mut c = Command::new(std::env::var("MPIRUN").unwrap_or_else(|_| "mpirun".into()));
    // Root in a container, more ranks than cores, rayon inside ranks, no ssh.
    c.envs([
        ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
        ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
        ("OMPI_MCA_hwloc_base_binding_policy", "none"),
        ("OMPI_MCA_plm_rsh_agent", "false"),
        ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
        ("RAYON_NUM_THREADS", "1"),
    ]);
    c
}

/// `bin args` on `ranks` ranks (0: one process, no launcher).
fn run(bin: &Path, ranks: u32, args: &[&str]) -> Output {
    let mut c = if ranks == 0 {
        Command::new(bin)
    } else {
        let mut c = mpirun();
        // A hang becomes exit 110, not a stuck CI.
        c.args(["-n", &ranks.to_string(), "-q", "--timeout", "120"]);
        c.arg(bin);
        c
    };
    c.args(args).arg("-q").output().expect("spawn")
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-mpi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Deterministic values in [-1, 1).
pub(crate) fn noise(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32) / (1u64 << 23) as f32 - 1.0
    })
}

pub(crate) fn save(dir: &Path, name: &str, a: &ArrayD<f32>) -> String {
    let p = dir.join(name);
    ndarray_npy::write_npy(&p, a).expect("write npy");
    p.to_str().expect("utf-8").to_string()
}

/// The inputs of each case: (name, args without --out).
pub(crate) fn cases(dir: &Path) -> Vec<(&'static str, Vec<String>)> {
    let t3 = save(dir, "t3.npy", &noise(&[24, 22, 20], 1));
    let p3 = save(dir, "p3.npy", &noise(&[7, 7, 7], 2));
    let m3 = save(
        dir,
        "m3.npy",
        &ArrayD::from_shape_fn(IxDyn(&[7, 7, 7]), |i| {
            let r2: usize = (0..3).map(|k| (i[k] as isize - 3).pow(2) as usize).sum();
            if r2 <= 9 { 1.0 } else { 0.0 }
        }),
    );
    let t2 = save(dir, "t2.npy", &noise(&[40, 36], 3));
    let p2 = save(dir, "p2.npy", &noise(&[9, 9], 4));
    // 2-D rotations with repeats: 1 and 4 are 0 again, 3 is 2 again, so every voxel's best is
    // a tie, decided by the lowest index, also across ranks (4 of 2 or 3 ranks ties with 0).
    let deg = [0.0f64, 0.0, 30.0, 30.0, 0.0, 75.0];
    let rot = ndarray::Array3::from_shape_fn((deg.len(), 2, 2), |(r, i, j)| {
        let (s, c) = deg[r].to_radians().sin_cos();
        [[c, -s], [s, c]][i][j]
    });
    let rot2 = dir.join("rot2.npy");
    ndarray_npy::write_npy(&rot2, &rot).expect("write npy");
    let rot2 = rot2.to_str().expect("utf-8").to_string();
    let flc3 = |extra: &[&str]| {
        let mut a: Vec<String> = ["match", "-m", &t3, "-i", &p3, "--template-mask", &m3]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["-s", "flc", "-a", "60"].map(String::from));
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let cc2 = |extra: &[&str]| {
        let mut a: Vec<String> = [
            "match",
            "-m",
            &t2,
            "-i",
            &p2,
            "-s",
            "cc",
            "--rotations",
            &rot2,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    vec![
        ("flc3", flc3(&[])),
        // Tiled: 4+ tiles, so Σ score² is folded tile by tile across the ranks.
        ("flc3-tiled", flc3(&["--memory-limit", "400K"])),
        ("cc2", cc2(&[])),
        ("cc2-tiled", cc2(&["--memory-limit", "40K"])),
        // Score statistics (exact integer sums) and the phase-scrambling background (maxima
        // merged, its mean taken once): the same bytes for any rank count.
        (
            "flc3-stats-bg-tiled",
            flc3(&[
                "--memory-limit",
                "900K",
                "--score-stats",
                "--background-correction",
                "phase-scrambling",
            ]),
        ),
        (
            "cc2-stats-bg",
            cc2(&[
                "--score-stats",
                "--background-correction",
                "phase-scrambling",
            ]),
        ),
    ]
}

pub(crate) fn args_out<'a>(args: &'a [String], out: &'a str) -> Vec<&'a str> {
    let mut v: Vec<&str> = args.iter().map(String::as_str).collect();
    v.extend(["--out", out]);
    v
}

pub(crate) fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub(crate) fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&read(&dir.join("run.json"))).expect("run.json")
}

#[test]
fn mpi_ranks_match_one_process_byte_for_byte() {
    // One #[test] for every mpirun case: parallel mpiruns would spin against each other.
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("same");
    for (name, args) in cases(&dir) {
        let one = dir.join(format!("{name}-1"));
        let o = run(&bin, 0, &args_out(&args, one.to_str().unwrap()));
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let info = run_json(&one);
        if name.ends_with("tiled") {
            assert!(
                info["tiles"].as_u64() > Some(1),
                "{name}: not tiled: {info}"
            );
        }
        for n in [1, 2, 3] {
            let out = dir.join(format!("{name}-mpi{n}"));
            let o = run(&bin, n, &args_out(&args, out.to_str().unwrap()));
            assert!(
                o.status.success(),
                "{name}, {n} ranks: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            for f in ["scores.npy", "rotation_index.npy", "rotations.npy"] {
                assert!(
                    read(&one.join(f)) == read(&out.join(f)),
                    "{name}, {n} ranks: {f} differs from one process"
                );
            }
            if name.contains("stats") {
                for f in ["score_mean.npy", "score_std.npy", "score_z.npy"] {
                    assert!(
                        read(&one.join(f)) == read(&out.join(f)),
                        "{name}, {n} ranks: {f} differs from one process"
                    );
                }
            }
            let got = run_json(&out);
            for k in ["ssum", "score_statistics", "tiles"] {
                assert_eq!(got[k], info[k], "{name}, {n} ranks: run.json {k}");
            }
            if n > 1 {
                assert_eq!(got["mpi"]["ranks"], n, "{name}: {got}");
                check_ran(&got, n as usize, name);
            }
        }
    }
    // The tie case: never a repeat's later copy, and the ties really occur (0 wins somewhere).
    let ri: ArrayD<i32> = ndarray_npy::read_npy(dir.join("cc2-1/rotation_index.npy")).unwrap();
    assert!(ri.iter().all(|v| ![1, 3, 4].contains(v)), "{ri}");
    assert!(
        ri.iter().any(|&v| v == 0) && ri.iter().any(|&v| v == 2),
        "{ri}"
    );
}

/// run.json's `mpi.ran`: one entry per rank (at most `ranks`), contiguous rotation ranges in
/// rank order covering every rotation, a device field (null on the CPU).
fn check_ran(info: &serde_json::Value, ranks: usize, what: &str) {
    let ran = info["mpi"]["ran"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no mpi.ran: {info}"));
    assert!(!ran.is_empty() && ran.len() <= ranks, "{what}: {info}");
    let mut at = 0;
    for r in ran {
        assert!(r["rank"].as_u64() < Some(ranks as u64), "{what}: {info}");
        assert_eq!(r["rotations"][0].as_u64(), Some(at), "{what}: {info}");
        at = r["rotations"][1].as_u64().unwrap();
        assert!(r.get("device").is_some(), "{what}: {info}");
    }
    let nrot = info["score_statistics"]["n_rotations"].as_u64();
    assert_eq!(Some(at), nrot, "{what}: {info}");
}

#[test]
fn mpi_list_targets_say_which_ranks_ran_them() {
    // Two targets on 3 ranks: each split into 2 ranges merged on rank 0; on 2 ranks: whole.
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("listmpi");
    let (a, b) = (
        save(&dir, "a.npy", &noise(&[16, 14, 12], 31)),
        save(&dir, "b.npy", &noise(&[12, 14, 16], 32)),
    );
    let p = save(&dir, "p.npy", &noise(&[5, 5, 5], 33));
    let list = dir.join("list.txt");
    std::fs::write(&list, format!("{a}\n{b}\n")).unwrap();
    for n in [2, 3] {
        let out = dir.join(format!("out{n}"));
        let args = [
            "match",
            "--target-list",
            list.to_str().unwrap(),
            "-i",
            &p,
            "-a",
            "60",
            "--out",
            out.to_str().unwrap(),
        ];
        let o = run(&bin, n, &args);
        assert!(
            o.status.success(),
            "{n} ranks: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        for t in ["a", "b"] {
            let info = run_json(&out.join(t));
            assert_eq!(info["mpi"]["ranks"], n, "{t}: {info}");
            check_ran(&info, n as usize, t);
            let parts = info["mpi"]["ran"].as_array().map(Vec::len);
            assert_eq!(parts, Some(if n == 3 { 2 } else { 1 }), "{t}: {info}");
        }
    }
}

#[test]
fn mpi_one_target_says_what_each_rank_ran() {
    // One target on 2 ranks: one item per rank, given out on demand; run.json's per-rank
    // figures agree with its items.
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("perrank");
    let t = save(&dir, "t.npy", &noise(&[24, 24, 24], 7));
    let p = save(&dir, "p.npy", &noise(&[7, 7, 7], 8));
    let out = dir.join("out");
    let args = [
        "match",
        "-m",
        &t,
        "-i",
        &p,
        "-a",
        "35",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = run(&bin, 2, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let info = run_json(&out);
    check_ran(&info, 2, "one target");
    let ran = info["mpi"]["ran"].as_array().unwrap();
    assert_eq!(ran.len(), 2, "{info}");
    let mut per_rank = [0u64; 2];
    for r in ran {
        let k = r["rank"].as_u64().unwrap() as usize;
        per_rank[k] += r["rotations"][1].as_u64().unwrap() - r["rotations"][0].as_u64().unwrap();
    }
    let got: Vec<u64> = info["mpi"]["rotations_per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(got, per_rank, "{info}");
    assert_eq!(
        info["mpi"]["rank_match_s"].as_array().map(Vec::len),
        Some(2)
    );
}

#[test]
fn mpi_rank_that_cannot_read_its_input_ends_every_rank() {
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("fail");
    let (_, args) = cases(&dir).swap_remove(0);
    let out = dir.join("out");
    let good = args_out(&args, out.to_str().unwrap());
    let missing = dir.join("missing.npy");
    let bad: Vec<&str> = good
        .iter()
        .map(|a| {
            if a.ends_with("t3.npy") {
                missing.to_str().unwrap()
            } else {
                a
            }
        })
        .collect();
    // MPMD: ranks 0 and 2 get the good command line, rank 1 a target that does not exist.
    let t = Instant::now();
    let mut c = mpirun();
    c.args(["-q", "--timeout", "60", "-n", "1"])
        .arg(&bin)
        .args(&good);
    c.args([":", "-n", "1"]).arg(&bin).args(&bad);
    c.args([":", "-n", "1"]).arg(&bin).args(&good);
    let o = c.output().expect("spawn mpirun");
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(30), "took {took:?}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("error: rank 1: --target") && lines[0].contains("missing.npy"),
        "{err}"
    );
    assert!(!out.exists(), "an output folder was left: {err}");
}

#[test]
fn mpi_refusal_every_rank_makes_alike_is_printed_once() {
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("refusal");
    let (_, args) = cases(&dir).swap_remove(0);
    let out = dir.join("out");
    let mut refused = args_out(&args, out.to_str().unwrap());
    // --peaks without --target-list: every rank refuses it before any collective call.
    refused.push("--peaks");
    let error_lines = |o: &Output| -> (usize, String) {
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("error: --peaks: only with --target-list")),
            "{err}"
        );
        (lines.len(), err)
    };
    // Open MPI ends the job when rank 0 exits: the other rank's copy of the line came out at
    // random (when it got there first). Run it often.
    for attempt in 0..10 {
        let o = run(&bin, 2, &refused);
        let (n, err) = error_lines(&o);
        assert_eq!(o.status.code(), Some(2), "attempt {attempt}: {err}");
        assert_eq!(n, 1, "attempt {attempt}: {err}");
        assert!(!out.exists(), "an output folder was left: {err}");
    }
    // A launcher that lets every rank finish (as srun does) printed it once per rank.
    for ranks in [2, 3] {
        let o = mpirun()
            .env("OMPI_MCA_orte_abort_on_non_zero_status", "0")
            .args(["-n", &ranks.to_string(), "-q", "--timeout", "120"])
            .arg(&bin)
            .args(&refused)
            .output()
            .expect("spawn mpirun");
        let (n, err) = error_lines(&o);
        assert_eq!(n, 1, "{ranks} ranks, every rank finishing: {err}");
    }
}

#[test]
fn mpi_a_rank_failing_mid_loop_stops_every_rank_fast() {
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("midloop");
    // About 2,000 rotations of a 40³ FLC per 3 ranks: minutes on one thread each, so only a
    // stop from the failing rank ends the others within the time allowed.
    let t = save(&dir, "t.npy", &noise(&[40, 40, 40], 5));
    let p = save(&dir, "p.npy", &noise(&[9, 9, 9], 6));
    let out = dir.join("out");
    let args = [
        "match",
        "-m",
        &t,
        "-i",
        &p,
        "-a",
        "6",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ];
    // Rank 1 fails, then rank 0 (which must stop the others before it waits for their ends).
    for failing in [1, 0] {
        let started = Instant::now();
        let mut c = mpirun();
        c.args(["-q", "--timeout", "100"]);
        for k in 0..3 {
            if k > 0 {
                c.arg(":");
            }
            c.args(["-n", "1"]);
            if k == failing {
                c.args(["env", "MONOMORPH_TEST_FAIL_AFTER=2"]);
            }
            c.arg(&bin).args(args);
        }
        let o = c.output().expect("spawn mpirun");
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "rank {failing}: {err}");
        assert!(took < Duration::from_secs(15), "took {took:?}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        let want = format!("error: rank {failing}: injected failure");
        assert!(lines[0].starts_with(&want), "{err}");
        assert!(!out.exists(), "an output folder was left: {err}");
    }
}

#[test]
fn binary_without_mpi_refuses_to_run_as_one_of_many_ranks() {
    if cfg!(feature = "mpi") {
        return eprintln!("skipped: this build has the mpi feature");
    }
    let dir = scratch("nompi");
    let (_, args) = cases(&dir).swap_remove(0);
    let out = dir.join("out");
    for rank in ["0", "1"] {
        // What mpirun (OMPI_*) or srun with PMI (PMI_*) sets in each rank's environment.
        for (size, rank_var) in [
            ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
            ("PMI_SIZE", "PMI_RANK"),
        ] {
            let o = Command::new(env!("CARGO_BIN_EXE_monomorph"))
                .args(args_out(&args, out.to_str().unwrap()))
                .envs([(size, "2"), (rank_var, rank)])
                .output()
                .expect("spawn");
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{err}");
            if rank == "0" {
                assert!(err.contains("built without MPI support"), "{err}");
                assert_eq!(err.lines().count(), 1, "{err}");
            } else {
                assert!(err.is_empty(), "rank 1 printed: {err}");
            }
            assert!(!out.exists());
        }
    }
}
