//! Point-group symmetry of the template: restricting a rotation set to a fundamental domain, as
//! pytme 0.3.6's `--symmetry` does (`tme.rotations.reduce_rotations_by_symmetry`).
//!
//! A template symmetric under the rotations `S_k` of a group (about its centre) looks the same
//! rotated by `R` and by `S_k·R` (rotations are pull-backs, `t_R[o] = t[R·(o − c) + c]`, so
//! `t_{S·R}[o] = t[S·R·(o − c) + c] = t_R[o]` when `t[S·y + c] = t[y + c]`). Searching one
//! member of each orbit `{S_k·R}` is enough. pytme keeps `R` when it is the canonical member of
//! its own orbit: the one whose unit quaternion, sign-fixed so that its largest-magnitude
//! component is positive, is lexicographically largest in scipy's `(x, y, z, w)` order, all in
//! pytme's `(x, y, z)` axes with the symmetry axis `z`. monomorph applies the same rule in the
//! same frame (a set here acts on `(z, y, x)`, so each matrix is read through the axis reversal
//! first), with pytme's own float32 group matrices, whose round-off settles exact ties between
//! orbit members: the same rotations are kept (checked on pytme's 30° and 20° sets for C2, C3,
//! C4, C6, D2, D3).
//!
//! The rule keeps exactly one member per orbit of a set closed under the group; for any other
//! set it keeps the members inside the canonical region, about `1/order` of them. The covering
//! radius modulo the group then grows only near the region's faces, where the neighbours on the
//! far side are dropped. Measured on monomorph's own sets (3000 random rotations): 1.04–1.07×
//! the whole set's radius for C2 and C4 at 20°, D2 at 30°, D3 at 15°; 1.19× for C6 at 25°.
//! A slightly smaller step makes up for it at a fraction of the unreduced cost.
//!
//! In 2-D, `Cn` keeps the in-plane angles in `[0°, 360°/n)` (pytme has no 2-D symmetry); `Dn`
//! would include reflections of the plane and is refused.

use std::fmt;
use std::str::FromStr;

use super::{RotationSet, reverse_axes};
use crate::error::{Error, Result};

/// A point group of the template about its `z` axis (array axis 0 of a `(z, y, x)` volume;
/// pytme's axis 2): `Cn` (n-fold rotations) or `Dn` (`Cn` and n two-fold axes perpendicular
/// to `z`, the first along `x`, as pytme builds them). Parsed from `"C1"`, `"c4"`, `"D2"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symmetry {
    /// `Cn`: rotations by `360°·k/n` about `z`.
    Cyclic(u32),
    /// `Dn`: `Cn` and `n` two-fold axes perpendicular to `z`.
    Dihedral(u32),
}

impl FromStr for Symmetry {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "symmetry",
                format!("`{s}` is not a point group, expected Cn or Dn with n ≥ 1 (C1, C4, D2)"),
            )
        };
        let t = s.trim();
        let (kind, n) = t.split_at_checked(1).ok_or_else(bad)?;
        let n: u32 = n.parse().map_err(|_| bad())?;
        if n == 0 || n > 360 {
            return Err(bad());
        }
        match kind {
            "C" | "c" => Ok(Symmetry::Cyclic(n)),
            "D" | "d" => Ok(Symmetry::Dihedral(n)),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Symmetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Symmetry::Cyclic(n) => write!(f, "C{n}"),
            Symmetry::Dihedral(n) => write!(f, "D{n}"),
        }
    }
}

impl Symmetry {
    /// Number of group elements (`n` for `Cn`, `2n` for `Dn`).
    pub fn order(&self) -> usize {
        match *self {
            Symmetry::Cyclic(n) => n as usize,
            Symmetry::Dihedral(n) => 2 * n as usize,
        }
    }

