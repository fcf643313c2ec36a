//! Sub-voxel refinement of called peaks.

use super::{Peak, ravel};
use crate::backend::{Arr, ArrayMeta, Filter, Memory};
use crate::dtype::Float;
use crate::error::{Error, Result, fmt_shape};

/// Sub-voxel positions of `peaks` by a parabola through each peak and its two neighbours along
/// every axis: offset `(f₋ − f₊) / (2 (f₋ − 2f₀ + f₊))`, clamped to `[−0.5, 0.5]`. The offset is
/// 0 on an axis where a neighbour is outside the map or NaN, or the three values are not a
/// maximum (curvature `>= 0`). Reads `2·d` values per peak ([`Filter::gather`](crate::backend::Filter::gather)).
///
/// Errors: a peak whose coordinate has the wrong number of axes or lies outside the map.
pub fn refine_parabolic<B: Memory + Filter, T: Float>(
    b: &B,
    scores: &Arr<B, T>,
    peaks: &[Peak],
) -> Result<Vec<Vec<f64>>> {
    let shape = scores.shape().to_vec();
    let ndim = shape.len();
    let mut idx = Vec::with_capacity(peaks.len() * (2 * ndim + 1));
    for p in peaks {
        if p.coord.len() != ndim || p.coord.iter().zip(&shape).any(|(&x, &s)| x >= s) {
            return Err(Error::invalid(
                "peaks",
                format!(
                    "coordinate {:?} is not inside the map {}",
                    p.coord,
                    fmt_shape(&shape)
                ),
            ));
        }
        let c0 = ravel(&p.coord, &shape);
        idx.push(c0);
        for a in 0..ndim {
            let mut c = p.coord.clone();
            c[a] = p.coord[a].saturating_sub(1);
            idx.push(ravel(&c, &shape));
            c[a] = (p.coord[a] + 1).min(shape[a] - 1);
            idx.push(ravel(&c, &shape));
        }
    }
    let vals = b.gather(scores, &idx)?;
    let stride = 2 * ndim + 1;
    Ok(peaks
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let v = &vals[k * stride..(k + 1) * stride];
            let f0: f64 = v[0].as_f64();
            (0..ndim)
                .map(|a| {
                    let x = p.coord[a] as f64;
                    if p.coord[a] == 0 || p.coord[a] + 1 >= shape[a] {
                        return x;
                    }
                    let (fm, fp): (f64, f64) = (v[1 + 2 * a].as_f64(), v[2 + 2 * a].as_f64());
                    let curv = fm - 2.0 * f0 + fp;
                    if curv.is_nan()
                        || curv >= 0.0
                        || !fm.is_finite()
                        || !fp.is_finite()
                        || !f0.is_finite()
                    {
                        return x;
                    }
                    x + (0.5 * (fm - fp) / curv).clamp(-0.5, 0.5)
                })
                .collect()
        })
        .collect())
}
