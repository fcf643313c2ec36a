//! pytme 0.3.6's rotation sets for an angular step (`get_rotation_matrices`), rotation for
//! rotation.
//!
//! pytme picks, among Charles Karney's sets (cffk/orientation, MIT licence) listed in its
//! `tme/data/metadata.yaml`, the one whose nominal spacing is closest to the step (the first in
//! that file's alphabetical order on a tie), loads its quaternions `(w, x, y, z)` and returns
//! scipy's `Rotation.from_quat(…).as_matrix()` (normalised, then the usual formula). The table
//! [`PYTME_SETS`] is that file. The six smallest sets (up to 1992 rotations, nominal spacing
//! ≥ 16.29°) are embedded exactly (`pytme_sets.bin`, 52.8 KB, written by `pytme_sets.py`:
//! each component is the double nearest to an integer / 10⁹, as in pytme's files); the others
//! (7416 to 207 576 rotations, 38 MB in all) are read from a pytme data folder by the caller
//! and passed to [`RotationSet::from_pytme_quaternions`].
//!
//! Frame: pytme's matrices act on its arrays' index order, which is `(x, y, z)` for an MRC file
//! (pytme transposes MRC data); monomorph's sets act on `(z, y, x)`, so rotation `i` is stored
//! as `P·R_i·P` (P the axis reversal): the same physical rotation pytme applies to the same MRC
//! file, with the same index `i`.

use super::{RotationSet, reverse_axes};
use crate::error::{Error, Result};

/// One of pytme's sets: file name (without `.npy`), number of rotations, nominal spacing in
/// degrees (Karney's α), and whether monomorph embeds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PytmeSet {
    /// File name in pytme's `tme/data` folder, without `.npy`.
    pub name: &'static str,
    /// Number of rotations.
    pub len: usize,
    /// Nominal angular spacing in degrees (what pytme compares the step with).
    pub spacing: f64,
    /// Whether monomorph carries the set itself (else it is read from a pytme data folder).
    pub embedded: bool,
}

const fn set(name: &'static str, len: usize, spacing: f64, embedded: bool) -> PytmeSet {
    PytmeSet {
        name,
        len,
        spacing,
        embedded,
    }
}

/// pytme 0.3.6's `tme/data/metadata.yaml`, in its (alphabetical) order.
pub const PYTME_SETS: [PytmeSet; 20] = [
    set("c48n309", 7416, 9.72, false),
    set("c48n527", 12648, 8.17, false),
    set("c48n9", 216, 36.47, true),
    set("c48u1", 24, 62.8, true),
    set("c48u1153", 27672, 6.6, false),
    set("c48u1201", 28824, 6.48, false),
    set("c48u1641", 39384, 5.75, false),
    set("c48u181", 4344, 12.29, false),
    set("c48u2219", 53256, 5.27, false),
    set("c48u27", 648, 20.83, true),
    set("c48u2947", 70728, 4.71, false),
    set("c48u3733", 89592, 4.37, false),
    set("c48u4749", 113976, 4.0, false),
    set("c48u5879", 141096, 3.74, false),
    set("c48u7111", 170664, 3.53, false),
    set("c48u815", 19560, 7.4, false),
    set("c48u83", 1992, 16.29, true),
    set("c48u8649", 207576, 3.26, false),
    set("c600v", 60, 44.48, true),
    set("c600vc", 360, 27.78, true),
];

/// The embedded sets in `pytme_sets.bin`'s order.
const EMBEDDED_ORDER: [&str; 6] = ["c48u1", "c600v", "c48n9", "c600vc", "c48u27", "c48u83"];

static EMBEDDED: &[u8] = include_bytes!("pytme_sets.bin");

/// The set pytme 0.3.6 picks for an angular step in degrees (`_load_quaternions_by_angle`: the
/// smallest `|step − spacing|`, the first in [`PYTME_SETS`] on a tie). Errors: a step that is
/// not a positive finite number.
pub fn pytme_set_for(step_deg: f64) -> Result<PytmeSet> {
    if !(step_deg.is_finite() && step_deg > 0.0) {
        return Err(Error::invalid(
            "angular step",
            format!("must be a positive number of degrees, got {step_deg}"),
        ));
    }
    let mut best = PYTME_SETS[0];
    for s in &PYTME_SETS[1..] {
        if (step_deg - s.spacing).abs() < (step_deg - best.spacing).abs() {
            best = *s;
        }
    }
    Ok(best)
}

/// The quaternions `(w, x, y, z)` of an embedded set, exactly as in pytme's file; `None` for a
/// set that is not embedded.
pub fn embedded_quaternions(name: &str) -> Option<Vec<[f64; 4]>> {
    let mut start = 0usize;
    for n in EMBEDDED_ORDER {
        let len = PYTME_SETS.iter().find(|s| s.name == n)?.len;
        if n == name {
            let bytes = &EMBEDDED[start * 16..(start + len) * 16];
            let q = bytes
                .chunks_exact(16)
                .map(|r| {
                    let c = |k: usize| {
                        let b = [r[4 * k], r[4 * k + 1], r[4 * k + 2], r[4 * k + 3]];
                        i32::from_le_bytes(b) as f64 / 1e9
                    };
                    [c(0), c(1), c(2), c(3)]
                })
                .collect();
            return Some(q);
        }
        start += len;
    }
    None
}

