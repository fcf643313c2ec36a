//! N-d real FFTs on realfft/rustfft: plans and the plan cache.
//!
//! (Placeholder layout: the FFT implementation replaces this module.)

use std::collections::HashMap;
use std::sync::Mutex;

use monomorph_core::FftPlan;

/// A cached r2c/c2r plan for one real shape and set of axes.
#[derive(Debug, Clone)]
pub struct CpuFftPlan {
    real_shape: Vec<usize>,
    complex_shape: Vec<usize>,
    axes: Vec<usize>,
}

impl FftPlan for CpuFftPlan {
    fn real_shape(&self) -> &[usize] {
        &self.real_shape
    }
    fn complex_shape(&self) -> &[usize] {
        &self.complex_shape
    }
    fn axes(&self) -> &[usize] {
        &self.axes
    }
}

/// Plans by (shape, axes, float type).
#[derive(Debug, Default)]
pub(crate) struct PlanCache {
    #[allow(dead_code)]
    plans: Mutex<HashMap<(Vec<usize>, Vec<usize>, bool), CpuFftPlan>>,
}
