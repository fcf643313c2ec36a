//! `match`'s rotation sets beyond `--angular-step`: seed orientations from a STAR file with a
//! cone around each (`--orientations`, `--orientations-cone`), and pytme's own sets
//! (`--angular-sampling-set pytme`, `--pytme-data`).

use std::path::Path;

use monomorph::algo::rotations::{
    RotationSet, embedded_quaternions, embedded_summary, pytme_set_for,
};
use ndarray::Ix2;

use super::error::{CliError, CliResult};

/// The RELION Euler angles `[rot, tilt, psi]` (degrees) of a STAR file: every row of the first
/// table (a `loop_`, or a block of `_label value` pairs for one seed) that has
/// `_rlnAngleRot`, `_rlnAngleTilt` and `_rlnAnglePsi`. Read by the one STAR reader
/// ([`monomorph::io::star`], RELION's quoting rules), so quoted names and `#` inside names
/// are values, as in monomorph's own `particles.star`.
pub fn read_star_angles(flag: &str, path: &Path) -> CliResult<Vec<[f64; 3]>> {
    let text = monomorph::io::read_text_file(path).map_err(|e| CliError::from(e).about(flag))?;
    parse_star_angles(&text).map_err(|m| CliError::input(format!("{flag} {}: {m}", path.display())))
}

const ANGLES: [&str; 3] = ["_rlnAngleRot", "_rlnAngleTilt", "_rlnAnglePsi"];

/// [`read_star_angles`] on the text of a STAR file; the error names the line.
pub fn parse_star_angles(text: &str) -> Result<Vec<[f64; 3]>, String> {
    let blocks = monomorph::io::star::parse_star(Path::new(""), text).map_err(|e| match e {
        monomorph::Error::Io { message, .. } => message,
        other => other.to_string(),
    })?;
    for b in &blocks {
        for l in &b.loops {
            let cols: Vec<Option<usize>> = ANGLES.iter().map(|a| l.column(a)).collect();
            let [Some(r), Some(t), Some(p)] = cols[..] else {
                continue;
            };
            if l.rows.is_empty() {
                return Err("the table with the angles has no rows".into());
            }
            return l
                .rows
                .iter()
                .map(|(no, v)| Ok([num(&v[r], *no)?, num(&v[t], *no)?, num(&v[p], *no)?]))
                .collect();
        }
        // A block of `_label value` pairs (one seed).
        let vals: Vec<Option<(&String, usize)>> = ANGLES
            .iter()
            .map(|a| {
                b.pairs
                    .iter()
                    .find(|(k, _, _)| k == a)
                    .map(|(_, v, ln)| (v, *ln))
            })
            .collect();
        if let [Some(r), Some(t), Some(p)] = vals[..] {
            return Ok(vec![[num(r.0, r.1)?, num(t.0, t.1)?, num(p.0, p.1)?]]);
        }
    }
    Err("no table with _rlnAngleRot, _rlnAngleTilt and _rlnAnglePsi".into())
}

fn num(s: &str, line: usize) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!(
            "line {line}: '{s}' is not a finite number of degrees"
        )),
    }
}

/// The most rotations a cone search may produce (the library's bound, as for
/// `--angular-step`).
const MAX_CONE_ROTATIONS: usize = 50_000_000;

/// The number of rotations pytme's cone set has for these angles (`k` directions × `m`
/// in-plane angles, as [`RotationSet::cone`] counts them), as a float (no overflow).
fn cone_count(cone: f64, step: f64, inplane: f64) -> (f64, f64) {
    let m = (360.0 / inplane).round_ties_even().max(1.0);
    let k = if cone <= 0.0 {
        1.0
    } else {
        let cap = 2.0 * std::f64::consts::PI * (1.0 - cone.to_radians().cos());
        (cap / step.to_radians().powi(2)).ceil().max(1.0)
    };
    (k, m)
}

/// The seeds of `--orientations` with a cone of `cone` degrees around each, the cone sampled
/// every `step` degrees and spun every `inplane` degrees (pytme's `get_cone_rotations`).
/// Each angle is checked under its own flag, and the size of the set before it is built.
pub fn cone_set(path: &Path, cone: f64, step: f64, inplane: f64) -> CliResult<RotationSet> {
    let show = super::error::show;
    if !(cone.is_finite() && (0.0..=180.0).contains(&cone)) {
        return Err(CliError::input(format!(
            "--orientations-cone {}: expected a half-angle from 0 to 180 degrees",
            show(cone)
        )));
    }
    for (flag, v) in [
        ("--angular-step", step),
        ("--orientations-inplane-step", inplane),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return Err(CliError::input(format!(
                "{flag} {}: expected a positive number of degrees",
                show(v)
            )));
        }
    }
    let angles = read_star_angles("--orientations", path)?;
    let seeds = RotationSet::from_relion_euler(&angles)
        .map_err(|e| CliError::from(e).about(format!("--orientations {}", path.display())))?;
    let (k, m) = cone_count(cone, step, inplane);
    let total = seeds.len() as f64 * (k * m + 1.0);
    let (flag, value) = if m >= k {
        ("--orientations-inplane-step", inplane)
    } else {
        ("--angular-step", step)
    };
    if total > MAX_CONE_ROTATIONS as f64 {
        return Err(CliError::input(format!(
            "{flag} {}: the cone search (--orientations-cone {}) would hold {total:e} rotations \
             ({k} directions × {m} in-plane angles + 1, for each of {} seed(s)), more than the \
             {MAX_CONE_ROTATIONS} a search may have, expected a coarser step",
            show(value),
            show(cone),
            seeds.len()
        )));
    }
    // 72 bytes of matrix per rotation, held twice while the set is built: checked before
    // allocating, against the memory this process may still take (a `ulimit -v` included).
    super::output::check_memory(flag, &show(value), Some(total as u128 * 2 * 9 * 8))?;
    RotationSet::around_seeds(&seeds, cone, step, inplane)
        .map_err(|e| CliError::for_flag(e, "--orientations-cone", show(cone)))
}

