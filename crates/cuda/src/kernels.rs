//! The CUDA C kernel sources (`crates/cuda/kernels/*.cu`) and their NVRTC compilation.
//!
//! Every kernel is instantiated for each dtype it serves by macros inside the sources
//! (`ew_binary_f32`, `ew_binary_f64`, `reduce_rows_i64`…), so one compilation of
//! [`source`] yields every instantiation.
//!
//! The backend loads a **CUBIN** compiled by NVRTC for the device's own `sm_XY`
//! ([`compile_cubin`]): machine code the driver loads as it is, whatever its version. PTX is
//! only the fallback ([`module_image`]), because PTX written by an NVRTC newer than the
//! driver is rejected at module load (NVRTC 13.5 writes PTX ISA 9.5, a 13.0 driver reads
//! 9.0). The image is compiled once per process and architecture and cached.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use std::ffi::CString;

use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};

use crate::error::CudaError;

/// Shared header: index types, grid-stride loop, border modes, instantiation lists.
pub const COMMON: &str = include_str!("../kernels/common.cuh");

/// Every kernel file as (name, source), in the order they are concatenated after [`COMMON`].
pub const FILES: &[(&str, &str)] = &[
    ("memory.cu", include_str!("../kernels/memory.cu")),
    ("elementwise.cu", include_str!("../kernels/elementwise.cu")),
    ("reduce.cu", include_str!("../kernels/reduce.cu")),
    ("correlate.cu", include_str!("../kernels/correlate.cu")),
    ("linalg.cu", include_str!("../kernels/linalg.cu")),
    ("resample.cu", include_str!("../kernels/resample.cu")),
    ("filter.cu", include_str!("../kernels/filter.cu")),
];

/// The whole kernel module: [`COMMON`] followed by every file of [`FILES`].
pub fn source() -> String {
    let mut s = String::from(COMMON);
    for (name, body) in FILES {
        s.push_str(&format!("\n// ---- {name} ----\n"));
        s.push_str(body);
    }
    s
}

/// One file compiled alone (with [`COMMON`] in front), for tests that pin a failure to a file.
pub fn file_source(name: &str) -> Option<String> {
    FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, body)| format!("{COMMON}\n{body}"))
}

/// Compiles `src` to PTX for `arch` (`"compute_90"`, `"sm_80"`…). The error carries NVRTC's
/// log. Callers must have checked that NVRTC is loadable ([`crate::probe::libraries`]).
pub fn compile(src: &str, arch: &str) -> Result<Ptx, CudaError> {
    if !crate::probe::libraries().nvrtc {
        return Err(CudaError::Unavailable(
            "NVRTC missing: libnvrtc.so could not be loaded".to_string(),
        ));
    }
    let opts = CompileOptions {
        options: options(arch),
        name: Some("monomorph_kernels.cu".to_string()),
        ..Default::default()
    };
    Ok(compile_ptx_with_opts(src, opts)?)
}

/// The options every compilation uses, for `arch`. `--fmad=false`: no multiply-add
/// contraction anywhere, as the CPU backend (Rust never contracts `a * b + c`), so a kernel that
/// computes in the CPU's order rounds as it does. This matters beyond the last bit where a
/// difference cancels: pytme's variance `E[f²] − E[f]²` of a flat region is exactly 0 on the
/// CPU, while a fused `fma(−e1, e1, e2)` leaves the rounding error of `e1²`, which can lift the
/// local deviation above `eps` and turn a score of 0 into noise.
fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "-default-device".to_string(),
        "--fmad=false".to_string(),
    ]
}

/// Compiles `src` to a CUBIN (an ELF image of machine code) for a real architecture
/// (`"sm_90"`, `"sm_75"`), through NVRTC's `nvrtcGetCUBIN`. The error carries NVRTC's log.
pub fn compile_cubin(src: &str, arch: &str) -> Result<Vec<u8>, CudaError> {
    use cudarc::nvrtc::{result, sys};
    if !crate::probe::libraries().nvrtc {
        return Err(CudaError::Unavailable(
            "NVRTC missing: libnvrtc.so could not be loaded".to_string(),
        ));
    }
    if !arch.starts_with("sm_") {
        return Err(CudaError::Compile(format!(
            "a CUBIN needs a real architecture (sm_XY), not {arch}"
        )));
    }
    let c_src = CString::new(src)
        .map_err(|_| CudaError::Compile("kernel source contains a NUL byte".into()))?;
    let name = c"monomorph_kernels.cu";
    let prog = result::create_program(&c_src, Some(name))
        .map_err(|e| CudaError::Compile(format!("nvrtcCreateProgram: {e:?}")))?;
    // SAFETY: `prog` is live until `destroy_program` below; the source and name outlive it.
    let out = unsafe {
        let compiled = result::compile_program(prog, &options(arch));
        match compiled {
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| {
                        let bytes: Vec<u8> = l.iter().map(|&c| c as u8).collect();
                        String::from_utf8_lossy(&bytes)
                            .trim_end_matches('\0')
                            .to_string()
                    })
                    .unwrap_or_default();
                Err(CudaError::Compile(format!(
                    "{e:?} for {arch} (CUBIN); log:\n{log}"
                )))
            }
            Ok(()) => {
                let mut size = 0usize;
                let r = sys::nvrtcGetCUBINSize(prog, &mut size);
                if r != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                    Err(CudaError::Compile(format!(
                        "nvrtcGetCUBINSize for {arch}: {r:?} (size {size})"
                    )))
                } else {
                    let mut bin = vec![0u8; size];
                    let r = sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast());
                    if r == sys::nvrtcResult::NVRTC_SUCCESS {
                        Ok(bin)
                    } else {
                        Err(CudaError::Compile(format!(
                            "nvrtcGetCUBIN for {arch}: {r:?}"
                        )))
                    }
                }
            }
        }
    };
    // SAFETY: created above and not destroyed yet.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// The architectures this NVRTC can compile for, as numbers (75, 80, 86, 89, 90…); empty
