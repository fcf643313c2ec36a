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

/// Per-row scalars written on the host in `f64`, uploaded in the backend's accumulator type
/// (the type of the CG ops' device scalars).
fn up_acc<B: Backend>(b: &B, a: &ArrayD<f64>) -> Arr<B, AccumOf<B>> {
    up(b, &a.mapv(<AccumOf<B> as Real>::from_f64))
}

/// The per-row scalars of a backend, downloaded as `f64` for the host references.
fn down_acc<B: Backend>(b: &B, a: &Arr<B, AccumOf<B>>) -> ArrayD<f64> {
    to_f64(&down(b, a))
}

/// Per-row values in the accumulator type as `f64`.
fn f64s<A: Real>(v: Vec<A>) -> Vec<f64> {
    v.into_iter().map(|x| x.as_f64()).collect()
}
