//! Per-entry bookkeeping of the batched CG loop: counters, stopping rules and the sentence that
//! says how each entry ended.

use super::{Method, Preconditioner};

/// Growth of `Σr²` over its initial value that marks an entry diverged (after
/// [`DIVERGE_MIN_ITER`] iterations), *once the entry's curvature has changed sign*. PhiFlow 3.x
/// and phiml use 1e5 without the sign condition; the old PhiFlow used 100.
pub(super) const DIVERGE_RATIO: f64 = 1e5;
/// Iterations before the growth test applies.
pub(super) const DIVERGE_MIN_ITER: usize = 8;

/// What the solver knows about the run, for the messages.
pub(super) struct Setup {
    pub method: Method,
    pub preconditioner: Preconditioner,
    /// Machine epsilon of the working precision.
    pub eps: f64,
    /// `"single"` or `"double"`.
    pub precision: &'static str,
}

/// Per-entry iteration bookkeeping.
pub(super) struct Book {
    pub it: Vec<usize>,
    pub fe: Vec<usize>,
    /// `Σr²` of the recursively updated residual.
    pub rsq: Vec<f64>,
    pub rsq0: Vec<f64>,
    /// `Σy²`.
    pub ysq: Vec<f64>,
    pub tol_sq: Vec<f64>,
    pub max_iter: Vec<usize>,
    pub converged: Vec<bool>,
    pub diverged: Vec<bool>,
    pub active: Vec<bool>,
    /// Sign (±1) of the entry's first non-zero curvature `d·Ad`; 0 before it.
    pub curv_sign: Vec<f64>,
    /// The iteration whose curvature first had the other sign: proof that the operator is
    /// not definite.
    pub sign_change: Vec<Option<usize>>,
    /// The iteration whose curvature was exactly 0 (CG cannot step).
    pub zero_curv: Vec<Option<usize>>,
    /// `y` was exactly zero: the answer is `x = 0`, whatever `x0` was.
    pub zero_rhs: Vec<bool>,
    /// `Σr²` of the true residual `y − A·x` at exit (set by [`Book::finish`]).
    pub true_sq: Vec<f64>,
    /// The loop's own verdict before the true residual was checked.
    pub loop_converged: Vec<bool>,
    /// `Σ` of the squared part of `y` in the operator's null space (0 without one).
    pub null_sq: Vec<f64>,
}

impl Book {
    /// Records the curvature `d·Ad` of the step entry `e` is about to take.
    pub fn curvature(&mut self, e: usize, dq: f64) {
        if dq == 0.0 {
            self.zero_curv[e].get_or_insert(self.it[e]);
        } else if dq.is_finite() {
            let s = dq.signum();
            if self.curv_sign[e] == 0.0 {
                self.curv_sign[e] = s;
            } else if s != self.curv_sign[e] && self.sign_change[e].is_none() {
                self.sign_change[e] = Some(self.it[e]);
            }
        }
    }

    /// Updates the flags of entry `e` from its current `rsq` (after `it[e]` iterations).
    ///
    /// Diverged: a non-finite residual; a zero curvature (no step is possible); or a residual
    /// grown past [`DIVERGE_RATIO`] × its initial value after [`DIVERGE_MIN_ITER`] iterations
    /// *and* a curvature that changed sign. On a definite operator the curvature never
    /// changes sign (and the energy `½xᵀAx − yᵀx` falls at every step), so growth alone, which
    /// CG's residual shows on ill-conditioned definite systems (‖r_k‖² may reach cond(A)·‖r_0‖²),
    /// never stops a solvable system.
    pub fn judge(&mut self, e: usize) {
        let rsq = self.rsq[e];
        let grew = self.sign_change[e].is_some()
            && self.rsq0[e] > 0.0
            && rsq / self.rsq0[e] > DIVERGE_RATIO
            && self.it[e] >= DIVERGE_MIN_ITER;
        self.converged[e] = rsq <= self.tol_sq[e];
        let stuck = self.zero_curv[e].is_some() && !self.converged[e];
        self.diverged[e] = self.diverged[e] || !rsq.is_finite() || grew || stuck;
        self.active[e] = !self.converged[e] && !self.diverged[e] && self.it[e] < self.max_iter[e];
    }

    pub fn any_active(&self) -> bool {
        self.active.iter().any(|&a| a)
    }

    /// Final flags from the true residual `Σ(y − A·x)²` per entry: converged only when the
    /// true residual meets the tolerance; a non-finite one is diverged.
    pub fn finish(&mut self, true_sq: Vec<f64>) {
        self.loop_converged = self.converged.clone();
        for (e, &t) in true_sq.iter().enumerate() {
            self.converged[e] = t <= self.tol_sq[e];
            if self.converged[e] {
                self.diverged[e] = false;
            } else if !t.is_finite() {
                self.diverged[e] = true;
            }
        }
        self.true_sq = true_sq;
    }

