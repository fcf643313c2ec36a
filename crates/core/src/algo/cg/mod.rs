//! Batched conjugate gradient, generic over the backend.
//!
//! [`conjugate_gradient`] solves `A_b · x_b = y_b` for every row `b` of a `(batch, n)` array at
//! once, with the seed's (PhiFlow 2.x) iteration and stopping rules and three deliberate fixes
//! (the repository's `tests/fixtures/cg/reference.py` states them as executable Python):
//!
//! * **tolerance** per entry: `tol² = max(rtol²·Σy², atol²)`; the loop stops an entry when
//!   the recursively updated residual meets it, `Σr² ≤ tol²` (squared 2-norms, `≤`), tested
//!   before the first iteration and after each.
//! * **converged only on the true residual**: at exit the solver applies the operator once more
//!   and reports `converged` only when `‖y − A·x‖ ≤ tol`. The recurrence drifts from the true
//!   residual in floating point, and on a singular system without a solution (a periodic
//!   Laplacian with a right-hand side of non-zero mean) it can reach the tolerance while
//!   `y − A·x` stays large; such an entry is *not converged*, and its message says so.
//!   [`SolveResult::residual`] and [`SolveResult::residual_norm`] are the true residual.
//! * **`y = 0`**: a row whose right-hand side is exactly zero has the answer `x = 0`, returned
//!   at once whatever `x0` is (as scipy's `cg`), converged with 0 iterations.
//! * **diverged** when `Σr²` is not finite (or `x0` holds NaN/infinity); when the curvature
//!   `d·Ad` of a step is exactly 0 (CG cannot step: the operator is singular or indefinite
//!   along the search direction); or when `Σr²/Σr0² > 1e5` after at least 8 iterations *and*
//!   the curvature has changed sign (proof that the operator is not definite). CG's residual is
//!   not monotone: on a definite operator it may grow up to `cond(A)` times before it falls,
//!   while the curvature keeps its sign and the energy falls at every step, so no definite
//!   system is ever stopped early for growth (the old PhiFlow's `Σr²/Σr0² > 100` gave up on an
//!   SPD system of condition 1e8 after 8 iterations).
//! * per-entry `max_iter`; no residual replacement inside the loop.
//! * **batch entries are independent** (PhiFlow 3.4 judges every entry against the batch's
//!   smallest tolerance; monomorph does not).
//! * `function_evaluations` counts the operator applications of the iteration for that entry:
//!   CG applies the operator once before iterating and once per iteration (`1 + iterations`);
//!   CG-adaptive applies it twice before iterating (`2 + iterations`). The one application for
//!   the true residual at exit (for the whole batch, skipped when no entry iterated) is not
//!   counted.
//! * dot products accumulate in `f64` whatever the working precision; step sizes `α`, `β` are
//!   computed in `f64` and rounded to the working precision.
//!
//! Methods: [`Method::Cg`] (Hestenes–Stiefel CG in Shewchuk's form, optionally with a Jacobi
//! preconditioner) and [`Method::CgAdaptive`] (the seed's variant with `β = (r·Ad)/(d·Ad)`).
//! Operators: [`DenseOperator`], [`CsrOperator`], [`LaplacianOperator`], or your own
//! [`LinearOperator`]. Convergence does not need `A` positive definite, only definite: the
//! negative definite Laplacian converges as well.
//!
//! Each iteration moves the vectors as few times as the maths allows: the operator application
//! is fused with `d·Ad`, the `x`/`r` updates with the new `r·r`, and the per-iteration host
//! synchronisation is one small batch of per-entry scalars. Entries that have stopped are
//! skipped by the fused kernels.
//!
//! ```
//! use monomorph_core::algo::cg::{conjugate_gradient, LaplacianOperator, SolveParams};
//! use monomorph_core::{Backend, Boundary, Memory, Result};
//!
//! fn poisson<B: Backend>(b: &B, rhs: &ndarray::ArrayD<monomorph_core::FloatOf<B>>) -> Result<bool> {
//!     let op = LaplacianOperator::new(&[16, 16], Boundary::DirichletZero)?;
//!     let y = b.upload(rhs.view())?; // (batch, 256)
//!     let params = SolveParams { rtol: vec![1e-6], ..SolveParams::default() };
//!     let res = conjugate_gradient(b, &op, &y, None, &params)?;
//!     Ok(res.converged.iter().all(|&c| c))
//! }
//! ```

mod book;
mod operator;
mod poisson;
mod solve;

pub use operator::{CsrOperator, DenseOperator, LaplacianOperator, LinearOperator};
pub use poisson::{NullSpace, PoissonOperator};
pub use solve::{conjugate_gradient, conjugate_gradient_controlled, conjugate_gradient_observed};

use crate::backend::{Arr, BackendTypes, FloatOf};
pub use crate::backend::{Boundary, CsrMatrix, PoissonStencil, Side};

/// The CG variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// Standard (Hestenes–Stiefel / Shewchuk) conjugate gradient: `β = r_new·z_new / r·z`.
    #[default]
    Cg,
    /// The seed's "CG-adaptive": `α = (d·r)/(d·Ad)`, `β = (r·Ad)/(d·Ad)`; one extra operator
    /// application before the first iteration. No preconditioner.
    CgAdaptive,
}

