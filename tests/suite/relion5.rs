//! RELION 5 projects in, RELION 5 particles out (issue 29): `match --relion5-tomograms-star`
//! on the real RELION 5 files of `tests/fixtures/pipeline/relion5` (run.json's values equal
//! `reference.json`'s, the filters bit-identical to the same per-tilt STAR given by hand), the
//! bad inputs (exit 2, nothing written), `--warp-xml` = its long form, `--target-list` over a
//! tomograms.star, and RELION 5 particle files: the tutorial's picks reproduced with the picker
//! rule, the reader rule read back to the voxel, and a planted-particle run through a synthetic
//! project written here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use monomorph::io::relion5::{
    Centre, Particle, ParticleGeometry, parse_tomogram_set, particles_star, read_particles_back,
};
use monomorph::io::star::parse_star;
use monomorph::io::write_mrc;
use ndarray::{ArrayD, IxDyn};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_monomorph");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pipeline")
}

fn reference() -> Value {
    let t = std::fs::read_to_string(fixtures().join("reference.json")).unwrap();
    serde_json::from_str(&t).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-r5-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A copy of fixture project `root` (`pytom_job009`, `tutorial`) in a scratch folder.
fn project(root: &str, tag: &str) -> PathBuf {
    let d = scratch(&format!("{root}-{tag}"));
    copy_dir(&fixtures().join("relion5").join(root), &d);
    d
}

fn noise(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    })
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("spawn")
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn run_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// A small tomogram (noise, 20³) with `voxel` in its header and an 8³ `.npy` template.
fn inputs(dir: &Path, tomo: &str, voxel: f32) {
    let p = dir.join(tomo);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    write_mrc(&p, &noise(&[20, 20, 20], 5), [voxel; 3]).unwrap();
    ndarray_npy::write_npy(dir.join("tmpl.npy"), &noise(&[8, 8, 8], 9)).unwrap();
}

const FAST: [&str; 4] = ["--angular-step", "90", "-q", "--template=tmpl.npy"];

fn match_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["match", "--out", out];
    v.extend(FAST);
    v.extend(extra);
    v
}

struct Case {
    root: &'static str,
    star: &'static str,
    name: &'static str,
    /// The row's map (None: half maps only, --target needed).
    map: Option<&'static str>,
}

const CASES: [Case; 2] = [
    Case {
        root: "pytom_job009",
        star: "Tomograms/job009/tomograms.star",
        name: "tomo200528_107",
        map: Some("Tomograms/job009/tomograms/rec_tomo200528_107.mrc"),
    },
    Case {
        root: "tutorial",
        star: "Tomograms/job006/tomograms.star",
        name: "TS_01",
        map: None,
    },
];

