use monomorph_core::backend::host;
use monomorph_core::{
    CorrSpectrum, CorrWindow, Correlate, Element, FftPlan, Float, Index, MAX_GROUP, PairedPass,
    Precision, Result, RunningMax, ScoreNorm, SpectralNorm, WindowExtension,
    check_combine_masked_correlations, check_gather_window, check_insert_block,
    check_inverse_denominator, check_irfft_score_max_update, check_rfft_pruned_mul_conj,
    check_score_max_update, check_write_corner,
};
use ndarray::ArrayD;
use rayon::prelude::*;

use super::{data, data_mut};
use crate::util::{PAR_MIN, SharedMut};
use crate::{Cpu, CpuFftPlan, fft};

type F<P> = <P as Precision>::Float;
type C<P> = num_complex::Complex<F<P>>;

/// Axis-0 rows per parallel task for an output of `row_len` elements per row: several tasks
/// per thread for balance, but at least ~PAR_MIN/4 elements each.
fn rows_per_task(nrows: usize, row_len: usize) -> usize {
    crate::util::rows_per_task(nrows, 4, (PAR_MIN / 4).div_ceil(row_len.max(1)))
}

use crate::simd::widest_simd;

widest_simd! {
    /// [`host::score_max_update`] at the widest vector width: the FLC normalisation (f64
    /// variance, then square root and division in `T`) and the max/argmax update run 16 / 8
    /// lanes wide.
    fn score_rows<T: Float, I: Index>(
        corr: &[T],
        fast: &[usize],
        norm: &host::Norm<'_, T>,
        shift: &[isize],
        out: &[usize],
        rows: std::ops::Range<usize>,
        best: &mut [T],
        best_index: &mut [I],
        index: I,
        moments: Option<(&mut [i64], [f64; 2])>,
    ) -> Result<f64> = host::score_max_update;
}

