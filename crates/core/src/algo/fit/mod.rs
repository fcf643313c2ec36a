//! Small nonlinear least-squares fits on the host, as scipy's `curve_fit` runs them, for the
//! few-parameter curve fits of peak calling (pytom's top-hat and ROC estimates):
//!
//! * [`leastsq`]: Levenberg–Marquardt without bounds, MINPACK's `lmdif` (`curve_fit` without
//!   bounds);
//! * [`least_squares_bounded`]: the Trust Region Reflective method with bounds
//!   (`curve_fit(…, bounds=…)`).
//!
//! Both take the residual function `f(x, out)` (model minus data, `out` of length `m`) and
//! return the parameters with how the run ended. They follow scipy's iterations step for step
//! (same tolerances, difference steps and scaling), so that a fit ends where scipy's ends, not
//! merely at some minimum: with several local minima, the one reached depends on the path.

mod minpack;
mod svd;
mod trf;

pub use minpack::leastsq;
pub use trf::least_squares_bounded;

/// A finished fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// The fitted parameters.
    pub x: Vec<f64>,
    /// Residual evaluations used (MINPACK counts the Jacobian's too, scipy's TRF does not).
    pub nfev: usize,
    /// How it converged: MINPACK's `info` 1–4, or `least_squares`' status 1–4 (gradient,
    /// `ftol`, `xtol`, both).
    pub status: i32,
    /// `½ Σ f(x)ᵢ²` at the result.
    pub cost: f64,
}

/// Why a fit gave no parameters (each a case where scipy's `curve_fit` raises).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// Fewer residuals than parameters (or no parameter, or bounds of the wrong length).
    #[error("{m} data point(s) for {n} parameter(s): need at least as many points as parameters")]
    TooFewPoints {
        /// Residuals.
        m: usize,
        /// Parameters.
        n: usize,
    },
    /// A residual is NaN or infinite at the starting point.
    #[error("the residuals are not finite at the starting point")]
    NonFinite,
    /// A lower bound is not strictly below its upper bound.
    #[error("a lower bound is not strictly below its upper bound")]
    EmptyBounds,
    /// The starting point lies outside the bounds.
    #[error("the starting point lies outside the bounds")]
    Infeasible,
    /// No convergence: the evaluation budget ran out or the tolerances cannot be met.
    #[error("no convergence (status {status} after {nfev} evaluations)")]
    NotConverged {
        /// MINPACK's `info` 5–8, or 0 for TRF (budget exhausted).
        status: i32,
        /// Evaluations used.
        nfev: usize,
    },
}
