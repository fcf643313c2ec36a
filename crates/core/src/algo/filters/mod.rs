//! Fourier-space filters of template matching (missing wedge, CTF, bandpass, whitening), as
//! pytme 0.3.6 builds and applies them.
//!
//! A filter is a real weight on the half spectrum (`rfftn` layout: the last axis halved to
//! `n/2 + 1`, DC at index 0) of a given box. The matching loop asks a [`SpectralFilter`] for two
//! weights, each once per job: one for the template box, multiplied with the spectrum of every
//! rotated template (the wedge is fixed in the target's frame while the template turns), and one
//! for the target's FFT grid, applied to the target once before scoring.

use ndarray::ArrayD;

use crate::error::Result;

/// The spectral weights a template-matching run applies (see the module docs).
///
/// Axes are the arrays' own index order. Weights are returned on the rfft half grid of the
/// shape asked for: `shape[..d-1]` then `shape[d-1] / 2 + 1`, DC at index 0.
pub trait SpectralFilter: Send + Sync {
    /// The weight applied to the spectrum of each rotated template, for a template box of
    /// `shape`; `None` leaves the template unfiltered.
    fn template_weight(&self, shape: &[usize]) -> Result<Option<ArrayD<f64>>>;

    /// The weight applied once to the spectrum of the target zero-padded at the high end to
    /// `fast_shape`; `None` leaves the target unfiltered.
    fn target_weight(&self, fast_shape: &[usize]) -> Result<Option<ArrayD<f64>>>;
}

pub mod bandpass;
pub mod compose;
pub mod ctf;
pub mod grid;
pub(crate) mod npy_rng;
mod npy_ziggurat;
pub mod spline;
pub mod wedge;
pub mod whitening;

pub use compose::{AxisOrder, CtfSpec, FilterSpec, Filters, TiltWeighting, WedgeSpec};
pub use ctf::{CtfCorrection, Microscope, TiltCtf};
pub use npy_rng::standard_normal_f32;
