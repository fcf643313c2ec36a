//! cuFFT plans for real transforms over any set of axes, and their cache.
//!
//! A contiguous run of axes `[k..=m]` is one `cufftPlanMany` (batched over the leading axes
//! when nothing follows `m`, otherwise strided over the trailing axes and repeated over the
//! leading ones). Other axis sets are decomposed: a 1-D real transform along the largest axis,
//! then in-place complex transforms along the others (the inverse runs them in reverse order,
//! destroying its input as documented).

use std::sync::{Arc, Mutex};

use cudarc::cufft::{CudaFft, sys as fft_sys};
use cudarc::driver::CudaStream;
use monomorph_core::{Error, FftPlan, Result};

use crate::error::{Ck, CudaError};

/// Cache key: (real shape, axes, double precision).
pub(crate) type PlanKey = (Vec<usize>, Vec<usize>, bool);

/// A real FFT plan of the CUDA backend (cheap to clone; the cuFFT handles are shared).
#[derive(Clone)]
pub struct CudaFftPlan {
    pub(crate) real_shape: Vec<usize>,
    pub(crate) complex_shape: Vec<usize>,
    pub(crate) axes: Vec<usize>,
    pub(crate) exec: Arc<PlanExec>,
}

impl std::fmt::Debug for CudaFftPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaFftPlan(real {:?}, axes {:?}, {})",
            self.real_shape,
            self.axes,
            if self.exec.double { "f64" } else { "f32" }
        )
    }
}

