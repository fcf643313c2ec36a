//! Scoring: what each score keeps across the rotations of a job, and its per-rotation step.
//!
//! A score is one of four normalisations, each a variant of [`ScoreState`] owning its buffers:
//! [`ScoreState::Plain`] (CC, LCC, NCC: a scale), [`ScoreState::Denominator`] (CAM,
//! FLCSphericalMask: pytme's local denominator of the unrotated mask, made once),
//! [`ScoreState::Local`] (FLC: the denominator of the rotated mask, every rotation) and
//! [`ScoreState::Mcc`] (Padfield's masked NCC over the whole grid). [`ScoreState::new`] makes
//! the state of one job from the target window; the loop ([`super::run`]) calls
//! [`ScoreState::rotate_mask`], [`ScoreState::standardize`] and [`ScoreState::score`] per
//! rotation.

use crate::backend::{
    AccumOf, Arr, Backend, ComplexOf, CorrSpectrum, CorrWindow, FloatOf, IntOf, Normalization,
    PairedPass, UnaryOp, WindowExtension,
};
use crate::dtype::{Float, Real};
use crate::error::{Error, Result};
use num_traits::{Float as _, Zero};

use super::job::Job;
use super::prepare::{Prepared, standardize_masked};
use super::{MatchParams, Score};

type F<B> = FloatOf<B>;
type C<B> = ComplexOf<B>;

/// (real, complex) FFT-grid arrays [`ScoreState::new`] allocates for a score's job, the
/// setup's temporaries included (what [`super::estimate_bytes`] counts; a test checks that the
/// two agree): 3 real and 3 complex every score shares (target window, template buffer,
/// correlation; target spectrum, template spectrum, product), plus the score's own.
pub(super) fn buffer_counts(score: Score) -> (u64, u64) {
    match score {
        Score::CC | Score::LCC | Score::NCC => (3, 3),
        // + C(f², m) (real) and the spectrum of f² (complex), setup only.
        Score::CAM | Score::FLCSphericalMask => (4, 4),
        // + two mask correlations (real), the spectrum of f² and two products (complex).
        Score::FLC => (5, 6),
        // + the target mask window (setup) and five correlations (real), the spectra of the
        // target mask and of f² (complex).
        Score::MCC => (9, 5),
    }
}

/// Complex FFT-grid arrays a job allocates besides [`buffer_counts`] per later rotation of a
/// group when it scores its rotations in groups ([`ScoreState::pair_slot`]): that rotation's
/// `C(f, t̂)`, and for FLC its two mask correlations. Not counted by the plan: the loop
/// groups only where these fit beside the planned job.
pub(super) fn pair_counts(score: Score) -> u64 {
    match score {
        Score::FLC => 3,
        Score::MCC => 0,
        _ => 1,
    }
}

/// A later rotation's products of a group (see [`ScoreState::score_group`]).
pub(super) struct PairSlot<B: Backend> {
    y: CorrSpectrum<B>,
    masks: Option<(CorrSpectrum<B>, CorrSpectrum<B>)>,
}

/// The FFT-grid arrays of a job, allocated through a count of them.
pub(super) struct Alloc<'a, B: Backend> {
    b: &'a B,
    fast: &'a [usize],
    cshape: Vec<usize>,
    /// Real FFT-grid arrays allocated so far.
    pub(super) real: u64,
    /// Complex (half-spectrum) arrays allocated so far.
    pub(super) complex: u64,
}

impl<'a, B: Backend> Alloc<'a, B> {
    fn new(b: &'a B, fast: &'a [usize]) -> Self {
        let axes: Vec<usize> = (0..fast.len()).collect();
        Alloc {
            b,
            fast,
            cshape: crate::shape::rfft_shape(fast, &axes),
            real: 0,
            complex: 0,
        }
    }
    fn real(&mut self) -> Result<Arr<B, F<B>>> {
        self.real += 1;
        self.b.zeros(self.fast)
    }
    fn complex(&mut self) -> Result<Arr<B, C<B>>> {
        self.complex += 1;
        self.b.zeros(&self.cshape)
    }
    /// A complex array for products in the backend's correlation layout.
    fn corr(&mut self, plan: &B::Fft) -> Result<CorrSpectrum<B>> {
        self.complex += 1;
        self.b.corr_spectrum(plan)
    }
}

