//! Batched conjugate gradient, generic over the backend: a hand-written matrix-free operator
//! and the built-in Laplacian, each checked by applying the operator to the solution.
//!
//! `cargo run --release --example cg`

use monomorph::ndarray::{Array2, Ix2};
use monomorph::prelude::*;

/// `A = σ·I − S − Sᵀ` on a periodic chain of `n` points (`S` shifts by one): a matrix-free
/// operator written from backend ops, symmetric positive definite for `σ > 2`.
pub struct Chain {
    /// Points per system.
    pub n: usize,
    /// Diagonal.
    pub sigma: f64,
}

impl<B: Backend> LinearOperator<B> for Chain {
    fn size(&self) -> usize {
        self.n
    }
    fn apply(&self, b: &B, x: &Arr<B, FloatOf<B>>, y: &mut Arr<B, FloatOf<B>>) -> Result<()> {
        let mut shifted = b.zeros::<FloatOf<B>>(x.shape())?;
        b.copy(x, y)?;
        b.scalar_assign(BinaryOp::Mul, y, self.sigma)?; // y = σx
        for shift in [1, -1] {
            b.roll(x, &[0, shift], &mut shifted)?; // along each row, not across the batch
            b.binary_assign(BinaryOp::Sub, y, &shifted)?;
        }
        Ok(())
    }
}

/// Solves `A·x = y` for every row of `y` and returns the largest relative residual
/// `‖y − A·x‖ / ‖y‖` over the rows, recomputed from the solution (not CG's recursive one).
pub fn solve_and_check<B: Backend, O: LinearOperator<B>>(
    b: &B,
    op: &O,
    rhs: &Array2<f64>,
    rtol: f64,
) -> Result<f64> {
    let y = b.upload_array(rhs)?;
    let params = SolveParams::default().with_tolerances(rtol, 0.0, 10 * op.size());
    let solution = conjugate_gradient(b, op, &y, None, &params)?;
    assert!(
        solution.converged.iter().all(|&c| c),
        "{}: {solution:?}",
        b.label()
    );
    let mut ax = b.zeros::<FloatOf<B>>(y.shape())?;
    op.apply(b, &solution.x, &mut ax)?;
    let ax = b.download_as::<f64, Ix2>(&ax)?;
    let worst = rhs
        .outer_iter()
        .zip(ax.outer_iter())
        .map(|(y, ax)| {
            let r: f64 = y.iter().zip(ax).map(|(a, b)| (a - b).powi(2)).sum();
            let n: f64 = y.iter().map(|a| a * a).sum();
            (r / n).sqrt()
        })
        .fold(0.0, f64::max);
    Ok(worst)
}

/// Three right-hand sides of length `n`.
pub fn rhs(n: usize) -> Array2<f64> {
    Array2::from_shape_fn((3, n), |(k, i)| {
        ((i * (k + 2)) as f64 * 0.37).sin() + 0.1 * k as f64
    })
}

/// Both solves on `b`; returns the two worst relative residuals.
pub fn run<B: Backend>(b: &B) -> Result<[f64; 2]> {
    // Single precision stops where its round-off does: ask for what it can give.
    let rtol = if FloatOf::<B>::EPS.as_f64() > 1e-10 {
        1e-5
    } else {
        1e-10
    };
    let chain = Chain { n: 200, sigma: 2.5 };
    let own = solve_and_check(b, &chain, &rhs(chain.n), rtol)?;
    let laplacian = LaplacianOperator::new(&[24, 24], Boundary::DirichletZero)?;
    let built_in = solve_and_check(b, &laplacian, &rhs(24 * 24), rtol)?;
    for (what, r) in [("chain", own), ("laplacian", built_in)] {
        assert!(
            r < 50.0 * rtol,
            "{} {what}: relative residual {r:e}",
            b.label()
        );
    }
    Ok([own, built_in])
}

fn main() -> Result<()> {
    let single = run(&Cpu::<Single>::new())?;
    let double = run(&Cpu::<Double>::new())?;
    println!("relative residuals ‖y − A·x‖/‖y‖ (own operator, Laplacian):");
    println!("  single {:.1e} {:.1e}", single[0], single[1]);
    println!("  double {:.1e} {:.1e}", double[0], double[1]);
    Ok(())
}