widest_simd! {
    /// [`host::score_line`] at the widest vector width (the fused inverse's score pass).
    fn score_line<T: Float, I: Index>(
        c: &[T],
        norm: &host::Norm<'_, T>,
        segs: &[(usize, usize, usize)],
        best: &mut [T],
        best_index: &mut [I],
        index: I,
        acc: &mut [f64; host::LANES],
        moments: Option<(host::WorkLine<'_>, [f64; 2])>,
    ) -> () = host::score_line;
}

/// Stamps a [`host::score_line_group`] of `K` rotations at the widest vector width (the fused
/// inverse's score pass for a group of rotations).
macro_rules! score_line_group {
    ($name:ident, $k:literal) => {
        widest_simd! {
            /// [`host::score_line_group`] at the widest vector width.
            fn $name<T: Float, I: Index>(
                c: [&[T]; $k],
                norm: [&host::Norm<'_, T>; $k],
                segs: &[(usize, usize, usize)],
                best: &mut [T],
                best_index: &mut [I],
                index: [I; $k],
                acc: &mut [[f64; host::LANES]; $k],
                moments: Option<(host::WorkLine<'_>, [f64; 2])>,
            ) -> bool = host::score_line_group::<T, I, $k>;
        }
    };
}
score_line_group!(score_line_group2, 2);
score_line_group!(score_line_group3, 3);
score_line_group!(score_line_group4, 4);

/// The output line (flat index over all axes but the last) that the FFT-grid row `row` (flat
/// over the same axes) lands in, `x = (i − shift) mod fast` per axis, or `None` when it falls
/// outside `out`.
#[inline]
fn output_line(row: usize, fast: &[usize], shift: &[isize], out: &[usize]) -> Option<usize> {
    let d = fast.len();
    let (mut rem, mut line, mut stride) = (row, 0usize, 1usize);
    for k in (0..d - 1).rev() {
        let i = rem % fast[k];
        rem /= fast[k];
        let x = (i as isize - shift[k]).rem_euclid(fast[k] as isize) as usize;
        if x >= out[k] {
            return None;
        }
        line += x * stride;
        stride *= out[k];
    }
    Some(line)
}

/// Asks the cache for `words` 64-bit words from `p` (a hint: it changes no result, and never
/// faults whatever the address).
#[inline(always)]
fn prefetch(p: *const i64, words: usize) {
    #[cfg(target_arch = "x86_64")]
    for k in (0..words).step_by(8) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch reads nothing the program can observe and does not fault.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(k).cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, words);
}

/// Voxels per unit of the working form ([`host::moment_unit`]) of moment accumulators of
/// shape `out + [4]`.
fn moment_unit(shape: &[usize]) -> usize {
    host::moment_unit(&shape[..shape.len().saturating_sub(1)])
}

impl<P: Precision> Cpu<P> {
    /// `f(units, u)` ([`host::moments_open`] or [`host::moments_close`]) over blocks of whole
    /// units of the moments `acc` ([`moment_unit`]), in parallel: each unit is converted on
    /// its own, so the words are those of one call over all of them. (One thread over a fresh
    /// accumulator also faulted all its pages in alone: measured about half of the score
    /// statistics' extra time per rotation at 2 threads, 96³ FLC `-a 40`.)
    fn moment_units(&self, acc: &mut ArrayD<i64>, f: fn(&mut [i64], usize)) -> Result<()> {
        let u = moment_unit(acc.shape());
        let words = data_mut("moments", acc)?;
        let unit = 4 * u;
        let units = words.len() / unit;
        let per = crate::util::rows_per_task(units, 4, PAR_MIN.div_ceil(unit));
        self.install(|| {
            words
                .par_chunks_mut(per * unit)
                .for_each(|block| f(block, u))
        });
        Ok(())
    }

    /// The fused inverse and score pass of one rotation (`rest` empty) or of a group of up to
    /// [`MAX_GROUP`] ([`host::score_line_group`]): the products of each rotation (then its
    /// mask correlations) transformed together, each FFT-grid row scored while in cache.
    /// Arguments checked.
    fn fused_score<'a, I: Index>(
        &self,
        plan: &CpuFftPlan,
        (spec, norm): (&'a mut CorrSpectrum<Self>, SpectralNorm<'a, Self>),
        rest: Vec<PairedPass<'a, Self, I>>,
        window: CorrWindow<'_>,
        rm: RunningMax<'_, Self, F<P>, I>,
    ) -> Result<()> {
        let fast = plan.real_shape().to_vec();
        let d = fast.len();
        let RunningMax {
            best,
            best_index,
            index,
            ssum,
            moments,
        } = rm;
        let oshape = best.shape().to_vec();
        // The products transformed together: per rotation its products, then its
        // normalisation's mask correlations, which the score pass reads as `outs[q]` at their
        // index `q` here; per rotation (first index of its products, normalisation, index).
        let mut specs: Vec<&mut ArrayD<C<P>>> = Vec::new();
        let mut rots = Vec::with_capacity(1 + rest.len());
        let mut sums = vec![ssum];
        let mut add = |spec: &'a mut CorrSpectrum<Self>, norm: SpectralNorm<'a, Self>, ix: I| {
            let first = specs.len();
            specs.push(spec.layout_mut());
            let norm = norm.try_map(
                |den| data("inv_den", den),
                |c| {
                    specs.push(c.layout_mut());
                    Ok(specs.len() - 1)
                },
            )?;
            rots.push((first, norm, ix));
            Ok::<_, monomorph_core::Error>(())
        };
        add(spec, norm, index)?;
        for next in rest {
            add(next.spec, next.norm, next.index)?;
            sums.push(next.ssum);
        }
        // Spectra per rotation.
        let group = rots.get(1).map_or(specs.len(), |r| r.0);
        let shapes: Vec<Vec<usize>> = specs.iter().map(|x| x.shape().to_vec()).collect();
        let shape_refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
        let mut inputs: Vec<&mut [C<P>]> = specs
            .into_iter()
            .map(|x| data_mut("spectrum of irfft_score_max_update", x))
            .collect::<Result<_>>()?;
        let maps = host::index_maps(&fast, window.shift, &oshape)?;
        let segs = host::line_runs(&maps[d - 1]);
        let (n, nl) = (fast[d - 1], oshape[d - 1]);
        let unit = host::moment_unit(&oshape);
        let bp = SharedMut(data_mut("best", best)?.as_mut_ptr());
        let bip = SharedMut(data_mut("best_index", best_index)?.as_mut_ptr());
        let (mp, msc) = match moments {
            Some(m) => (
                Some(SharedMut(data_mut("moments", m.acc)?.as_mut_ptr())),
                m.scale,
            ),
            None => (None, [1.0; 2]),
        };
        let consume = |r0: usize, outs: &[&[F<P>]]| -> Result<[f64; MAX_GROUP]> {
            let mut acc = [[0.0f64; host::LANES]; MAX_GROUP];
            let rows = outs[0].len() / n;
            for r in 0..rows {
                let Some(line) = output_line(r0 + r, &fast, window.shift, &oshape) else {
                    continue;
                };
                // The next line's moment words that its pass reads (its low parts, `P₁` and
                // `P₂` of its unit in the working form), fetched while this line is scored.
                if let Some(p) = mp.as_ref()
                    && r + 1 < rows
                    && let Some(next) = output_line(r0 + r + 1, &fast, window.shift, &oshape)
                {
                    let [p1, p2, ..] = host::work_offsets(next * nl, unit);
                    prefetch(p.get().wrapping_add(p1), nl);
                    prefetch(p.get().wrapping_add(p2), nl);
                }
                let o = line * nl;
                let row = r * n..(r + 1) * n;
                // SAFETY: `best` and `best_index` are borrowed mutably for the whole call and
                // hold Π oshape elements; `line < Π oshape[..d-1]`, so `o..o + nl` is in bounds.
                // Distinct FFT-grid rows map to distinct output lines (per axis,
                // x = (i − shift) mod fast is injective in i), and each row is consumed once,
                // so no two calls touch the same line.
                let (b, bi) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(bp.get().add(o), nl),
                        std::slice::from_raw_parts_mut(bip.get().add(o), nl),
                    )
                };
                let m = mp.as_ref().map(|p| {
                    // SAFETY: as for `best` above: the line's voxels `o..o + nl` lie in one
                    // unit (`unit` a multiple of `nl`), whose four parts of `unit` words hold
                    // them at `work_offsets` (the moments' shape is checked); the line's slice
                    // of each part is its alone.
                    let [p1, p2, h1, h2] = host::work_offsets(o, unit)
                        .map(|at| unsafe { std::slice::from_raw_parts_mut(p.get().add(at), nl) });
                    (
                        host::WorkLine {
                            p: [p1, p2],
                            h: [h1, h2],
                        },
                        msc,
                    )
                });
                // Rotation q's products and normalisation on this line.
                let c = |q: usize| &outs[rots[q].0][row.clone()];
                let ln = |q: usize| {
                    rots[q]
                        .1
                        .map(|den| &den[o..o + nl], |k| &outs[k][row.clone()])
                };
                macro_rules! group {
                    ($f:ident, $k:literal) => {{
                        let lns: [host::Norm<'_, F<P>>; $k] = std::array::from_fn(ln);
                        let (head, _) = acc.split_first_chunk_mut::<$k>().ok_or_else(|| {
                            monomorph_core::Error::invalid("score group", "too many rotations")
                        })?;
                        $f(
                            std::array::from_fn(c),
                            std::array::from_fn(|q| &lns[q]),
                            &segs,
                            b,
                            bi,
                            std::array::from_fn(|q| rots[q].2),
                            head,
                            m,
                        )
                    }};
                }
                let same = match rots.len() {
                    1 => {
                        score_line(c(0), &ln(0), &segs, b, bi, index, &mut acc[0], m);
                        true
                    }
                    2 => group!(score_line_group2, 2),
                    3 => group!(score_line_group3, 3),
                    4 => group!(score_line_group4, 4),
                    k => {
                        return Err(monomorph_core::Error::invalid(
                            "irfft_score_max_update_group",
                            format!("{k} rotations in a group (at most {MAX_GROUP})"),
                        ));
                    }
                };
                if !same {
                    return Err(monomorph_core::Error::invalid(
                        "irfft_score_max_update_group",
                        "the rotations' normalisations differ",
                    ));
                }
            }
            Ok(std::array::from_fn(|q| host::fold_lanes(&acc[q])))
        };
        let total = fft::inverse_consume(plan, group, &shape_refs, &mut inputs, &consume)?;
        for (s, t) in sums.into_iter().zip(total) {
            data_mut("ssum", s)?[0] += t;
        }
        Ok(())
    }
}

