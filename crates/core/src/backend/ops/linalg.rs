use crate::backend::{AccumOf, Arr, BackendTypes, Memory, PoissonStencil, check_stencil};
use crate::dtype::{Element, Float};
use crate::error::Result;

/// A CSR sparse matrix on a backend, shared by every batch entry (`data` of shape `(nnz,)`) or
/// one per entry with a common pattern (`data` of shape `(batch, nnz)`).
///
/// Build it with [`CsrMatrix::from_parts`], which validates the structure (monotone `indptr`,
/// sorted, in-range indices) before anything reaches the device.
///
/// Non-exhaustive: outside this crate only [`CsrMatrix::from_parts`] builds a matrix, so every
/// one was validated (the device kernels index with `indptr` and `indices` unchecked).
#[non_exhaustive]
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

impl<B: crate::backend::Memory, T: Element> CsrMatrix<B, T> {
    /// Validates a host CSR structure and uploads it.
    ///
    /// `indptr` must have `nrows + 1` entries, start at 0, never decrease and end at
    /// `indices.len()`; `indices` must be in `0..ncols` and strictly increasing within each row
    /// (sorted, no duplicates). `data` is `(nnz,)` (one matrix) or `(batch, nnz)` (one matrix
    /// per batch entry with this pattern). Each violation is an [`Error`](crate::Error) naming
    /// the offending row or entry.
    pub fn from_parts(
        b: &B,
        nrows: usize,
        ncols: usize,
        indptr: &[i64],
        indices: &[i64],
        data: ndarray::ArrayViewD<'_, T>,
    ) -> Result<Self> {
        use crate::error::{Error, fmt_shape};
        check_csr_structure(nrows, ncols, indptr, indices)?;
        let nnz = indices.len();
        match data.shape() {
            [k] if *k == nnz => {}
            [_, k] if *k == nnz => {}
            s => {
                return Err(Error::shape(
                    "data of CSR matrix",
                    format!("({nnz},) or (batch, {nnz})"),
                    fmt_shape(s),
                ));
            }
        }
        let up = |v: &[i64]| -> Result<Arr<B, i64>> {
            let a = ndarray::ArrayView1::from(v).into_dyn();
            b.upload(a)
        };
        Ok(CsrMatrix {
            nrows,
            ncols,
            indptr: up(indptr)?,
            indices: up(indices)?,
            data: b.upload(data)?,
        })
    }
}

/// Validates a host CSR structure of `nrows × ncols`, blaming the array at fault: `indptr`
/// must have `nrows + 1` entries, start at 0, never decrease, stay within `0..=nnz` and end at
/// `nnz = indices.len()`; `indices` must be in `0..ncols` and strictly increasing within each
/// row. Every backend's CSR matrix goes through it ([`CsrMatrix::from_parts`]), before any
/// entry is used as an index.
pub fn check_csr_structure(
    nrows: usize,
    ncols: usize,
    indptr: &[i64],
    indices: &[i64],
) -> Result<()> {
    use crate::error::Error;
    if indptr.len() != nrows.saturating_add(1) || indptr.is_empty() {
        return Err(Error::shape(
            "indptr of CSR matrix",
            format!("{} entries (nrows + 1)", nrows.saturating_add(1)),
            format!("{} entries", indptr.len()),
        ));
    }
    let nnz = indices.len();
    if indptr[0] != 0 {
        return Err(Error::invalid(
            "indptr",
            format!("must start at 0, starts at {}", indptr[0]),
        ));
    }
    for (i, w) in indptr.windows(2).enumerate() {
        let (s, e) = (w[0], w[1]);
        if e < s {
            return Err(Error::invalid(
                "indptr",
                format!(
                    "must not decrease: indptr[{i}] = {s} > indptr[{}] = {e}",
                    i + 1
                ),
            ));
        }
        if e as u64 > nnz as u64 {
            return Err(Error::invalid(
                "indptr",
                format!(
                    "indptr[{}] = {e} points past the end of indices (nnz = {nnz}); every \
                     entry must be in 0..={nnz}",
                    i + 1
                ),
            ));
        }
    }
    if indptr[nrows] != nnz as i64 {
        return Err(Error::invalid(
            "indptr",
            format!(
                "last entry must equal the number of indices ({nnz}), got {}",
                indptr[nrows]
            ),
        ));
    }
    for i in 0..nrows {
        // In range and ordered: checked above.
        let s = indptr[i] as usize;
        let row = &indices[s..indptr[i + 1] as usize];
        for (k, &c) in row.iter().enumerate() {
            if c < 0 || c as u64 >= ncols as u64 {
                return Err(Error::invalid(
                    "indices",
                    format!(
                        "column index {c} in row {i} (entry {}) is outside 0..{ncols}",
                        s + k
                    ),
                ));
            }
            if k > 0 && row[k - 1] >= c {
                return Err(Error::invalid(
                    "indices",
                    format!(
                        "row {i} is not sorted or has a duplicate: column {} then {c} \
                         (entries {} and {}); sort the columns of each row (scipy: A.sort_indices())",
                        row[k - 1],
                        s + k - 1,
                        s + k
                    ),
                ));
            }
        }
    }
    Ok(())
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

/// Sizes of a dense batched matrix-vector product, validated by [`check_matvec_dense`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseDims {
    /// Number of systems (rows of `x`).
    pub batch: usize,
    /// Rows of the matrix.
    pub m: usize,
    /// Columns of the matrix (length of each `x` row).
    pub n: usize,
    /// `true` for one matrix per entry (`(batch, m, n)`), `false` for a shared `(m, n)`.
    pub per_entry: bool,
}

