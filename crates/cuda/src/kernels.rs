//! The CUDA C kernel sources (`crates/cuda/kernels/*.cu`) and their NVRTC compilation.
//!
//! Every kernel is instantiated for each dtype it serves by macros inside the sources
//! (`ew_binary_f32`, `ew_binary_f64`, `reduce_rows_i64`…), so one compilation of
//! [`source`] yields every instantiation. The PTX is compiled once per process and
//! architecture and cached.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

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
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".to_string(),
            "-default-device".to_string(),
        ],
        name: Some("monomorph_kernels.cu".to_string()),
        ..Default::default()
    };
    Ok(compile_ptx_with_opts(src, opts)?)
}

/// The whole module compiled for `arch`, once per process.
pub(crate) fn module_ptx(arch: &str) -> Result<Ptx, CudaError> {
    static CACHE: OnceLock<Mutex<HashMap<String, Ptx>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache
        .lock()
        .map_err(|_| CudaError::Compile("kernel cache lock poisoned".into()))?;
    if let Some(p) = map.get(arch) {
        return Ok(p.clone());
    }
    let ptx = compile(&source(), arch)?;
    map.insert(arch.to_string(), ptx.clone());
    Ok(ptx)
}
