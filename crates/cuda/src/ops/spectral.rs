use std::sync::Arc;

use cudarc::driver::{DevicePtr, DevicePtrMut};
use monomorph_core::{ArrayMeta, ComplexOf, DType, Error, FloatOf, Precision, Result, Spectral};

use crate::fft::{self, CudaFftPlan};
use crate::{Cuda, CudaArray};

impl<P: Precision> Spectral for Cuda<P> {
    fn fft_plan(&self, shape: &[usize], axes: &[usize]) -> Result<CudaFftPlan> {
        monomorph_core::check_fft_plan(shape, axes)?;
        if !crate::libraries().cufft {
            return Err(Error::DeviceUnavailable("cuFFT missing".into()));
        }
        let double = <FloatOf<Self> as monomorph_core::Element>::DTYPE == DType::F64;
        let key = (shape.to_vec(), axes.to_vec(), double);
        let exec = {
            let mut cache = self.inner.fft.lock().map_err(|_| Error::Backend {
                backend: "cuda",
                message: "FFT plan cache lock poisoned".into(),
            })?;
            match cache.get(&key) {
                Some(e) => e.clone(),
                None => {
                    let e = Arc::new(fft::build(shape, axes, double, &self.inner.stream)?);
                    cache.insert(key, e.clone());
                    e
                }
            }
        };
        Ok(CudaFftPlan {
            real_shape: shape.to_vec(),
            complex_shape: monomorph_core::shape::rfft_shape(shape, axes),
            axes: axes.to_vec(),
            exec,
        })
    }

    fn rfft(
        &self,
        plan: &CudaFftPlan,
        input: &CudaArray<FloatOf<Self>>,
        out: &mut CudaArray<ComplexOf<Self>>,
    ) -> Result<()> {
        monomorph_core::check_fft_arrays(plan, "rfft", input.shape(), out.shape())?;
        let s = &self.inner.stream;
        let (ip, _gi) = input.buf.device_ptr(s);
        let (op, _go) = out.buf.device_ptr_mut(s);
        let double = plan.exec.double;
        for (k, st) in plan.exec.forward.iter().enumerate() {
            let src = if k == 0 { ip } else { op };
            // SAFETY: the shapes match the plan (checked), so every step stays in bounds.
            unsafe { fft::run(st, double, src, op, s)? };
        }
        Ok(())
    }

    fn irfft(
        &self,
        plan: &CudaFftPlan,
        input: &mut CudaArray<ComplexOf<Self>>,
        out: &mut CudaArray<FloatOf<Self>>,
    ) -> Result<()> {
        monomorph_core::check_fft_arrays(plan, "irfft", out.shape(), input.shape())?;
        let s = &self.inner.stream;
        let (ip, _gi) = input.buf.device_ptr_mut(s);
        let (op, _go) = out.buf.device_ptr_mut(s);
        let double = plan.exec.double;
        let last = plan.exec.inverse.len() - 1;
        for (k, st) in plan.exec.inverse.iter().enumerate() {
            let dst = if k == last { op } else { ip };
            // SAFETY: the shapes match the plan (checked), so every step stays in bounds.
            unsafe { fft::run(st, double, ip, dst, s)? };
        }
        Ok(())
    }
}
