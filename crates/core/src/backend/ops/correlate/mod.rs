//! The [`Correlate`] family: fused kernels of correlation-based template matching, their
//! argument types ([`Normalization`], [`RunningMax`], [`CorrSpectrum`]), the argument checks
//! every backend calls (`check_*`), and the host reference kernels ([`host`]).

use crate::backend::{
    AccumOf, Arr, ArrayMeta, BackendTypes, BinaryOp, ComplexOf, Elementwise, FftPlan, FloatOf,
    Memory, PadMode, Reduce, Resample, Spectral,
};
use crate::dtype::{Element, Float, Index, Real};
use crate::error::{Error, Result};
use num_traits::Float as _;

mod check;
pub mod host;

/// The most rotations a backend scores in one pass
/// ([`Correlate::irfft_score_max_update_group`]).
pub const MAX_GROUP: usize = 4;
mod norm;
pub use check::*;
pub use norm::*;

/// How an output voxel `x` reads a correlation computed on a (larger) FFT grid `fast`:
/// `c[(x + shift) mod fast]` per axis. pytme's circular alignment is `shift = −(n//2)`.
#[derive(Debug, Clone, Copy)]
pub struct CorrWindow<'a> {
    /// Per-axis offset (may be negative).
    pub shift: &'a [isize],
}

/// How [`Correlate::gather_window`] extends the source beyond its edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowExtension<'a> {
    /// The source zero-padded at the high end to `period` per axis, then periodic (pytme's
    /// circular correlation over `fast_shape(target)`).
    Periodic(&'a [usize]),
    /// numpy's `np.pad(mode="symmetric")` extension, repeated indefinitely.
    Symmetric,
}

/// Fused kernels of correlation-based template matching (one pass over a volume each).
///
/// The defaults marked *host* run through [`Memory::download`] / [`Memory::upload`] with the
/// reference kernels of [`host`]: correct on every backend, slow on a device. Backends
/// override them (the CPU backend calls the same [`host`] kernels in parallel in place). Every
/// implementation, default or not, validates its arguments with the `check_*` function of its
/// op first, so the same mistake reads the same on every backend.
pub trait Correlate: BackendTypes + Memory + Elementwise + Reduce + Resample + Spectral {
    /// Copies `src` into the corner `[0, src.shape)` of `dst`. Elements of `dst` outside that
    /// box must already be zero and may be left untouched (a template placed in a zeroed FFT
    /// buffer every rotation). Default: [`Resample::pad`] with zeros (rewrites all of `dst`).
    /// Checks: [`check_write_corner`].
    fn write_corner<T: Float>(&self, src: &Arr<Self, T>, dst: &mut Arr<Self, T>) -> Result<()> {
        check_write_corner(src.shape(), dst.shape())?;
        let before = vec![0usize; src.ndim()];
        self.pad(src, &before, PadMode::Zero, dst)
    }

    /// `dst[offset + j] = src[j]` for every `j` in `src` (a tile merged into a full map), the
    /// rest of `dst` unchanged. Default: *host*. Checks: [`check_insert_block`].
    fn insert_block<T: Element>(
        &self,
        src: &Arr<Self, T>,
        offset: &[usize],
        dst: &mut Arr<Self, T>,
    ) -> Result<()> {
        check_insert_block(src.shape(), offset, dst.shape())?;
        let s = self.download(src)?;
        let mut d = self.download(dst)?;
        host::insert_block(
            slice(&s)?,
            s.shape(),
            offset,
            slice_mut(&mut d)?,
            dst.shape(),
        )?;
        let up = self.upload(d.view())?;
        self.copy(&up, dst)
    }

    /// `dst[j] = ext(src)[start + j]` for `j < len` on every axis, 0 beyond `len` (a target,
    /// or a tile of it with its margin, placed in an FFT buffer). Default: *host*. Checks:
    /// [`check_gather_window`].
    fn gather_window<T: Float>(
        &self,
        src: &Arr<Self, T>,
        start: &[isize],
        len: &[usize],
        ext: WindowExtension<'_>,
        dst: &mut Arr<Self, T>,
    ) -> Result<()> {
        check_gather_window(src.shape(), start, len, ext, dst.shape())?;
        let s = self.download(src)?;
        let mut d = self.download(dst)?;
        host::gather_window(
            slice(&s)?,
            s.shape(),
            start,
            len,
            ext,
            slice_mut(&mut d)?,
            dst.shape(),
        )?;
        let up = self.upload(d.view())?;
        self.copy(&up, dst)
    }

