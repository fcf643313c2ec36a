//! The file readers as the command uses them: compressed inputs, and `--precision` following
//! the input's dtype.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output};

use monomorph::io::{HostArray, read_array, write_mrc, write_npy};
use ndarray::{ArrayD, IxDyn};

fn monomorph(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_monomorph"))
        .args(args)
        .output()
        .expect("run monomorph")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("monomorph-io-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 scratch path")
}

/// A 12³ map with three separated bumps.
fn bumps() -> ArrayD<f64> {
    ArrayD::from_shape_fn(IxDyn(&[12, 12, 12]), |i| {
        let (z, y, x) = (i[0] as f64, i[1] as f64, i[2] as f64);
        [
            (3.0, 3.0, 3.0, 1.0),
            (8.0, 4.0, 7.0, 2.0),
            (6.0, 9.0, 2.0, 3.0),
        ]
        .iter()
        .map(|&(a, b, c, h)| {
            h * (-((z - a).powi(2) + (y - b).powi(2) + (x - c).powi(2)) / 2.0).exp()
        })
        .sum()
    })
}

fn gzip_file(src: &std::path::Path, dst: &std::path::Path) {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&std::fs::read(src).expect("read"))
        .expect("gzip");
    std::fs::write(dst, e.finish().expect("gzip")).expect("write");
}

fn bzip2_file(src: &std::path::Path, dst: &std::path::Path) {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    e.write_all(&std::fs::read(src).expect("read"))
        .expect("bzip2");
    std::fs::write(dst, e.finish().expect("bzip2")).expect("write");
}

#[test]
fn compressed_maps_read_as_the_plain_ones() {
    let d = scratch("compressed");
    let map = bumps().mapv(|v| v as f32);
    let mrc = d.join("s.mrc");
    write_mrc(&mrc, &map, [1.5, 1.5, 1.5]).expect("write mrc");
    let npy = d.join("s.npy");
    write_npy(&npy, &map).expect("write npy");
    let mut outs = Vec::new();
    for (name, make) in [
        ("s.mrc", None),
        (
            "s.map.gz",
            Some(gzip_file as fn(&std::path::Path, &std::path::Path)),
        ),
        (
            "s.mrc.bz2",
            Some(bzip2_file as fn(&std::path::Path, &std::path::Path)),
        ),
        (
            "s.rec.gz",
            Some(gzip_file as fn(&std::path::Path, &std::path::Path)),
        ),
        (
            "s.npy.gz",
            Some(gzip_file as fn(&std::path::Path, &std::path::Path)),
        ),
    ] {
        let p = d.join(name);
        if let Some(f) = make {
            f(
                if name.starts_with("s.npy") {
                    &npy
                } else {
                    &mrc
                },
                &p,
            );
        }
        let v = read_array(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(v.data, HostArray::F32(map.clone()), "{name}");
        if !name.contains("npy") {
            assert_eq!(v.voxel_size, Some([1.5; 3]), "{name}");
        }
        let out = d.join(format!("{name}.csv"));
        let o = monomorph(&[
            "peaks",
            "--scores",
            s(&p),
            "--min-distance",
            "2",
            "--exclude-border",
            "1",
            "--out",
            s(&out),
            "-q",
        ]);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        outs.push(std::fs::read_to_string(&out).expect("csv"));
    }
    assert!(outs[0].lines().count() == 4, "{}", outs[0]);
    assert!(outs.iter().all(|o| o == &outs[0]), "{outs:?}");
    // A corrupt compressed file: one line naming the file and the flag, exit 2.
    let bad = d.join("bad.mrc.gz");
    let mut bytes = std::fs::read(d.join("s.map.gz")).expect("gz");
    let n = bytes.len();
    bytes.truncate(n / 2);
    std::fs::write(&bad, bytes).expect("write");
    let o = monomorph(&["peaks", "--scores", s(&bad), "--out", s(&d.join("x.csv"))]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.mrc.gz") && err.contains("--scores"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn precision_follows_a_float64_input() {
    let d = scratch("precision");
    // 1e300 does not exist in float32: computed in single precision it became inf.
    let mut map = bumps();
    map[[6, 9, 2]] = 1e300;
    let p = d.join("s.npy");
    write_npy(&p, &map).expect("write");
    let out = d.join("p.csv");
    let o = monomorph(&[
        "peaks",
        "--scores",
        s(&p),
        "--min-distance",
        "2",
        "--exclude-border",
        "1",
        "--out",
        s(&out),
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(&out).expect("csv");
    let first: Vec<&str> = csv.lines().nth(1).expect("a peak").split(',').collect();
    assert_eq!(first[..3], ["6", "9", "2"], "{csv}");
    assert_eq!(first[3].parse::<f64>().ok(), Some(1e300), "{csv}");
    // Asked for single precision explicitly: an input error naming the file, nothing written.
    let out2 = d.join("p2.csv");
    let o = monomorph(&[
        "peaks",
        "--scores",
        s(&p),
        "--precision",
        "single",
        "--out",
        s(&out2),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("s.npy") && err.contains("--scores") && err.contains("double"),
        "{err}"
    );
    // Ties: 1 + 1e-12 and 1 are one value in float32; in float64 the larger one is the peak.
    let mut tie = ArrayD::<f64>::zeros(IxDyn(&[9, 9]));
    tie[[4, 3]] = 1.0;
    tie[[4, 5]] = 1.0 + 1e-12;
    let p = d.join("tie.npy");
    write_npy(&p, &tie).expect("write");
    let o = monomorph(&[
        "peaks",
        "--scores",
        s(&p),
        "--min-distance",
        "3",
        "--exclude-border",
        "1",
        "--out",
        s(&out),
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(&out).expect("csv");
    assert_eq!(
        csv.lines().skip(1).collect::<Vec<_>>(),
        ["4,5,1.000000000001"],
        "{csv}"
    );
}
