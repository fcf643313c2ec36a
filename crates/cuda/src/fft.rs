//! cuFFT plans for real transforms over any set of axes, and their cache.
//!
//! A contiguous run of axes `[k..=m]` is one `cufftPlanMany` (batched over the leading axes
//! when nothing follows `m`, otherwise strided over the trailing axes and repeated over the
//! leading ones). Other axis sets are decomposed: a 1-D real transform along the largest axis,
//! then in-place complex transforms along the others (the inverse runs them in reverse order,
//! destroying its input as documented).
//!
//! cuFFT requires the real pointer of an R2C input and of a C2R output to be aligned to the
//! complex type. A plan repeated at byte offsets (transformed axes strictly inside the
//! array, or a batch split below cuFFT's 32-bit limits) lands on an odd real offset whenever
//! the slab it covers holds an odd number of reals; such a repeat runs through an aligned
//! scratch slab (one device-to-device copy in or out) instead of failing with
//! `CUFFT_INVALID_VALUE`.

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
    /// Bytes of the real side of one repeat (what a misaligned repeat copies through scratch).
    pub(crate) real_bytes: usize,
    /// Bytes of one complex element (the alignment cuFFT wants of the real pointer).
    pub(crate) complex_align: usize,
}

/// Largest element count (and stride or distance) cuFFT's 32-bit plan API addresses.
pub(crate) const CUFFT_MAX: usize = i32::MAX as usize;

/// How a batch of `outer` transforms, each spanning `span` elements, is split so that one
/// plan never addresses more than [`CUFFT_MAX`] elements: the largest divisor of `outer`
/// whose chunk fits (the plan then repeats `outer / chunk` times). `None` when even one
/// transform is too large.
pub(crate) fn batch_chunk(outer: usize, span: usize) -> Option<usize> {
    if span == 0 || span > CUFFT_MAX {
        return None;
    }
    let most = (CUFFT_MAX / span).min(outer).max(1);
    (1..=most).rev().find(|c| outer.is_multiple_of(*c))
}

/// Whether a real pointer at `addr` is misaligned for cuFFT's complex type of `align` bytes.
pub(crate) fn misaligned(addr: u64, align: usize) -> bool {
    !addr.is_multiple_of(align as u64)
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

/// The cuFFT layout of one step: plan parameters and how it repeats. Pure (no cuFFT call),
/// so the limits and the repeat offsets are checked without a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) kind: Kind,
    pub(crate) n: Vec<i32>,
    pub(crate) in_embed: Vec<i32>,
    pub(crate) out_embed: Vec<i32>,
    pub(crate) istride: i32,
    pub(crate) idist: i32,
    pub(crate) ostride: i32,
    pub(crate) odist: i32,
    pub(crate) batch: i32,
    pub(crate) repeats: usize,
    pub(crate) in_step: usize,
    pub(crate) out_step: usize,
    pub(crate) real_bytes: usize,
    pub(crate) complex_align: usize,
}

impl Layout {
    /// Whether repeat `r` of this step, on buffers at aligned addresses, hands cuFFT a real
    /// pointer misaligned for the complex type (and so goes through scratch).
    #[cfg(test)]
    pub(crate) fn detours(&self, r: usize) -> bool {
        let off = match self.kind {
            Kind::R2C => r * self.in_step,
            Kind::C2R => r * self.out_step,
            _ => return false,
        };
        misaligned(off as u64, self.complex_align)
    }
}

/// The layout of a plan over the contiguous axes `[k..=m]` of `shape` (the real shape for
/// R2C/C2R, the complex one for C2C). Errors when cuFFT's 32-bit plan API cannot address it.
pub(crate) fn layout(
    shape: &[usize],
    k: usize,
    m: usize,
    kind: Kind,
    double: bool,
) -> Result<Layout> {
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
    let i32s =
        |v: &[usize]| -> Result<Vec<i32>> { v.iter().map(|&x| to_i32("fft shape", x)).collect() };
    let span = nin.max(nout);
    let too_big = |what: &str| {
        Error::invalid(
            "fft shape",
            format!(
                "{what} of {} exceeds cuFFT's 32-bit plan limits ({CUFFT_MAX} elements)",
                monomorph_core::error::fmt_shape(shape)
            ),
        )
    };
    let (istride, idist, ostride, odist, batch, repeats) = if inner == 1 {
        // Batched over the leading axes: split the batch so that batch × size fits.
        let chunk = batch_chunk(outer, span).ok_or_else(|| too_big("one transform"))?;
        (1, nin, 1, nout, chunk, outer / chunk)
    } else {
        // Strided over the trailing axes: one plan addresses size × inner elements.
        if span.checked_mul(inner).is_none_or(|v| v > CUFFT_MAX) {
            return Err(too_big(
                "the strided batch (transform size × trailing axes)",
            ));
        }
        (inner, 1, inner, 1, inner, outer)
    };
    // One repeat covers `batch` transforms (inner == 1) or `inner` interleaved ones.
    let per = if inner == 1 { batch } else { inner };
    let (in_step, out_step) = (nin * per * in_elem, nout * per * out_elem);
    let real_bytes = match kind {
        Kind::R2C => in_step,
        Kind::C2R => out_step,
        _ => 0,
    };
    Ok(Layout {
        kind,
        n: i32s(&real_n)?,
        in_embed: i32s(in_embed)?,
        out_embed: i32s(out_embed)?,
        istride: to_i32("fft stride", istride)?,
        idist: to_i32("fft stride", idist)?,
        ostride: to_i32("fft stride", ostride)?,
        odist: to_i32("fft stride", odist)?,
        batch: to_i32("fft batch", batch)?,
        repeats,
        in_step,
        out_step,
        real_bytes,
        complex_align: 2 * fsize,
    })
}

