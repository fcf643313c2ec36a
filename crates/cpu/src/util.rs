//! Host helpers: memory figures, CPU name, shape checks for ndarray arrays, parallel thresholds.

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

pub(crate) use monomorph_core::shape::{per_row, rows_of, same_shape};