/// The buffers every score uses in a job: the plan, the target window's spectrum, the template
/// spectrum `x`, the product `y`, the template's FFT buffer and the real correlation arrays
/// `work` (one; FLC's unfused default writes its two mask correlations to two more).
pub(super) struct Grid<B: Backend> {
    plan: B::Fft,
    /// `1 / Π fast`, the inverse FFT's normalisation.
    scale: F<B>,
    spec_f: Arr<B, C<B>>,
    x: Arr<B, C<B>>,
    /// The products `C(f, t̂)` (correlation layout; MCC and the setup use it as scratch).
    y: CorrSpectrum<B>,
    /// The FFT buffer the rotated template's box is written into (zero outside it).
    pub(super) tpad: Arr<B, F<B>>,
    work: Vec<Arr<B, F<B>>>,
}

/// The running maximum a scoring step updates, in the backend's float and index types.
pub(super) type RunningMax<'a, B> = crate::backend::RunningMax<'a, B, F<B>, IntOf<B>>;

/// What a score keeps across the rotations of a job (see the module docs).
pub(super) enum ScoreState<B: Backend> {
    /// CC, LCC, NCC: `score = scale · C(f, t̂)`; NCC standardises the template over its box.
    Plain {
        /// `1/Π fast`, and for NCC also `1/√(template size)`.
        scale: F<B>,
        /// Standardise the rotated template over its whole box (NCC).
        standardize: bool,
    },
    /// CAM, FLCSphericalMask: `score = scale · C(f, t̂) · inv_den` with the unrotated mask's
    /// denominator, made once per job.
    Denominator {
        /// Output-shaped `1 / (σ · N)`.
        inv_den: Arr<B, F<B>>,
    },
    /// FLC: the rotated mask's local denominator, per rotation, from the spectra of
    /// `C(f, m_R)` and `C(f², m_R)`.
    Local {
        /// Spectrum of the squared target window.
        spec_f2: Arr<B, C<B>>,
        /// Products for `C(f, m_R)` and `C(f², m_R)` (correlation layout).
        c1: CorrSpectrum<B>,
        /// See `c1`.
        c2: CorrSpectrum<B>,
        /// The rotated mask (template box).
        mask: Arr<B, F<B>>,
    },
    /// MCC: Padfield's masked NCC with a target mask, normalised over the whole grid.
    Mcc {
        /// Spectrum of the target mask window.
        spec_t: Arr<B, C<B>>,
        /// Spectrum of the squared (masked) target window.
        spec_f2: Arr<B, C<B>>,
        /// `C(f·T, m_R)`, `C(T, t̂)`, `C((f·T)², m_R)`, `C(T, t̂²)`, `C(T, m_R)`.
        c: [Arr<B, F<B>>; 5],
        /// The rotated mask (template box).
        mask: Arr<B, F<B>>,
        /// Scores are 0 where the overlap is below this fraction of its maximum.
        overlap_ratio: F<B>,
    },
}

