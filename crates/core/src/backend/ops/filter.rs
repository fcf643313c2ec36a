use crate::backend::{Arr, ArrayMeta, BackendTypes, Memory};
use crate::dtype::{Element, Float, Real};
use crate::error::{Error, Result, fmt_shape};

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
    /// depending on position (scipy is order dependent there too). The passes run in
    /// [`max_filter_pass_order`] on every backend and whatever the thread count, so that
    /// outcome is the same everywhere. Errors: shape mismatch,
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
        check_gather(src.len(), indices)?;
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

/// `dst` (or `filtered`) has `src`'s shape.
fn check_same(what: &str, src: &[usize], other: &[usize]) -> Result<()> {
    if src == other {
        Ok(())
    } else {
        Err(Error::shape(what, fmt_shape(src), fmt_shape(other)))
    }
}

/// A border mode a filter can use: `BorderMode::Constant` needs a number (NaN is refused).
pub fn check_border_mode(mode: BorderMode) -> Result<()> {
    match mode {
        BorderMode::Constant(c) if c.is_nan() => Err(Error::invalid(
            "mode",
            "BorderMode::Constant(cval) needs a number, got NaN",
        )),
        _ => Ok(()),
    }
}

/// One entry per axis of `shape` in the list `what`.
fn check_per_axis(what: &str, shape: &[usize], got: usize) -> Result<()> {
    if got == shape.len() {
        Ok(())
    } else {
        Err(Error::shape(
            what,
            format!(
                "{} entries (one per axis of {})",
                shape.len(),
                fmt_shape(shape)
            ),
            format!("{got} entries"),
        ))
    }
}

/// The axes [`Filter::max_filter`] filters (those with a window > 1), in the order every
/// backend runs its 1-D passes: for 3 or more axes the last, then the second last, then the
/// leading axes in order (the last two axes are filtered plane by plane while a plane is in
/// cache); for 1 or 2 axes in order. Where no NaN is within reach the order does not change
/// the result; where one is, the passes do not commute, so a backend or a thread count that
/// took another order would give another answer.
///
/// ```
/// use monomorph_core::max_filter_pass_order;
/// assert_eq!(max_filter_pass_order(&[5, 5, 5]), vec![2, 1, 0]);
/// assert_eq!(max_filter_pass_order(&[3, 1, 4, 1]), vec![2, 0]);
/// assert_eq!(max_filter_pass_order(&[3, 4]), vec![0, 1]);
/// ```
pub fn max_filter_pass_order(size: &[usize]) -> Vec<usize> {
    let r = size.len();
    let axes: Vec<usize> = if r >= 3 {
        [r - 1, r - 2].into_iter().chain(0..r - 2).collect()
    } else {
        (0..r).collect()
    };
    axes.into_iter().filter(|&k| size[k] > 1).collect()
}

/// The argument checks of [`Filter::max_filter`], shared by the backends so that they fail
/// alike: `dst` of `src`'s shape, a usable `mode`, one window size per axis, none zero.
pub fn check_max_filter(
    src: &[usize],
    size: &[usize],
    mode: BorderMode,
    dst: &[usize],
) -> Result<()> {
    check_same("max_filter: dst", src, dst)?;
    check_border_mode(mode)?;
    check_per_axis("max_filter: size", src, size.len())?;
    if let Some(k) = size.iter().position(|&s| s == 0) {
        return Err(Error::invalid(
            "max_filter: size",
            format!("window size on axis {k} is 0; sizes must be >= 1"),
        ));
    }
    Ok(())
}

/// The argument checks of [`Filter::max_filter_footprint`], shared by the backends: `dst` of
/// `src`'s shape, a usable `mode`, a footprint shape of `src`'s rank, one flag per footprint
/// element, at least one `true`.
pub fn check_max_filter_footprint(
    src: &[usize],
    footprint: &[bool],
    footprint_shape: &[usize],
    mode: BorderMode,
    dst: &[usize],
) -> Result<()> {
    check_same("max_filter_footprint: dst", src, dst)?;
    check_border_mode(mode)?;
    if footprint_shape.len() != src.len() {
        return Err(Error::shape(
            "max_filter_footprint: footprint_shape",
            format!("{} axes like src {}", src.len(), fmt_shape(src)),
            format!(
                "{} axes {}",
                footprint_shape.len(),
                fmt_shape(footprint_shape)
            ),
        ));
    }
    let flen = crate::shape::checked_len(footprint_shape);
    if flen != Some(footprint.len()) {
        return Err(Error::shape(
            "max_filter_footprint: footprint",
            format!(
                "{} entries for shape {}",
                flen.map_or_else(|| "more".to_string(), |n| n.to_string()),
                fmt_shape(footprint_shape)
            ),
            format!("{} entries", footprint.len()),
        ));
    }
    if !footprint.iter().any(|&v| v) {
        return Err(Error::invalid(
            "max_filter_footprint: footprint",
            "has no true entry (an empty neighbourhood)",
        ));
    }
    Ok(())
}

/// The argument checks of [`Filter::laplace`], shared by the backends: `dst` of `src`'s
/// shape and a usable `mode`.
pub fn check_laplace(src: &[usize], mode: BorderMode, dst: &[usize]) -> Result<()> {
    check_same("laplace: dst", src, dst)?;
    check_border_mode(mode)
}

/// The argument checks of [`Filter::peak_candidates`], shared by the backends: `filtered` of
/// `src`'s shape and one border width per axis.
pub fn check_peak_candidates(src: &[usize], filtered: &[usize], border: &[usize]) -> Result<()> {
    check_same("peak_candidates: filtered", src, filtered)?;
    check_per_axis("peak_candidates: border", src, border.len())
}

/// The argument checks of [`Filter::gather`], shared by the backends: every flat index below
/// the array's length `n`.
pub fn check_gather(n: usize, indices: &[usize]) -> Result<()> {
    if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
        return Err(Error::invalid(
            "indices",
            format!("flat index {bad} is out of range for an array of {n} elements"),
        ));
    }
    Ok(())
}
