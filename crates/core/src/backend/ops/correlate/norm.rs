//! The arguments the fused score kernels share: one normalisation type ([`Normalization`]) in
//! every form a backend needs it (device arrays, spectra, host slices), the running maximum
//! ([`RunningMax`]) and the backend's correlation layout ([`CorrSpectrum`]).

use crate::backend::{Arr, BackendTypes, ComplexOf, FloatOf};
use crate::dtype::{Element, Index};

/// How a fused score kernel turns a correlation `c` into a score, generic over the form of its
/// data: `S` the scalars, `D` the output-shaped denominator, `C` a mask correlation. One type
/// for every form ([`ScoreNorm`] on device arrays, [`SpectralNorm`] on spectra,
/// [`host::Norm`](super::host::Norm) on host slices; a backend maps it to its kernels' own
/// form in one `match`, e.g. CUDA's integer code), so a new normalisation is one new variant
/// whose every use the compiler lists: [`Normalization::correlations`],
/// [`Normalization::try_map`] (which [`Normalization::map`] and the argument checks use),
/// [`Normalization::as_ref`], the host kernel and each backend's kernel arguments.
///
/// Correlations (`c`, `c1`, `c2`) are read through a [`CorrWindow`](super::CorrWindow) on the
/// FFT grid; `inv_den` is already in output coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Normalization<S, D, C> {
    /// `score = scale · c` (CC, LCC, NCC, MCC after
    /// [`Correlate::combine_masked_correlations`](super::Correlate::combine_masked_correlations)).
    Scaled {
        /// Factor (e.g. the FFT's 1/Π fast, times 1/√size for NCC).
        scale: S,
    },
    /// `score = scale · c · inv_den[x]` (FLCSphericalMask, CAM: denominator made once).
    Denominator {
        /// Factor applied to `c`.
        scale: S,
        /// Output-shaped `1 / (s · N)`.
        inv_den: D,
    },
    /// FLC: `e1 = scale·c1/n`, `e2 = scale·c2/n`, `s = √max(e2 − e1², 0)` (1 where `s < eps`),
    /// `score = scale · c / (s · n)`.
    Local {
        /// Factor applied to `c`, `c1` and `c2`.
        scale: S,
        /// `C(f, m_R)` (unnormalised, same grid as `c`).
        c1: C,
        /// `C(f², m_R)`.
        c2: C,
        /// `N = Σ m_R`.
        n: S,
        /// Threshold under which `s` is replaced by 1.
        eps: S,
    },
}

impl<S, D, C> Normalization<S, D, C> {
    /// Correlations the score reads on the FFT grid: `c`, and the mask correlations of
    /// [`Normalization::Local`] (what an unfused inverse transforms, one real array each).
    pub fn correlations(&self) -> usize {
        match self {
            Normalization::Local { .. } => 3,
            Normalization::Scaled { .. } | Normalization::Denominator { .. } => 1,
        }
    }

    /// The same normalisation with its denominator mapped by `fd` and each mask correlation by
    /// `fc` (`c1` first, then `c2`); the scalars are kept.
    pub fn map<D2, C2>(
        self,
        fd: impl FnOnce(D) -> D2,
        mut fc: impl FnMut(C) -> C2,
    ) -> Normalization<S, D2, C2> {
        let mapped = self.try_map(|d| Ok::<_, std::convert::Infallible>(fd(d)), |c| Ok(fc(c)));
        match mapped {
            Ok(n) => n,
            Err(never) => match never {},
        }
    }

    /// [`Normalization::map`] with fallible maps (the first error is returned).
    pub fn try_map<D2, C2, E>(
        self,
        fd: impl FnOnce(D) -> Result<D2, E>,
        mut fc: impl FnMut(C) -> Result<C2, E>,
    ) -> Result<Normalization<S, D2, C2>, E> {
        Ok(match self {
            Normalization::Scaled { scale } => Normalization::Scaled { scale },
            Normalization::Denominator { scale, inv_den } => Normalization::Denominator {
                scale,
                inv_den: fd(inv_den)?,
            },
            Normalization::Local {
                scale,
                c1,
                c2,
                n,
                eps,
            } => {
                let c1 = fc(c1)?;
                Normalization::Local {
                    scale,
                    c1,
                    c2: fc(c2)?,
                    n,
                    eps,
                }
            }
        })
    }

    /// A borrowing view (the scalars copied).
    pub fn as_ref(&self) -> Normalization<S, &D, &C>
    where
        S: Copy,
    {
        match self {
            Normalization::Scaled { scale } => Normalization::Scaled { scale: *scale },
            Normalization::Denominator { scale, inv_den } => Normalization::Denominator {
                scale: *scale,
                inv_den,
            },
            Normalization::Local {
                scale,
                c1,
                c2,
                n,
                eps,
            } => Normalization::Local {
                scale: *scale,
                c1,
                c2,
                n: *n,
                eps: *eps,
            },
        }
    }
}

/// [`Normalization`] of [`Correlate::score_max_update`](super::Correlate::score_max_update):
/// the correlations are real device arrays on the FFT grid.
pub type ScoreNorm<'a, B, T> = Normalization<T, &'a Arr<B, T>, &'a Arr<B, T>>;

/// [`Normalization`] of
/// [`Correlate::irfft_score_max_update`](super::Correlate::irfft_score_max_update): the mask
/// correlations of [`Normalization::Local`] are given as products in the correlation layout,
/// transformed inside the call (and clobbered).
pub type SpectralNorm<'a, B> =
    Normalization<FloatOf<B>, &'a Arr<B, FloatOf<B>>, &'a mut CorrSpectrum<B>>;

