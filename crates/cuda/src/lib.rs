//! # monomorph-cuda
//!
//! monomorph's CUDA backend (`Cuda<P>`), built on cudarc with dynamic loading: the crate builds
//! on any machine, and without a driver its constructor returns
//! [`Error::DeviceUnavailable`](monomorph_core::Error::DeviceUnavailable) instead of panicking.
//!
//! * One context and **one stream** per backend (shared by [`Cuda::sharing`]); every op is
//!   queued on it, and only reductions, downloads and [`Memory::synchronize`] wait.
//! * Kernels are CUDA C (`crates/cuda/kernels/*.cu`), compiled once per process by NVRTC to a
//!   CUBIN for the device's own `sm_XY` (PTX only as a fallback); see [`kernels`].
//! * Real FFTs run on cuFFT with plans cached by (shape, axes, precision).
//! * Allocation uses the stream-ordered memory pool with its release threshold raised, so
//!   loops that free and re-allocate do not return memory to the driver at every sync.
//!
//! ```
//! use monomorph_core::Single;
//! match monomorph_cuda::Cuda::<Single>::new(0) {
//!     Ok(cuda) => println!("{:?}", cuda.info()),
//!     Err(e) => println!("{e}"), // e.g. "device unavailable: no CUDA driver …"
//! }
//! ```
#![warn(missing_docs)]
// Every `unsafe` block states why it is sound (`// SAFETY: …`).
#![warn(clippy::undocumented_unsafe_blocks)]

mod array;
pub mod bench;
mod error;
mod fft;
pub mod kernels;
mod ops;
mod probe;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig};
use monomorph_core::{
    Backend, BackendTypes, DeviceInfo, DeviceKind, Element, Error, Memory, Precision, Result,
};

pub use array::CudaArray;
pub use error::CudaError;
pub use fft::CudaFftPlan;
pub use probe::{Libraries, ProbeReport, device_count, libraries, probe};

use error::Ck;

/// Threads per block of the 1-D kernels (matches `MM_BLOCK` in `common.cuh`).
pub(crate) const BLOCK: u32 = 256;

/// Static facts about a CUDA device.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaDeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Device name ("NVIDIA H200").
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total memory in bytes.
    pub total_memory: u64,
    /// Free memory in bytes when asked.
    pub free_memory: u64,
    /// Streaming multiprocessors.
    pub multiprocessors: usize,
    /// The driver's CUDA version ("13.0").
    pub driver_version: String,
    /// NVRTC's version ("13.0").
    pub nvrtc_version: String,
    /// How the kernels were loaded: "CUBIN sm_90", or "PTX compute_90 (…why…)".
    pub kernel_image: String,
}

/// Compiles the kernels for `cc` and loads them: the CUBIN, or PTX when no CUBIN could be
/// made or the driver refused it. Errors name the NVRTC and driver versions.
fn load_kernels(ctx: &Arc<CudaContext>, cc: (i32, i32)) -> Result<(Arc<CudaModule>, String)> {
    let versions = || {
        format!(
            "NVRTC {}, driver CUDA {}",
            nvrtc_version(),
            driver_version()
        )
    };
    let img = kernels::module_image(cc).map_err(|e| {
        Error::from(CudaError::Compile(format!(
            "{e} (sm_{}{}, {})",
            cc.0,
            cc.1,
            versions()
        )))
    })?;
    match ctx.load_module(img.image.clone()) {
        Ok(m) => Ok((m, img.description)),
        Err(cubin_err) if img.cubin => {
            let arch = format!("compute_{}{}", cc.0, cc.1);
            let fail = |what: String| Error::Backend {
                backend: "cuda",
                message: format!(
                    "loading the kernel module failed: {} refused ({cubin_err}), then {what} \
                     ({}; a driver older than NVRTC rejects its PTX)",
                    img.description,
                    versions()
                ),
            };
            let ptx = kernels::module_ptx(&arch).map_err(|e| fail(format!("PTX: {e}")))?;
            let m = ctx
                .load_module(ptx)
                .map_err(|e| fail(format!("PTX for {arch} refused: {e}")))?;
            Ok((
                m,
                format!("PTX {arch} (the driver refused the CUBIN: {cubin_err})"),
            ))
        }
        Err(e) => Err(Error::Backend {
            backend: "cuda",
            message: format!(
                "loading the kernel module failed: {e} ({}; {}; a driver older than NVRTC \
                 rejects its PTX)",
                img.description,
                versions()
            ),
        }),
    }
}