/// A preconditioner for [`Method::Cg`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preconditioner {
    /// Plain CG.
    #[default]
    None,
    /// Jacobi (diagonal) preconditioning, `M = diag(A)`: needs an operator that reports its
    /// [diagonal](LinearOperator::diagonal), with no zero on it. The stopping rules still test
    /// the unpreconditioned residual `Σr²`.
    Jacobi,
}

/// Parameters of [`conjugate_gradient`]. `rtol`, `atol` and `max_iter` hold either one value
/// for every batch entry or one value per entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SolveParams {
    /// CG or CG-adaptive.
    pub method: Method,
    /// Relative tolerance (to `‖y‖`), ≥ 0: one value, or one per entry.
    pub rtol: Vec<f64>,
    /// Absolute tolerance on `‖r‖`, ≥ 0: one value, or one per entry.
    pub atol: Vec<f64>,
    /// Iteration limit: one value, or one per entry. 0 returns `x0` (with its residual).
    pub max_iter: Vec<usize>,
    /// Preconditioner ([`Method::Cg`] only).
    pub preconditioner: Preconditioner,
    /// When `true`, the observer of [`conjugate_gradient_observed`] also gets `x` and `r`
    /// downloaded to the host at every iteration (costly: off by default).
    pub observe_vectors: bool,
}

impl Default for SolveParams {
    /// CG, `rtol = 1e-5`, `atol = 0`, `max_iter = 1000`, no preconditioner.
    fn default() -> Self {
        SolveParams {
            method: Method::Cg,
            rtol: vec![1e-5],
            atol: vec![0.0],
            max_iter: vec![1000],
            preconditioner: Preconditioner::None,
            observe_vectors: false,
        }
    }
}

impl SolveParams {
    /// Default parameters with the given method.
    pub fn new(method: Method) -> Self {
        SolveParams {
            method,
            ..SolveParams::default()
        }
    }
    /// The same parameters with one `rtol`, `atol` and `max_iter` for every entry.
    pub fn with_tolerances(mut self, rtol: f64, atol: f64, max_iter: usize) -> Self {
        self.rtol = vec![rtol];
        self.atol = vec![atol];
        self.max_iter = vec![max_iter];
        self
    }
}

/// What an observer sees after the initial residual (`step` 0) and after every iteration.
/// Per-entry slices have one value per batch entry.
#[derive(Debug)]
pub struct IterationState<'a, T> {
    /// Loop step: 0 for the initial state, then 1, 2, … (an entry's own count is in
    /// `iterations`; stopped entries keep theirs).
    pub step: usize,
    /// Iterations done per entry.
    pub iterations: &'a [usize],
    /// Operator applications per entry.
    pub function_evaluations: &'a [usize],
    /// `Σr²` per entry (f64).
    pub residual_sq: &'a [f64],
    /// `tol²` per entry.
    pub tolerance_sq: &'a [f64],
    /// Converged flags.
    pub converged: &'a [bool],
    /// Diverged flags.
    pub diverged: &'a [bool],
    /// `x` on the host, `(batch, n)`, when [`SolveParams::observe_vectors`] is set.
    pub x: Option<&'a ndarray::ArrayD<T>>,
    /// The recursive residual `r` on the host, when [`SolveParams::observe_vectors`] is set.
    pub residual: Option<&'a ndarray::ArrayD<T>>,
}

/// The result of [`conjugate_gradient`], per batch entry.
pub struct SolveResult<B: BackendTypes> {
    /// The solutions, `(batch, n)`, on the device.
    pub x: Arr<B, FloatOf<B>>,
    /// The true residual `y − A·x`, `(batch, n)`, on the device (computed once at exit).
    pub residual: Arr<B, FloatOf<B>>,
    /// `‖y − A·x‖` per entry: the value `converged` is judged on.
    pub residual_norm: Vec<f64>,
    /// `‖r‖` of the recursively updated residual per entry (the value the loop's stopping test
    /// used). It differs from [`SolveResult::residual_norm`] by rounding, or widely on a
    /// system without a solution.
    pub recurrence_residual_norm: Vec<f64>,
    /// Iterations done per entry.
    pub iterations: Vec<usize>,
    /// Operator applications per entry (see the module docs).
    pub function_evaluations: Vec<usize>,
    /// `‖y − A·x‖ ≤ tol` at exit.
    pub converged: Vec<bool>,
    /// Stopped because the residual became non-finite, a step had zero curvature, or the
    /// residual grew on an operator proven indefinite (see the module docs).
    pub diverged: Vec<bool>,
    /// A sentence per entry saying how it ended and what to do about it.
    pub message: Vec<String>,
}

impl<B: BackendTypes> std::fmt::Debug for SolveResult<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SolveResult")
            .field("iterations", &self.iterations)
            .field("function_evaluations", &self.function_evaluations)
            .field("converged", &self.converged)
            .field("diverged", &self.diverged)
            .field("residual_norm", &self.residual_norm)
            .field("recurrence_residual_norm", &self.recurrence_residual_norm)
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}
