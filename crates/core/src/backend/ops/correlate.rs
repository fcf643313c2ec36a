use crate::backend::{
    Arr, ArrayMeta, BackendTypes, ComplexOf, Elementwise, FloatOf, Memory, PadMode, Resample,
    Spectral,
};
use crate::dtype::{Element, Float, Index};
use crate::error::{Error, Result, fmt_shape};

/// How a fused score kernel turns a correlation into a score (see [`Correlate::score_max_update`]).
///
/// Correlation arrays (`corr`, `c1`, `c2`) are read through a [`CorrWindow`]; `inv_den` is
/// already in output coordinates.
pub enum ScoreNorm<'a, B: BackendTypes, T: Element> {
    /// `score = scale · c` (CC, LCC, NCC, MCC after [`Correlate::combine_masked_correlations`]).
    Scaled {
        /// Factor (e.g. the FFT's 1/Π fast, times 1/√size for NCC).
        scale: T,
    },
    /// `score = scale · c · inv_den[x]` (FLCSphericalMask, CAM: denominator made once).
    Denominator {
        /// Factor applied to `c`.
        scale: T,
        /// Output-shaped `1 / (s · N)`.
        inv_den: &'a Arr<B, T>,
    },
    /// FLC: `e1 = scale·c1/n`, `e2 = scale·c2/n`, `s = √max(e2 − e1², 0)` (1 where `s < eps`),
    /// `score = scale · c / (s · n)`.
    LocalNorm {
        /// Factor applied to `c`, `c1` and `c2`.
        scale: T,
        /// `C(f, m_R)` (unnormalised, same grid as `corr`).
        c1: &'a Arr<B, T>,
        /// `C(f², m_R)`.
        c2: &'a Arr<B, T>,
        /// `N = Σ m_R`.
        n: T,
        /// Threshold under which `s` is replaced by 1.
        eps: T,
    },
}

/// [`ScoreNorm`] for [`Correlate::irfft_score_max_update`]: the FLC mask correlations are
/// given as spectra, transformed inside the call.
pub enum SpectralNorm<'a, B: BackendTypes> {
    /// As [`ScoreNorm::Scaled`].
    Scaled {
        /// Factor.
        scale: FloatOf<B>,
    },
    /// As [`ScoreNorm::Denominator`].
    Denominator {
        /// Factor applied to `c`.
        scale: FloatOf<B>,
        /// Output-shaped `1 / (s · N)`.
        inv_den: &'a Arr<B, FloatOf<B>>,
    },
    /// As [`ScoreNorm::LocalNorm`], with `c1`, `c2` given by their half spectra (clobbered).
    LocalNorm {
        /// Factor applied to `c`, `c1` and `c2`.
        scale: FloatOf<B>,
        /// Spectrum of `C(f, m_R)`.
        c1: &'a mut Arr<B, ComplexOf<B>>,
        /// Spectrum of `C(f², m_R)`.
        c2: &'a mut Arr<B, ComplexOf<B>>,
        /// `N = Σ m_R`.
        n: FloatOf<B>,
        /// Threshold under which `s` is replaced by 1.
        eps: FloatOf<B>,
    },
}

impl<B: BackendTypes> SpectralNorm<'_, B> {
    /// Real FFT-grid buffers the default [`Correlate::irfft_score_max_update`] needs: one per
    /// spectrum.
    pub fn spectra(&self) -> usize {
        match self {
            SpectralNorm::LocalNorm { .. } => 3,
            _ => 1,
        }
    }
}

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
/// override them (the CPU backend calls the same [`host`] kernels in parallel in place).
pub trait Correlate: BackendTypes + Memory + Elementwise + Resample + Spectral {
    /// Copies `src` into the corner `[0, src.shape)` of `dst`. Elements of `dst` outside that
    /// box must already be zero and may be left untouched (a template placed in a zeroed FFT
    /// buffer every rotation). Default: [`Resample::pad`] with zeros (rewrites all of `dst`).
    fn write_corner<T: Float>(&self, src: &Arr<Self, T>, dst: &mut Arr<Self, T>) -> Result<()> {
        let before = vec![0usize; src.ndim()];
        self.pad(src, &before, PadMode::Zero, dst)
    }

