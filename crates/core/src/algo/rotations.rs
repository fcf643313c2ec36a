//! Rotation sets for template matching: explicit matrices, ZYZ Euler angles and even samplings.
//!
//! Every set is a host-side list of `d × d` rotation matrices (d = 2 or 3) in array-index axes,
//! stored row-major in `f64`. Matrices are validated (orthonormal within [`ORTHO_TOL`],
//! determinant +1) when a set is built, so matching can trust them.
//!
//! * [`RotationSet::from_matrices`]: explicit matrices (e.g. pytme's `rotations.npy`).
//! * [`RotationSet::from_relion_euler`] / [`relion_euler_of`]: RELION's Euler angles (see
//!   below), the convention of STAR files, of `--euler` files and of every angle monomorph writes.
//! * [`RotationSet::from_euler_zyz`] / [`RotationSet::to_euler_zyz`]: intrinsic ZYZ Euler angles
//!   in degrees, scipy's `Rotation.from_euler("ZYZ", …, degrees=True)` convention, of a matrix in
//!   the set's own frame (array-index axes), with no change of frame.
//! * [`RotationSet::reduce_by_symmetry`]: the members in the fundamental domain of a point
//!   group [`Symmetry`] (`Cn`, `Dn` about the template's `z` axis), pytme's `--symmetry`.
//! * [`RotationSet::uniform`]: an even sampling for an angular step. In 3-D it is a
//!   Hopf-fibration set: a Fibonacci sphere of axis directions (spacing 1.2 × step) times an
//!   in-plane grid (spacing 0.9 × step, offset by −φ along each fibre), first rotation the
//!   identity. Measured covering radius (max over 30 000 random rotations of the geodesic angle
//!   to the nearest member): 35.3° for a 36.47° step (pytme's Karney set: 36.2°), 19.9° for
//!   20.83° (pytme 20.7°), 14.6° for 15° (pytme picks its 16.29° set: 16.2°). It beats pytme's
//!   coverage at every step tried, with 1.1–1.9× as many rotations. In 2-D it is the even
//!   in-plane grid `k · 360°/⌈360/step⌉` (pytme draws 2-D rotations at random).

//!
//! # Frames
//!
//! A volume is an array indexed `(z, y, x)` (2-D: `(y, x)`): the order of MRC files (and of
//! mrcfile / numpy). Every matrix of a set acts on that **index order** and is a pull-back about
//! the template centre `c = (n − 1)/2`: the template rotated by `R` is `t_R[o] = t[R·(o − c) + c]`
//! (pytme's rule), so a particle matched with `R` is the template seen through `R`.
//!
//! RELION (and pytme's `Orientations`, whose arrays are `(x, y, z)`) describe the same rotation
//! on `(x, y, z)`: `R_xyz = P·R·P` with `P` the axis reversal (`P = Pᵀ = P⁻¹`), and its Euler
//! angles `(rot, tilt, psi)` in degrees satisfy `R_xyz = Rz(rot)·Ry(tilt)·Rz(psi)`, with
//! `Rz(a) = [[cos a, −sin a, 0], [sin a, cos a, 0], [0, 0, 1]]` and
//! `Ry(b) = [[cos b, 0, sin b], [0, 1, 0], [−sin b, 0, cos b]]` (right-handed, counter-clockwise
//! for a positive angle seen from the positive axis). That is RELION's definition:
//! `Euler_angles2matrix(rot, tilt, psi)` returns `A = R_xyzᵀ = Rz(−psi)·Ry(−tilt)·Rz(−rot)`
//! (rotations of the coordinate frame: `rot` about z, then `tilt` about the new y, then `psi`
//! about the new z), and RELION's projector reads the reference at `Aᵀ·p` for a particle
//! coordinate `p`: `particle(p) = reference(R_xyz·p)`, the pull-back above written in `(x, y, z)`.
//! It is also scipy's intrinsic `"ZYZ"` (`Rotation.from_euler("ZYZ", [rot, tilt, psi],
//! degrees=True).as_matrix() = R_xyz`), which pytme uses to read and write STAR files.
//!
//! Angles are returned as scipy's `as_euler("ZYZ")` returns them: `tilt` in `[0, 180]`, `rot` and
//! `psi` in `[−180, 180]`; at gimbal lock (`tilt` 0 or 180, where only `rot ± psi` is defined)
//! `psi = 0`.
//!
//! In 2-D, RELION uses `_rlnAnglePsi` alone, the same definition with `rot = tilt = 0`:
//! `R_xy = [[cos psi, −sin psi], [sin psi, cos psi]]` acting on `(x, y)`, `R_xy = P·R·P`.

