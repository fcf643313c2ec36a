use monomorph_core::{BorderMode, Error, Filter, Float, Precision, Real, Result};
use ndarray::ArrayD;

use crate::Cpu;

fn pending<T>(op: &str) -> Result<T> {
    Err(Error::Backend { backend: "cpu", message: format!("{op}: being implemented") })
}

impl<P: Precision> Filter for Cpu<P> {
    fn max_filter<T: Real>(&self, _src: &ArrayD<T>, _size: &[usize], _mode: BorderMode, _dst: &mut ArrayD<T>) -> Result<()> {
        pending("max_filter")
    }
    fn max_filter_footprint<T: Real>(&self, _src: &ArrayD<T>, _fp: &[bool], _fs: &[usize], _mode: BorderMode, _dst: &mut ArrayD<T>) -> Result<()> {
        pending("max_filter_footprint")
    }
    fn laplace<T: Float>(&self, _src: &ArrayD<T>, _mode: BorderMode, _dst: &mut ArrayD<T>) -> Result<()> {
        pending("laplace")
    }
    fn peak_candidates<T: Real>(&self, _src: &ArrayD<T>, _f: &ArrayD<T>, _t: T, _b: &[usize]) -> Result<Vec<(usize, T)>> {
        pending("peak_candidates")
    }
}
