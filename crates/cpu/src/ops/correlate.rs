use monomorph_core::backend::host;
use monomorph_core::error::fmt_shape;
use monomorph_core::{
    CorrWindow, Correlate, Element, Error, Float, Index, Precision, Result, ScoreNorm,
    WindowExtension,
};
use ndarray::ArrayD;
use rayon::prelude::*;

use super::{data, data_mut};
use crate::Cpu;
use crate::util::{PAR_MIN, same_shape};

/// Axis-0 rows per parallel task for an output of `row_len` elements per row.
fn rows_per_task(nrows: usize, row_len: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    // Several tasks per thread for balance, but at least ~PAR_MIN/4 elements each.
    let by_size = (PAR_MIN / 4).div_ceil(row_len.max(1));
    nrows.div_ceil(threads * 4).max(by_size).max(1)
}

/// [`host::score_max_update`], compiled for the widest vector unit the CPU has (AVX-512F, else
/// AVX2+FMA, else AVX, else the baseline): the FLC normalisation (f64 variance, then square root
/// and division in `T`) and the max/argmax update then run 16 / 8 lanes wide. The arithmetic,
/// hence the result, is the same on every path (no contraction into FMA happens implicitly).
#[allow(clippy::too_many_arguments)]
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
) -> Result<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe {
                score_rows_avx512(corr, fast, norm, shift, out, rows, best, best_index, index)
            };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe {
                score_rows_avx2(corr, fast, norm, shift, out, rows, best, best_index, index)
            };
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above).
            return unsafe {
                score_rows_avx(corr, fast, norm, shift, out, rows, best, best_index, index)
            };
        }
    }
    host::score_max_update(corr, fast, norm, shift, out, rows, best, best_index, index)
}

/// Instantiates [`host::score_max_update`] (always inlined) under `#[target_feature]`.
macro_rules! score_rows_with {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        fn $name<T: Float, I: Index>(
            corr: &[T],
            fast: &[usize],
            norm: &host::Norm<'_, T>,
            shift: &[isize],
            out: &[usize],
            rows: std::ops::Range<usize>,
            best: &mut [T],
            best_index: &mut [I],
            index: I,
        ) -> Result<f64> {
            host::score_max_update(corr, fast, norm, shift, out, rows, best, best_index, index)
        }
    };
}
score_rows_with!(score_rows_avx512, "avx512f,avx2,fma");
score_rows_with!(score_rows_avx2, "avx2,fma");
score_rows_with!(score_rows_avx, "avx");

impl<P: Precision> Correlate for Cpu<P> {
    fn running_max<T: Float, I: Index>(
        &self,
        scores: &ArrayD<T>,
        best: &mut ArrayD<T>,
        best_index: &mut ArrayD<I>,
        index: I,
    ) -> Result<()> {
        same_shape("running_max: best vs scores", scores.shape(), best.shape())?;
        same_shape(
            "running_max: best_index vs scores",
            scores.shape(),
            best_index.shape(),
        )?;
        let s = data("scores", scores)?;
        let bi = data_mut("best_index", best_index)?;
        let b = data_mut("best", best)?;
        let body = |b: &mut [T], bi: &mut [I], s: &[T]| {
            for i in 0..s.len() {
                if s[i] > b[i] {
                    b[i] = s[i];
                    bi[i] = index;
                }
            }
        };
        if s.len() >= PAR_MIN {
            b.par_chunks_mut(PAR_MIN)
                .zip(bi.par_chunks_mut(PAR_MIN))
                .zip(s.par_chunks(PAR_MIN))
                .for_each(|((b, bi), s)| body(b, bi, s));
        } else {
            body(b, bi, s);
        }
        Ok(())
    }

    fn write_corner<T: Float>(&self, src: &ArrayD<T>, dst: &mut ArrayD<T>) -> Result<()> {
        let offset = vec![0usize; src.ndim()];
        self.insert_block(src, &offset, dst)
    }