use crate::error::{Error, Result};

mod cone;
mod pytme_sets;
mod symmetry;
pub use cone::axis_angle_between;
pub use pytme_sets::{PYTME_SETS, PytmeSet, embedded_quaternions, embedded_summary, pytme_set_for};
pub use symmetry::Symmetry;

/// Tolerance on `max |RᵀR − I|` and `|det R − 1|` when validating a matrix (float32 input is
/// accepted).
pub const ORTHO_TOL: f64 = 1e-4;

/// A validated list of `d × d` rotation matrices (d = 2 or 3), row-major `f64`.
#[derive(Debug, Clone, PartialEq)]
pub struct RotationSet {
    dim: usize,
    mats: Vec<f64>,
}

/// `R = Rz(a) · Ry(b) · Rz(c)` for intrinsic ZYZ angles in degrees (scipy's convention,
/// `Rotation.from_euler("ZYZ", [a, b, c], degrees=True).as_matrix()`).
pub fn euler_zyz_to_matrix(angles: [f64; 3]) -> [[f64; 3]; 3] {
    let [a, b, c] = angles.map(f64::to_radians);
    let rz = |t: f64| {
        [
            [t.cos(), -t.sin(), 0.0],
            [t.sin(), t.cos(), 0.0],
            [0.0, 0.0, 1.0],
        ]
    };
    let ry = |t: f64| {
        [
            [t.cos(), 0.0, t.sin()],
            [0.0, 1.0, 0.0],
            [-t.sin(), 0.0, t.cos()],
        ]
    };
    matmul3(&matmul3(&rz(a), &ry(b)), &rz(c))
}

/// Intrinsic ZYZ Euler angles in degrees of a rotation matrix, as scipy's
/// `Rotation.from_matrix(R).as_euler("ZYZ", degrees=True)`: the middle angle in `[0, 180]`, the
/// others in `(−180, 180]`; at gimbal lock (middle angle 0 or 180) the third angle is 0.
pub fn matrix_to_euler_zyz(r: &[[f64; 3]; 3]) -> [f64; 3] {
    let cb = r[2][2].clamp(-1.0, 1.0);
    let b = cb.acos();
    let (a, c);
    let eps = 1e-7;
    if b.abs() < eps {
        // R = Rz(a + c): put everything in a.
        a = r[1][0].atan2(r[0][0]);
        c = 0.0;
    } else if (b - std::f64::consts::PI).abs() < eps {
        // R = Rz(a) Ry(pi) Rz(c) = Rz(a - c) Ry(pi): put everything in a.
        a = (-r[1][0]).atan2(-r[0][0]);
        c = 0.0;
    } else {
        a = r[1][2].atan2(r[0][2]);
        c = r[2][1].atan2(-r[2][0]);
    }
    [a.to_degrees(), b.to_degrees(), c.to_degrees()]
}

/// `P·R·P` for a row-major `d × d` matrix, `P` the reversal of the `d` axes: the same rotation
/// written in the reversed axis order (`(z, y, x)` ↔ `(x, y, z)`). Its own inverse.
pub fn reverse_axes(m: &[f64], d: usize) -> Vec<f64> {
    let mut o = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..d {
            o[i * d + j] = m[(d - 1 - i) * d + (d - 1 - j)];
        }
    }
    o
}

/// The matrix in array-index order (`(z, y, x)`, row-major 3 × 3) of RELION's Euler angles
/// `[rot, tilt, psi]` in degrees (module docs, "Frames"): `P · Rz(rot)·Ry(tilt)·Rz(psi) · P`.
pub fn relion_euler_to_matrix(angles: [f64; 3]) -> [[f64; 3]; 3] {
    let r = euler_zyz_to_matrix(angles);
    let flat = reverse_axes(&r.concat(), 3);
    [
        [flat[0], flat[1], flat[2]],
        [flat[3], flat[4], flat[5]],
        [flat[6], flat[7], flat[8]],
    ]
}