    /// pytme's `norm_scores` denominator, once: `out[x] = 1 / (s · n)` with
    /// `e1 = scale·c1/n`, `e2 = scale·c2/n`, `s = √max(e2 − e1², 0)` (1 where `s < eps`), `c1`,
    /// `c2` read through `window`. `out` has the output shape. Default: *host*. Checks:
    /// [`check_inverse_denominator`].
    fn inverse_denominator<T: Float>(
        &self,
        c1: &Arr<Self, T>,
        c2: &Arr<Self, T>,
        window: CorrWindow<'_>,
        scale: T,
        n: T,
        eps: T,
        out: &mut Arr<Self, T>,
    ) -> Result<()> {
        check_inverse_denominator(c1.shape(), c2.shape(), window, out.shape())?;
        let (h1, h2) = (self.download(c1)?, self.download(c2)?);
        let mut o = self.download(out)?;
        let oshape = out.shape().to_vec();
        host::inverse_denominator(
            slice(&h1)?,
            slice(&h2)?,
            c1.shape(),
            window.shift,
            scale,
            n,
            eps,
            &oshape,
            0..oshape[0],
            slice_mut(&mut o)?,
        )?;
        let up = self.upload(o.view())?;
        self.copy(&up, out)
    }

    /// Prepares the moment accumulators `acc` ([`Moments::acc`], canonical words) for up to
    /// [`host::MOMENT_PASSES`] score passes: a backend may hold them in a working form of its
    /// own until [`Correlate::moments_close`], which must restore the canonical words with
    /// the same sums exactly (nothing else reads `acc` in between). All-zero words must be the
    /// working form of zero sums (as they are canonically), so that accumulators freshly
    /// zeroed take passes without an opening. Default: nothing (the passes keep the canonical
    /// words).
    fn moments_open(&self, acc: &mut Arr<Self, i64>) -> Result<()> {
        let _ = acc;
        Ok(())
    }

    /// Restores the canonical words of accumulators prepared by [`Correlate::moments_open`].
    /// Default: nothing.
    fn moments_close(&self, acc: &mut Arr<Self, i64>) -> Result<()> {
        let _ = acc;
        Ok(())
    }

    /// The score statistics over a run's rotations ([`host::statistics_run`], voxel by voxel):
    /// `[mean, std, z]` shaped like `best`, from the moment accumulators `acc` (canonical
    /// words, `best`'s shape + `[4]`) at `scale` over `nrot` rotations, with the best scores
    /// `best` and, after a background correction, each voxel's score shift `shift`. The first
    /// voxel (in C order) whose sums are flagged is an error ([`host::statistics_flagged`]).
    /// Shapes are the caller's to check. Default: *host* (downloaded, computed, uploaded).
    fn moment_statistics<T: Float>(
        &self,
        acc: &Arr<Self, i64>,
        scale: [f64; 2],
        best: &Arr<Self, T>,
        shift: Option<&Arr<Self, T>>,
        nrot: usize,
    ) -> Result<[Arr<Self, T>; 3]> {
        let words = self.download(acc)?;
        let bests = self.download(best)?;
        let shifts = shift.map(|s| self.download(s)).transpose()?;
        let n = bests.len();
        let zero = || vec![T::from_f64(0.0); n];
        let (mut m, mut s, mut z) = (zero(), zero(), zero());
        if let Some(i) = host::statistics_run(
            slice(&words)?,
            slice(&bests)?,
            shifts.as_ref().map(slice).transpose()?,
            nrot,
            scale,
            [&mut m, &mut s, &mut z],
        ) {
            return Err(host::statistics_flagged(i, scale));
        }
        let shape = best.shape().to_vec();
        let up = |v: Vec<T>| -> Result<Arr<Self, T>> {
            let a = ndarray::ArrayD::from_shape_vec(shape.clone(), v)
                .map_err(|e| Error::invalid("score statistics", e.to_string()))?;
            self.upload_owned(a)
        };
        Ok([up(m)?, up(s)?, up(z)?])
    }

