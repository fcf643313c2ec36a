use crate::backend::{Arr, BackendTypes, ComplexOf, FftPlan, FloatOf};
use crate::error::{Error, Result, fmt_shape};

/// Most axes one real FFT transforms (a backend batches over the others).
pub const MAX_FFT_AXES: usize = 3;

/// Real FFTs (r2c / c2r) over chosen axes, with plans built once per shape and cached.
///
/// The transform over `axes` halves the largest axis in `axes` (`n/2 + 1` complex values) and
/// runs complex transforms along the others; axes not listed are batch axes. Both directions
/// are unnormalised: `irfft(rfft(x)) = x · Π n_axis`. The half spectrum has numpy's
/// `rfftn(x, axes=axes)` layout (and cuFFT's).
///
/// Errors: `fft_plan` rejects empty, unsorted, repeated or out-of-range axes, more than three
/// axes, and zero-sized shapes; `rfft`/`irfft` return [`Error::FftPlan`](crate::Error::FftPlan)
/// (with the plan's and the arrays' shapes) when the arrays do not match the plan.
///
/// ```
/// # fn demo<B: monomorph_core::Backend>(b: &B, x: &monomorph_core::Arr<B, monomorph_core::FloatOf<B>>)
/// #     -> monomorph_core::Result<()> {
/// use monomorph_core::{ComplexOf, FftPlan, FloatOf, Memory, Spectral};
/// let plan = b.fft_plan(&[64, 64, 64], &[0, 1, 2])?; // cached: cheap to ask again
/// let mut spec = b.zeros::<ComplexOf<B>>(plan.complex_shape())?; // (64, 64, 33)
/// b.rfft(&plan, x, &mut spec)?;
/// let mut back = b.zeros::<FloatOf<B>>(plan.real_shape())?;
/// b.irfft(&plan, &mut spec, &mut back)?; // = x · 64³; `spec` is clobbered
/// # Ok(()) }
/// ```
pub trait Spectral: BackendTypes {
    /// A plan for real arrays of `shape`, transforming `axes` (ascending, unique, 1 to 3 of
    /// them). The backend caches plans: calling this again for the same key is cheap.
    fn fft_plan(&self, shape: &[usize], axes: &[usize]) -> Result<Self::Fft>;
    /// Forward transform `out = rfft(input)`.
    fn rfft(
        &self,
        plan: &Self::Fft,
        input: &Arr<Self, FloatOf<Self>>,
        out: &mut Arr<Self, ComplexOf<Self>>,
    ) -> Result<()>;
    /// Inverse transform `out = irfft(input)` (unnormalised). `input` is used as scratch and
    /// holds garbage afterwards. The imaginary parts of the DC and Nyquist bins of the halved
    /// axis are ignored (as numpy's `irfftn` and cuFFT's c2r do).
    fn irfft(
        &self,
        plan: &Self::Fft,
        input: &mut Arr<Self, ComplexOf<Self>>,
        out: &mut Arr<Self, FloatOf<Self>>,
    ) -> Result<()>;
    /// Forward transform of an input known to be zero outside the box `[0, nonzero[k])` on
    /// every axis `k` (a template padded top-left into a large box). The result equals
    /// [`Spectral::rfft`]; a backend may skip the transforms of all-zero lines (the CPU
    /// backend skips them and reads only the nonzero planes on the first axis: a 32³ block in a
    /// 128³ box costs less than half a full transform). `nonzero` has one extent per axis
    /// (batch axes included), each at most the axis length; the input is not checked to be
    /// zero outside the box.
    fn rfft_pruned(
        &self,
        plan: &Self::Fft,
        input: &Arr<Self, FloatOf<Self>>,
        nonzero: &[usize],
        out: &mut Arr<Self, ComplexOf<Self>>,
    ) -> Result<()> {
        check_rfft_pruned_nonzero(plan.real_shape(), nonzero)?;
        self.rfft(plan, input, out)
    }
}