/// RELION's angles in degrees of a row-major rotation in array-index order (module docs,
/// "Frames"). 3-D: `[rot, tilt, psi]` of `P·R·P`, as scipy's `as_euler("ZYZ")` (gimbal lock:
/// `psi = 0`). 2-D (`(y, x)` order): `[0, 0, psi]`, the in-plane angle of `P·R·P` acting on
/// `(x, y)`, in `(−180, 180]`.
///
/// Errors: a matrix that is not 2 × 2 or 3 × 3.
pub fn relion_euler_of(m: &[f64]) -> Result<[f64; 3]> {
    match m.len() {
        4 => {
            let r = reverse_axes(m, 2);
            Ok([0.0, 0.0, r[2].atan2(r[0]).to_degrees()])
        }
        9 => {
            let r = reverse_axes(m, 3);
            Ok(matrix_to_euler_zyz(&[
                [r[0], r[1], r[2]],
                [r[3], r[4], r[5]],
                [r[6], r[7], r[8]],
            ]))
        }
        n => Err(Error::invalid(
            "rotation",
            format!("expected a 2 × 2 or 3 × 3 matrix, got {n} values"),
        )),
    }
}

fn matmul3(x: &[[f64; 3]; 3], y: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut o = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            o[i][j] = (0..3).map(|k| x[i][k] * y[k][j]).sum();
        }
    }
    o
}

fn det(m: &[f64], d: usize) -> f64 {
    if d == 2 {
        m[0] * m[3] - m[1] * m[2]
    } else {
        m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6])
            + m[2] * (m[3] * m[7] - m[4] * m[6])
    }
}

/// Checks one row-major `d × d` matrix; `i` is its index in the set (for the message).
fn validate(m: &[f64], d: usize, i: usize) -> Result<()> {
    if let Some(bad) = m.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(
            "rotations",
            format!("matrix {i} has a non-finite entry at flat position {bad}"),
        ));
    }
    let mut err = 0.0f64;
    for a in 0..d {
        for b in 0..d {
            let dot: f64 = (0..d).map(|k| m[k * d + a] * m[k * d + b]).sum();
            let want = if a == b { 1.0 } else { 0.0 };
            err = err.max((dot - want).abs());
        }
    }
    if err > ORTHO_TOL {
        return Err(Error::invalid(
            "rotations",
            format!(
                "matrix {i} is not orthonormal: max |RᵀR − I| = {err:.3e} (tolerance {ORTHO_TOL:.0e})"
            ),
        ));
    }
    let dt = det(m, d);
    if (dt - 1.0).abs() > ORTHO_TOL {
        return Err(Error::invalid(
            "rotations",
            format!(
                "matrix {i} has determinant {dt:.6}: a rotation needs +1, and −1 is a \
                 reflection, which would search the mirror image of the template (the other \
                 hand); to search that, mirror the template (reverse one axis) instead"
            ),
        ));
    }
    Ok(())
}

impl RotationSet {
    /// The identity alone, in `dim` dimensions (2 or 3).
    pub fn identity(dim: usize) -> Result<Self> {
        check_dim(dim)?;
        let mut m = vec![0.0; dim * dim];
        for k in 0..dim {
            m[k * dim + k] = 1.0;
        }
        Ok(RotationSet { dim, mats: m })
    }

    /// Explicit matrices: `flat` holds `n · dim · dim` values, matrix after matrix, row-major.
    /// Each must be orthonormal within [`ORTHO_TOL`] with determinant +1.
    pub fn from_matrices(dim: usize, flat: &[f64]) -> Result<Self> {
        check_dim(dim)?;
        let dd = dim * dim;
        if flat.is_empty() || !flat.len().is_multiple_of(dd) {
            return Err(Error::shape(
                "rotations",
                format!("a non-empty multiple of {dd} values (n × {dim} × {dim})"),
                format!("{} values", flat.len()),
            ));
        }
        for (i, m) in flat.chunks(dd).enumerate() {
            validate(m, dim, i)?;
        }
        Ok(RotationSet {
            dim,
            mats: flat.to_vec(),
        })
    }