/// A cuFFT plan for `l` on `stream`.
fn step(l: Layout, double: bool, stream: &Arc<CudaStream>) -> Result<Step> {
    let ty = match (l.kind, double) {
        (Kind::R2C, false) => fft_sys::cufftType::CUFFT_R2C,
        (Kind::C2R, false) => fft_sys::cufftType::CUFFT_C2R,
        (_, false) => fft_sys::cufftType::CUFFT_C2C,
        (Kind::R2C, true) => fft_sys::cufftType::CUFFT_D2Z,
        (Kind::C2R, true) => fft_sys::cufftType::CUFFT_Z2D,
        (_, true) => fft_sys::cufftType::CUFFT_Z2Z,
    };
    let plan = CudaFft::plan_many(
        &l.n,
        Some(&l.in_embed),
        l.istride,
        l.idist,
        Some(&l.out_embed),
        l.ostride,
        l.odist,
        ty,
        l.batch,
        stream.clone(),
    )
    .map_err(|e| Error::from(CudaError::from(e)))?;
    Ok(Step {
        plan: Mutex::new(plan),
        kind: l.kind,
        repeats: l.repeats,
        in_step: l.in_step,
        out_step: l.out_step,
        real_bytes: l.real_bytes,
        complex_align: l.complex_align,
    })
}

/// The forward and inverse layouts for `shape` over `axes` (validated, ascending). A
/// contiguous run of axes is one plan each way; otherwise a real transform along the last
/// axis and in-place complex ones along the others.
pub(crate) fn layouts(
    shape: &[usize],
    axes: &[usize],
    double: bool,
) -> Result<(Vec<Layout>, Vec<Layout>)> {
    let k = axes[0];
    let m = axes[axes.len() - 1];
    if m - k + 1 == axes.len() {
        return Ok((
            vec![layout(shape, k, m, Kind::R2C, double)?],
            vec![layout(shape, k, m, Kind::C2R, double)?],
        ));
    }
    let complex = monomorph_core::shape::rfft_shape(shape, axes);
    let mut forward = vec![layout(shape, m, m, Kind::R2C, double)?];
    let mut inverse = Vec::new();
    for &a in axes.iter().filter(|&&a| a != m) {
        forward.push(layout(&complex, a, a, Kind::C2CForward, double)?);
        inverse.push(layout(&complex, a, a, Kind::C2CInverse, double)?);
    }
    inverse.push(layout(shape, m, m, Kind::C2R, double)?);
    Ok((forward, inverse))
}

/// Builds the forward and inverse step lists for `shape` over `axes` (validated, ascending).
pub(crate) fn build(
    shape: &[usize],
    axes: &[usize],
    double: bool,
    stream: &Arc<CudaStream>,
) -> Result<PlanExec> {
    let (fw, inv) = layouts(shape, axes, double)?;
    Ok(PlanExec {
        double,
        forward: fw
            .into_iter()
            .map(|l| step(l, double, stream))
            .collect::<Result<_>>()?,
        inverse: inv
            .into_iter()
            .map(|l| step(l, double, stream))
            .collect::<Result<_>>()?,
    })
}

