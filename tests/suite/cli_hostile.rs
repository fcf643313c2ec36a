//! Issue 25, item 8: what a hostile-user suite found in the newest flags. Each test failed
//! before its fix (a panic, a hang, a silently wrong answer, a false error or the wrong flag
//! named) and must give a success that is right, or one `error:` line naming the flag or file
//! with exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use monomorph::io::star::parse_star;
use monomorph::io::{MicrographPeaks, PeakRow, peaks_star_many};
use ndarray::{Array2, Array3, ArrayD};
use ndarray_npy::{read_npy, write_npy};

use crate::cli_peaks::{bin, p};
use crate::common::fixture;

/// A fresh, empty scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// Runs `cmd`, killing it after `limit` (a hang fails the test instead of stalling the suite).
fn within(mut cmd: Command, limit: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn monomorph");
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn run(args: &[&str]) -> Output {
    let mut c = bin();
    c.args(args);
    within(c, Duration::from_secs(120), &format!("monomorph {args:?}"))
}

/// `monomorph args` under an address-space cap of `kib` KiB (`ulimit -v`), with two rayon
/// threads (so the cap does not depend on the machine's cores) unless `env` sets them.
fn capped(kib: u64, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_monomorph"))
        .args(args)
        .env("RAYON_NUM_THREADS", "2");
    for (k, v) in env {
        c.env(k, v);
    }
    within(
        c,
        Duration::from_secs(120),
        &format!("capped monomorph {args:?}"),
    )
}

/// Checks one `error:` line with exit `code` naming each of `needles`, and no panic.
fn one_error(o: &Output, code: i32, needles: &[&str], what: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(code), "{what}: stderr {err:?}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: expected one line, got {err:?}");
    assert!(lines[0].starts_with("error: "), "{what}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("internal"),
        "{what}: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{what}: {err:?} does not name {n:?}");
    }
    lines[0].to_string()
}

fn fails(args: &[&str], needles: &[&str]) -> String {
    one_error(&run(args), 2, needles, &format!("monomorph {args:?}"))
}