    /// Explicit matrices from an `(n, d, d)` array (any float type convertible to `f64`).
    pub fn from_array<T: Copy + Into<f64>>(a: ndarray::ArrayView3<'_, T>) -> Result<Self> {
        let (n, d1, d2) = a.dim();
        if d1 != d2 || n == 0 {
            return Err(Error::shape(
                "rotations",
                "(n, d, d) with n ≥ 1 and d = 2 or 3",
                format!("({n}, {d1}, {d2})"),
            ));
        }
        let flat: Vec<f64> = a.iter().map(|&v| v.into()).collect();
        Self::from_matrices(d1, &flat)
    }

    /// Rotations from RELION's Euler angles `[rot, tilt, psi]` in degrees (the `(x, y, z)` frame
    /// of STAR files, module docs "Frames"), stored as matrices in array-index order `(z, y, x)`
    /// like every set: [`relion_euler_to_matrix`]. 3-D only; every angle must be finite.
    pub fn from_relion_euler(angles: &[[f64; 3]]) -> Result<Self> {
        let set = Self::from_euler_zyz(angles)?;
        let mats = set
            .mats
            .chunks(9)
            .flat_map(|m| reverse_axes(m, 3))
            .collect();
        Ok(RotationSet { dim: 3, mats })
    }

    /// RELION's angles in degrees of every rotation ([`relion_euler_of`]; 2-D: `[0, 0, psi]`).
    pub fn to_relion_euler(&self) -> Vec<[f64; 3]> {
        (0..self.len())
            .map(|i| relion_euler_of(self.matrix(i)).expect("validated 2 × 2 or 3 × 3"))
            .collect()
    }

    /// Rotations from intrinsic ZYZ Euler angles in degrees (scipy's `from_euler("ZYZ", …)`),
    /// taken as matrices in the set's own (array-index) frame without a change of frame; STAR
    /// and `--euler` angles go through [`RotationSet::from_relion_euler`] instead.
    pub fn from_euler_zyz(angles: &[[f64; 3]]) -> Result<Self> {
        if angles.is_empty() {
            return Err(Error::Empty("Euler angles".into()));
        }
        let mut mats = Vec::with_capacity(angles.len() * 9);
        for (i, a) in angles.iter().enumerate() {
            if a.iter().any(|v| !v.is_finite()) {
                return Err(Error::invalid(
                    "euler angles",
                    format!("entry {i} is not finite: {a:?}"),
                ));
            }
            mats.extend(euler_zyz_to_matrix(*a).iter().flatten());
        }
        Ok(RotationSet { dim: 3, mats })
    }

    /// ZYZ Euler angles (degrees) of every rotation, scipy's `as_euler("ZYZ")` of the matrix in
    /// its own (array-index) frame (3-D only); RELION's angles are [`RotationSet::to_relion_euler`].
    pub fn to_euler_zyz(&self) -> Result<Vec<[f64; 3]>> {
        if self.dim != 3 {
            return Err(Error::invalid(
                "rotations",
                "Euler angles need 3-D rotations",
            ));
        }
        Ok((0..self.len())
            .map(|i| matrix_to_euler_zyz(&self.matrix3(i)))
            .collect())
    }

