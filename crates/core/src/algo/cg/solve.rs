//! The batched CG loop.

use ndarray::ArrayD;

use super::{IterationState, LinearOperator, Method, Preconditioner, SolveParams, SolveResult};
use crate::backend::{Arr, ArrayMeta, Backend, BinaryOp, FloatOf};
use crate::dtype::Real;
use crate::error::{Error, Result, fmt_shape};

/// Growth of `Σr²` over its initial value that marks an entry diverged (after
/// [`DIVERGE_MIN_ITER`] iterations).
const DIVERGE_RATIO: f64 = 100.0;
/// Iterations before the growth test applies.
const DIVERGE_MIN_ITER: usize = 8;

/// Solves `A_b·x_b = y_b` for every row `b` of `y` (`(batch, n)`), starting from `x0`
/// (`(batch, n)`, or zeros when `None`). See the [module docs](super) for the rules.
///
/// Errors (before any work): `y` not 2-D or empty, `x0` or the operator of another size, an
/// operator holding another number of per-entry matrices, `rtol`/`atol`/`max_iter` lists of
/// a length other than 1 or `batch`, negative or NaN tolerances, Jacobi with CG-adaptive or
/// with an operator whose diagonal is unknown or has a zero.
///
/// ```
/// # use monomorph_core as monomorph;
/// # use monomorph_cpu::Cpu;
/// use monomorph::prelude::*;
/// use monomorph::ndarray::{Array2, Ix2};
///
/// let b = Cpu::<Double>::new();
/// // Two Poisson problems on a 16×16 grid at once: Δx = y, zero on the boundary.
/// let op = LaplacianOperator::new(&[16, 16], Boundary::DirichletZero)?;
/// let rhs = Array2::from_shape_fn((2, 256), |(k, i)| if i % 17 == k { 1.0 } else { 0.0 });
/// let y = b.upload_array(&rhs)?;
/// let params = SolveParams::default().with_tolerances(1e-10, 0.0, 1000);
/// let res = conjugate_gradient(&b, &op, &y, None, &params)?;
/// assert!(res.converged.iter().all(|&c| c), "{res:?}");
///
/// // Check: A·x reproduces y.
/// let mut ax = b.zeros::<f64>(&[2, 256])?;
/// op.apply(&b, &res.x, &mut ax)?;
/// let err = (&b.download_as::<f64, Ix2>(&ax)? - &rhs).mapv(f64::abs).fold(0.0, |m: f64, &v| m.max(v));
/// assert!(err < 1e-8, "{err:e}");
/// # Ok::<(), monomorph::Error>(())
/// ```
pub fn conjugate_gradient<B: Backend, O: LinearOperator<B> + ?Sized>(
    b: &B,
    op: &O,
    y: &Arr<B, FloatOf<B>>,
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
) -> Result<SolveResult<B>> {
    solve_impl(b, &Dyn(op), y, x0, params, &mut |_| {})
}

/// [`conjugate_gradient`] with an observer called with the state after the initial residual
/// (step 0) and after every iteration: iteration counts, `Σr²`, flags, and (only with
/// [`SolveParams::observe_vectors`]) `x` and `r` downloaded to the host. This is the seed's
/// trajectory: the state at step `k` equals a solve with `max_iter = k`.
pub fn conjugate_gradient_observed<B, O, F>(
    b: &B,
    op: &O,
    y: &Arr<B, FloatOf<B>>,
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
    mut observer: F,
) -> Result<SolveResult<B>>
where
    B: Backend,
    O: LinearOperator<B> + ?Sized,
    F: FnMut(&IterationState<'_, FloatOf<B>>),
{
    solve_impl(b, &Dyn(op), y, x0, params, &mut observer)
}

/// Forwards to a `&dyn` operator so the loop is compiled once per backend, not per operator.
struct Dyn<'a, O: ?Sized>(&'a O);

impl<B: Backend, O: LinearOperator<B> + ?Sized> LinearOperator<B> for Dyn<'_, O> {
    fn size(&self) -> usize {
        self.0.size()
    }
    fn batch(&self) -> Option<usize> {
        self.0.batch()
    }
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
        self.0.apply(b, x, y)
    }
    fn apply_dot(
        &self,
        b: &B,
        x: &Arr<B, FloatOf<B>>,
        y: &mut Arr<B, FloatOf<B>>,
        active: &[bool],
    ) -> Result<Vec<f64>> {
        self.0.apply_dot(b, x, y, active)
    }
    fn diagonal(&self, b: &B) -> Result<Option<ArrayD<f64>>> {
        self.0.diagonal(b)
    }
}