    fn insert_block<T: Element>(
        &self,
        src: &ArrayD<T>,
        offset: &[usize],
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        let dshape = dst.shape().to_vec();
        host::insert_block(
            data("src", src)?,
            src.shape(),
            offset,
            data_mut("dst", dst)?,
            &dshape,
        )
    }

    fn gather_window<T: Float>(
        &self,
        src: &ArrayD<T>,
        start: &[isize],
        len: &[usize],
        ext: WindowExtension<'_>,
        dst: &mut ArrayD<T>,
    ) -> Result<()> {
        let dshape = dst.shape().to_vec();
        host::gather_window(
            data("src", src)?,
            src.shape(),
            start,
            len,
            ext,
            data_mut("dst", dst)?,
            &dshape,
        )
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
        same_shape("inverse_denominator: c2 vs c1", c1.shape(), c2.shape())?;
        let oshape = out.shape().to_vec();
        if oshape.is_empty() {
            return Err(Error::shape(
                "inverse_denominator out",
                "≥ 1 axis",
                fmt_shape(&oshape),
            ));
        }
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
    }

    fn score_max_update<T: Float, I: Index>(
        &self,
        corr: &ArrayD<T>,
        norm: ScoreNorm<'_, Self, T>,
        window: CorrWindow<'_>,
        best: &mut ArrayD<T>,
        best_index: &mut ArrayD<I>,
        index: I,
        ssum: &mut ArrayD<f64>,
    ) -> Result<()> {
        same_shape(
            "score_max_update: best_index vs best",
            best.shape(),
            best_index.shape(),
        )?;
        if ssum.len() != 1 {
            return Err(Error::shape("ssum", "(1,)", fmt_shape(ssum.shape())));
        }
        let oshape = best.shape().to_vec();
        if oshape.is_empty() {
            return Err(Error::shape("best", "≥ 1 axis", fmt_shape(&oshape)));
        }
        let hn = match norm {
            ScoreNorm::Scaled { scale } => host::Norm::Scaled(scale),
            ScoreNorm::Denominator { scale, inv_den } => {
                same_shape(
                    "score_max_update: inv_den vs best",
                    inv_den.shape(),
                    &oshape,
                )?;
                host::Norm::Denominator(scale, data("inv_den", inv_den)?)
            }
            ScoreNorm::LocalNorm {
                scale,
                c1,
                c2,
                n,
                eps,
            } => host::Norm::Local {
                scale,
                c1: data("c1", c1)?,
                c2: data("c2", c2)?,
                n,
                eps,
            },
        };
        let row_len: usize = oshape[1..].iter().product::<usize>().max(1);
        let per = rows_per_task(oshape[0], row_len);
        let (c, fast) = (data("corr", corr)?, corr.shape());
        let parts: Vec<f64> = data_mut("best", best)?
            .par_chunks_mut(per * row_len)
            .zip(data_mut("best_index", best_index)?.par_chunks_mut(per * row_len))
            .enumerate()
            .map(|(t, (b, bi))| {
                let r0 = t * per;
                let rows = r0..r0 + b.len() / row_len;
                score_rows(c, fast, &hn, window.shift, &oshape, rows, b, bi, index)
            })
            .collect::<Result<_>>()?;
        let s = data_mut("ssum", ssum)?;
        s[0] += parts.iter().sum::<f64>();
        Ok(())
    }

    fn mcc_combine<T: Float>(
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
        for (w, a) in [
            ("c_fm", c_fm),
            ("c_tt", c_tt),
            ("c_f2m", c_f2m),
            ("c_tt2", c_tt2),
            ("c_tm", c_tm),
        ] {
            same_shape(
                &format!("mcc_combine: {w} vs c_ft"),
                a.shape(),
                c_ft.shape(),
            )?;
        }
        let rest = [
            data("c_fm", c_fm)?,
            data("c_tt", c_tt)?,
            data("c_f2m", c_f2m)?,
            data("c_tt2", c_tt2)?,
            data("c_tm", c_tm)?,
        ];
        host::mcc_combine(data_mut("c_ft", c_ft)?, rest, scale, eps, overlap_ratio);
        Ok(())
    }
}