pub(crate) struct Inner {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    funcs: Mutex<HashMap<String, CudaFunction>>,
    pub(crate) fft: Mutex<HashMap<fft::PlanKey, Arc<fft::PlanExec>>>,
    /// Small per-launch partials of fused ops (standardisation, MCC maxima), kept across calls
    /// so that the matching loop allocates nothing per rotation; grown on demand.
    pub(crate) partials: Mutex<Option<cudarc::driver::CudaSlice<u8>>>,
    /// 16 bytes standing for a pointer argument a kernel does not read (its flag is off),
    /// allocated once instead of per call.
    pub(crate) unused: cudarc::driver::CudaSlice<u8>,
    ordinal: usize,
    name: String,
    cc: (i32, i32),
    sms: usize,
    total: u64,
    kernel_image: String,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // cuFFT plans must go before the context; errors parked by drops are dropped with it.
        // After a sticky device error (a faulting kernel, an illegal address) every later
        // call fails, cuFFT's plan destroy included, and cudarc's plan destructor unwraps
        // that failure: the process would abort (a test binary losing its summary). A
        // poisoned context's plans are leaked instead; the process cannot use it again.
        let healthy = self.stream.synchronize().is_ok() && self.ctx.check_err().is_ok();
        if let Ok(mut m) = self.fft.lock() {
            release_plans(&mut m, healthy);
        }
        if let Ok(mut p) = self.partials.lock() {
            p.take();
        }
    }
}

/// Empties the plan cache: drops the plans when the context is `healthy`, leaks them when it
/// is poisoned (so that neither this cache's reference nor any clone a caller still holds
/// ever runs a cuFFT destroy that can only fail).
pub(crate) fn release_plans<K, T>(cache: &mut HashMap<K, Arc<T>>, healthy: bool) {
    if healthy {
        cache.clear();
    } else {
        for (_, plan) in cache.drain() {
            std::mem::forget(plan);
        }
    }
}

/// The CUDA backend in precision `P` (`Cuda<Single>`, `Cuda<Double>`).
///
/// Cloning is cheap: clones share the context, stream, kernel module and plan cache.
pub struct Cuda<P: Precision> {
    pub(crate) inner: Arc<Inner>,
    _p: PhantomData<P>,
}

impl<P: Precision> Clone for Cuda<P> {
    fn clone(&self) -> Self {
        Cuda {
            inner: self.inner.clone(),
            _p: PhantomData,
        }
    }
}

impl<P: Precision> std::fmt::Debug for Cuda<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cuda<{}>(device {} {}, sm_{}{})",
            P::NAME,
            self.inner.ordinal,
            self.inner.name,
            self.inner.cc.0,
            self.inner.cc.1
        )
    }
}

