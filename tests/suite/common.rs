//! Helpers shared by the test modules.
#![allow(dead_code)]

use std::path::PathBuf;

use ndarray::ArrayD;
use ndarray_npy::{ReadableElement, read_npy};

/// Path of a file under `tests/fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Reads `tests/fixtures/<rel>` as an N-d array.
pub fn npy<T: ReadableElement>(rel: &str) -> ArrayD<T> {
    let p = fixture(rel);
    read_npy(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// Reads `tests/fixtures/<rel>` as JSON. Python's bare `NaN`/`Infinity` tokens (not JSON) are
/// read as `null`.
pub fn json(rel: &str) -> serde_json::Value {
    let p = fixture(rel);
    let text =
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    let text = text
        .replace("-Infinity", "null")
        .replace("Infinity", "null")
        .replace("NaN", "null");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", p.display()))
}
