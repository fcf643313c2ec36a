use crate::backend::{Arr, BackendTypes};
use crate::dtype::{Float, Real};
use crate::error::Result;

/// What a filter reads beyond the array's edge (scipy.ndimage's `mode`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BorderMode {
    /// `a a | a b c d | d d`
    Nearest,
    /// `d c b a | a b c d | d c b a` (scipy's default)
    Reflect,
    /// `c b | a b c d | c b`
    Mirror,
    /// `b c d | a b c d | a b c` (periodic)
    Wrap,
    /// A constant value (scipy's `cval`).
    Constant(f64),
}

/// Neighbourhood filters and peak-candidate compaction.
pub trait Filter: BackendTypes {
    /// scipy `maximum_filter(src, size=size, mode=mode, origin=0)`: a box of `size[k]` samples per
    /// axis (window `[i − s/2, i + s − s/2 − 1]`, asymmetric for even sizes), run as separable
    /// 1-D passes in O(1) per element whatever the size. Values are exact copies of inputs.
    fn max_filter<T: Real>(
        &self,
        src: &Arr<Self, T>,
        size: &[usize],
        mode: BorderMode,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// scipy `maximum_filter(src, footprint=footprint, mode=mode)` for an arbitrary boolean
    /// footprint (centre `shape // 2`), given on the host as a flat row-major mask of
    /// `footprint_shape`.
    fn max_filter_footprint<T: Real>(
        &self,
        src: &Arr<Self, T>,
        footprint: &[bool],
        footprint_shape: &[usize],
        mode: BorderMode,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// scipy `ndimage.laplace(src, mode=mode)`: Σ over axes of the [1, −2, 1] second difference.
    fn laplace<T: Float>(&self, src: &Arr<Self, T>, mode: BorderMode, dst: &mut Arr<Self, T>)
    -> Result<()>;
    /// Device-side compaction of peak candidates: the flat indices (raster order) and values of
    /// every element with `src == filtered`, `src > threshold` (strict; NaN never passes) and at
    /// least `border[k]` samples from both ends of every axis `k`. Only the (small) list
    /// crosses to the host.
    fn peak_candidates<T: Real>(
        &self,
        src: &Arr<Self, T>,
        filtered: &Arr<Self, T>,
        threshold: T,
        border: &[usize],
    ) -> Result<Vec<(usize, T)>>;
}
