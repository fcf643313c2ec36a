//! Shapes: pytme's fast FFT sizes and validation helpers.

use crate::error::{Error, Result, fmt_shape};

/// How the arrays here relate to the arrays pytme holds for the same data: pytme reads an MRC
/// file as `mrcfile data.T`, i.e. (x, y, z), where numpy, mrcfile and monomorph hold (z, y, x);
/// a `.npy` it holds as stored. Whatever pytme computes in its own axis order (the rfft half
/// grid its filters live on, the normal draws of its phase scrambling, the summation order
/// of a rotated sample's coordinate) is reproduced by computing it in that frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AxisOrder {
    /// The arrays are in pytme's order (axis 0 = x of an MRC file; a `.npy` as stored).
    Pytme,
    /// The arrays are pytme's reversed: (z, y, x), as numpy/mrcfile and monomorph read an MRC.
    #[default]
    Reversed,
}

impl AxisOrder {
    /// `perm[a]` = the array axis of pytme's axis `a`, for `ndim` axes.
    pub fn perm(self, ndim: usize) -> Vec<usize> {
        match self {
            AxisOrder::Pytme => (0..ndim).collect(),
            AxisOrder::Reversed => (0..ndim).rev().collect(),
        }
    }
}

/// The smallest `m >= n` of the form 2^a·3^b·5^c·7^d·11^e·13^f with e + f ≤ 1.
///
/// This is pyFFTW's `next_fast_len`, the rule pytme uses to pad the target, so circular
/// scores computed over `fast_shape(target)` agree with pytme's.
///
/// ```
/// use monomorph_core::next_fast_len;
/// assert_eq!(next_fast_len(1), 1);
/// assert_eq!(next_fast_len(97), 98);   // 2·7²
/// assert_eq!(next_fast_len(127), 128);
/// assert_eq!(next_fast_len(143), 144); // 143 = 11·13 has e+f = 2
/// ```
pub fn next_fast_len(n: usize) -> usize {
    if n <= 1 {
        return n.max(1);
    }
    let mut m = n;
    loop {
        if is_fast_len(m) {
            return m;
        }
        m += 1;
    }
}

/// `true` when `n` is 2^a·3^b·5^c·7^d·11^e·13^f with e + f ≤ 1.
pub fn is_fast_len(n: usize) -> bool {
    if n == 0 {
        return false;
    }
    let mut m = n;
    for p in [2usize, 3, 5, 7] {
        while m.is_multiple_of(p) {
            m /= p;
        }
    }
    m == 1 || m == 11 || m == 13
}

/// [`next_fast_len`] applied to every axis.
///
/// ```
/// assert_eq!(monomorph_core::fast_shape(&[127, 256, 33]), vec![128, 256, 33]);
/// ```
pub fn fast_shape(shape: &[usize]) -> Vec<usize> {
    shape.iter().map(|&n| next_fast_len(n)).collect()
}

/// Number of elements of a shape, `None` on overflow.
pub fn checked_len(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &s| acc.checked_mul(s))
}

/// Errors unless `got == expected`.
pub fn expect_shape(what: &str, expected: &[usize], got: &[usize]) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::shape(what, fmt_shape(expected), fmt_shape(got)))
    }
}

/// Errors when any axis is zero or the shape is empty (no axes).
pub fn expect_nonempty(what: &str, shape: &[usize]) -> Result<()> {
    if shape.is_empty() || shape.contains(&0) {
        Err(Error::Empty(format!("{what} {}", fmt_shape(shape))))
    } else {
        Ok(())
    }
}

/// Errors unless the array has `ndim` axes.
pub fn expect_ndim(what: &str, ndim: usize, shape: &[usize]) -> Result<()> {
    if shape.len() == ndim {
        Ok(())
    } else {
        Err(Error::shape(
            what,
            format!("{ndim} axes"),
            format!("{} axes {}", shape.len(), fmt_shape(shape)),
        ))
    }
}

/// Errors unless the two shapes are equal (the first is the one expected).
pub fn same_shape(what: &str, a: &[usize], b: &[usize]) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::shape(what, fmt_shape(a), fmt_shape(b)))
    }
}

/// Errors unless `shape` is a `(rows, n)` matrix; returns (rows, n).
pub fn rows_of(what: &str, shape: &[usize]) -> Result<(usize, usize)> {
    if shape.len() == 2 {
        Ok((shape[0], shape[1]))
    } else {
        Err(Error::shape(what, "(batch, n)", fmt_shape(shape)))
    }
}

/// Errors unless `v` has `rows` entries (one per batch row).
pub fn per_row<T>(what: &str, v: &[T], rows: usize) -> Result<()> {
    if v.len() == rows {
        Ok(())
    } else {
        Err(Error::shape(
            what,
            format!("{rows} per-row values"),
            format!("{} values", v.len()),
        ))
    }
}

/// Row-major strides (in elements) of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Shape of the half spectrum of a real transform over `axes` (last of them halved: n/2+1).
pub fn rfft_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    let mut out = shape.to_vec();
    if let Some(&last) = axes.iter().max() {
        out[last] = shape[last] / 2 + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_len_matches_pyfftw_rule() {
        // 143 = 11·13 has e+f = 2: not fast; 144 = 2^4·3^2 is.
        assert!(!is_fast_len(143));
        assert_eq!(next_fast_len(143), 144);
        assert_eq!(next_fast_len(121), 125); // 11² not allowed
        assert_eq!(next_fast_len(11), 11);
        assert_eq!(next_fast_len(13), 13);
        assert_eq!(next_fast_len(26), 26);
        assert_eq!(next_fast_len(17), 18);
        assert_eq!(next_fast_len(48), 48);
        assert_eq!(next_fast_len(257), 260);
        assert_eq!(next_fast_len(0), 1);
    }

    #[test]
    fn rfft_shape_halves_last_axis() {
        assert_eq!(rfft_shape(&[4, 6, 8], &[0, 1, 2]), vec![4, 6, 5]);
        assert_eq!(rfft_shape(&[4, 6, 8], &[1]), vec![4, 4, 8]);
    }
}