fn succeeds(o: &Output, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{what} failed: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

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

/// The 2-D matching fixture (target, template) as strings.
fn pair_2d() -> (String, String) {
    let s = |r: &str| fixture(r).to_str().expect("utf-8").to_string();
    (
        s("matching/2d_cc/target.npy"),
        s("matching/2d_cc/template.npy"),
    )
}

/// A tiny 3-D job in `dir`: target and template paths.
fn job_3d(dir: &Path) -> (String, String) {
    let target =
        Array3::<f32>::from_shape_fn((12, 12, 12), |(z, y, x)| ((z * 7 + y * 3 + x) % 11) as f32);
    let template =
        Array3::<f32>::from_shape_fn((4, 4, 4), |(z, y, x)| ((z + 2 * y + 3 * x) % 5) as f32);
    let (t, tp) = (dir.join("t.npy"), dir.join("p.npy"));
    write_npy(&t, &target).expect("write");
    write_npy(&tp, &template).expect("write");
    (p(&t).to_string(), p(&tp).to_string())
}

const SEEDS: &str = "data_particles\nloop_\n_rlnAngleRot #1\n_rlnAngleTilt #2\n_rlnAnglePsi #3\n\
                     30 60 -90\n";

// ---- panics -------------------------------------------------------------------------------

#[test]
fn a_tilt_file_whose_first_line_is_a_lone_comma_names_the_line() {
    let dir = scratch("comma");
    let (t, tp) = pair_2d();
    let tlt = dir.join("angles.tlt");
    std::fs::write(&tlt, ",\n10\n").expect("write");
    let out = dir.join("o");
    let args = [
        "match",
        "-m",
        &t,
        "-i",
        &tp,
        "-o",
        p(&out),
        "--tilt-angles",
        p(&tlt),
    ];
    fails(&args, &["--tilt-angles", "angles.tlt", "line 1"]);
    assert!(!out.exists());
}

#[test]
fn outputs_named_with_a_multibyte_first_character_are_written() {
    let dir = scratch("utf8-names");
    let scores = fixture("matching/2d_cc/scores.npy");
    let (csv, png) = (dir.join("é.csv"), dir.join("日本.png"));
    let o = run(&[
        "peaks",
        "--scores",
        p(&scores),
        "--out",
        p(&csv),
        "--png",
        p(&png),
        "--num-peaks",
        "3",
    ]);
    succeeds(&o, "peaks --out é.csv --png 日本.png");
    // Both files, and no temporary file left behind.
    assert_eq!(listing(&dir), ["é.csv", "日本.png"]);
    assert!(std::fs::read_to_string(&csv).expect("csv").lines().count() > 1);
}

#[test]
fn peak_oversampling_past_the_memory_is_refused_before_allocating() {
    let dir = scratch("oversampling-memory");
    let s = dir.join("s.npy");
    let map = Array3::<f32>::from_shape_fn((16, 16, 16), |(z, y, x)| {
        (-(((z as f32 - 8.0).powi(2) + (y as f32 - 7.0).powi(2) + (x as f32 - 9.0).powi(2)) / 8.0))
            .exp()
    });
    write_npy(&s, &map).expect("write");
    let out = dir.join("p.csv");
    // 682 (the documented maximum) on a 3-D map needs about 17 GB: refused under a 4 GB cap,
    // where it used to abort in the allocator.
    let args = [
        "peaks",
        "--scores",
        p(&s),
        "--out",
        p(&out),
        "--num-peaks",
        "1",
        "--peak-oversampling",
        "682",
    ];
    let o = capped(4 << 20, &[], &args);
    one_error(
        &o,
        2,
        &["--peak-oversampling 682", "memory"],
        "oversampling 682",
    );
    assert!(!out.exists());
    // A factor that fits still works under the cap.
    let mut small = args;
    small[8] = "4";
    succeeds(&capped(4 << 20, &[], &small), "oversampling 4");
}

#[test]
fn a_cone_search_past_the_memory_is_refused_naming_the_step() {
    let dir = scratch("cone-memory");
    let (t, tp) = job_3d(&dir);
    let star = dir.join("seeds.star");
    std::fs::write(&star, SEEDS).expect("write");
    let out = dir.join("o");
    let mut args = vec![
        "match",
        "-m",
        &t,
        "-i",
        &tp,
        "-s",
        "cc",
        "-o",
        p(&out),
        "--orientations",
        p(&star),
        "--orientations-cone",
        "0",
        "--orientations-inplane-step",
        "1e-5",
    ];
    // 36 million rotations, 5 GB of matrices while built: refused before allocating.
    let o = capped(4 << 20, &[], &args);
    one_error(
        &o,
        2,
        &["--orientations-inplane-step", "memory"],
        "cone 0, in-plane step 1e-5",
    );
    assert!(!out.exists());
    // A bad in-plane step is named as such (it was reported as --orientations-cone).
    args[14] = "0";
    let e = fails(&args, &["--orientations-inplane-step 0"]);
    assert!(!e.contains("--orientations-cone 0:"), "{e}");
}

#[test]
fn threads_the_os_refuses_are_one_error_naming_rayon_num_threads() {
    let dir = scratch("threads");
    let scores = fixture("matching/2d_cc/scores.npy");
    let out = dir.join("p.csv");
    let args = ["peaks", "--scores", p(&scores), "--out", p(&out)];
    let o = capped(4 << 20, &[("RAYON_NUM_THREADS", "5000")], &args);
    one_error(
        &o,
        2,
        &["RAYON_NUM_THREADS=5000"],
        "5000 threads under a cap",
    );
    assert!(!out.exists());
}

// ---- hangs --------------------------------------------------------------------------------

#[test]
fn a_list_of_200000_targets_reaches_its_first_error_without_a_quadratic_wait() {
    let dir = scratch("long-list");
    let (_, tp) = pair_2d();
    let list = dir.join("list.txt");
    let mut text = String::with_capacity(200_001 * 16);
    for i in 0..200_000 {
        text.push_str(&format!("t{i}.npy\n"));
    }
    text.push_str("t0.npy\n");
    std::fs::write(&list, text).expect("write");
    let out = dir.join("o");
    fails(
        &["match", "--target-list", p(&list), "-i", &tp, "-o", p(&out)],
        &["--target-list", "line 200001", "listed twice", "line 1"],
    );
    assert!(!out.exists());
}

#[test]
fn a_fifo_as_an_input_is_refused_without_blocking() {
    let dir = scratch("fifo");
    let fifo = |name: &str| {
        let f = dir.join(name);
        let st = Command::new("mkfifo").arg(&f).status().expect("mkfifo");
        assert!(st.success());
        f
    };
    let (t, tp) = pair_2d();
    let out = dir.join("o");
    let npy = fifo("t.npy");
    fails(
        &["match", "-m", p(&npy), "-i", &tp, "-o", p(&out)],
        &["--target", "t.npy", "FIFO"],
    );
    let tlt = fifo("a.tlt");
    fails(
        &[
            "match",
            "-m",
            &t,
            "-i",
            &tp,
            "-o",
            p(&out),
            "--tilt-angles",
            p(&tlt),
        ],
        &["--tilt-angles", "a.tlt", "FIFO"],
    );
    let list = fifo("list.txt");
    fails(
        &["match", "--target-list", p(&list), "-i", &tp, "-o", p(&out)],
        &["--target-list", "list.txt", "FIFO"],
    );
    let scores = fifo("s.npy");
    fails(
        &[
            "peaks",
            "--scores",
            p(&scores),
            "--out",
            p(&dir.join("p.csv")),
        ],
        &["--scores", "s.npy", "FIFO"],
    );
    let dir3 = scratch("fifo3");
    let (t3, tp3) = job_3d(&dir3);
    let star = fifo("seeds.star");
    fails(
        &[
            "match",
            "-m",
            &t3,
            "-i",
            &tp3,
            "-o",
            p(&out),
            "--orientations",
            p(&star),
            "--orientations-cone",
            "10",
        ],
        &["--orientations", "seeds.star", "FIFO"],
    );
    assert!(!out.exists());
}

// ---- silently wrong -----------------------------------------------------------------------

#[test]
fn peak_flags_without_a_target_list_are_refused() {
    let dir = scratch("single-peaks");
    let (t, tp) = pair_2d();
    let out = dir.join("o");
    for extra in [
        &["--peaks"][..],
        &["--peaks", "--num-peaks", "3"][..],
        &["--num-peaks", "3"][..],
    ] {
        let mut a = vec!["match", "-m", &t, "-i", &tp, "-o", p(&out)];
        a.extend_from_slice(extra);
        fails(&a, &["--peaks"]);
        assert!(!out.exists());
    }
}

#[test]
fn warp_microscope_values_that_do_not_parse_name_the_file_and_line() {
    use monomorph::io::tilt::parse_warp_xml;
    let path = Path::new("ts.xml");
    let xml = |voltage: &str, cs: &str| {
        format!(
            "<TiltSeries>\n<Angles>-3\n0\n3</Angles>\n<CTF>\n<Param Name=\"Voltage\" \
             Value=\"{voltage}\"/>\n<Param Name=\"Cs\" Value=\"{cs}\"/>\n\
             <Param Name=\"Defocus\" Value=\"3\"/>\n</CTF>\n</TiltSeries>"
        )
    };
    let good = parse_warp_xml(path, &xml("200", "2.7"))
        .and_then(|w| w.ctf(path))
        .expect("valid");
    assert_eq!(good.voltage_kv, Some(200.0));
    let e = parse_warp_xml(path, &xml("200kV", "2.7"))
        .and_then(|w| w.ctf(path))
        .expect_err("200kV")
        .to_string();
    assert!(
        e.contains("ts.xml") && e.contains("line 6") && e.contains("200kV"),
        "{e}"
    );
    let e = parse_warp_xml(path, &xml("200", "2,0"))
        .and_then(|w| w.ctf(path))
        .expect_err("2,0")
        .to_string();
    assert!(e.contains("line 7") && e.contains("2,0"), "{e}");
    // An empty <Angles> says so (it was "every tilt has UseTilt False").
    let e = parse_warp_xml(path, "<TiltSeries>\n<Angles></Angles>\n</TiltSeries>")
        .expect_err("empty")
        .to_string();
    assert!(e.contains("<Angles>") && !e.contains("UseTilt"), "{e}");
}

#[test]
fn a_star_file_of_two_tilt_series_is_refused_naming_the_blocks() {
    use monomorph::io::tilt::{parse_ctf_star, parse_tilt_star};
    let path = Path::new("ts.star");
    let block = |name: &str| {
        format!(
            "data_{name}\nloop_\n_rlnTomoNominalStageTiltAngle #1\n_rlnMicrographPreExposure #2\n\
             _rlnDefocusU #3\n_rlnDefocusV #4\n_rlnDefocusAngle #5\n\
             -3 0 30000 30000 0\n0 3 31000 31000 0\n3 6 32000 32000 0\n\n"
        )
    };
    let one = block("TS_01");
    assert_eq!(parse_tilt_star(path, &one).expect("one").angles.len(), 3);
    assert_eq!(parse_ctf_star(path, &one).expect("one").tilts.len(), 3);
    let two = format!("{}{}", block("TS_01"), block("TS_02"));
    for e in [
        parse_tilt_star(path, &two).expect_err("tilts").to_string(),
        parse_ctf_star(path, &two).expect_err("ctf").to_string(),
    ] {
        assert!(
            e.contains("ts.star") && e.contains("data_TS_01") && e.contains("data_TS_02"),
            "{e}"
        );
    }
}

#[test]
fn sub_voxel_peaks_of_a_restricted_map_stay_in_the_searched_box() {
    let dir = scratch("subvoxel-box");
    // Noise searched on rows 8..12 only (the rest -inf, not searched, as a --search-y 8:12 run
    // writes it); the interpolant sees zeros there, and a peak on row 11 was moved to 11.125.
    let mut state = 2u64;
    let mut rnd = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as f64 / (1u64 << 31) as f64) as f32
    };
    let mut map = Array2::<f32>::from_elem((32, 32), f32::NEG_INFINITY);
    for y in 8..12 {
        for x in 0..32 {
            map[[y, x]] = rnd();
        }
    }
    let s = dir.join("s.npy");
    write_npy(&s, &map).expect("write");
    let out = dir.join("p.csv");
    let o = run(&[
        "peaks",
        "--scores",
        p(&s),
        "--out",
        p(&out),
        "--min-distance",
        "1",
        "--exclude-border",
        "0",
        "--num-peaks",
        "200",
        "--peak-oversampling",
        "8",
    ]);
    succeeds(&o, "peaks --peak-oversampling on a restricted map");
    let text = std::fs::read_to_string(&out).expect("csv");
    let ys: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().expect("y").parse().expect("number"))
        .collect();
    assert!(ys.len() > 10, "{text}");
    for y in &ys {
        assert!(
            (8.0..=11.0).contains(y),
            "a peak at y = {y}, outside the searched rows 8..=11:\n{text}"
        );
    }
    // Peaks on the box's edge rows that still move inwards are kept as they were.
    assert!(ys.iter().any(|&y| y > 8.0 && y < 9.0), "{text}");
}

