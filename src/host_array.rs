//! Host arrays in the type they were stored in: what a job takes as input (`work`) and what
//! the readers return (`io`); or a float buffer another program owns, borrowed and read in
//! place ([`Borrowed`]: a numpy array handed to the Python package).

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::Float;

/// An array read from a file, in the type it was stored in (small integer types and every MRC
/// mode arrive as `F32`), or a borrowed float buffer ([`HostArray::Borrowed`]).
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
    /// A float32 or float64 buffer owned by another program (a numpy array), read in place.
    Borrowed(Borrowed),
}

/// The element type of a [`Borrowed`] buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    F32,
    F64,
}

/// How a [`Borrowed`] buffer was read, as bits of [`Shared::how`].
const READ_IN_PLACE: u8 = 1;
const CONVERTED: u8 = 2;

/// What every clone of one [`Borrowed`] shares: the buffer, the owner keeping it alive, and
/// how it was read.
struct Shared {
    ptr: *const u8,
    kind: Kind,
    shape: Vec<usize>,
    /// Keeps the buffer alive: dropped with the last clone, never before.
    _owner: Arc<dyn Any + Send + Sync>,
    how: AtomicU8,
}

// SAFETY: `ptr` is only ever read, through shared views whose lifetime is a borrow of a
// `Borrowed` (so of the `Arc<Shared>` holding `_owner`, which keeps the buffer allocated);
// nothing here writes through it, and `Borrowed::float32`/`float64`'s callers promise that
// nothing else writes to it while `_owner` lives. Shared reads of plain floats from several
// threads are data-race free, and the owner itself is `Send + Sync`.
#[allow(unsafe_code)]
unsafe impl Send for Shared {}
// SAFETY: as for `Send`: every access through `&Shared` is a read (`how` is atomic).
#[allow(unsafe_code)]
unsafe impl Sync for Shared {}

/// A C-ordered float32/float64 buffer another program owns (a numpy array given to the Python
/// package), read in place: [`HostArray::float_view`] of its own type is a view of that
/// buffer, so a job uploads it straight from there (on the CPU backend the one copy that
/// builds the run's working target). The owner (the numpy array object) is held by every
/// clone, so a view can never outlive the buffer. Records whether it was read in place or
/// converted ([`Borrowed::converted`]).
#[derive(Clone)]
pub struct Borrowed(Arc<Shared>);

impl Borrowed {
    /// # Safety
    /// `ptr` must point to `shape`'s product of initialised `T` values in C order, aligned for
    /// `T`, that stay allocated and are not written (by anyone) while `owner` or any clone of
    /// the returned value lives.
    #[allow(unsafe_code)]
    unsafe fn new<T: 'static>(
        ptr: *const T,
        kind: Kind,
        shape: Vec<usize>,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        Borrowed(Arc::new(Shared {
            ptr: ptr.cast(),
            kind,
            shape,
            _owner: owner,
            how: AtomicU8::new(0),
        }))
    }

    /// A borrowed float32 buffer (see [`Borrowed`]).
    ///
    /// # Safety
    /// `ptr` must point to `shape`'s product of initialised `f32` values in C order, aligned,
    /// that stay allocated and are not written (by anyone) while `owner` or any clone of the
    /// returned value lives.
    #[allow(unsafe_code)]
    pub unsafe fn float32(
        ptr: *const f32,
        shape: Vec<usize>,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        // SAFETY: the caller's promise, passed on.
        unsafe { Self::new(ptr, Kind::F32, shape, owner) }
    }

    /// A borrowed float64 buffer (see [`Borrowed`]).
    ///
    /// # Safety
    /// As [`Borrowed::float32`], for `f64` values.
    #[allow(unsafe_code)]
    pub unsafe fn float64(
        ptr: *const f64,
        shape: Vec<usize>,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        // SAFETY: the caller's promise, passed on.
        unsafe { Self::new(ptr, Kind::F64, shape, owner) }
    }

    /// The buffer as a view of `T` when it holds `T` (`None` otherwise); the view borrows
    /// `self`, which keeps the buffer alive.
    #[allow(unsafe_code)]
    fn typed<T: 'static>(&self) -> Option<ArrayViewD<'_, T>> {
        use std::any::TypeId;
        let want = match self.0.kind {
            Kind::F32 => TypeId::of::<f32>(),
            Kind::F64 => TypeId::of::<f64>(),
        };
        if TypeId::of::<T>() != want {
            return None;
        }
        // SAFETY: `ptr` holds `shape`'s product of `T` values in C order (checked type; the
        // constructor's contract), alive and unwritten while `self` (its owner) is borrowed.
        Some(unsafe { ArrayViewD::from_shape_ptr(IxDyn(&self.0.shape), self.0.ptr.cast::<T>()) })
    }

    /// The values as an owned array of their own type.
    fn to_owned_array(&self) -> HostArray {
        match self.0.kind {
            Kind::F32 => HostArray::F32(self.typed::<f32>().expect("kind f32").to_owned()),
            Kind::F64 => HostArray::F64(self.typed::<f64>().expect("kind f64").to_owned()),
        }
    }

    fn mark(&self, bit: u8) {
        self.0.how.fetch_or(bit, Ordering::Relaxed);
    }

    /// Whether any reader converted the values (another type, or an owned copy) instead of
    /// reading the buffer in place.
    pub fn converted(&self) -> bool {
        self.0.how.load(Ordering::Relaxed) & CONVERTED != 0
    }

    /// Whether a reader read the buffer in place ([`HostArray::float_view`]).
    pub fn read_in_place(&self) -> bool {
        self.0.how.load(Ordering::Relaxed) & READ_IN_PLACE != 0
    }
}