    /// An even sampling for an angular step in degrees (see the module docs), the identity first.
    /// A step ≥ 180° gives the identity alone (as pytme's CLI does).
    pub fn uniform(dim: usize, step_deg: f64) -> Result<Self> {
        check_dim(dim)?;
        if !(step_deg.is_finite() && step_deg > 0.0) {
            return Err(Error::invalid(
                "angular step",
                format!("must be a positive number of degrees, got {step_deg}"),
            ));
        }
        if step_deg >= 180.0 {
            return Self::identity(dim);
        }
        let count = |n: f64| -> Result<usize> {
            if n > 5e7 {
                Err(Error::invalid(
                    "angular step",
                    format!("{step_deg}° needs more than 5e7 rotations"),
                ))
            } else {
                Ok(n as usize)
            }
        };
        if dim == 2 {
            let m = count((360.0 / step_deg).ceil())?.max(1);
            let mut mats = Vec::with_capacity(m * 4);
            for k in 0..m {
                let t = (k as f64 * 360.0 / m as f64).to_radians();
                mats.extend([t.cos(), -t.sin(), t.sin(), t.cos()]);
            }
            return Ok(RotationSet { dim, mats });
        }
        let a = (step_deg * 1.2).to_radians();
        let ns = count((4.0 * std::f64::consts::PI / (a * a)).ceil())?.max(2);
        let m = count((360.0 / (step_deg * 0.9)).ceil())?.max(1);
        count(ns as f64 * m as f64)?;
        let golden = std::f64::consts::PI * (1.0 + 5f64.sqrt());
        let mut mats = Vec::with_capacity((ns * m + 1) * 9);
        mats.extend([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        for i in 0..ns {
            let fi = i as f64 + 0.5;
            let z = 1.0 - 2.0 * fi / ns as f64;
            let theta = z.clamp(-1.0, 1.0).acos().to_degrees();
            let phi = (golden * fi).to_degrees() % 360.0;
            for k in 0..m {
                let psi = k as f64 * 360.0 / m as f64;
                let r = euler_zyz_to_matrix([phi, theta, psi - phi]);
                mats.extend(r.iter().flatten());
            }
        }
        Ok(RotationSet { dim, mats })
    }

    /// Dimension of the matrices (2 or 3).
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Number of rotations.
    pub fn len(&self) -> usize {
        self.mats.len() / (self.dim * self.dim)
    }
    /// `true` when the set has no rotation (never, for a validated set).
    pub fn is_empty(&self) -> bool {
        self.mats.is_empty()
    }
    /// Rotation `i`, row-major `dim × dim`. Panics when `i >= len()` (an internal index).
    pub fn matrix(&self, i: usize) -> &[f64] {
        let dd = self.dim * self.dim;
        &self.mats[i * dd..(i + 1) * dd]
    }
    /// All matrices, row-major, one after the other.
    pub fn as_flat(&self) -> &[f64] {
        &self.mats
    }
    /// The set as an `(n, d, d)` array.
    pub fn to_array(&self) -> ndarray::Array3<f64> {
        ndarray::Array3::from_shape_vec((self.len(), self.dim, self.dim), self.mats.clone())
            .expect("length is n·d·d by construction")
    }
    /// Rotation `i` as a 3 × 3 array (3-D sets).
    fn matrix3(&self, i: usize) -> [[f64; 3]; 3] {
        let m = self.matrix(i);
        [[m[0], m[1], m[2]], [m[3], m[4], m[5]], [m[6], m[7], m[8]]]
    }

    /// Covering radius in degrees, estimated as the largest geodesic angle from `samples`
    /// pseudo-random rotations (seeded, reproducible) to their nearest member of the set.
    pub fn covering_radius(&self, samples: usize, seed: u64) -> f64 {
        let mut rng = SplitMix(seed);
        if self.dim == 2 {
            let angles: Vec<f64> = (0..self.len())
                .map(|i| {
                    let m = self.matrix(i);
                    m[2].atan2(m[0])
                })
                .collect();
            let mut worst = 0.0f64;
            for _ in 0..samples {
                let t = (rng.uniform() * 2.0 - 1.0) * std::f64::consts::PI;
                let best = angles
                    .iter()
                    .map(|&a| {
                        let d = (t - a).rem_euclid(2.0 * std::f64::consts::PI);
                        d.min(2.0 * std::f64::consts::PI - d)
                    })
                    .fold(f64::INFINITY, f64::min);
                worst = worst.max(best);
            }
            return worst.to_degrees();
        }
        let quats: Vec<[f64; 4]> = (0..self.len()).map(|i| quat_of(&self.matrix3(i))).collect();
        let mut worst = 1.0f64;
        for _ in 0..samples {
            let mut q = [rng.normal(), rng.normal(), rng.normal(), rng.normal()];
            let n = q.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-300);
            q.iter_mut().for_each(|v| *v /= n);
            let best = quats
                .iter()
                .map(|p| (p[0] * q[0] + p[1] * q[1] + p[2] * q[2] + p[3] * q[3]).abs())
                .fold(0.0f64, f64::max);
            worst = worst.min(best);
        }
        (2.0 * worst.clamp(-1.0, 1.0).acos()).to_degrees()
    }
}

fn check_dim(dim: usize) -> Result<()> {
    if dim == 2 || dim == 3 {
        Ok(())
    } else {
        Err(Error::invalid(
            "rotation dimension",
            format!("must be 2 or 3, got {dim}"),
        ))
    }
}

/// Unit quaternion (w, x, y, z) of a rotation matrix (Shepperd's method).
fn quat_of(r: &[[f64; 3]; 3]) -> [f64; 4] {
    let t = r[0][0] + r[1][1] + r[2][2];
    let q = if t > 0.0 {
        let s = (t + 1.0).sqrt() * 2.0;
        [
            0.25 * s,
            (r[2][1] - r[1][2]) / s,
            (r[0][2] - r[2][0]) / s,
            (r[1][0] - r[0][1]) / s,
        ]
    } else if r[0][0] > r[1][1] && r[0][0] > r[2][2] {
        let s = (1.0 + r[0][0] - r[1][1] - r[2][2]).sqrt() * 2.0;
        [
            (r[2][1] - r[1][2]) / s,
            0.25 * s,
            (r[0][1] + r[1][0]) / s,
            (r[0][2] + r[2][0]) / s,
        ]
    } else if r[1][1] > r[2][2] {
        let s = (1.0 + r[1][1] - r[0][0] - r[2][2]).sqrt() * 2.0;
        [
            (r[0][2] - r[2][0]) / s,
            (r[0][1] + r[1][0]) / s,
            0.25 * s,
            (r[1][2] + r[2][1]) / s,
        ]
    } else {
        let s = (1.0 + r[2][2] - r[0][0] - r[1][1]).sqrt() * 2.0;
        [
            (r[1][0] - r[0][1]) / s,
            (r[0][2] + r[2][0]) / s,
            (r[1][2] + r[2][1]) / s,
            0.25 * s,
        ]
    };
    let n = q.iter().map(|v| v * v).sum::<f64>().sqrt();
    q.map(|v| v / n)
}

/// A tiny reproducible generator (SplitMix64) for covering-radius estimates.
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euler_matches_scipy() {
        // scipy: Rotation.from_euler("ZYZ", [30, 40, 50], degrees=True).as_matrix()
        let r = euler_zyz_to_matrix([30.0, 40.0, 50.0]);
        let want = [
            [0.043412044, -0.829598373, 0.556670399],
            [0.909615886, 0.263258355, 0.321393805],
            [-0.413175911, 0.492403877, 0.766044443],
        ];
        for i in 0..3 {
            for j in 0..3 {
                assert!((r[i][j] - want[i][j]).abs() < 1e-7, "{i}{j}: {r:?}");
            }
        }
        let back = matrix_to_euler_zyz(&r);
        for k in 0..3 {
            assert!((back[k] - [30.0, 40.0, 50.0][k]).abs() < 1e-9);
        }
        // Gimbal lock as scipy resolves it (third angle 0).
        let g = matrix_to_euler_zyz(&euler_zyz_to_matrix([30.0, 0.0, 50.0]));
        assert!((g[0] - 80.0).abs() < 1e-9 && g[2] == 0.0, "{g:?}");
        let g = matrix_to_euler_zyz(&euler_zyz_to_matrix([30.0, 180.0, 50.0]));
        assert!(
            (g[0] + 20.0).abs() < 1e-9 && (g[1] - 180.0).abs() < 1e-9 && g[2] == 0.0,
            "{g:?}"
        );
    }