/// Validates the shapes of [`Linalg::matvec_dense`] (`a`: `(m, n)` or `(batch, m, n)`,
/// `x`: `(batch, n)`, `y`: `(batch, m)`), for every backend alike.
pub fn check_matvec_dense(a: &[usize], x: &[usize], y: &[usize]) -> Result<DenseDims> {
    use crate::error::{Error, fmt_shape};
    let (batch, n) = crate::shape::rows_of("x of matvec_dense", x)?;
    let (m, an, per_entry) = match a {
        [m, n] => (*m, *n, false),
        [b, m, n] if *b == batch => (*m, *n, true),
        s => {
            return Err(Error::shape(
                "matrix of matvec_dense",
                format!("(m, {n}) or ({batch}, m, {n})"),
                fmt_shape(s),
            ));
        }
    };
    if an != n {
        return Err(Error::shape(
            "matrix of matvec_dense (columns vs x)",
            format!("{n} columns"),
            fmt_shape(a),
        ));
    }
    crate::shape::same_shape("y of matvec_dense", &[batch, m], y)?;
    Ok(DenseDims {
        batch,
        m,
        n,
        per_entry,
    })
}

/// Validates the shapes of [`Linalg::matvec_csr`] for every backend alike (`indptr`:
/// `(nrows + 1,)`, `indices`: `(nnz,)`, `x`: `(batch, ncols)`, `y`: `(batch, nrows)`, `data`:
/// `(nnz,)` shared or `(batch, nnz)` per entry); returns (batch, per_entry). The structure itself
/// was validated by [`check_csr_structure`] when the matrix was built.
pub fn check_matvec_csr<B: BackendTypes, T: Element>(
    a: &CsrMatrix<B, T>,
    x: &[usize],
    y: &[usize],
) -> Result<(usize, bool)> {
    use crate::backend::ArrayMeta;
    use crate::error::{Error, fmt_shape};
    let (nrows, ncols, nnz) = (a.nrows, a.ncols, a.nnz());
    crate::shape::same_shape("indptr of CSR matrix", &[nrows + 1], a.indptr.shape())?;
    crate::shape::same_shape("indices of CSR matrix", &[nnz], a.indices.shape())?;
    let (batch, n) = crate::shape::rows_of("x of matvec_csr", x)?;
    if n != ncols {
        return Err(Error::shape(
            "x of matvec_csr",
            format!("(batch, {ncols})"),
            fmt_shape(x),
        ));
    }
    crate::shape::same_shape("y of matvec_csr", &[batch, nrows], y)?;
    let per_entry = match a.data.shape() {
        [k] if *k == nnz => false,
        [b, k] if *b == batch && *k == nnz => true,
        s => {
            return Err(Error::shape(
                "data of CSR matrix",
                format!("({nnz},) or ({batch}, {nnz})"),
                fmt_shape(s),
            ));
        }
    };
    Ok((batch, per_entry))
}

/// Sizes of a Laplacian call, validated by [`check_laplacian`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaplacianDims {
    /// Number of systems (rows of `x`).
    pub rows: usize,
    /// Points per system (`Π grid`).
    pub n: usize,
    /// The grid padded to three axes `(nz, ny, nx)` with leading 1s.
    pub grid3: [usize; 3],
}

