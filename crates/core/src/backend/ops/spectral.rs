use crate::backend::{Arr, BackendTypes, ComplexOf, FloatOf};
use crate::error::Result;

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
        let _ = nonzero;
        self.rfft(plan, input, out)
    }
}