#[test]
fn star_values_round_trip_through_relions_quoting() {
    let names = [
        "x \"y\" z.npy",
        "plain.mrc",
        "it's a.mrc",
        "a\" b 'c.mrc",
        "#hash.mrc",
        "a#b.mrc",
        "_under.mrc",
        "data_x.mrc",
        "loop_",
        "\"q.mrc",
        "",
    ];
    let row = [PeakRow {
        position: vec![1, 2],
        score: 0.5,
        rotation: None,
        euler: None,
        subvoxel: None,
        template: None,
    }];
    let groups: Vec<MicrographPeaks<'_>> = names
        .iter()
        .map(|n| MicrographPeaks {
            name: Some(n),
            rows: &row,
            pixel_size: None,
        })
        .collect();
    let text = peaks_star_many(&groups, 2, &[]);
    let blocks = parse_star(Path::new("p.star"), &text).expect("parse");
    let (l, c) = blocks
        .iter()
        .find_map(|b| b.loop_with("_rlnMicrographName"))
        .expect("column");
    let got: Vec<&str> = l.rows.iter().map(|(_, r)| r[c].as_str()).collect();
    assert_eq!(got, names, "{text}");
}

// ---- false errors -------------------------------------------------------------------------

#[test]
fn orientations_read_quoted_names_and_hashes_inside_values() {
    let dir = scratch("orientations-quotes");
    let (t, tp) = job_3d(&dir);
    let star = dir.join("seeds.star");
    std::fs::write(
        &star,
        "# written by hand\ndata_particles\n\nloop_\n_rlnMicrographName #1\n_rlnAngleRot #2\n\
         _rlnAngleTilt #3\n_rlnAnglePsi #4\n\"tomo one.mrc\" 30 60 -90\ntomo#2.mrc -120 20 45\n",
    )
    .expect("write");
    let out = dir.join("o");
    let o = run(&[
        "match",
        "-m",
        &t,
        "-i",
        &tp,
        "-s",
        "cc",
        "--quiet",
        "-o",
        p(&out),
        "--orientations",
        p(&star),
        "--orientations-cone",
        "0",
        "--orientations-inplane-step",
        "90",
    ]);
    succeeds(&o, "--orientations with quoted names");
    let r: ArrayD<f32> = read_npy(out.join("rotations.npy")).expect("rotations");
    // Two seeds, each with itself and its 4 in-plane spins.
    assert_eq!(r.shape()[0], 2 * (4 + 1));
}

