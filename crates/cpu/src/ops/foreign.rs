//! Foreign buffers: host buffers of other programs copied in, arrays handed over in place.

use monomorph_core::backend::{ExportedBuffer, ForeignBuffer, Location, check_adopt};
use monomorph_core::{DType, Element, Error, Foreign, Memory, Precision, Real, Result};
use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::Cpu;

/// A view of `buf`'s values as `T` (host memory; `T` of its element type, checked by the
/// caller).
#[allow(unsafe_code)]
fn view<T: Element>(buf: &ForeignBuffer) -> Result<ArrayViewD<'_, T>> {
    debug_assert!(buf.location() == Location::Host && buf.dtype() == T::DTYPE);
    if buf.is_empty() {
        return ArrayViewD::from_shape(IxDyn(buf.shape()), &[]).map_err(bad);
    }
    // SAFETY: `ForeignBuffer::new`'s contract: a non-empty host buffer's `addr` holds
    // `shape`'s product of initialised, aligned, C-ordered values of its dtype (here `T`,
    // checked), allocated and unwritten while `buf` (which holds the owner) is borrowed.
    Ok(unsafe { ArrayViewD::from_shape_ptr(IxDyn(buf.shape()), buf.addr() as *const T) })
}

fn bad(e: ndarray::ShapeError) -> Error {
    Error::invalid("buffer", e.to_string())
}

impl<P: Precision> Cpu<P> {
    /// `buf`'s values (of type `S`) as a new array of the float type: the same type copied
    /// by [`Memory::upload`] (all threads), another converted as `as` does.
    fn adopt_as<S: Real>(&self, buf: &ForeignBuffer) -> Result<ArrayD<P::Float>> {
        let v = view::<S>(buf)?;
        if S::DTYPE == <P::Float as Element>::DTYPE
            && let Some(s) = v.as_slice()
        {
            // The same type: reinterpreted (a no-op cast between one type), copied once.
            let same: &[P::Float] = bytemuck::cast_slice(s);
            return self.upload(ArrayViewD::from_shape(IxDyn(buf.shape()), same).map_err(bad)?);
        }
        self.upload_owned(v.mapv(|x| P::Float::from_f64(x.as_f64())))
    }
}

impl<P: Precision> Foreign for Cpu<P> {
    fn location(&self) -> Location {
        Location::Host
    }

    fn adopt(&self, buf: &ForeignBuffer) -> Result<ArrayD<P::Float>> {
        check_adopt(buf, Location::Host, "cpu")?;
        match buf.dtype() {
            DType::F32 => self.adopt_as::<f32>(buf),
            _ => self.adopt_as::<f64>(buf),
        }
    }

    fn export<T: Element>(&self, a: ArrayD<T>) -> Result<ExportedBuffer> {
        // The backend's arrays are standard layout; a user's other view is made so once.
        let a = if a.is_standard_layout() {
            a
        } else {
            a.as_standard_layout().into_owned()
        };
        let addr = if a.is_empty() { 0 } else { a.as_ptr() as usize };
        Ok(ExportedBuffer {
            addr,
            location: Location::Host,
            shape: a.shape().to_vec(),
            dtype: T::DTYPE,
            // Moving the array moves its header, not its heap buffer: `addr` stays valid.
            owner: Box::new(a),
        })
    }
}
