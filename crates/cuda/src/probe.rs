//! Which CUDA pieces this machine has, found without calling a symbol of a missing library
//! (cudarc panics on the first call into a library it cannot load).

use std::sync::OnceLock;

use cudarc::driver::CudaContext;

/// Which CUDA libraries can be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Libraries {
    /// `libcuda.so` (comes with the NVIDIA driver).
    pub driver: bool,
    /// `libnvrtc.so` (toolkit or the `nvidia-cuda-nvrtc` wheel): compiles the kernels.
    pub nvrtc: bool,
    /// `libcufft.so`: real FFTs.
    pub cufft: bool,
    /// `libcublas.so` (not needed by this backend; reported for information).
    pub cublas: bool,
}

/// The verdict of [`probe`]: everything the backend needs is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// The libraries found.
    pub libraries: Libraries,
    /// Number of CUDA devices.
    pub devices: usize,
}

/// Which libraries can be dlopened (cached; calls no CUDA symbol).
pub fn libraries() -> Libraries {
    static LIBS: OnceLock<Libraries> = OnceLock::new();
    *LIBS.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries `dlopen` on candidate names; no symbol is called.
        unsafe {
            Libraries {
                driver: cudarc::driver::sys::is_culib_present(),
                nvrtc: cudarc::nvrtc::sys::is_culib_present(),
                cufft: cudarc::cufft::sys::is_culib_present(),
                cublas: cudarc::cublas::sys::is_culib_present(),
            }
        }
    })
}

/// Checks, in order, driver → device → NVRTC → cuFFT, and says which is missing. Never panics;
/// the answer is cached for the process.
///
/// ```
/// match monomorph_cuda::probe() {
///     Ok(r) => println!("{} CUDA device(s)", r.devices),
///     Err(why) => println!("no CUDA: {why}"),
/// }
/// ```
pub fn probe() -> Result<ProbeReport, String> {
    static PROBE: OnceLock<Result<ProbeReport, String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let libs = libraries();
            if !libs.driver {
                return Err(
                    "no CUDA driver: libcuda.so could not be loaded (install the NVIDIA driver)"
                        .to_string(),
                );
            }
            let devices = match CudaContext::device_count() {
                Ok(n) if n > 0 => n as usize,
                Ok(_) => return Err("no CUDA device: the driver reports 0 devices".to_string()),
                Err(e) => return Err(format!("no CUDA device: {e}")),
            };
            if !libs.nvrtc {
                return Err(
                    "NVRTC missing: libnvrtc.so could not be loaded (install the CUDA \
                            toolkit or `pip install nvidia-cuda-nvrtc` and add its lib folder to \
                            LD_LIBRARY_PATH)"
                        .to_string(),
                );
            }
            if !libs.cufft {
                return Err(
                    "cuFFT missing: libcufft.so could not be loaded (install the CUDA \
                            toolkit or the `nvidia-cufft` wheel and add its lib folder to \
                            LD_LIBRARY_PATH)"
                        .to_string(),
                );
            }
            Ok(ProbeReport {
                libraries: libs,
                devices,
            })
        })
        .clone()
}

/// Number of usable CUDA devices (0 without a driver, a device, NVRTC or cuFFT).
pub fn device_count() -> usize {
    probe().map(|r| r.devices).unwrap_or(0)
}
