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
            .map(|j| rz(-180.0 + j as f64 * (360.0 / m as f64)))
            .collect();
        let mut mats = Vec::with_capacity(k * m * 9);
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
        if seeds.dim() != 3 {
            return Err(Error::invalid("seeds", "cone searches need 3-D rotations"));
        }
        let cone = Self::cone(cone_deg, cone_step_deg, inplane_step_deg)?;
        let mut uniq: Vec<&[f64]> = Vec::new();
        for i in 0..seeds.len() {
            let s = seeds.matrix(i);
            if !uniq.contains(&s) {
                uniq.push(s);
            }
        }
        let total = uniq.len() as f64 * (cone.len() as f64 + 1.0);
        if total > MAX_ROTATIONS {
            return Err(Error::invalid(
                "cone",
                format!(
                    "{} seeds × {} rotations is more than {MAX_ROTATIONS:e} rotations",
                    uniq.len(),
                    cone.len() + 1
                ),
            ));
        }
        let mut mats = Vec::with_capacity(total as usize * 9);
        for s in uniq {
            mats.extend_from_slice(s);
            for c in 0..cone.len() {
                mats.extend(matmul(cone.matrix(c), s));
            }
        }
        Self::from_matrices(3, &mats)
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
}