    /// The group's rotations in pytme's `(x, y, z)` axes, identity first, in pytme's order and
    /// with pytme's values: `Rz(360°·k/n)`, then for `Dn` the half turns about `Rz(180°·k/n)·(−x)`,
    /// each built as `tme.rotations.get_symmetry_matrices` builds it (a float32 angle through
    /// scipy's rotation vector → quaternion → matrix, rounded to float32). The rounding is kept
    /// on purpose: it is what settles exact ties between orbit members in pytme's choice.
    fn matrices_xyz(&self) -> Vec<[[f64; 3]; 3]> {
        let (n, dihedral) = match *self {
            Symmetry::Cyclic(n) => (n, false),
            Symmetry::Dihedral(n) => (n, true),
        };
        let f32_angle = |a: f64| a as f32 as f64;
        let round = |m: [[f64; 3]; 3]| m.map(|r| r.map(|v| v as f32 as f64));
        let pi = std::f64::consts::PI;
        let mut out: Vec<_> = (0..n)
            .map(|k| {
                let a = f32_angle(2.0 * pi * k as f64 / n as f64);
                round(rotvec_matrix([0.0, 0.0, a]))
            })
            .collect();
        if dihedral {
            for k in 0..n {
                let a = f32_angle(pi * k as f64 / n as f64);
                let m = rotvec_matrix([0.0, 0.0, a]);
                // R·(−1, 0, 0), then a half turn about it.
                let v = [-m[0][0], -m[1][0], -m[2][0]];
                out.push(round(rotvec_matrix(v.map(|x| pi * x))));
            }
        }
        out
    }
}

/// scipy's `Rotation.from_rotvec(v).as_matrix()`: the quaternion `(v·sin(θ/2)/θ, cos(θ/2))`
/// (Taylor series of the scale for `θ ≤ 1e-3`), then the matrix of that quaternion.
fn rotvec_matrix(v: [f64; 3]) -> [[f64; 3]; 3] {
    let a = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    let scale = if a <= 1e-3 {
        let a2 = a * a;
        0.5 - a2 / 48.0 + a2 * a2 / 3840.0
    } else {
        (a / 2.0).sin() / a
    };
    let (x, y, z, w) = (v[0] * scale, v[1] * scale, v[2] * scale, (a / 2.0).cos());
    let (x2, y2, z2, w2) = (x * x, y * y, z * z, w * w);
    let (xy, zw, xz, yw, yz, xw) = (x * y, z * w, x * z, y * w, y * z, x * w);
    [
        [x2 - y2 - z2 + w2, 2.0 * (xy - zw), 2.0 * (xz + yw)],
        [2.0 * (xy + zw), -x2 + y2 - z2 + w2, 2.0 * (yz - xw)],
        [2.0 * (xz - yw), 2.0 * (yz + xw), -x2 - y2 + z2 + w2],
    ]
}

impl RotationSet {
    /// The members of the set in the fundamental domain of `sym` (module docs), in their order;
    /// `C1` returns the set unchanged. In 2-D only `Cn` is accepted.
    ///
    /// ```
    /// use monomorph_core::algo::rotations::{RotationSet, Symmetry};
    ///
    /// let all = RotationSet::uniform(2, 10.0)?; // 36 in-plane angles
    /// let c4: Symmetry = "C4".parse()?;
    /// assert_eq!(all.reduce_by_symmetry(c4)?.len(), 9);
    /// # Ok::<(), monomorph_core::Error>(())
    /// ```
    pub fn reduce_by_symmetry(&self, sym: Symmetry) -> Result<RotationSet> {
        if sym.order() == 1 {
            return Ok(self.clone());
        }
        let d = self.dim();
        let keep: Vec<usize> = if d == 2 {
            let Symmetry::Cyclic(n) = sym else {
                return Err(Error::invalid(
                    "symmetry",
                    format!("{sym} needs a 3-D search (in 2-D its two-fold axes are reflections)"),
                ));
            };
            let sector = 360.0 / n as f64;
            (0..self.len())
                .filter(|&i| {
                    let m = self.matrix(i);
                    // The angle of R on (y, x) is the angle of P·R·P on (x, y), negated; any
                    // fixed convention gives a fundamental domain, this one keeps 0° first.
                    let a = m[2].atan2(m[0]).to_degrees().rem_euclid(360.0);
                    a < sector - 1e-9 || a > 360.0 - 1e-9
                })
                .collect()
        } else {
            let group = sym.matrices_xyz();
            (0..self.len())
                .filter(|&i| {
                    let r = reverse_axes(self.matrix(i), 3);
                    is_canonical(&group, &r)
                })
                .collect()
        };
        let dd = d * d;
        let mut flat = Vec::with_capacity(keep.len() * dd);
        for i in keep {
            flat.extend_from_slice(self.matrix(i));
        }
        RotationSet::from_matrices(d, &flat)
    }
}

