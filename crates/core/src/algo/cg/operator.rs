//! Linear operators a batched CG can apply: dense, CSR and matrix-free (Laplacian stencil).

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::backend::{
    AccumOf, Arr, ArrayMeta, BackendTypes, Boundary, CsrMatrix, FloatOf, Linalg, Memory, Reduce,
};
use crate::dtype::Real;
use crate::error::{Error, Result, fmt_shape};
use num_traits::Zero as _;

use super::NullSpace;

/// A square linear operator applied to a whole batch at once: `y[b] = A_b · x[b]` for
/// `x`, `y` of shape `(batch, n)`.
///
/// Implement [`apply`](LinearOperator::apply) for your own (matrix-free) operator, generic over
/// the backend, from backend ops:
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use monomorph::prelude::*;
/// use monomorph::ndarray::Array2;
///
/// /// `A = −Δ + σ·I` on a periodic 2-D grid (symmetric positive definite for σ > 0).
/// struct Helmholtz { grid: [usize; 2], sigma: f64 }
///
/// impl<B: Backend> LinearOperator<B> for Helmholtz {
///     fn size(&self) -> usize { self.grid[0] * self.grid[1] }
///     fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
///         let rows = x.shape()[0];
///         b.laplacian(&self.grid, Boundary::Periodic, x, y)?;                  // y = Δx
///         b.scale_rows(&vec![FloatOf::<B>::from_f64(-1.0); rows], y)?;         // y = −Δx
///         b.axpy_rows(&vec![FloatOf::<B>::from_f64(self.sigma); rows], x, y)   // y += σx
///     }
/// }
///
/// let b = Cpu::<Single>::new();
/// let op = Helmholtz { grid: [8, 8], sigma: 0.5 };
/// let y = b.upload_array(&Array2::from_shape_fn((1, 64), |(_, i)| (i % 5) as f32))?;
/// let res = conjugate_gradient(&b, &op, &y, None, &SolveParams::default())?;
/// assert!(res.converged[0] && res.iterations[0] > 1, "{res:?}");
/// # Ok::<(), monomorph::Error>(())
/// ```
pub trait LinearOperator<B: Reduce> {
    /// `n`: the operator maps vectors of length `n` to vectors of length `n`.
    fn size(&self) -> usize;

    /// `Some(k)` when the operator holds one matrix per batch entry (then the batch must be
    /// `k`); `None` when one operator is shared by every entry.
    fn batch(&self) -> Option<usize> {
        None
    }

    /// `y = A·x` for every row of the `(batch, n)` arrays.
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()>;

    /// `y = A·x` and the per-row dot products `x[b]·y[b]`, in the backend's accumulator type
    /// ([`AccumOf`](crate::AccumOf)). Rows where `active[b]` is
    /// false may be skipped (their `y` is then unspecified and their dot 0). The default applies
    /// the operator then reduces; built-in operators fuse both into one pass.
    fn apply_dot(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<B>>> {
        self.apply(b, x, y)?;
        let mut d = b.dot_rows(x, y)?;
        for (v, &a) in d.iter_mut().zip(active) {
            if !a {
                *v = AccumOf::<B>::zero();
            }
        }
        Ok(d)
    }

    /// [`apply_dot`](LinearOperator::apply_dot) leaving the dots on the device: `y = A·x` on
    /// the rows where `mask[b] ≠ 0` and `x[b]·y[b]` into slot `slot` of the per-row scalars
    /// `s` (an `(slots, batch)` array in the accumulator type; 0 for the other rows), so that the CG loop crosses
    /// to the host once per iteration. The default downloads the mask, calls `apply_dot` and
    /// stores its values (a host round trip); the built-in operators stay on the device
    /// ([`Linalg::laplacian_dot_into`] and its dense and CSR counterparts).
    fn apply_dot_into(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        mask: &Arr<B, i32>,
        s: &mut Arr<B, AccumOf<B>>,
        slot: usize,
    ) -> Result<()>
    where
        B: Memory,
    {
        let (rows, _) = crate::shape::rows_of("x of apply_dot_into", x.shape())?;
        crate::backend::check_row_scalars(
            "apply_dot_into",
            s.shape(),
            mask.shape(),
            rows,
            &[slot],
        )?;
        let active: Vec<bool> = b.download(mask)?.iter().map(|&m| m != 0).collect();
        let v = self.apply_dot(b, x, y, &active)?;
        let mut h = b.download(s)?;
        for (e, &value) in v.iter().enumerate() {
            h[[slot, e]] = value;
        }
        let up = b.upload(h.view())?;
        b.copy(&up, s)
    }

    /// The operator's diagonal on the host, `(n,)` shared or `(batch, n)` per entry, for the
    /// Jacobi preconditioner; `None` when the operator cannot give it (then Jacobi is refused).
    fn diagonal(&self, b: &B) -> Result<Option<ArrayD<f64>>> {
        let _ = b;
        Ok(None)
    }

    /// The operator's null space cell by cell, when it is known: cells that are not unknowns
    /// and regions whose constant is in the null space ([`NullSpace`]). With one, the solver
    /// zeroes `y` and `x0` on the pinned cells, iterates on the residual projected onto the
    /// range, returns the solution of zero mean over each region, and reports a right-hand side
    /// with a component in the null space (above the tolerance) as not converged. `None` (the
    /// default): no such treatment.
    fn null_space(&self) -> Option<&NullSpace> {
        None
    }
}

/// A dense matrix on the device: `(n, n)` shared by every entry or `(batch, n, n)` one per
/// entry.
pub struct DenseOperator<B: BackendTypes> {
    a: Arr<B, FloatOf<B>>,
    n: usize,
    batch: Option<usize>,
}

impl<B: Memory + Linalg> DenseOperator<B> {
    /// Uploads a host matrix `(n, n)` or `(batch, n, n)`; a non-square matrix is an error.
    pub fn new(b: &B, a: ArrayViewD<'_, FloatOf<B>>) -> Result<Self> {
        Self::check(a.shape())?;
        let a = b.upload(a)?;
        Self::from_device(a)
    }

