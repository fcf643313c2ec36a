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

use std::collections::HashMap;
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
    /// The aligned slab a misaligned repeat goes through, allocated on first need and kept
    /// with the plan (stream-ordered reuse: every call runs on the plan's stream).
    pub(crate) scratch: Mutex<Option<cudarc::driver::CudaSlice<u8>>>,
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

/// The forward and inverse step lists of one plan, and its pruned forwards.
pub(crate) struct PlanExec {
    pub(crate) double: bool,
    pub(crate) forward: Vec<Step>,
    pub(crate) inverse: Vec<Step>,
    /// The pruned forward transforms built so far ([`pruned_layout`]), by the box's extent on
    /// the first axis (`None`: that box runs the full transform).
    pub(crate) pruned: Mutex<HashMap<usize, Option<Arc<PrunedExec>>>>,
}

/// The cuFFT steps of a [`Pruned::Planes`] schedule.
pub(crate) struct PrunedExec {
    pub(crate) planes: Step,
    pub(crate) cols: Step,
    /// Byte range of the output zeroed before the planes' transform.
    pub(crate) zero_at: usize,
    pub(crate) zero_bytes: usize,
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
    let make = || {
        CudaFft::plan_many(
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
    };
    let plan = match make() {
        // cuFFT allocates its work area with the driver's allocator, outside the stream-ordered
        // pool, which keeps what it reserved (its release threshold is raised): after large
        // frees the pool may hold the memory cuFFT needs. Give it back and try once more.
        Err(e) if is_alloc_failure(e.0) => {
            trim_pool(stream)?;
            make()
        }
        other => other,
    }
    .map_err(|e| Error::from(CudaError::from(e)))?;
    Ok(Step {
        plan: Mutex::new(plan),
        kind: l.kind,
        repeats: l.repeats,
        in_step: l.in_step,
        out_step: l.out_step,
        real_bytes: l.real_bytes,
        complex_align: l.complex_align,
        scratch: Mutex::new(None),
    })
}

/// Whether a cuFFT status is its failure to allocate a plan's work area.
pub(crate) fn is_alloc_failure(r: fft_sys::cufftResult) -> bool {
    r == fft_sys::cufftResult::CUFFT_ALLOC_FAILED
}

/// Returns the unused memory of the device's stream-ordered pool to the driver (after the
/// stream's pending frees complete), for an allocation made outside the pool.
fn trim_pool(stream: &Arc<CudaStream>) -> Result<()> {
    let ctx = stream.context();
    stream.synchronize().ck()?;
    if !ctx.has_async_alloc() {
        return Ok(());
    }
    // SAFETY: the device handle comes from a live context; trimming releases only memory no
    // allocation holds (the stream was synchronised, so its frees have completed).
    unsafe {
        let pool = cudarc::driver::result::device::get_default_mem_pool(ctx.cu_device()).ck()?;
        cudarc::driver::result::mem_pool::trim_to(pool, 0).ck()
    }
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

/// The schedule of a pruned forward transform ([`pruned_layout`]). Made once per plan and
/// box extent, so its size does not matter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Pruned {
    /// The box is empty: the spectrum is zero (one memset of the whole output).
    Zero,
    /// `planes`: the R2C over the trailing axes of the first `a` slabs along axis 0 (the
    /// box's extent there), from the input's front to the output's front; the output's
    /// complex elements `[zero_from, zero_from + zero_len)` (the slabs beyond `a`, whose
    /// partial spectra are zero) zeroed; then `cols`: the C2C along axis 0 over every column,
    /// in place. Equals the full R2C to rounding (the same 1-D transforms, in another order).
    Planes {
        planes: Layout,
        cols: Layout,
        zero_from: usize,
        zero_len: usize,
    },
}

/// How [`crate::Cuda`]'s `rfft_pruned` transforms an input of `shape` zero outside the box
/// `[0, nonzero)`, over `axes`: `None` for the plan's full transform (pruning does not apply:
/// a batch axis, axes that are not all of the array, one axis; or it saves little: a box
/// wider than half the first axis). Pure (no cuFFT call), so the schedule is tested on the
/// host. The lines of the first `a` slabs that lie outside the box are transformed too
/// (their spectra are exact zeros): cuFFT's batched plans have one batch stride, and one
/// plan over the slabs (2 cuFFT launches in all) beats a launch per slab.
pub(crate) fn pruned_layout(
    shape: &[usize],
    axes: &[usize],
    nonzero: &[usize],
    double: bool,
) -> Result<Option<Pruned>> {
    if nonzero.contains(&0) {
        return Ok(Some(Pruned::Zero));
    }
    let d = shape.len();
    let all: Vec<usize> = (0..d).collect();
    if d < 2 || axes != all.as_slice() {
        return Ok(None);
    }
    let a = nonzero[0];
    if 2 * a > shape[0] {
        return Ok(None);
    }
    let complex = monomorph_core::shape::rfft_shape(shape, axes);
    let mut slabs = shape.to_vec();
    slabs[0] = a;
    let planes = layout(&slabs, 1, d - 1, Kind::R2C, double)?;
    let cols = layout(&complex, 0, 0, Kind::C2CForward, double)?;
    let slab: usize = complex[1..].iter().product();
    Ok(Some(Pruned::Planes {
        planes,
        cols,
        zero_from: a * slab,
        zero_len: (shape[0] - a) * slab,
    }))
}

/// The cuFFT steps of a [`Pruned::Planes`] schedule, on `stream`.
pub(crate) fn build_pruned(
    p: Pruned,
    double: bool,
    stream: &Arc<CudaStream>,
) -> Result<Option<PrunedExec>> {
    let Pruned::Planes {
        planes,
        cols,
        zero_from,
        zero_len,
    } = p
    else {
        return Ok(None);
    };
    let c = if double { 16 } else { 8 };
    Ok(Some(PrunedExec {
        planes: step(planes, double, stream)?,
        cols: step(cols, double, stream)?,
        zero_at: zero_from * c,
        zero_bytes: zero_len * c,
    }))
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
        pruned: Mutex::new(HashMap::new()),
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
/// `stream`. A repeat whose real pointer is misaligned for cuFFT goes through the step's
/// aligned scratch slab (allocated on first need, then kept).
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
    // The raw cuFFT and copy calls below run in the thread's current context: make it this
    // stream's (cudarc's safe calls do the same), so a backend used from another thread than
    // the one that made it (`--devices` workers, a caller's thread pool) launches on its own
    // device.
    stream.context().bind_to_thread().ck()?;
    let plan = step.plan.lock().map_err(|_| Error::Backend {
        backend: "cuda",
        message: "cuFFT plan lock poisoned".into(),
    })?;
    let h = plan.handle();
    let mut scratch = step.scratch.lock().map_err(|_| Error::Backend {
        backend: "cuda",
        message: "cuFFT scratch lock poisoned".into(),
    })?;
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
            // before they are read. Allocated once per plan and kept (no allocation per call).
            *scratch = Some(unsafe { stream.alloc::<u8>(step.real_bytes) }.ck()?);
        }
        let (sp, _guard) = match &*scratch {
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

    // ---- A host executor of cuFFT layouts (rustfft), to check the schedules' indexing ----

    use rustfft::FftPlanner;
    use rustfft::num_complex::Complex64;

    /// Forward complex FFT along `axis` of a dense row-major array of `shape`.
    fn fft_axis(data: &mut [Complex64], shape: &[usize], axis: usize) {
        let n = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let outer: usize = shape[..axis].iter().product();
        let f = FftPlanner::new().plan_fft_forward(n);
        let mut line = vec![Complex64::default(); n];
        for o in 0..outer {
            for j in 0..inner {
                let at = |x: usize| (o * n + x) * inner + j;
                for x in 0..n {
                    line[x] = data[at(x)];
                }
                f.process(&mut line);
                for x in 0..n {
                    data[at(x)] = line[x];
                }
            }
        }
    }

    /// The reference: the real array's full complex FFT over `axes`, halved on the last.
    fn reference_rfft(x: &[f64], shape: &[usize], axes: &[usize]) -> Vec<Complex64> {
        let mut c: Vec<Complex64> = x.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        for &a in axes {
            fft_axis(&mut c, shape, a);
        }
        let cs = monomorph_core::shape::rfft_shape(shape, axes);
        let last = *axes.last().unwrap();
        let (n, h) = (shape[last], cs[last]);
        let inner: usize = shape[last + 1..].iter().product();
        let outer: usize = shape[..last].iter().product();
        let mut out = Vec::with_capacity(outer * h * inner);
        for o in 0..outer {
            for k in 0..h {
                for j in 0..inner {
                    out.push(c[(o * n + k) * inner + j]);
                }
            }
        }
        out
    }

    /// Runs one forward step of `l` (double precision) as cuFFT's advanced layout defines it:
    /// batch `b` of repeat `r`, element `x` (row-major over `n`, embedded in the embeds) at
    /// `r·step + b·dist + stride·flat(x)`. Buffers are f64 words (a complex is two).
    fn exec_host(l: &Layout, src: &[f64], dst: &mut [f64]) {
        let n: Vec<usize> = l.n.iter().map(|&v| v as usize).collect();
        let flat = |x: &[usize], embed: &[i32]| {
            x.iter()
                .zip(embed)
                .fold(0usize, |acc, (&xi, &e)| acc * e as usize + xi)
        };
        let size: usize = n.iter().product();
        let mut half = n.clone();
        if l.kind == Kind::R2C {
            let k = half.len() - 1;
            half[k] = n[k] / 2 + 1;
        }
        let (iw, ow) = match l.kind {
            Kind::R2C => (1, 2),
            Kind::C2CForward => (2, 2),
            k => panic!("the host executor runs forward steps, not {k:?}"),
        };
        let idx = |lin: usize, dims: &[usize]| {
            let mut x = vec![0; dims.len()];
            let mut r = lin;
            for k in (0..dims.len()).rev() {
                x[k] = r % dims[k];
                r /= dims[k];
            }
            x
        };
        for rep in 0..l.repeats {
            let (ib, ob) = (rep * l.in_step / 8, rep * l.out_step / 8);
            for b in 0..l.batch as usize {
                let mut c = vec![Complex64::default(); size];
                for (lin, v) in c.iter_mut().enumerate() {
                    let x = idx(lin, &n);
                    let at = ib
                        + iw * (b * l.idist as usize + l.istride as usize * flat(&x, &l.in_embed));
                    *v = if iw == 1 {
                        Complex64::new(src[at], 0.0)
                    } else {
                        Complex64::new(src[at], src[at + 1])
                    };
                }
                for a in 0..n.len() {
                    fft_axis(&mut c, &n, a);
                }
                for lin in 0..half.iter().product() {
                    let x = idx(lin, &half);
                    let at = ob
                        + ow * (b * l.odist as usize + l.ostride as usize * flat(&x, &l.out_embed));
                    let v = c[flat(&x, &l.n)];
                    dst[at] = v.re;
                    dst[at + 1] = v.im;
                }
            }
        }
    }

    /// Runs a whole forward schedule on the host into a NaN-filled output (so a value no
    /// step writes shows): the pruned one when `nonzero` is given and applies, else the full
    /// plan's steps. Returns the spectrum and whether the pruned schedule ran.
    fn forward_host(
        x: &[f64],
        shape: &[usize],
        axes: &[usize],
        nonzero: Option<&[usize]>,
    ) -> (Vec<Complex64>, bool) {
        let cs = monomorph_core::shape::rfft_shape(shape, axes);
        let mut out = vec![f64::NAN; 2 * cs.iter().product::<usize>()];
        let pruned = match nonzero {
            Some(nz) => pruned_layout(shape, axes, nz, true).unwrap(),
            None => None,
        };
        let applied = pruned.is_some();
        match pruned {
            Some(Pruned::Zero) => out.fill(0.0),
            Some(Pruned::Planes {
                planes,
                cols,
                zero_from,
                zero_len,
            }) => {
                out[2 * zero_from..2 * (zero_from + zero_len)].fill(0.0);
                exec_host(&planes, x, &mut out);
                let s = out.clone();
                exec_host(&cols, &s, &mut out);
            }
            None => {
                let (fw, _) = layouts(shape, axes, true).unwrap();
                exec_host(&fw[0], x, &mut out);
                for l in &fw[1..] {
                    let s = out.clone();
                    exec_host(l, &s, &mut out);
                }
            }
        }
        let c = out
            .chunks_exact(2)
            .map(|p| Complex64::new(p[0], p[1]))
            .collect();
        (c, applied)
    }

    /// A random array of `shape`, zero outside the box `[0, nonzero)`.
    fn boxed(shape: &[usize], nonzero: &[usize], seed: u64) -> Vec<f64> {
        let mut rng = monomorph_core::testing::Lcg::new(seed);
        let v = rng.array::<f64>(shape);
        let mut out = v.into_raw_vec_and_offset().0;
        let d = shape.len();
        for (lin, o) in out.iter_mut().enumerate() {
            let mut r = lin;
            for k in (0..d).rev() {
                if r % shape[k] >= nonzero[k] {
                    *o = 0.0;
                }
                r /= shape[k];
            }
        }
        out
    }

    fn max_err(a: &[Complex64], b: &[Complex64]) -> (f64, f64) {
        assert_eq!(a.len(), b.len());
        let scale = b.iter().map(|v| v.norm()).fold(0.0, f64::max).max(1.0);
        let err = a
            .iter()
            .zip(b)
            .map(|(p, q)| (p - q).norm())
            .fold(
                0.0,
                |m: f64, e| if e.is_nan() { f64::INFINITY } else { m.max(e) },
            );
        (err, scale)
    }

    #[test]
    fn pruned_schedules_equal_the_full_rfft_on_the_host() {
        // (shape, axes, box, whether the pruned schedule applies): 3-D and 2-D, odd and even
        // lengths, boxes touching the far edges, a one-slab box, batch axes and axis subsets
        // (the full plan's steps run instead).
        let cases: &[(&[usize], &[usize], &[usize], bool)] = &[
            (&[8, 6, 10], &[0, 1, 2], &[3, 2, 4], true),
            (&[9, 7, 5], &[0, 1, 2], &[4, 7, 5], true),
            (&[7, 5, 9], &[0, 1, 2], &[1, 1, 1], true),
            (&[10, 9], &[0, 1], &[5, 9], true),
            (&[11, 4], &[0, 1], &[2, 3], true),
            (&[5, 3], &[0, 1], &[2, 1], true),
            // Wider than half the first axis: the full transform.
            (&[8, 6, 10], &[0, 1, 2], &[5, 2, 4], false),
            // Batch axes and subsets: the full plan (its steps executed here too).
            (&[3, 6, 5], &[1, 2], &[1, 3, 2], false),
            (&[6, 5, 4], &[0, 1], &[2, 2, 4], false),
            (&[5, 4, 3, 7], &[0, 2], &[2, 4, 3, 3], false),
            (&[2, 3, 5], &[1], &[1, 1, 2], false),
            (&[9], &[0], &[3], false),
        ];
        for &(shape, axes, nz, applies) in cases {
            let x = boxed(shape, nz, 7 + shape.len() as u64);
            let want = reference_rfft(&x, shape, axes);
            let (got, pruned) = forward_host(&x, shape, axes, Some(nz));
            assert_eq!(pruned, applies, "{shape:?} over {axes:?}, box {nz:?}");
            let (err, scale) = max_err(&got, &want);
            assert!(
                err <= 1e-12 * scale,
                "{shape:?} over {axes:?}, box {nz:?}: error {err:e} (scale {scale})"
            );
        }
    }

    #[test]
    fn a_wrong_schedule_is_caught_by_the_host_executor() {
        // The check above can fail: a schedule that forgets the zeroing leaves NaN, one that
        // transforms one slab too few misses the box's last slab.
        let (shape, nz) = ([8usize, 6, 10], [3usize, 2, 4]);
        let x = boxed(&shape, &nz, 3);
        let want = reference_rfft(&x, &shape, &[0, 1, 2]);
        let Some(Pruned::Planes { cols, .. }) =
            pruned_layout(&shape, &[0, 1, 2], &nz, true).unwrap()
        else {
            panic!("pruned schedule expected")
        };
        let short = layout(&[2, 6, 10], 1, 2, Kind::R2C, true).unwrap();
        let mut out = vec![0.0; 2 * want.len()];
        exec_host(&short, &x, &mut out);
        let s = out.clone();
        exec_host(&cols, &s, &mut out);
        let got: Vec<Complex64> = out
            .chunks_exact(2)
            .map(|p| Complex64::new(p[0], p[1]))
            .collect();
        let (err, scale) = max_err(&got, &want);
        assert!(err > 1e-3 * scale, "a missing slab must show ({err:e})");
    }

    #[test]
    fn pruned_schedule_shapes() {
        // 128³ with a 32³ box: the R2C of 32 slabs of 128², then 128 × 65 columns along axis 0.
        let p = pruned_layout(&[128, 128, 128], &[0, 1, 2], &[32, 32, 32], false)
            .unwrap()
            .unwrap();
        let Pruned::Planes {
            planes,
            cols,
            zero_from,
            zero_len,
        } = p
        else {
            panic!("{p:?}")
        };
        assert_eq!((planes.n.as_slice(), planes.batch), (&[128, 128][..], 32));
        assert_eq!(
            (planes.idist, planes.odist, planes.repeats),
            (128 * 128, 128 * 65, 1)
        );
        assert_eq!((cols.n.as_slice(), cols.batch), (&[128][..], 128 * 65));
        assert_eq!((cols.istride, cols.idist, cols.repeats), (128 * 65, 1, 1));
        assert_eq!((zero_from, zero_len), (32 * 128 * 65, 96 * 128 * 65));
        // An empty box: zeros, whatever the plan.
        assert_eq!(
            pruned_layout(&[3, 6, 5], &[1, 2], &[0, 6, 5], false).unwrap(),
            Some(Pruned::Zero)
        );
    }

    #[test]
    fn pruned_schedule_respects_the_32_bit_limits_and_alignment() {
        // The largest odd slabs whose columns still fit one plan: 4 × 32767² f32. The two
        // slabs of the box fit one R2C plan (2 × 32767² < 2^31), so no repeat starts at an odd
        // real offset; the planes start at the (aligned) front and C2C steps never detour.
        // (Planes that repeat would need columns over 2^31 elements: then the schedule is
        // an error, like the full plan's, below.)
        let p = pruned_layout(&[4, 32767, 32767], &[0, 1, 2], &[2, 9, 9], false)
            .unwrap()
            .unwrap();
        let Pruned::Planes { planes, cols, .. } = p else {
            panic!("{p:?}")
        };
        assert_eq!((planes.batch, planes.repeats), (2, 1));
        assert!(!planes.detours(0) && !cols.detours(0));
        // One more slab and the columns exceed cuFFT's limits: an error, not a wrong answer.
        assert!(pruned_layout(&[5, 32767, 32767], &[0, 1, 2], &[2, 9, 9], false).is_err());
        assert!(layouts(&[5, 32767, 32767], &[0, 1, 2], false).is_err());
        assert!(pruned_layout(&[1 << 16, 1 << 15, 2], &[0, 1, 2], &[2, 2, 2], false).is_err());
    }
}
