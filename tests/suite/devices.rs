//! `monomorph match --devices` in one process (CPU workers here: `--backend cpu --devices
//! 0,1`): byte-identical to a plain run (3-D FLC and 2-D with ties, tiled and untiled, with a
//! Fourier filter; the list mode with peaks), run.json saying which device ran which
//! rotations, bad lists refused (exit 2, naming the flag, nothing created), and a failing
//! worker stopping the others fast (exit 1, one line naming the device).

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::mpi::{args_out, cases, noise, read, run_json, save, scratch};

const BIN: &str = env!("CARGO_BIN_EXE_monomorph");
/// A low-pass on every case: each worker builds the filters on its own backend.
const FILTER: &[&str] = &["--lowpass", "8", "--sampling-rate", "2"];

/// `monomorph args -q` with `threads` rayon threads.
fn run(args: &[&str], threads: usize, env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("-q")
        .env("RAYON_NUM_THREADS", threads.to_string())
        .envs(env.iter().copied())
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

#[test]
fn device_threads_match_one_device_byte_for_byte() {
    let dir = scratch("devices-same");
    for (name, mut args) in cases(&dir) {
        args.extend(FILTER.iter().map(|s| s.to_string()));
        let one = dir.join(format!("{name}-1"));
        let o = run(&args_out(&args, one.to_str().unwrap()), 2, &[]);
        ok(&o, name);
        let info = run_json(&one);
        assert!(info.get("devices").is_none(), "{name}: {info}");
        let nrot = info["score_statistics"]["n_rotations"].as_u64().unwrap();
        // Two workers of one thread; three in another order, the first with two threads.
        for (devs, threads) in [("0,1", 2), ("2,0,1", 4)] {
            let out = dir.join(format!("{name}-dev{}", devs.replace(',', "")));
            let mut a = vec!["--backend", "cpu"];
            a.extend(args_out(&args, out.to_str().unwrap()));
            a.extend(["--devices", devs]);
            let o = run(&a, threads, &[]);
            ok(&o, &format!("{name} --devices {devs}"));
            for f in ["scores.npy", "rotation_index.npy", "rotations.npy"] {
                assert!(
                    read(&one.join(f)) == read(&out.join(f)),
                    "{name}, --devices {devs}: {f} differs from one device"
                );
            }
            let got = run_json(&out);
            for k in ["ssum", "score_statistics", "tiles", "filters"] {
                assert_eq!(got[k], info[k], "{name}, --devices {devs}: run.json {k}");
            }
            // Which device ran which rotations: the list's order, contiguous ranges.
            let w = got["devices"]["workers"]
                .as_array()
                .expect("devices.workers");
            let ids: Vec<String> = w.iter().map(|x| x["device"].to_string()).collect();
            assert_eq!(ids.join(","), devs, "{got}");
            let mut at = 0;
            for x in w {
                assert_eq!(x["rotations"][0].as_u64(), Some(at), "{got}");
                at = x["rotations"][1].as_u64().unwrap();
            }
            assert_eq!(at, nrot, "{got}");
            let th: Vec<u64> = w.iter().map(|x| x["threads"].as_u64().unwrap()).collect();
            assert_eq!(th.iter().sum::<u64>(), threads as u64, "{got}");
        }
    }
}

#[test]
fn device_threads_in_list_mode_match_the_plain_list() {
    let dir = scratch("devices-list");
    let (a, b) = (
        save(&dir, "a.npy", &noise(&[20, 18, 16], 21)),
        save(&dir, "b.npy", &noise(&[16, 18, 20], 22)),
    );
    let p = save(&dir, "p.npy", &noise(&[5, 5, 5], 23));
    let list = dir.join("list.txt");
    std::fs::write(&list, format!("{a}\n{b}\n")).unwrap();
    let args = |out: &Path| -> Vec<String> {
        let mut v: Vec<String> = ["match", "--target-list", list.to_str().unwrap(), "-i", &p]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["-a", "60", "--memory-limit", "130K"].map(String::from));
        v.extend(FILTER.iter().map(|s| s.to_string()));
        v.extend(["--out", out.to_str().unwrap(), "--peaks"].map(String::from));
        v.extend(["--min-distance", "2", "--threshold-rel", "0.3"].map(String::from));
        v
    };
    let (plain, split) = (dir.join("plain"), dir.join("split"));
    let pa = args(&plain);
    ok(
        &run(&pa.iter().map(String::as_str).collect::<Vec<_>>(), 2, &[]),
        "plain list",
    );
    let mut sa = args(&split);
    sa.extend(["--devices", "0,1"].map(String::from));
    ok(
        &run(&sa.iter().map(String::as_str).collect::<Vec<_>>(), 2, &[]),
        "list --devices",
    );
    for t in ["a", "b"] {
        for f in ["scores.npy", "rotation_index.npy", "rotations.npy"] {
            let (x, y) = (plain.join(t).join(f), split.join(t).join(f));
            assert!(read(&x) == read(&y), "{t}/{f} differs with --devices");
        }
        let (x, y) = (run_json(&plain.join(t)), run_json(&split.join(t)));
        assert_eq!(x["ssum"], y["ssum"], "{t}");
        assert!(x["tiles"].as_u64() > Some(1), "{t} not tiled: {x}");
        assert_eq!(y["devices"]["workers"].as_array().map(Vec::len), Some(2));
    }
    let star = |d: &Path| read(&d.join("particles.star"));
    assert!(star(&plain) == star(&split), "particles.star differs");
}