#[test]
fn project_values_in_run_json_equal_the_references() {
    let refs = reference();
    for c in &CASES {
        let d = project(c.root, "values");
        let r = &refs["relion5"][format!("relion5/{}/{}", c.root, c.star)]["tomograms"][c.name];
        let pv = r["derived"]["tomogram_voxel_size_A (ps*binning)"]
            .as_f64()
            .unwrap();
        let tomo = c.map.unwrap_or("rec.mrc");
        inputs(&d, tomo, pv as f32);
        let mut base = vec!["--relion5-tomograms-star", c.star, "--tomo-name", c.name];
        if c.map.is_none() {
            base.extend(["--target", tomo]);
        }
        for (source, out) in [("nominal", "o_nom"), ("aligned", "o_al")] {
            let mut extra = base.clone();
            extra.extend(["--tilt-angle-source", source]);
            let o = run(&d, &match_args(out, &extra));
            ok(&o, c.name);
            let f = &run_json(&d.join(out))["filters"];
            let tilts = &r["tilts (file row order)"];
            let pytom = &r["pytom_match_pick"];
            let want_angles = if source == "nominal" {
                // pytom-match-pick's reading (= the column).
                f64s(&pytom["tilt_angles_deg"])
            } else {
                f64s(&tilts["ytilt_deg (aligned)"])
            };
            assert_eq!(f64s(&f["tilt_angles"]), want_angles, "{} {source}", c.name);
            assert_eq!(
                f64s(&f["doses"]),
                f64s(&pytom["dose_accumulation_e_per_A2"])
            );
            assert_eq!(f64s(&f["doses"]), f64s(&tilts["pre_exposure_e_per_A2"]));
            let uv = f["defocus_per_tilt"].as_array().unwrap();
            let (u, v, a) = (
                f64s(&tilts["defocus_u_A"]),
                f64s(&tilts["defocus_v_A"]),
                f64s(&tilts["defocus_angle_deg"]),
            );
            assert_eq!(uv.len(), u.len());
            for (k, row) in uv.iter().enumerate() {
                assert_eq!(f64s(row), [u[k], v[k], a[k]], "tilt {k}");
                // pytme's reading: mean defocus (U+V)/2.
                let mean = f64s(&tilts["mean_defocus_A ((U+V)/2)"])[k];
                assert!(((u[k] + v[k]) / 2.0 - mean).abs() < 1e-3);
            }
            let g = &r["global_row"];
            assert_eq!(f["acceleration_voltage_kv"], g["rlnVoltage"]);
            assert_eq!(
                f["spherical_aberration_angstrom"].as_f64().unwrap(),
                g["rlnSphericalAberration"].as_f64().unwrap() * 1e7
            );
            assert_eq!(f["amplitude_contrast"], g["rlnAmplitudeContrast"]);
            assert_eq!(f["voxel_size"].as_f64().unwrap(), pv);
            assert_eq!(pytom["voxel_size_A"].as_f64().unwrap(), pv);
            let m = &f["metadata"];
            assert_eq!(m["file"], c.star);
            assert_eq!(m["tomo_name"], c.name);
            assert_eq!(m["tilt_angle_source"], source);
            assert_eq!(m["tilt_series_file"], r["tilt_series_star"]["as_written"]);
            assert_eq!(f["tilt_weighting"], "relion");
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn project_filters_are_bit_identical_to_the_per_tilt_star_by_hand() {
    for c in &CASES {
        let d = project(c.root, "bits");
        let set = parse_tomogram_set(
            Path::new(c.star),
            &std::fs::read_to_string(d.join(c.star)).unwrap(),
        )
        .unwrap();
        let t = set.tomogram(c.name).unwrap();
        let pv = t.voxel_size();
        let tomo = c.map.unwrap_or("rec.mrc");
        inputs(&d, tomo, pv as f32);
        let mut extra = vec!["--relion5-tomograms-star", c.star, "--tomo-name", c.name];
        if c.map.is_none() {
            extra.extend(["--target", tomo]);
        }
        ok(&run(&d, &match_args("proj", &extra)), "project");
        let ts = t.tilt_series.clone().unwrap();
        let (kv, cs, q0, sr) = (
            format!("{}", t.voltage_kv),
            format!("{}", t.cs_mm * 1e7),
            format!("{}", t.amplitude_contrast),
            format!("{pv}"),
        );
        let hand = [
            "--target",
            tomo,
            "--tilt-angles",
            &ts,
            "--ctf-file",
            &ts,
            "--tilt-weighting",
            "relion",
            "--acceleration-voltage",
            &kv,
            "--spherical-aberration",
            &cs,
            "--amplitude-contrast",
            &q0,
            "--sampling-rate",
            &sr,
        ];
        ok(&run(&d, &match_args("hand", &hand)), "by hand");
        ok(
            &run(&d, &match_args("none", &["--target", tomo])),
            "no filters",
        );
        let read = |o: &str| std::fs::read(d.join(o).join("scores.npy")).unwrap();
        assert_eq!(read("proj"), read("hand"), "{}: project vs by hand", c.name);
        assert_ne!(read("proj"), read("none"), "the filters change the scores");
        let (p, h) = (run_json(&d.join("proj")), run_json(&d.join("hand")));
        assert_eq!(p["filters"]["wedge"], h["filters"]["wedge"]);
        assert_eq!(p["filters"]["ctf"], h["filters"]["ctf"]);
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// Runs a match on a tutorial copy whose files `edit` changed; expects exit 2 with every
/// `want` in the message, and no output folder.
fn refused(tag: &str, edit: impl Fn(&Path), extra: &[&str], want: &[&str]) {
    let d = project("tutorial", tag);
    inputs(&d, "rec.mrc", (1.35f64 * 7.407407) as f32);
    edit(&d);
    let mut a = vec![
        "--relion5-tomograms-star",
        "Tomograms/job006/tomograms.star",
        "--tomo-name",
        "TS_01",
        "--target",
        "rec.mrc",
    ];
    a.extend(extra);
    let o = run(&d, &match_args("out", &a));
    let e = err(&o);
    assert_eq!(o.status.code(), Some(2), "{tag}: {e}");
    assert_eq!(e.trim().lines().count(), 1, "{tag}: one line: {e}");
    assert!(e.starts_with("error:"), "{tag}: {e}");
    for w in want {
        assert!(e.contains(w), "{tag}: {w:?} not in {e}");
    }
    assert!(!d.join("out").exists(), "{tag}: nothing written");
    let _ = std::fs::remove_dir_all(&d);
}

fn edit_file(d: &Path, rel: &str, f: impl Fn(&str) -> String) {
    let p = d.join(rel);
    let t = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, f(&t)).unwrap();
}

const SET: &str = "Tomograms/job006/tomograms.star";
const TS: &str = "Tomograms/job006/tilt_series/TS_01.star";

#[test]
fn bad_projects_are_refused_naming_the_file_row_and_column() {
    refused(
        "noglobal",
        |d| edit_file(d, SET, |t| t.replace("data_global", "data_tomos")),
        &[],
        &[SET, "no data_global"],
    );
    refused(
        "name",
        |d| edit_file(d, SET, |t| t.replace("     TS_01 ", "     TS_00 ")),
        &[],
        &["TS_01", "TS_00, TS_03, TS_43, TS_45, TS_54"],
    );
    refused(
        "nots",
        |d| std::fs::remove_file(d.join(TS)).unwrap(),
        &[],
        &[
            "Tomograms/job006/tilt_series/TS_01.star (_rlnTomoTiltSeriesStarFile",
            "Tomograms/job006/tilt_series/TS_01.star",
            "line 23",
            "not found",
        ],
    );
    refused(
        "blocks",
        |d| {
            edit_file(d, TS, |t| {
                let other = t.replace("data_TS_01", "data_TS_02");
                format!("{}\n{}", t.replace("data_TS_01", "data_TS_03"), other)
            })
        },
        &[],
        &[TS, "data_TS_03, data_TS_02", "none is data_TS_01"],
    );
    refused(
        "nodose",
        |d| edit_file(d, TS, |t| t.replace("_rlnMicrographPreExposure", "_rlnX")),
        &[],
        &[TS, "no column _rlnMicrographPreExposure"],
    );
    refused(
        "nonnumeric",
        |d| edit_file(d, TS, |t| t.replacen("39527.781250", "39527.78x", 1)),
        &[],
        &[TS, "line 35", "39527.78x"],
    );
    for (tag, b) in [("bin0", "0.000000"), ("binnan", "nan")] {
        refused(
            tag,
            |d| edit_file(d, SET, |t| t.replacen("7.407407", b, 1)),
            &[],
            &[SET, "line 23", "TS_01", "_rlnTomoTomogramBinning"],
        );
    }
    refused(
        "voxel",
        |d| write_mrc(d.join("rec.mrc"), &noise(&[20, 20, 20], 5), [12.0; 3]).unwrap(),
        &[],
        &["rec.mrc", "12", "9.99999945"],
    );
    // Half maps only and no --target.
    let d = project("tutorial", "halves");
    inputs(&d, "rec.mrc", 10.0);
    let o = run(
        &d,
        &match_args(
            "out",
            &["--relion5-tomograms-star", SET, "--tomo-name", "TS_01"],
        ),
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("half maps only") && err(&o).contains("--target"));
    assert!(!d.join("out").exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_block_named_after_the_tomogram_is_taken_and_flags_override_saying_so() {
    let d = project("tutorial", "override");
    inputs(&d, "rec.mrc", (1.35f64 * 7.407407) as f32);
    edit_file(&d, TS, |t| {
        let other = t
            .replace("data_TS_01", "data_TS_02")
            .replace("-56.99850", "-20.0");
        format!("{other}\n{t}")
    });
    let a = [
        "--relion5-tomograms-star",
        SET,
        "--tomo-name",
        "TS_01",
        "--target",
        "rec.mrc",
        "--acceleration-voltage",
        "200",
    ];
    let o = Command::new(BIN)
        .current_dir(&d)
        .args(match_args("out", &a).iter().filter(|x| **x != "-q"))
        .output()
        .unwrap();
    ok(&o, "two blocks");
    // 20³ is not RELION's reconstruction size (540 × 540 × 270): a warning, not an error.
    assert!(
        err(&o).contains("warning") && err(&o).contains("540×540×270"),
        "{}",
        err(&o)
    );
    assert!(
        err(&o).contains("--acceleration-voltage override"),
        "{}",
        err(&o)
    );
    let f = &run_json(&d.join("out"))["filters"];
    assert_eq!(f["metadata"]["tilt_series_block"], "TS_01");
    assert_eq!(f64s(&f["tilt_angles"])[0], -56.9985);
    assert_eq!(f["acceleration_voltage_kv"].as_f64(), Some(200.0));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn warp_xml_is_its_long_form_plus_the_microscope() {
    let refs = reference();
    for x in ["00254.xml", "TS_1.xml"] {
        let d = scratch(&format!("warp-{x}"));
        std::fs::copy(fixtures().join("warp").join(x), d.join(x)).unwrap();
        inputs(&d, "rec.mrc", 10.0);
        ok(
            &run(
                &d,
                &match_args("w", &["--target", "rec.mrc", "--warp-xml", x]),
            ),
            x,
        );
        let long = [
            "--target",
            "rec.mrc",
            "--tilt-angles",
            x,
            "--ctf-file",
            x,
            "--tilt-weighting",
            "relion",
        ];
        ok(&run(&d, &match_args("l", &long)), "long form");
        let read = |o: &str| std::fs::read(d.join(o).join("scores.npy")).unwrap();
        assert_eq!(read("w"), read("l"), "{x}");
        let f = &run_json(&d.join("w"))["filters"];
        let r = &refs["warp"][x];
        let pytme = &r["pytme"]["ctf._from_xml"];
        // Warp's angles as stored (pytme's reading; pytom negates them).
        assert_eq!(f64s(&f["tilt_angles"]), f64s(&r["raw"]["Angles_deg"]));
        assert_eq!(f64s(&f["tilt_angles"]), f64s(&pytme["angles"]));
        assert_eq!(f64s(&f["doses"]), f64s(&r["raw"]["Dose_e_per_A2"]));
        let (df, dd) = (f64s(&pytme["defocus"]), f64s(&pytme["defocus_delta"]));
        let ang = f64s(&pytme["astigmatism_angle"]);
        for (k, row) in f["defocus_per_tilt"].as_array().unwrap().iter().enumerate() {
            let uv = f64s(row);
            assert!((uv[0] - (df[k] + dd[k])).abs() < 1e-6, "{x} tilt {k}");
            assert!((uv[1] - (df[k] - dd[k])).abs() < 1e-6, "{x} tilt {k}");
            assert_eq!(uv[2], ang[k]);
        }
        assert_eq!(f["acceleration_voltage_kv"], pytme["acceleration_voltage"]);
        let cs = pytme["spherical_aberration"].as_f64().unwrap();
        assert!((f["spherical_aberration_angstrom"].as_f64().unwrap() - cs).abs() < 1e-6 * cs);
        assert_eq!(f["amplitude_contrast"], pytme["amplitude_contrast"]);
        assert_eq!(f["metadata"]["file"], x);
        assert_eq!(f["metadata"]["tilt_image_pixel_size"], pytme["pixel_size"]);
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// The tutorial's TS_01 row, as RELION 5 particle geometry.
fn ts01() -> ParticleGeometry {
    let p = fixtures().join("relion5/tutorial").join(SET);
    let set = parse_tomogram_set(&p, &std::fs::read_to_string(&p).unwrap()).unwrap();
    let t = set.tomogram("TS_01").unwrap();
    ParticleGeometry {
        tomo_name: t.name,
        binning: t.binning,
        size: t.size.unwrap(),
        ts_pixel: t.ts_pixel,
        voltage_kv: t.voltage_kv,
        cs_mm: t.cs_mm,
        amplitude_contrast: t.amplitude_contrast,
        optics_group: t.optics_group,
    }
}

/// Centred coordinates of a particle file's data_particles rows.
fn centred(text: &str) -> Vec<[f64; 3]> {
    let b = parse_star(Path::new("p.star"), text).unwrap();
    let (l, _) = b
        .iter()
        .find(|b| b.name == "particles")
        .unwrap()
        .loop_with("_rlnCenteredCoordinateXAngst")
        .unwrap();
    let c = |n: &str| l.column(n).unwrap();
    let (x, y, z) = (
        c("_rlnCenteredCoordinateXAngst"),
        c("_rlnCenteredCoordinateYAngst"),
        c("_rlnCenteredCoordinateZAngst"),
    );
    l.rows
        .iter()
        .map(|(_, r)| [x, y, z].map(|k| r[k].parse().unwrap()))
        .collect()
}

#[test]
fn tutorial_picks_reproduced_by_the_picker_rule_and_read_back_by_the_reader_rule() {
    let base = fixtures().join("relion5/tutorial/Picks/job019");
    let ann = std::fs::read_to_string(base.join("annotations/TS_01_particles.star")).unwrap();
    let b = parse_star(Path::new("a.star"), &ann).unwrap();
    let (l, _) = b[0].loop_with("_rlnCoordinateX").unwrap();
    let col = |n: &str| l.column(n).unwrap();
    let voxels: Vec<Particle> = l
        .rows
        .iter()
        .map(|(_, r)| Particle {
            xyz: ["_rlnCoordinateX", "_rlnCoordinateY", "_rlnCoordinateZ"]
                .map(|c| r[col(c)].parse().unwrap()),
            euler: None,
            score: 1.0,
            template: None,
        })
        .collect();
    assert_eq!(voxels.len(), 1960);
    let geo = ts01();
    let relion = centred(&std::fs::read_to_string(base.join("particles.star")).unwrap());
    assert_eq!(relion.len(), 1960);
    let picker = particles_star(&[(&geo, &voxels)], Centre::Picker, &[]);
    let mine = centred(&picker);
    let worst = mine
        .iter()
        .zip(&relion)
        .flat_map(|(a, b)| (0..3).map(move |k| (a[k] - b[k]).abs()))
        .fold(0.0, f64::max);
    assert!(
        worst < 1e-4,
        "picker rule vs RELION's particles.star: {worst} Å"
    );
    // The reader rule: RELION's C++ reading (c/ps + X/2)/b gives the voxel back.
    let reader = particles_star(&[(&geo, &voxels)], Centre::Reader, &[]);
    let back = read_particles_back(Path::new("r.star"), &reader, &|n: &str| {
        (n == "TS_01").then_some((geo.size, geo.binning))
    })
    .unwrap();
    for (p, v) in back.iter().zip(&voxels) {
        for k in 0..3 {
            assert!(
                (p.voxel[k] - v.xyz[k]).abs() < 1e-9,
                "{:?} vs {:?}",
                p.voxel,
                v.xyz
            );
        }
    }
    // The picker's file read by RELION's rule: 1/b voxel off on each axis (RELION's own
    // inconsistency, reference.json's 0.135).
    let off = read_particles_back(Path::new("p.star"), &picker, &|_: &str| {
        Some((geo.size, geo.binning))
    })
    .unwrap();
    assert!((off[0].voxel[0] - voxels[0].xyz[0] - 1.0 / geo.binning).abs() < 1e-9);
    // The optics table holds the row's values.
    let blocks = parse_star(Path::new("r.star"), &reader).unwrap();
    let o = blocks.iter().find(|b| b.name == "optics").unwrap();
    assert_eq!(o.value("_rlnTomoTiltSeriesPixelSize").unwrap().0, "1.35");
    assert_eq!(o.value("_rlnVoltage").unwrap().0, "300");
    assert_eq!(o.value("_rlnOpticsGroupName").unwrap().0, "optics1");
}

/// A synthetic RELION 5 project: `tomograms.star` (two tomograms, binning 2, TS pixel 5 Å),
/// per-tilt STARs and tomogram MRCs with copies of a template planted at `at` (x, y, z).
fn synthetic(d: &Path, at: &[[usize; 3]]) -> ArrayD<f32> {
    let n = 48;
    let t = 12;
    let mut tmpl = ArrayD::<f32>::zeros(IxDyn(&[t, t, t]));
    for ((z, y, x), v) in tmpl
        .view_mut()
        .into_dimensionality::<ndarray::Ix3>()
        .unwrap()
        .indexed_iter_mut()
    {
        let (fz, fy, fx) = (z as f32 - 5.5, y as f32 - 5.5, x as f32 - 5.5);
        // An asymmetric blob: a bar along x and a knob along +y.
        let bar = (-(fx * fx / 12.0 + fy * fy / 2.0 + fz * fz / 2.0)).exp();
        let knob = (-((fx * fx + (fy - 3.0) * (fy - 3.0) + fz * fz) / 2.0)).exp();
        *v = bar + knob;
    }
    let mut globals = String::new();
    for (k, name) in ["TS_A", "TS_B"].iter().enumerate() {
        let mut vol = noise(&[n, n, n], 20 + k as u64).mapv(|v| 0.3 * v);
        for p in at {
            for ((z, y, x), v) in tmpl
                .view()
                .into_dimensionality::<ndarray::Ix3>()
                .unwrap()
                .indexed_iter()
            {
                let (zz, yy, xx) = (p[2] + z - t / 2, p[1] + y - t / 2, p[0] + x - t / 2);
                vol[[zz, yy, xx]] += *v;
            }
        }
        let map = format!("Tomograms/job001/tomograms/rec_{name}.mrc");
        std::fs::create_dir_all(d.join("Tomograms/job001/tomograms")).unwrap();
        std::fs::create_dir_all(d.join("Tomograms/job001/tilt_series")).unwrap();
        write_mrc(d.join(&map), &vol, [10.0; 3]).unwrap();
        let mut ts = format!(
            "\n# version 50001\n\ndata_{name}\n\nloop_\n_rlnTomoNominalStageTiltAngle #1\n\
             _rlnTomoYTilt #2\n_rlnMicrographPreExposure #3\n_rlnDefocusU #4\n_rlnDefocusV #5\n\
             _rlnDefocusAngle #6\n"
        );
        for (i, a) in [-45.0, -30.0, -15.0, 0.0, 15.0, 30.0, 45.0]
            .iter()
            .enumerate()
        {
            ts.push_str(&format!(
                "{a} {a} {} {} {} 10.0\n",
                3.0 * i as f64,
                30000.0 + 100.0 * i as f64,
                29800.0 + 100.0 * i as f64
            ));
        }
        std::fs::write(
            d.join(format!("Tomograms/job001/tilt_series/{name}.star")),
            ts,
        )
        .unwrap();
        globals.push_str(&format!(
            "{name} 300.0 2.7 0.1 5.0 Tomograms/job001/tilt_series/{name}.star 2.0 {} {} {} {map}\n",
            2 * n,
            2 * n,
            2 * n
        ));
    }
    let set = format!(
        "\n# version 50001\n\ndata_global\n\nloop_\n_rlnTomoName #1\n_rlnVoltage #2\n\
         _rlnSphericalAberration #3\n_rlnAmplitudeContrast #4\n_rlnTomoTiltSeriesPixelSize #5\n\
         _rlnTomoTiltSeriesStarFile #6\n_rlnTomoTomogramBinning #7\n_rlnTomoSizeX #8\n\
         _rlnTomoSizeY #9\n_rlnTomoSizeZ #10\n_rlnTomoReconstructedTomogram #11\n{globals}"
    );
    std::fs::write(d.join("Tomograms/job001/tomograms.star"), set).unwrap();
    let mut mrc_t = tmpl.clone();
    mrc_t.mapv_inplace(|v| v);
    write_mrc(d.join("tmpl.mrc"), &mrc_t, [10.0; 3]).unwrap();
    tmpl
}

#[test]
fn planted_particles_through_a_synthetic_project_read_back_to_their_voxels() {
    let d = scratch("planted");
    let at = [[14usize, 15, 16], [32, 30, 24], [20, 34, 33]];
    synthetic(&d, &at);
    let set = "Tomograms/job001/tomograms.star";
    let a = [
        "match",
        "--relion5-tomograms-star",
        set,
        "--tomo-name",
        "TS_A",
        "--template",
        "tmpl.mrc",
        "--angular-step",
        "90",
        "--out",
        "m",
        "-q",
    ];
    ok(&run(&d, &a), "match");
    let f = &run_json(&d.join("m"))["filters"];
    assert_eq!(f["metadata"]["tomo_name"], "TS_A");
    assert_eq!(f64s(&f["tilt_angles"]).len(), 7);
    let p = [
        "peaks",
        "--scores",
        "m/scores.npy",
        "--rotation-index",
        "m/rotation_index.npy",
        "--rotations",
        "m/rotations.npy",
        "--num-peaks",
        "3",
        "--min-distance",
        "6",
        "--out",
        "p.star",
        "--star-format",
        "relion5",
        "--relion5-tomograms-star",
        set,
        "--tomo-name",
        "TS_A",
        "-q",
    ];
    ok(&run(&d, &p), "peaks");
    let text = std::fs::read_to_string(d.join("p.star")).unwrap();
    assert!(text.contains("c = (i*b - X/2)*ps"), "{text}");
    let back = read_particles_back(Path::new("p.star"), &text, &|n: &str| {
        (n == "TS_A").then_some(([96.0; 3], 2.0))
    })
    .unwrap();
    let mut got: Vec<[usize; 3]> = back
        .iter()
        .map(|p| {
            p.voxel.map(|v| {
                assert!((v - v.round()).abs() < 1e-9, "{v}");
                v.round() as usize
            })
        })
        .collect();
    got.sort();
    let mut want = at.to_vec();
    want.sort();
    assert_eq!(got, want, "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_tomograms_star_list_matches_each_tomogram_with_its_own_metadata() {
    let d = scratch("list");
    let at = [[14usize, 15, 16], [32, 30, 24]];
    synthetic(&d, &at);
    let set = "Tomograms/job001/tomograms.star";
    // TS_B's tilt series differs from TS_A's: its own filters.
    edit_file(&d, "Tomograms/job001/tilt_series/TS_B.star", |t| {
        t.replace("-45 -45", "-60 -60")
    });
    let a = [
        "match",
        "--target-list",
        set,
        "--template",
        "tmpl.mrc",
        "--angular-step",
        "90",
        "--out",
        "l",
        "--peaks",
        "--num-peaks",
        "2",
        "--star-format",
        "relion5",
        "-q",
    ];
    ok(&run(&d, &a), "list");
    let (fa, fb) = (
        run_json(&d.join("l/rec_TS_A"))["filters"].clone(),
        run_json(&d.join("l/rec_TS_B"))["filters"].clone(),
    );
    assert_eq!(fa["metadata"]["tomo_name"], "TS_A");
    assert_eq!(fb["metadata"]["tomo_name"], "TS_B");
    assert_eq!(f64s(&fa["tilt_angles"])[0], -45.0);
    assert_eq!(f64s(&fb["tilt_angles"])[0], -60.0);
    // The same item run alone gives the same bytes.
    let one = [
        "match",
        "--relion5-tomograms-star",
        set,
        "--tomo-name",
        "TS_B",
        "--template",
        "tmpl.mrc",
        "--angular-step",
        "90",
        "--out",
        "b",
        "-q",
    ];
    ok(&run(&d, &one), "TS_B alone");
    assert_eq!(
        std::fs::read(d.join("b/scores.npy")).unwrap(),
        std::fs::read(d.join("l/rec_TS_B/scores.npy")).unwrap()
    );
    let text = std::fs::read_to_string(d.join("l/particles.star")).unwrap();
    let back = read_particles_back(Path::new("l.star"), &text, &|_: &str| {
        Some(([96.0; 3], 2.0))
    })
    .unwrap();
    assert_eq!(back.len(), 4);
    assert_eq!(back.iter().filter(|p| p.tomo_name == "TS_B").count(), 2);
    // --no-tomogram-metadata: today's list (the filters flags alone).
    ok(
        &run(
            &d,
            &[&a[..7], &["--out", "n", "--no-tomogram-metadata", "-q"]].concat(),
        ),
        "no metadata",
    );
    assert!(run_json(&d.join("n/rec_TS_A"))["filters"]["metadata"].is_null());
    // A missing tomogram: exit 2 before any work, naming the row and the tomogram.
    std::fs::remove_file(d.join("Tomograms/job001/tomograms/rec_TS_B.mrc")).unwrap();
    let o = run(&d, &[&a[..7], &["--out", "x"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("line 19") && e.contains("TS_B") && e.contains("rec_TS_B.mrc"),
        "{e}"
    );
    assert!(!d.join("x").exists());
    let _ = std::fs::remove_dir_all(&d);
}

/// The tutorial's Denoise job (`Denoise/job008/tomograms.star`, the third RELION 5 file of the
/// shared fixtures): its rows hold only the denoised map and half maps, and its per-tilt STAR
/// path points into the Denoise job, where RELION's tutorial has no file. The target is the
/// denoised map; the per-tilt STAR missing from both places is refused naming both; once the
/// tilt series is there (the same TS_01 as the reconstruction job's), the values equal
/// `reference.json`'s for that file.
#[test]
fn a_denoise_job_reads_the_denoised_map_and_names_both_places_for_its_tilt_series() {
    let refs = reference();
    let star = "Denoise/job008/tomograms.star";
    let r = &refs["relion5"][format!("relion5/tutorial/{star}")]["tomograms"]["TS_01"];
    let pv = r["derived"]["tomogram_voxel_size_A (ps*binning)"]
        .as_f64()
        .unwrap();
    let d = project("tutorial", "denoise");
    let map = "Denoise/job008/tomograms/rec_TS_01.mrc";
    inputs(&d, map, pv as f32);
    let base = ["--relion5-tomograms-star", star, "--tomo-name", "TS_01"];

    let o = run(&d, &match_args("o_missing", &base));
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    let written = r["tilt_series_star"]["as_written"].as_str().unwrap();
    assert!(e.contains(written), "names the path as written: {e}");
    assert!(
        e.contains("Denoise/job008/tilt_series/TS_01.star") && e.contains("TS_01"),
        "{e}"
    );
    assert!(!d.join("o_missing").exists(), "nothing written");

    let ts = d.join("Denoise/job008/tilt_series");
    std::fs::create_dir_all(&ts).unwrap();
    std::fs::copy(
        d.join("Tomograms/job006/tilt_series/TS_01.star"),
        ts.join("TS_01.star"),
    )
    .unwrap();
    let o = run(&d, &match_args("o", &base));
    ok(&o, "denoise");
    let j = run_json(&d.join("o"));
    let f = &j["filters"];
    assert_eq!(f["voxel_size"].as_f64().unwrap(), pv);
    assert_eq!(f["metadata"]["file"], star);
    assert_eq!(f["metadata"]["tilt_series_file"], written);
    let g = &r["global_row"];
    assert_eq!(f["acceleration_voltage_kv"], g["rlnVoltage"]);
    assert_eq!(f["amplitude_contrast"], g["rlnAmplitudeContrast"]);
    assert!(
        j.to_string().contains("rec_TS_01.mrc"),
        "the denoised map is the target: {j}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