impl<P: Precision> Correlate for Cpu<P> {
    fn write_corner<T: Float>(&self, src: &ArrayD<T>, dst: &mut ArrayD<T>) -> Result<()> {
        check_write_corner(src.shape(), dst.shape())?;
        self.install(|| {
            let offset = vec![0usize; src.ndim()];
            self.insert_block(src, &offset, dst)
        })
    }

    fn insert_block<T: Element>(
        &self,
        src: &ArrayD<T>,
        offset: &[usize],
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        check_insert_block(src.shape(), offset, dst.shape())?;
        self.install(|| {
            let dshape = dst.shape().to_vec();
            host::insert_block(
                data("src", src)?,
                src.shape(),
                offset,
                data_mut("dst", dst)?,
                &dshape,
            )
        })
    }

    fn gather_window<T: Float>(
        &self,
        src: &ArrayD<T>,
        start: &[isize],
        len: &[usize],
        ext: WindowExtension<'_>,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        check_gather_window(src.shape(), start, len, ext, dst.shape())?;
        self.install(|| {
            let dshape = dst.shape().to_vec();
            let (s, sshape) = (data("src", src)?, src.shape());
            let d = data_mut("dst", dst)?;
            if dshape.is_empty() {
                // A 0-d window: one element, nothing to split.
                return host::gather_window(s, sshape, start, len, ext, d, &dshape);
            }
            // Blocks of axis-0 rows in parallel: each is the same window, started r0 rows later.
            let row_len: usize = dshape[1..].iter().product::<usize>().max(1);
            let per = rows_per_task(dshape[0], row_len);
            d.par_chunks_mut(per * row_len)
                .enumerate()
                .try_for_each(|(t, chunk)| {
                    let r0 = t * per;
                    let rows = chunk.len() / row_len;
                    let (mut st, mut ln, mut sh) = (start.to_vec(), len.to_vec(), dshape.clone());
                    st[0] += r0 as isize;
                    ln[0] = len[0].saturating_sub(r0).min(rows);
                    sh[0] = rows;
                    host::gather_window(s, sshape, &st, &ln, ext, chunk, &sh)
                })
        })
    }

