//! # monomorph-cpu
//!
//! [`Cpu<P>`]: monomorph's CPU backend. Arrays are `ndarray::ArrayD<T>` in standard (row-major)
//! layout, ops run in parallel on rayon's pool, and real FFTs run on realfft/rustfft with
//! plans built once per (shape, axes) and cached in the backend.
//!
//! ```
//! use monomorph_core::{Backend, Memory, Reduce, Single};
//! use monomorph_cpu::Cpu;
//!
//! let cpu = Cpu::<Single>::new();
//! let a = cpu.upload(ndarray::ArrayD::from_elem(vec![4, 4], 2.0f32).view())?;
//! assert_eq!(cpu.sum(&a)?, 32.0);
//! # Ok::<(), monomorph_core::Error>(())
//! ```
#![warn(missing_docs)]
// Every `unsafe` block states why it is sound (`// SAFETY: …`).
#![warn(clippy::undocumented_unsafe_blocks)]

mod fft;
mod ops;
mod simd;
mod transpose;
mod util;

use std::marker::PhantomData;
use std::sync::Arc;

use monomorph_core::{Backend, BackendTypes, DeviceInfo, DeviceKind, Element, Precision};

pub use fft::CpuFftPlan;

/// The CPU backend in precision `P` (`Cpu<Single>`, `Cpu<Double>`).
///
/// Cloning is cheap and shares the FFT plan cache.
///
/// # Threads
/// Ops run on rayon's *current* pool, so the number of threads is rayon's: the
/// `RAYON_NUM_THREADS` environment variable for the global pool, or a pool of your own around
/// the work (`ThreadPoolBuilder::new().num_threads(n).build()?.install(|| algo(&cpu))`), which
/// also keeps two workloads from sharing cores. [`DeviceInfo::processors`] reports the threads
/// of the pool it is asked from. (A backend-owned pool would have to be entered by every op;
/// installing one around the work costs nothing per op.)
#[derive(Debug)]
pub struct Cpu<P: Precision> {
    inner: Arc<Inner>,
    _p: PhantomData<P>,
}

#[derive(Debug, Default)]
struct Inner {
    memory_limit: Option<u64>,
    fft_cache: fft::PlanCache,
}

impl<P: Precision> Clone for Cpu<P> {
    fn clone(&self) -> Self {
        Cpu {
            inner: self.inner.clone(),
            _p: PhantomData,
        }
    }
}

impl<P: Precision> Default for Cpu<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Precision> Cpu<P> {
    /// A CPU backend using rayon's global thread pool.
    pub fn new() -> Self {
        Cpu {
            inner: Arc::new(Inner::default()),
            _p: PhantomData,
        }
    }

    /// A CPU backend whose [`available_memory`](monomorph_core::Memory::available_memory) is at
    /// most `bytes` (a user's memory limit; algorithms tile their work to fit it).
    pub fn with_memory_limit(bytes: u64) -> Self {
        Cpu {
            inner: Arc::new(Inner {
                memory_limit: Some(bytes),
                ..Inner::default()
            }),
            _p: PhantomData,
        }
    }

    /// A backend of another precision sharing this one's plan cache and memory limit.
    pub fn sharing<Q: Precision>(other: &Cpu<Q>) -> Self {
        Cpu {
            inner: other.inner.clone(),
            _p: PhantomData,
        }
    }

    /// The memory limit set by [`Cpu::with_memory_limit`], if any.
    pub fn memory_limit(&self) -> Option<u64> {
        self.inner.memory_limit
    }
}

impl<P: Precision> BackendTypes for Cpu<P> {
    type Precision = P;
    type Array<T: Element> = ndarray::ArrayD<T>;
    type Fft = CpuFftPlan;
}

impl<P: Precision> Backend for Cpu<P> {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device(&self) -> DeviceInfo {
        let (total, free) = util::host_memory();
        DeviceInfo {
            name: util::cpu_name(),
            kind: DeviceKind::Cpu,
            total_memory: total,
            free_memory: self.inner.memory_limit.map_or(free, |l| l.min(free)),
            processors: rayon::current_num_threads(),
            description: format!(
                "{} precision, {} rayon threads{}",
                P::NAME,
                rayon::current_num_threads(),
                self.inner
                    .memory_limit
                    .map(|l| format!(", memory limit {l} B"))
                    .unwrap_or_default()
            ),
        }
    }
}