impl<B: Backend> ScoreState<B> {
    /// The job's buffers and the score's state, from the target window read through `ext`.
    /// Returns the counts of FFT-grid arrays allocated too (see [`buffer_counts`]).
    pub(super) fn new(
        b: &B,
        p: &MatchParams<'_, B>,
        prep: &Prepared<B>,
        job: &Job,
        ext: WindowExtension<'_>,
        tshape: &[usize],
    ) -> Result<(Grid<B>, Self, (u64, u64))> {
        let fast = &job.fast;
        let axes: Vec<usize> = (0..fast.len()).collect();
        let mut a = Alloc::new(b, fast);
        let plan = b.fft_plan(fast, &axes)?;
        let scale_f: f64 = 1.0 / fast.iter().map(|&v| v as f64).product::<f64>();
        let scale = F::<B>::from_f64(scale_f);
        let window = CorrWindow { shift: &job.shift };

        // Target side, once.
        let mut fpad = a.real()?;
        b.gather_window(&prep.target, &job.start, &job.len, ext, &mut fpad)?;
        let mut spec_f = a.complex()?;
        b.rfft(&plan, &fpad, &mut spec_f)?;
        let mut y = a.corr(&plan)?;
        let mut x = a.complex()?;
        let mut tpad = a.real()?;
        let mut work = vec![a.real()?];
        let state = match p.score {
            Score::CC | Score::LCC => ScoreState::Plain {
                scale,
                standardize: false,
            },
            Score::NCC => ScoreState::Plain {
                scale: F::<B>::from_f64(scale_f / (tshape.iter().product::<usize>() as f64).sqrt()),
                standardize: true,
            },
            Score::CAM | Score::FLCSphericalMask => {
                b.write_corner(&prep.side().mask, &mut tpad)?;
                b.rfft_pruned(&plan, &tpad, tshape, &mut x)?;
                let y = y.scratch();
                b.complex_mul_conj(&spec_f, &x, y)?;
                b.irfft(&plan, y, &mut work[0])?;
                b.unary_assign(UnaryOp::Square, &mut fpad)?;
                let mut sf2 = a.complex()?;
                b.rfft(&plan, &fpad, &mut sf2)?;
                b.complex_mul_conj(&sf2, &x, y)?;
                drop(sf2);
                let mut c2 = a.real()?;
                b.irfft(&plan, y, &mut c2)?;
                let mut inv_den = b.zeros::<F<B>>(&job.out_shape)?;
                b.inverse_denominator(
                    &work[0],
                    &c2,
                    window,
                    scale,
                    F::<B>::from_f64(prep.side().mask_sum.as_f64()),
                    F::<B>::EPS,
                    &mut inv_den,
                )?;
                ScoreState::Denominator { inv_den }
            }
            Score::FLC => {
                b.unary_assign(UnaryOp::Square, &mut fpad)?;
                let mut spec_f2 = a.complex()?;
                b.rfft(&plan, &fpad, &mut spec_f2)?;
                // The arrays the unfused default of `irfft_score_max_update` writes the two
                // mask correlations to.
                work.push(a.real()?);
                work.push(a.real()?);
                ScoreState::Local {
                    spec_f2,
                    c1: a.corr(&plan)?,
                    c2: a.corr(&plan)?,
                    mask: b.zeros(tshape)?,
                }
            }
            Score::MCC => {
                let tm = prep
                    .target_mask
                    .as_ref()
                    .ok_or_else(|| Error::invalid("target_mask", "MCC needs a target mask"))?;
                let mut tmpad = a.real()?;
                b.gather_window(tm, &job.start, &job.len, ext, &mut tmpad)?;
                let mut spec_t = a.complex()?;
                b.rfft(&plan, &tmpad, &mut spec_t)?;
                drop(tmpad);
                b.unary_assign(UnaryOp::Square, &mut fpad)?;
                let mut spec_f2 = a.complex()?;
                b.rfft(&plan, &fpad, &mut spec_f2)?;
                let c = [a.real()?, a.real()?, a.real()?, a.real()?, a.real()?];
                ScoreState::Mcc {
                    spec_t,
                    spec_f2,
                    c,
                    mask: b.zeros(tshape)?,
                    overlap_ratio: F::<B>::from_f64(p.mcc_overlap_ratio),
                }
            }
        };
        let counts = (a.real, a.complex);
        let grid = Grid {
            plan,
            scale,
            spec_f,
            x,
            y,
            tpad,
            work,
        };
        Ok((grid, state, counts))
    }

