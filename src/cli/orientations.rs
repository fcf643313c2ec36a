//! `match`'s rotation sets beyond `--angular-step`: seed orientations from a STAR file with a
//! cone around each (`--orientations`, `--orientations-cone`), searched everywhere or each
//! near its own position (`--orientations-uncertainty`: the seeds' positions, read here), and
//! pytme's own sets (`--angular-sampling-set pytme`, `--pytme-data`).

use std::path::Path;

use monomorph::algo::matching::{Seed, Seeds};
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

/// Checks the cone's angles, each under its own flag: `[step, inplane step, in-plane range]`.
fn check_cone_angles(cone: f64, [step, inplane, range]: [f64; 3]) -> CliResult<()> {
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
    if !(range.is_finite() && range > 0.0 && range <= 180.0) {
        return Err(CliError::input(format!(
            "--orientations-inplane-range {}: expected a half-range in (0, 180] degrees about \
             the seed's spin",
            show(range)
        )));
    }
    Ok(())
}

/// Refuses a cone search of more than [`MAX_CONE_ROTATIONS`] rotations for `n` seeds (naming
/// the step that makes it large) or more than the memory left.
fn check_cone_size(n: usize, cone: f64, [step, inplane, _]: [f64; 3]) -> CliResult<()> {
    let show = super::error::show;
    let (k, m) = cone_count(cone, step, inplane);
    let total = n as f64 * (k * m + 1.0);
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
            n
        )));
    }
    // 72 bytes of matrix per rotation, held twice while the set is built: checked before
    // allocating, against the memory this process may still take (a `ulimit -v` included).
    super::output::check_memory(flag, &show(value), Some(total as u128 * 2 * 9 * 8))
}

/// The seeds of `--orientations` with a cone of `cone` degrees around each, the cone sampled
/// every `step` degrees and spun every `inplane` degrees within `±range` of the seed's spin
/// (pytme's `get_cone_rotations`; `angles = [step, inplane, range]`), searched everywhere.
/// Each angle is checked under its own flag, and the size of the set before it is built.
pub fn cone_set(path: &Path, cone: f64, angles: [f64; 3]) -> CliResult<RotationSet> {
    check_cone_angles(cone, angles)?;
    let rows = read_star_angles("--orientations", path)?;
    let seeds = RotationSet::from_relion_euler(&rows)
        .map_err(|e| CliError::from(e).about(format!("--orientations {}", path.display())))?;
    check_cone_size(seeds.len(), cone, angles)?;
    let [step, inplane, range] = angles;
    RotationSet::around_seeds_spun(&seeds, cone, step, inplane, range)
        .map_err(|e| CliError::for_flag(e, "--orientations-cone", super::error::show(cone)))
}

/// Where a seed is, as its STAR row gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum SeedAt {
    /// `_rlnCoordinateX/Y/Z`: voxels `(x, y, z)` (array axes 2, 1, 0).
    Voxels([f64; 3]),
    /// `_rlnCenteredCoordinateX/Y/ZAngst` `(x, y, z)` and the row's `_rlnTomoName`.
    Centred([f64; 3], Option<String>),
}

/// One row of a seeds STAR file: its line, RELION angles and position (when it has one).
#[derive(Debug, Clone, PartialEq)]
pub struct SeedRow {
    /// 1-based line.
    pub line: usize,
    /// `[rot, tilt, psi]`, degrees.
    pub angles: [f64; 3],
    /// Its position, when the table has one.
    pub at: Option<SeedAt>,
}

const VOXELS: [&str; 3] = ["_rlnCoordinateX", "_rlnCoordinateY", "_rlnCoordinateZ"];
const CENTRED: [&str; 3] = [
    "_rlnCenteredCoordinateXAngst",
    "_rlnCenteredCoordinateYAngst",
    "_rlnCenteredCoordinateZAngst",
];