/// The argument checks of [`Spectral::fft_plan`], shared by the backends so that they fail
/// alike: 1 to [`MAX_FFT_AXES`] axes, each in range, unique and ascending; no zero-sized axis;
/// an element count (of the real array, and twice it) that fits in `usize`.
pub fn check_fft_plan(shape: &[usize], axes: &[usize]) -> Result<()> {
    if axes.is_empty() || axes.len() > MAX_FFT_AXES {
        return Err(Error::invalid(
            "axes",
            format!(
                "an FFT transforms 1 to {MAX_FFT_AXES} axes, got {} ({axes:?})",
                axes.len()
            ),
        ));
    }
    if let Some(&a) = axes.iter().find(|&&a| a >= shape.len()) {
        return Err(Error::invalid(
            "axes",
            format!(
                "axis {a} is out of range for a {}-d array of shape {}",
                shape.len(),
                fmt_shape(shape)
            ),
        ));
    }
    if let Some(w) = axes.windows(2).find(|w| w[0] >= w[1]) {
        let why = if w[0] == w[1] {
            format!("axis {} is repeated", w[0])
        } else {
            format!("{} comes before {}", w[0], w[1])
        };
        return Err(Error::invalid(
            "axes",
            format!("axes must be unique and ascending, got {axes:?} ({why})"),
        ));
    }
    if shape.contains(&0) {
        return Err(Error::Empty(format!(
            "shape {} of fft_plan",
            fmt_shape(shape)
        )));
    }
    let total = shape
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .and_then(|t| t.checked_mul(2));
    if total.is_none() {
        return Err(Error::invalid(
            "shape",
            format!("{} has more elements than fit in memory", fmt_shape(shape)),
        ));
    }
    Ok(())
}

/// A plan in words for [`Error::FftPlan`]: `real (…) ↔ complex (…) over axes […]`.
pub fn describe_fft_plan<F: FftPlan + ?Sized>(plan: &F) -> String {
    format!(
        "real {} ↔ complex {} over axes {:?}",
        fmt_shape(plan.real_shape()),
        fmt_shape(plan.complex_shape()),
        plan.axes()
    )
}

/// The argument checks of [`Spectral::rfft`], [`Spectral::irfft`] and
/// [`Spectral::rfft_pruned`] (`op` names which), shared by the backends: the real array has
/// the plan's real shape and the complex array its half-spectrum shape, else
/// [`Error::FftPlan`] with both. The real array is `out` of `irfft` and `input` otherwise.
pub fn check_fft_arrays<F: FftPlan + ?Sized>(
    plan: &F,
    op: &str,
    real: &[usize],
    complex: &[usize],
) -> Result<()> {
    if real != plan.real_shape() || complex != plan.complex_shape() {
        let (rn, cn) = if op == "irfft" {
            ("out", "input")
        } else {
            ("input", "out")
        };
        return Err(Error::FftPlan {
            plan: describe_fft_plan(plan),
            got: format!(
                "{op}: real `{rn}` {} and complex `{cn}` {}",
                fmt_shape(real),
                fmt_shape(complex)
            ),
        });
    }
    Ok(())
}

/// The argument checks of `nonzero` in [`Spectral::rfft_pruned`], shared by the backends: one
/// extent per axis of the real shape, each at most that axis's length.
pub fn check_rfft_pruned_nonzero(real_shape: &[usize], nonzero: &[usize]) -> Result<()> {
    if nonzero.len() != real_shape.len() {
        return Err(Error::shape(
            "`nonzero` of rfft_pruned",
            format!("{} extents (one per axis)", real_shape.len()),
            format!("{} ({nonzero:?})", nonzero.len()),
        ));
    }
    if let Some(k) = (0..nonzero.len()).find(|&k| nonzero[k] > real_shape[k]) {
        return Err(Error::invalid(
            "nonzero",
            format!(
                "extent {} on axis {k} exceeds the array's {} (shape {})",
                nonzero[k],
                real_shape[k],
                fmt_shape(real_shape)
            ),
        ));
    }
    Ok(())
}
