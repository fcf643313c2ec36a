//! Rotations in a cone around seed orientations (pytme's `get_cone_rotations`).
//!
//! The cone set for a half-angle `θ`, a cone step `s` and an in-plane step `a` is pytme 0.3.6's
//! `get_cone_rotations(cone_angle=θ, cone_sampling=s, axis_sampling=a, reference=z)`, in the
//! same order: for each of `k = ⌈2π(1 − cos θ)/s²⌉` directions `x_i` of a Fibonacci spherical
//! cap about z (pytme's `_sample_cone`, radians), and for each of `m = max(round(360/a), 1)`
//! angles `φ_j = −180 + j·360/m`, the rotation `Rz(φ_j)·A_i` (A_i the shortest rotation taking
//! z to x_i); `θ = 0` gives the `m` rotations `Rz(φ_j)` alone. The matrices are pytme's in its
//! `(x, y, z)` frame, stored as `P·M·P` like every set (rotations.rs, "Frames").
//!
//! What a member means (pull-back, `t_R[o] = t[R·(o − c) + c]`): the template's own z axis
//! appears in the target along `Rᵀ·z`, and `Rz(φ)` on the left spins the template about its own
//! z axis first. `∠(Rᵀz, z) = ∠(x_i, z) ≤ θ`.
//!
//! Around a seed `S` (a particle's orientation, RELION angles, in monomorph's frame) the set is
//! `S` itself, then `C·S` for every cone member `C` in order: `∠((C·S)ᵀz, Sᵀz) = ∠(Cᵀz, z) ≤ θ`,
//! which is exactly pytme's acceptance test for a seed (`MaxScoreOverRotationsConstrained`: the
//! template's z axis under the candidate and under the seed within the cone angle), and the
//! spin stays about the particle's own axis.

use super::{RotationSet, reverse_axes};
use crate::error::{Error, Result};

/// Most rotations a cone search may produce (as [`RotationSet::uniform`]).
const MAX_ROTATIONS: f64 = 5e7;

fn matmul(a: &[f64], b: &[f64]) -> [f64; 9] {
    let mut o = [0.0; 9];
    for i in 0..3 {
        for j in 0..3 {
            o[i * 3 + j] = (0..3).map(|k| a[i * 3 + k] * b[k * 3 + j]).sum();
        }
    }
    o
}

/// The shortest rotation taking `(0, 0, 1)` to the unit vector `v` (pytme's `align_vectors`:
/// quaternion `w = √((1 + cos)/2)`, axis part `(z × v)/(2w)`), in `(x, y, z)`.
fn align_z_to(v: [f64; 3]) -> [f64; 9] {
    let c = v[2];
    if c > 1.0 - 1e-8 {
        return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    }
    if c < -1.0 + 1e-8 {
        // pytme: half turn about z × x = (0, 1, 0).
        return [-1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1.0];
    }
    let w = ((1.0 + c) / 2.0).sqrt();
    let (x, y, z) = (-v[1] / (2.0 * w), v[0] / (2.0 * w), 0.0);
    let n = (w * w + x * x + y * y + z * z).sqrt();
    let (w, x, y, z) = (w / n, x / n, y / n, z / n);
    [
        1.0 - 2.0 * (y * y + z * z),
        2.0 * (x * y - z * w),
        2.0 * (x * z + y * w),
        2.0 * (x * y + z * w),
        1.0 - 2.0 * (x * x + z * z),
        2.0 * (y * z - x * w),
        2.0 * (x * z - y * w),
        2.0 * (y * z + x * w),
        1.0 - 2.0 * (x * x + y * y),
    ]
}

fn rz(deg: f64) -> [f64; 9] {
    let (s, c) = deg.to_radians().sin_cos();
    [c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0]
}

fn check_angle(what: &str, v: f64, lo_open: bool) -> Result<()> {
    let ok = v.is_finite() && if lo_open { v > 0.0 } else { v >= 0.0 };
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            what,
            format!(
                "must be a {} number of degrees, got {v}",
                if lo_open { "positive" } else { "non-negative" }
            ),
        ))
    }
}

