//! `Spectral` for the CPU backend: N-d real FFTs on realfft/rustfft (see `crate::fft`).

use monomorph_core::{Precision, Result, Spectral};
use ndarray::ArrayD;

use super::{data, data_mut};
use crate::{Cpu, CpuFftPlan, fft};

type F<P> = <P as Precision>::Float;
type C<P> = num_complex::Complex<F<P>>;

impl<P: Precision> Spectral for Cpu<P> {
    fn fft_plan(&self, shape: &[usize], axes: &[usize]) -> Result<CpuFftPlan> {
        self.inner.fft_cache.get::<F<P>>(shape, axes)
    }

    fn rfft(&self, plan: &CpuFftPlan, input: &ArrayD<F<P>>, out: &mut ArrayD<C<P>>) -> Result<()> {
        self.install(|| {
            let out_shape = out.shape().to_vec();
            fft::forward(
                plan,
                input.shape(),
                data("input of rfft", input)?,
                &out_shape,
                data_mut("out of rfft", out)?,
                None,
                None,
            )
        })
    }

    fn irfft(
        &self,
        plan: &CpuFftPlan,
        input: &mut ArrayD<C<P>>,
        out: &mut ArrayD<F<P>>,
    ) -> Result<()> {
        self.install(|| {
            let (in_shape, out_shape) = (input.shape().to_vec(), out.shape().to_vec());
            fft::inverse(
                plan,
                &in_shape,
                data_mut("input of irfft", input)?,
                &out_shape,
                data_mut("out of irfft", out)?,
            )
        })
    }

    fn rfft_pruned(
        &self,
        plan: &CpuFftPlan,
        input: &ArrayD<F<P>>,
        nonzero: &[usize],
        out: &mut ArrayD<C<P>>,
    ) -> Result<()> {
        self.install(|| {
            let out_shape = out.shape().to_vec();
            fft::forward(
                plan,
                input.shape(),
                data("input of rfft_pruned", input)?,
                &out_shape,
                data_mut("out of rfft_pruned", out)?,
                Some(nonzero),
                None,
            )
        })
    }
}
