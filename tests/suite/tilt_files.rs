//! The tilt-series files users bring (Warp/M XML, SerialEM mdoc, stopgap wedge lists, RELION 5
//! tilt-series STAR, AreTomo3 CTF output) read as pytme 0.3.6 reads them
//! (`tests/fixtures/tilt-files/pytme.json`, made by `reference.py` there), and the documented
//! differences.

use std::path::{Path, PathBuf};

use monomorph::io::tilt::{
    CtfFile, parse_ctf_star, parse_mdoc, parse_warp_xml, read_ctf_file, read_tilt_angles,
};

use crate::common::{fixture, json};

fn file(name: &str) -> PathBuf {
    fixture(&format!("tilt-files/{name}"))
}

fn nums(v: &serde_json::Value) -> Vec<f64> {
    match v {
        serde_json::Value::Array(a) => a.iter().map(|x| x.as_f64().unwrap()).collect(),
        serde_json::Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("not numbers: {other}"),
    }
}

fn close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= 1e-9 * y.abs().max(1.0),
            "{what}: {a:?} vs {b:?}"
        );
    }
}

#[test]
fn tilt_angles_and_doses_equal_pytmes() {
    let p = json("tilt-files/pytme.json");
    for f in [
        "TS_01.xml",
        "TS_01.mdoc",
        "stopgap_wedgelist.star",
        "TS_01_relion5.star",
    ] {
        let want = &p[format!("tilt:{f}")];
        let t = read_tilt_angles(file(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        close(&t.angles, &nums(&want["angles"]), &format!("{f} angles"));
        close(
            t.doses.as_deref().expect("doses"),
            &nums(&want["weights"]),
            &format!("{f} doses"),
        );
    }
}

/// One value per tilt: pytme gives a list, a scalar, or None (= 0 here).
fn per_tilt(v: &serde_json::Value, n: usize) -> Vec<f64> {
    match v {
        serde_json::Value::Null => vec![0.0; n],
        serde_json::Value::Number(x) => vec![x.as_f64().unwrap(); n],
        other => nums(other),
    }
}

/// The first value of a microscope parameter pytme read (a scalar or a per-row list).
fn first(v: &serde_json::Value) -> Option<f64> {
    (!v.is_null()).then(|| nums(v)[0])
}

fn check_ctf(c: &CtfFile, want: &serde_json::Value, f: &str) {
    let n = c.tilts.len();
    let get = |k: fn(&monomorph::algo::filters::TiltCtf) -> f64| -> Vec<f64> {
        c.tilts.iter().map(k).collect()
    };
    close(
        &get(|t| t.defocus),
        &nums(&want["defocus"]),
        &format!("{f} defocus"),
    );
    close(
        &get(|t| t.defocus_delta),
        &per_tilt(&want["defocus_delta"], n),
        &format!("{f} delta"),
    );
    close(
        &get(|t| t.astigmatism_angle),
        &per_tilt(&want["astigmatism_angle"], n),
        &format!("{f} azimuth"),
    );
    // pytme holds the phase shift in degrees here; monomorph in radians.
    let ps: Vec<f64> = per_tilt(&want["additional_phase_shift"], n)
        .iter()
        .map(|d| d.to_radians())
        .collect();
    close(&get(|t| t.phase_shift), &ps, &format!("{f} phase"));
    assert_eq!(
        c.voltage_kv,
        first(&want["acceleration_voltage"]),
        "{f} voltage"
    );
    assert_eq!(c.cs, first(&want["spherical_aberration"]), "{f} Cs");
    assert_eq!(
        c.amplitude_contrast,
        first(&want["amplitude_contrast"]),
        "{f} amplitude"
    );
    assert_eq!(c.pixel_size, first(&want["pixel_size"]), "{f} pixel size");
    match &want.get("angles") {
        Some(a) if !a.is_null() => close(c.angles.as_deref().expect("angles"), &nums(a), f),
        _ => assert_eq!(c.angles, None, "{f} angles"),
    }
}

#[test]
fn ctf_files_equal_pytmes() {
    let p = json("tilt-files/pytme.json");
    for f in [
        "TS_01.xml",
        "stopgap_wedgelist.star",
        "TS_01_relion5.star",
        "TS_01_CTF.txt",
    ] {
        let c = read_ctf_file(file(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        check_ctf(&c, &p[format!("ctf:{f}")], f);
    }
}

#[test]
fn mdoc_ctf_which_pytme_cannot_read() {
    // pytme 0.3.6 fails on this file (it negates a Python list); SerialEM's Defocus is in µm,
    // negative for underfocus.
    let p = json("tilt-files/pytme.json");
    assert!(p["ctf:TS_01.mdoc"]["pytme_error"].is_string());
    let c = read_ctf_file(file("TS_01.mdoc")).unwrap();
    let df: Vec<f64> = c.tilts.iter().map(|t| t.defocus).collect();
    close(&df, &[30500.0, 31000.0, 31500.0], "mdoc defocus");
    assert_eq!(c.voltage_kv, Some(300.0));
    assert_eq!(c.pixel_size, Some(1.7));
    close(
        c.angles.as_deref().unwrap(),
        &[0.0012, 3.0007, -2.9995],
        "mdoc angles",
    );
}

fn xml(use_tilt: &str, phase: &str) -> String {
    format!(
        "<TiltSeries><Angles>-3\n0\n3</Angles><Dose>3\n0\n6</Dose><UseTilt>{use_tilt}</UseTilt>\
         <CTF><Param Name=\"Voltage\" Value=\"200\"/><Param Name=\"Cs\" Value=\"2.7\"/></CTF>\
         <GridCTF><Node X=\"0\" Y=\"0\" Z=\"0\" Value=\"3\"/><Node X=\"0\" Y=\"0\" Z=\"1\" Value=\"3.1\"/>\
         <Node X=\"0\" Y=\"0\" Z=\"2\" Value=\"3.2\"/></GridCTF>\
         <GridCTFPhase><Node X=\"0\" Y=\"0\" Z=\"0\" Value=\"{phase}\"/><Node X=\"0\" Y=\"0\" Z=\"1\" Value=\"{phase}\"/>\
         <Node X=\"0\" Y=\"0\" Z=\"2\" Value=\"{phase}\"/></GridCTFPhase></TiltSeries>"
    )
}

#[test]
fn warp_excluded_tilts_are_dropped_and_phase_is_in_units_of_pi() {
    let p = Path::new("ts.xml");
    let w = parse_warp_xml(p, &xml("True\nFalse\nTrue", "0.5")).unwrap();
    assert_eq!(w.angles, [-3.0, 3.0]);
    assert_eq!(w.doses, Some(vec![3.0, 6.0]));
    let c = w.ctf(p).unwrap();
    let df: Vec<f64> = c.tilts.iter().map(|t| t.defocus).collect();
    close(&df, &[30000.0, 32000.0], "kept tilts' defocus");
    for t in &c.tilts {
        assert!(
            (t.phase_shift - std::f64::consts::FRAC_PI_2).abs() < 1e-12,
            "{t:?}"
        );
    }
    assert_eq!(c.voltage_kv, Some(200.0));
    assert_eq!(c.angles, Some(vec![-3.0, 3.0]));
}

#[test]
fn broken_files_are_one_line_errors_naming_the_file() {
    let p = Path::new("ts.xml");
    let cases: Vec<(String, &str)> =
        vec![
        (
            parse_warp_xml(p, "<TiltSeries><Angles>1 2</Angles>").unwrap_err().to_string(),
            "not a readable XML",
        ),
        (
            parse_warp_xml(p, "<TiltSeries><Dose>1</Dose></TiltSeries>").unwrap_err().to_string(),
            "no <Angles>",
        ),
        (
            parse_warp_xml(p, "<TiltSeries><Angles>1 2</Angles><Dose>1</Dose></TiltSeries>")
                .unwrap_err()
                .to_string(),
            "<Dose> has 1 values for 2",
        ),
        (
            parse_warp_xml(p, &xml("True\nYes\nTrue", "0")).unwrap_err().to_string(),
            "UseTilt value 'Yes'",
        ),
        (
            parse_mdoc(Path::new("a.mdoc"), "PixelSpacing = 1\n").unwrap_err().to_string(),
            "no [ZValue",
        ),
        (
            parse_mdoc(Path::new("a.mdoc"), "[ZValue = 0]\nTiltAngle = 1\n[ZValue = 1]\nX = 2\n")
                .unwrap()
                .tilt_angles(Path::new("a.mdoc"))
                .unwrap_err()
                .to_string(),
            "line 3: section [ZValue = 1] has no TiltAngle",
        ),
        (
            parse_ctf_star(
                Path::new("w.star"),
                "data_stopgap_wedgelist\nloop_\n_tomo_num\n_tilt_angle\n_defocus\n1 0 3\n2 0 3\n",
            )
            .unwrap_err()
            .to_string(),
            "several tomograms (_tomo_num 1, 2)",
        ),
    ];
    for (e, want) in cases {
        assert!(e.contains(want), "{e:?} lacks {want:?}");
        assert!(!e.contains('\n'), "{e:?}");
    }
    let e = read_tilt_angles(file("TS_01_CTF.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("TS_01_CTF.txt"), "{e}");
}

fn monomorph(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_monomorph"))
        .args(args)
        .output()
        .expect("run monomorph")
}

#[test]
fn one_warp_xml_gives_both_the_tilt_series_and_its_ctf() {
    let dir = std::env::temp_dir().join(format!("monomorph-tiltfiles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let t = ndarray::Array3::<f32>::from_shape_fn((20, 20, 20), |(z, y, x)| {
        ((z * 7 + y * 3 + x) % 11) as f32
    });
    let m = ndarray::Array3::<f32>::from_shape_fn((9, 9, 9), |(z, y, x)| ((z + y + x) % 4) as f32);
    let (tp, mp) = (dir.join("t.npy"), dir.join("m.npy"));
    monomorph::io::write_npy(&tp, &t.into_dyn()).unwrap();
    monomorph::io::write_npy(&mp, &m.into_dyn()).unwrap();
    let (xml, star) = (file("TS_01.xml"), file("stopgap_wedgelist.star"));
    let s = |p: &Path| p.display().to_string();
    let out = s(&dir.join("out"));
    let base = [
        "match",
        "--target",
        &s(&tp),
        "--template",
        &s(&mp),
        "--score",
        "cc",
        "-a",
        "90",
        "--sampling-rate",
        "1.7",
        "--out",
        &out,
    ];
    let run = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        monomorph(&a)
    };
    let ok = run(&["--tilt-angles", &s(&xml), "--ctf-file", &s(&xml)]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let bad = run(&["--tilt-angles", &s(&xml), "--ctf-file", &s(&star)]);
    assert_eq!(bad.status.code(), Some(2));
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(
        e.contains("--ctf-file") && e.contains("has 3 tilts") && e.contains("has 4"),
        "{e}"
    );
    let bad = run(&["--ctf-file", &s(&xml)]);
    assert_eq!(bad.status.code(), Some(2));
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(e.contains("pass it as --tilt-angles"), "{e}");
}