    fn inverse_denominator<T: Float>(
        &self,
        c1: &ArrayD<T>,
        c2: &ArrayD<T>,
        window: CorrWindow<'_>,
        scale: T,
        n: T,
        eps: T,
        out: &mut ArrayD<T>,
    ) -> Result<()> {
        check_inverse_denominator(c1.shape(), c2.shape(), window, out.shape())?;
        self.install(|| {
            let oshape = out.shape().to_vec();
            let row_len: usize = oshape[1..].iter().product();
            let per = rows_per_task(oshape[0], row_len);
            let (h1, h2, fast) = (data("c1", c1)?, data("c2", c2)?, c1.shape());
            data_mut("out", out)?
                .par_chunks_mut(per * row_len.max(1))
                .enumerate()
                .try_for_each(|(t, o)| {
                    let r0 = t * per;
                    let rows = r0..r0 + o.len() / row_len.max(1);
                    host::inverse_denominator(
                        h1,
                        h2,
                        fast,
                        window.shift,
                        scale,
                        n,
                        eps,
                        &oshape,
                        rows,
                        o,
                    )
                })
        })
    }

    fn moments_open(&self, acc: &mut ArrayD<i64>) -> Result<()> {
        self.moment_units(acc, host::moments_open)
    }

    fn moments_close(&self, acc: &mut ArrayD<i64>) -> Result<()> {
        self.moment_units(acc, host::moments_close)
    }