#[test]
fn bad_device_lists_are_refused_naming_the_flag() {
    let dir = scratch("devices-bad");
    let (_, args) = cases(&dir).swap_remove(0);
    let out = dir.join("out");
    for (v, why) in [
        ("", "no device"),
        ("0,0", "listed twice"),
        ("0,x", "'x' is not a device number"),
        ("-1", "'-1' is not a device number"),
        // Two threads: CPU workers 0 and 1 exist, 2 does not.
        ("0,2", "device 2 does not exist"),
    ] {
        let mut a = vec!["--backend", "cpu"];
        a.extend(args_out(&args, out.to_str().unwrap()));
        a.push(if v.starts_with('-') {
            "--devices=-1"
        } else {
            "--devices"
        });
        if !v.starts_with('-') {
            a.push(v);
        }
        let o = run(&a, 2, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "--devices {v:?}: {err}");
        assert_eq!(err.lines().count(), 1, "--devices {v:?}: {err}");
        assert!(
            err.contains("--devices") && err.contains(why),
            "--devices {v:?}: {err}"
        );
        assert!(!out.exists(), "--devices {v:?} created the output folder");
    }
}

#[test]
fn a_failing_device_thread_stops_the_others_fast() {
    let dir = scratch("devices-fail");
    // About 2,000 rotations of a 40³ FLC: minutes per worker, so only a stop from the failing
    // worker ends the other within the time allowed.
    let t = save(&dir, "t.npy", &noise(&[40, 40, 40], 5));
    let p = save(&dir, "p.npy", &noise(&[9, 9, 9], 6));
    let out = dir.join("out");
    let args = [
        "--backend",
        "cpu",
        "match",
        "-m",
        &t,
        "-i",
        &p,
        "-a",
        "6",
        "--devices",
        "0,1",
        "--out",
        out.to_str().unwrap(),
    ];
    let started = Instant::now();
    let o = run(
        &args,
        2,
        &[
            ("MONOMORPH_TEST_FAIL_DEVICE", "1"),
            ("MONOMORPH_TEST_FAIL_AFTER", "2"),
        ],
    );
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(15), "took {took:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: device 1: injected failure after 2 rotations"),
        "{err}"
    );
    assert!(!out.exists(), "an output folder was left: {err}");
}

/// Issue 27: device threads take a list's items on demand. A list whose first target is
/// much larger than the others, one rotation each, so that every target splits over the two
/// workers as rotations [0, 0) and [0, 1): worker 0 starts with the large target's empty
/// range, worker 1 with its one rotation. Worker 0 is free at once, so every item of the
/// small targets goes to it while worker 1 is busy; each target's run.json
/// (`devices.workers`) is the log of which worker ran which item.
#[test]
fn device_threads_give_a_lists_items_to_the_free_worker() {
    let dir = scratch("devices-on-demand");
    let big = save(&dir, "big.npy", &noise(&[160, 160, 160], 31));
    let small: Vec<String> = (0..4)
        .map(|k| save(&dir, &format!("s{k}.npy"), &noise(&[12, 12, 12], 32 + k)))
        .collect();
    let p = save(&dir, "p.npy", &noise(&[5, 5, 5], 40));
    // One rotation: the identity.
    let r: Vec<f32> = vec![1., 0., 0., 0., 1., 0., 0., 0., 1.];
    let rot = save(
        &dir,
        "r.npy",
        &ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[1, 3, 3]), r).unwrap(),
    );
    let list = dir.join("list.txt");
    std::fs::write(&list, format!("{big}\n{}\n", small.join("\n"))).unwrap();
    let out = dir.join("out");
    let a = [
        "match",
        "--target-list",
        list.to_str().unwrap(),
        "-i",
        &p,
        "-s",
        "cc",
        "--rotations",
        &rot,
        "--backend",
        "cpu",
        "--devices",
        "0,1",
        "--out",
        out.to_str().unwrap(),
    ];
    ok(&run(&a, 2, &[]), "list --devices 0,1");
    // The per-worker item log: (target, rotations, worker).
    let mut log = Vec::new();
    for t in ["big", "s0", "s1", "s2", "s3"] {
        let info = run_json(&out.join(t));
        for w in info["devices"]["workers"]
            .as_array()
            .expect("devices.workers")
        {
            let r = (
                w["rotations"][0].as_u64().unwrap(),
                w["rotations"][1].as_u64().unwrap(),
            );
            log.push((t, r, w["device"].as_u64().unwrap()));
        }
    }
    eprintln!("items (target, rotations, device): {log:?}");
    assert_eq!(log[0], ("big", (0, 0), 0), "{log:?}");
    assert_eq!(log[1], ("big", (0, 1), 1), "{log:?}");
    for &(t, r, d) in &log[2..] {
        assert_eq!(d, 0, "{t} {r:?} went to the busy worker: {log:?}");
    }
    assert_eq!(log.len(), 10, "{log:?}");
}
