//! Several templates in one pass (`match --template A --template B`) and the handedness check
//! (`match --check-hand N`).
//!
//! * One pass equals the per-voxel maximum of separate runs bit for bit (scores, template and
//!   rotation indices; ties to the lower template, a duplicated template making every voxel a
//!   tie), untiled and tiled, 3-D FLC with a mask per template and 2-D CC with one mask, and
//!   so through `--devices` (parts merged in any order), `--target-list` and MPI ranks (when
//!   an MPI binary is there); the library's parts, merged in reverse order, give the same.
//! * Peaks carry the template (`_rlnClassNumber` = index + 1).
//! * A planted chiral particle: `--check-hand` names "original" for its template and
//!   "mirrored" for the template of the other hand.
//! * Bad input: exit 2 naming the flag, nothing written.

use std::path::Path;
use std::process::{Command, Output};

use monomorph::HostArray;
use monomorph::work::{Control, ExtraTemplate, MatchJob, Part, Plan, Serial};
use ndarray::{ArrayD, Dimension, IxDyn};

use crate::mpi::{mpi_or_skip, mpirun, noise, read, run_json, save, scratch};

const BIN: &str = env!("CARGO_BIN_EXE_monomorph");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("-q")
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

fn f32s(p: &Path) -> ArrayD<f32> {
    ndarray_npy::read_npy(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn i32s(p: &Path) -> ArrayD<i32> {
    ndarray_npy::read_npy(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A ball mask of radius `r` in a box of `n` per axis.
fn ball(d: usize, n: usize, r: f32) -> ArrayD<f32> {
    let c = (n as f32 - 1.0) / 2.0;
    ArrayD::from_shape_fn(IxDyn(&vec![n; d]), |i| {
        let r2: f32 = (0..d).map(|k| (i[k] as f32 - c).powi(2)).sum();
        if r2 <= r * r { 1.0 } else { 0.0 }
    })
}

/// Adds `amp · t` into `a` with its corner at `at`.
fn plant(a: &mut ArrayD<f32>, t: &ArrayD<f32>, at: &[usize], amp: f32) {
    for (i, v) in t.indexed_iter() {
        let p: Vec<usize> = i.slice().iter().zip(at).map(|(x, o)| x + o).collect();
        a[IxDyn(&p)] += amp * v;
    }
}

/// The maps of separate runs, combined by the rule: the greatest score, ties to the lower
/// template (strict `>` in template order).
fn expected(runs: &[&Path]) -> (Vec<u32>, Vec<i32>, Vec<i32>) {
    let s: Vec<ArrayD<f32>> = runs.iter().map(|d| f32s(&d.join("scores.npy"))).collect();
    let r: Vec<ArrayD<i32>> = runs
        .iter()
        .map(|d| i32s(&d.join("rotation_index.npy")))
        .collect();
    let n = s[0].len();
    let (mut bits, mut ti, mut ri) = (Vec::new(), Vec::new(), Vec::new());
    for v in 0..n {
        let mut best = 0;
        for t in 1..runs.len() {
            if s[t].as_slice().unwrap()[v] > s[best].as_slice().unwrap()[v] {
                best = t;
            }
        }
        bits.push(s[best].as_slice().unwrap()[v].to_bits());
        ti.push(best as i32);
        ri.push(r[best].as_slice().unwrap()[v]);
    }
    (bits, ti, ri)
}

fn maps_of(dir: &Path) -> (Vec<u32>, Vec<i32>, Vec<i32>) {
    (
        f32s(&dir.join("scores.npy"))
            .iter()
            .map(|v| v.to_bits())
            .collect(),
        i32s(&dir.join("template_index.npy"))
            .into_raw_vec_and_offset()
            .0,
        i32s(&dir.join("rotation_index.npy"))
            .into_raw_vec_and_offset()
            .0,
    )
}

/// (name, target, templates, masks, other flags) of each case. Template 2 is template 0
/// again: where they win, every voxel is a tie that the lower template must take.
#[allow(clippy::type_complexity)]
fn cases(
    dir: &Path,
) -> Vec<(
    &'static str,
    String,
    Vec<String>,
    Vec<String>,
    Vec<&'static str>,
)> {
    let (a3, b3) = (noise(&[7, 7, 7], 11), noise(&[7, 7, 7], 12));
    let mut t3 = noise(&[26, 24, 22], 13);
    plant(&mut t3, &a3, &[3, 3, 3], 2.0);
    plant(&mut t3, &b3, &[14, 13, 11], 2.0);
    let t3 = save(dir, "t3.npy", &t3);
    let p3 = vec![
        save(dir, "a3.npy", &a3),
        save(dir, "b3.npy", &b3),
        save(dir, "a3-again.npy", &a3),
    ];
    let m3 = vec![
        save(dir, "ma3.npy", &ball(3, 7, 3.0)),
        save(dir, "mb3.npy", &ball(3, 7, 2.5)),
        save(dir, "ma3-again.npy", &ball(3, 7, 3.0)),
    ];
    let (a2, b2) = (noise(&[9, 9], 21), noise(&[9, 9], 22));
    let mut t2 = noise(&[40, 36], 23);
    plant(&mut t2, &b2, &[20, 4], 2.0);
    let t2 = save(dir, "t2.npy", &t2);
    let p2 = vec![
        save(dir, "a2.npy", &a2),
        save(dir, "b2.npy", &b2),
        save(dir, "a2-again.npy", &a2),
    ];
    let m2 = vec![save(dir, "m2.npy", &ball(2, 9, 4.0))];
    vec![
        (
            "flc3",
            t3.clone(),
            p3.clone(),
            m3.clone(),
            vec!["-s", "flc", "-a", "60"],
        ),
        (
            "flc3-tiled",
            t3,
            p3,
            m3,
            vec!["-s", "flc", "-a", "60", "--memory-limit", "400K"],
        ),
        ("cc2", t2, p2, m2, vec!["-s", "cc", "-a", "40"]),
    ]
}

fn args<'a>(
    target: &'a str,
    templates: &'a [String],
    masks: &'a [String],
    flags: &[&'a str],
    out: &'a str,
) -> Vec<&'a str> {
    let mut a = vec!["match", "--target", target, "--out", out];
    for t in templates {
        a.extend(["--template", t]);
    }
    for m in masks {
        a.extend(["--template-mask", m]);
    }
    a.extend(flags);
    a
}

#[test]
fn one_pass_is_the_per_voxel_max_of_separate_runs_bit_for_bit() {
    let dir = scratch("multi-same");
    for (name, target, templates, masks, flags) in cases(&dir) {
        // Separate runs, each with its own mask (or the one for all).
        let mut alone = Vec::new();
        for (k, t) in templates.iter().enumerate() {
            let out = dir.join(format!("{name}-alone{k}"));
            let m: Vec<String> = masks
                .get(k)
                .or(masks.first())
                .cloned()
                .into_iter()
                .collect();
            let o = run(&args(
                &target,
                std::slice::from_ref(t),
                &m,
                &flags,
                out.to_str().unwrap(),
            ));
            ok(&o, &format!("{name}: template {k} alone"));
            alone.push(out);
        }
        let want = expected(&alone.iter().map(|p| p.as_path()).collect::<Vec<_>>());
        assert!(want.1.contains(&1), "{name}: template 1 never wins");
        let one = dir.join(format!("{name}-one"));
        let o = run(&args(
            &target,
            &templates,
            &masks,
            &flags,
            one.to_str().unwrap(),
        ));
        ok(&o, name);
        let got = maps_of(&one);
        assert!(
            got.0 == want.0,
            "{name}: scores differ from the separate runs' maximum"
        );
        assert!(got.1 == want.1, "{name}: template index differs");
        assert!(got.2 == want.2, "{name}: rotation index differs");
        let info = run_json(&one);
        assert_eq!(info["templates"].as_array().unwrap().len(), 3, "{info}");
        assert_eq!(info["templates"][1].as_str(), Some(templates[1].as_str()));
        if name.ends_with("tiled") {
            assert!(info["tiles"].as_u64() > Some(1), "{name}: not tiled");
        }
        // Device threads (parts merged as they finish) and a list: the same bytes.
        let dev = dir.join(format!("{name}-devices"));
        let mut a = args(&target, &templates, &masks, &flags, dev.to_str().unwrap());
        a.extend(["--backend", "cpu", "--devices", "1,0"]);
        let o = Command::new(BIN)
            .args(&a)
            .arg("-q")
            .env("RAYON_NUM_THREADS", "2")
            .output()
            .expect("spawn");
        ok(&o, &format!("{name} --devices"));
        let list = dir.join(format!("{name}.txt"));
        std::fs::write(&list, format!("{target}\n")).unwrap();
        let lo = dir.join(format!("{name}-list"));
        let mut a = args("", &templates, &masks, &flags, lo.to_str().unwrap());
        a.drain(1..3);
        a.extend(["--target-list", list.to_str().unwrap()]);
        ok(&run(&a), &format!("{name} --target-list"));
        let stem = Path::new(&target).file_stem().unwrap().to_owned();
        for other in [dev, lo.join(stem)] {
            for f in ["scores.npy", "template_index.npy", "rotation_index.npy"] {
                assert!(
                    read(&one.join(f)) == read(&other.join(f)),
                    "{name}: {f} of {} differs from one pass",
                    other.display()
                );
            }
        }
        // Peaks carry the template as RELION's class (index + 1).
        let star = dir.join(format!("{name}.star"));
        let o = run(&[
            "peaks",
            "--scores",
            one.join("scores.npy").to_str().unwrap(),
            "--rotation-index",
            one.join("rotation_index.npy").to_str().unwrap(),
            "--rotations",
            one.join("rotations.npy").to_str().unwrap(),
            "--num-peaks",
            "5",
            "--min-distance",
            "3",
            "--out",
            star.to_str().unwrap(),
        ]);
        ok(&o, &format!("{name} peaks"));
        check_classes(&star, f32s(&one.join("scores.npy")).ndim(), &got.1, &one);
    }
}

/// Every STAR row's `_rlnClassNumber` is the template index + 1 at its voxel.
fn check_classes(star: &Path, ndim: usize, ti: &[i32], run: &Path) {
    let text = std::fs::read_to_string(star).unwrap();
    let cols: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("_rln"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let class = cols.iter().position(|c| *c == "_rlnClassNumber");
    let class = class.unwrap_or_else(|| panic!("no _rlnClassNumber: {text}"));
    let shape = f32s(&run.join("scores.npy")).shape().to_vec();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() == cols.len() && f[0].parse::<f64>().is_ok())
        .collect();
    assert!(!rows.is_empty(), "{text}");
    for f in rows {
        // _rlnCoordinateX, Y[, Z]: array axes reversed.
        let xyz: Vec<usize> = (0..ndim).map(|k| f[k].parse().unwrap()).collect();
        let idx: Vec<usize> = xyz.iter().rev().copied().collect();
        let mut lin = 0;
        for (k, &i) in idx.iter().enumerate() {
            lin = lin * shape[k] + i;
        }
        assert_eq!(f[class].parse::<i32>().unwrap(), ti[lin] + 1, "{f:?}");
    }
}

#[test]
fn mpi_ranks_keep_the_tie_rule_across_templates() {
    let Some(bin) = mpi_or_skip() else { return };
    let dir = scratch("multi-mpi");
    for (name, target, templates, masks, flags) in cases(&dir) {
        let one = dir.join(format!("{name}-one"));
        ok(
            &run(&args(
                &target,
                &templates,
                &masks,
                &flags,
                one.to_str().unwrap(),
            )),
            name,
        );
        for n in [2, 3] {
            let out = dir.join(format!("{name}-mpi{n}"));
            let o = mpirun()
                .args(["-n", &n.to_string(), "-q", "--timeout", "120"])
                .arg(&bin)
                .args(args(
                    &target,
                    &templates,
                    &masks,
                    &flags,
                    out.to_str().unwrap(),
                ))
                .arg("-q")
                .output()
                .expect("spawn mpirun");
            ok(&o, &format!("{name}, {n} ranks"));
            for f in ["scores.npy", "template_index.npy", "rotation_index.npy"] {
                assert!(
                    read(&one.join(f)) == read(&out.join(f)),
                    "{name}, {n} ranks: {f} differs from one process"
                );
            }
            assert_eq!(run_json(&out)["ssum"], run_json(&one)["ssum"], "{name}");
        }
    }
}

#[test]
fn library_parts_merged_in_any_order_give_the_one_pass() {
    use monomorph::prelude::*;
    let (a, b) = (noise(&[6, 6, 6], 31), noise(&[6, 6, 6], 32));
    let mut t = noise(&[20, 18, 16], 33);
    plant(&mut t, &b, &[8, 8, 6], 2.0);
    let mut job = MatchJob::new(
        HostArray::F32(t),
        HostArray::F32(a.clone()),
        Score::FLC,
        RotationSet::uniform(3, 60.0).unwrap(),
    );
    job.template_mask = Some(HostArray::F32(ball(3, 6, 2.5)));
    job.more_templates = vec![
        ExtraTemplate {
            template: HostArray::F32(b),
            mask: Some(HostArray::F32(ball(3, 6, 2.0))),
        },
        ExtraTemplate {
            template: HostArray::F32(a),
            mask: Some(HostArray::F32(ball(3, 6, 2.5))),
        },
    ];
    let nrot = job.rotations.len();
    let jobs = vec![std::sync::Arc::new(job.clone())];
    let b = Cpu::<Single>::new();
    let whole = {
        let mut parts = Vec::new();
        Serial::default()
            .run(&jobs, &Plan::whole(&[nrot]), &Control::new(), |d| {
                parts.push(d.part);
                Ok::<(), ()>(())
            })
            .unwrap();
        job.finish(&b, parts.pop().unwrap()).unwrap()
    };
    // Three ranges, merged last first.
    let mut parts: Vec<Part> = (0..3)
        .map(|k| {
            let r = monomorph::work::rotation_range(nrot, 3, k);
            job.run_range(&b, r, &Control::new(), 0).unwrap()
        })
        .collect();
    let mut merged = Part::empty();
    while let Some(p) = parts.pop() {
        merged.merge(p).unwrap();
    }
    let split = job.finish(&b, merged).unwrap();
    let host = |r: &monomorph::algo::matching::MatchResult<Cpu<Single>>| {
        (
            b.download(&r.scores).unwrap().mapv(f32::to_bits),
            b.download(&r.rotation_index).unwrap(),
            b.download(r.template_index.as_ref().unwrap()).unwrap(),
            r.ssum.to_bits(),
            r.tiles,
        )
    };
    let (w, s) = (host(&whole), host(&split));
    assert!(w == s, "split parts differ from the whole");
    assert!(
        w.2.iter().all(|&t| t == 0 || t == 1),
        "template 2 ties with 0"
    );
    assert!(w.2.iter().any(|&t| t == 1));
}

/// A chiral particle: blobs at the centre and at the ends of three arms of different lengths
/// along z, y and x (its mirror image cannot be rotated onto it).
fn chiral(n: usize) -> ArrayD<f32> {
    let c = (n / 2) as f32;
    let blobs = [[c, c, c], [c, c, c + 4.0], [c, c + 3.0, c], [c - 2.0, c, c]];
    ArrayD::from_shape_fn(IxDyn(&[n, n, n]), |i| {
        blobs
            .iter()
            .map(|b| {
                let r2: f32 = (0..3).map(|k| (i[k] as f32 - b[k]).powi(2)).sum();
                (-r2 / (2.0 * 0.8 * 0.8)).exp()
            })
            .sum()
    })
}

#[test]
fn check_hand_names_the_hand_of_a_planted_chiral_particle() {
    let dir = scratch("multi-hand");
    let t = chiral(11);
    let mut mirrored = t.clone();
    mirrored.invert_axis(ndarray::Axis(2));
    let mirrored = mirrored.as_standard_layout().into_owned();
    let mut vol = noise(&[36, 36, 36], 41).mapv(|v| 0.3 * v);
    for at in [[2, 2, 2], [2, 20, 21], [20, 3, 18], [21, 22, 4]] {
        plant(&mut vol, &t, &at, 1.0);
    }
    let target = save(&dir, "tomo.npy", &vol);
    let right = save(&dir, "right.npy", &t);
    let left = save(&dir, "left.npy", &mirrored);
    let mut got = Vec::new();
    for (name, template) in [("right", &right), ("left", &left)] {
        let out = dir.join(name);
        let o = run(&[
            "match",
            "--target",
            &target,
            "--template",
            template,
            "-a",
            "45",
            "--check-hand",
            "4",
            "--out",
            out.to_str().unwrap(),
        ]);
        ok(&o, name);
        let c = run_json(&out)["check_hand"].clone();
        assert_eq!(c["n"], 4, "{c}");
        got.push(c);
    }
    assert_eq!(got[0]["better"], "original", "{}", got[0]);
    assert_eq!(got[1]["better"], "mirrored", "{}", got[1]);
    // Mirroring twice is the identity: each run's mirrored score is the other's original.
    assert_eq!(got[0]["original"], got[1]["mirrored"]);
    assert_eq!(got[0]["mirrored"], got[1]["original"]);
    // The maps written are the original template's: the same as a run without the check.
    let plain = dir.join("plain");
    ok(
        &run(&[
            "match",
            "--target",
            &target,
            "--template",
            &right,
            "-a",
            "45",
            "--out",
            plain.to_str().unwrap(),
        ]),
        "plain",
    );
    for f in ["scores.npy", "rotation_index.npy"] {
        assert!(
            read(&plain.join(f)) == read(&dir.join("right").join(f)),
            "{f}"
        );
    }
}

#[test]
fn bad_template_sets_exit_2_naming_the_flag_and_write_nothing() {
    let dir = scratch("multi-bad");
    let t = save(&dir, "t.npy", &noise(&[20, 20, 20], 1));
    let a = save(&dir, "a.npy", &noise(&[6, 6, 6], 2));
    let b = save(&dir, "b.npy", &noise(&[6, 6, 6], 3));
    let c = save(&dir, "c.npy", &noise(&[5, 6, 6], 4));
    let m = save(&dir, "m.npy", &ball(3, 6, 2.5));
    let out = dir.join("out");
    let o = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "--template",
                &a,
                "--template-mask",
                &m,
                "--template-mask",
                &m,
            ],
            "--template-mask",
        ),
        (
            vec![
                "--template",
                &a,
                "--template",
                &b,
                "--template",
                &a,
                "--template-mask",
                &m,
                "--template-mask",
                &m,
            ],
            "--template-mask",
        ),
        (vec!["--template", &a, "--template", &c], "--template"),
        (vec!["--template", &a, "--check-hand", "0"], "--check-hand"),
        (
            vec!["--template", &a, "--template", &b, "--score-stats"],
            "--score-stats",
        ),
        (
            vec![
                "--template",
                &a,
                "--template",
                &b,
                "--background-correction",
                "phase-scrambling",
            ],
            "--background-correction",
        ),
        (
            vec!["--template", &a, "--template", &b, "--check-hand", "2"],
            "--check-hand",
        ),
    ];
    for (extra, flag) in cases {
        let mut args = vec!["match", "--target", &t, "--out", o];
        args.extend(&extra);
        let r = run(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.starts_with("error:") && err.contains(flag),
            "{extra:?}: {err}"
        );
        assert!(!out.exists(), "{extra:?}: wrote {}", out.display());
    }
}