    fn moment_statistics<T: Float>(
        &self,
        acc: &ArrayD<i64>,
        scale: [f64; 2],
        best: &ArrayD<T>,
        shift: Option<&ArrayD<T>>,
        nrot: usize,
    ) -> Result<[ArrayD<T>; 3]> {
        // In place and in parallel over blocks of voxels (was: the 32 B/voxel of words copied
        // by a download and read on one thread), each voxel as the host default computes it;
        // the first flagged voxel in C order is the one reported.
        let (words, bests) = (data("moments", acc)?, data("scores", best)?);
        let shifts = shift.map(|s| data("background shift", s)).transpose()?;
        let n = bests.len();
        if words.len() != 4 * n || shifts.is_some_and(|s| s.len() != n) {
            return Err(monomorph_core::Error::invalid(
                "score statistics",
                "moments, scores and shift not of one voxel count",
            ));
        }
        let mut outs = [(); 3].map(|_| ArrayD::from_elem(best.shape(), T::from_f64(0.0)));
        let [m, s, z] = &mut outs;
        let (m, s, z) = (data_mut("mean", m)?, data_mut("std", s)?, data_mut("z", z)?);
        let per = rows_per_task(n, 1).max(1);
        let flagged = self.install(|| {
            m.par_chunks_mut(per)
                .zip(s.par_chunks_mut(per))
                .zip(z.par_chunks_mut(per))
                .enumerate()
                .filter_map(|(k, ((m, s), z))| {
                    let at = k * per;
                    let len = m.len();
                    host::statistics_run(
                        &words[4 * at..4 * (at + len)],
                        &bests[at..at + len],
                        shifts.map(|sh| &sh[at..at + len]),
                        nrot,
                        scale,
                        [m, s, z],
                    )
                    .map(|i| at + i)
                })
                .min()
        });
        if let Some(i) = flagged {
            return Err(host::statistics_flagged(i, scale));
        }
        Ok(outs)
    }

    fn score_max_update<T: Float, I: Index>(
        &self,
        corr: &ArrayD<T>,
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
        self.install(|| {
            let oshape = best.shape().to_vec();
            let hn = norm.try_map(|d| data("inv_den", d), |c| data("mask correlation", c))?;
            let row_len: usize = oshape[1..].iter().product::<usize>().max(1);
            // A 1-D output is one line, the unit of the moments' working form: one task.
            let per = if oshape.len() == 1 && moments.is_some() {
                oshape[0].max(1)
            } else {
                rows_per_task(oshape[0], row_len)
            };
            let (c, fast) = (data("corr", corr)?, corr.shape());
            let (mp, msc) = match moments {
                Some(m) => (
                    Some(SharedMut(data_mut("moments", m.acc)?.as_mut_ptr())),
                    m.scale,
                ),
                None => (None, [1.0; 2]),
            };
            let parts: Vec<f64> = data_mut("best", best)?
                .par_chunks_mut(per * row_len)
                .zip(data_mut("best_index", best_index)?.par_chunks_mut(per * row_len))
                .enumerate()
                .map(|(t, (b, bi))| {
                    let r0 = t * per;
                    let rows = r0..r0 + b.len() / row_len;
                    let m = mp.as_ref().map(|p| {
                        // SAFETY: the moments hold 4 words per voxel of `best` (checked); the
                        // chunks of `best` are disjoint, so are these.
                        let s = unsafe {
                            std::slice::from_raw_parts_mut(
                                p.get().add(4 * r0 * row_len),
                                4 * b.len(),
                            )
                        };
                        (s, msc)
                    });
                    score_rows(c, fast, &hn, window.shift, &oshape, rows, b, bi, index, m)
                })
                .collect::<Result<_>>()?;
            let s = data_mut("ssum", ssum)?;
            s[0] += parts.iter().sum::<f64>();
            Ok(())
        })
    }

    fn rfft_pruned_mul_conj(
        &self,
        plan: &CpuFftPlan,
        input: &ArrayD<F<P>>,
        nonzero: &[usize],
        spec: &mut ArrayD<C<P>>,
        factors: &[&ArrayD<C<P>>],
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
        self.install(|| {
            let cshape = spec.shape().to_vec();
            let f: Vec<&[C<P>]> = factors
                .iter()
                .map(|a| data("factor of rfft_pruned_mul_conj", a))
                .collect::<Result<_>>()?;
            let mut o: Vec<&mut [C<P>]> = outs
                .iter_mut()
                .map(|a| data_mut("out of rfft_pruned_mul_conj", a.layout_mut()))
                .collect::<Result<_>>()?;
            fft::forward(
                plan,
                input.shape(),
                data("input of rfft_pruned_mul_conj", input)?,
                &cshape,
                data_mut("spec of rfft_pruned_mul_conj", spec)?,
                Some(nonzero),
                Some(fft::ProductArgs {
                    factors: &f,
                    outs: &mut o,
                }),
            )
        })
    }