/// The running maximum a score pass updates: the best score and its rotation per output voxel
/// (`best`, `best_index`, the output shape), the rotation's `index`, the 1-element f64
/// accumulator `ssum` the pass adds Σ score² over the output to, and optionally the per-voxel
/// moments of the scores ([`Moments`]).
pub struct RunningMax<'a, B: BackendTypes, T: Element, I: Index> {
    /// Best score so far (strict `>`, NaN never wins).
    pub best: &'a mut Arr<B, T>,
    /// The `index` of the pass that set `best`.
    pub best_index: &'a mut Arr<B, I>,
    /// This pass's index (the rotation).
    pub index: I,
    /// Shape `(1,)`: Σ score² is added to it.
    pub ssum: &'a mut Arr<B, f64>,
    /// Per-voxel Σ score and Σ score² in exact fixed point, updated in the same pass; `None`
    /// to skip.
    pub moments: Option<Moments<'a, B>>,
}

impl<B: BackendTypes, T: Element, I: Index> RunningMax<'_, B, T, I> {
    /// The same arrays, borrowed again for one more call.
    pub fn reborrow(&mut self) -> RunningMax<'_, B, T, I> {
        RunningMax {
            best: &mut *self.best,
            best_index: &mut *self.best_index,
            index: self.index,
            ssum: &mut *self.ssum,
            moments: self.moments.as_mut().map(|m| Moments {
                acc: &mut *m.acc,
                scale: m.scale,
            }),
        }
    }
}

/// Per output voxel, the sums of the scores and of their squares over the passes, as exact
/// 128-bit fixed-point integers, so that sums of disjoint sets of passes (tiles are disjoint
/// voxels; MPI ranks and list items are disjoint rotations) add up to the same bits in any
/// order. A pass adds, per voxel, `q₁ = round(s · scale[0])` and `q₂ = round(s² · scale[1])`
/// (`s` widened to f64; `s²` exact for f32 scores; round half to even) when `|q| ≤ 2⁶²`, else
/// the flag `2¹⁰⁰` (out of range, or NaN), which [`host::moments_add`](super::host::moments_add)
/// documents and the reader checks.
pub struct Moments<'a, B: BackendTypes> {
    /// Shape `out + [4]`: per voxel `[Σq₁ low 64 bits, Σq₁ high 64 bits, Σq₂ low, Σq₂ high]`,
    /// two's complement (the low words are unsigned bits stored in `i64`), outside
    /// [`Correlate::moments_open`](super::Correlate::moments_open)…`moments_close`; a score
    /// pass is given them opened (the backend's working form).
    pub acc: &'a mut Arr<B, i64>,
    /// The powers of two `[2^k₁, 2^k₂]` the scores and their squares are scaled by.
    pub scale: [f64; 2],
}

/// A later rotation of a group scored by
/// [`Correlate::irfft_score_max_update_group`](super::Correlate::irfft_score_max_update_group):
/// its products, normalisation, index and Σ score² accumulator (its running maximum and
/// moments are the first's).
pub struct PairedPass<'a, B: BackendTypes, I: Index> {
    /// Products `C(f, t̂)` of the rotation (correlation layout; clobbered).
    pub spec: &'a mut CorrSpectrum<B>,
    /// The rotation's normalisation (its mask correlations for FLC).
    pub norm: Normalization<FloatOf<B>, &'a Arr<B, FloatOf<B>>, &'a mut CorrSpectrum<B>>,
    /// The rotation's index.
    pub index: I,
    /// Shape `(1,)`: the rotation's Σ score² is added to it.
    pub ssum: &'a mut Arr<B, f64>,
}

/// Products written by
/// [`Correlate::rfft_pruned_mul_conj`](super::Correlate::rfft_pruned_mul_conj) in the backend's
/// *correlation layout*, which only
/// [`Correlate::irfft_score_max_update`](super::Correlate::irfft_score_max_update) with the
/// same plan reads. A distinct type so it cannot be passed where a spectrum is expected
/// ([`Spectral::irfft`](crate::backend::Spectral::irfft), the elementwise ops); made by
/// [`Correlate::corr_spectrum`](super::Correlate::corr_spectrum).
pub struct CorrSpectrum<B: BackendTypes>(Arr<B, ComplexOf<B>>);

impl<B: BackendTypes> CorrSpectrum<B> {
    /// Wraps a buffer of the plan's complex shape (what the default
    /// [`Correlate::corr_spectrum`](super::Correlate::corr_spectrum) allocates).
    pub(crate) fn new(a: Arr<B, ComplexOf<B>>) -> Self {
        CorrSpectrum(a)
    }

    /// The array holding the layout: for a backend's own
    /// [`Correlate`](super::Correlate) implementation, which knows the layout it wrote.
    pub fn layout(&self) -> &Arr<B, ComplexOf<B>> {
        &self.0
    }

    /// [`CorrSpectrum::layout`], mutably.
    pub fn layout_mut(&mut self) -> &mut Arr<B, ComplexOf<B>> {
        &mut self.0
    }

    /// The buffer as scratch for a caller that does not use the products (a score that never
    /// calls the fused pair, a setup step): a plain complex array whose contents are
    /// unspecified on entry, and again for the fused ops once the caller is done.
    pub fn scratch(&mut self) -> &mut Arr<B, ComplexOf<B>> {
        &mut self.0
    }
}