    /// Wraps a matrix already on the device (`(n, n)` or `(batch, n, n)`).
    pub fn from_device(a: Arr<B, FloatOf<B>>) -> Result<Self> {
        let (n, batch) = Self::check(a.shape())?;
        Ok(DenseOperator { a, n, batch })
    }

    /// The matrix on the device.
    pub fn matrix(&self) -> &Arr<B, FloatOf<B>> {
        &self.a
    }

    fn check(shape: &[usize]) -> Result<(usize, Option<usize>)> {
        match shape {
            [m, n] if m == n => Ok((*n, None)),
            [k, m, n] if m == n => Ok((*n, Some(*k))),
            s => Err(Error::shape(
                "matrix of DenseOperator (CG needs a square matrix)",
                "(n, n) or (batch, n, n)",
                fmt_shape(s),
            )),
        }
    }
}

impl<B: Memory + Linalg> LinearOperator<B> for DenseOperator<B> {
    fn size(&self) -> usize {
        self.n
    }
    fn batch(&self) -> Option<usize> {
        self.batch
    }
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
        b.matvec_dense(&self.a, x, y)
    }
    fn apply_dot(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<B>>> {
        b.matvec_dense_dot(&self.a, x, y, active)
    }
    fn apply_dot_into(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        mask: &Arr<B, i32>,
        s: &mut Arr<B, AccumOf<B>>,
        slot: usize,
    ) -> Result<()> {
        b.matvec_dense_dot_into(&self.a, x, y, mask, s, slot)
    }
    fn diagonal(&self, b: &B) -> Result<Option<ArrayD<f64>>> {
        let host = b.download(&self.a)?;
        let n = self.n;
        let k = self.batch.unwrap_or(1);
        let flat = host
            .as_slice()
            .map(|s| s.to_vec())
            .unwrap_or_else(|| host.iter().copied().collect());
        let diag: Vec<f64> = (0..k)
            .flat_map(|e| (0..n).map(move |i| (e, i)))
            .map(|(e, i)| flat[e * n * n + i * n + i].as_f64())
            .collect();
        let shape = match self.batch {
            Some(k) => vec![k, n],
            None => vec![n],
        };
        ArrayD::from_shape_vec(IxDyn(&shape), diag)
            .map(Some)
            .map_err(|e| Error::invalid("diagonal", e.to_string()))
    }
}

/// A square CSR sparse matrix, shared by every entry or one per entry with a common pattern.
pub struct CsrOperator<B: BackendTypes> {
    a: CsrMatrix<B, FloatOf<B>>,
    batch: Option<usize>,
    diag: ArrayD<f64>,
}

impl<B: Memory + Linalg> CsrOperator<B> {
    /// Validates (see [`CsrMatrix::from_parts`]) and uploads an `n × n` CSR matrix given by
    /// `indptr` (`n + 1`), `indices` and `data` (`(nnz,)` shared or `(batch, nnz)` per entry).
    /// `n` is `indptr.len() − 1`; `ncols` must equal it (CG needs a square operator).
    pub fn new(
        b: &B,
        ncols: usize,
        indptr: &[i64],
        indices: &[i64],
        data: ArrayViewD<'_, FloatOf<B>>,
    ) -> Result<Self> {
        if indptr.is_empty() {
            return Err(Error::invalid(
                "indptr",
                "needs at least one entry (nrows + 1)",
            ));
        }
        let n = indptr.len() - 1;
        if ncols != n {
            return Err(Error::shape(
                "CSR matrix of CsrOperator (CG needs a square matrix)",
                format!("({n}, {n})"),
                format!("({n}, {ncols})"),
            ));
        }
        let a = CsrMatrix::from_parts(b, n, ncols, indptr, indices, data.view())?;
        let batch = (data.ndim() == 2).then(|| data.shape()[0]);
        // Host diagonal for Jacobi, computed once while the structure is at hand.
        let k = batch.unwrap_or(1);
        let nnz = indices.len();
        let vals: Vec<FloatOf<B>> = data.iter().copied().collect();
        let mut diag = vec![0.0f64; k * n];
        for i in 0..n {
            for p in indptr[i] as usize..indptr[i + 1] as usize {
                if indices[p] as usize == i {
                    for e in 0..k {
                        diag[e * n + i] = vals[e * nnz + p].as_f64();
                    }
                }
            }
        }
        let shape = if batch.is_some() { vec![k, n] } else { vec![n] };
        let diag = ArrayD::from_shape_vec(IxDyn(&shape), diag)
            .map_err(|e| Error::invalid("diagonal", e.to_string()))?;
        Ok(CsrOperator { a, batch, diag })
    }