/// The argument checks of [`Linalg::laplacian`] and [`Linalg::laplacian_dot`] (`op` names
/// which), shared by the backends so that they fail alike: a grid of 1 to 3 non-zero axes whose
/// point count fits in `usize`, `x` of shape `(batch, Π grid)` and `y` of `x`'s shape. The
/// `active` flags of `laplacian_dot` are checked by [`check_active`].
pub fn check_laplacian(
    op: &str,
    grid: &[usize],
    x: &[usize],
    y: &[usize],
) -> Result<LaplacianDims> {
    use crate::error::{Error, fmt_shape};
    if grid.is_empty() || grid.len() > 3 || grid.contains(&0) {
        return Err(Error::invalid(
            "grid",
            format!("1 to 3 non-zero axes expected, got {}", fmt_shape(grid)),
        ));
    }
    let n = crate::shape::checked_len(grid)
        .ok_or_else(|| Error::invalid("grid", "number of points overflows usize"))?;
    let (rows, xn) = super::rows_of_named(|| format!("x of {op}"), x)?;
    if xn != n {
        return Err(Error::shape(
            format!("x of {op}"),
            format!("(batch, {n})"),
            fmt_shape(x),
        ));
    }
    super::same_shape_named(|| format!("y of {op}"), x, y)?;
    let mut grid3 = [1usize; 3];
    grid3[3 - grid.len()..].copy_from_slice(grid);
    Ok(LaplacianDims { rows, n, grid3 })
}

/// The `active` flags of a masked op (`laplacian_dot`, `xpay_rows_where`, …): exactly one per
/// row (a short list is an error, not "all active"), for every backend alike.
pub fn check_active(op: &str, active: &[bool], rows: usize) -> Result<()> {
    super::per_row_named(|| format!("active of {op}"), active, rows)
}

/// The argument checks of [`Linalg::scale_rows`], shared by the backends: `x` is `(batch, n)`
/// with one `alpha` per row. Returns `(batch, n)`.
pub fn check_scale_rows<A>(alpha: &[A], x: &[usize]) -> Result<(usize, usize)> {
    let (rows, n) = crate::shape::rows_of("x of scale_rows", x)?;
    crate::shape::per_row("alpha of scale_rows", alpha, rows)?;
    Ok((rows, n))
}

/// The argument checks of [`Linalg::axpy_rows`], shared by the backends: `y` of `x`'s shape,
/// `x` a `(batch, n)` array, one `alpha` per row. Returns `(batch, n)`.
pub fn check_axpy_rows<A>(alpha: &[A], x: &[usize], y: &[usize]) -> Result<(usize, usize)> {
    crate::shape::same_shape("axpy_rows: y vs x", x, y)?;
    let (rows, n) = crate::shape::rows_of("x of axpy_rows", x)?;
    crate::shape::per_row("alpha of axpy_rows", alpha, rows)?;
    Ok((rows, n))
}

/// The argument checks of [`Linalg::xpay_rows`] and its masked forms
/// ([`Linalg::xpay_rows_where`], [`Linalg::xpay_rows_dot`]; `op` names which, `active` their
/// flags), shared by the backends: `y` of `x`'s shape, `x` a `(batch, n)` array, one `beta`
/// (and one flag) per row. Returns `(batch, n)`.
pub fn check_xpay_rows<A>(
    op: &str,
    x: &[usize],
    beta: &[A],
    y: &[usize],
    active: Option<&[bool]>,
) -> Result<(usize, usize)> {
    super::same_shape_named(|| format!("{op}: y vs x"), x, y)?;
    let (rows, n) = super::rows_of_named(|| format!("x of {op}"), x)?;
    super::per_row_named(|| format!("beta of {op}"), beta, rows)?;
    if let Some(active) = active {
        check_active(op, active, rows)?;
    }
    Ok((rows, n))
}

/// The argument checks of [`Linalg::axpy_pair_rows`] and [`Linalg::axpy_pair_rows_dots`]
/// (`op` names which), shared by the backends: `q`, `x` and `r` of `d`'s shape, `d` a
/// `(batch, n)` array, one `alpha` per row. Returns `(batch, n)`.
pub fn check_axpy_pair_rows<A>(
    op: &str,
    alpha: &[A],
    d: &[usize],
    q: &[usize],
    x: &[usize],
    r: &[usize],
) -> Result<(usize, usize)> {
    for (name, s) in [("q", q), ("x", x), ("r", r)] {
        super::same_shape_named(|| format!("{op}: {name} vs d"), d, s)?;
    }
    let (rows, n) = super::rows_of_named(|| format!("d of {op}"), d)?;
    super::per_row_named(|| format!("alpha of {op}"), alpha, rows)?;
    Ok((rows, n))
}