/// Whether `r` (row-major, pytme's `(x, y, z)` axes) is the canonical member of its orbit
/// `{S_k·r}` (`group[0]` the identity): numpy's stable `lexsort` of the sign-fixed quaternions
/// takes the last of equal maxima, then `allclose(orbit[0], that, atol=1e-6)` (rtol 1e-5), as
/// pytme.
fn is_canonical(group: &[[[f64; 3]; 3]], r: &[f64]) -> bool {
    let orbit: Vec<[f64; 4]> = group
        .iter()
        .map(|s| {
            let mut m = [[0.0; 3]; 3];
            for (i, row) in m.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = s[i][0] * r[j] + s[i][1] * r[3 + j] + s[i][2] * r[6 + j];
                }
            }
            canonical_sign(quat_xyzw(&m))
        })
        .collect();
    let mut best = 0;
    for (k, q) in orbit.iter().enumerate().skip(1) {
        if q.partial_cmp(&orbit[best]) != Some(std::cmp::Ordering::Less) {
            best = k;
        }
    }
    orbit[0]
        .iter()
        .zip(&orbit[best])
        .all(|(a, b)| (a - b).abs() <= 1e-6 + 1e-5 * b.abs())
}

/// The sign that makes the largest-magnitude component positive (the first one on a tie).
fn canonical_sign(q: [f64; 4]) -> [f64; 4] {
    let mut k = 0;
    for i in 1..4 {
        if q[i].abs() > q[k].abs() {
            k = i;
        }
    }
    if q[k] < 0.0 { q.map(|v| -v) } else { q }
}