    /// A sentence saying how entry `e` ended and what to do about it.
    pub fn message(&self, e: usize, s: &Setup) -> String {
        let (t, rec, tol, it) = (
            self.true_sq[e].sqrt(),
            self.rsq[e].sqrt(),
            self.tol_sq[e].sqrt(),
            self.it[e],
        );
        if self.converged[e] {
            if self.zero_rhs[e] {
                return "converged: y = 0, so x = 0 (x0 is not used) after 0 iterations".into();
            }
            return format!(
                "converged: ‖y − A·x‖ = {t:.3e} ≤ tolerance {tol:.3e} after {it} iteration(s)"
            );
        }
        if !self.diverged[e] && self.null_sq[e] > self.tol_sq[e] {
            return format!(
                "not converged: y has a component of norm {:.3e} in the operator's null space \
                 (tolerance {tol:.3e}), so the system has no solution — the operator is singular \
                 (a region of cells without an open Dirichlet side: all-Neumann or periodic \
                 boundaries, or cells closed off by obstacles) and y must sum to zero over each \
                 such region; subtract its mean over the region's cells (PhiFlow subtracts the \
                 mean divergence over the fluid cells). x solves the system with that component \
                 removed (‖y − A·x‖ = {t:.3e})",
                self.null_sq[e].sqrt()
            );
        }
        let indefinite = |k: usize| {
            format!(
                "the curvature d·Ad changed sign at iteration {k}: the operator is not definite, \
                 or singular with the search direction in (or near) its null space. CG needs a \
                 symmetric positive (or negative) definite operator: for an indefinite one use \
                 a solver such as MINRES; a singular one such as the periodic Laplacian has a \
                 solution only when y lies in its range (for the periodic Laplacian: y of zero \
                 mean)"
            )
        };
        if self.diverged[e] {
            if !self.true_sq[e].is_finite() || !self.rsq[e].is_finite() {
                return format!(
                    "diverged: the residual became non-finite (NaN or infinity) after {it} \
                     iteration(s) — check y, x0 and the operator for NaN/infinite values, and \
                     that the operator is definite (a zero or tiny d·Ad makes huge steps)"
                );
            }
            if let Some(k) = self.zero_curv[e] {
                return format!(
                    "diverged: zero curvature d·Ad = 0 at iteration {k}, so CG cannot step \
                     (‖y − A·x‖ = {t:.3e}) — the operator is singular or indefinite along the \
                     search direction; a singular operator such as the periodic Laplacian has a \
                     solution only when y lies in its range (for the periodic Laplacian: y of \
                     zero mean)"
                );
            }
            let ratio = self.rsq[e] / self.rsq0[e];
            let k = self.sign_change[e].unwrap_or(it);
            return format!(
                "diverged: ‖r‖² grew {ratio:.3e}× its initial value (limit {DIVERGE_RATIO:e}) \
                 after {it} iterations, and {}",
                indefinite(k)
            );
        }
        if self.loop_converged[e] {
            return format!(
                "not converged: the recurrence residual reached {rec:.3e} ≤ tolerance {tol:.3e} \
                 after {it} iteration(s), but the true residual ‖y − A·x‖ = {t:.3e} is above it \
                 — the system has no solution (a singular operator, such as the periodic \
                 Laplacian, with y outside its range: for the periodic Laplacian y must have \
                 zero mean), or rounding errors dominate (an operator too ill-conditioned for \
                 {} precision{})",
                s.precision,
                if s.precision == "single" {
                    ": try double precision"
                } else {
                    ""
                }
            );
        }
        let mut m = if self.max_iter[e] == 0 {
            format!(
                "not converged: max_iter = 0, so no iteration ran (x = x0, ‖y − A·x‖ = {t:.3e} > \
                 tolerance {tol:.3e}) — raise max_iter"
            )
        } else {
            let advice = if let Some(k) = self.sign_change[e] {
                indefinite(k)
            } else if self.true_sq[e] >= self.rsq0[e] {
                "the residual never fell below its initial value: the system may have no \
                 solution (a singular operator with y outside its range, such as the periodic \
                 Laplacian with y of non-zero mean: y must have zero mean), or the operator is \
                 not symmetric definite"
                    .to_string()
            } else if tol < 10.0 * s.eps * self.ysq[e].sqrt() {
                format!(
                    "the tolerance is below what {} precision can reach (about {:.0e}·‖y‖): \
                     loosen rtol/atol{}",
                    s.precision,
                    10.0 * s.eps,
                    if s.precision == "single" {
                        " or use double precision"
                    } else {
                        ""
                    }
                )
            } else {
                let pre = match (s.method, s.preconditioner) {
                    (Method::Cg, Preconditioner::None) => ", or precondition (Jacobi)",
                    (Method::CgAdaptive, _) => ", or use CG with the Jacobi preconditioner",
                    (Method::Cg, Preconditioner::Jacobi) => "",
                };
                format!("raise max_iter, loosen rtol/atol{pre}")
            };
            format!(
                "not converged: reached max_iter = {} with ‖y − A·x‖ = {t:.3e} > tolerance \
                 {tol:.3e} — {advice}",
                self.max_iter[e]
            )
        };
        if rec > 2.0 * t || t > 2.0 * rec {
            m.push_str(&format!(" (the recurrence residual was {rec:.3e})"));
        }
        m
    }
}