impl RotationSet {
    /// pytme's cone set around z (module docs): half-angle `cone_deg` in `[0, 180]`, cone step
    /// `cone_step_deg` and in-plane step `inplane_step_deg` (both > 0), in pytme's order.
    pub fn cone(cone_deg: f64, cone_step_deg: f64, inplane_step_deg: f64) -> Result<Self> {
        Self::cone_spun(cone_deg, cone_step_deg, inplane_step_deg, 180.0)
    }

    /// [`RotationSet::cone`] with the in-plane spins limited to `|φ_j| ≤ inplane_range_deg`
    /// (in `(0, 180]`; 180 keeps every spin, the cone itself): the members of the cone whose
    /// spin about the template's own z axis is within the range of none, in the cone's order.
    /// The spins stay pytme's grid `−180 + j·360/m`; a range smaller than half its spacing
    /// about 0 may leave none (an error: an empty set).
    pub fn cone_spun(
        cone_deg: f64,
        cone_step_deg: f64,
        inplane_step_deg: f64,
        inplane_range_deg: f64,
    ) -> Result<Self> {
        if !(inplane_range_deg.is_finite() && inplane_range_deg > 0.0 && inplane_range_deg <= 180.0)
        {
            return Err(Error::invalid(
                "in-plane range",
                format!("must be in (0, 180] degrees, got {inplane_range_deg}"),
            ));
        }
        check_angle("cone angle", cone_deg, false)?;
        if cone_deg > 180.0 {
            return Err(Error::invalid(
                "cone angle",
                format!("must be at most 180 degrees, got {cone_deg}"),
            ));
        }
        check_angle("cone step", cone_step_deg, true)?;
        check_angle("in-plane step", inplane_step_deg, true)?;
        // numpy rounds half to even.
        let m = (360.0 / inplane_step_deg).round_ties_even().max(1.0);
        let theta = cone_deg.to_radians();
        let k = if cone_deg <= 0.0 {
            1.0
        } else {
            let cap = 2.0 * std::f64::consts::PI * (1.0 - theta.cos());
            (cap / cone_step_deg.to_radians().powi(2)).ceil().max(1.0)
        };
        if k * m > MAX_ROTATIONS {
            return Err(Error::invalid(
                "cone",
                format!(
                    "{k} directions × {m} in-plane angles is more than {MAX_ROTATIONS:e} rotations"
                ),
            ));
        }
        let (k, m) = (k as usize, m as usize);
        let spins: Vec<[f64; 9]> = (0..m)
            .map(|j| -180.0 + j as f64 * (360.0 / m as f64))
            .filter(|phi| phi.abs() <= inplane_range_deg + 1e-9)
            .map(rz)
            .collect();
        let mut mats = Vec::with_capacity(k * spins.len() * 9);
        if cone_deg <= 0.0 {
            for s in &spins {
                mats.extend(reverse_axes(s, 3));
            }
            return Self::from_matrices(3, &mats);
        }
        let golden = std::f64::consts::PI * (1.0 + 5f64.sqrt());
        for i in 0..k {
            let idx = i as f64 + 0.5;
            let phi = (1.0 - (1.0 - theta.cos()) * idx / k as f64).acos();
            let t = golden * idx;
            let v = [t.cos() * phi.sin(), t.sin() * phi.sin(), phi.cos()];
            let a = align_z_to(v);
            for s in &spins {
                mats.extend(reverse_axes(&matmul(s, &a), 3));
            }
        }
        Self::from_matrices(3, &mats)
    }

    /// The rotations within `cone_deg` of each seed (module docs): for every seed in order (an
    /// exact repeat of an earlier seed is skipped), the seed itself, then `C·S` for every member
    /// `C` of [`RotationSet::cone`]. `seeds` is a 3-D set in monomorph's frame (e.g. from
    /// RELION angles, [`RotationSet::from_relion_euler`]).
    pub fn around_seeds(
        seeds: &RotationSet,
        cone_deg: f64,
        cone_step_deg: f64,
        inplane_step_deg: f64,
    ) -> Result<Self> {
        Self::around_seeds_spun(seeds, cone_deg, cone_step_deg, inplane_step_deg, 180.0)
    }