    /// The matching inner loop's last pass, fused: reads the correlation `corr` (FFT grid)
    /// through `window`, normalises it by `norm`, and updates the running maximum `rm` (strict
    /// `>`, NaN never wins; output shape); adds Σ score² over the output to `rm.ssum`, and the
    /// scores to `rm.moments` when given ([`Moments`], opened by [`Correlate::moments_open`]).
    /// Default: *host*. Checks: [`check_score_max_update`].
    fn score_max_update<T: Float, I: Index>(
        &self,
        corr: &Arr<Self, T>,
        norm: ScoreNorm<'_, Self, T>,
        window: CorrWindow<'_>,
        rm: RunningMax<'_, Self, T, I>,
    ) -> Result<()> {
        check_score_max_update(corr, &norm, window, &rm)?;
        let RunningMax {
            best,
            best_index,
            index,
            ssum,
            moments,
        } = rm;
        let c = self.download(corr)?;
        let oshape = best.shape().to_vec();
        let hn = norm.try_map(|d| self.download(d), |c| self.download(c))?;
        let hn = hn.as_ref().try_map(|d| slice(d), |c| slice(c))?;
        let mut b = self.download(best)?;
        let mut bi = self.download(best_index)?;
        // The host pass works on the working form of the moments (`host::moments_open`);
        // between passes this default keeps them canonical.
        let unit = host::moment_unit(&oshape);
        let mut hm = match &moments {
            Some(m) => {
                let mut a = self.download(&*m.acc)?;
                host::moments_open(slice_mut(&mut a)?, unit);
                Some((a, m.scale))
            }
            None => None,
        };
        let s = host::score_max_update(
            slice(&c)?,
            corr.shape(),
            &hn,
            window.shift,
            &oshape,
            0..oshape[0],
            slice_mut(&mut b)?,
            slice_mut(&mut bi)?,
            index,
            match hm.as_mut() {
                Some((a, sc)) => Some((slice_mut(a)?, *sc)),
                None => None,
            },
        )?;
        if let (Some(m), Some((mut a, _))) = (moments, hm) {
            host::moments_close(slice_mut(&mut a)?, unit);
            let up = self.upload(a.view())?;
            self.copy(&up, m.acc)?;
        }
        let mut ss = self.download(ssum)?;
        slice_mut(&mut ss)?[0] += s;
        let (ub, ubi, us) = (
            self.upload(b.view())?,
            self.upload(bi.view())?,
            self.upload(ss.view())?,
        );
        self.copy(&ub, best)?;
        self.copy(&ubi, best_index)?;
        self.copy(&us, ssum)
    }

    /// pytme's `standardize(t, m, n)` of a rotated template, in place. With `mask = Some((m,
    /// n))`: `p = t·m` (rounded to `T`), `μ = Σp/n`, `σ² = max(Σ t·p/n − μ², 0)` (sums in
    /// f64), then `t ← (t − μ)·(1/σ)·m` with `μ` and `1/σ` rounded to `T`; with `None` the
    /// whole box (`m = 1`, `n = len`). A template constant inside the mask (`σ²` NaN,
    /// infinite, or ≤ 1e-12·|Σ t·p/n|) becomes zeros. `scratch` is template-shaped. Default:
    /// the sums read back to the host, then element-wise ops with host scalars (a host
    /// synchronisation per call; a device backend keeps it on the device). Checks:
    /// [`check_standardize_masked`].
    fn standardize_masked<T: Float>(
        &self,
        t: &mut Arr<Self, T>,
        mask: Option<(&Arr<Self, T>, AccumOf<Self>)>,
        scratch: &mut Arr<Self, T>,
    ) -> Result<()> {
        check_standardize_masked(t.shape(), mask.map(|(m, _)| m.shape()), scratch.shape())?;
        // The moments in the accumulator type.
        let acc = <AccumOf<Self> as Real>::from_f64;
        let (n, s1, s2) = match mask {
            Some((m, n)) => {
                self.binary(BinaryOp::Mul, t, m, scratch)?;
                (n, self.sum(scratch)?, self.dot(t, scratch)?)
            }
            None => (acc(t.len() as f64), self.sum(t)?, self.sum_sq(t)?),
        };
        let mean = s1 / n;
        let var = (s2 / n - mean * mean).max(acc(0.0));
        if var.is_nan() || var <= acc(1e-12) * (s2 / n).abs() || !var.is_finite() {
            return self.fill(t, T::from_f64(0.0));
        }
        self.scalar_assign(BinaryOp::Sub, t, mean.as_f64())?;
        self.scalar_assign(BinaryOp::Mul, t, 1.0 / var.sqrt().as_f64())?;
        if let Some((m, _)) = mask {
            self.binary_assign(BinaryOp::Mul, t, m)?;
        }
        Ok(())
    }

    /// A buffer for the products of [`Correlate::rfft_pruned_mul_conj`] with `plan` (zeros
    /// of its complex shape; the only way to make a [`CorrSpectrum`]).
    fn corr_spectrum(&self, plan: &Self::Fft) -> Result<CorrSpectrum<Self>> {
        Ok(CorrSpectrum::new(self.zeros(plan.complex_shape())?))
    }

