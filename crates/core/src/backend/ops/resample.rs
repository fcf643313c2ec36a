use crate::backend::{Arr, BackendTypes};
use crate::dtype::{Element, Float};
use crate::error::{Error, Result, fmt_shape};
use crate::shape::AxisOrder;

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
///
/// Every op checks its arguments and returns [`Error::Shape`](crate::Error::Shape) (with the
/// numbers) for a rank mismatch, a per-axis list of the wrong length or a window that does not
/// fit; zero-sized arrays are valid where the result is defined (nothing to do).
pub trait Resample: BackendTypes {
    /// Places `src` into `dst` starting at index `before` on every axis and fills the rest by
    /// `mode` (`np.pad(src, [(before, dst − before − src)], mode)`), any rank.
    /// `before[k] + src.shape[k] <= dst.shape[k]`. `before = 0` is a top-left pad. A symmetric
    /// pad wider than the source repeats the reflection, as numpy does.
    fn pad<T: Float>(
        &self,
        src: &Arr<Self, T>,
        before: &[usize],
        mode: PadMode,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `dst = src[offset .. offset + dst.shape]` on every axis (any rank); the window must lie
    /// inside `src`.
    fn crop<T: Element>(
        &self,
        src: &Arr<Self, T>,
        offset: &[usize],
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `dst = src` reversed along `axes` (`np.flip(src, axes)`); `dst` has `src`'s shape, each
    /// axis `< ndim` and listed at most once.
    fn flip<T: Element>(
        &self,
        src: &Arr<Self, T>,
        axes: &[usize],
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `dst = np.roll(src, shifts, axis=range(ndim))`: one shift per axis, negative and
    /// larger-than-the-axis shifts wrap (`dst[i] = src[(i − shift) mod n]`).
    fn roll<T: Element>(
        &self,
        src: &Arr<Self, T>,
        shifts: &[isize],
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// In-place cubic B-spline prefilter: turns samples into spline coefficients exactly as
    /// scipy's `affine_transform(…, order=3, mode="constant", prefilter=True)` does before
    /// interpolating: `spline_filter1d(order=3)` along every axis with the *mirror* boundary
    /// (pole √3 − 2, gain 6, scipy's `_init_causal_mirror` / `_init_anticausal_mirror`), no
    /// pre-padding (scipy pads only for modes "nearest" and "grid-constant"). Axes of length
    /// 1 are left alone. The recursion runs in `f64`; scipy keeps the coefficients in `f64`,
    /// while an `f32` array stores them rounded to `f32` (after each axis), which moves a
    /// rotated template by at most ~1 `f32` ulp.
    fn spline_prefilter<T: Float>(&self, a: &mut Arr<Self, T>) -> Result<()>;
    /// Pull-back resampling, scipy `affine_transform(src, matrix, offset, order, mode="constant",
    /// cval=0, prefilter=False)`: `dst[o] = interp(src, matrix·o + offset)` in array-index
    /// coordinates. `matrix` is d×d row-major, `offset` has d entries; `src` and `dst` have d
    /// axes, d = 1, 2 or 3 (their shapes may differ). For [`Interpolation::Cubic`] `src` holds
    /// spline coefficients (call [`Resample::spline_prefilter`] first to interpolate samples;
    /// without it the cubic B-spline smooths, as pytme does to its masks).
    ///
    /// scipy's "constant" rules, followed exactly: a coordinate `x` is computed in `f64` as
    /// `((offset[h] + o_0·matrix[h][0]) + o_1·matrix[h][1]) + …` (scipy ≥ 1.6's order: the sum
    /// starts from the offset, so points that land exactly on an edge land on the same side as
    /// in scipy), and if `x < 0` or `x > n − 1` on any axis the output is 0;
    /// otherwise the taps `floor(x) − 1 ..= floor(x) + 2` (cubic) or `floor(x) ..= floor(x) + 1`
    /// (linear) that fall outside the array read mirrored coefficients (`−1 → 1`, `n → n − 2`).
    /// The sum is formed in `f64` and rounded to `T` once.
    ///
    /// To rotate a volume by `R` about `c = (n − 1)/2` the pytme way (`t_R[o] = t[R(o − c) + c]`):
    /// `matrix = R`, `offset = c − R·c`.
    ///
    /// Errors: `matrix.len() != d·d`, `offset.len() != d`, rank mismatch or d ∉ {1, 2, 3}
    /// ([`Error::Shape`](crate::Error::Shape)); a non-finite matrix or offset entry
    /// ([`Error::NonFinite`](crate::Error::NonFinite)); an empty `src` with a non-empty `dst`
    /// ([`Error::Empty`](crate::Error::Empty)).
    fn affine_transform<T: Float>(
        &self,
        src: &Arr<Self, T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// [`Resample::affine_transform`] of the array reversed on every axis, reversed back:
    /// `flip(affine_transform(flip(src), matrix, offset))`, in one pass and without reversing
    /// anything. This is how pytme rotates a template: its `MatchingData` hands the scores the
    /// template reversed, and the rotation about the centre is applied to that. In exact
    /// arithmetic it equals the transform of `src` with `offset' = (n_src − 1) − matrix·(n_dst
    /// − 1) − offset`, but sample points that land exactly on the box edge (common: pytme's
    /// Karney rotations have many entries ±1 or 0, and `c − R·c` is rounded to `f32`) fall
    /// inside or outside by the round-off of the coordinate, which differs between the two
    /// ways of computing it. So the coordinate and the in/out test are scipy's for the
    /// reversed arrays: for output index `o`, `y = Σ (n_dst − 1 − o)·matrix + offset` in
    /// [`Resample::affine_transform`]'s order, 0 where `y < 0` or `y > n_src − 1` on an axis,
    /// else the spline of `src` at `(n_src − 1) − y` (the same taps and weights as scipy's at
    /// `y` in the reversed coefficients, whose spline filter is the reversal of `src`'s).
    ///
    /// Errors: those of [`Resample::affine_transform`].
    fn affine_transform_reversed<T: Float>(
        &self,
        src: &Arr<Self, T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        dst: &mut Arr<Self, T>,
    ) -> Result<()> {
        self.affine_transform_reversed_in(src, matrix, offset, interp, AxisOrder::Pytme, dst)
    }
    /// [`Resample::affine_transform_reversed`] as pytme computes it when it holds these arrays
    /// in `frame` ([`AxisOrder`]). [`AxisOrder::Pytme`]: the same arrays, the reversed
    /// transform itself. [`AxisOrder::Reversed`] (pytme holds the transpose, as it reads an MRC
    /// file): `matrix` and `offset` are the transposed frame's (`P·R·P`, `P·offset`), and
    /// pytme's scipy call sums each coordinate in its own axis order, i.e. from the last axis
    /// here to the first: `y_h = ((offset[h] + o_{d−1}·matrix[h][d−1]) + o_{d−2}·…) + o_0·…`
    /// (mirrored `o` as above), so that points on the box edge fall on pytme's side. Everything
    /// else is as in [`Resample::affine_transform_reversed`].
    ///
    /// Errors: those of [`Resample::affine_transform`].
    fn affine_transform_reversed_in<T: Float>(
        &self,
        src: &Arr<Self, T>,
        matrix: &[f64],
        offset: &[f64],
        interp: Interpolation,
        frame: AxisOrder,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
}

/// `expected` entries (one per axis) in the per-axis list `what`.
fn check_per_axis(what: &str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::shape(
            what,
            format!("{expected} entries (one per axis)"),
            format!("{got} entries"),
        ))
    }
}

/// `dst` has as many axes as `src` (their lengths may differ).
fn check_same_rank(what: &str, src: &[usize], dst: &[usize]) -> Result<()> {
    if src.len() == dst.len() {
        Ok(())
    } else {
        Err(Error::shape(
            what,
            format!("{} axes like src {}", src.len(), fmt_shape(src)),
            format!("{} axes {}", dst.len(), fmt_shape(dst)),
        ))
    }
}

/// The argument checks of [`Resample::pad`], shared by the backends so that they fail alike:
/// `dst` of `src`'s rank, one `before` per axis, `before[k] + src[k] <= dst[k]` (without
/// overflow), and a symmetric pad has data to reflect on every axis that `dst` extends.
pub fn check_pad(src: &[usize], before: &[usize], mode: PadMode, dst: &[usize]) -> Result<()> {
    check_same_rank("pad: dst", src, dst)?;
    check_per_axis("pad: before", src.len(), before.len())?;
    for k in 0..src.len() {
        if before[k].checked_add(src[k]).is_none_or(|e| e > dst[k]) {
            return Err(Error::shape(
                format!("pad: dst axis {k}"),
                format!("at least before[{k}] + src = {} + {}", before[k], src[k]),
                format!("{} (dst {})", dst[k], fmt_shape(dst)),
            ));
        }
        if mode == PadMode::Symmetric && src[k] == 0 && dst[k] > 0 {
            return Err(Error::Empty(format!(
                "pad: src {} (symmetric padding needs data on axis {k})",
                fmt_shape(src)
            )));
        }
    }
    Ok(())
}

/// The argument checks of [`Resample::crop`], shared by the backends: `dst` of `src`'s rank,
/// one offset per axis, and the window `offset[k] + dst[k] <= src[k]` (without overflow).
pub fn check_crop(src: &[usize], offset: &[usize], dst: &[usize]) -> Result<()> {
    check_same_rank("crop: dst", src, dst)?;
    check_per_axis("crop: offset", src.len(), offset.len())?;
    for k in 0..src.len() {
        if offset[k].checked_add(dst[k]).is_none_or(|e| e > src[k]) {
            return Err(Error::shape(
                format!("crop: window on axis {k}"),
                format!("offset + dst <= src = {} (src {})", src[k], fmt_shape(src)),
                format!("{} + {} (dst {})", offset[k], dst[k], fmt_shape(dst)),
            ));
        }
    }
    Ok(())
}

/// The argument checks of [`Resample::flip`]: `dst` of `src`'s shape, then
/// [`check_flip_axes`]. Returns which axes are flipped.
pub fn check_flip(src: &[usize], axes: &[usize], dst: &[usize]) -> Result<Vec<bool>> {
    if src != dst {
        return Err(Error::shape("flip: dst", fmt_shape(src), fmt_shape(dst)));
    }
    check_flip_axes(src.len(), axes)
}

/// The argument checks of [`Resample::roll`], shared by the backends: `dst` of `src`'s shape
/// and one shift per axis.
pub fn check_roll(src: &[usize], shifts: &[isize], dst: &[usize]) -> Result<()> {
    if src != dst {
        return Err(Error::shape("roll: dst", fmt_shape(src), fmt_shape(dst)));
    }
    check_per_axis("roll: shifts", src.len(), shifts.len())
}

/// The argument checks of [`Resample::flip`], shared by the backends so that they fail alike:
/// each axis below `ndim` and listed at most once. Returns which axes are flipped.
pub fn check_flip_axes(ndim: usize, axes: &[usize]) -> Result<Vec<bool>> {
    let mut flipped = vec![false; ndim];
    for &a in axes {
        if a >= ndim {
            return Err(Error::invalid(
                "flip: axes",
                format!("axis {a} is out of range for {ndim} axes"),
            ));
        }
        if flipped[a] {
            return Err(Error::invalid(
                "flip: axes",
                format!("axis {a} is repeated"),
            ));
        }
        flipped[a] = true;
    }
    Ok(flipped)
}

/// The argument checks of [`Resample::affine_transform`], shared by the backends so that they
/// fail alike (the errors listed there). Returns `false` when `dst` is empty (nothing to do).
pub fn check_affine_transform(
    src: &[usize],
    dst: &[usize],
    matrix: &[f64],
    offset: &[f64],
) -> Result<bool> {
    if src.len() != dst.len() {
        return Err(Error::shape(
            "affine_transform: dst",
            format!("{} axes like src {}", src.len(), fmt_shape(src)),
            format!("{} axes {}", dst.len(), fmt_shape(dst)),
        ));
    }
    let d = src.len();
    if !(1..=3).contains(&d) {
        return Err(Error::shape(
            "affine_transform: src",
            "1, 2 or 3 axes",
            format!("{d} axes {}", fmt_shape(src)),
        ));
    }
    if matrix.len() != d * d {
        return Err(Error::shape(
            "affine_transform: matrix",
            format!("{d}x{d} = {} entries (row-major)", d * d),
            format!("{} entries", matrix.len()),
        ));
    }
    if offset.len() != d {
        return Err(Error::shape(
            "affine_transform: offset",
            format!("{d} entries (one per axis)"),
            format!("{} entries", offset.len()),
        ));
    }
    for (what, v) in [
        ("affine_transform: matrix", matrix),
        ("affine_transform: offset", offset),
    ] {
        let bad = v.iter().filter(|x| !x.is_finite()).count();
        if bad > 0 {
            return Err(Error::NonFinite {
                what: what.into(),
                count: bad,
            });
        }
    }
    if dst.iter().product::<usize>() == 0 {
        return Ok(false);
    }
    if src.iter().product::<usize>() == 0 {
        return Err(Error::Empty(format!(
            "affine_transform: src {}",
            fmt_shape(src)
        )));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flip_axes_reject_repeats_and_out_of_range() {
        assert_eq!(
            check_flip_axes(3, &[2, 0]).unwrap(),
            vec![true, false, true]
        );
        assert!(
            check_flip_axes(3, &[1, 1])
                .unwrap_err()
                .to_string()
                .contains("repeated")
        );
        assert!(check_flip_axes(2, &[2]).is_err());
    }

    #[test]
    fn affine_checks() {
        let id = [1.0, 0.0, 0.0, 1.0];
        assert!(check_affine_transform(&[4, 4], &[3, 3], &id, &[0.0; 2]).unwrap());
        assert!(!check_affine_transform(&[4, 4], &[0, 3], &id, &[0.0; 2]).unwrap());
        let e = check_affine_transform(&[0, 4], &[3, 3], &id, &[0.0; 2]).unwrap_err();
        assert!(matches!(e, Error::Empty(_)), "{e}");
        assert!(check_affine_transform(&[4; 4], &[4; 4], &[0.0; 16], &[0.0; 4]).is_err());
        assert!(check_affine_transform(&[4, 4], &[4], &id, &[0.0; 2]).is_err());
        let e = check_affine_transform(&[4, 4], &[4, 4], &[f64::NAN, 0.0, 0.0, 1.0], &[0.0; 2]);
        assert!(matches!(e, Err(Error::NonFinite { count: 1, .. })));
    }
}