// ---- wrong flag named ---------------------------------------------------------------------

#[test]
fn each_filter_value_is_named_by_its_own_flag_or_file_line() {
    let dir = scratch("filter-flags");
    let (t, tp) = pair_2d();
    let out = dir.join("o");
    let base = ["match", "-m", &t, "-i", &tp, "-o", p(&out)];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a
    }
    let e = fails(
        &with(&base, &["--defocus", "30000", "--phase-shift", "inf"]),
        &["--phase-shift inf"],
    );
    assert!(!e.contains("--defocus"), "{e}");
    fails(
        &with(
            &base,
            &["--defocus", "30000", "--acceleration-voltage", "1e-300"],
        ),
        &["--acceleration-voltage 1e-300"],
    );
    let star = dir.join("ctf.star");
    std::fs::write(
        &star,
        "data_optics\n_rlnVoltage -300\n_rlnSphericalAberration 2.7\n\
         data_micrographs\nloop_\n_rlnDefocusU #1\n_rlnDefocusV #2\n30000 30000\n",
    )
    .expect("write");
    let e = fails(
        &with(&base, &["--ctf-file", p(&star)]),
        &["--ctf-file", "ctf.star", "line 2", "-300"],
    );
    assert!(!e.contains("--acceleration-voltage"), "{e}");
    assert!(!out.exists());
}