/// scipy's `Rotation.from_quat([x, y, z, w]).as_matrix()` for a quaternion given `(w, x, y,
/// z)`: normalised, then the standard formula in scipy's order of operations.
fn scipy_matrix(q: [f64; 4]) -> [f64; 9] {
    let n = (q[1] * q[1] + q[2] * q[2] + q[3] * q[3] + q[0] * q[0]).sqrt();
    let (w, x, y, z) = (q[0] / n, q[1] / n, q[2] / n, q[3] / n);
    let (x2, y2, z2, w2) = (x * x, y * y, z * z, w * w);
    let (xy, zw, xz, yw, yz, xw) = (x * y, z * w, x * z, y * w, y * z, x * w);
    [
        x2 - y2 - z2 + w2,
        2.0 * (xy - zw),
        2.0 * (xz + yw),
        2.0 * (xy + zw),
        -x2 + y2 - z2 + w2,
        2.0 * (yz - xw),
        2.0 * (xz - yw),
        2.0 * (yz + xw),
        -x2 - y2 + z2 + w2,
    ]
}

impl RotationSet {
    /// pytme's matrices of quaternions `(w, x, y, z)` (rows of a `tme/data/*.npy` file, the
    /// weight column dropped), in monomorph's frame (module docs): `P·R_i·P`, same order.
    ///
    /// Errors: no quaternion, or one that is zero or not finite.
    pub fn from_pytme_quaternions(q: &[[f64; 4]]) -> Result<Self> {
        if q.is_empty() {
            return Err(Error::Empty("pytme rotation set".into()));
        }
        let mut mats = Vec::with_capacity(q.len() * 9);
        for (i, p) in q.iter().enumerate() {
            let n2: f64 = p.iter().map(|v| v * v).sum();
            if !(n2.is_finite() && n2 > 0.0) {
                return Err(Error::invalid(
                    "pytme rotation set",
                    format!("quaternion {i} is zero or not finite: {p:?}"),
                ));
            }
            mats.extend(reverse_axes(&scipy_matrix(*p), 3));
        }
        Self::from_matrices(3, &mats)
    }

    /// pytme's own rotation set for an angular step (the one `pytme match -a STEP` searches, in
    /// its order, module docs), when it is embedded; a step ≥ 180° gives the identity alone,
    /// as pytme's CLI does. Errors: a bad step, or a set that is not embedded (the message
    /// names it; read it from pytme's data folder and use
    /// [`RotationSet::from_pytme_quaternions`]).
    pub fn pytme(step_deg: f64) -> Result<Self> {
        let s = pytme_set_for(step_deg)?;
        if step_deg >= 180.0 {
            return Self::identity(3);
        }
        match embedded_quaternions(s.name) {
            Some(q) => Self::from_pytme_quaternions(&q),
            None => Err(Error::invalid(
                "angular step",
                format!(
                    "{step_deg}° selects pytme's set {} ({} rotations, {}°), which is not built in \
                     (built in: {})",
                    s.name,
                    s.len,
                    s.spacing,
                    embedded_summary()
                ),
            )),
        }
    }
}

/// The embedded sets as `name (n rotations, spacing°)`, for messages and help.
pub fn embedded_summary() -> String {
    PYTME_SETS
        .iter()
        .filter(|s| s.embedded)
        .map(|s| format!("{} ({}, {}°)", s.name, s.len, s.spacing))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_sets_have_their_sizes_and_are_rotations() {
        let mut total = 0;
        for s in PYTME_SETS.iter().filter(|s| s.embedded) {
            let q = embedded_quaternions(s.name).unwrap();
            assert_eq!(q.len(), s.len, "{}", s.name);
            total += s.len;
            let r = RotationSet::from_pytme_quaternions(&q).unwrap();
            assert_eq!(r.len(), s.len);
        }
        assert_eq!(total * 16, EMBEDDED.len());
        assert!(embedded_quaternions("c48u181").is_none());
        // c48u1 is the cube group: identity first, then quarter turns.
        let q = embedded_quaternions("c48u1").unwrap();
        assert_eq!(q[0], [1.0, 0.0, 0.0, 0.0]);
        assert_eq!(q[1], [0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn step_picks_pytmes_set() {
        let name = |s: f64| pytme_set_for(s).unwrap().name;
        assert_eq!(name(20.0), "c48u27");
        assert_eq!(name(30.0), "c600vc");
        assert_eq!(name(15.0), "c48u83");
        assert_eq!(name(10.0), "c48n309");
        assert_eq!(name(1.0), "c48u8649");
        assert_eq!(name(90.0), "c48u1");
        assert!(pytme_set_for(0.0).is_err());
        assert_eq!(RotationSet::pytme(20.0).unwrap().len(), 648);
        assert_eq!(RotationSet::pytme(200.0).unwrap().len(), 1);
        let e = RotationSet::pytme(10.0).unwrap_err().to_string();
        assert!(e.contains("c48n309") && e.contains("not built in"), "{e}");
    }
}