/// Runs one step from device address `src` to `dst` (equal for in-place complex steps) on
/// `stream`. A repeat whose real pointer is misaligned for cuFFT goes through an aligned
/// scratch slab allocated (stream-ordered) for this call.
///
/// # Safety
/// `src` and `dst` must point to buffers large enough for the plan's layout.
pub(crate) unsafe fn run(
    step: &Step,
    double: bool,
    src: u64,
    dst: u64,
    stream: &Arc<CudaStream>,
) -> Result<()> {
    use cudarc::driver::DevicePtr;
    let plan = step.plan.lock().map_err(|_| Error::Backend {
        backend: "cuda",
        message: "cuFFT plan lock poisoned".into(),
    })?;
    let h = plan.handle();
    let mut scratch: Option<cudarc::driver::CudaSlice<u8>> = None;
    for r in 0..step.repeats {
        let mut i = src + (r * step.in_step) as u64;
        let mut o = dst + (r * step.out_step) as u64;
        let real = match step.kind {
            Kind::R2C => i,
            Kind::C2R => o,
            _ => 0,
        };
        let detour =
            matches!(step.kind, Kind::R2C | Kind::C2R) && misaligned(real, step.complex_align);
        let real_at = real;
        if detour && scratch.is_none() {
            // SAFETY: uninitialised bytes are fully written (copy in, or cuFFT's output)
            // before they are read.
            scratch = Some(unsafe { stream.alloc::<u8>(step.real_bytes) }.ck()?);
        }
        let (sp, _guard) = match &scratch {
            Some(sc) if detour => {
                let (p, g) = sc.device_ptr(stream);
                (p, Some(g))
            }
            _ => (0, None),
        };
        if detour && step.kind == Kind::R2C {
            // SAFETY: both ranges hold `real_bytes` bytes; the copy is stream-ordered.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    sp,
                    real_at,
                    step.real_bytes,
                    stream.cu_stream(),
                )
            }
            .ck()?;
            i = sp;
        } else if detour {
            o = sp;
        }
        // SAFETY: the caller guarantees the buffers fit the plan; offsets stay inside them,
        // and the scratch slab holds one repeat's real side.
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
        if detour && step.kind == Kind::C2R {
            // SAFETY: as above, back from the scratch slab to the misaligned real output.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    real_at,
                    sp,
                    step.real_bytes,
                    stream.cu_stream(),
                )
            }
            .ck()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_chunks_fit_the_32_bit_limit() {
        assert_eq!(batch_chunk(10, 5), Some(10));
        assert_eq!(batch_chunk(1, CUFFT_MAX), Some(1));
        assert_eq!(batch_chunk(1, CUFFT_MAX + 1), None);
        // 2048 transforms of 2^20: 2^31 elements in all, one past the limit -> halves.
        assert_eq!(batch_chunk(2048, 1 << 20), Some(1024));
        // A prime batch that does not fit falls back to one transform per repeat.
        assert_eq!(batch_chunk(2053, 1 << 20), Some(1));
    }

    #[test]
    fn inner_axis_plans_detour_exactly_on_odd_slabs() {
        // [2, 3, 5] over axis 1: R2C repeats twice, 15 reals apart; the second repeat's real
        // input (and the C2R's real output) is misaligned, in both precisions.
        for double in [false, true] {
            let (fw, inv) = layouts(&[2, 3, 5], &[1], double).unwrap();
            assert_eq!((fw.len(), inv.len()), (1, 1));
            assert_eq!(fw[0].repeats, 2);
            assert!(!fw[0].detours(0) && fw[0].detours(1));
            assert!(!inv[0].detours(0) && inv[0].detours(1));
            assert_eq!(fw[0].real_bytes, 15 * if double { 8 } else { 4 });
        }
        // An even slab (3 × 4 reals) never detours.
        let (fw, _) = layouts(&[3, 3, 4], &[1], false).unwrap();
        assert!((0..fw[0].repeats).all(|r| !fw[0].detours(r)));
        // Non-contiguous axes: the R2C along axis 2 of [2, 5, 3, 3] is strided and odd.
        let (fw, inv) = layouts(&[2, 5, 3, 3], &[0, 2], false).unwrap();
        assert!(fw[0].detours(1) && inv.last().unwrap().detours(1));
        assert!(!fw[1].detours(1), "complex steps are always aligned");
    }

    #[test]
    fn the_32_bit_limits_cover_batch_times_size() {
        // 4096 rows of 2^20 reals: 2^32 elements, so the batch is split into repeats.
        let (fw, _) = layouts(&[4096, 1 << 20], &[1], false).unwrap();
        assert!(fw[0].repeats > 1);
        assert!(fw[0].batch as usize * (1usize << 20) <= CUFFT_MAX);
        // A strided plan of 2^16 × 2^16 cannot be addressed: an error, not a wrong answer.
        let err = layouts(&[1 << 16, 1 << 16], &[0], false).unwrap_err();
        assert!(err.to_string().contains("32-bit"), "{err}");
        // One transform over 2^31 elements neither.
        assert!(layouts(&[1 << 11, 1 << 10, 1 << 10], &[0, 1, 2], false).is_err());
    }

    #[test]
    fn odd_real_slabs_are_misaligned() {
        // [2, 3, 5] over axis 1 in f32: the second repeat starts 15 reals (60 bytes) in.
        assert!(misaligned(60, 8));
        assert!(!misaligned(64, 8));
        assert!(misaligned(15 * 8, 16));
        assert!(!misaligned(0, 16));
    }
}