#[test]
fn a_symmetry_that_leaves_no_rotation_names_the_flag() {
    let dir = scratch("symmetry-empty");
    let (t, tp) = pair_2d();
    let (s, c) = (135f64.to_radians().sin(), 135f64.to_radians().cos());
    let r = Array3::<f64>::from_shape_vec((1, 2, 2), vec![c, -s, s, c]).expect("shape");
    let rot = dir.join("r.npy");
    write_npy(&rot, &r).expect("write");
    let out = dir.join("o");
    fails(
        &[
            "match",
            "-m",
            &t,
            "-i",
            &tp,
            "-o",
            p(&out),
            "--rotations",
            p(&rot),
            "--symmetry",
            "C4",
        ],
        &["--symmetry C4", "none of the 1 rotation"],
    );
    assert!(!out.exists());
}

#[test]
fn allow_nan_with_peak_oversampling_names_the_flags() {
    let dir = scratch("nan-oversampling");
    let mut map = Array2::<f32>::from_shape_fn((16, 16), |(y, x)| ((y * 16 + x) % 7) as f32);
    map[[3, 3]] = f32::NAN;
    let s = dir.join("s.npy");
    write_npy(&s, &map).expect("write");
    let out = dir.join("p.csv");
    fails(
        &[
            "peaks",
            "--scores",
            p(&s),
            "--out",
            p(&out),
            "--allow-nan",
            "--peak-oversampling",
            "2",
        ],
        &["--peak-oversampling 2", "--allow-nan", "s.npy"],
    );
    assert!(!out.exists());
}

#[test]
fn an_unwritable_trace_is_refused_before_any_output() {
    let dir = scratch("trace-full");
    let (t, tp) = pair_2d();
    let out = dir.join("o");
    let o = run(&[
        "--trace",
        "/dev/full",
        "match",
        "-m",
        &t,
        "-i",
        &tp,
        "-o",
        p(&out),
        "-a",
        "90",
    ]);
    one_error(&o, 2, &["--trace", "/dev/full"], "--trace /dev/full");
    assert!(!out.exists(), "outputs were committed: {:?}", listing(&out));
}
