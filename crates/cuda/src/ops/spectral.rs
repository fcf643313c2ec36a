use std::sync::Arc;

use cudarc::driver::{DevicePtr, DevicePtrMut};
use monomorph_core::{
    ArrayMeta, ComplexOf, DType, Error, FftPlan, FloatOf, Precision, Result, Spectral,
    check_rfft_pruned_nonzero,
};

use crate::error::Ck;
use crate::fft::{self, CudaFftPlan, PrunedExec};
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

    /// The pruned schedule of [`fft::pruned_layout`] when it applies (3 stream-ordered
    /// operations: a memset of the slabs beyond the box, the R2C of the box's slabs, the C2C
    /// along axis 0), else the full transform. Plans are built once per plan and box extent,
    /// then cached with the plan; nothing is allocated per call.
    fn rfft_pruned(
        &self,
        plan: &CudaFftPlan,
        input: &CudaArray<FloatOf<Self>>,
        nonzero: &[usize],
        out: &mut CudaArray<ComplexOf<Self>>,
    ) -> Result<()> {
        check_rfft_pruned_nonzero(plan.real_shape(), nonzero)?;
        monomorph_core::check_fft_arrays(plan, "rfft_pruned", input.shape(), out.shape())?;
        let s = &self.inner.stream;
        if nonzero.contains(&0) {
            // An empty box: the input is zero, so is its spectrum.
            return s.memset_zeros(&mut out.buf).ck();
        }
        let Some(px) = self.pruned_exec(plan, nonzero)? else {
            return self.rfft(plan, input, out);
        };
        // The slabs beyond the box: zeros (their partial spectra are zero). Through the safe
        // memset, which binds the context to this thread.
        let mut tail = out
            .buf
            .try_slice_mut(px.zero_at..px.zero_at + px.zero_bytes)
            .ok_or_else(|| Error::Backend {
                backend: "cuda",
                message: "pruned rfft: the zeroed range lies outside the output".into(),
            })?;
        s.memset_zeros(&mut tail).ck()?;
        let (ip, _gi) = input.buf.device_ptr(s);
        let (op, _go) = out.buf.device_ptr_mut(s);
        let double = plan.exec.double;
        // SAFETY: the shapes match the plan (checked): the planes' R2C reads the input's
        // first slabs and writes the output's; the columns' C2C runs in place over it all.
        unsafe {
            fft::run(&px.planes, double, ip, op, s)?;
            fft::run(&px.cols, double, op, op, s)?;
        }
        Ok(())
    }
}

impl<P: Precision> Cuda<P> {
    /// The cached pruned forward of `plan` for a box of extents `nonzero` (none empty), or
    /// `None` when the full transform runs instead.
    fn pruned_exec(
        &self,
        plan: &CudaFftPlan,
        nonzero: &[usize],
    ) -> Result<Option<Arc<PrunedExec>>> {
        let a = nonzero[0];
        let mut cache = plan.exec.pruned.lock().map_err(|_| Error::Backend {
            backend: "cuda",
            message: "pruned FFT plan cache lock poisoned".into(),
        })?;
        if let Some(e) = cache.get(&a) {
            return Ok(e.clone());
        }
        let layout = fft::pruned_layout(plan.real_shape(), &plan.axes, nonzero, plan.exec.double)?;
        let e = match layout {
            Some(l) => fft::build_pruned(l, plan.exec.double, &self.inner.stream)?.map(Arc::new),
            None => None,
        };
        cache.insert(a, e.clone());
        Ok(e)
    }
}
