use monomorph_core::{Element, Error, Float, Interpolation, PadMode, Precision, Resample, Result};
use ndarray::ArrayD;

use crate::Cpu;

fn pending<T>(op: &str) -> Result<T> {
    Err(Error::Backend { backend: "cpu", message: format!("{op}: being implemented") })
}

impl<P: Precision> Resample for Cpu<P> {
    fn pad<T: Float>(&self, _src: &ArrayD<T>, _before: &[usize], _mode: PadMode, _dst: &mut ArrayD<T>) -> Result<()> {
        pending("pad")
    }
    fn crop<T: Element>(&self, _src: &ArrayD<T>, _offset: &[usize], _dst: &mut ArrayD<T>) -> Result<()> {
        pending("crop")
    }
    fn flip<T: Element>(&self, _src: &ArrayD<T>, _axes: &[usize], _dst: &mut ArrayD<T>) -> Result<()> {
        pending("flip")
    }
    fn roll<T: Element>(&self, _src: &ArrayD<T>, _shifts: &[isize], _dst: &mut ArrayD<T>) -> Result<()> {
        pending("roll")
    }
    fn spline_prefilter<T: Float>(&self, _a: &mut ArrayD<T>) -> Result<()> {
        pending("spline_prefilter")
    }
    fn affine_transform<T: Float>(&self, _src: &ArrayD<T>, _m: &[f64], _o: &[f64], _i: Interpolation, _dst: &mut ArrayD<T>) -> Result<()> {
        pending("affine_transform")
    }
}
