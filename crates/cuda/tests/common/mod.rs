//! What the GPU-only test binaries share: the backend in the device's place and the fixtures.
//!
//! [`Dev<P>`] is `Cuda<P>` — or, with the crate's test feature `cpu-stand-in`, `Cpu<P>`, so that
//! every GPU-only test body (harness code, fixture discovery, tolerances) runs in CI, where
//! there is no device: `cargo test -p monomorph-cuda --release --features cpu-stand-in`.
//! Without the feature and without a device, [`make`] prints a skip line and the tests return;
//! `MONOMORPH_REQUIRE_CUDA=1` makes a skip a failure.
#![allow(dead_code)]

use monomorph_core::Precision;

/// The backend in the device's place: `Cuda<P>`.
#[cfg(not(feature = "cpu-stand-in"))]
pub type Dev<P> = monomorph_cuda::Cuda<P>;

/// The backend in the device's place: `Cpu<P>` under the `cpu-stand-in` feature.
#[cfg(feature = "cpu-stand-in")]
pub type Dev<P> = monomorph_cpu::Cpu<P>;

/// Whether the device is stood in for by the CPU (the `cpu-stand-in` feature).
pub const STAND_IN: bool = cfg!(feature = "cpu-stand-in");

/// Whether a skip must be a failure: `MONOMORPH_REQUIRE_CUDA=1`, or the CPU stand-in (which
/// always has its "device" and the repository's fixtures).
pub fn required() -> bool {
    STAND_IN || std::env::var("MONOMORPH_REQUIRE_CUDA").as_deref() == Ok("1")
}

/// The backend on device 0, or `None` (with a skip line) when this machine has no CUDA.
#[cfg(not(feature = "cpu-stand-in"))]
pub fn make<P: Precision>() -> Option<Dev<P>> {
    match monomorph_cuda::Cuda::<P>::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            if required() {
                panic!("MONOMORPH_REQUIRE_CUDA=1 but no CUDA backend: {e}");
            }
            println!("skipped: {e}");
            None
        }
    }
}

/// The CPU standing in for the device (`cpu-stand-in`): always there.
#[cfg(feature = "cpu-stand-in")]
pub fn make<P: Precision>() -> Option<Dev<P>> {
    Some(monomorph_cpu::Cpu::<P>::new())
}

/// `tests/fixtures/<sub>` of the repository: under `MONOMORPH_FIXTURES`, else beside the
/// sources, else under the working directory (the device machine runs the bundle from a copy
/// of the tree). `None` (with a skip line) when absent; a failure when [`required`].
pub fn fixtures(sub: &str) -> Option<std::path::PathBuf> {
    let mut c: Vec<std::path::PathBuf> = Vec::new();
    if let Ok(p) = std::env::var("MONOMORPH_FIXTURES") {
        c.push(p.into());
    }
    c.push(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures"));
    c.push("tests/fixtures".into());
    let found = c.into_iter().map(|p| p.join(sub)).find(|p| p.is_dir());
    if found.is_none() {
        assert!(
            !required(),
            "tests/fixtures/{sub} was not found (MONOMORPH_FIXTURES), and this run may not skip"
        );
        println!("skipped: tests/fixtures/{sub} not found");
    }
    found
}

/// `dir/name` as an f32 array, or `None` when the file does not exist (a file that does not
/// read is a failure).
pub fn npy(dir: &std::path::Path, name: &str) -> Option<ndarray::ArrayD<f32>> {
    let p = dir.join(name);
    p.exists()
        .then(|| ndarray_npy::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// A case.json, with the non-JSON numbers Python's json writes (`NaN`, `Infinity`) as null.
pub fn case_json(dir: &std::path::Path) -> serde_json::Value {
    let p = dir.join("case.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(
        &text
            .replace("-Infinity", "null")
            .replace("Infinity", "null")
            .replace("NaN", "null"),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The subfolders of `root` that hold a `case.json`, sorted (a stable order for messages).
pub fn case_dirs(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|d| d.join("case.json").exists())
        .collect();
    dirs.sort();
    dirs
}
