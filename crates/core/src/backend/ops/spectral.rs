use crate::backend::{Arr, BackendTypes, ComplexOf, FloatOf};
use crate::error::Result;

/// Real FFTs (r2c / c2r) over chosen axes, with plans built once per shape and cached.
///
/// The transform over `axes` halves the largest axis in `axes` (`n/2 + 1` complex values) and
/// runs complex transforms along the others; axes not listed are batch axes. Both directions
/// are unnormalised: `irfft(rfft(x)) = x · Π n_axis`.
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
    /// holds garbage afterwards.
    fn irfft(
        &self,
        plan: &Self::Fft,
        input: &mut Arr<Self, ComplexOf<Self>>,
        out: &mut Arr<Self, FloatOf<Self>>,
    ) -> Result<()>;
    /// Forward transform of an input known to be zero outside the box `[0, nonzero[k])` on
    /// every axis `k` (a template padded top-left into a large box). The result equals
    /// [`Spectral::rfft`]; a backend may skip the transforms of all-zero lines.
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
