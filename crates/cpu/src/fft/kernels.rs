//! The typed realfft/rustfft plans of one geometry, the per-thread scratch the passes of
//! [`super::exec`] share, and the conversions between real rows and complex pairs.

use std::cell::RefCell;
use std::sync::Arc;

use monomorph_core::{Error, Result};
use num_complex::Complex;
use realfft::{ComplexToReal, FftError, RealToComplex};
use rustfft::{Fft, FftNum};

use super::Geometry;
use super::real::{HalfPlans, ROWS, Twiddle};
use crate::util::grow;

/// Lines gathered into one block for a strided pass.
pub(super) const TILE: usize = 16;

/// The typed realfft/rustfft plans of one [`Geometry`] and the scratch sizes they need.
pub(crate) struct Kernels<T: FftNum> {
    pub(super) r2c: Arc<dyn RealToComplex<T>>,
    pub(super) c2r: Arc<dyn ComplexToReal<T>>,
    /// Forward complex plans, one per [`Geometry::cpasses`] entry.
    pub(super) cfwd: Vec<Arc<dyn Fft<T>>>,
    /// Inverse complex plans, one per [`Geometry::cpasses`] entry.
    pub(super) cinv: Vec<Arc<dyn Fft<T>>>,
    /// The batched half-length path of contiguous even-length rows (`None` for odd lengths).
    pub(super) half: Option<HalfPlans<T>>,
    /// Complex elements of FFT scratch any call needs.
    pub(super) fft_scratch: usize,
    /// Complex elements of the gathered block.
    pub(super) block: usize,
    /// Real elements of the real line buffer.
    pub(super) real: usize,
}

impl<T: FftNum> Kernels<T> {
    pub(crate) fn new(
        g: &Geometry,
        r2c: Arc<dyn RealToComplex<T>>,
        c2r: Arc<dyn ComplexToReal<T>>,
        cfwd: Vec<Arc<dyn Fft<T>>>,
        cinv: Vec<Arc<dyn Fft<T>>>,
        half: Option<HalfPlans<T>>,
    ) -> Self {
        let fft_scratch = cfwd
            .iter()
            .chain(cinv.iter())
            .map(|f| f.get_inplace_scratch_len())
            .chain(cfwd.iter().map(|f| f.get_immutable_scratch_len()))
            .chain([r2c.get_scratch_len(), c2r.get_scratch_len()])
            .chain(half.as_ref().map(HalfPlans::scratch_len))
            .max()
            .unwrap_or(0);
        let longest = g.cpasses.iter().map(|p| p.len).max().unwrap_or(0).max(g.m);
        Kernels {
            r2c,
            c2r,
            cfwd,
            cinv,
            half,
            fft_scratch,
            block: (TILE * longest).max(ROWS * (g.n / 2)),
            real: TILE * g.n,
        }
    }
}

/// A float type the kernels run in, with its per-thread scratch.
pub(crate) trait FftFloat: FftNum + Default + Twiddle + bytemuck::Pod {
    /// Runs `f` with this thread's scratch for this float type.
    fn with_scratch<R>(f: impl FnOnce(&mut Scratch<Self>) -> R) -> R;
}

/// Per-thread buffers, grown to the largest plan seen on the thread and then reused.
#[derive(Default)]
pub(crate) struct Scratch<T> {
    pub(super) block: Vec<Complex<T>>,
    pub(super) real: Vec<T>,
    pub(super) fft: Vec<Complex<T>>,
    /// A second block and the staging block of a staged pruned pass (empty until one runs
    /// on this thread).
    pub(super) stage: Vec<Complex<T>>,
    /// The real slabs of [`inverse_consume`] (empty until one runs on this thread).
    pub(super) sink: Vec<T>,
    /// The copy of a slab that [`inverse_consume`] transforms for a group of rotations (empty
    /// until one runs on this thread).
    pub(super) slab: Vec<Complex<T>>,
}

impl<T: FftNum + Default> Scratch<T> {
    /// (block, real line buffer, FFT scratch), each at least as long as `k` needs.
    pub(super) fn parts(
        &mut self,
        k: &Kernels<T>,
    ) -> (&mut [Complex<T>], &mut [T], &mut [Complex<T>]) {
        grow(&mut self.block, k.block);
        grow(&mut self.real, k.real);
        grow(&mut self.fft, k.fft_scratch);
        (&mut self.block, &mut self.real, &mut self.fft)
    }

    /// (block, second block, FFT scratch, staging block of at least `stage` elements).
    #[allow(clippy::type_complexity)]
    pub(super) fn staged(
        &mut self,
        k: &Kernels<T>,
        stage: usize,
    ) -> (
        &mut [Complex<T>],
        &mut [Complex<T>],
        &mut [Complex<T>],
        &mut [Complex<T>],
    ) {
        grow(&mut self.block, k.block);
        grow(&mut self.fft, k.fft_scratch);
        grow(&mut self.stage, stage + k.block);
        let (spec, stage) = self.stage.split_at_mut(k.block);
        (&mut self.block, spec, &mut self.fft, stage)
    }
}

macro_rules! fft_float {
    ($t:ty, $key:ident) => {
        thread_local! {
            static $key: RefCell<Scratch<$t>> = RefCell::new(Scratch::default());
        }
        impl FftFloat for $t {
            fn with_scratch<R>(f: impl FnOnce(&mut Scratch<Self>) -> R) -> R {
                $key.with(|cell| match cell.try_borrow_mut() {
                    Ok(mut s) => f(&mut s),
                    // Re-entered on this thread (not expected: no pass calls into rayon while
                    // holding its scratch); fall back to a temporary one rather than panic.
                    Err(_) => f(&mut Scratch::default()),
                })
            }
        }
    };
}
fft_float!(f32, SCRATCH_F32);
fft_float!(f64, SCRATCH_F64);

/// realfft's result as ours: `InputValues` (non-zero imaginary DC/Nyquist bins, which c2r
/// ignores as it should) is not an error; anything else is a bug in our buffer sizes.
pub(super) fn realfft_ok(r: std::result::Result<(), FftError>) -> Result<()> {
    match r {
        Ok(()) | Err(FftError::InputValues(..)) => Ok(()),
        Err(e) => Err(Error::Backend {
            backend: "cpu",
            message: format!("realfft: {e}"),
        }),
    }
}

/// Even-length real rows viewed as complex pairs.
pub(super) fn as_complex<T: FftFloat>(v: &[T]) -> Result<&[Complex<T>]> {
    bytemuck::try_cast_slice(v).map_err(|e| Error::Backend {
        backend: "cpu",
        message: format!("real rows as complex pairs: {e}"),
    })
}

/// Mutable counterpart of [`as_complex`].
pub(super) fn as_complex_mut<T: FftFloat>(v: &mut [T]) -> Result<&mut [Complex<T>]> {
    bytemuck::try_cast_slice_mut(v).map_err(|e| Error::Backend {
        backend: "cpu",
        message: format!("real rows as complex pairs: {e}"),
    })
}
