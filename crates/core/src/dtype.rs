//! Element types and the compile-time precision sets.

use std::fmt::{Debug, Display, LowerExp};

use num_complex::Complex;

/// Runtime tag of an element type (used by device backends to pick a kernel and by I/O).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// `u8`
    U8,
    /// `Complex<f32>`
    C64,
    /// `Complex<f64>`
    C128,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }
    /// Short name as numpy spells it (`float32`, `complex64`…).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }
}

/// A type that can live in a backend array: plain old data with a runtime tag.
pub trait Element:
    Copy + Default + Debug + PartialEq + Send + Sync + bytemuck::Pod + 'static
{
    /// The runtime tag of this type.
    const DTYPE: DType;
}

/// A real scalar (float or integer) that can be ordered and converted.
pub trait Real:
    Element
    + PartialOrd
    + Display
    + num_traits::Num
    + num_traits::NumCast
    + num_traits::Bounded
    + num_traits::AsPrimitive<f64>
    + std::ops::AddAssign
{
    /// Converts from `f64` (rounding / truncating as `as` does).
    fn from_f64(v: f64) -> Self;
    /// Converts to `f64` (named so as not to collide with `num_traits::ToPrimitive::to_f64`,
    /// which returns an `Option`).
    fn as_f64(self) -> f64 {
        self.as_()
    }
    /// The lowest value (−∞ for floats, `MIN` for integers).
    fn lowest() -> Self;
    /// `false` only for NaN and infinities.
    fn finite(self) -> bool;
}

/// A floating-point scalar: `f32` or `f64`.
pub trait Float:
    Real
    + num_traits::Float
    + num_traits::FloatConst
    + std::iter::Sum
    + LowerExp
    + std::ops::SubAssign
    + std::ops::MulAssign
    + std::ops::DivAssign
{
    /// Machine epsilon (`f32::EPSILON` for `f32`).
    const EPS: Self;
    /// The dtype tag of `Complex<Self>`.
    const COMPLEX_DTYPE: DType;
}

/// An integer index type: `i32` or `i64` (rotation-index maps, CSR indices).
pub trait Index: Real + Eq + Ord + std::hash::Hash {
    /// Converts from `usize`, `None` when out of range.
    fn from_usize(v: usize) -> Option<Self>;
    /// Converts to `usize`, `None` when negative or out of range.
    fn to_usize(self) -> Option<usize>;
    /// Converts from `i64` (as `as` does).
    fn from_i64(v: i64) -> Self;
}

macro_rules! float_impl {
    ($t:ty, $tag:ident, $ctag:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$tag;
        }
        impl Real for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn lowest() -> Self {
                <$t>::NEG_INFINITY
            }
            fn finite(self) -> bool {
                self.is_finite()
            }
        }
        impl Float for $t {
            const EPS: Self = <$t>::EPSILON;
            const COMPLEX_DTYPE: DType = DType::$ctag;
        }
    };
}
float_impl!(f32, F32, C64);
float_impl!(f64, F64, C128);

macro_rules! int_impl {
    ($t:ty, $tag:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$tag;
        }
        impl Real for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn finite(self) -> bool {
                true
            }
        }
        impl Index for $t {
            fn from_usize(v: usize) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
            fn to_usize(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}
int_impl!(i32, I32);
int_impl!(i64, I64);

impl Element for u8 {
    const DTYPE: DType = DType::U8;
}

impl<T: Float> Element for Complex<T> {
    const DTYPE: DType = T::COMPLEX_DTYPE;
}

/// A compile-time set of element types (pytme's dtype sets), a type parameter of every backend.
///
/// Spectra are `num_complex::Complex<Self::Float>` ([`ComplexOf`](crate::ComplexOf) of a
/// backend): the complex type is derived from the float type so that no backend can pair `f32`
/// scores with `Complex<f64>` spectra. Sums and dot products accumulate in
/// [`Accum`](Precision::Accum), the overflow-safe type (`f64` for both sets today).
pub trait Precision: 'static + Send + Sync + Debug + Default + Copy {
    /// Scores, volumes, solves.
    type Float: Float;
    /// Index maps (best rotation per voxel).
    type Int: Index;
    /// The overflow-safe accumulator of sums and dot products: what the
    /// [`Reduce`](crate::Reduce) ops return ([`AccumOf`](crate::AccumOf) of a backend), the
    /// dot products of conjugate gradients and the moments of the standardisations are
    /// computed in. `f64` for [`Single`] and [`Double`]; a reduced-precision set (`f16`
    /// scores) would name its own here, and nothing else changes.
    type Accum: Float;
    /// `"single"` or `"double"`.
    const NAME: &'static str;
}

/// `f32` / `Complex<f32>` / `i32`, accumulating in `f64`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Single;
/// `f64` / `Complex<f64>` / `i64`, accumulating in `f64`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Double;

impl Precision for Single {
    type Float = f32;
    type Int = i32;
    type Accum = f64;
    const NAME: &'static str = "single";
}
impl Precision for Double {
    type Float = f64;
    type Int = i64;
    type Accum = f64;
    const NAME: &'static str = "double";
}
