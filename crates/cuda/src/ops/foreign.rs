//! Foreign buffers: another program's arrays on this device copied in (one device-to-device
//! copy), arrays handed over in place. The decisions (location, ordinal, type) are the shared
//! [`check_adopt`]'s; this file holds only the copy and the hand-over.

use std::marker::PhantomData;

use cudarc::driver::{DevicePtr, DevicePtrMut};
use monomorph_core::backend::{ExportedBuffer, ForeignBuffer, Location, check_adopt};
use monomorph_core::{ArrayMeta, DType, Element, Foreign, Memory, Precision, Real, Result};

use crate::error::Ck;
use crate::{Cuda, CudaArray};

impl<P: Precision> Cuda<P> {
    /// `buf`'s values (of type `S`, on this device) in a new array of the float type: copied
    /// into a new allocation of `S` (converted by the `cast` kernel when `S` is the other
    /// float type). Waits for the copy, so that `buf` may be released on return.
    fn adopt_as<S: Real>(&self, buf: &ForeignBuffer) -> Result<CudaArray<P::Float>> {
        let stream = &self.inner.stream;
        let mut raw = self.zeros::<S>(buf.shape())?;
        let bytes = buf.len() * size_of::<S>();
        if bytes > 0 {
            let (dst, guard) = raw.buf.device_ptr_mut(stream);
            // SAFETY: `dst` is the new allocation of `bytes` (or more) bytes made above on this
            // stream; the source is `bytes` bytes of initialised values on this device
            // (`ForeignBuffer::new`'s contract, location checked by `check_adopt`) that stay
            // allocated while `buf` lives, which outlasts the copy (synchronised below before
            // returning). The copy only reads the source.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    dst,
                    buf.addr() as cudarc::driver::sys::CUdeviceptr,
                    bytes,
                    stream.cu_stream(),
                )
            }
            .ck()?;
            drop(guard);
        }
        // The caller may release `buf` as soon as this returns: the copy must be done.
        stream.synchronize().ck()?;
        self.inner.ctx.check_err().ck()?;
        if S::DTYPE == <P::Float as Element>::DTYPE {
            // The same type: the copy is the array (the marker type renamed, bytes as they are).
            return Ok(CudaArray {
                buf: raw.buf,
                shape: raw.shape,
                _t: PhantomData,
            });
        }
        let mut out = self.zeros::<P::Float>(buf.shape())?;
        self.cast(&raw, &mut out)?;
        Ok(out)
    }
}

impl<P: Precision> Foreign for Cuda<P> {
    fn location(&self) -> Location {
        Location::Cuda(self.inner.ordinal)
    }

    fn adopt(&self, buf: &ForeignBuffer) -> Result<CudaArray<P::Float>> {
        check_adopt(buf, Foreign::location(self), "cuda")?;
        // Make the producer's work visible: whatever stream wrote the buffer (DLPack asks the
        // producer to order its work before the stream the consumer names; this waits for
        // every stream of the context besides), its writes are complete before the copy.
        self.inner.ctx.synchronize().ck()?;
        match buf.dtype() {
            DType::F32 => self.adopt_as::<f32>(buf),
            _ => self.adopt_as::<f64>(buf),
        }
    }

    fn export<T: Element>(&self, a: CudaArray<T>) -> Result<ExportedBuffer> {
        // Every queued write of `a` is done before anyone else reads it, on any stream.
        self.synchronize()?;
        let addr = if a.is_empty() {
            0
        } else {
            let (p, _guard) = a.buf.device_ptr(&self.inner.stream);
            p as usize
        };
        Ok(ExportedBuffer {
            addr,
            location: Foreign::location(self),
            shape: a.shape().to_vec(),
            dtype: T::DTYPE,
            // The slice holds its stream and context (`Arc`s): dropping it frees the memory on
            // its own context from any thread, after this backend value may be gone.
            owner: Box::new(a),
        })
    }
}