/// One value per entry from a list of 1 or `batch` values.
fn per_entry<T: Copy>(name: &str, v: &[T], batch: usize) -> Result<Vec<T>> {
    match v.len() {
        1 => Ok(vec![v[0]; batch]),
        k if k == batch => Ok(v.to_vec()),
        k => Err(Error::shape(
            format!("`{name}` of SolveParams"),
            format!("1 value or {batch} (one per batch entry)"),
            format!("{k} values"),
        )),
    }
}

fn check_tolerance(name: &str, v: &[f64]) -> Result<()> {
    for (e, &t) in v.iter().enumerate() {
        if t.is_nan() || t < 0.0 || t.is_infinite() {
            return Err(Error::invalid(
                name,
                format!("must be finite and ≥ 0, got {t} for batch entry {e}"),
            ));
        }
    }
    Ok(())
}

/// Per-entry iteration bookkeeping.
struct Book {
    it: Vec<usize>,
    fe: Vec<usize>,
    rsq: Vec<f64>,
    rsq0: Vec<f64>,
    tol_sq: Vec<f64>,
    max_iter: Vec<usize>,
    converged: Vec<bool>,
    diverged: Vec<bool>,
    active: Vec<bool>,
}

impl Book {
    /// Updates the flags of entry `e` from its current `rsq` (after `it[e]` iterations).
    fn judge(&mut self, e: usize) {
        let rsq = self.rsq[e];
        let grew = self.rsq0[e] > 0.0
            && rsq / self.rsq0[e] > DIVERGE_RATIO
            && self.it[e] >= DIVERGE_MIN_ITER;
        self.diverged[e] = self.diverged[e] || !rsq.is_finite() || grew;
        self.converged[e] = rsq <= self.tol_sq[e];
        self.active[e] = !self.converged[e] && !self.diverged[e] && self.it[e] < self.max_iter[e];
    }

    fn any_active(&self) -> bool {
        self.active.iter().any(|&a| a)
    }

    fn message(&self, e: usize) -> String {
        let (r, tol, it) = (self.rsq[e].sqrt(), self.tol_sq[e].sqrt(), self.it[e]);
        if self.converged[e] {
            format!("converged: ‖r‖ = {r:.3e} ≤ tolerance {tol:.3e} after {it} iteration(s)")
        } else if self.diverged[e] {
            if !self.rsq[e].is_finite() {
                format!(
                    "diverged: the residual became non-finite (NaN or infinity) after {it} \
                     iteration(s) — check y, x0 and the operator for NaN/infinite values, and \
                     that the operator is definite (a zero or tiny d·Ad makes huge steps)"
                )
            } else {
                let ratio = self.rsq[e] / self.rsq0[e];
                format!(
                    "diverged: ‖r‖² grew {ratio:.3e}× its initial value (limit {DIVERGE_RATIO}) \
                     after {it} iterations — is the operator symmetric and definite (positive or \
                     negative)? CG does not converge on indefinite systems"
                )
            }
        } else {
            format!(
                "not converged: reached max_iter = {} with ‖r‖ = {r:.3e} > tolerance {tol:.3e} — \
                 raise max_iter, loosen rtol/atol, or precondition (Jacobi)",
                self.max_iter[e]
            )
        }
    }
}