    #[test]
    fn euler_round_trip_many() {
        for a in [-170.0, -30.0, 0.0, 45.0, 179.0] {
            for b in [0.0, 10.0, 90.0, 170.0, 180.0] {
                for c in [-120.0, 0.0, 60.0] {
                    let r = euler_zyz_to_matrix([a, b, c]);
                    let r2 = euler_zyz_to_matrix(matrix_to_euler_zyz(&r));
                    for i in 0..3 {
                        for j in 0..3 {
                            assert!((r[i][j] - r2[i][j]).abs() < 1e-9);
                        }
                    }
                }
            }
        }
    }

    /// RELION's `Euler_angles2matrix(rot, tilt, psi)` element by element (src/euler.cpp), in
    /// `(x, y, z)`: the frame rotation `A`; the particle is `reference(Aᵀ·p)`.
    fn relion_a(rot: f64, tilt: f64, psi: f64) -> [[f64; 3]; 3] {
        let (a, b, g) = (rot.to_radians(), tilt.to_radians(), psi.to_radians());
        let (ca, sa, cb, sb, cg, sg) = (a.cos(), a.sin(), b.cos(), b.sin(), g.cos(), g.sin());
        let (cc, cs, sc, ss) = (cb * ca, cb * sa, sb * ca, sb * sa);
        [
            [cg * cc - sg * sa, cg * cs + sg * ca, -cg * sb],
            [-sg * cc - cg * sa, -sg * cs + cg * ca, sg * sb],
            [sc, ss, cb],
        ]
    }

    fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
    }

    #[test]
    fn relion_angles_follow_relions_definition() {
        for ang in [
            [30.0, 40.0, 50.0],
            [-90.0, 0.0, 0.0],
            [165.4313, 108.77149, 14.5687],
            [-143.5, 23.6, 126.5],
            [10.0, 180.0, 0.0],
        ] {
            let a = relion_a(ang[0], ang[1], ang[2]);
            // Our matrix acts on (z, y, x): reversing its axes gives Aᵀ acting on (x, y, z).
            let ours = relion_euler_to_matrix(ang).concat();
            let xyz = reverse_axes(&ours, 3);
            for i in 0..3 {
                for j in 0..3 {
                    assert!((xyz[i * 3 + j] - a[j][i]).abs() < 1e-12, "{ang:?} {i}{j}");
                }
            }
            // And the angles come back (same rotation; same angles away from gimbal lock).
            let back = relion_euler_of(&ours).unwrap();
            let again = relion_euler_to_matrix(back).concat();
            assert!(close(&ours, &again, 1e-12), "{ang:?} -> {back:?}");
            if ang[1] > 0.0 && ang[1] < 180.0 {
                assert!(close(&back, &ang, 1e-9), "{ang:?} -> {back:?}");
            }
        }
    }

    #[test]
    fn relion_angles_of_the_issue_example() {
        // One physical orientation: pytme (arrays in x, y, z) writes (−90, 0, 0) for Rz(−90).
        // The same rotation acting on (z, y, x) is P·Rz(−90)·P, whose own ZYZ angles, the
        // angles monomorph used to write, are (−90, 90, 90).
        let rz = euler_zyz_to_matrix([-90.0, 0.0, 0.0]).concat();
        let zyx = reverse_axes(&rz, 3);
        let got = relion_euler_of(&zyx).unwrap();
        assert!(close(&got, &[-90.0, 0.0, 0.0], 1e-12), "{got:?}");
        let m = [
            [zyx[0], zyx[1], zyx[2]],
            [zyx[3], zyx[4], zyx[5]],
            [zyx[6], zyx[7], zyx[8]],
        ];
        let old = matrix_to_euler_zyz(&m);
        assert!(close(&old, &[-90.0, 90.0, 90.0], 1e-9), "{old:?}");
    }

    #[test]
    fn relion_gimbal_lock_and_round_trips() {
        // tilt 0: only rot + psi is defined; scipy puts it all in rot.
        let m = relion_euler_to_matrix([30.0, 0.0, 50.0]).concat();
        let g = relion_euler_of(&m).unwrap();
        assert!(close(&g, &[80.0, 0.0, 0.0], 1e-9), "{g:?}");
        // tilt 180: only rot − psi is defined.
        let m = relion_euler_to_matrix([30.0, 180.0, 50.0]).concat();
        let g = relion_euler_of(&m).unwrap();
        assert!(close(&g, &[-20.0, 180.0, 0.0], 1e-9), "{g:?}");
        // Round trips over a grid, gimbal lock included.
        for a in [-180.0, -170.0, -30.0, 0.0, 45.0, 179.0, 180.0] {
            for b in [0.0, 1e-9, 10.0, 90.0, 170.0, 180.0 - 1e-9, 180.0] {
                for c in [-180.0, -120.0, 0.0, 60.0, 180.0] {
                    let r = relion_euler_to_matrix([a, b, c]).concat();
                    let e = relion_euler_of(&r).unwrap();
                    assert!((0.0..=180.0).contains(&e[1]), "{e:?}");
                    assert!(e[0].abs() <= 180.0 && e[2].abs() <= 180.0, "{e:?}");
                    let r2 = relion_euler_to_matrix(e).concat();
                    assert!(close(&r, &r2, 1e-9), "{a} {b} {c} -> {e:?}");
                }
            }
        }
        // A set built from RELION angles gives them back.
        let set = RotationSet::from_relion_euler(&[[10.0, 20.0, 30.0], [-90.0, 0.0, 0.0]]).unwrap();
        let back = set.to_relion_euler();
        assert!(close(&back[0], &[10.0, 20.0, 30.0], 1e-9), "{back:?}");
        assert!(close(&back[1], &[-90.0, 0.0, 0.0], 1e-9), "{back:?}");
        assert!(RotationSet::from_relion_euler(&[[f64::NAN, 0.0, 0.0]]).is_err());
    }

    #[test]
    fn relion_psi_in_2d() {
        // RELION 2-D: R_xy = [[cos, −sin], [sin, cos]] on (x, y); on (y, x) that is P·R_xy·P.
        for psi in [-170.0f64, -90.0, 0.0, 30.0, 135.0, 180.0] {
            let (c, s) = (psi.to_radians().cos(), psi.to_radians().sin());
            let yx = reverse_axes(&[c, -s, s, c], 2);
            assert!(close(&yx, &[c, s, -s, c], 0.0));
            let e = relion_euler_of(&yx).unwrap();
            assert_eq!(&e[..2], &[0.0, 0.0]);
            let d = (e[2] - psi).rem_euclid(360.0);
            assert!(d.min(360.0 - d) < 1e-9, "{psi} -> {e:?}");
        }
        assert!(relion_euler_of(&[1.0; 5]).is_err());
    }

    #[test]
    fn validation_rejects_bad_matrices() {
        assert!(RotationSet::from_matrices(2, &[1.0, 0.0, 0.0, 1.0]).is_ok());
        let e = RotationSet::from_matrices(2, &[1.1, 0.0, 0.0, 1.0]).unwrap_err();
        assert!(e.to_string().contains("not orthonormal"), "{e}");
        let e = RotationSet::from_matrices(2, &[1.0, 0.0, 0.0, -1.0]).unwrap_err();
        assert!(e.to_string().contains("determinant"), "{e}");
        assert!(RotationSet::from_matrices(3, &[1.0; 8]).is_err());
        assert!(RotationSet::from_matrices(4, &[1.0; 16]).is_err());
        assert!(RotationSet::from_matrices(2, &[f64::NAN, 0.0, 0.0, 1.0]).is_err());
    }

    #[test]
    fn uniform_sets_are_valid_and_start_at_identity() {
        for (d, s) in [(2, 10.0), (3, 40.0), (3, 25.0)] {
            let r = RotationSet::uniform(d, s).unwrap();
            let again = RotationSet::from_matrices(d, r.as_flat()).unwrap();
            assert_eq!(again.len(), r.len());
            let id = RotationSet::identity(d).unwrap();
            assert_eq!(r.matrix(0), id.matrix(0));
        }
        assert_eq!(RotationSet::uniform(2, 10.0).unwrap().len(), 36);
        assert_eq!(RotationSet::uniform(3, 200.0).unwrap().len(), 1);
        assert!(RotationSet::uniform(3, 0.0).is_err());
        assert!(RotationSet::uniform(3, f64::NAN).is_err());
    }

    #[test]
    fn uniform_covering_radius_beats_step() {
        // pytme's Karney set for a 36.47° step covers within 36.2°; ours must not be worse.
        let r = RotationSet::uniform(3, 36.47).unwrap();
        let c = r.covering_radius(4000, 7);
        assert!(c < 36.2, "covering radius {c}");
        let r2 = RotationSet::uniform(2, 15.0).unwrap();
        assert!(r2.covering_radius(2000, 1) <= 7.5 + 1e-9);
    }
}