/// The rows of the first table with RELION angles (a loop, or a block of pairs as one row),
/// with their positions: voxels when the table has `_rlnCoordinateX/Y/Z`, else centred Å with
/// `_rlnCenteredCoordinateX/Y/ZAngst`. The error names the line.
pub fn parse_star_seeds(text: &str) -> Result<Vec<SeedRow>, String> {
    let blocks = monomorph::io::star::parse_star(Path::new(""), text).map_err(|e| match e {
        monomorph::Error::Io { message, .. } => message,
        other => other.to_string(),
    })?;
    // The table as columns and rows.
    let mut table: Option<(Vec<String>, Vec<(usize, Vec<String>)>)> = None;
    'find: for b in &blocks {
        for l in &b.loops {
            if ANGLES.iter().all(|a| l.column(a).is_some()) {
                table = Some((l.columns.clone(), l.rows.clone()));
                break 'find;
            }
        }
        if ANGLES
            .iter()
            .all(|a| b.pairs.iter().any(|(k, _, _)| k == a))
        {
            let line = b
                .pairs
                .iter()
                .find(|(k, _, _)| k == ANGLES[0])
                .map_or(0, |p| p.2);
            let cols = b.pairs.iter().map(|p| p.0.clone()).collect();
            let vals = b.pairs.iter().map(|p| p.1.clone()).collect();
            table = Some((cols, vec![(line, vals)]));
            break;
        }
    }
    let Some((cols, rows)) = table else {
        return Err("no table with _rlnAngleRot, _rlnAngleTilt and _rlnAnglePsi".into());
    };
    if rows.is_empty() {
        return Err("the table with the angles has no rows".into());
    }
    let col = |n: &str| cols.iter().position(|c| c == n);
    let idx = |names: [&str; 3]| -> Option<[usize; 3]> {
        Some([col(names[0])?, col(names[1])?, col(names[2])?])
    };
    let ang = idx(ANGLES).ok_or("no angle columns")?;
    let (vox, cen, tomo) = (idx(VOXELS), idx(CENTRED), col("_rlnTomoName"));
    let val = |v: &[String], k: usize, line: usize| -> Result<f64, String> {
        let s = v
            .get(k)
            .ok_or_else(|| format!("line {line}: too few values"))?;
        match s.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(format!("line {line}: '{s}' is not a finite number")),
        }
    };
    rows.iter()
        .map(|(line, v)| {
            let three = |c: [usize; 3]| -> Result<[f64; 3], String> {
                Ok([
                    val(v, c[0], *line)?,
                    val(v, c[1], *line)?,
                    val(v, c[2], *line)?,
                ])
            };
            let at = match (vox, cen) {
                (Some(c), _) => Some(SeedAt::Voxels(three(c)?)),
                (None, Some(c)) => Some(SeedAt::Centred(
                    three(c)?,
                    tomo.and_then(|t| v.get(t).cloned()),
                )),
                (None, None) => None,
            };
            Ok(SeedRow {
                line: *line,
                angles: [
                    num(&v[ang[0]], *line)?,
                    num(&v[ang[1]], *line)?,
                    num(&v[ang[2]], *line)?,
                ],
                at,
            })
        })
        .collect()
}

/// What placing seeds in the target needs: its shape, its voxel size in Å when known, and the
/// RELION 5 project row when given.
pub struct Placement<'a> {
    /// The target's shape `(z, y, x)`.
    pub shape: &'a [usize],
    /// The run's voxel size in Å.
    pub voxel: Option<f64>,
    /// The project row (`--relion5-tomograms-star`, `--tomo-name`).
    pub metadata: Option<&'a super::project::Metadata>,
}

impl Placement<'_> {
    /// The voxel `(z, y, x)` of a seed, rounded to the nearest, or why not (`None` for a row of
    /// another tomogram).
    fn voxel_of(&self, at: &SeedAt) -> Result<Option<[f64; 3]>, String> {
        let xyz = match at {
            SeedAt::Voxels(v) => *v,
            SeedAt::Centred(c, name) => {
                let geo = self.metadata.and_then(|m| m.geometry());
                if let (Some(g), Some(n)) = (&geo, name)
                    && *n != g.tomo_name
                {
                    return Ok(None);
                }
                // RELION's reader: i·b = c/ps + X/2 (X the bin-1 size); without a project,
                // b = 1, ps = the run's voxel and X = the target's size (what `peaks` writes).
                let (b, size, ps) = match &geo {
                    Some(g) => (g.binning, g.size, g.ts_pixel),
                    None => {
                        let s = self.shape;
                        let v = self.voxel.ok_or(
                            "centred Å positions need the run's voxel size (an MRC target's \
                             header, --sampling-rate or --relion5-tomograms-star)",
                        )?;
                        (1.0, [s[2] as f64, s[1] as f64, s[0] as f64], v)
                    }
                };
                [0, 1, 2].map(|a| (c[a] / ps + size[a] / 2.0) / b)
            }
        };
        Ok(Some([xyz[2].round(), xyz[1].round(), xyz[0].round()]))
    }
}