    /// The matching loop's forward transform and spectrum products in one call:
    /// `outs[q] = factors[q] · conj(rfft_pruned(input))` for an input zero outside `nonzero`
    /// (see [`Spectral::rfft_pruned`]), for [`Correlate::irfft_score_max_update`] with the same
    /// plan to consume.
    ///
    /// The products are written in the backend's *correlation layout* ([`CorrSpectrum`]),
    /// which only [`Correlate::irfft_score_max_update`] reads: the default's is the plain half
    /// spectrum; the CPU backend's, for volumes larger than its L2 cache, is the products
    /// already inverse-transformed along the slowest axis (its forward transform's last pass
    /// runs the product and that axis' inverse on each line while it is in cache, so the
    /// products are never written and read back in between; bit-identical to the unfused
    /// sequence). `spec` is scratch of the complex shape, unspecified afterwards. Default:
    /// [`Spectral::rfft_pruned`] into `spec`, then [`Elementwise::complex_mul_conj`]. Checks:
    /// [`check_rfft_pruned_mul_conj`].
    fn rfft_pruned_mul_conj(
        &self,
        plan: &Self::Fft,
        input: &Arr<Self, FloatOf<Self>>,
        nonzero: &[usize],
        spec: &mut Arr<Self, ComplexOf<Self>>,
        factors: &[&Arr<Self, ComplexOf<Self>>],
        outs: &mut [&mut CorrSpectrum<Self>],
    ) -> Result<()> {
        check_rfft_pruned_mul_conj::<Self>(
            plan,
            input.shape(),
            nonzero,
            spec.shape(),
            factors,
            outs,
        )?;
        self.rfft_pruned(plan, input, nonzero, spec)?;
        for (f, o) in factors.iter().zip(outs.iter_mut()) {
            self.complex_mul_conj(f, spec, o.layout_mut())?;
        }
        Ok(())
    }

    /// The matching loop's inverse transforms and score pass in one call: `corr =
    /// irfft(spec)` (for [`Normalization::Local`] also `c1`, `c2` from theirs), then
    /// [`Correlate::score_max_update`] with the same normalisation. The products were written
    /// by [`Correlate::rfft_pruned_mul_conj`] with the same plan, and are clobbered. `work`
    /// holds [`Normalization::correlations`] real arrays of the plan's real shape for the
    /// correlations; a backend that fuses the last inverse pass with the score update (the CPU
    /// backend: each slab is scored while it is in cache, so the correlations are never written
    /// out) may leave them untouched. The result equals `rfft_pruned` → `complex_mul_conj` →
    /// `irfft` → `score_max_update` exactly, up to the summation order of `ssum`. Default:
    /// [`irfft_then_score`]. Checks: [`check_irfft_score_max_update`].
    fn irfft_score_max_update<I: Index>(
        &self,
        plan: &Self::Fft,
        spec: &mut CorrSpectrum<Self>,
        norm: SpectralNorm<'_, Self>,
        work: &mut [Arr<Self, FloatOf<Self>>],
        window: CorrWindow<'_>,
        rm: RunningMax<'_, Self, FloatOf<Self>, I>,
    ) -> Result<()> {
        check_irfft_score_max_update(plan, spec, &norm, work, window, &rm)?;
        irfft_then_score(self, plan, spec, norm, work, window, rm)
    }

    /// The most rotations [`Correlate::irfft_score_max_update_group`] scores in one pass
    /// (fewer bytes moved than one call of [`Correlate::irfft_score_max_update`] per
    /// rotation), so that the matching loop spends more sets of products on grouping; at most
    /// [`MAX_GROUP`]. Default: 1 (the default group is one call per rotation).
    fn score_group_max(&self) -> usize {
        1
    }

    /// [`Correlate::irfft_score_max_update`] of a *group* of rotations of the same score, plan
    /// and window: `spec`/`norm` the first's products (index `rm.index`, Σ score² into
    /// `rm.ssum`), `rest` the later ones' in order ([`PairedPass`]; at most
    /// [`MAX_GROUP`]` − 1`). The results are those of the calls in order, bit for bit:
    /// `best`/`best_index` keep the first best (an earlier rotation wins a tie), each Σ score²
    /// is summed as alone, the moments get every pass (one of the [`host::MOMENT_PASSES`] of
    /// an opening per rotation). Default: the calls one after the other. Checks:
    /// [`check_irfft_score_max_update`] for each.
    #[allow(clippy::too_many_arguments)]
    fn irfft_score_max_update_group<I: Index>(
        &self,
        plan: &Self::Fft,
        spec: &mut CorrSpectrum<Self>,
        norm: SpectralNorm<'_, Self>,
        rest: Vec<PairedPass<'_, Self, I>>,
        work: &mut [Arr<Self, FloatOf<Self>>],
        window: CorrWindow<'_>,
        mut rm: RunningMax<'_, Self, FloatOf<Self>, I>,
    ) -> Result<()> {
        self.irfft_score_max_update(plan, spec, norm, work, window, rm.reborrow())?;
        for next in rest {
            let mut rm2 = rm.reborrow();
            rm2.index = next.index;
            rm2.ssum = next.ssum;
            self.irfft_score_max_update(plan, next.spec, next.norm, work, window, rm2)?;
        }
        Ok(())
    }