fn solve_impl<B: Backend>(
    b: &B,
    op: &dyn LinearOperator<B>,
    y: &Arr<B, FloatOf<B>>,
    x0: Option<&Arr<B, FloatOf<B>>>,
    params: &SolveParams,
    observer: &mut dyn FnMut(&IterationState<'_, FloatOf<B>>),
) -> Result<SolveResult<B>> {
    type T<B> = FloatOf<B>;
    let shape = y.shape().to_vec();
    let (batch, n) = match shape.as_slice() {
        [k, n] => (*k, *n),
        s => {
            return Err(Error::shape(
                "`y` of conjugate_gradient",
                "(batch, n)",
                fmt_shape(s),
            ));
        }
    };
    if batch == 0 || n == 0 {
        return Err(Error::Empty("`y` of conjugate_gradient".into()));
    }
    if op.size() != n {
        return Err(Error::shape(
            "operator of conjugate_gradient (its size vs the length of each row of `y`)",
            format!(
                "an operator of size {n} for y of shape {}",
                fmt_shape(&shape)
            ),
            format!("size {}", op.size()),
        ));
    }
    if let Some(k) = op.batch()
        && k != batch
    {
        return Err(Error::shape(
            "operator of conjugate_gradient (one matrix per batch entry)",
            format!("{batch} matrices for y of shape {}", fmt_shape(&shape)),
            format!("{k} matrices"),
        ));
    }
    if let Some(x0) = x0
        && x0.shape() != shape.as_slice()
    {
        return Err(Error::shape(
            "`x0` of conjugate_gradient (must match y)",
            fmt_shape(&shape),
            fmt_shape(x0.shape()),
        ));
    }
    let rtol = per_entry("rtol", &params.rtol, batch)?;
    let atol = per_entry("atol", &params.atol, batch)?;
    let max_iter = per_entry("max_iter", &params.max_iter, batch)?;
    check_tolerance("rtol", &rtol)?;
    check_tolerance("atol", &atol)?;
    let jacobi = params.preconditioner == Preconditioner::Jacobi;
    if jacobi && params.method == Method::CgAdaptive {
        return Err(Error::invalid(
            "preconditioner",
            "CG-adaptive has no preconditioned form; use Method::Cg with Jacobi",
        ));
    }
    // Inverse diagonal, (batch, n), for Jacobi.
    let inv_diag = if jacobi {
        Some(inverse_diagonal(b, op, batch, n)?)
    } else {
        None
    };

    let all = vec![true; batch];
    // x, r = y − A·x.
    let mut x = match x0 {
        Some(x0) => b.duplicate(x0)?,
        None => b.zeros::<T<B>>(&shape)?,
    };
    let mut q = b.zeros::<T<B>>(&shape)?;
    let mut r = b.zeros::<T<B>>(&shape)?;
    op.apply(b, &x, &mut q)?;
    b.binary(BinaryOp::Sub, y, &q, &mut r)?;
    let ysq = b.sum_sq_rows(y)?;
    let rsq = b.sum_sq_rows(&r)?;
    let x_bad: Vec<bool> = match x0 {
        Some(_) => b.sum_rows(&x)?.iter().map(|s| !s.is_finite()).collect(),
        None => vec![false; batch],
    };
    let tol_sq: Vec<f64> = (0..batch)
        .map(|e| (rtol[e] * rtol[e] * ysq[e]).max(atol[e] * atol[e]))
        .collect();
    let mut book = Book {
        it: vec![0; batch],
        fe: vec![1; batch],
        rsq0: rsq.clone(),
        rsq,
        tol_sq,
        max_iter,
        converged: vec![false; batch],
        diverged: x_bad,
        active: vec![false; batch],
    };
    for e in 0..batch {
        book.judge(e);
    }

    // Search direction d (= M⁻¹ r) and, for Jacobi, z = M⁻¹ r.
    let mut d = b.zeros::<T<B>>(&shape)?;
    let mut z = if jacobi {
        Some(b.zeros::<T<B>>(&shape)?)
    } else {
        None
    };
    let mut rz = match (&inv_diag, &mut z) {
        (Some(w), Some(z)) => {
            b.binary(BinaryOp::Mul, w, &r, z)?;
            b.copy(z, &mut d)?;
            b.dot_rows(&r, z)?
        }
        _ => {
            b.copy(&r, &mut d)?;
            book.rsq.clone()
        }
    };
    // CG-adaptive: q = A·d and d·q before the first iteration (counted).
    let mut dq = vec![0.0; batch];
    if params.method == Method::CgAdaptive {
        dq = op.apply_dot(b, &d, &mut q, &all)?;
        for fe in &mut book.fe {
            *fe += 1;
        }
    }
    let mut dr = book.rsq.clone();

    let observe = |book: &Book,
                   step: usize,
                   x: &Arr<B, T<B>>,
                   r: &Arr<B, T<B>>,
                   observer: &mut dyn FnMut(&IterationState<'_, T<B>>)|
     -> Result<()> {
        let (xh, rh) = if params.observe_vectors {
            (Some(b.download(x)?), Some(b.download(r)?))
        } else {
            (None, None)
        };
        observer(&IterationState {
            step,
            iterations: &book.it,
            function_evaluations: &book.fe,
            residual_sq: &book.rsq,
            tolerance_sq: &book.tol_sq,
            converged: &book.converged,
            diverged: &book.diverged,
            x: xh.as_ref(),
            residual: rh.as_ref(),
        });
        Ok(())
    };
    observe(&book, 0, &x, &r, observer)?;

    let step_size = |num: f64, den: f64| -> T<B> {
        if den != 0.0 {
            T::<B>::from_f64(num / den)
        } else {
            T::<B>::from_f64(0.0)
        }
    };
    let zero = T::<B>::from_f64(0.0);
    let mut step = 0usize;
    while book.any_active() {
        step += 1;
        let running = book.active.clone();
        for e in 0..batch {
            if running[e] {
                book.it[e] += 1;
            }
        }
        match params.method {
            Method::Cg => {
                dq = op.apply_dot(b, &d, &mut q, &running)?;
                for e in 0..batch {
                    if running[e] {
                        book.fe[e] += 1;
                    }
                }
                let alpha: Vec<T<B>> = (0..batch)
                    .map(|e| {
                        if running[e] {
                            step_size(rz[e], dq[e])
                        } else {
                            zero
                        }
                    })
                    .collect();
                let rr = b.cg_update_xr(&alpha, &d, &q, &mut x, &mut r)?;
                for e in 0..batch {
                    if running[e] {
                        book.rsq[e] = rr[e];
                        book.judge(e);
                    }
                }
                if book.any_active() {
                    let rz_new = match (&inv_diag, &mut z) {
                        (Some(w), Some(z)) => {
                            b.binary(BinaryOp::Mul, w, &r, z)?;
                            b.dot_rows(&r, z)?
                        }
                        _ => rr,
                    };
                    let beta: Vec<T<B>> = (0..batch)
                        .map(|e| {
                            if book.active[e] {
                                step_size(rz_new[e], rz[e])
                            } else {
                                zero
                            }
                        })
                        .collect();
                    let src = z.as_ref().unwrap_or(&r);
                    b.xpay_rows_where(src, &beta, &mut d, &book.active)?;
                    rz = rz_new;
                }
            }
            Method::CgAdaptive => {
                let alpha: Vec<T<B>> = (0..batch)
                    .map(|e| {
                        if running[e] {
                            step_size(dr[e], dq[e])
                        } else {
                            zero
                        }
                    })
                    .collect();
                let (rr, rq) = b.cg_update_xr_dots(&alpha, &d, &q, &mut x, &mut r)?;
                let neg_gamma: Vec<T<B>> = (0..batch)
                    .map(|e| {
                        if running[e] {
                            -step_size(rq[e], dq[e])
                        } else {
                            zero
                        }
                    })
                    .collect();
                // d = r − γ·d, d·r, q = A·d, d·q: the seed applies the operator for the next
                // step before testing, and that application is counted.
                dr = b.xpay_rows_dot(&r, &neg_gamma, &mut d, &running)?;
                dq = op.apply_dot(b, &d, &mut q, &running)?;
                for e in 0..batch {
                    if running[e] {
                        book.fe[e] += 1;
                        book.rsq[e] = rr[e];
                        book.judge(e);
                    }
                }
            }
        }
        observe(&book, step, &x, &r, observer)?;
    }

    let message = (0..batch).map(|e| book.message(e)).collect();
    Ok(SolveResult {
        x,
        residual: r,
        residual_norm: book.rsq.iter().map(|v| v.sqrt()).collect(),
        iterations: book.it,
        function_evaluations: book.fe,
        converged: book.converged,
        diverged: book.diverged,
        message,
    })
}

/// `1/diag(A)` as a `(batch, n)` device array; errors when the operator has no diagonal or a
/// zero (or non-finite) on it.
fn inverse_diagonal<B: Backend>(
    b: &B,
    op: &dyn LinearOperator<B>,
    batch: usize,
    n: usize,
) -> Result<Arr<B, FloatOf<B>>> {
    let diag = op.diagonal(b)?.ok_or_else(|| {
        Error::invalid(
            "preconditioner",
            "Jacobi needs the operator's diagonal, and this operator does not provide one \
             (implement LinearOperator::diagonal)",
        )
    })?;
    let per_entry = match diag.shape() {
        [k] if *k == n => false,
        [k, m] if *k == batch && *m == n => true,
        s => {
            return Err(Error::shape(
                "diagonal of the operator",
                format!("({n},) or ({batch}, {n})"),
                fmt_shape(s),
            ));
        }
    };
    let flat: Vec<f64> = diag.iter().copied().collect();
    let mut inv = Vec::with_capacity(batch * n);
    for e in 0..batch {
        for i in 0..n {
            let v = if per_entry { flat[e * n + i] } else { flat[i] };
            if v == 0.0 || !v.is_finite() {
                return Err(Error::invalid(
                    "preconditioner",
                    format!("Jacobi needs a finite non-zero diagonal; entry {e}, row {i} has {v}"),
                ));
            }
            inv.push(FloatOf::<B>::from_f64(1.0 / v));
        }
    }
    let host = ArrayD::from_shape_vec(ndarray::IxDyn(&[batch, n]), inv)
        .map_err(|e| Error::invalid("diagonal", e.to_string()))?;
    b.upload(host.view())
}
