use crate::backend::{Arr, BackendTypes};
use crate::dtype::{Element, Float};
use crate::error::Result;

/// Interpolation order for [`Resample::affine_transform`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interpolation {
    /// Order 1 (trilinear / bilinear).
    Linear,
    /// Order 3 B-spline; the source must be spline coefficients (see
    /// [`Resample::spline_prefilter`]) to interpolate, or raw values to smooth (pytme's masks).
    #[default]
    Cubic,
}

/// How [`Resample::pad`] fills the margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    /// Zeros.
    Zero,
    /// numpy's `mode="symmetric"` (edge sample repeated: `d c b a | a b c d | d c b a`).
    Symmetric,
}

/// Spatial rearrangements and resampling.
pub trait Resample: BackendTypes {
    /// Places `src` into `dst` starting at index `before` on every axis and fills the rest by
    /// `mode`. `before[k] + src.shape[k] <= dst.shape[k]`. `before = 0` is a top-left pad.
    fn pad<T: Float>(
        &self,
        src: &Arr<Self, T>,
        before: &[usize],
        mode: PadMode,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `dst = src[offset .. offset + dst.shape]` on every axis.
    fn crop<T: Element>(&self, src: &Arr<Self, T>, offset: &[usize], dst: &mut Arr<Self, T>)
    -> Result<()>;
    /// `dst = src` reversed along `axes`.
    fn flip<T: Element>(&self, src: &Arr<Self, T>, axes: &[usize], dst: &mut Arr<Self, T>)
    -> Result<()>;
    /// `dst = np.roll(src, shifts)` (one shift per axis, periodic).
    fn roll<T: Element>(&self, src: &Arr<Self, T>, shifts: &[isize], dst: &mut Arr<Self, T>)
    -> Result<()>;
    /// In-place cubic B-spline prefilter: turns samples into spline coefficients exactly as
    /// scipy's `spline_filter(order=3)` does for `affine_transform(mode="constant")`
    /// (mirror boundary).
    fn spline_prefilter<T: Float>(&self, a: &mut Arr<Self, T>) -> Result<()>;
    /// Pull-back resampling, scipy `affine_transform(src, matrix, offset, order, mode="constant",
    /// cval=0, prefilter=False)`: `dst[o] = interp(src, matrix·o + offset)` in array-index
    /// coordinates. `matrix` is d×d row-major, `offset` has d entries; `src` and `dst` have d
    /// axes (their shapes may differ). For [`Interpolation::Cubic`] `src` holds spline
    /// coefficients (call [`Resample::spline_prefilter`] first to interpolate samples).
    fn affine_transform<T: Float>(
        &self,
        src: &Arr<Self, T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
}
