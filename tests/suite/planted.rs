//! A tomogram seen through a missing wedge and a CTF: nine copies of a real density map
//! (EMD-8249's, `tests/fixtures/planted/`) planted at known centres and rotations, imaged with
//! a ±60° continuous wedge and an uncorrected 3 µm CTF, buried in noise. Matching with the
//! filters that describe that imaging (`--tilt-angles 60,60 --defocus 30000 --ctf-correction
//! raw`) must find every copy at its centre with its rotation; without them fewer are found
//! (the recall of both is printed). The data and the imaging model: `planted/reference.py`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{fixture, json};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-planted-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn run(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_monomorph"))
        .args(args)
        .output()
        .expect("run monomorph");
    assert!(
        out.status.success(),
        "monomorph {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (centre found within one voxel, and with the planted rotation) out of the planted copies,
/// from the 9 best peaks of `monomorph peaks` on a `match` run with `filters`.
fn recall(dir: &Path, filters: &[&str]) -> (usize, usize) {
    let f = |n: &str| fixture(&format!("planted/{n}")).display().to_string();
    let o = |n: &str| dir.join(n).display().to_string();
    let (target, template, mask, rotations) = (
        f("target.mrc"),
        f("template.mrc"),
        f("mask.mrc"),
        f("rotations.npy"),
    );
    let out = o("run");
    let mut args = vec![
        "match",
        "--target",
        &target,
        "--template",
        &template,
        "--template-mask",
        &mask,
        "--rotations",
        &rotations,
        "--score",
        "flc",
        "--out",
        &out,
    ];
    args.extend_from_slice(filters);
    run(&args);
    let (s, ri, r, csv) = (
        o("run/scores.npy"),
        o("run/rotation_index.npy"),
        o("run/rotations.npy"),
        o("peaks.csv"),
    );
    run(&[
        "peaks",
        "--scores",
        &s,
        "--rotation-index",
        &ri,
        "--rotations",
        &r,
        "--min-distance",
        "8",
        "--exclude-border",
        "0",
        "--num-peaks",
        "9",
        "--out",
        &csv,
    ]);
    let text = std::fs::read_to_string(&csv).expect("peaks.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (cz, cy, cx, cr) = (col("z"), col("y"), col("x"), col("rotation"));
    let peaks: Vec<([i64; 3], i64)> = lines
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            let n = |i: usize| v[i].parse::<f64>().expect("number").round() as i64;
            ([n(cz), n(cy), n(cx)], n(cr))
        })
        .collect();
    let meta = json("planted/planted.json");
    let planted = meta["planted"].as_array().expect("planted");
    let (mut at, mut with_rotation) = (0, 0);
    for p in planted {
        let zyx: Vec<i64> = p["zyx"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let rot = p["rotation_index"].as_i64().unwrap();
        if let Some((_, r)) = peaks
            .iter()
            .find(|(q, _)| (0..3).all(|k| (q[k] - zyx[k]).abs() <= 1))
        {
            at += 1;
            with_rotation += usize::from(*r == rot);
        }
    }
    assert_eq!(planted.len(), 9);
    (at, with_rotation)
}

#[test]
fn wedge_and_ctf_filters_find_every_planted_copy_and_raise_the_recall() {
    let dir = scratch("recall");
    let meta = json("planted/planted.json");
    let flags: Vec<String> = meta["monomorph_filter_flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let filtered = recall(&dir.join("filtered"), &flags);
    let plain = recall(&dir.join("plain"), &[]);
    eprintln!(
        "planted copies found (centre, centre + rotation) of 9: with the filters {filtered:?}, without {plain:?}"
    );
    assert_eq!(filtered, (9, 9), "with the wedge and CTF filters");
    assert!(
        plain.1 < filtered.1,
        "without the filters as many copies were found ({plain:?}): the test no longer shows the filters' effect"
    );
}