    /// Rotates the score's own mask for rotation `r` (FLC, MCC; from the pre-rotated masks when
    /// given) and returns the template mask's sum `N` this rotation uses.
    pub(super) fn rotate_mask(
        &mut self,
        b: &B,
        p: &MatchParams<'_, B>,
        prep: &Prepared<B>,
        r: usize,
        (m, off): (&[f64], &[f64]),
    ) -> Result<AccumOf<B>> {
        let (ScoreState::Local { mask, .. } | ScoreState::Mcc { mask, .. }) = self else {
            return Ok(prep.side().mask_sum);
        };
        match p.prerotated.as_ref().and_then(|pr| pr.masks) {
            Some(ms) => b.copy(&ms[r], mask)?,
            None => b.affine_transform_reversed_in(
                &prep.side().mask,
                m,
                off,
                p.interpolation,
                p.pytme_frame,
                mask,
            )?,
        }
        let n = b.sum(mask)?;
        if n.is_nan() || n <= AccumOf::<B>::zero() {
            return Err(Error::invalid(
                "template_mask",
                format!("the mask rotated by rotation {r} has sum {n} (must be positive)"),
            ));
        }
        Ok(n)
    }

    /// pytme's standardisation of the rotated template `t` (in place) for this score, with
    /// the mask sum `n` from [`ScoreState::rotate_mask`]; `scratch` is template-shaped.
    pub(super) fn standardize(
        &self,
        b: &B,
        prep: &Prepared<B>,
        t: &mut Arr<B, F<B>>,
        n: AccumOf<B>,
        scratch: &mut Arr<B, F<B>>,
    ) -> Result<()> {
        match self {
            ScoreState::Plain { standardize, .. } => {
                if *standardize {
                    standardize_masked(b, t, None, scratch)?;
                }
                Ok(())
            }
            ScoreState::Denominator { .. } => {
                standardize_masked(b, t, Some((&prep.side().mask, n)), scratch)
            }
            ScoreState::Local { mask, .. } | ScoreState::Mcc { mask, .. } => {
                standardize_masked(b, t, Some((mask, n)), scratch)
            }
        }
    }

    /// `true` for the scores whose rotations can be scored in groups
    /// ([`ScoreState::score_group`]): all but MCC, which combines whole grids.
    pub(super) fn pairable(&self) -> bool {
        !matches!(self, ScoreState::Mcc { .. })
    }

    /// The products a later rotation of a group needs besides the grid's own: `C(f, t̂)` and,
    /// for FLC, the two mask correlations (what [`pair_counts`] counts).
    pub(super) fn pair_slot(&self, b: &B, g: &Grid<B>) -> Result<PairSlot<B>> {
        let masks = match self {
            ScoreState::Local { .. } => {
                Some((b.corr_spectrum(&g.plan)?, b.corr_spectrum(&g.plan)?))
            }
            _ => None,
        };
        Ok(PairSlot {
            y: b.corr_spectrum(&g.plan)?,
            masks,
        })
    }

    /// The forward products of one rotation (not MCC): `C(f, t̂)` from the template's box in
    /// `g.tpad` into `g.y` (or `slot.y`), and for FLC the mask correlations of the rotated
    /// mask into the state's `c1`, `c2` (or the slot's).
    fn forward(
        &mut self,
        b: &B,
        g: &mut Grid<B>,
        tshape: &[usize],
        slot: Option<&mut PairSlot<B>>,
    ) -> Result<()> {
        let (y, masks) = match slot {
            Some(PairSlot { y, masks }) => (y, masks.as_mut().map(|(a, c)| (a, c))),
            None => (&mut g.y, None),
        };
        b.rfft_pruned_mul_conj(&g.plan, &g.tpad, tshape, &mut g.x, &[&g.spec_f], &mut [y])?;
        if let ScoreState::Local {
            spec_f2,
            c1,
            c2,
            mask,
        } = self
        {
            let (c1, c2) = masks.unwrap_or((c1, c2));
            b.write_corner(mask, &mut g.tpad)?;
            b.rfft_pruned_mul_conj(
                &g.plan,
                &g.tpad,
                tshape,
                &mut g.x,
                &[&g.spec_f, spec_f2],
                &mut [c1, c2],
            )?;
        }
        Ok(())
    }