/// The argument checks of [`Linalg::matvec_dense_dot`], shared by the backends: one `active`
/// flag per row of `x`, the shapes of [`check_matvec_dense`], and a square matrix (`y` of `x`'s
/// shape).
pub fn check_matvec_dense_dot(
    a: &[usize],
    x: &[usize],
    y: &[usize],
    active: &[bool],
) -> Result<DenseDims> {
    let (rows, _) = crate::shape::rows_of("x of matvec_dense_dot", x)?;
    check_active("matvec_dense_dot", active, rows)?;
    let dims = check_matvec_dense(a, x, y)?;
    crate::shape::same_shape("matvec_dense_dot: y vs x (square matrix)", x, y)?;
    Ok(dims)
}

/// The argument checks of [`Linalg::matvec_csr_dot`], shared by the backends: one `active`
/// flag per row of `x`, a square matrix, and the shapes of [`check_matvec_csr`]. Returns
/// (batch, per_entry).
pub fn check_matvec_csr_dot<B: BackendTypes, T: Element>(
    a: &CsrMatrix<B, T>,
    x: &[usize],
    y: &[usize],
    active: &[bool],
) -> Result<(usize, bool)> {
    use crate::error::Error;
    let (rows, _) = crate::shape::rows_of("x of matvec_csr_dot", x)?;
    check_active("matvec_csr_dot", active, rows)?;
    if a.nrows != a.ncols {
        return Err(Error::shape(
            "CSR matrix of matvec_csr_dot",
            "a square matrix",
            format!("({}, {})", a.nrows, a.ncols),
        ));
    }
    check_matvec_csr(a, x, y)
}

/// Where a fused op reads a per-row step size from the per-row scalars `s` (an `(slots, rows)`
/// array on the device, in the accumulator type [`AccumOf`](crate::AccumOf)): `step[b] = s[num][b] / s[den][b]`, rounded to the working
/// precision, and 0 where the denominator is 0 or the row is masked off ([`step_ratio`]);
/// negated after the rounding when `negate` (CG-adaptive's `−γ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    /// Slot of the numerator.
    pub num: usize,
    /// Slot of the denominator.
    pub den: usize,
    /// Use `−step` (the negation of the rounded quotient, `−0` for a zero denominator).
    pub negate: bool,
}

impl Ratio {
    /// `s[num] / s[den]`.
    pub fn new(num: usize, den: usize) -> Ratio {
        Ratio {
            num,
            den,
            negate: false,
        }
    }

    /// `−(s[num] / s[den])`.
    pub fn negated(num: usize, den: usize) -> Ratio {
        Ratio {
            num,
            den,
            negate: true,
        }
    }

    /// The step of row `e` from host copies of the scalars (`sh`, `(slots, rows)`): what a
    /// device kernel computes for a row that is on.
    pub fn step<T: Float, A: Float>(&self, sh: &ndarray::ArrayD<A>, e: usize) -> T {
        let v: T = step_ratio(sh[[self.num, e]], sh[[self.den, e]]);
        if self.negate { -v } else { v }
    }
}

/// The Jacobi part of [`Linalg::axpy_pair_rows_ratio`]: `z = w ⊙ r` after the update, and
/// `r·z` per row into slot `slot` of the per-row scalars.
pub struct Precond<'a, B: BackendTypes, T: Element> {
    /// The inverse diagonal `w`, of `r`'s shape.
    pub w: &'a Arr<B, T>,
    /// The preconditioned residual `z`, of `r`'s shape (written).
    pub z: &'a mut Arr<B, T>,
    /// Slot of `s` that receives `r·z`.
    pub slot: usize,
}

/// The step size of a fused op from two dot products in the accumulator type `A`
/// ([`AccumOf`](crate::AccumOf) of the backend): `num / den` rounded to `T`, or 0 when `den`
/// is 0 (CG's `α = r·z / d·Ad` and `β = r_new·z_new / r·z`). Every backend's kernels compute
/// exactly this (the quotient in `A`, one rounding to `T`; `A` is `f64` today, and the
/// conversion through `f64` is exact for any accumulator no wider than it).
#[inline]
pub fn step_ratio<T: Float, A: Float>(num: A, den: A) -> T {
    if den != A::zero() {
        T::from_f64((num / den).as_f64())
    } else {
        T::from_f64(0.0)
    }
}

