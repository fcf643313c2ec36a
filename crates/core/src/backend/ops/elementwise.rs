use num_complex::Complex;

use crate::backend::{Arr, BackendTypes};
use crate::dtype::Float;
use crate::error::Result;

/// A binary element-wise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a − b`
    Sub,
    /// `a · b`
    Mul,
    /// `a / b`
    Div,
    /// `max(a, b)` (NaN loses)
    Max,
    /// `min(a, b)` (NaN loses)
    Min,
}

impl BinaryOp {
    /// Applies the operation to two scalars.
    #[inline(always)]
    pub fn apply<T: Float>(self, a: T, b: T) -> T {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
        }
    }
}

/// A unary element-wise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `−a`
    Neg,
    /// `|a|`
    Abs,
    /// `√a`
    Sqrt,
    /// `a²`
    Square,
    /// `1/a`
    Recip,
    /// `eᵃ`
    Exp,
    /// `ln a`
    Ln,
}

impl UnaryOp {
    /// Applies the operation to a scalar.
    #[inline(always)]
    pub fn apply<T: Float>(self, a: T) -> T {
        match self {
            UnaryOp::Neg => -a,
            UnaryOp::Abs => a.abs(),
            UnaryOp::Sqrt => a.sqrt(),
            UnaryOp::Square => a * a,
            UnaryOp::Recip => a.recip(),
            UnaryOp::Exp => a.exp(),
            UnaryOp::Ln => a.ln(),
        }
    }
}

/// Real and complex element-wise arithmetic. All arrays of one call have the same shape.
pub trait Elementwise: BackendTypes {
    /// `out = a op b`.
    fn binary<T: Float>(
        &self,
        op: BinaryOp,
        a: &Arr<Self, T>,
        b: &Arr<Self, T>,
        out: &mut Arr<Self, T>,
    ) -> Result<()>;
    /// `a = a op b`.
    fn binary_assign<T: Float>(
        &self,
        op: BinaryOp,
        a: &mut Arr<Self, T>,
        b: &Arr<Self, T>,
    ) -> Result<()>;
    /// `a = a op s` for a scalar `s`, given as `f64` whatever `T` is (as the algorithms take
    /// their parameters) and rounded to `T` once: exact for `f64` arrays, and for any `f32`
    /// value passed as `v.as_f64()`.
    fn scalar_assign<T: Float>(&self, op: BinaryOp, a: &mut Arr<Self, T>, s: f64) -> Result<()>;
    /// `a = op(a)`.
    fn unary_assign<T: Float>(&self, op: UnaryOp, a: &mut Arr<Self, T>) -> Result<()>;
    /// `y = y + alpha·x`, `alpha` rounded to `T` once (see [`Elementwise::scalar_assign`]).
    fn axpy<T: Float>(&self, alpha: f64, x: &Arr<Self, T>, y: &mut Arr<Self, T>) -> Result<()>;
    /// `out = a · conj(b)` (the cross-power spectrum of a correlation).
    fn complex_mul_conj<T: Float>(
        &self,
        a: &Arr<Self, Complex<T>>,
        b: &Arr<Self, Complex<T>>,
        out: &mut Arr<Self, Complex<T>>,
    ) -> Result<()>;
    /// `out = a · b`.
    fn complex_mul<T: Float>(
        &self,
        a: &Arr<Self, Complex<T>>,
        b: &Arr<Self, Complex<T>>,
        out: &mut Arr<Self, Complex<T>>,
    ) -> Result<()>;
    /// `a = a · s` for a real scalar `s`, rounded to `T` once (see
    /// [`Elementwise::scalar_assign`]).
    fn complex_scale<T: Float>(&self, a: &mut Arr<Self, Complex<T>>, s: f64) -> Result<()>;
    /// `dst = |src|²` per element.
    fn complex_norm_sq<T: Float>(
        &self,
        src: &Arr<Self, Complex<T>>,
        dst: &mut Arr<Self, T>,
    ) -> Result<()>;
}

/// The argument check of every [`Elementwise`] op (`op` names it), shared by the backends so
/// that they fail alike: each of `others` (name, shape) has the shape of `first` (name, shape);
/// the error reads `{op}: {other} vs {first}`.
pub fn check_elementwise(
    op: &str,
    first: (&str, &[usize]),
    others: &[(&str, &[usize])],
) -> Result<()> {
    for (name, shape) in others {
        super::same_shape_named(|| format!("{op}: {name} vs {}", first.0), first.1, shape)?;
    }
    Ok(())
}

/// [`check_elementwise`] for the binary ops (`binary`, `complex_mul`, `complex_mul_conj`):
/// `b` and `out` have `a`'s shape.
pub fn check_binary(op: &str, a: &[usize], b: &[usize], out: &[usize]) -> Result<()> {
    check_elementwise(op, ("a", a), &[("b", b), ("out", out)])
}
