use cudarc::driver::PushKernelArg;
use monomorph_core::{ArrayMeta, Correlate, Float, Index, Precision, Result};

use super::{same_shape, tn};
use crate::error::Ck;
use crate::{Cuda, CudaArray};

impl<P: Precision> Correlate for Cuda<P> {
    fn running_max<T: Float, I: Index>(
        &self,
        scores: &CudaArray<T>,
        best: &mut CudaArray<T>,
        best_index: &mut CudaArray<I>,
        index: I,
    ) -> Result<()> {
        same_shape("running_max: best vs scores", scores.shape(), best.shape())?;
        same_shape(
            "running_max: best_index vs scores",
            scores.shape(),
            best_index.shape(),
        )?;
        let n = scores.len() as i64;
        if n == 0 {
            return Ok(());
        }
        let f = self.func(&format!("running_max_{}_{}", tn::<T>()?, tn::<I>()?))?;
        let bytes = bytemuck::bytes_of(&index);
        let mut l = self.inner.stream.launch_builder(&f);
        l.arg(&scores.buf)
            .arg(&mut best.buf)
            .arg(&mut best_index.buf);
        let (i32v, i64v): (i32, i64);
        if bytes.len() == 4 {
            i32v = bytemuck::pod_read_unaligned(bytes);
            l.arg(&i32v);
        } else {
            i64v = bytemuck::pod_read_unaligned(bytes);
            l.arg(&i64v);
        }
        l.arg(&n);
        // SAFETY: the three buffers hold `n` elements of their types.
        unsafe { l.launch(self.grid(n as usize)) }.ck()?;
        Ok(())
    }
}