    /// The first of a group of rotations (not MCC): its forward products, kept in the grid
    /// and the state until [`ScoreState::score_group`]. The template's box is in `g.tpad`.
    pub(super) fn group_first(&mut self, b: &B, g: &mut Grid<B>, tshape: &[usize]) -> Result<()> {
        self.forward(b, g, tshape, None)
    }

    /// A later rotation of a group: its forward products into `slot`. The template's box is
    /// in `g.tpad`.
    pub(super) fn group_next(
        &mut self,
        b: &B,
        g: &mut Grid<B>,
        tshape: &[usize],
        slot: &mut PairSlot<B>,
    ) -> Result<()> {
        self.forward(b, g, tshape, Some(slot))
    }

    /// The rotations of a group scored in one pass
    /// ([`Correlate::irfft_score_max_update_group`](crate::backend::Correlate::irfft_score_max_update_group)),
    /// their forward products made ([`ScoreState::group_first`], then
    /// [`ScoreState::group_next`] into `slots`, one per later rotation): `n` the mask sums of
    /// all of them in order, `rm` the first's running maximum and `rest` the later ones'
    /// `(index, ssum)`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn score_group(
        &mut self,
        b: &B,
        g: &mut Grid<B>,
        slots: &mut [PairSlot<B>],
        n: &[AccumOf<B>],
        window: CorrWindow<'_>,
        rm: RunningMax<'_, B>,
        rest: Vec<(IntOf<B>, &mut Arr<B, f64>)>,
    ) -> Result<()> {
        if slots.len() != rest.len() || n.len() != rest.len() + 1 {
            return Err(Error::invalid(
                "group",
                format!(
                    "{} slots, {} later rotations and {} mask sums",
                    slots.len(),
                    rest.len(),
                    n.len()
                ),
            ));
        }
        let scale = g.scale;
        let mn = |q: usize| F::<B>::from_f64(n[q].as_f64());
        let norm = match self {
            ScoreState::Plain { scale, .. } => Normalization::Scaled { scale: *scale },
            ScoreState::Denominator { inv_den } => Normalization::Denominator {
                scale,
                inv_den: &*inv_den,
            },
            ScoreState::Local { c1, c2, .. } => Normalization::Local {
                scale,
                c1,
                c2,
                n: mn(0),
                eps: F::<B>::EPS,
            },
            ScoreState::Mcc { .. } => {
                return Err(Error::invalid(
                    "group",
                    "MCC rotations are scored one at a time",
                ));
            }
        };
        let mut passes = Vec::with_capacity(rest.len());
        for (q, (PairSlot { y, masks }, (index, ssum))) in slots.iter_mut().zip(rest).enumerate() {
            let norm = match &norm {
                Normalization::Scaled { scale } => Normalization::Scaled { scale: *scale },
                Normalization::Denominator { scale, inv_den } => Normalization::Denominator {
                    scale: *scale,
                    inv_den: *inv_den,
                },
                Normalization::Local { .. } => {
                    let (d1, d2) = masks.as_mut().ok_or_else(|| {
                        Error::invalid("group", "FLC group without mask products")
                    })?;
                    Normalization::Local {
                        scale,
                        c1: d1,
                        c2: d2,
                        n: mn(q + 1),
                        eps: F::<B>::EPS,
                    }
                }
            };
            passes.push(PairedPass {
                spec: y,
                norm,
                index,
                ssum,
            });
        }
        b.irfft_score_max_update_group(&g.plan, &mut g.y, norm, passes, &mut g.work, window, rm)
    }

    /// Scores one rotation: the template's box already in `g.tpad` (and `t`, the standardised
    /// rotated template, for MCC's `t̂²`), mask sum `n`; updates `rm`.
    pub(super) fn score(
        &mut self,
        b: &B,
        g: &mut Grid<B>,
        tshape: &[usize],
        t: &mut Arr<B, F<B>>,
        n: AccumOf<B>,
        window: CorrWindow<'_>,
        rm: RunningMax<'_, B>,
    ) -> Result<()> {
        let (plan, scale) = (&g.plan, g.scale);
        if !matches!(self, ScoreState::Mcc { .. }) {
            // C(f, t̂) as products in the correlation layout.
            b.rfft_pruned_mul_conj(
                plan,
                &g.tpad,
                tshape,
                &mut g.x,
                &[&g.spec_f],
                &mut [&mut g.y],
            )?;
        }
        let norm = match self {
            ScoreState::Plain { scale, .. } => Normalization::Scaled { scale: *scale },
            ScoreState::Denominator { inv_den } => Normalization::Denominator {
                scale,
                inv_den: &*inv_den,
            },
            ScoreState::Local {
                spec_f2,
                c1,
                c2,
                mask,
            } => {
                b.write_corner(mask, &mut g.tpad)?;
                b.rfft_pruned_mul_conj(
                    plan,
                    &g.tpad,
                    tshape,
                    &mut g.x,
                    &[&g.spec_f, spec_f2],
                    &mut [c1, c2],
                )?;
                Normalization::Local {
                    scale,
                    c1,
                    c2,
                    n: F::<B>::from_f64(n.as_f64()),
                    eps: F::<B>::EPS,
                }
            }
            ScoreState::Mcc {
                spec_t,
                spec_f2,
                c,
                mask,
                overlap_ratio,
            } => {
                let [c_fm, c_tt, c_f2m, c_tt2, c_tm] = c;
                let (x, y, corr) = (&mut g.x, g.y.scratch(), &mut g.work[0]);
                // MCC multiplies the template spectrum with two more spectra below.
                b.rfft_pruned(plan, &g.tpad, tshape, x)?;
                b.complex_mul_conj(&g.spec_f, x, y)?;
                // C(f·T, t̂): MCC combines whole grids (global maxima), so nothing to fuse.
                b.irfft(plan, y, corr)?;
                // C(T, t̂) from the template spectrum still in x.
                b.complex_mul_conj(spec_t, x, y)?;
                b.irfft(plan, y, c_tt)?;
                // t̂² → C(T, t̂²).
                b.unary_assign(UnaryOp::Square, t)?;
                b.write_corner(t, &mut g.tpad)?;
                b.rfft_pruned(plan, &g.tpad, tshape, x)?;
                b.complex_mul_conj(spec_t, x, y)?;
                b.irfft(plan, y, c_tt2)?;
                // Mask correlations.
                b.write_corner(mask, &mut g.tpad)?;
                b.rfft_pruned(plan, &g.tpad, tshape, x)?;
                b.complex_mul_conj(&g.spec_f, x, y)?;
                b.irfft(plan, y, c_fm)?;
                b.complex_mul_conj(spec_f2, x, y)?;
                b.irfft(plan, y, c_f2m)?;
                b.complex_mul_conj(spec_t, x, y)?;
                b.irfft(plan, y, c_tm)?;
                b.combine_masked_correlations(
                    corr,
                    c_fm,
                    c_tt,
                    c_f2m,
                    c_tt2,
                    c_tm,
                    scale,
                    F::<B>::EPS,
                    *overlap_ratio,
                )?;
                return b.score_max_update(
                    corr,
                    Normalization::Scaled {
                        scale: F::<B>::from_f64(1.0),
                    },
                    window,
                    rm,
                );
            }
        };
        // One scoring call for the spectral scores, with the normalisation their state chose.
        b.irfft_score_max_update(plan, &mut g.y, norm, &mut g.work, window, rm)
    }
}