    /// [`RotationSet::around_seeds`] with the cone's in-plane spins limited to
    /// `±inplane_range_deg` ([`RotationSet::cone_spun`]; 180: every spin).
    pub fn around_seeds_spun(
        seeds: &RotationSet,
        cone_deg: f64,
        cone_step_deg: f64,
        inplane_step_deg: f64,
        inplane_range_deg: f64,
    ) -> Result<Self> {
        if seeds.dim() != 3 {
            return Err(Error::invalid("seeds", "cone searches need 3-D rotations"));
        }
        let cone = Self::cone_spun(cone_deg, cone_step_deg, inplane_step_deg, inplane_range_deg);
        // A spin range narrower than the grid's spacing about 0: the seeds alone.
        let cone = match cone {
            Ok(c) => c.mats,
            Err(Error::Shape { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        let cone_len = cone.len() / 9;
        let mut uniq: Vec<&[f64]> = Vec::new();
        for i in 0..seeds.len() {
            let s = seeds.matrix(i);
            if !uniq.contains(&s) {
                uniq.push(s);
            }
        }
        let total = uniq.len() as f64 * (cone_len as f64 + 1.0);
        if total > MAX_ROTATIONS {
            return Err(Error::invalid(
                "cone",
                format!(
                    "{} seeds × {} rotations is more than {MAX_ROTATIONS:e} rotations",
                    uniq.len(),
                    cone_len + 1
                ),
            ));
        }
        let mut mats = Vec::with_capacity(total as usize * 9);
        for s in uniq {
            mats.extend_from_slice(s);
            for c in cone.chunks(9) {
                mats.extend(matmul(c, s));
            }
        }
        Self::from_matrices(3, &mats)
    }
}

impl RotationSet {
    /// One rotation set per seed, concatenated seed by seed, for a seeded search (local
    /// refinement, each seed searching its own set): for every seed in order (repeats kept:
    /// each seed is a particle), the seed itself, then `C·S` for every member `C` of
    /// [`RotationSet::cone_spun`] (the cone of `cone_deg`, its in-plane spins limited to
    /// `±inplane_range_deg` about the seed's own). Returns the set and each seed's range in it.
    pub fn around_each_seed(
        seeds: &RotationSet,
        cone_deg: f64,
        cone_step_deg: f64,
        inplane_step_deg: f64,
        inplane_range_deg: f64,
    ) -> Result<(Self, Vec<std::ops::Range<usize>>)> {
        if seeds.dim() != 3 {
            return Err(Error::invalid("seeds", "cone searches need 3-D rotations"));
        }
        let cone = Self::cone_spun(cone_deg, cone_step_deg, inplane_step_deg, inplane_range_deg);
        // A spin range narrower than the grid's spacing about 0: the seeds alone.
        let cone = match cone {
            Ok(c) => Some(c),
            Err(Error::Shape { .. }) => None,
            Err(e) => return Err(e),
        };
        let per = 1 + cone.as_ref().map_or(0, |c| c.len());
        let total = seeds.len() as f64 * per as f64;
        if total > MAX_ROTATIONS {
            return Err(Error::invalid(
                "cone",
                format!(
                    "{} seeds × {per} rotations is more than {MAX_ROTATIONS:e} rotations",
                    seeds.len()
                ),
            ));
        }
        let mut mats = Vec::with_capacity(total as usize * 9);
        let mut ranges = Vec::with_capacity(seeds.len());
        for i in 0..seeds.len() {
            let s = seeds.matrix(i);
            ranges.push(i * per..(i + 1) * per);
            mats.extend_from_slice(s);
            if let Some(cone) = &cone {
                for c in 0..cone.len() {
                    mats.extend(matmul(cone.matrix(c), s));
                }
            }
        }
        Ok((Self::from_matrices(3, &mats)?, ranges))
    }
}

/// The angle in degrees between the template's z axis placed by `a` and by `b` (3-D matrices
/// in monomorph's frame): `∠(aᵀz, bᵀz)`, z being array axis 0. pytme's cone test.
pub fn axis_angle_between(a: &[f64], b: &[f64]) -> f64 {
    // aᵀz is a's first row.
    let dot: f64 = (0..3).map(|k| a[k] * b[k]).sum();
    dot.clamp(-1.0, 1.0).acos().to_degrees()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cone_counts_and_angles() {
        // k = ceil(2π(1 − cos 30°)/(10°)²) = ceil(0.8418/0.030462) = 28; m = 36.
        let c = RotationSet::cone(30.0, 10.0, 10.0).unwrap();
        assert_eq!(c.len(), 28 * 36);
        let id = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        for i in 0..c.len() {
            assert!(axis_angle_between(c.matrix(i), &id) <= 30.0 + 1e-9);
        }
        assert_eq!(RotationSet::cone(0.0, 10.0, 90.0).unwrap().len(), 4);
        assert!(RotationSet::cone(-1.0, 10.0, 10.0).is_err());
        assert!(RotationSet::cone(181.0, 10.0, 10.0).is_err());
        assert!(RotationSet::cone(10.0, 0.0, 10.0).is_err());
        assert!(RotationSet::cone(10.0, 10.0, f64::NAN).is_err());
    }

    #[test]
    fn seeds_come_first_and_cones_surround_them() {
        let seeds = RotationSet::from_relion_euler(&[
            [10.0, 50.0, -30.0],
            [10.0, 50.0, -30.0],
            [0.0, 90.0, 0.0],
        ])
        .unwrap();
        let r = RotationSet::around_seeds(&seeds, 20.0, 10.0, 30.0).unwrap();
        let per = RotationSet::cone(20.0, 10.0, 30.0).unwrap().len() + 1;
        assert_eq!(r.len(), 2 * per, "the repeated seed is skipped");
        assert_eq!(r.matrix(0), seeds.matrix(0));
        assert_eq!(r.matrix(per), seeds.matrix(2));
        for i in 0..per {
            assert!(axis_angle_between(r.matrix(i), seeds.matrix(0)) <= 20.0 + 1e-9);
            assert!(axis_angle_between(r.matrix(per + i), seeds.matrix(2)) <= 20.0 + 1e-9);
        }
    }

    #[test]
    fn each_seed_gets_its_own_cone_with_limited_spins() {
        let seeds =
            RotationSet::from_relion_euler(&[[10.0, 50.0, -30.0], [10.0, 50.0, -30.0]]).unwrap();
        // Range 180: every spin, the cone of `around_seeds`, but repeats kept.
        let (all, ranges) = RotationSet::around_each_seed(&seeds, 15.0, 3.0, 3.0, 180.0).unwrap();
        let once = RotationSet::around_seeds(&seeds, 15.0, 3.0, 3.0).unwrap();
        assert_eq!(ranges, vec![0..once.len(), once.len()..2 * once.len()]);
        assert_eq!(&all.as_flat()[..once.as_flat().len()], once.as_flat());
        assert_eq!(&all.as_flat()[once.as_flat().len()..], once.as_flat());
        // ±15° of the 120 spins every 3°: the 11 from −15 to 15, in every direction.
        let full = RotationSet::cone(15.0, 3.0, 3.0).unwrap();
        let k = full.len() / 120;
        let spun = RotationSet::cone_spun(15.0, 3.0, 3.0, 15.0).unwrap();
        assert_eq!(spun.len(), k * 11);
        let (r, ranges) = RotationSet::around_each_seed(&seeds, 15.0, 3.0, 3.0, 15.0).unwrap();
        assert_eq!(
            (r.len(), ranges[1].clone()),
            (2 * (k * 11 + 1), k * 11 + 1..2 * (k * 11 + 1))
        );
        // Every member is within 15° of the seed's axis and its spin within 15° of the
        // seed's: the geodesic angle to the seed is at most about 15√2.
        let s = seeds.matrix(0);
        for i in 0..r.len() {
            let m = r.matrix(i);
            assert!(axis_angle_between(m, s) <= 15.0 + 1e-9);
            let tr: f64 = (0..3)
                .map(|a| (0..3).map(|c| m[a * 3 + c] * s[a * 3 + c]).sum::<f64>())
                .sum();
            let angle = ((tr - 1.0) / 2.0).clamp(-1.0, 1.0).acos().to_degrees();
            assert!(angle <= 15.0 * 2f64.sqrt() + 1e-6, "{i}: {angle}");
        }
        // A range narrower than the spins' spacing about 0 (here 0 is on the grid): the
        // unspun directions; out of (0, 180]: an error.
        assert_eq!(
            RotationSet::cone_spun(15.0, 3.0, 3.0, 1.0).unwrap().len(),
            k
        );
        assert!(RotationSet::cone_spun(15.0, 3.0, 3.0, 0.0).is_err());
        assert!(RotationSet::cone_spun(15.0, 3.0, 3.0, 181.0).is_err());
    }
}
