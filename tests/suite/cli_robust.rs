//! The `monomorph` command under hostile conditions: file names that are not UTF-8, a stdout
//! that is closed or full, an unusable `--trace` file, sizes past the machine's memory, failed
//! writes (outputs all or nothing, exit code 1), input errors that must create nothing, outputs
//! that would replace inputs, and numeric flags given negative, zero or fractional values.
//! Every failure must be one line on stderr with the right exit code, never a panic.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::cli_peaks::{bin, p, run};
use crate::common::fixture;

/// A fresh, empty scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-robust-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// Checks that `o` exited with `code`, printed exactly one line on stderr starting with
/// `error: ` and containing each of `needles`, and did not panic.
fn one_line(o: &Output, code: i32, needles: &[&str], what: &str) {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(code), "{what}: stderr {err:?}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: expected one line, got {err:?}");
    assert!(lines[0].starts_with("error: "), "{what}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{what}: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{what}: {err:?} does not mention {n:?}");
    }
}

fn fails(args: &[&str], code: i32, needles: &[&str]) -> Output {
    let o = run(args);
    one_line(&o, code, needles, &format!("monomorph {args:?}"));
    o
}

fn succeeds(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{what}: {err}"
    );
}

/// The 2-D matching fixture: target and template.
fn target_template() -> (PathBuf, PathBuf) {
    (
        fixture("matching/2d_cc/target.npy"),
        fixture("matching/2d_cc/template.npy"),
    )
}

/// Names in `dir`, sorted (empty when `dir` does not exist).
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn file_names_that_are_not_utf8_run_to_the_end() {
    let dir = scratch("nonutf8");
    let (target, template) = target_template();
    let mut name = dir.as_os_str().to_os_string().into_vec();
    name.extend_from_slice(b"/t\xff\xfe.npy");
    let odd_target = PathBuf::from(OsString::from_vec(name));
    std::fs::copy(&target, &odd_target).expect("copy");
    let mut out = dir.as_os_str().to_os_string().into_vec();
    out.extend_from_slice(b"/run\xff");
    let odd_out = PathBuf::from(OsString::from_vec(out));
    let o = bin()
        .arg("match")
        .arg("--target")
        .arg(&odd_target)
        .arg("--template")
        .arg(&template)
        .arg("--out")
        .arg(&odd_out)
        .output()
        .expect("run");
    succeeds(&o, "match with a non-UTF-8 target and --out");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(odd_out.join("run.json")).expect("run.json"))
            .expect("json");
    let shown = run["parameters"]["target"].as_str().expect("target");
    assert!(
        shown.ends_with(".npy") && shown.contains('\u{fffd}'),
        "{shown}"
    );
    assert!(odd_out.join("scores.npy").exists());
    // Peaks to a non-UTF-8 file name, and a non-UTF-8 argument clap rejects.
    let mut pk = dir.as_os_str().to_os_string().into_vec();
    pk.extend_from_slice(b"/p\xfe.star");
    let pk = PathBuf::from(OsString::from_vec(pk));
    let o = bin()
        .arg("peaks")
        .arg("--scores")
        .arg(odd_out.join("scores.npy"))
        .arg("--out")
        .arg(&pk)
        .output()
        .expect("run");
    succeeds(&o, "peaks to a non-UTF-8 --out");
    assert!(
        std::fs::read_to_string(&pk)
            .expect("star")
            .contains("data_")
    );
    let o = bin()
        .arg(OsString::from_vec(b"\xff".to_vec()))
        .output()
        .expect("run");
    one_line(&o, 2, &[], "a non-UTF-8 subcommand");
}

