//! Choosing a backend at run time, once, at the top of a program.
//!
//! Algorithms are generic over `B: Backend`; a program that picks its backend from a flag or
//! from the machine writes its work as a [`BackendTask`] and hands it to [`dispatch`] (or to
//! [`DefaultBackend::run`]), which instantiates it for the chosen backend and precision. No
//! generic parameter leaks into the caller's own types.

use crate::{Backend, Result};

/// Which backend to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The CPU backend.
    Cpu,
    /// The CUDA backend, device [`DispatchOptions::device`] (0 by default).
    Cuda,
    /// CUDA when compiled in and a device is present, else the CPU.
    #[default]
    Auto,
}

/// Which precision set to run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrecisionChoice {
    /// `f32` / `i32`.
    #[default]
    Single,
    /// `f64` / `i64`.
    Double,
}

impl PrecisionChoice {
    /// The precision that keeps every value of `data`: `Double` for float64 and int64 arrays,
    /// `Single` for the rest (float32 and the types that arrive as float32, int32).
    pub fn of_input(data: &crate::HostArray) -> Self {
        match data.dtype() {
            "float64" | "int64" => PrecisionChoice::Double,
            _ => PrecisionChoice::Single,
        }
    }
}

/// A piece of work generic over the backend, run by [`dispatch`].
pub trait BackendTask {
    /// What the work returns.
    type Output;
    /// Runs the work on `b`.
    fn run<B: Backend>(self, b: &B) -> Result<Self::Output>;
}

/// Options of [`dispatch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DispatchOptions {
    /// Backend to use.
    pub backend: BackendChoice,
    /// Precision to use.
    pub precision: PrecisionChoice,
    /// Cap on the memory the backend reports as available (bytes).
    pub memory_limit: Option<u64>,
    /// The CUDA device (ordinal) to open; the CPU ignores it.
    pub device: usize,
    /// CPU: run on a thread pool of the backend's own with this many threads
    /// ([`Cpu::with_threads`](crate::Cpu::with_threads)) instead of rayon's current pool;
    /// CUDA ignores it.
    pub threads: Option<usize>,
}

/// Runs `task` on the backend and precision `opts` ask for; the one place where a run-time
/// choice becomes a compile-time type.
///
/// Errors: [`Error::NotCompiled`](crate::Error::NotCompiled) for `Cuda` in a build without the `cuda` feature, and
/// [`Error::DeviceUnavailable`](crate::Error::DeviceUnavailable) when CUDA is compiled in but no device can be opened.
pub fn dispatch<T: BackendTask>(opts: DispatchOptions, task: T) -> Result<T::Output> {
    match opts.backend {
        BackendChoice::Cpu => run_cpu(opts, task),
        BackendChoice::Cuda => run_cuda(opts, task),
        BackendChoice::Auto => {
            if cuda_usable() {
                run_cuda(opts, task)
            } else {
                run_cpu(opts, task)
            }
        }
    }
}

#[cfg(feature = "cpu")]
fn run_cpu<T: BackendTask>(opts: DispatchOptions, task: T) -> Result<T::Output> {
    use crate::{Cpu, Double, Precision, Single};
    fn cpu<P: Precision>(opts: &DispatchOptions) -> Result<Cpu<P>> {
        let b = match opts.memory_limit {
            None => Cpu::<P>::new(),
            Some(l) => Cpu::<P>::with_memory_limit(l),
        };
        match opts.threads {
            Some(n) => b.and_threads(n),
            None => Ok(b),
        }
    }
    match opts.precision {
        PrecisionChoice::Single => task.run(&cpu::<Single>(&opts)?),
        PrecisionChoice::Double => task.run(&cpu::<Double>(&opts)?),
    }
}

#[cfg(not(feature = "cpu"))]
fn run_cpu<T: BackendTask>(_opts: DispatchOptions, _task: T) -> Result<T::Output> {
    Err(crate::Error::NotCompiled("cpu"))
}

/// Why CUDA cannot be used in this process, or `None` when a device opens.
pub fn cuda_unavailable_reason() -> Option<String> {
    #[cfg(feature = "cuda")]
    {
        match crate::Cuda::<crate::Single>::new(0) {
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        Some(crate::Error::NotCompiled("cuda").to_string())
    }
}

fn cuda_usable() -> bool {
    cuda_unavailable_reason().is_none()
}

/// The number of CUDA devices this process sees (0 without the `cuda` feature or a driver).
pub fn cuda_device_count() -> usize {
    #[cfg(feature = "cuda")]
    {
        monomorph_cuda::device_count()
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

#[cfg(feature = "cuda")]
fn run_cuda<T: BackendTask>(opts: DispatchOptions, task: T) -> Result<T::Output> {
    cuda_impl::run(opts, task)
}

#[cfg(not(feature = "cuda"))]
fn run_cuda<T: BackendTask>(_opts: DispatchOptions, _task: T) -> Result<T::Output> {
    Err(crate::Error::NotCompiled("cuda"))
}

#[cfg(feature = "cuda")]
mod cuda_impl {
    use super::*;
    use crate::{Cuda, Double, Single};

    /// Opens device `opts.device` in the requested precision and runs the task there.
    pub(super) fn run<T: BackendTask>(opts: DispatchOptions, task: T) -> Result<T::Output> {
        match opts.precision {
            PrecisionChoice::Single => task.run(&Cuda::<Single>::new(opts.device)?),
            PrecisionChoice::Double => task.run(&Cuda::<Double>::new(opts.device)?),
        }
    }
}

/// The backend a user who wants no choice gets: CUDA (single precision, device 0) when built
/// with the `cuda` feature and a device is present at run time, else the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultBackend {
    /// The resolved choice (`Cpu` or `Cuda`, never `Auto`).
    pub backend: BackendChoice,
}

impl DefaultBackend {
    /// Probes the machine once.
    pub fn new() -> Self {
        DefaultBackend {
            backend: if cuda_usable() {
                BackendChoice::Cuda
            } else {
                BackendChoice::Cpu
            },
        }
    }

    /// Runs `task` on this backend in single precision.
    pub fn run<T: BackendTask>(&self, task: T) -> Result<T::Output> {
        dispatch(
            DispatchOptions {
                backend: self.backend,
                ..Default::default()
            },
            task,
        )
    }
}

impl Default for DefaultBackend {
    fn default() -> Self {
        Self::new()
    }
}