impl<P: Precision> Cuda<P> {
    /// Opens device `ordinal`: checks the driver, device, NVRTC and cuFFT ([`probe`]), creates
    /// the context and stream, raises the memory pool's release threshold and compiles the
    /// kernels for the device's architecture. Without CUDA this returns
    /// [`Error::DeviceUnavailable`] naming what is missing; it never panics.
    pub fn new(ordinal: usize) -> Result<Self> {
        let report = probe()
            .map_err(|why| Error::DeviceUnavailable(format!("CUDA device {ordinal}: {why}")))?;
        if ordinal >= report.devices {
            return Err(Error::DeviceUnavailable(format!(
                "CUDA device {ordinal} does not exist ({} device(s) present)",
                report.devices
            )));
        }
        let ctx = CudaContext::new(ordinal).ck()?;
        let stream = ctx.default_stream();
        if ctx.has_async_alloc() {
            let mut keep = u64::MAX;
            let attr = cudarc::driver::sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
            // SAFETY: the device handle comes from a live context; the attribute takes a u64.
            unsafe {
                let pool =
                    cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device()).ck()?;
                cudarc::driver::result::mem_pool::set_attribute(
                    pool,
                    attr,
                    &mut keep as *mut u64 as *mut std::ffi::c_void,
                )
                .ck()?;
            }
        }
        let cc = ctx.compute_capability().ck()?;
        let (module, kernel_image) = load_kernels(&ctx, cc)?;
        let sms = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .ck()? as usize;
        let unused = stream.alloc_zeros::<u8>(16).ck()?;
        let inner = Inner {
            name: ctx.name().ck()?,
            total: ctx.total_mem().ck()? as u64,
            ctx,
            stream,
            module,
            funcs: Mutex::new(HashMap::new()),
            fft: Mutex::new(HashMap::new()),
            partials: Mutex::new(None),
            unused,
            ordinal,
            cc,
            sms,
            kernel_image,
        };
        Ok(Cuda {
            inner: Arc::new(inner),
            _p: PhantomData,
        })
    }

    /// A backend of another precision sharing this one's context, stream, kernels and plans
    /// (`Cuda::<Double>::sharing(&cuda32)`).
    pub fn sharing<Q: Precision>(other: &Cuda<Q>) -> Self {
        Cuda {
            inner: other.inner.clone(),
            _p: PhantomData,
        }
    }

    /// Name, compute capability, memory and multiprocessors of the device.
    pub fn info(&self) -> CudaDeviceInfo {
        CudaDeviceInfo {
            ordinal: self.inner.ordinal,
            name: self.inner.name.clone(),
            compute_capability: self.inner.cc,
            total_memory: self.inner.total,
            free_memory: self.available_memory(),
            multiprocessors: self.inner.sms,
            driver_version: driver_version(),
            nvrtc_version: nvrtc_version(),
            kernel_image: self.inner.kernel_image.clone(),
        }
    }

    /// The stream every op of this backend is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// A kernel of the module by name (cached).
    pub(crate) fn func(&self, name: &str) -> Result<CudaFunction> {
        let mut map = self.inner.funcs.lock().map_err(|_| Error::Backend {
            backend: "cuda",
            message: "kernel table lock poisoned".into(),
        })?;
        if let Some(f) = map.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .inner
            .module
            .load_function(name)
            .map_err(|e| Error::Backend {
                backend: "cuda",
                message: format!("kernel `{name}` not found in the module: {e}"),
            })?;
        map.insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// Grid for a grid-stride kernel over `n` items.
    pub(crate) fn grid(&self, n: usize) -> LaunchConfig {
        let max_blocks = (self.inner.sms.max(1) * 32) as u64;
        let blocks = (n as u64)
            .div_ceil(BLOCK as u64)
            .clamp(1, max_blocks.max(1));
        LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// The driver's CUDA version as "13.0" (or "unknown").
pub fn driver_version() -> String {
    if !libraries().driver {
        return "none".into();
    }
    let mut v = 0i32;
    // SAFETY: the driver library is loaded (checked above); the call writes one int.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        format!("{}.{}", v / 1000, (v % 1000) / 10)
    } else {
        "unknown".into()
    }
}

/// NVRTC's version as "13.0" (or "none").
pub fn nvrtc_version() -> String {
    if !libraries().nvrtc {
        return "none".into();
    }
    let (mut a, mut b) = (0i32, 0i32);
    // SAFETY: NVRTC is loaded (checked above); the call writes two ints.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
    if r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        format!("{a}.{b}")
    } else {
        "unknown".into()
    }
}

impl<P: Precision> BackendTypes for Cuda<P> {
    type Precision = P;
    type Array<T: Element> = CudaArray<T>;
    type Fft = CudaFftPlan;
}

impl<P: Precision> Backend for Cuda<P> {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn device(&self) -> DeviceInfo {
        let i = self.info();
        DeviceInfo {
            name: i.name,
            kind: DeviceKind::Cuda,
            total_memory: i.total_memory,
            free_memory: i.free_memory,
            processors: i.multiprocessors,
            description: format!(
                "{} precision, sm_{}{}, device {}, driver CUDA {}, NVRTC {}, kernels {}",
                P::NAME,
                i.compute_capability.0,
                i.compute_capability.1,
                i.ordinal,
                i.driver_version,
                i.nvrtc_version,
                i.kernel_image
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops (a cuFFT plan's destroy).
    struct Plan<'a>(&'a AtomicUsize);

    impl Drop for Plan<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn plans_of_a_poisoned_context_are_leaked_not_destroyed() {
        let destroyed = AtomicUsize::new(0);
        let mut cache = HashMap::new();
        cache.insert(1, Arc::new(Plan(&destroyed)));
        cache.insert(2, Arc::new(Plan(&destroyed)));
        // A caller's clone outlives the backend: dropping it must not destroy either.
        let held = cache[&1].clone();
        release_plans(&mut cache, false);
        assert!(cache.is_empty());
        drop(held);
        assert_eq!(destroyed.load(Ordering::SeqCst), 0, "a plan was destroyed");
        // A healthy context destroys them (the caller's clone when it goes).
        cache.insert(3, Arc::new(Plan(&destroyed)));
        cache.insert(4, Arc::new(Plan(&destroyed)));
        let held = cache[&3].clone();
        release_plans(&mut cache, true);
        assert_eq!(destroyed.load(Ordering::SeqCst), 1);
        drop(held);
        assert_eq!(destroyed.load(Ordering::SeqCst), 2);
    }
}