/// pytme's own set for `step` (`--angular-sampling-set pytme`): built in, or read from pytme's
/// data folder `data` (`tme/data`, `<name>.npy` with rows `w, x, y, z, weight`).
pub fn pytme_set(step: f64, data: Option<&Path>) -> CliResult<RotationSet> {
    let flag = "--angular-step";
    let s =
        pytme_set_for(step).map_err(|e| CliError::for_flag(e, flag, super::error::show(step)))?;
    if step >= 180.0 {
        return Ok(RotationSet::identity(3)?);
    }
    let q = match (embedded_quaternions(s.name), data) {
        (Some(q), _) => q,
        (None, Some(dir)) => read_pytme_npy(&dir.join(format!("{}.npy", s.name)), s.len)?,
        (None, None) => {
            return Err(CliError::input(format!(
                "--angular-sampling-set pytme: {flag} {} selects pytme's set {} ({} rotations, \
                 {}°), which is not built in (built in: {}); pass --pytme-data DIR, pytme's \
                 tme/data folder",
                super::error::show(step),
                s.name,
                s.len,
                s.spacing,
                embedded_summary()
            )));
        }
    };
    RotationSet::from_pytme_quaternions(&q)
        .map_err(|e| CliError::from(e).about(format!("--pytme-data {}", s.name)))
}

fn read_pytme_npy(p: &Path, len: usize) -> CliResult<Vec<[f64; 4]>> {
    let what = format!("--pytme-data {}", p.display());
    monomorph::io::check_regular_file(p).map_err(|e| CliError::from(e).about("--pytme-data"))?;
    let a: ndarray::ArrayD<f64> = ndarray_npy::read_npy(p)
        .map_err(|e| CliError::input(format!("{what}: cannot read a float64 .npy: {e}")))?;
    let a = a
        .into_dimensionality::<Ix2>()
        .map_err(|_| CliError::input(format!("{what}: expected (n, 5) rows w, x, y, z, weight")))?;
    if a.ncols() != 5 || a.nrows() != len {
        return Err(CliError::input(format!(
            "{what}: shape ({}, {}), expected ({len}, 5) as in pytme 0.3.6's metadata.yaml",
            a.nrows(),
            a.ncols()
        )));
    }
    Ok(a.rows()
        .into_iter()
        .map(|r| [r[0], r[1], r[2], r[3]])
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_loops_and_pairs() {
        let t = "# c\ndata_optics\nloop_\n_rlnOpticsGroup #1\n1\n\ndata_particles\n\nloop_\n\
                 _rlnCoordinateX #1\n_rlnAngleRot #2\n_rlnAngleTilt #3\n_rlnAnglePsi #4\n\
                 1 10 20 30\n2 -5 0 7.5\n";
        assert_eq!(
            parse_star_angles(t).unwrap(),
            vec![[10.0, 20.0, 30.0], [-5.0, 0.0, 7.5]]
        );
        let one = "data_\n_rlnAngleRot 1\n_rlnAngleTilt 2\n_rlnAnglePsi 3\n";
        assert_eq!(parse_star_angles(one).unwrap(), vec![[1.0, 2.0, 3.0]]);
        assert!(parse_star_angles("data_\nloop_\n_rlnAngleRot\n1\n").is_err());
        let e = parse_star_angles("loop_\n_rlnAngleRot\n_rlnAngleTilt\n_rlnAnglePsi\n1 x 3\n")
            .unwrap_err();
        assert!(e.contains("line 5"), "{e}");
        let e = parse_star_angles("loop_\n_rlnAngleRot\n_rlnAngleTilt\n_rlnAnglePsi\n1 2\n")
            .unwrap_err();
        assert!(e.contains("2 values"), "{e}");
        // Quoted names and `#` inside a name (monomorph's own particles.star) are values.
        let t = "data_particles\nloop_\n_rlnMicrographName #1\n_rlnAngleRot #2\n\
                 _rlnAngleTilt #3\n_rlnAnglePsi #4\n\"a b.mrc\" 1 2 3\nc#d.mrc 4 5 6\n";
        assert_eq!(
            parse_star_angles(t).unwrap(),
            vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
        );
    }
}