/// The argument checks of the ops that keep per-row scalars on the device (`op` names which):
/// `s` of shape `(slots, rows)` with every slot in `used` below `slots`, and `mask` of shape
/// `(rows,)`, for every backend alike.
pub fn check_row_scalars(
    op: &str,
    s: &[usize],
    mask: &[usize],
    rows: usize,
    used: &[usize],
) -> Result<()> {
    use crate::error::{Error, fmt_shape};
    match s {
        [k, r] if *r == rows && used.iter().all(|&u| u < *k) => {}
        _ => {
            let k = used.iter().max().map_or(1, |&u| u + 1);
            return Err(Error::shape(
                format!("per-row scalars of {op}"),
                format!("(≥ {k}, {rows})"),
                fmt_shape(s),
            ));
        }
    }
    super::same_shape_named(|| format!("mask of {op}"), &[rows], mask)
}

/// The rows of a device mask that are on (non-zero), on the host.
fn mask_on<B: Memory>(b: &B, mask: &Arr<B, i32>) -> Result<Vec<bool>> {
    Ok(b.download(mask)?.iter().map(|&m| m != 0).collect())
}

/// Writes `v` (one value per row) into slot `slot` of the per-row scalars `s` through the host:
/// the default bodies' way of storing what their host-returning counterparts computed.
fn store_slot<B: Memory>(
    b: &B,
    s: &mut Arr<B, AccumOf<B>>,
    slot: usize,
    v: &[AccumOf<B>],
) -> Result<()> {
    let mut h = b.download(s)?;
    for (e, &value) in v.iter().enumerate() {
        h[[slot, e]] = value;
    }
    let up = b.upload(h.view())?;
    b.copy(&up, s)
}