    /// pytme's MCC (Padfield masked NCC) on the whole FFT grid, written into `c_ft`. Inputs are
    /// unnormalised correlations (multiplied by `scale` here): `c_ft = C(f·T, t̂)`,
    /// `c_fm = C(f·T, m_R)`, `c_tt = C(T, t̂)`, `c_f2m = C((f·T)², m_R)`, `c_tt2 = C(T, t̂²)`,
    /// `c_tm = C(T, m_R)`. `ov = max(c_tm, eps)`; `num = c_ft − c_fm·c_tt/ov`;
    /// `den = √(max(c_f2m − c_fm²/ov, 0) · max(c_tt2 − c_tt²/ov, 0))`, 1 where
    /// `den < 1e3·eps·max(den)`; score `clip(num/den, −1, 1)`, 0 where
    /// `ov < overlap_ratio·max(ov)` (maxima over the whole grid). Default: *host*. Checks:
    /// [`check_combine_masked_correlations`].
    fn combine_masked_correlations<T: Float>(
        &self,
        c_ft: &mut Arr<Self, T>,
        c_fm: &Arr<Self, T>,
        c_tt: &Arr<Self, T>,
        c_f2m: &Arr<Self, T>,
        c_tt2: &Arr<Self, T>,
        c_tm: &Arr<Self, T>,
        scale: T,
        eps: T,
        overlap_ratio: T,
    ) -> Result<()> {
        let rest = [c_fm, c_tt, c_f2m, c_tt2, c_tm];
        check_combine_masked_correlations(c_ft.shape(), rest.map(|a| a.shape()))?;
        let mut a = self.download(c_ft)?;
        let hs: Vec<_> = rest
            .iter()
            .map(|x| self.download(*x))
            .collect::<Result<_>>()?;
        host::combine_masked_correlations(
            slice_mut(&mut a)?,
            [
                slice(&hs[0])?,
                slice(&hs[1])?,
                slice(&hs[2])?,
                slice(&hs[3])?,
                slice(&hs[4])?,
            ],
            scale,
            eps,
            overlap_ratio,
        );
        let up = self.upload(a.view())?;
        self.copy(&up, c_ft)
    }
}

/// The unfused [`Correlate::irfft_score_max_update`]: [`Spectral::irfft`] of each product into
/// `work`, then [`Correlate::score_max_update`] (its default, and the fallback of a backend
/// that fuses only some geometries). Valid for the default correlation layout (the plain half
/// spectrum) and for a backend's whose layout its own `irfft` reads; the arguments are
/// checked by the caller ([`check_irfft_score_max_update`]).
pub fn irfft_then_score<B: Correlate, I: Index>(
    b: &B,
    plan: &B::Fft,
    spec: &mut CorrSpectrum<B>,
    norm: SpectralNorm<'_, B>,
    work: &mut [Arr<B, FloatOf<B>>],
    window: CorrWindow<'_>,
    rm: RunningMax<'_, B, FloatOf<B>, I>,
) -> Result<()> {
    let need = norm.correlations();
    let (w0, rest) = work.split_at_mut(1);
    let corr = &mut w0[0];
    b.irfft(plan, spec.layout_mut(), corr)?;
    // The mask correlations, in order, into the next work arrays.
    let mut rest = rest.iter_mut();
    let norm = norm.try_map(Ok, |c| {
        let w = rest
            .next()
            .ok_or_else(|| Error::shape("irfft_score_max_update: work", need, "fewer arrays"))?;
        b.irfft(plan, c.layout_mut(), w)?;
        let w: &Arr<B, FloatOf<B>> = w;
        Ok::<_, Error>(w)
    })?;
    b.score_max_update(corr, norm, window, rm)
}

fn slice<T>(a: &ndarray::ArrayD<T>) -> Result<&[T]> {
    a.as_slice()
        .ok_or_else(|| Error::invalid("array", "not in standard layout"))
}
fn slice_mut<T>(a: &mut ndarray::ArrayD<T>) -> Result<&mut [T]> {
    a.as_slice_mut()
        .ok_or_else(|| Error::invalid("array", "not in standard layout"))
}