/// when NVRTC is missing or cannot say.
pub fn supported_archs() -> Vec<i32> {
    use cudarc::nvrtc::sys;
    if !crate::probe::libraries().nvrtc {
        return Vec::new();
    }
    let mut n = 0i32;
    // SAFETY: NVRTC is loaded; the calls write `n` ints into a buffer of `n` ints.
    unsafe {
        if sys::nvrtcGetNumSupportedArchs(&mut n) != sys::nvrtcResult::NVRTC_SUCCESS || n <= 0 {
            return Vec::new();
        }
        let mut v = vec![0i32; n as usize];
        if sys::nvrtcGetSupportedArchs(v.as_mut_ptr()) != sys::nvrtcResult::NVRTC_SUCCESS {
            return Vec::new();
        }
        v
    }
}

/// What the backend loads: a CUBIN for the device, or PTX for the driver to JIT.
#[derive(Debug, Clone)]
pub struct ModuleImage {
    /// The image, as cudarc's loader takes it.
    pub image: Ptx,
    /// The CUBIN's bytes (an ELF image) when this is a CUBIN.
    pub cubin_bytes: Option<Vec<u8>>,
    /// How it was made, for [`crate::CudaDeviceInfo`] and errors: "CUBIN sm_90" or
    /// "PTX compute_90 (CUBIN failed: …)".
    pub description: String,
    /// Whether this is a CUBIN.
    pub cubin: bool,
}

/// The whole module for a device of compute capability `cc`: a CUBIN for `sm_XY`; PTX only
/// when the CUBIN cannot be made, for `compute_XY` or, when this NVRTC does not know the
/// device, the newest architecture it supports below it (the driver JITs that forward).
/// Cached per process and capability.
pub fn module_image(cc: (i32, i32)) -> Result<ModuleImage, CudaError> {
    static CACHE: OnceLock<Mutex<HashMap<(i32, i32), ModuleImage>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache
        .lock()
        .map_err(|_| CudaError::Compile("kernel cache lock poisoned".into()))?;
    if let Some(m) = map.get(&cc) {
        return Ok(m.clone());
    }
    let src = source();
    let sm = format!("sm_{}{}", cc.0, cc.1);
    let img = match compile_cubin(&src, &sm) {
        Ok(bin) => ModuleImage {
            image: Ptx::from_binary(bin.clone()),
            cubin_bytes: Some(bin),
            description: format!("CUBIN {sm}"),
            cubin: true,
        },
        Err(cubin_err) => {
            let want = cc.0 * 10 + cc.1;
            let archs = supported_archs();
            let arch = if archs.is_empty() || archs.contains(&want) {
                want
            } else {
                archs
                    .iter()
                    .copied()
                    .filter(|&a| a <= want)
                    .max()
                    .unwrap_or(want)
            };
            let ptx_arch = format!("compute_{arch}");
            let ptx = compile(&src, &ptx_arch).map_err(|ptx_err| {
                CudaError::Compile(format!(
                    "CUBIN for {sm}: {cubin_err}; PTX for {ptx_arch}: {ptx_err}"
                ))
            })?;
            let first = cubin_err.to_string();
            let first = first.lines().next().unwrap_or("").to_string();
            ModuleImage {
                image: ptx,
                cubin_bytes: None,
                description: format!("PTX {ptx_arch} (CUBIN for {sm} failed: {first})"),
                cubin: false,
            }
        }
    };
    map.insert(cc, img.clone());
    Ok(img)
}

/// PTX of the whole module for `arch` (`"compute_90"`): the fallback when a CUBIN loads badly.
pub(crate) fn module_ptx(arch: &str) -> Result<Ptx, CudaError> {
    compile(&source(), arch)
}
