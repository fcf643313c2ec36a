use crate::backend::{Arr, ArrayMeta, BackendTypes, Memory};
use crate::dtype::{Element, Float, Real};
use crate::error::{Error, Result};

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
    /// Any rank; `size` has one entry per axis, each ≥ 1 (a window larger than the axis is
    /// fine: the border `mode` extends the line as scipy does, repeating reflections).
    /// NaN inputs never panic, but a window reaching a NaN may give NaN or its largest number
    /// depending on position (scipy is order dependent there too). Errors: shape mismatch,
    /// wrong `size` length, a zero size, `BorderMode::Constant(NaN)`.
    fn max_filter<T: Real>(
        &self,
        src: &Arr<Self, T>,
        size: &[usize],
        mode: BorderMode,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// scipy `maximum_filter(src, footprint=footprint, mode=mode)` for an arbitrary boolean
    /// footprint (centre `shape // 2`), given on the host as a flat row-major mask of
    /// `footprint_shape` (same rank as `src`; at least one `true`). Brute force: cost grows
    /// with the number of `true` entries.
    fn max_filter_footprint<T: Real>(
        &self,
        src: &Arr<Self, T>,
        footprint: &[bool],
        footprint_shape: &[usize],
        mode: BorderMode,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// scipy `ndimage.laplace(src, mode=mode)`: Σ over axes of the [1, −2, 1] second difference.
    /// As scipy: each axis's difference is formed in `f64` (`x·(−2) + (x₋₁ + x₊₁)`), rounded to
    /// `T`, and the axes are summed in `T` in axis order (bit-identical for `f32`).
    fn laplace<T: Float>(
        &self,
        src: &Arr<Self, T>,
        mode: BorderMode,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
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

    /// The values of `src` at the given flat (row-major) indices, in the order given: how a short
    /// list of peak positions reads a per-voxel map (a rotation-index map, a score map) without
    /// the caller copying the map to the host. An index `>= src.len()` is an
    /// [`Error::InvalidArgument`].
    ///
    /// Default body: [`Memory::download`] and indexing on the host; a device backend overrides
    /// it with a gather kernel so that only `indices.len()` values cross.
    fn gather<T: Element>(&self, src: &Arr<Self, T>, indices: &[usize]) -> Result<Vec<T>>
    where
        Self: Memory,
    {
        let n = src.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::invalid(
                "indices",
                format!("flat index {bad} is out of range for an array of {n} elements"),
            ));
        }
        if indices.is_empty() {
            return Ok(Vec::new());
        }
        let host = self.download(src)?;
        let flat = host.as_slice().ok_or_else(|| Error::Backend {
            backend: "host",
            message: "downloaded array is not contiguous".into(),
        })?;
        Ok(indices.iter().map(|&i| flat[i]).collect())
    }
}
