//! Op-level conformance tests: every op of every family against a host reference, one file
//! per op family (mirroring `backend/ops/`).

mod correlate;
mod elementwise;
mod filter;
mod linalg;
mod memory;
mod reduce;
mod resample;
mod spectral;
mod stencil;
mod validation;
pub use correlate::*;
pub use elementwise::*;
pub use filter::*;
pub use linalg::*;
pub use memory::*;
pub use reduce::*;
pub use resample::*;
pub use spectral::*;
pub use stencil::*;
pub use validation::*;

use ndarray::ArrayD;

use super::Lcg;
use crate::backend::*;
use crate::dtype::{Float, Real};

/// Tolerance for results of O(1) float operations in the backend's precision.
pub fn eps<B: Backend>() -> f64 {
    <FloatOf<B> as Float>::EPS.as_f64()
}

fn up<B: Backend, T: crate::Element>(b: &B, a: &ArrayD<T>) -> Arr<B, T> {
    b.upload(a.view()).expect("upload")
}

fn down<B: Backend, T: crate::Element>(b: &B, a: &Arr<B, T>) -> ArrayD<T> {
    b.download(a).expect("download")
}

fn host<B: Backend>(rng: &mut Lcg, shape: &[usize]) -> ArrayD<FloatOf<B>> {
    rng.array::<FloatOf<B>>(shape)
}

fn to_f64<T: Real>(a: &ArrayD<T>) -> ArrayD<f64> {
    a.mapv(|v| v.as_f64())
}