#[test]
fn closed_stdout_is_quiet_success_and_full_stdout_is_exit_1() {
    // A reader that went away: the run finishes (outputs written) and exits 0, silently.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let o = bin()
        .arg("devices")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = scratch("closed-demo");
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let o = bin()
        .args([
            "demo",
            "--size",
            "64",
            "--template-size",
            "8",
            "--particles",
            "2",
        ])
        .args(["--angular-step", "90", "--out", p(&out.join("d"))])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    succeeds(&o, "demo into a closed pipe");
    assert!(
        out.join("d/run.json").exists(),
        "{:?}",
        listing(&out.join("d"))
    );
    // A full device: one line naming stdout, exit 1.
    for args in [
        &["devices"][..],
        &["bench", "--algorithm", "fft", "--size", "8", "--reps", "1"],
        &["--help"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let o = bin()
            .args(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        one_line(&o, 1, &["stdout"], &format!("{args:?} > /dev/full"));
    }
}

#[test]
fn an_unusable_trace_file_is_an_error_naming_trace_never_a_panic() {
    let dir = scratch("trace");
    // Known at the start: a folder, a missing folder, a path below a file (exit 2).
    std::fs::write(dir.join("file"), b"x").expect("write");
    for bad in [
        dir.clone(),
        dir.join("missing/t.json"),
        dir.join("file/t.json"),
    ] {
        fails(&["--trace", p(&bad), "devices"], 2, &["--trace"]);
    }
    // A file every write to fails (/dev/full) is found by a zero-byte write at the start:
    // exit 2 naming --trace, before the command runs (it used to commit the outputs, print
    // success, then fail with exit 1).
    let o = fails(
        &["--trace", "/dev/full", "devices"],
        2,
        &["--trace", "/dev/full"],
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("devices:"));
}

#[test]
fn sizes_past_the_memory_are_input_errors_before_allocating() {
    fails(
        &["demo", "--size", "100000"],
        2,
        &["--size 100000", "bytes", "available"],
    );
    for (alg, size) in [
        ("fft", "100000"),
        ("peaks", "100000"),
        ("maxfilter", "100000x100000"),
        ("cg", "100000"),
        ("stream", "100000000000000"),
        ("matching", "100000/32"),
    ] {
        fails(
            &["bench", "--algorithm", alg, "--size", size, "--reps", "1"],
            2,
            &["--size", size, "bytes"],
        );
    }
    // A cell count past the address space is refused by the size parser itself.
    let size = "4000000000x4000000000x4000000000";
    fails(
        &["bench", "--algorithm", "fft", "--size", size, "--reps", "1"],
        2,
        &["--size", size, "overflow"],
    );
}

#[test]
fn an_input_error_creates_no_output_folder_and_no_file() {
    let dir = scratch("noout");
    let (target, template) = target_template();
    let empty = dir.join("empty.npy");
    std::fs::write(&empty, b"").expect("write");
    let out = dir.join("a/b/out");
    fails(
        &[
            "match",
            "--target",
            p(&empty),
            "--template",
            p(&template),
            "--out",
            p(&out),
        ],
        2,
        &["--target", "empty.npy"],
    );
    // The rotation set is checked after the inputs are read: still nothing created.
    fails(
        &[
            "match",
            "--target",
            p(&target),
            "--template",
            p(&template),
            "--angular-step",
            "0",
            "--out",
            p(&out),
        ],
        2,
        &["--angular-step"],
    );
    fails(
        &[
            "solve",
            "--laplacian",
            "7x7",
            "--rhs",
            p(&target),
            "--out",
            p(&out),
        ],
        2,
        &["--rhs"],
    );
    fails(
        &["demo", "--size", "64", "--particles", "0", "--out", p(&out)],
        2,
        &["--particles"],
    );
    assert!(!dir.join("a").exists(), "{:?}", listing(&dir.join("a")));
    let csv = dir.join("p.csv");
    let png = dir.join("p.png");
    fails(
        &[
            "peaks",
            "--scores",
            p(&empty),
            "--out",
            p(&csv),
            "--png",
            p(&png),
        ],
        2,
        &["--scores"],
    );
    assert_eq!(listing(&dir), ["empty.npy"]);
}

/// `monomorph match` on the 2-D fixture into `out` under a shell that caps the size of files
/// it writes to `blocks` blocks (SIGXFSZ ignored, so a write past it fails with EFBIG, as on a
/// full disk).
fn match_with_file_size_limit(out: &Path, blocks: u32) -> Output {
    let (target, template) = target_template();
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f {blocks} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_monomorph"))
        .args(["match", "--target", p(&target), "--template", p(&template)])
        .args(["--out", p(out)])
        .output()
        .expect("run sh")
}

#[test]
fn a_failed_write_is_exit_1_and_leaves_no_output() {
    let dir = scratch("failwrite");
    // A fresh folder: removed again, nothing left.
    let out = dir.join("fresh");
    let o = match_with_file_size_limit(&out, 64);
    one_line(
        &o,
        1,
        &["--out", "scores.npy", "too large"],
        "match under ulimit -f",
    );
    assert!(!out.exists(), "{:?}", listing(&out));
    // An existing folder: it stays, holding no output and no temporary file.
    let out = dir.join("existing");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::write(out.join("notes.txt"), b"mine").expect("write");
    let o = match_with_file_size_limit(&out, 64);
    one_line(&o, 1, &["scores.npy"], "match under ulimit -f");
    assert_eq!(listing(&out), ["notes.txt"]);
    // Every file written, but the last rename is blocked by a folder: no final name appears
    // (in particular no scores.npy without run.json), exit 1.
    let out = dir.join("blocked");
    std::fs::create_dir_all(out.join("run.json/inner")).expect("mkdir");
    let (target, template) = target_template();
    let o = run(&[
        "match",
        "--target",
        p(&target),
        "--template",
        p(&template),
        "--out",
        p(&out),
    ]);
    one_line(&o, 1, &["run.json"], "match with a folder at run.json");
    assert_eq!(listing(&out), ["run.json"]);
    // Without the obstacle the same command writes everything.
    std::fs::remove_dir_all(out.join("run.json")).expect("rm");
    let o = run(&[
        "match",
        "--target",
        p(&target),
        "--template",
        p(&template),
        "--out",
        p(&out),
    ]);
    succeeds(&o, "match");
    assert_eq!(
        listing(&out),
        [
            "rotation_index.npy",
            "rotations.npy",
            "run.json",
            "scores.npy"
        ]
    );
}

#[test]
fn an_output_that_would_replace_an_input_is_refused() {
    let dir = scratch("same");
    let (target, template) = target_template();
    let scores = dir.join("s.npy");
    std::fs::copy(&target, &scores).expect("copy");
    let before = std::fs::read(&scores).expect("read");
    fails(
        &["peaks", "--scores", p(&scores), "--out", p(&scores)],
        2,
        &["--out", "--scores", "overwrite"],
    );
    fails(
        &[
            "peaks",
            "--scores",
            p(&scores),
            "--out",
            p(&dir.join("p.csv")),
            "--png",
            p(&dir.join("p.csv")),
        ],
        2,
        &["--png", "overwrite"],
    );
    // An input inside --out under an output's name.
    let run_dir = dir.join("run");
    std::fs::create_dir(&run_dir).expect("mkdir");
    let inside = run_dir.join("scores.npy");
    std::fs::copy(&target, &inside).expect("copy");
    fails(
        &[
            "match",
            "--target",
            p(&inside),
            "--template",
            p(&template),
            "--out",
            p(&run_dir),
        ],
        2,
        &["--target", "overwrite"],
    );
    assert_eq!(std::fs::read(&scores).expect("read"), before);
    assert_eq!(listing(&dir), ["run", "s.npy"]);
    // A folder or a missing folder given as an output file.
    fails(
        &["peaks", "--scores", p(&scores), "--out", p(&dir)],
        2,
        &["--out", "folder"],
    );
    fails(
        &[
            "peaks",
            "--scores",
            p(&scores),
            "--out",
            p(&dir.join("no/p.csv")),
        ],
        2,
        &["--out", "does not exist"],
    );
}

#[test]
fn numeric_flags_take_negative_values_and_name_the_flag() {
    let dir = scratch("numbers");
    let scores = fixture("matching/2d_cc/scores.npy");
    let csv = dir.join("p.csv");
    // Negative numbers are values: accepted where they make sense...
    for (flag, v) in [("--threshold-rel", "-0.5"), ("--threshold-abs", "-1e3")] {
        let o = run(&["peaks", "--scores", p(&scores), flag, v, "--out", p(&csv)]);
        succeeds(&o, &format!("peaks {flag} {v}"));
    }
    // ... and refused by the flag's own check, naming it, where they do not.
    let (target, template) = target_template();
    let out = p(&dir.join("o")).to_string();
    let m = |extra: &[&str]| {
        let mut v = vec![
            "match",
            "--target",
            p(&target),
            "--template",
            p(&template),
            "--out",
            &out,
        ];
        v.extend_from_slice(extra);
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (m(&["--angular-step", "-30"]), "--angular-step"),
        (m(&["--angular-step", "nan"]), "--angular-step"),
        (m(&["--memory-limit", "-1"]), "--memory-limit"),
        (m(&["--memory-limit", "0"]), "--memory-limit"),
        (m(&["--memory-limit", "0.5"]), "--memory-limit"),
        (m(&["--memory-limit", "1e30G"]), "--memory-limit"),
        (
            [
                "peaks",
                "--scores",
                p(&scores),
                "--min-distance",
                "-1",
                "--out",
                p(&csv),
            ]
            .map(String::from)
            .to_vec(),
            "--min-distance",
        ),
        (
            [
                "peaks",
                "--scores",
                p(&scores),
                "--false-positives",
                "-1",
                "--out",
                p(&csv),
            ]
            .map(String::from)
            .to_vec(),
            "--false-positives",
        ),
        (
            [
                "peaks",
                "--scores",
                p(&scores),
                "--num-peaks",
                "-3",
                "--out",
                p(&csv),
            ]
            .map(String::from)
            .to_vec(),
            "--num-peaks",
        ),
        (
            ["demo", "--size", "-64"].map(String::from).to_vec(),
            "--size",
        ),
        (
            ["demo", "--noise", "-1"].map(String::from).to_vec(),
            "--noise",
        ),
        (
            ["demo", "--angular-step", "-1"].map(String::from).to_vec(),
            "--angular-step",
        ),
        (
            ["bench", "--algorithm", "fft", "--size", "-8"]
                .map(String::from)
                .to_vec(),
            "--size",
        ),
        (
            ["bench", "--algorithm", "fft", "--size", "8", "--reps", "-1"]
                .map(String::from)
                .to_vec(),
            "--reps",
        ),
        (
            [
                "bench",
                "--algorithm",
                "matching",
                "--size",
                "16/4",
                "--rotations",
                "0",
            ]
            .map(String::from)
            .to_vec(),
            "--rotations",
        ),
        (
            ["bench", "--algorithm", "matching", "--size", "16/32"]
                .map(String::from)
                .to_vec(),
            "--size",
        ),
    ];
    for (args, flag) in &cases {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = fails(&a, 2, &[flag]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("unexpected argument"), "{a:?}: {err}");
    }
    assert!(!dir.join("o").exists());
    // A limit too small for the run: exit 2, the limit in units a person reads (not 0.00 GiB).
    let small = m(&["--memory-limit", "100K"]);
    let small: Vec<&str> = small.iter().map(|s| s.as_str()).collect();
    let o = fails(
        &small,
        2,
        &["--memory-limit 102400 bytes (100.0 KiB)", "larger limit"],
    );
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("0.00 GiB"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!dir.join("o").exists());
    // A fractional size with a unit is that many bytes.
    let o = run(&m(&["--memory-limit", "0.5G"])
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>());
    succeeds(&o, "match --memory-limit 0.5G");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("o/run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(r["parameters"]["memory_limit"], 1u64 << 29, "{r}");
}

#[test]
fn devices_and_links_as_outputs_are_written_through_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("special");
    let scores = fixture("matching/2d_cc/scores.npy");
    // A device: written in place (a rename would replace /dev/null itself, as root).
    let o = run(&[
        "peaks",
        "--scores",
        p(&scores),
        "--out",
        "/dev/null",
        "--png",
        "/dev/null",
    ]);
    succeeds(&o, "peaks --out /dev/null");
    let m = std::fs::symlink_metadata("/dev/null").expect("/dev/null");
    assert!(
        m.file_type().is_char_device(),
        "/dev/null is no longer a device"
    );
    // A link to a file: the file gets the output, the link stays a link.
    let real = dir.join("real.star");
    std::fs::write(&real, b"old").expect("write");
    let link = dir.join("link.star");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let o = run(&["peaks", "--scores", p(&scores), "--out", p(&link)]);
    succeeds(&o, "peaks --out link");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&real)
            .expect("real")
            .contains("data_")
    );
    assert_eq!(listing(&dir), ["link.star", "real.star"]);
}
