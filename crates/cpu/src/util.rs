//! Host helpers: memory figures, CPU name, parallel thresholds and task sizes, the one pointer
//! wrapper that parallel tasks share, scratch growth, strides.

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

/// Asks the kernel to back the 2 MiB-aligned interior of a large, not yet touched allocation
/// with transparent huge pages (`madvise(MADV_HUGEPAGE)`; Linux only, a no-op elsewhere and
/// under 4 MiB). The FFT passes that walk a volume along its slowest axis touch a new 4 KiB
/// page every few elements; with 2 MiB pages their TLB misses mostly vanish (measured ~10% of
/// 3-D template matching). Failure (THP disabled, not Linux) changes nothing but speed.
pub(crate) fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if bytes < 2 * HUGE {
            return;
        }
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + bytes) / HUGE * HUGE;
        if end > start {
            // SAFETY: [start, end) lies inside the caller's allocation of `bytes` bytes at
            // `ptr` (start >= ptr, end <= ptr + bytes), and is page-aligned as madvise
            // requires; MADV_HUGEPAGE only changes how the kernel backs the range, never its
            // contents or validity. The return value is ignored on purpose (advice only).
            let _ = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE)
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

pub(crate) use monomorph_core::shape::strides;

/// Rows per parallel task among `nrows`: about `per_thread` tasks per thread of the current
/// pool (for balance), but at least `min_rows` rows per task (so that no task is too small for
/// rayon's overhead) and at least one.
pub(crate) fn rows_per_task(nrows: usize, per_thread: usize, min_rows: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    nrows.div_ceil(threads * per_thread).max(min_rows).max(1)
}

/// Grows a scratch vector to at least `len` elements (the new ones are default values and, in
/// every use, written before they are read).
pub(crate) fn grow<E: Default + Clone>(v: &mut Vec<E>, len: usize) {
    if v.len() < len {
        v.resize(len, E::default());
    }
}

/// A raw pointer that parallel tasks share; each task touches a disjoint set of elements. The
/// backend's one such wrapper (the FFT passes, the line blocks of the filters and the spline
/// prefilter, the score update all use it).
#[derive(Clone, Copy)]
pub(crate) struct SharedMut<E>(pub(crate) *mut E);
// SAFETY: the pointer is only dereferenced by tasks that access pairwise disjoint elements of
// one live `&mut [E]` borrowed for the whole parallel section (see each use), so sending it to
// other threads is the same as splitting that slice.
unsafe impl<E: Send> Send for SharedMut<E> {}
// SAFETY: as above; no two tasks access the same element.
unsafe impl<E: Send> Sync for SharedMut<E> {}

impl<E> SharedMut<E> {
    /// The pointer (a method, so that closures capture the `Sync` wrapper, not the field).
    #[inline(always)]
    pub(crate) fn get(self) -> *mut E {
        self.0
    }
}