/// Batched linear algebra: one system per row of a `(batch, n)` array.
///
/// The ops named `…_into` and `…_ratio` keep the per-row scalars of an iteration on the device:
/// they read step sizes from, and write dot products into, slots of an `(slots, rows)`
/// array `s` in the backend's accumulator type ([`AccumOf`](crate::AccumOf), as every dot
/// product of these ops), and skip the rows whose `mask` entry is 0, so that an iterative solver crosses
/// to the host once per iteration (one download of `s`). Their default bodies download what
/// they read and call the host-valued ops above (the specification); a device backend fuses
/// them.
pub trait Linalg:
    BackendTypes + crate::backend::Reduce + Memory + crate::backend::Elementwise
{
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
    /// `y[b] = L·x[b]`: the pressure-Poisson stencil `st` (per-axis and per-side boundaries,
    /// per-axis spacing, obstacles; see [`PoissonStencil`] for the definition every backend
    /// computes). `x`, `y`: `(batch, n)` for the stencil's `n` cells.
    fn stencil<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `x[b] = alpha[b] · x[b]`.
    fn scale_rows<T: Float>(&self, alpha: &[T], x: &mut Arr<Self, T>) -> Result<()>;
    /// `y[b] = y[b] + alpha[b] · x[b]`. Rows with `alpha[b] == 0` are left unchanged (as BLAS
    /// `axpy` does), even where `x` holds NaN or infinity.
    fn axpy_rows<T: Float>(
        &self,
        alpha: &[T],
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `y[b] = x[b] + beta[b] · y[b]` (CG's direction update).
    fn xpay_rows<T: Float>(&self, x: &Arr<Self, T>, beta: &[T], y: &mut Arr<Self, T>)
    -> Result<()>;

    /// A pair of row axpys of opposite sign and the new squared norm of the second, fused:
    /// `x[b] += alpha[b]·d[b]`, `r[b] −= alpha[b]·q[b]`, returning `r[b]·r[b]` (accumulator type) for every
    /// row, in one pass over the vectors (conjugate gradients' solution and residual update).
    /// Rows with `alpha[b] == 0` keep `x` and `r` unchanged (see [`Linalg::axpy_rows`]); their
    /// `r·r` is still returned.
    fn axpy_pair_rows<T: Float>(
        &self,
        alpha: &[T],
        d: &Arr<Self, T>,
        q: &Arr<Self, T>,
        x: &mut Arr<Self, T>,
        r: &mut Arr<Self, T>,
    ) -> Result<Vec<AccumOf<Self>>> {
        use crate::backend::ArrayMeta;
        check_axpy_pair_rows(
            "axpy_pair_rows",
            alpha,
            d.shape(),
            q.shape(),
            x.shape(),
            r.shape(),
        )?;
        self.axpy_rows(alpha, d, x)?;
        let neg: Vec<T> = alpha.iter().map(|&a| -a).collect();
        self.axpy_rows(&neg, q, r)?;
        self.sum_sq_rows(r)
    }
    /// [`Linalg::axpy_pair_rows`] that also returns `r[b]·q[b]` (after the update): the two
    /// scalars of the Hestenes–Stiefel CG variant, `(r·r, r·q)`, in one pass.
    fn axpy_pair_rows_dots<T: Float>(
        &self,
        alpha: &[T],
        d: &Arr<Self, T>,
        q: &Arr<Self, T>,
        x: &mut Arr<Self, T>,
        r: &mut Arr<Self, T>,
    ) -> Result<(Vec<AccumOf<Self>>, Vec<AccumOf<Self>>)> {
        use crate::backend::ArrayMeta;
        check_axpy_pair_rows(
            "axpy_pair_rows_dots",
            alpha,
            d.shape(),
            q.shape(),
            x.shape(),
            r.shape(),
        )?;
        let rr = self.axpy_pair_rows(alpha, d, q, x, r)?;
        let rq = self.dot_rows(r, q)?;
        Ok((rr, rq))
    }

    /// `y[b] = x[b] + beta[b]·y[b]` for the rows where `active[b]`; the other rows may be
    /// skipped, and their contents are then unspecified.
    fn xpay_rows_where<T: Float>(
        &self,
        x: &Arr<Self, T>,
        beta: &[T],
        y: &mut Arr<Self, T>,
        active: &[bool],
    ) -> Result<()> {
        use crate::backend::ArrayMeta;
        check_xpay_rows("xpay_rows_where", x.shape(), beta, y.shape(), Some(active))?;
        self.xpay_rows(x, beta, y)
    }

    /// `y[b] = x[b] + beta[b]·y[b]` and returns the new `y[b]·x[b]` (accumulator type) for the rows where
    /// `active[b]` (0 for the others, whose contents are unspecified afterwards).
    fn xpay_rows_dot<T: Float>(
        &self,
        x: &Arr<Self, T>,
        beta: &[T],
        y: &mut Arr<Self, T>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<Self>>> {
        use crate::backend::ArrayMeta;
        check_xpay_rows("xpay_rows_dot", x.shape(), beta, y.shape(), Some(active))?;
        self.xpay_rows(x, beta, y)?;
        let mut out = self.dot_rows(x, y)?;
        mask_rows(&mut out, active);
        Ok(out)
    }

    /// [`Linalg::laplacian`] fused with the dot product `x[b]·y[b]` of input and output,
    /// returned per row. Rows where `active[b]` is false may be skipped (`y` unspecified there,
    /// dot 0). The sum per point runs in PhiFlow's order: centre, then each axis (slowest
    /// first), lower neighbour before upper.
    fn laplacian_dot<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<Self>>> {
        use crate::backend::ArrayMeta;
        let dims = check_laplacian("laplacian_dot", grid, x.shape(), y.shape())?;
        check_active("laplacian_dot", active, dims.rows)?;
        self.laplacian(grid, boundary, x, y)?;
        let mut out = self.dot_rows(x, y)?;
        mask_rows(&mut out, active);
        Ok(out)
    }

    /// [`Linalg::stencil`] fused with the dot product `x[b]·y[b]`, returned per row. Rows where
    /// `active[b]` is false may be skipped (`y` unspecified there, dot 0).
    fn stencil_dot<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<Self>>> {
        use crate::backend::ArrayMeta;
        let (rows, _) = check_stencil("stencil_dot", st, x.shape(), y.shape())?;
        check_active("stencil_dot", active, rows)?;
        self.stencil(st, x, y)?;
        let mut out = self.dot_rows(x, y)?;
        mask_rows(&mut out, active);
        Ok(out)
    }

    /// [`Linalg::matvec_dense`] (square `A`) fused with `x[b]·y[b]`, returned per row; rows where
    /// `active[b]` is false may be skipped (`y` unspecified there, dot 0).
    fn matvec_dense_dot<T: Float>(
        &self,
        a: &Arr<Self, T>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<Self>>> {
        use crate::backend::ArrayMeta;
        check_matvec_dense_dot(a.shape(), x.shape(), y.shape(), active)?;
        self.matvec_dense(a, x, y)?;
        let mut out = self.dot_rows(x, y)?;
        mask_rows(&mut out, active);
        Ok(out)
    }

    /// [`Linalg::matvec_csr`] (square `A`) fused with `x[b]·y[b]`, returned per row; rows where
    /// `active[b]` is false may be skipped (`y` unspecified there, dot 0).
    fn matvec_csr_dot<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        active: &[bool],
    ) -> Result<Vec<AccumOf<Self>>> {
        use crate::backend::ArrayMeta;
        check_matvec_csr_dot(a, x.shape(), y.shape(), active)?;
        self.matvec_csr(a, x, y)?;
        let mut out = self.dot_rows(x, y)?;
        mask_rows(&mut out, active);
        Ok(out)
    }

    /// [`Linalg::laplacian_dot`] on the rows where `mask[b] ≠ 0`, writing the dots into slot
    /// `slot` of `s` (0 for the other rows) instead of returning them.
    #[allow(clippy::too_many_arguments)]
    fn laplacian_dot_into<T: Float>(
        &self,
        grid: &[usize],
        boundary: Boundary,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        mask: &Arr<Self, i32>,
        s: &mut Arr<Self, AccumOf<Self>>,
        slot: usize,
    ) -> Result<()> {
        use crate::backend::ArrayMeta;
        let dims = check_laplacian("laplacian_dot_into", grid, x.shape(), y.shape())?;
        check_row_scalars(
            "laplacian_dot_into",
            s.shape(),
            mask.shape(),
            dims.rows,
            &[slot],
        )?;
        let active = mask_on(self, mask)?;
        let v = self.laplacian_dot(grid, boundary, x, y, &active)?;
        store_slot(self, s, slot, &v)
    }

    /// [`Linalg::stencil_dot`] on the rows where `mask[b] ≠ 0`, writing the dots into slot
    /// `slot` of `s` (0 for the other rows) instead of returning them.
    #[allow(clippy::too_many_arguments)]
    fn stencil_dot_into<T: Float>(
        &self,
        st: &PoissonStencil<Self>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        mask: &Arr<Self, i32>,
        s: &mut Arr<Self, AccumOf<Self>>,
        slot: usize,
    ) -> Result<()> {
        use crate::backend::ArrayMeta;
        let (rows, _) = check_stencil("stencil_dot_into", st, x.shape(), y.shape())?;
        check_row_scalars("stencil_dot_into", s.shape(), mask.shape(), rows, &[slot])?;
        let active = mask_on(self, mask)?;
        let v = self.stencil_dot(st, x, y, &active)?;
        store_slot(self, s, slot, &v)
    }

    /// [`Linalg::matvec_dense_dot`] on the rows where `mask[b] ≠ 0`, writing the dots into
    /// slot `slot` of `s` (0 for the other rows).
    fn matvec_dense_dot_into<T: Float>(
        &self,
        a: &Arr<Self, T>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        mask: &Arr<Self, i32>,
        s: &mut Arr<Self, AccumOf<Self>>,
        slot: usize,
    ) -> Result<()> {
        use crate::backend::ArrayMeta;
        let (rows, _) = crate::shape::rows_of("x of matvec_dense_dot_into", x.shape())?;
        check_row_scalars(
            "matvec_dense_dot_into",
            s.shape(),
            mask.shape(),
            rows,
            &[slot],
        )?;
        let active = mask_on(self, mask)?;
        let v = self.matvec_dense_dot(a, x, y, &active)?;
        store_slot(self, s, slot, &v)
    }

    /// [`Linalg::matvec_csr_dot`] on the rows where `mask[b] ≠ 0`, writing the dots into slot
    /// `slot` of `s` (0 for the other rows).
    fn matvec_csr_dot_into<T: Float>(
        &self,
        a: &CsrMatrix<Self, T>,
        x: &Arr<Self, T>,
        y: &mut Arr<Self, T>,
        mask: &Arr<Self, i32>,
        s: &mut Arr<Self, AccumOf<Self>>,
        slot: usize,
    ) -> Result<()> {
        use crate::backend::ArrayMeta;
        let (rows, _) = crate::shape::rows_of("x of matvec_csr_dot_into", x.shape())?;
        check_row_scalars(
            "matvec_csr_dot_into",
            s.shape(),
            mask.shape(),
            rows,
            &[slot],
        )?;
        let active = mask_on(self, mask)?;
        let v = self.matvec_csr_dot(a, x, y, &active)?;
        store_slot(self, s, slot, &v)
    }

    /// [`Linalg::axpy_pair_rows`] with its step sizes on the device: `α[b] =`
    /// [`step_ratio`]`(s[num][b], s[den][b])` where `mask[b] ≠ 0` (0 elsewhere, and rows with
    /// `α = 0` keep `x` and `r`), `x += α·d`, `r −= α·q`, and `r·r` of every row into slot
    /// `rr` of `s`; with `precond`, also `z = w ⊙ r` and `r·z` into its slot; with `rq`, also
    /// `r·q` (after the update) into slot `rq` (CG-adaptive's). One pass over the vectors on a
    /// device backend. The slots written must differ from those read.
    #[allow(clippy::too_many_arguments)]
    fn axpy_pair_rows_ratio<T: Float>(
        &self,
        s: &mut Arr<Self, AccumOf<Self>>,
        ratio: Ratio,
        mask: &Arr<Self, i32>,
        d: &Arr<Self, T>,
        q: &Arr<Self, T>,
        x: &mut Arr<Self, T>,
        r: &mut Arr<Self, T>,
        rr: usize,
        precond: Option<Precond<'_, Self, T>>,
        rq: Option<usize>,
    ) -> Result<()> {
        use crate::backend::ArrayMeta;
        let op = "axpy_pair_rows_ratio";
        let (rows, _) = super::rows_of_named(|| format!("d of {op}"), d.shape())?;
        check_axpy_pair_rows(
            op,
            &vec![(); rows],
            d.shape(),
            q.shape(),
            x.shape(),
            r.shape(),
        )?;
        let mut used = vec![ratio.num, ratio.den, rr];
        used.extend(rq);
        if let Some(p) = &precond {
            used.push(p.slot);
            super::same_shape_named(|| format!("{op}: w vs d"), d.shape(), p.w.shape())?;
            super::same_shape_named(|| format!("{op}: z vs d"), d.shape(), p.z.shape())?;
        }
        check_row_scalars(op, s.shape(), mask.shape(), rows, &used)?;
        let sh = self.download(s)?;
        let active = mask_on(self, mask)?;
        let alpha: Vec<T> = (0..rows)
            .map(|e| {
                if active[e] {
                    ratio.step(&sh, e)
                } else {
                    T::from_f64(0.0)
                }
            })
            .collect();
        if let Some(slot) = rq {
            let (rrv, rqv) = self.axpy_pair_rows_dots(&alpha, d, q, x, r)?;
            store_slot(self, s, rr, &rrv)?;
            store_slot(self, s, slot, &rqv)?;
        } else {
            let rrv = self.axpy_pair_rows(&alpha, d, q, x, r)?;
            store_slot(self, s, rr, &rrv)?;
        }
        if let Some(p) = precond {
            self.binary(crate::backend::BinaryOp::Mul, p.w, r, p.z)?;
            let rz = self.dot_rows(r, p.z)?;
            store_slot(self, s, p.slot, &rz)?;
        }
        Ok(())
    }

    /// [`Linalg::xpay_rows_where`] with its factors on the device: `y[b] = x[b] + β[b]·y[b]`
    /// on the rows where `mask[b] ≠ 0` (the others may be skipped), `β[b] =`
    /// [`step_ratio`]`(s[num][b], s[den][b])` (negated with [`Ratio::negate`]); with `dot`,
    /// also the new `y[b]·x[b]` into slot `dot` of `s` (0 for the rows off), as
    /// [`Linalg::xpay_rows_dot`]. The slot written must differ from those read.
    fn xpay_rows_ratio<T: Float>(
        &self,
        x: &Arr<Self, T>,
        s: &mut Arr<Self, AccumOf<Self>>,
        ratio: Ratio,
        mask: &Arr<Self, i32>,
        y: &mut Arr<Self, T>,
        dot: Option<usize>,
    ) -> Result<()> {
        use crate::backend::ArrayMeta;
        let op = "xpay_rows_ratio";
        super::same_shape_named(|| format!("{op}: y vs x"), x.shape(), y.shape())?;
        let (rows, _) = super::rows_of_named(|| format!("x of {op}"), x.shape())?;
        let mut used = vec![ratio.num, ratio.den];
        used.extend(dot);
        check_row_scalars(op, s.shape(), mask.shape(), rows, &used)?;
        let sh = self.download(s)?;
        let active = mask_on(self, mask)?;
        let beta: Vec<T> = (0..rows)
            .map(|e| {
                if active[e] {
                    ratio.step(&sh, e)
                } else {
                    T::from_f64(0.0)
                }
            })
            .collect();
        match dot {
            Some(slot) => {
                let v = self.xpay_rows_dot(x, &beta, y, &active)?;
                store_slot(self, s, slot, &v)
            }
            None => self.xpay_rows_where(x, &beta, y, &active),
        }
    }
}

/// Zeroes the per-row values of inactive rows (the default bodies of the masked kernels compute
/// every row; their contract reports 0 for skipped ones). The mask's length was checked.
fn mask_rows<A: Float>(v: &mut [A], active: &[bool]) {
    if active.len() == v.len() {
        for (x, &a) in v.iter_mut().zip(active) {
            if !a {
                *x = A::zero();
            }
        }
    }
}
