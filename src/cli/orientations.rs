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
/// `_rlnAngleRot`, `_rlnAngleTilt` and `_rlnAnglePsi`.
pub fn read_star_angles(flag: &str, path: &Path) -> CliResult<Vec<[f64; 3]>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::input(format!("{flag} {}: cannot read: {e}", path.display())))?;
    parse_star_angles(&text).map_err(|m| CliError::input(format!("{flag} {}: {m}", path.display())))
}

const ANGLES: [&str; 3] = ["_rlnAngleRot", "_rlnAngleTilt", "_rlnAnglePsi"];

/// [`read_star_angles`] on the text of a STAR file; the error names the line.
pub fn parse_star_angles(text: &str) -> Result<Vec<[f64; 3]>, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].1;
        if l == "loop_" {
            // Labels, then rows until a blank line, a new block or another loop.
            let mut labels = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].1.starts_with('_') {
                labels.push(lines[i].1.split_whitespace().next().unwrap_or(""));
                i += 1;
            }
            let cols: Vec<Option<usize>> = ANGLES
                .iter()
                .map(|a| labels.iter().position(|l| l == a))
                .collect();
            let mut rows = Vec::new();
            while i < lines.len() {
                let (no, l) = lines[i];
                if l.is_empty() {
                    if rows.is_empty() {
                        i += 1;
                        continue;
                    }
                    break;
                }
                if l.starts_with("data_") || l == "loop_" || l.starts_with('_') {
                    break;
                }
                if let [Some(r), Some(t), Some(p)] = cols[..] {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    if f.len() != labels.len() {
                        return Err(format!(
                            "line {no}: {} values, expected {} (one per label)",
                            f.len(),
                            labels.len()
                        ));
                    }
                    rows.push([num(f[r], no)?, num(f[t], no)?, num(f[p], no)?]);
                }
                i += 1;
            }
            if cols.iter().all(Option::is_some) {
                if rows.is_empty() {
                    return Err("the table with the angles has no rows".into());
                }
                return Ok(rows);
            }
            continue;
        }
        // A block of `_label value` pairs (one seed).
        if l.starts_with('_') {
            let mut vals: [Option<f64>; 3] = [None; 3];
            while i < lines.len() && lines[i].1.starts_with('_') {
                let (no, l) = lines[i];
                let mut f = l.split_whitespace();
                let (label, value) = (f.next().unwrap_or(""), f.next());
                if let Some(k) = ANGLES.iter().position(|a| *a == label) {
                    let v = value.ok_or_else(|| format!("line {no}: {label} has no value"))?;
                    vals[k] = Some(num(v, no)?);
                }
                i += 1;
            }
            if let [Some(r), Some(t), Some(p)] = vals {
                return Ok(vec![[r, t, p]]);
            }
            continue;
        }
        i += 1;
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

/// The seeds of `--orientations` with a cone of `cone` degrees around each, the cone sampled
/// every `step` degrees and spun every `inplane` degrees (pytme's `get_cone_rotations`).
pub fn cone_set(path: &Path, cone: f64, step: f64, inplane: f64) -> CliResult<RotationSet> {
    let angles = read_star_angles("--orientations", path)?;
    let seeds = RotationSet::from_relion_euler(&angles)
        .map_err(|e| CliError::from(e).about(format!("--orientations {}", path.display())))?;
    RotationSet::around_seeds(&seeds, cone, step, inplane)
        .map_err(|e| CliError::for_flag(e, "--orientations-cone", super::error::show(cone)))
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
    }
}
