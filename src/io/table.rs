//! Peak lists: CSV (`z,y,x,score[,rotation,phi,theta,psi]`, 2-D `y,x,…`) and RELION STAR.

use std::fmt::Write as _;
use std::path::Path;

use super::io_err;
use crate::Result;

/// One called peak, as written to a table.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakRow {
    /// Position in array order (`z, y, x` or `y, x`), in voxels.
    pub position: Vec<usize>,
    /// The score at the peak.
    pub score: f64,
    /// Index of the best rotation, when a rotation-index map was given.
    pub rotation: Option<usize>,
    /// ZYZ intrinsic Euler angles in degrees (`phi, theta, psi`) of that rotation; in 2-D only
    /// `psi` is meaningful (`phi = theta = 0`).
    pub euler: Option<[f64; 3]>,
}

/// Formats peaks as CSV with a header line.
pub fn peaks_csv(rows: &[PeakRow], ndim: usize) -> String {
    let axes: &[&str] = if ndim == 2 {
        &["y", "x"]
    } else {
        &["z", "y", "x"]
    };
    let with_rot = rows.iter().any(|r| r.rotation.is_some());
    let mut s = axes.join(",");
    s.push_str(",score");
    if with_rot {
        s.push_str(",rotation,phi,theta,psi");
    }
    s.push('\n');
    for r in rows {
        for p in &r.position {
            let _ = write!(s, "{p},");
        }
        let _ = write!(s, "{}", r.score);
        if with_rot {
            let e = r.euler.unwrap_or([0.0; 3]);
            let _ = write!(
                s,
                ",{},{:.6},{:.6},{:.6}",
                r.rotation.map_or(-1i64, |v| v as i64),
                e[0],
                e[1],
                e[2]
            );
        }
        s.push('\n');
    }
    s
}

/// Formats peaks as a RELION 4 particle STAR file (`data_particles`), coordinates in voxels,
/// `_rlnCoordinateX/Y/Z` from the array's x, y, z and `_rlnAngleRot/Tilt/Psi` the ZYZ Euler
/// angles in degrees.
pub fn peaks_star(rows: &[PeakRow], ndim: usize) -> String {
    let mut s = String::from("\n# written by monomorph\n\ndata_particles\n\nloop_\n");
    let mut cols = vec!["_rlnCoordinateX", "_rlnCoordinateY"];
    if ndim == 3 {
        cols.push("_rlnCoordinateZ");
    }
    cols.extend([
        "_rlnAngleRot",
        "_rlnAngleTilt",
        "_rlnAnglePsi",
        "_rlnAutopickFigureOfMerit",
    ]);
    for (i, c) in cols.iter().enumerate() {
        let _ = writeln!(s, "{c} #{}", i + 1);
    }
    for r in rows {
        let p = &r.position;
        let xyz: Vec<usize> = p.iter().rev().copied().collect();
        for v in &xyz {
            let _ = write!(s, "{v:.1}\t");
        }
        let e = r.euler.unwrap_or([0.0; 3]);
        let _ = writeln!(s, "{:.6}\t{:.6}\t{:.6}\t{:.6}", e[0], e[1], e[2], r.score);
    }
    s
}

/// Writes peaks to `path`: a RELION STAR file when it ends in `.star`, CSV otherwise.
pub fn write_peaks(path: impl AsRef<Path>, rows: &[PeakRow], ndim: usize) -> Result<()> {
    let path = path.as_ref();
    let star = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("star"));
    let text = if star {
        peaks_star(rows, ndim)
    } else {
        peaks_csv(rows, ndim)
    };
    std::fs::write(path, text).map_err(|e| io_err(path, format!("cannot write: {e}")))
}

/// Reads Euler angles (degrees, ZYZ intrinsic) from a CSV file: one rotation per line, three
/// comma- or space-separated numbers `phi, theta, psi` (a header line without numbers is
/// skipped; lines starting with `#` are comments).
pub fn read_euler_csv(path: impl AsRef<Path>) -> Result<Vec<[f64; 3]>> {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).map_err(|e| io_err(path, format!("cannot read: {e}")))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = l
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .collect();
        let nums: std::result::Result<Vec<f64>, _> =
            parts.iter().map(|p| p.parse::<f64>()).collect();
        match nums {
            Ok(v) if v.len() == 3 && v.iter().all(|x| x.is_finite()) => {
                out.push([v[0], v[1], v[2]])
            }
            _ if i == 0 && out.is_empty() => continue, // header
            _ => {
                return Err(io_err(
                    path,
                    format!(
                        "line {}: '{l}', expected three finite angles phi,theta,psi in degrees",
                        i + 1
                    ),
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(io_err(
            path,
            "no rotations, expected lines of phi,theta,psi in degrees",
        ));
    }
    Ok(out)
}
