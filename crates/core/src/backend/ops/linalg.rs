use crate::backend::{Arr, BackendTypes};
use crate::dtype::{Element, Float};
use crate::error::Result;

/// A CSR sparse matrix on a backend, shared by every batch entry (`data` of shape `(nnz,)`) or
/// one per entry with a common pattern (`data` of shape `(batch, nnz)`).
///
/// Build it with `crate::algo` helpers or [`CsrMatrix::from_parts`], which validate the
/// structure (sorted, in-range indices) before anything reaches the device.
pub struct CsrMatrix<B: BackendTypes, T: Element> {
    /// Number of rows.
    pub nrows: usize,
    /// Number of columns.
    pub ncols: usize,
    /// Row pointers, `nrows + 1` entries.
    pub indptr: Arr<B, i64>,
    /// Column indices, `nnz` entries, sorted within each row.
    pub indices: Arr<B, i64>,
    /// Values: `(nnz,)` shared or `(batch, nnz)` per entry.
    pub data: Arr<B, T>,
}

impl<B: BackendTypes, T: Element> CsrMatrix<B, T> {
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        use crate::backend::ArrayMeta;
        self.indices.len()
    }
}

/// Which boundary a Laplacian stencil uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Boundary {
    /// Values outside the grid are zero (negative definite operator).
    #[default]
    DirichletZero,
    /// Periodic wrap-around (singular: constants are in the null space).
    Periodic,
}

/// Batched linear algebra: one system per row of a `(batch, n)` array.
pub trait Linalg: BackendTypes + crate::backend::Reduce {
    /// `y[b] = A · x[b]` for a dense `A` of shape `(m, n)` shared by all entries, or
    /// `(batch, m, n)` one per entry. `x`: `(batch, n)`, `y`: `(batch, m)`.
    fn matvec_dense<T: Float>(
        &self,
        a: &Arr<Self, T>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `y[b] = A_b · x[b]` for a CSR matrix. `x`: `(batch, ncols)`, `y`: `(batch, nrows)`.
    fn matvec_csr<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `y[b] = Δ x[b]`: the 3/5/7-point Laplacian with h = 1 on a row-major grid of shape
    /// `grid` (1 to 3 axes; centre −2·ndim, neighbours +1), as PhiFlow's `laplace`.
    /// `x`, `y`: `(batch, Π grid)`.
    fn laplacian<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `x[b] = alpha[b] · x[b]`.
    fn scale_rows<T: Float>(&self, alpha: &[T], x: &mut Arr<Self, T>) -> Result<()>;
    /// `y[b] = y[b] + alpha[b] · x[b]`.
    fn axpy_rows<T: Float>(&self, alpha: &[T], x: &Arr<Self, T>, y: &mut Arr<Self, T>)
    -> Result<()>;
    /// `y[b] = x[b] + beta[b] · y[b]` (CG's direction update).
    fn xpay_rows<T: Float>(&self, x: &Arr<Self, T>, beta: &[T], y: &mut Arr<Self, T>)
    -> Result<()>;

    /// Fused CG step: `x[b] += alpha[b]·d[b]`, `r[b] −= alpha[b]·q[b]`, returning `r[b]·r[b]`
    /// (f64) for every row, in one pass over the vectors.
    fn cg_update_xr<T: Float>(
        &self,
        alpha: &[T],
        d: &Arr<Self, T>,
        q: &Arr<Self, T>,
        x: &mut Arr<Self, T>,
        r: &mut Arr<Self, T>,
    ) -> Result<Vec<f64>> {
        self.axpy_rows(alpha, d, x)?;
        let neg: Vec<T> = alpha.iter().map(|&a| -a).collect();
        self.axpy_rows(&neg, q, r)?;
        self.sum_sq_rows(r)
    }
}