    /// `dst[offset + j] = src[j]` for every `j` in `src` (a tile merged into a full map), the
    /// rest of `dst` unchanged. Default: *host*.
    fn insert_block<T: Element>(
        &self,
        src: &Arr<Self, T>,
        offset: &[usize],
        dst: &mut Arr<Self, T>,
    ) -> Result<()> {
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
    /// or a tile of it with its margin, placed in an FFT buffer). Default: *host*.
    fn gather_window<T: Float>(
        &self,
        src: &Arr<Self, T>,
        start: &[isize],
        len: &[usize],
        ext: WindowExtension<'_>,
        dst: &mut Arr<Self, T>,
    ) -> Result<()> {
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
    /// `c2` read through `window`. `out` has the output shape. Default: *host*.
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

    /// The matching inner loop's last pass, fused: reads the correlation `corr` (FFT grid)
    /// through `window`, normalises it by `norm`, and updates the running maximum (strict `>`,
    /// NaN never wins) and its index in `best`/`best_index` (output shape); adds Σ score² over
    /// the output to `ssum[0]` (shape `(1,)`, f64). Default: *host*.
    fn score_max_update<T: Float, I: Index>(
        &self,
        corr: &Arr<Self, T>,
        norm: ScoreNorm<'_, Self, T>,
        window: CorrWindow<'_>,
        best: &mut Arr<Self, T>,
        best_index: &mut Arr<Self, I>,
        index: I,
        ssum: &mut Arr<Self, f64>,
    ) -> Result<()> {
        let c = self.download(corr)?;
        let oshape = best.shape().to_vec();
        let (h1, h2, hd);
        let hn = match norm {
            ScoreNorm::Scaled { scale } => host::Norm::Scaled(scale),
            ScoreNorm::Denominator { scale, inv_den } => {
                hd = self.download(inv_den)?;
                host::Norm::Denominator(scale, slice(&hd)?)
            }
            ScoreNorm::LocalNorm {
                scale,
                c1,
                c2,
                n,
                eps,
            } => {
                h1 = self.download(c1)?;
                h2 = self.download(c2)?;
                host::Norm::Local {
                    scale,
                    c1: slice(&h1)?,
                    c2: slice(&h2)?,
                    n,
                    eps,
                }
            }
        };
        let mut b = self.download(best)?;
        let mut bi = self.download(best_index)?;
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
        )?;
        let mut ss = self.download(ssum)?;
        let ssv = slice_mut(&mut ss)?;
        if ssv.len() != 1 {
            return Err(Error::shape("ssum", "(1,)", fmt_shape(ssum.shape())));
        }
        ssv[0] += s;
        let (ub, ubi, us) = (
            self.upload(b.view())?,
            self.upload(bi.view())?,
            self.upload(ss.view())?,
        );
        self.copy(&ub, best)?;
        self.copy(&ubi, best_index)?;
        self.copy(&us, ssum)
    }

    /// The matching loop's forward transform and spectrum products in one call:
    /// `outs[q] = factors[q] · conj(rfft_pruned(input))` for an input zero outside `nonzero`
    /// (see [`Spectral::rfft_pruned`]), for [`Correlate::irfft_score_max_update`] with the same
    /// plan to consume.
    ///
    /// The products are written in the backend's *correlation layout*, which only
    /// [`Correlate::irfft_score_max_update`] reads: the default's is the plain half spectrum;
    /// the CPU backend's, for volumes larger than its L2 cache, is the products already
    /// inverse-transformed along the slowest axis (its forward transform's last pass runs the
    /// product and that axis' inverse on each line while it is in cache, so the products are
    /// never written and read back in between; bit-identical to the unfused sequence). Do not
    /// pass them to [`Spectral::irfft`] or inspect them. `spec` is scratch of the complex
    /// shape, unspecified afterwards. Default: [`Spectral::rfft_pruned`] into `spec`, then
    /// [`Elementwise::complex_mul_conj`].
    fn rfft_pruned_mul_conj(
        &self,
        plan: &Self::Fft,
        input: &Arr<Self, FloatOf<Self>>,
        nonzero: &[usize],
        spec: &mut Arr<Self, ComplexOf<Self>>,
        factors: &[&Arr<Self, ComplexOf<Self>>],
        outs: &mut [&mut Arr<Self, ComplexOf<Self>>],
    ) -> Result<()> {
        if factors.len() != outs.len() {
            return Err(Error::shape(
                "rfft_pruned_mul_conj outs",
                format!("{} arrays (one per factor)", factors.len()),
                outs.len(),
            ));
        }
        self.rfft_pruned(plan, input, nonzero, spec)?;
        for (f, o) in factors.iter().zip(outs.iter_mut()) {
            self.complex_mul_conj(f, spec, o)?;
        }
        Ok(())
    }

    /// The matching loop's inverse transforms and score pass in one call: `corr =
    /// irfft(spec)` (for [`SpectralNorm::LocalNorm`] also `c1`, `c2` from theirs), then
    /// [`Correlate::score_max_update`] with the same normalisation. The spectra are products
    /// in the correlation layout written by [`Correlate::rfft_pruned_mul_conj`] with the same
    /// plan, and are clobbered. `work` holds [`SpectralNorm::spectra`] real arrays of the
    /// plan's real shape for the correlations; a backend that fuses the last inverse pass with
    /// the score update (the CPU backend: each slab is scored while it is in cache, so the
    /// correlations are never written out) may leave them untouched. The result equals
    /// `rfft_pruned` → `complex_mul_conj` → `irfft` → `score_max_update` exactly, up to the
    /// summation order of `ssum`. Default: [`Spectral::irfft`] of each spectrum into `work`,
    /// then [`Correlate::score_max_update`].
    #[allow(clippy::too_many_arguments)]
    fn irfft_score_max_update<I: Index>(
        &self,
        plan: &Self::Fft,
        spec: &mut Arr<Self, ComplexOf<Self>>,
        norm: SpectralNorm<'_, Self>,
        work: &mut [Arr<Self, FloatOf<Self>>],
        window: CorrWindow<'_>,
        best: &mut Arr<Self, FloatOf<Self>>,
        best_index: &mut Arr<Self, I>,
        index: I,
        ssum: &mut Arr<Self, f64>,
    ) -> Result<()> {
        irfft_then_score(
            self, plan, spec, norm, work, window, best, best_index, index, ssum,
        )
    }

    /// pytme's MCC (Padfield masked NCC) on the whole FFT grid, written into `c_ft`. Inputs are
    /// unnormalised correlations (multiplied by `scale` here): `c_ft = C(f·T, t̂)`,
    /// `c_fm = C(f·T, m_R)`, `c_tt = C(T, t̂)`, `c_f2m = C((f·T)², m_R)`, `c_tt2 = C(T, t̂²)`,
    /// `c_tm = C(T, m_R)`. `ov = max(c_tm, eps)`; `num = c_ft − c_fm·c_tt/ov`;
    /// `den = √(max(c_f2m − c_fm²/ov, 0) · max(c_tt2 − c_tt²/ov, 0))`, 1 where
    /// `den < 1e3·eps·max(den)`; score `clip(num/den, −1, 1)`, 0 where
    /// `ov < overlap_ratio·max(ov)` (maxima over the whole grid). Default: *host*.
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
        let mut a = self.download(c_ft)?;
        let hs: Vec<_> = [c_fm, c_tt, c_f2m, c_tt2, c_tm]
            .iter()
            .map(|x| self.download(*x))
            .collect::<Result<_>>()?;
        for h in &hs {
            if h.shape() != a.shape() {
                return Err(Error::shape(
                    "combine_masked_correlations inputs",
                    fmt_shape(a.shape()),
                    fmt_shape(h.shape()),
                ));
            }
        }
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

/// The unfused [`Correlate::irfft_score_max_update`]: [`Spectral::irfft`] of each spectrum into
/// `work`, then [`Correlate::score_max_update`] (its default, and the fallback of a backend
/// that fuses only some geometries).
#[allow(clippy::too_many_arguments)]
pub fn irfft_then_score<B: Correlate, I: Index>(
    b: &B,
    plan: &B::Fft,
    spec: &mut Arr<B, ComplexOf<B>>,
    norm: SpectralNorm<'_, B>,
    work: &mut [Arr<B, FloatOf<B>>],
    window: CorrWindow<'_>,
    best: &mut Arr<B, FloatOf<B>>,
    best_index: &mut Arr<B, I>,
    index: I,
    ssum: &mut Arr<B, f64>,
) -> Result<()> {
    let need = norm.spectra();
    if work.len() < need {
        return Err(Error::shape(
            "irfft_score_max_update work buffers",
            format!("{need} arrays"),
            work.len(),
        ));
    }
    let (w0, rest) = work.split_at_mut(1);
    let corr = &mut w0[0];
    b.irfft(plan, spec, corr)?;
    let norm = match norm {
        SpectralNorm::Scaled { scale } => ScoreNorm::Scaled { scale },
        SpectralNorm::Denominator { scale, inv_den } => ScoreNorm::Denominator { scale, inv_den },
        SpectralNorm::LocalNorm {
            scale,
            c1,
            c2,
            n,
            eps,
        } => {
            let (r1, r2) = rest.split_at_mut(1);
            b.irfft(plan, c1, &mut r1[0])?;
            b.irfft(plan, c2, &mut r2[0])?;
            ScoreNorm::LocalNorm {
                scale,
                c1: &r1[0],
                c2: &r2[0],
                n,
                eps,
            }
        }
    };
    b.score_max_update(corr, norm, window, best, best_index, index, ssum)
}

fn slice<T>(a: &ndarray::ArrayD<T>) -> Result<&[T]> {
    a.as_slice()
        .ok_or_else(|| Error::invalid("array", "not in standard layout"))
}
fn slice_mut<T>(a: &mut ndarray::ArrayD<T>) -> Result<&mut [T]> {
    a.as_slice_mut()
        .ok_or_else(|| Error::invalid("array", "not in standard layout"))
}

/// Reference (host) implementations of the [`Correlate`] kernels over row-major slices.
///
/// Kernels that write an output-shaped array take a range of axis-0 indices (`rows`) and the
/// matching sub-slices of the outputs, so a backend can split the work across threads.
pub mod host {
    use std::ops::Range;

    use super::WindowExtension;
    use crate::dtype::{Element, Float, Index};
    use crate::error::{Error, Result, fmt_shape};
    use crate::shape::strides;

    #[inline(always)]
    fn f64_of<T: Float>(x: T) -> f64 {
        <T as crate::dtype::Real>::as_f64(x)
    }

    /// Normalisation of [`score_max_update`] (host form of [`super::ScoreNorm`]).
    pub enum Norm<'a, T> {
        /// `scale · c`.
        Scaled(T),
        /// `scale · c · inv_den[x]`, `inv_den` the whole output-shaped array.
        Denominator(T, &'a [T]),
        /// FLC local normalisation (see [`super::ScoreNorm::LocalNorm`]).
        Local {
            /// Factor.
            scale: T,
            /// `C(f, m_R)` on the FFT grid.
            c1: &'a [T],
            /// `C(f², m_R)` on the FFT grid.
            c2: &'a [T],
            /// `Σ m_R`.
            n: T,
            /// Threshold for `s`.
            eps: T,
        },
    }

    /// Per-axis source index maps `(x + shift) mod fast` for `x < out[k]`.
    pub fn index_maps(fast: &[usize], shift: &[isize], out: &[usize]) -> Result<Vec<Vec<usize>>> {
        if fast.len() != out.len() || shift.len() != out.len() {
            return Err(Error::shape(
                "correlation window",
                format!("{} axes", out.len()),
                format!("grid {} shift {:?}", fmt_shape(fast), shift),
            ));
        }
        Ok((0..out.len())
            .map(|k| {
                let f = fast[k] as isize;
                (0..out[k])
                    .map(|x| (x as isize + shift[k]).rem_euclid(f) as usize)
                    .collect()
            })
            .collect())
    }

    /// Flat source offsets of the lines (all axes but the last) of output rows `rows`, and the
    /// last-axis map.
    fn line_offsets(
        fast: &[usize],
        shift: &[isize],
        out: &[usize],
        rows: Range<usize>,
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let maps = index_maps(fast, shift, out)?;
        let st = strides(fast);
        let d = out.len();
        let mut offs = vec![0usize];
        for k in 0..d - 1 {
            let idx: Vec<usize> = if k == 0 {
                maps[0][rows.clone()].to_vec()
            } else {
                maps[k].clone()
            };
            let mut next = Vec::with_capacity(offs.len() * idx.len());
            for &o in &offs {
                for &i in &idx {
                    next.push(o + i * st[k]);
                }
            }
            offs = next;
        }
        let last = if d == 1 {
            maps[0][rows].to_vec()
        } else {
            maps[d - 1].clone()
        };
        Ok((offs, last))
    }

    /// Host kernel of [`super::Correlate::score_max_update`] for output rows `rows` (axis 0);
    /// `best`/`best_index` are the slices of those rows. Returns Σ score² over them.
    ///
    /// Always inlined so a backend can instantiate it inside a `#[target_feature]` wrapper
    /// (wider vectors for the f64 normalisation).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn score_max_update<T: Float, I: Index>(
        corr: &[T],
        fast: &[usize],
        norm: &Norm<'_, T>,
        shift: &[isize],
        out: &[usize],
        rows: Range<usize>,
        best: &mut [T],
        best_index: &mut [I],
        index: I,
    ) -> Result<f64> {
        let total: usize = fast.iter().product();
        if corr.len() != total {
            return Err(Error::shape(
                "correlation",
                fmt_shape(fast),
                format!("{} values", corr.len()),
            ));
        }
        let row_len: usize = out[1..].iter().product();
        let nrows = rows.len();
        if best.len() != nrows * row_len || best_index.len() != best.len() {
            return Err(Error::shape(
                "best",
                format!("{} values", nrows * row_len),
                best.len(),
            ));
        }
        match norm {
            Norm::Local { c1, c2, .. } if c1.len() != total || c2.len() != total => {
                return Err(Error::shape(
                    "FLC mask correlations",
                    fmt_shape(fast),
                    c1.len(),
                ));
            }
            Norm::Denominator(_, d) if d.len() != out.iter().product::<usize>() => {
                return Err(Error::shape("inverse denominator", fmt_shape(out), d.len()));
            }
            _ => {}
        }
        let first = rows.start * row_len;
        let (offs, last) = line_offsets(fast, shift, out, rows)?;
        let nl = last.len();
        let segs = line_runs(&last);
        // e = c·scale/n for all three FLC correlations; only the variance needs f64.
        let line_norm = |base: usize, o: usize| match *norm {
            Norm::Scaled(scale) => LineNorm::Scaled(scale),
            Norm::Denominator(scale, den) => LineNorm::Denominator(scale, &den[o..o + nl]),
            Norm::Local {
                scale,
                c1,
                c2,
                n,
                eps,
            } => {
                let k = f64_of(scale) / f64_of(n);
                LineNorm::Local {
                    k,
                    kt: T::from_f64(k),
                    eps,
                    c1: &c1[base..],
                    c2: &c2[base..],
                }
            }
        };
        let mut acc = [0.0f64; LANES];
        for (li, &base) in offs.iter().enumerate() {
            let o0 = li * nl;
            score_line(
                &corr[base..],
                &line_norm(base, first + o0),
                &segs,
                &mut best[o0..o0 + nl],
                &mut best_index[o0..o0 + nl],
                index,
                &mut acc,
            );
        }
        Ok(fold_lanes(&acc))
    }

    /// Partial sums of score² the score kernels keep (one 512-bit vector of `f64`): wide
    /// enough that the accumulation vectorises instead of adding lane by lane.
    pub const LANES: usize = 8;

    /// The partial sums of score² added pairwise (a fixed order).
    pub fn fold_lanes(acc: &[f64; LANES]) -> f64 {
        ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    }

    /// Normalisation of one line for [`score_line`]: [`Norm`] restricted to a line.
    pub enum LineNorm<'a, T> {
        /// `scale · c`.
        Scaled(T),
        /// `scale · c · den[j]`, `den` the output line (indexed like `best`).
        Denominator(T, &'a [T]),
        /// FLC with `k = scale / n` (and `kt`, the same in `T`); `c1`, `c2` are the FFT-grid
        /// lines (indexed like `corr`).
        Local {
            /// `scale / n` in f64.
            k: f64,
            /// `k` in `T`.
            kt: T,
            /// Threshold for `s`.
            eps: T,
            /// `C(f, m)` line.
            c1: &'a [T],
            /// `C(f², m)` line.
            c2: &'a [T],
        },
    }

    /// Scores one output line from one FFT-grid line and folds them into `best`/`best_index`
    /// (the output line) and the [`LANES`] partial sums `acc` of score². `segs` are the
    /// [`line_runs`] of the last-axis map: output `j0..j0 + len` reads `c[src0..src0 + len]`.
    ///
    /// Always inlined, like [`score_max_update`], for `#[target_feature]` wrappers.
    #[inline(always)]
    pub fn score_line<T: Float, I: Index>(
        c: &[T],
        norm: &LineNorm<'_, T>,
        segs: &[(usize, usize, usize)],
        best: &mut [T],
        best_index: &mut [I],
        index: I,
        acc: &mut [f64; LANES],
    ) {
        for &(j0, src0, len) in segs {
            let c = &c[src0..src0 + len];
            let b = &mut best[j0..j0 + len];
            let bi = &mut best_index[j0..j0 + len];
            match *norm {
                LineNorm::Scaled(scale) => {
                    update_run(b, bi, index, acc, |k, s| {
                        for (o, &v) in s.iter_mut().zip(&c[k..]) {
                            *o = v * scale;
                        }
                    });
                }
                LineNorm::Denominator(scale, den) => {
                    let dd = &den[j0..j0 + len];
                    update_run(b, bi, index, acc, |k, s| {
                        for ((o, &v), &d) in s.iter_mut().zip(&c[k..]).zip(&dd[k..]) {
                            *o = v * scale * d;
                        }
                    });
                }
                LineNorm::Local { k, kt, eps, c1, c2 } => {
                    let (a1, a2) = (&c1[src0..src0 + len], &c2[src0..src0 + len]);
                    update_run(b, bi, index, acc, |j, s| {
                        for (((o, &v), &u1), &u2) in
                            s.iter_mut().zip(&c[j..]).zip(&a1[j..]).zip(&a2[j..])
                        {
                            *o = local_score_mixed(v, u1, u2, k, kt, eps);
                        }
                    });
                }
            }
        }
    }

    /// Maximal runs `(j0, src0, len)` of consecutive source indices in a last-axis map, so the
    /// kernels read contiguous slices instead of gathering element by element.
    pub fn line_runs(last: &[usize]) -> Vec<(usize, usize, usize)> {
        let mut v: Vec<(usize, usize, usize)> = Vec::new();
        for (j, &i) in last.iter().enumerate() {
            match v.last_mut() {
                Some((_, s0, len)) if *s0 + *len == i => *len += 1,
                _ => v.push((j, i, 1)),
            }
        }
        v
    }

    /// Scores of one contiguous run, produced `CH` at a time by `fill(k, scores)` (offset `k`
    /// into the run), folded into `best`/`best_index` and into the [`LANES`] partial sums of `s²`.
    #[inline(always)]
    fn update_run<T: Float, I: Index>(
        best: &mut [T],
        best_index: &mut [I],
        index: I,
        acc: &mut [f64; LANES],
        mut fill: impl FnMut(usize, &mut [T]),
    ) {
        const CH: usize = 64;
        let mut buf = [T::from_f64(0.0); CH];
        let n = best.len();
        let mut k = 0;
        while k < n {
            let m = CH.min(n - k);
            let s = &mut buf[..m];
            fill(k, s);
            let mut ch = s.chunks_exact(LANES);
            for q in &mut ch {
                for l in 0..LANES {
                    acc[l] += f64_of(q[l] * q[l]);
                }
            }
            for &v in ch.remainder() {
                acc[0] += f64_of(v * v);
            }
            for ((b, bi), &v) in best[k..k + m]
                .iter_mut()
                .zip(&mut best_index[k..k + m])
                .zip(s.iter())
            {
                let up = v > *b;
                *b = if up { v } else { *b };
                *bi = if up { index } else { *bi };
            }
            k += m;
        }
    }

    /// `1 / (s · n)` of pytme's `norm_scores` from `C(f, m)`, `C(f², m)` (already scaled).
    #[inline(always)]
    pub fn inv_den(c1: f64, c2: f64, n: f64, eps: f64) -> f64 {
        let e1 = c1 / n;
        let e2 = c2 / n;
        let mut s = (e2 - e1 * e1).max(0.0).sqrt();
        if s < eps {
            s = 1.0;
        }
        1.0 / (s * n)
    }

    /// FLC score from the unscaled correlations `c = C(f, t̂)`, `u1 = C(f, m)`,
    /// `u2 = C(f², m)`, with `k = scale / n` (and `kt`, the same in `T`): the local variance
    /// `e2 − e1²` (`e = u·k`) is formed in f64, where its cancellation is harmless; the square
    /// root and the division run in `T`. For `f32` data that is the same result to a few f32
    /// ulps (the inputs are f32 FFT outputs anyway) at a fraction of the cost of f64
    /// division/square root, the throughput limit of this pass.
    #[inline(always)]
    pub fn local_score_mixed<T: Float>(c: T, u1: T, u2: T, k: f64, kt: T, eps: T) -> T {
        let e1 = f64_of(u1) * k;
        let var = f64_of(u2) * k - e1 * e1;
        let mut s = T::from_f64(var).max(T::zero()).sqrt();
        if s < eps {
            s = T::one();
        }
        c * kt / s
    }

    /// Host kernel of [`super::Correlate::inverse_denominator`] for output rows `rows`.
    pub fn inverse_denominator<T: Float>(
        c1: &[T],
        c2: &[T],
        fast: &[usize],
        shift: &[isize],
        scale: T,
        n: T,
        eps: T,
        out: &[usize],
        rows: Range<usize>,
        dst: &mut [T],
    ) -> Result<()> {
        let total: usize = fast.iter().product();
        if c1.len() != total || c2.len() != total {
            return Err(Error::shape("mask correlations", fmt_shape(fast), c1.len()));
        }
        let row_len: usize = out[1..].iter().product();
        if dst.len() != rows.len() * row_len {
            return Err(Error::shape("denominator", rows.len() * row_len, dst.len()));
        }
        let (offs, last) = line_offsets(fast, shift, out, rows)?;
        let (sc, nf, ep) = (f64_of(scale), f64_of(n), f64_of(eps));
        let nl = last.len();
        for (li, &base) in offs.iter().enumerate() {
            for j in 0..nl {
                let q = base + last[j];
                dst[li * nl + j] =
                    T::from_f64(inv_den(f64_of(c1[q]) * sc, f64_of(c2[q]) * sc, nf, ep));
            }
        }
        Ok(())
    }

    /// Host kernel of [`super::Correlate::gather_window`].
    pub fn gather_window<T: Float>(
        src: &[T],
        sshape: &[usize],
        start: &[isize],
        len: &[usize],
        ext: WindowExtension<'_>,
        dst: &mut [T],
        dshape: &[usize],
    ) -> Result<()> {
        let d = sshape.len();
        if dshape.len() != d || start.len() != d || len.len() != d {
            return Err(Error::shape(
                "gather_window",
                format!("{d} axes"),
                fmt_shape(dshape),
            ));
        }
        if let WindowExtension::Periodic(p) = ext
            && (p.len() != d || p.iter().zip(sshape).any(|(p, s)| p < s))
        {
            return Err(Error::shape(
                "gather_window period",
                format!("≥ {}", fmt_shape(sshape)),
                fmt_shape(p),
            ));
        }
        // Per-axis source index (None = zero) for every destination index.
        let maps: Vec<Vec<Option<usize>>> = (0..d)
            .map(|k| {
                (0..dshape[k])
                    .map(|j| {
                        if j >= len[k] {
                            return None;
                        }
                        let p = start[k] + j as isize;
                        let s = sshape[k] as isize;
                        match ext {
                            WindowExtension::Periodic(per) => {
                                let q = p.rem_euclid(per[k] as isize);
                                (q < s).then_some(q as usize)
                            }
                            WindowExtension::Symmetric => {
                                let q = p.rem_euclid(2 * s);
                                Some(if q >= s {
                                    (2 * s - 1 - q) as usize
                                } else {
                                    q as usize
                                })
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        let sst = strides(sshape);
        let dst_st = strides(dshape);
        let total: usize = dshape.iter().product();
        if dst.len() != total || src.len() != sshape.iter().product::<usize>() {
            return Err(Error::shape(
                "gather_window buffers",
                fmt_shape(dshape),
                dst.len(),
            ));
        }
        let mut idx = vec![0usize; d];
        for (flat, v) in dst.iter_mut().enumerate() {
            let mut rem = flat;
            for k in 0..d {
                idx[k] = rem / dst_st[k];
                rem %= dst_st[k];
            }
            let mut off = 0usize;
            let mut zero = false;
            for k in 0..d {
                match maps[k][idx[k]] {
                    Some(i) => off += i * sst[k],
                    None => {
                        zero = true;
                        break;
                    }
                }
            }
            *v = if zero { T::zero() } else { src[off] };
        }
        Ok(())
    }

    /// Host kernel of [`super::Correlate::insert_block`].
    pub fn insert_block<T: Element>(
        src: &[T],
        sshape: &[usize],
        offset: &[usize],
        dst: &mut [T],
        dshape: &[usize],
    ) -> Result<()> {
        let d = sshape.len();
        if dshape.len() != d
            || offset.len() != d
            || (0..d).any(|k| offset[k] + sshape[k] > dshape[k])
        {
            return Err(Error::shape(
                "insert_block",
                format!("a block inside {}", fmt_shape(dshape)),
                format!("{} at {:?}", fmt_shape(sshape), offset),
            ));
        }
        let (sst, dstr) = (strides(sshape), strides(dshape));
        let nl = sshape[d - 1];
        let lines = src.len() / nl.max(1);
        for l in 0..lines {
            let mut rem = l * nl;
            let mut off = offset[d - 1];
            for k in 0..d - 1 {
                let i = rem / sst[k];
                rem %= sst[k];
                off += (i + offset[k]) * dstr[k];
            }
            dst[off..off + nl].copy_from_slice(&src[l * nl..(l + 1) * nl]);
        }
        Ok(())
    }

    /// Host kernel of [`super::Correlate::combine_masked_correlations`]: `c_ft` is overwritten by the scores;
    /// `rest = [c_fm, c_tt, c_f2m, c_tt2, c_tm]`.
    pub fn combine_masked_correlations<T: Float>(
        c_ft: &mut [T],
        rest: [&[T]; 5],
        scale: T,
        eps: T,
        overlap_ratio: T,
    ) {
        let [c_fm, c_tt, c_f2m, c_tt2, c_tm] = rest;
        let (sc, ep) = (f64_of(scale), f64_of(eps));
        let n = c_ft.len();
        let mut den = vec![0.0f64; n];
        let mut max_den = 0.0f64;
        let mut max_ov = f64::NEG_INFINITY;
        for i in 0..n {
            let ov = (f64_of(c_tm[i]) * sc).max(ep);
            let fm = f64_of(c_fm[i]) * sc;
            let tt = f64_of(c_tt[i]) * sc;
            let fix = (f64_of(c_f2m[i]) * sc - fm * fm / ov).max(0.0);
            let mov = (f64_of(c_tt2[i]) * sc - tt * tt / ov).max(0.0);
            den[i] = (fix * mov).sqrt();
            max_den = max_den.max(den[i]);
            max_ov = max_ov.max(ov);
        }
        for i in 0..n {
            let ov = (f64_of(c_tm[i]) * sc).max(ep);
            if ov < f64_of(overlap_ratio) * max_ov {
                c_ft[i] = T::zero();
                continue;
            }
            let fm = f64_of(c_fm[i]) * sc;
            let tt = f64_of(c_tt[i]) * sc;
            let num = f64_of(c_ft[i]) * sc - fm * tt / ov;
            let mut d = den[i];
            if d < 1e3 * ep * max_den {
                d = 1.0;
            }
            c_ft[i] = T::from_f64((num / d).clamp(-1.0, 1.0));
        }
    }
}