/// Unit quaternion `(x, y, z, w)` of an orthogonal matrix, scipy's `from_matrix` method
/// (the largest of the diagonal and the trace chooses the formula).
fn quat_xyzw(m: &[[f64; 3]; 3]) -> [f64; 4] {
    let tr = m[0][0] + m[1][1] + m[2][2];
    let dec = [m[0][0], m[1][1], m[2][2], tr];
    let mut c = 0;
    for i in 1..4 {
        if dec[i] > dec[c] {
            c = i;
        }
    }
    let mut q = [0.0; 4];
    if c < 3 {
        let (i, j, k) = (c, (c + 1) % 3, (c + 2) % 3);
        q[i] = 1.0 - tr + 2.0 * m[i][i];
        q[j] = m[j][i] + m[i][j];
        q[k] = m[k][i] + m[i][k];
        q[3] = m[k][j] - m[j][k];
    } else {
        q[0] = m[2][1] - m[1][2];
        q[1] = m[0][2] - m[2][0];
        q[2] = m[1][0] - m[0][1];
        q[3] = 1.0 + tr;
    }
    let n = q.iter().map(|v| v * v).sum::<f64>().sqrt();
    q.map(|v| v / n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_point_groups_and_refuses_the_rest() {
        assert_eq!("C4".parse::<Symmetry>().unwrap(), Symmetry::Cyclic(4));
        assert_eq!("d2".parse::<Symmetry>().unwrap(), Symmetry::Dihedral(2));
        assert_eq!(Symmetry::Dihedral(3).to_string(), "D3");
        for bad in ["", "C", "C0", "T", "O", "I", "C-2", "4", "Cx", "D1000"] {
            let e = bad.parse::<Symmetry>().unwrap_err().to_string();
            assert!(e.contains("point group"), "{bad}: {e}");
        }
    }

    #[test]
    fn group_matrices_are_rotations_and_a_group() {
        for sym in [
            Symmetry::Cyclic(3),
            Symmetry::Dihedral(2),
            Symmetry::Dihedral(5),
        ] {
            let g = sym.matrices_xyz();
            assert_eq!(g.len(), sym.order());
            let flat: Vec<f64> = g.iter().flatten().flatten().copied().collect();
            RotationSet::from_matrices(3, &flat).expect("rotations");
            // Closed: every product is in the group.
            for a in &g {
                for b in &g {
                    let mut p = [[0.0; 3]; 3];
                    for i in 0..3 {
                        for j in 0..3 {
                            p[i][j] = (0..3).map(|k| a[i][k] * b[k][j]).sum();
                        }
                    }
                    let found = g
                        .iter()
                        .any(|c| (0..3).all(|i| (0..3).all(|j| (c[i][j] - p[i][j]).abs() < 1e-6)));
                    assert!(found, "{sym}: product outside the group");
                }
            }
        }
    }

    /// A set closed under the group (the group times a generic set) keeps exactly one member
    /// per orbit.
    #[test]
    fn one_member_per_orbit_of_a_closed_set() {
        let base = RotationSet::uniform(3, 40.0).unwrap();
        for sym in [
            Symmetry::Cyclic(2),
            Symmetry::Cyclic(3),
            Symmetry::Dihedral(2),
            Symmetry::Dihedral(3),
        ] {
            let g = sym.matrices_xyz();
            let mut flat = Vec::new();
            for i in 0..base.len() {
                let r = reverse_axes(base.matrix(i), 3);
                for s in &g {
                    let mut m = vec![0.0; 9];
                    for a in 0..3 {
                        for b in 0..3 {
                            m[a * 3 + b] = (0..3).map(|k| s[a][k] * r[k * 3 + b]).sum();
                        }
                    }
                    flat.extend(reverse_axes(&m, 3));
                }
            }
            let closed = RotationSet::from_matrices(3, &flat).unwrap();
            let kept = closed.reduce_by_symmetry(sym).unwrap();
            assert_eq!(kept.len(), base.len(), "{sym}");
        }
    }

    /// Modulo the group, the kept members cover rotation space about as well as the whole set.
    #[test]
    fn the_covering_radius_modulo_the_group_grows_little() {
        let all = RotationSet::uniform(3, 30.0).unwrap();
        let sym = Symmetry::Dihedral(2);
        let kept = all.reduce_by_symmetry(sym).unwrap();
        assert!(
            kept.len() * 3 < all.len() && kept.len() * 5 > all.len(),
            "{}",
            kept.len()
        );
        let g = sym.matrices_xyz();
        let quats = |s: &RotationSet| -> Vec<[f64; 4]> {
            (0..s.len())
                .map(|i| {
                    let r = reverse_axes(s.matrix(i), 3);
                    quat_xyzw(&[[r[0], r[1], r[2]], [r[3], r[4], r[5]], [r[6], r[7], r[8]]])
                })
                .collect()
        };
        let (qa, qk) = (quats(&all), quats(&kept));
        let gq: Vec<[f64; 4]> = g.iter().map(quat_xyzw).collect();
        // q_s·q (Hamilton product, (x, y, z, w)).
        let mul = |a: &[f64; 4], b: &[f64; 4]| {
            [
                a[3] * b[0] + a[0] * b[3] + a[1] * b[2] - a[2] * b[1],
                a[3] * b[1] - a[0] * b[2] + a[1] * b[3] + a[2] * b[0],
                a[3] * b[2] + a[0] * b[1] - a[1] * b[0] + a[2] * b[3],
                a[3] * b[3] - a[0] * b[0] - a[1] * b[1] - a[2] * b[2],
            ]
        };
        let dot = |a: &[f64; 4], b: &[f64; 4]| (0..4).map(|i| a[i] * b[i]).sum::<f64>().abs();
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (mut worst_all, mut worst_kept) = (1.0f64, 1.0f64);
        for _ in 0..3000 {
            let (u, v, w) = (next(), next(), next());
            let x = [
                (1.0 - u).sqrt() * (std::f64::consts::TAU * v).sin(),
                (1.0 - u).sqrt() * (std::f64::consts::TAU * v).cos(),
                u.sqrt() * (std::f64::consts::TAU * w).sin(),
                u.sqrt() * (std::f64::consts::TAU * w).cos(),
            ];
            let near_all = qa.iter().map(|q| dot(q, &x)).fold(0.0, f64::max);
            let near_kept = gq
                .iter()
                .map(|s| {
                    let sx = mul(s, &x);
                    qk.iter().map(|q| dot(q, &sx)).fold(0.0, f64::max)
                })
                .fold(0.0, f64::max);
            worst_all = worst_all.min(near_all);
            worst_kept = worst_kept.min(near_kept);
        }
        let deg = |c: f64| 2.0 * c.clamp(-1.0, 1.0).acos().to_degrees();
        let (ra, rk) = (deg(worst_all), deg(worst_kept));
        assert!(
            rk <= 1.1 * ra,
            "covering radius {rk}° modulo {sym} vs {ra}° for the whole set"
        );
    }

    #[test]
    fn two_d_cyclic_keeps_one_sector_and_refuses_dihedral() {
        let all = RotationSet::uniform(2, 15.0).unwrap();
        assert_eq!(all.len(), 24);
        let kept = all.reduce_by_symmetry(Symmetry::Cyclic(3)).unwrap();
        assert_eq!(kept.len(), 8);
        assert_eq!(kept.matrix(0), all.matrix(0));
        let e = all
            .reduce_by_symmetry(Symmetry::Dihedral(2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("3-D"), "{e}");
        assert_eq!(all.reduce_by_symmetry(Symmetry::Cyclic(1)).unwrap(), all);
    }
}
