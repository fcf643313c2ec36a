use monomorph_core::{Error, Precision, Result, Spectral};
use ndarray::ArrayD;

use crate::{Cpu, CpuFftPlan};

type F<P> = <P as Precision>::Float;
type C<P> = num_complex::Complex<F<P>>;

impl<P: Precision> Spectral for Cpu<P> {
    fn fft_plan(&self, _shape: &[usize], _axes: &[usize]) -> Result<CpuFftPlan> {
        Err(Error::Backend { backend: "cpu", message: "fft_plan: being implemented".into() })
    }
    fn rfft(&self, _plan: &CpuFftPlan, _input: &ArrayD<F<P>>, _out: &mut ArrayD<C<P>>) -> Result<()> {
        Err(Error::Backend { backend: "cpu", message: "rfft: being implemented".into() })
    }
    fn irfft(&self, _plan: &CpuFftPlan, _input: &mut ArrayD<C<P>>, _out: &mut ArrayD<F<P>>) -> Result<()> {
        Err(Error::Backend { backend: "cpu", message: "irfft: being implemented".into() })
    }
}