impl fmt::Debug for Borrowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Borrowed")
            .field("kind", &self.0.kind)
            .field("shape", &self.0.shape)
            .finish()
    }
}

impl PartialEq for Borrowed {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind == other.0.kind
            && match self.0.kind {
                Kind::F32 => self.typed::<f32>() == other.typed::<f32>(),
                Kind::F64 => self.typed::<f64>() == other.typed::<f64>(),
            }
    }
}

/// A view of any host array's values in their own type.
enum View<'a> {
    F32(ArrayViewD<'a, f32>),
    F64(ArrayViewD<'a, f64>),
    I32(ArrayViewD<'a, i32>),
    I64(ArrayViewD<'a, i64>),
}

impl HostArray {
    /// A view of the values in their own type.
    fn view(&self) -> View<'_> {
        match self {
            HostArray::F32(a) => View::F32(a.view()),
            HostArray::F64(a) => View::F64(a.view()),
            HostArray::I32(a) => View::I32(a.view()),
            HostArray::I64(a) => View::I64(a.view()),
            HostArray::Borrowed(b) => match b.0.kind {
                Kind::F32 => View::F32(b.typed().expect("kind f32")),
                Kind::F64 => View::F64(b.typed().expect("kind f64")),
            },
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            HostArray::F32(a) => a.shape(),
            HostArray::F64(a) => a.shape(),
            HostArray::I32(a) => a.shape(),
            HostArray::I64(a) => a.shape(),
            HostArray::Borrowed(b) => &b.0.shape,
        }
    }

    /// The stored dtype's numpy name.
    pub fn dtype(&self) -> &'static str {
        match self.view() {
            View::F32(_) => "float32",
            View::F64(_) => "float64",
            View::I32(_) => "int32",
            View::I64(_) => "int64",
        }
    }

    /// The array with its values owned ([`HostArray::Borrowed`] copied once into its own
    /// type; the other variants as they are).
    pub fn into_owned(self) -> HostArray {
        match self {
            HostArray::Borrowed(b) => {
                b.mark(CONVERTED);
                b.to_owned_array()
            }
            owned => owned,
        }
    }

    /// The values converted to the float type `T`, moved without a copy when they already are.
    pub fn into_float<T: Float>(self) -> ArrayD<T> {
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

    /// A view of the values when they are stored as the float type `T` already (no copy; a
    /// [`HostArray::Borrowed`] buffer read in place); `None` for any other type.
    pub fn float_view<T: Float>(&self) -> Option<ArrayViewD<'_, T>> {
        let any: &dyn Any = match self {
            HostArray::F32(a) => a,
            HostArray::F64(a) => a,
            HostArray::Borrowed(b) => {
                let v = b.typed::<T>()?;
                b.mark(READ_IN_PLACE);
                return Some(v);
            }
            _ => return None,
        };
        any.downcast_ref::<ArrayD<T>>().map(|a| a.view())
    }

    /// The borrowed buffer, when the values are one ([`HostArray::Borrowed`]).
    pub fn borrowed(&self) -> Option<&Borrowed> {
        match self {
            HostArray::Borrowed(b) => Some(b),
            _ => None,
        }
    }

    /// The first finite value whose magnitude exceeds `f32::MAX` (it would become infinite in
    /// single precision), for float64 data; `None` when every value fits.
    pub fn first_beyond_f32(&self) -> Option<f64> {
        match self.view() {
            View::F64(a) => a
                .iter()
                .copied()
                .find(|v| v.is_finite() && v.abs() > f32::MAX as f64),
            View::I64(a) => a
                .iter()
                .map(|&v| v as f64)
                .find(|v| v.abs() > f32::MAX as f64),
            _ => None,
        }
    }

    /// The values converted to the float type `T`.
    pub fn to_float<T: Float>(&self) -> ArrayD<T> {
        if let HostArray::Borrowed(b) = self {
            b.mark(CONVERTED);
        }
        match self.view() {
            View::F32(a) => a.mapv(|v| T::from_f64(v as f64)),
            View::F64(a) => a.mapv(T::from_f64),
            View::I32(a) => a.mapv(|v| T::from_f64(v as f64)),
            View::I64(a) => a.mapv(|v| T::from_f64(v as f64)),
        }
    }

    /// The values as `i64` when the array holds integers (or integral floats).
    pub fn to_i64(&self) -> std::result::Result<ArrayD<i64>, String> {
        let bad = |v: f64| format!("holds the non-integer value {v}, expected integers");
        if let HostArray::Borrowed(b) = self {
            b.mark(CONVERTED);
        }
        Ok(match self.view() {
            View::I32(a) => a.mapv(i64::from),
            View::I64(a) => a.to_owned(),
            View::F32(a) => {
                if let Some(v) = a.iter().find(|v| v.fract() != 0.0 || !v.is_finite()) {
                    return Err(bad(*v as f64));
                }
                a.mapv(|v| v as i64)
            }
            View::F64(a) => {
                if let Some(v) = a.iter().find(|v| v.fract() != 0.0 || !v.is_finite()) {
                    return Err(bad(*v));
                }
                a.mapv(|v| v as i64)
            }
        })
    }

    /// The number of NaN values (0 for integer data).
    pub fn count_nan(&self) -> usize {
        match self.view() {
            View::F32(a) => a.iter().filter(|v| v.is_nan()).count(),
            View::F64(a) => a.iter().filter(|v| v.is_nan()).count(),
            _ => 0,
        }
    }

    /// Number of −∞ values (positions a restricted match did not search).
    pub fn count_neg_inf(&self) -> usize {
        match self.view() {
            View::F32(a) => a.iter().filter(|&&v| v == f32::NEG_INFINITY).count(),
            View::F64(a) => a.iter().filter(|&&v| v == f64::NEG_INFINITY).count(),
            _ => 0,
        }
    }

    /// Number of NaN or infinite values.
    pub fn count_nonfinite(&self) -> usize {
        match self.view() {
            View::F32(a) => a.iter().filter(|v| !v.is_finite()).count(),
            View::F64(a) => a.iter().filter(|v| !v.is_finite()).count(),
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

    #[test]
    #[allow(unsafe_code)]
    fn borrowed_is_read_in_place_and_kept_alive_by_its_owner() {
        let buf: Arc<Vec<f32>> = Arc::new(vec![1.0, 2.0, 3.0, 4.5, 5.0, 6.0]);
        let ptr = buf.as_ptr();
        // SAFETY: `buf` holds 6 f32 in C order, is the owner, and is never written.
        let b = unsafe { Borrowed::float32(ptr, vec![2, 3], buf.clone()) };
        let a = HostArray::Borrowed(b.clone());
        drop(buf); // the owner lives on in `b`
        assert_eq!((a.shape(), a.dtype()), (&[2usize, 3][..], "float32"));
        assert!(!b.read_in_place() && !b.converted());
        let v = a.float_view::<f32>().expect("f32 as f32");
        assert_eq!(v.as_ptr(), ptr, "a view of the owner's buffer, not a copy");
        assert_eq!(v[[1, 0]], 4.5);
        assert!(b.read_in_place() && !b.converted());
        assert!(a.float_view::<f64>().is_none());
        assert_eq!(a.count_nonfinite(), 0);
        assert_eq!(a.to_float::<f64>()[[0, 2]], 3.0);
        assert!(b.converted());
        assert_eq!(a.clone().into_owned(), HostArray::F32(v.to_owned()));
        assert_eq!(a, HostArray::Borrowed(b));
    }
}