    fn irfft_score_max_update<I: Index>(
        &self,
        plan: &CpuFftPlan,
        spec: &mut CorrSpectrum<Self>,
        norm: SpectralNorm<'_, Self>,
        work: &mut [ArrayD<F<P>>],
        window: CorrWindow<'_>,
        rm: RunningMax<'_, Self, F<P>, I>,
    ) -> Result<()> {
        check_irfft_score_max_update(plan, spec, &norm, work, window, &rm)?;
        let fast = plan.real_shape();
        if fast.len() < 2 || !fft::consumable(plan) {
            // Nothing to fuse over (1-D) or batch axes after the r2c axis: the unfused sequence.
            return self.install(|| {
                monomorph_core::irfft_then_score(self, plan, spec, norm, work, window, rm)
            });
        }
        self.install(|| self.fused_score(plan, (spec, norm), Vec::new(), window, rm))
    }

    /// Two rotations. A group's product spectra (3 per rotation for FLC) are all held until
    /// its score pass; beyond two they overflow the last-level cache at the sizes users run,
    /// which costs more than the moment words a larger group saves (96³/24³ FLC
    /// `--score-stats`, the marginal cost of a rotation over the plain run's: 2 threads 1.080
    /// in groups of 2 against 1.104 in groups of 4, 1 thread 1.107 against 1.144). Groups of
    /// up to [`MAX_GROUP`] are still scored as asked.
    fn score_group_max(&self) -> usize {
        2
    }

    fn irfft_score_max_update_group<I: Index>(
        &self,
        plan: &CpuFftPlan,
        spec: &mut CorrSpectrum<Self>,
        norm: SpectralNorm<'_, Self>,
        mut rest: Vec<PairedPass<'_, Self, I>>,
        work: &mut [ArrayD<F<P>>],
        window: CorrWindow<'_>,
        mut rm: RunningMax<'_, Self, F<P>, I>,
    ) -> Result<()> {
        check_irfft_score_max_update(plan, spec, &norm, work, window, &rm)?;
        let fast = plan.real_shape();
        if fast.len() < 2 || !fft::consumable(plan) || rest.len() >= MAX_GROUP {
            // The unfused sequence, one rotation after the other.
            self.irfft_score_max_update(plan, spec, norm, work, window, rm.reborrow())?;
            for next in rest {
                let mut r = rm.reborrow();
                r.index = next.index;
                r.ssum = next.ssum;
                self.irfft_score_max_update(plan, next.spec, next.norm, work, window, r)?;
            }
            return Ok(());
        }
        for next in rest.iter_mut() {
            let r = RunningMax {
                best: &mut *rm.best,
                best_index: &mut *rm.best_index,
                index: next.index,
                ssum: &mut *next.ssum,
                moments: None,
            };
            check_irfft_score_max_update(plan, next.spec, &next.norm, work, window, &r)?;
        }
        self.install(|| self.fused_score(plan, (spec, norm), rest, window, rm))
    }

    fn combine_masked_correlations<T: Float>(
        &self,
        c_ft: &mut ArrayD<T>,
        c_fm: &ArrayD<T>,
        c_tt: &ArrayD<T>,
        c_f2m: &ArrayD<T>,
        c_tt2: &ArrayD<T>,
        c_tm: &ArrayD<T>,
        scale: T,
        eps: T,
        overlap_ratio: T,
    ) -> Result<()> {
        let rest = [c_fm, c_tt, c_f2m, c_tt2, c_tm];
        check_combine_masked_correlations(c_ft.shape(), rest.map(|a| a.shape()))?;
        self.install(|| {
            let rest = [
                data("c_fm", c_fm)?,
                data("c_tt", c_tt)?,
                data("c_f2m", c_f2m)?,
                data("c_tt2", c_tt2)?,
                data("c_tm", c_tm)?,
            ];
            host::combine_masked_correlations(
                data_mut("c_ft", c_ft)?,
                rest,
                scale,
                eps,
                overlap_ratio,
            );
            Ok(())
        })
    }
}
