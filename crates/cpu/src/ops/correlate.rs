use monomorph_core::{Correlate, Float, Index, Precision, Result};
use ndarray::ArrayD;
use rayon::prelude::*;

use super::{data, data_mut};
use crate::Cpu;
use crate::util::{PAR_MIN, same_shape};

impl<P: Precision> Correlate for Cpu<P> {
    fn running_max<T: Float, I: Index>(
        &self,
        scores: &ArrayD<T>,
        best: &mut ArrayD<T>,
        best_index: &mut ArrayD<I>,
        index: I,
    ) -> Result<()> {
        same_shape("running_max: best vs scores", scores.shape(), best.shape())?;
        same_shape("running_max: best_index vs scores", scores.shape(), best_index.shape())?;
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
}