impl FftPlan for CudaFftPlan {
    fn real_shape(&self) -> &[usize] {
        &self.real_shape
    }
    fn complex_shape(&self) -> &[usize] {
        &self.complex_shape
    }
    fn axes(&self) -> &[usize] {
        &self.axes
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    R2C,
    C2R,
    C2CForward,
    C2CInverse,
}

/// One cuFFT plan, run `repeats` times at byte offsets `in_step` / `out_step`.
pub(crate) struct Step {
    pub(crate) plan: Mutex<CudaFft>,
    pub(crate) kind: Kind,
    pub(crate) repeats: usize,
    pub(crate) in_step: usize,
    pub(crate) out_step: usize,
}

/// The forward and inverse step lists of one plan.
pub(crate) struct PlanExec {
    pub(crate) double: bool,
    pub(crate) forward: Vec<Step>,
    pub(crate) inverse: Vec<Step>,
}

fn to_i32(what: &str, v: usize) -> Result<i32> {
    i32::try_from(v)
        .map_err(|_| Error::invalid(what, format!("{v} exceeds cuFFT's 32-bit plan limits")))
}

/// A plan over the contiguous axes `[k..=m]` of `shape` (the real shape for R2C/C2R, the
/// complex one for C2C).
fn step(
    shape: &[usize],
    k: usize,
    m: usize,
    kind: Kind,
    double: bool,
    stream: &Arc<CudaStream>,
) -> Result<Step> {
    let real_n: Vec<usize> = shape[k..=m].to_vec();
    let mut complex_n = real_n.clone();
    if matches!(kind, Kind::R2C | Kind::C2R) {
        let last = complex_n.len() - 1;
        complex_n[last] = real_n[last] / 2 + 1;
    }
    let inner: usize = shape[m + 1..].iter().product();
    let outer: usize = shape[..k].iter().product();
    let (nin, nout): (usize, usize) = match kind {
        Kind::R2C => (real_n.iter().product(), complex_n.iter().product()),
        Kind::C2R => (complex_n.iter().product(), real_n.iter().product()),
        _ => (real_n.iter().product(), real_n.iter().product()),
    };
    let (in_embed, out_embed) = match kind {
        Kind::R2C => (&real_n, &complex_n),
        Kind::C2R => (&complex_n, &real_n),
        _ => (&real_n, &real_n),
    };
    let fsize = if double { 8 } else { 4 };
    let (in_elem, out_elem) = match kind {
        Kind::R2C => (fsize, 2 * fsize),
        Kind::C2R => (2 * fsize, fsize),
        _ => (2 * fsize, 2 * fsize),
    };
    let n32: Vec<i32> = real_n
        .iter()
        .map(|&v| to_i32("fft shape", v))
        .collect::<Result<_>>()?;
    let ie: Vec<i32> = in_embed
        .iter()
        .map(|&v| to_i32("fft shape", v))
        .collect::<Result<_>>()?;
    let oe: Vec<i32> = out_embed
        .iter()
        .map(|&v| to_i32("fft shape", v))
        .collect::<Result<_>>()?;
    let ty = match (kind, double) {
        (Kind::R2C, false) => fft_sys::cufftType::CUFFT_R2C,
        (Kind::C2R, false) => fft_sys::cufftType::CUFFT_C2R,
        (_, false) => fft_sys::cufftType::CUFFT_C2C,
        (Kind::R2C, true) => fft_sys::cufftType::CUFFT_D2Z,
        (Kind::C2R, true) => fft_sys::cufftType::CUFFT_Z2D,
        (_, true) => fft_sys::cufftType::CUFFT_Z2Z,
    };
    let (istride, idist, ostride, odist, batch, repeats) = if inner == 1 {
        (1, nin, 1, nout, outer, 1)
    } else {
        (inner, 1, inner, 1, inner, outer)
    };
    let plan = CudaFft::plan_many(
        &n32,
        Some(&ie),
        to_i32("fft stride", istride)?,
        to_i32("fft stride", idist)?,
        Some(&oe),
        to_i32("fft stride", ostride)?,
        to_i32("fft stride", odist)?,
        ty,
        to_i32("fft batch", batch)?,
        stream.clone(),
    )
    .map_err(|e| Error::from(CudaError::from(e)))?;
    let (in_step, out_step) = if inner == 1 {
        (0, 0)
    } else {
        (nin * inner * in_elem, nout * inner * out_elem)
    };
    Ok(Step {
        plan: Mutex::new(plan),
        kind,
        repeats,
        in_step,
        out_step,
    })
}

/// Builds the forward and inverse step lists for `shape` over `axes` (validated, ascending).
pub(crate) fn build(
    shape: &[usize],
    axes: &[usize],
    double: bool,
    stream: &Arc<CudaStream>,
) -> Result<PlanExec> {
    let k = axes[0];
    let m = axes[axes.len() - 1];
    let contiguous = m - k + 1 == axes.len();
    if contiguous {
        return Ok(PlanExec {
            double,
            forward: vec![step(shape, k, m, Kind::R2C, double, stream)?],
            inverse: vec![step(shape, k, m, Kind::C2R, double, stream)?],
        });
    }
    let complex = monomorph_core::shape::rfft_shape(shape, axes);
    let mut forward = vec![step(shape, m, m, Kind::R2C, double, stream)?];
    let mut inverse = Vec::new();
    for &a in axes.iter().filter(|&&a| a != m) {
        forward.push(step(&complex, a, a, Kind::C2CForward, double, stream)?);
        inverse.push(step(&complex, a, a, Kind::C2CInverse, double, stream)?);
    }
    inverse.push(step(shape, m, m, Kind::C2R, double, stream)?);
    Ok(PlanExec {
        double,
        forward,
        inverse,
    })
}

/// Runs one step from device address `src` to `dst` (equal for in-place complex steps).
///
/// # Safety
/// `src` and `dst` must point to buffers large enough for the plan's layout.
pub(crate) unsafe fn run(step: &Step, double: bool, src: u64, dst: u64) -> Result<()> {
    let plan = step.plan.lock().map_err(|_| Error::Backend {
        backend: "cuda",
        message: "cuFFT plan lock poisoned".into(),
    })?;
    let h = plan.handle();
    for r in 0..step.repeats {
        let i = src + (r * step.in_step) as u64;
        let o = dst + (r * step.out_step) as u64;
        // SAFETY: the caller guarantees the buffers fit the plan; offsets stay inside them.
        unsafe {
            use cudarc::cufft::result as fr;
            match (step.kind, double) {
                (Kind::R2C, false) => fr::exec_r2c(h, i as *mut _, o as *mut _),
                (Kind::C2R, false) => fr::exec_c2r(h, i as *mut _, o as *mut _),
                (Kind::C2CForward, false) => fr::exec_c2c(h, i as *mut _, o as *mut _, -1),
                (Kind::C2CInverse, false) => fr::exec_c2c(h, i as *mut _, o as *mut _, 1),
                (Kind::R2C, true) => fr::exec_d2z(h, i as *mut _, o as *mut _),
                (Kind::C2R, true) => fr::exec_z2d(h, i as *mut _, o as *mut _),
                (Kind::C2CForward, true) => fr::exec_z2z(h, i as *mut _, o as *mut _, -1),
                (Kind::C2CInverse, true) => fr::exec_z2z(h, i as *mut _, o as *mut _, 1),
            }
        }
        .ck()?;
    }
    Ok(())
}