    /// The matrix on the device.
    pub fn matrix(&self) -> &CsrMatrix<B, FloatOf<B>> {
        &self.a
    }
}

impl<B: Memory + Linalg> LinearOperator<B> for CsrOperator<B> {
    fn size(&self) -> usize {
        self.a.nrows
    }
    fn batch(&self) -> Option<usize> {
        self.batch
    }
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
        b.matvec_csr(&self.a, x, y)
    }
    fn apply_dot(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<B>>> {
        b.matvec_csr_dot(&self.a, x, y, active)
    }
    fn apply_dot_into(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        mask: &Arr<B, i32>,
        s: &mut Arr<B, AccumOf<B>>,
        slot: usize,
    ) -> Result<()> {
        b.matvec_csr_dot_into(&self.a, x, y, mask, s, slot)
    }
    fn diagonal(&self, _b: &B) -> Result<Option<ArrayD<f64>>> {
        Ok(Some(self.diag.clone()))
    }
}

/// The matrix-free 3/5/7-point Laplacian (h = 1, centre −2·ndim, neighbours +1) on a row-major
/// grid of 1 to 3 axes, as PhiFlow's `laplace`: negative definite with
/// [`Boundary::DirichletZero`], singular (constants in the null space) with
/// [`Boundary::Periodic`]. Shared by every batch entry.
#[derive(Debug, Clone)]
pub struct LaplacianOperator {
    grid: Vec<usize>,
    boundary: Boundary,
}

impl LaplacianOperator {
    /// A Laplacian on `grid` (1 to 3 non-zero axes, row-major, last axis fastest).
    pub fn new(grid: &[usize], boundary: Boundary) -> Result<Self> {
        if grid.is_empty() || grid.len() > 3 || grid.contains(&0) {
            return Err(Error::invalid(
                "grid",
                format!("1 to 3 non-zero axes expected, got {}", fmt_shape(grid)),
            ));
        }
        grid.iter()
            .try_fold(1usize, |a, &g| a.checked_mul(g))
            .ok_or_else(|| Error::invalid("grid", "number of points overflows usize"))?;
        Ok(LaplacianOperator {
            grid: grid.to_vec(),
            boundary,
        })
    }

    /// The grid shape.
    pub fn grid(&self) -> &[usize] {
        &self.grid
    }

    /// The boundary condition.
    pub fn boundary(&self) -> Boundary {
        self.boundary
    }
}

impl<B: Memory + Linalg> LinearOperator<B> for LaplacianOperator {
    fn size(&self) -> usize {
        self.grid.iter().product()
    }
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
        b.laplacian(&self.grid, self.boundary, x, y)
    }
    fn apply_dot(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<B>>> {
        b.laplacian_dot(&self.grid, self.boundary, x, y, active)
    }
    fn apply_dot_into(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        mask: &Arr<B, i32>,
        s: &mut Arr<B, AccumOf<B>>,
        slot: usize,
    ) -> Result<()> {
        b.laplacian_dot_into(&self.grid, self.boundary, x, y, mask, s, slot)
    }
    fn diagonal(&self, _b: &B) -> Result<Option<ArrayD<f64>>> {
        let n: usize = self.grid.iter().product();
        // A periodic axis of length 1 is its own neighbour on both sides.
        let self_wrap = match self.boundary {
            Boundary::Periodic => 2.0 * self.grid.iter().filter(|&&g| g == 1).count() as f64,
            Boundary::DirichletZero => 0.0,
        };
        let c = -2.0 * self.grid.len() as f64 + self_wrap;
        Ok(Some(ArrayD::from_elem(IxDyn(&[n]), c)))
    }
}