/// The seeded search of `--orientations-uncertainty`: each seed of `path` (a row with a
/// position; rows of another `_rlnTomoName` than the project's skipped) with its own cone
/// (`cone`, `angles = [step, inplane step, in-plane range]`), searched within `radius` voxels
/// `(z, y, x)` of its voxel. The set is the seeds' own sets in file order.
pub fn seeded_set(
    path: &Path,
    cone: f64,
    angles: [f64; 3],
    radius: [f64; 3],
    place: &Placement<'_>,
) -> CliResult<(RotationSet, Seeds)> {
    check_cone_angles(cone, angles)?;
    let flag = format!("--orientations {}", path.display());
    let text = monomorph::io::read_text_file(path)
        .map_err(|e| CliError::from(e).about("--orientations"))?;
    let rows = parse_star_seeds(&text).map_err(|m| CliError::input(format!("{flag}: {m}")))?;
    if place.metadata.and_then(|m| m.geometry()).is_none() {
        let mut names: Vec<&str> = Vec::new();
        for r in &rows {
            if let Some(SeedAt::Centred(_, Some(n))) = &r.at
                && !names.contains(&n.as_str())
            {
                names.push(n);
            }
        }
        if names.len() > 1 {
            return Err(CliError::input(format!(
                "{flag}: rows of {} tomograms (_rlnTomoName {}, …), expected one; pass \
                 --relion5-tomograms-star T.star --tomo-name NAME to take that tomogram's",
                names.len(),
                names[..2].join(", ")
            )));
        }
    }
    let mut eulers = Vec::with_capacity(rows.len());
    let mut positions = Vec::with_capacity(rows.len());
    for r in &rows {
        let Some(at) = &r.at else {
            return Err(CliError::input(format!(
                "--orientations-uncertainty: {flag} has no seed positions, expected \
                 _rlnCoordinateX/Y/Z (voxels) or _rlnCenteredCoordinateX/Y/ZAngst beside the \
                 angles (as `monomorph peaks --out x.star` writes)"
            )));
        };
        let Some(v) = place
            .voxel_of(at)
            .map_err(|m| CliError::input(format!("{flag}: line {}: {m}", r.line)))?
        else {
            continue;
        };
        let s = place.shape;
        let inside = v.iter().zip(s).all(|(&x, &n)| x >= 0.0 && x < n as f64);
        if !inside {
            return Err(CliError::input(format!(
                "{flag}: line {}: the seed at voxel (z, y, x) = ({}, {}, {}) lies outside the \
                 target of {}×{}×{}, expected seeds inside the target",
                r.line, v[0], v[1], v[2], s[0], s[1], s[2]
            )));
        }
        eulers.push(r.angles);
        positions.push(v.map(|x| x as usize).to_vec());
    }
    if positions.is_empty() {
        let name = place
            .metadata
            .and_then(|m| m.geometry())
            .map_or_else(String::new, |g| g.tomo_name);
        return Err(CliError::input(format!(
            "{flag}: no row of the tomogram '{name}' (_rlnTomoName), expected its seeds"
        )));
    }
    check_cone_size(positions.len(), cone, angles)?;
    let poses = RotationSet::from_relion_euler(&eulers)
        .map_err(|e| CliError::from(e).about(flag.clone()))?;
    let [step, inplane, range] = angles;
    let (set, ranges) = RotationSet::around_each_seed(&poses, cone, step, inplane, range)
        .map_err(|e| CliError::for_flag(e, "--orientations-cone", super::error::show(cone)))?;
    // Each seed's neighbourhood lies along its particle's axes (its pose, pytme's oriented
    // acceptance ellipsoid).
    let seeds = positions
        .into_iter()
        .zip(ranges)
        .enumerate()
        .map(|(i, (position, rotations))| Seed {
            position,
            rotations,
            pose: Some(poses.matrix(i).to_vec()),
        })
        .collect();
    Ok((set, Seeds::new(seeds, radius.to_vec())))
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
