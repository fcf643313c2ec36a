//! Reading and writing a float32 256³ `.npy` (64 MiB) against the floor: reading the file's
//! bytes into a fresh buffer (`std::fs::read`: one copy from the page cache, one page fault per
//! page). Target (issue 13): `read_npy` within 1.5× of that floor; the file is in the page cache
//! for both (the first iteration warms it).
//!
//! `cargo bench --bench io`

use std::path::PathBuf;
use std::sync::OnceLock;

use divan::Bencher;
use monomorph::io::{read_array, read_npy, write_npy};
use ndarray::{ArrayD, IxDyn};

fn main() {
    divan::main();
}

const N: usize = 256;

fn map() -> ArrayD<f32> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    ArrayD::from_shape_fn(IxDyn(&[N, N, N]), |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    })
}

/// The benchmark files (plain and gzip), written once per process.
fn files() -> &'static (PathBuf, PathBuf) {
    static F: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("monomorph-bench-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("bench folder");
        let plain = dir.join("map.npy");
        write_npy(&plain, &map()).expect("write map");
        let gz = dir.join("map.npy.gz");
        let bytes = std::fs::read(&plain).expect("read map");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, &bytes).expect("gzip");
        std::fs::write(&gz, e.finish().expect("gzip")).expect("write gz");
        (plain, gz)
    })
}

/// The floor: the file's bytes into a fresh vector.
#[divan::bench(sample_count = 15)]
fn read_file_bytes(b: Bencher) {
    let (p, _) = files();
    b.bench(|| std::fs::read(p).expect("read"));
}

/// `read_npy`: header, one allocation, the payload read straight into it.
#[divan::bench(sample_count = 15)]
fn read_npy_f32(b: Bencher) {
    let (p, _) = files();
    b.bench(|| read_npy(p).expect("read_npy"));
}

/// The same map gzip-compressed, decompressed as it is read.
#[divan::bench(sample_count = 5)]
fn read_npy_gz_f32(b: Bencher) {
    let (_, gz) = files();
    b.bench(|| read_array(gz).expect("read gz"));
}

/// `write_npy`: the header, then the payload's bytes in one write.
#[divan::bench(sample_count = 15)]
fn write_npy_f32(b: Bencher) {
    let (p, _) = files();
    let a = map();
    let out = p.with_file_name("out.npy");
    b.bench(|| write_npy(&out, &a).expect("write"));
}
