//! Per-voxel statistics of the score over the rotations ([`MatchParams::score_stats`]): mean,
//! population standard deviation, and the z-score of the best score, as Leopard-EM and cisTEM
//! report them.
//!
//! # Accumulation (exact, order-free)
//! The rotation loop's score pass adds every score `s` of a voxel to two 128-bit integers
//! ([`Moments`](crate::backend::Moments)): `Σ round(s · 2^k₁)` and `Σ round(s² · 2^k₂)`, each
//! term rounded on its own (half to even) before an integer addition. Integer addition is
//! associative, so the sums of any partition of the rotations (MPI ranks, the ranges of a
//! split list item) add up to the same bits as one loop, and the statistics written are
//! byte-identical to one process whatever the split. Between passes a backend may hold the
//! sums in a working form of its own (the CPU's: `H·2⁶² + P` with the small terms added to the
//! 64-bit `P` words only, [`host::moments_open`](crate::backend::host::moments_open)),
//! canonical again after the loop: the same integers. Floating-point accumulators (f64, or
//! compensated) give a different last bit when the same terms are added in another grouping,
//! which after rounding to f32 changes a few voxels per million.
//!
//! The scales `2^k` are powers of two chosen once per run from a bound `B` on `|s|` that does
//! not depend on tiles or ranks ([`moment_scales`]): `k₁ = 62 − ⌈log₂ 16B⌉`,
//! `k₂ = 62 − 2⌈log₂ 16B⌉`, so every term fits 63 bits and 2²⁴ rotations fit 87. `B` is 64
//! for the normalised scores (FLC, FLCSphericalMask, CAM: Pearson coefficients, |s| ≤ 1; MCC:
//! clipped), i.e. `16 B = 2¹⁰`, room for round-off and odd masks; for CC and LCC the Cauchy–Schwarz bound
//! `‖f‖₂ · √n · max|t| · max|H|` (target energy, template box, spline coefficients, template
//! filter gain); for NCC `‖f_s‖₂ = √(voxels)`. Each term is resolved to `2^−k₁ ≈ 2^−62 · 16B`
//! (the sum) and `2^−k₂` (the squares): far below f32's resolution of a typical score for the
//! normalised scores (the squares' grid is 2^−42 for them: std to ~1e-12 absolute, finer than
//! f32's round-off, coarser than f64's), and about 2^−20 relative to the variance for CC on a
//! typical tomogram. A
//! term beyond `2⁶²` (impossible by the bound, or a NaN) adds a flag instead, and
//! [`statistics`] refuses such a map rather than return a wrong number.
//!
//! # Memory
//! 32 bytes per voxel of the target (four 64-bit words), plus 32 per voxel of a tile's output
//! box while the tile runs ([`moment_bytes`], counted by the memory estimate).
//!
//! # Finishing
//! `mean = Σ₁ / (N 2^k₁)`, `var = max(Σ₂ / (N 2^k₂) − mean², 0)` in f64 (N rotations), set to 0
//! when it is within the resolution of its terms (every rotation gave the same score up to
//! rounding), `std = √var`, and `z = (best − mean) / std`, defined as **0 where std = 0** (a
//! single rotation, or a voxel whose score does not change with the rotation); never NaN or
//! infinite. Written in the scores' float type.

pub use crate::backend::host::voxel_statistics;
use crate::backend::{Arr, ArrayMeta, Backend, FloatOf};
use crate::dtype::Real;
use crate::error::{Error, Result};

use super::prepare::Prepared;
use super::{MatchParams, Score};

type F<B> = FloatOf<B>;

/// Bytes of the moment accumulators of a box of `voxels` voxels (32 per voxel).
pub(super) fn moment_bytes(voxels: u64) -> u64 {
    voxels * 32
}

/// Most rotations the 128-bit sums hold without overflow (2²⁴).
pub const MAX_ROTATIONS: usize = 1 << 24;

/// The raw per-voxel moments of a run (or of a part of its rotations), on the device.
pub struct ScoreMoments<B: Backend> {
    /// Shape `target + [4]`: `[Σq₁ low, Σq₁ high, Σq₂ low, Σq₂ high]` per voxel
    /// ([`Moments`](crate::backend::Moments)).
    pub acc: Arr<B, i64>,
    /// The scales `[2^k₁, 2^k₂]` of the terms ([`moment_scales`]).
    pub scale: [f64; 2],
}

/// The statistics of the scores over the rotations, target-shaped, in the scores' type.
pub struct ScoreStatistics<B: Backend> {
    /// Mean score over the rotations.
    pub mean: Arr<B, F<B>>,
    /// Population standard deviation of the score over the rotations.
    pub std: Arr<B, F<B>>,
    /// `(best − mean) / std`, 0 where `std = 0`.
    pub z: Arr<B, F<B>>,
}

/// `2^e` for an integer exponent (exact).
fn pow2(e: i32) -> f64 {
    2f64.powi(e)
}

