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
/// By default ops run on rayon's *current* pool: the global one (sized by the
/// `RAYON_NUM_THREADS` environment variable, else one thread per core), or the pool of the
/// code that calls them. [`Cpu::with_threads`] gives the backend a pool of its own (faer's
/// `Par::rayon(n)` idea, per backend rather than per call): every op of that backend then runs
/// on exactly `n` threads wherever it is called from, and two backends with their own pools
/// keep two workloads from sharing cores. Entering the pool costs a few microseconds per op
/// when called from outside it; to pay it once, run the whole algorithm inside
/// [`Cpu::install`]. [`DeviceInfo::processors`] reports the threads the backend's ops use.
///
/// ```
/// use monomorph_core::{Backend, Memory, Reduce, Single};
/// use monomorph_cpu::Cpu;
///
/// let cpu = Cpu::<Single>::with_threads(2)?;
/// assert_eq!(cpu.threads(), 2);
/// let a = cpu.upload(ndarray::ArrayD::from_elem(vec![64, 64], 1.0f32).view())?;
/// let s = cpu.install(|| cpu.sum(&a))?; // the whole body on the backend's 2 threads
/// assert_eq!(s, 4096.0);
/// # Ok::<(), monomorph_core::Error>(())
/// ```
#[derive(Debug)]
pub struct Cpu<P: Precision> {
    inner: Arc<Inner>,
    _p: PhantomData<P>,
}

#[derive(Debug, Default)]
struct Inner {
    memory_limit: Option<u64>,
    fft_cache: fft::PlanCache,
    /// The backend's own thread pool ([`Cpu::with_threads`]); `None`: rayon's current pool.
    pool: Option<rayon::ThreadPool>,
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

    /// A CPU backend whose ops run on a thread pool of its own with `threads` threads (see
    /// "Threads" above). Errors: `threads` is 0, or the operating system refuses the threads.
    pub fn with_threads(threads: usize) -> monomorph_core::Result<Self> {
        Self::new().and_threads(threads)
    }

    /// This backend (its memory limit) with a thread pool of its own of `threads` threads; the
    /// FFT plan cache starts empty. Errors as [`Cpu::with_threads`].
    pub fn and_threads(self, threads: usize) -> monomorph_core::Result<Self> {
        if threads == 0 {
            return Err(monomorph_core::Error::invalid(
                "threads",
                "expected at least 1 thread, got 0",
            ));
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("monomorph-cpu-{i}"))
            .build()
            .map_err(|e| monomorph_core::Error::Backend {
                backend: "cpu",
                message: format!("cannot start a pool of {threads} threads: {e}"),
            })?;
        Ok(Cpu {
            inner: Arc::new(Inner {
                memory_limit: self.inner.memory_limit,
                fft_cache: fft::PlanCache::default(),
                pool: Some(pool),
            }),
            _p: PhantomData,
        })
    }

    /// The number of threads this backend's ops run on: its own pool's
    /// ([`Cpu::with_threads`]), else rayon's current pool's.
    pub fn threads(&self) -> usize {
        match &self.inner.pool {
            Some(p) => p.current_num_threads(),
            None => rayon::current_num_threads(),
        }
    }

    /// Runs `f` on this backend's thread pool (the caller's current pool when it has none).
    /// Ops called inside run there directly, without entering the pool each time.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.inner.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    /// A backend of another precision sharing this one's plan cache, memory limit and thread
    /// pool.
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
            processors: self.threads(),
            description: format!(
                "{} precision, {} {}threads{}",
                P::NAME,
                self.threads(),
                if self.inner.pool.is_some() {
                    "own "
                } else {
                    "rayon "
                },
                self.inner
                    .memory_limit
                    .map(|l| format!(", memory limit {l} B"))
                    .unwrap_or_default()
            ),
        }
    }
}
