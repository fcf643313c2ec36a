use crate::backend::{AccumOf, Arr, BackendTypes};
use crate::dtype::{Float, Real};
use crate::error::{Error, Result};
use num_traits::{Float as _, Zero};

/// Reductions. Sums and dot products accumulate in the backend's overflow-safe type
/// [`AccumOf<Self>`](crate::AccumOf) ([`Precision::Accum`](crate::Precision::Accum), `f64`
/// today) and return it; every call synchronises and returns host values.
///
/// NaN handling: `min`, `max`, `argmax` and `top_k` ignore NaN; an array that is all NaN has
/// no max (`Error::NonFinite`). Empty arrays give `Error::Empty`.
pub trait Reduce: BackendTypes {
    /// Σ a, in the accumulator type.
    fn sum<T: Real>(&self, a: &Arr<Self, T>) -> Result<AccumOf<Self>>;
    /// Σ a², in the accumulator type.
    fn sum_sq<T: Float>(&self, a: &Arr<Self, T>) -> Result<AccumOf<Self>>;
    /// Σ a·b, in the accumulator type.
    fn dot<T: Float>(&self, a: &Arr<Self, T>, b: &Arr<Self, T>) -> Result<AccumOf<Self>>;
    /// Smallest value (NaN ignored).
    fn min<T: Real>(&self, a: &Arr<Self, T>) -> Result<T>;
    /// Largest value (NaN ignored).
    fn max<T: Real>(&self, a: &Arr<Self, T>) -> Result<T>;
    /// Flat index and value of the largest element; ties give the lowest index.
    fn argmax<T: Real>(&self, a: &Arr<Self, T>) -> Result<(usize, T)>;
    /// The `k` largest elements as (flat index, value), descending; ties in index order.
    fn top_k<T: Real>(&self, a: &Arr<Self, T>, k: usize) -> Result<Vec<(usize, T)>>;
    /// Number of NaN or infinite elements.
    fn count_nonfinite<T: Float>(&self, a: &Arr<Self, T>) -> Result<usize>;
    /// Per-row Σ of a (rows × n) array: one launch for all rows.
    fn sum_rows<T: Float>(&self, a: &Arr<Self, T>) -> Result<Vec<AccumOf<Self>>>;
    /// Per-row Σ a·b of two (rows × n) arrays.
    fn dot_rows<T: Float>(&self, a: &Arr<Self, T>, b: &Arr<Self, T>) -> Result<Vec<AccumOf<Self>>>;
    /// Per-row Σ a² of a (rows × n) array.
    fn sum_sq_rows<T: Float>(&self, a: &Arr<Self, T>) -> Result<Vec<AccumOf<Self>>>;

    /// Mean and population standard deviation, in the accumulator type (default: from `sum`
    /// and `sum_sq`).
    fn mean_std<T: Float>(&self, a: &Arr<Self, T>) -> Result<(AccumOf<Self>, AccumOf<Self>)> {
        use crate::backend::ArrayMeta;
        let n = a.len();
        check_reduce_nonempty(n)?;
        let s = self.sum(a)?;
        let s2 = self.sum_sq(a)?;
        let nf = <AccumOf<Self> as Real>::from_f64(n as f64);
        let mean = s / nf;
        let var = (s2 / nf - mean * mean).max(AccumOf::<Self>::zero());
        Ok((mean, var.sqrt()))
    }
    /// Arithmetic mean in the accumulator type.
    fn mean<T: Float>(&self, a: &Arr<Self, T>) -> Result<AccumOf<Self>> {
        Ok(self.mean_std(a)?.0)
    }
    /// Population standard deviation in the accumulator type.
    fn std<T: Float>(&self, a: &Arr<Self, T>) -> Result<AccumOf<Self>> {
        Ok(self.mean_std(a)?.1)
    }
}

/// The argument check of [`Reduce::dot`] and [`Reduce::dot_rows`] (`op` names which), shared
/// by the backends: `b` has `a`'s shape.
pub fn check_dot(op: &str, a: &[usize], b: &[usize]) -> Result<()> {
    super::same_shape_named(|| format!("{op}: b vs a"), a, b)
}

/// The argument check of the per-row reductions (`sum_rows`, `dot_rows`, `sum_sq_rows`; `op`
/// names which), shared by the backends: `a` is a `(rows, n)` array. Returns `(rows, n)`.
pub fn check_rows(op: &str, a: &[usize]) -> Result<(usize, usize)> {
    super::rows_of_named(|| format!("a of {op}"), a)
}

/// The argument check of the reductions that need data (`min`, `max`, `argmax`,
/// `mean_std`), shared by the backends: `a` has `n > 0` elements, else [`Error::Empty`].
pub fn check_reduce_nonempty(n: usize) -> Result<()> {
    if n == 0 {
        Err(Error::Empty("a".into()))
    } else {
        Ok(())
    }
}

/// The error of `min`, `max` and `argmax` on an array of `n` elements that are all NaN (there
/// is no extreme to return), the same on every backend.
pub fn all_nan_error(n: usize) -> Error {
    Error::NonFinite {
        what: "a (all NaN)".into(),
        count: n,
    }
}
