//! Host helpers: memory figures, CPU name, shape checks for ndarray arrays, parallel thresholds.

use monomorph_core::error::fmt_shape;
use monomorph_core::{Error, Result};

/// Below this many elements an op runs on the calling thread (rayon overhead dominates).
pub(crate) const PAR_MIN: usize = 1 << 15;

/// (total, available) host memory in bytes from /proc/meminfo; generous fallbacks elsewhere.
pub(crate) fn host_memory() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    let total = field("MemTotal:").unwrap_or(u64::MAX / 2);
    let avail = field("MemAvailable:").unwrap_or(total);
    (total, avail)
}

/// The CPU model name from /proc/cpuinfo.
pub(crate) fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "host CPU".to_string())
}

/// Errors unless the two shapes are equal.
pub(crate) fn same_shape(what: &str, a: &[usize], b: &[usize]) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::shape(what, fmt_shape(a), fmt_shape(b)))
    }
}

/// Errors unless `a` is a `(rows, n)` matrix; returns (rows, n).
pub(crate) fn rows_of(what: &str, shape: &[usize]) -> Result<(usize, usize)> {
    if shape.len() == 2 {
        Ok((shape[0], shape[1]))
    } else {
        Err(Error::shape(what, "(batch, n)", fmt_shape(shape)))
    }
}

/// Errors unless `v` has `rows` entries.
pub(crate) fn per_row<T>(what: &str, v: &[T], rows: usize) -> Result<()> {
    if v.len() == rows {
        Ok(())
    } else {
        Err(Error::shape(
            what,
            format!("{rows} per-row values"),
            format!("{} values", v.len()),
        ))
    }
}