/// The scales `[2^k₁, 2^k₂]` of a run (see the module docs): the same for every tile, rank and
/// rotation range, as they depend on the prepared inputs only.
pub(super) fn moment_scales<B: Backend>(
    b: &B,
    prep: &Prepared<B>,
    p: &MatchParams<'_, B>,
    tshape: &[usize],
) -> Result<[f64; 2]> {
    let d = tshape.len() as i32;
    // Each target voxel appears at most 2^d times in a symmetric window (1 time circularly).
    let window_energy = |sum_sq: f64| (pow2(d) * sum_sq).sqrt();
    let n: f64 = tshape.iter().map(|&v| v as f64).product();
    let bound = match p.score {
        Score::FLC | Score::FLCSphericalMask | Score::CAM | Score::MCC => 64.0,
        Score::NCC => {
            let voxels: f64 = prep.target.shape().iter().map(|&v| v as f64).product();
            window_energy(voxels)
        }
        Score::CC | Score::LCC => {
            let gain = prep.template_filter.as_ref().map_or(1.0, |f| f.gain());
            let t = match &p.prerotated {
                Some(pr) => {
                    let mut m = 0.0f64;
                    for t in pr.templates {
                        m = m.max(b.sum_sq(t)?.as_f64().sqrt());
                    }
                    m
                }
                None => {
                    let hi = b.max(&prep.side().template_src)?.as_f64();
                    let lo = b.min(&prep.side().template_src)?.as_f64();
                    n.sqrt() * hi.abs().max(lo.abs())
                }
            };
            window_energy(b.sum_sq(&prep.target)?.as_f64()) * t * gain
        }
    };
    let bound = if bound.is_finite() && bound > 0.0 {
        16.0 * bound
    } else if bound == 0.0 {
        1.0
    } else {
        return Err(Error::invalid(
            "score_stats",
            format!("the score bound of the statistics is {bound}"),
        ));
    };
    let e = bound.log2().ceil() as i32;
    Ok([pow2(62 - e), pow2(62 - 2 * e)])
}

/// Refuses rotation counts the 128-bit sums cannot hold.
pub(super) fn check_rotations(nrot: usize) -> Result<()> {
    if nrot > MAX_ROTATIONS {
        return Err(Error::invalid(
            "score_stats",
            format!("at most {MAX_ROTATIONS} rotations (got {nrot})"),
        ));
    }
    Ok(())
}

/// The statistics of `moments` over `nrot` rotations, with the best scores `best` (the target's
/// shape; after a background correction by `shift`, which moves the mean too), computed by the backend
/// ([`Correlate::moment_statistics`](crate::backend::Correlate::moment_statistics), once per run). Fails (an error naming the voxel)
/// where a score was out of the range the sums were sized for, or NaN.
pub fn statistics<B: Backend>(
    b: &B,
    moments: &ScoreMoments<B>,
    best: &Arr<B, F<B>>,
    shift: Option<&Arr<B, F<B>>>,
    nrot: usize,
) -> Result<ScoreStatistics<B>> {
    let shape = best.shape().to_vec();
    let mut want = shape.clone();
    want.push(4);
    if moments.acc.shape() != want.as_slice() {
        return Err(Error::shape(
            "score moments",
            format!("{want:?}"),
            format!("{:?}", moments.acc.shape()),
        ));
    }
    if nrot == 0 {
        return Err(Error::invalid("score_stats", "no rotations"));
    }
    if shift.is_some_and(|s| s.shape() != shape.as_slice()) {
        return Err(Error::invalid(
            "background shift",
            "not shaped like the scores",
        ));
    }
    let [mean, std, z] = b.moment_statistics(&moments.acc, moments.scale, best, shift, nrot)?;
    Ok(ScoreStatistics { mean, std, z })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::{moments_add, moments_merge};

    #[test]
    fn sums_are_exact_in_any_grouping_and_flag_out_of_range() {
        let scale = [pow2(52), pow2(42)];
        let xs: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 1000) as f64 / 777.0 - 0.6)
            .collect();
        let mut all = [0i64; 4];
        for &x in &xs {
            moments_add(&mut all, x, scale);
        }
        for cut in [1, 333, 999] {
            let (mut a, mut c) = ([0i64; 4], [0i64; 4]);
            xs[..cut]
                .iter()
                .for_each(|&x| moments_add(&mut a, x, scale));
            xs[cut..]
                .iter()
                .for_each(|&x| moments_add(&mut c, x, scale));
            moments_merge(&mut c, &a);
            assert_eq!(c, all, "cut {cut}");
        }
        let [m, s, z] = voxel_statistics(&all, 1.0, xs.len(), scale).unwrap();
        let mean = xs.iter().sum::<f64>() / 1000.0;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 1000.0;
        assert!(
            (m - mean).abs() < 1e-12 && (s - var.sqrt()).abs() < 1e-9,
            "{m} {s}"
        );
        assert!((z - (1.0 - mean) / var.sqrt()).abs() < 1e-8);
        // Equal scores: std 0, z 0 (never NaN).
        let mut c = [0i64; 4];
        (0..10).for_each(|_| moments_add(&mut c, 0.3, scale));
        assert_eq!(
            voxel_statistics(&c, 0.3, 10, scale).unwrap()[1..],
            [0.0, 0.0]
        );
        // NaN and out-of-range terms are flagged, not summed.
        moments_add(&mut c, f64::NAN, scale);
        assert!(voxel_statistics(&c, 0.3, 11, scale).is_none());
        let mut c = [0i64; 4];
        moments_add(&mut c, 1e6, scale);
        moments_add(&mut c, -1e6, scale);
        assert!(voxel_statistics(&c, 0.3, 2, scale).is_none());
    }
}
