//! Host arrays in the type they were stored in: what a job takes as input (`work`) and what
//! the readers return (`io`).

use ndarray::ArrayD;

use crate::Float;

/// An array read from a file, in the type it was stored in (small integer types and every MRC
/// mode arrive as `F32`).
#[derive(Debug, Clone, PartialEq)]
pub enum HostArray {
    /// float32 (also int8/uint8/int16/uint16 and MRC data).
    F32(ArrayD<f32>),
    /// float64.
    F64(ArrayD<f64>),
    /// int32.
    I32(ArrayD<i32>),
    /// int64.
    I64(ArrayD<i64>),
}

impl HostArray {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            HostArray::F32(a) => a.shape(),
            HostArray::F64(a) => a.shape(),
            HostArray::I32(a) => a.shape(),
            HostArray::I64(a) => a.shape(),
        }
    }

    /// The stored dtype's numpy name.
    pub fn dtype(&self) -> &'static str {
        match self {
            HostArray::F32(_) => "float32",
            HostArray::F64(_) => "float64",
            HostArray::I32(_) => "int32",
            HostArray::I64(_) => "int64",
        }
    }

    /// The values converted to the float type `T`, moved without a copy when they already are.
    pub fn into_float<T: Float>(self) -> ArrayD<T> {
        use std::any::Any;
        fn cast<S: 'static, T: Float>(a: ArrayD<S>) -> Result<ArrayD<T>, ArrayD<S>> {
            let b: Box<dyn Any> = Box::new(a);
            match b.downcast::<ArrayD<T>>() {
                Ok(t) => Ok(*t),
                Err(b) => Err(*b.downcast::<ArrayD<S>>().expect("the type it was boxed as")),
            }
        }
        match self {
            HostArray::F32(a) => cast(a).unwrap_or_else(|a| a.mapv(|v| T::from_f64(v as f64))),
            HostArray::F64(a) => cast(a).unwrap_or_else(|a| a.mapv(T::from_f64)),
            other => other.to_float(),
        }
    }

    /// A view of the values when they are stored as the float type `T` already (no copy);
    /// `None` for any other type.
    pub fn float_view<T: Float>(&self) -> Option<ndarray::ArrayViewD<'_, T>> {
        use std::any::Any;
        let any: &dyn Any = match self {
            HostArray::F32(a) => a,
            HostArray::F64(a) => a,
            _ => return None,
        };
        any.downcast_ref::<ArrayD<T>>().map(|a| a.view())
    }

    /// The first finite value whose magnitude exceeds `f32::MAX` (it would become infinite in
    /// single precision), for float64 data; `None` when every value fits.
    pub fn first_beyond_f32(&self) -> Option<f64> {
        match self {
            HostArray::F64(a) => a
                .iter()
                .copied()
                .find(|v| v.is_finite() && v.abs() > f32::MAX as f64),
            HostArray::I64(a) => a
                .iter()
                .map(|&v| v as f64)
                .find(|v| v.abs() > f32::MAX as f64),
            _ => None,
        }
    }

    /// The values converted to the float type `T`.
    pub fn to_float<T: Float>(&self) -> ArrayD<T> {
        match self {
            HostArray::F32(a) => a.mapv(|v| T::from_f64(v as f64)),
            HostArray::F64(a) => a.mapv(T::from_f64),
            HostArray::I32(a) => a.mapv(|v| T::from_f64(v as f64)),
            HostArray::I64(a) => a.mapv(|v| T::from_f64(v as f64)),
        }
    }

    /// The values as `i64` when the array holds integers (or integral floats).
    pub fn to_i64(&self) -> std::result::Result<ArrayD<i64>, String> {
        let bad = |v: f64| format!("holds the non-integer value {v}, expected integers");
        Ok(match self {
            HostArray::I32(a) => a.mapv(i64::from),
            HostArray::I64(a) => a.clone(),
            HostArray::F32(a) => {
                if let Some(v) = a.iter().find(|v| v.fract() != 0.0 || !v.is_finite()) {
                    return Err(bad(*v as f64));
                }
                a.mapv(|v| v as i64)
            }
            HostArray::F64(a) => {
                if let Some(v) = a.iter().find(|v| v.fract() != 0.0 || !v.is_finite()) {
                    return Err(bad(*v));
                }
                a.mapv(|v| v as i64)
            }
        })
    }

    /// The number of NaN values (0 for integer data).
    pub fn count_nan(&self) -> usize {
        match self {
            HostArray::F32(a) => a.iter().filter(|v| v.is_nan()).count(),
            HostArray::F64(a) => a.iter().filter(|v| v.is_nan()).count(),
            _ => 0,
        }
    }

    /// Number of −∞ values (positions a restricted match did not search).
    pub fn count_neg_inf(&self) -> usize {
        match self {
            HostArray::F32(a) => a.iter().filter(|&&v| v == f32::NEG_INFINITY).count(),
            HostArray::F64(a) => a.iter().filter(|&&v| v == f64::NEG_INFINITY).count(),
            _ => 0,
        }
    }

    /// Number of NaN or infinite values.
    pub fn count_nonfinite(&self) -> usize {
        match self {
            HostArray::F32(a) => a.iter().filter(|v| !v.is_finite()).count(),
            HostArray::F64(a) => a.iter().filter(|v| !v.is_finite()).count(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_view_is_the_stored_buffer_of_the_same_type_only() {
        let a =
            HostArray::F32(ArrayD::from_shape_vec(vec![2, 2], vec![1.0, 2.0, 3.0, 4.5]).unwrap());
        let HostArray::F32(inner) = &a else {
            unreachable!()
        };
        let v = a.float_view::<f32>().expect("f32 as f32");
        assert_eq!(v.as_ptr(), inner.as_ptr());
        assert!(a.float_view::<f64>().is_none());
        let i = HostArray::I32(ArrayD::zeros(vec![3]));
        assert!(i.float_view::<f32>().is_none());
    }
}
