//! Peak lists: CSV (`z,y,x,score[,rotation,rot,tilt,psi]`, 2-D `y,x,score[,rotation,psi]`) and
//! RELION STAR, and `--euler` angle files.
//!
//! Every angle here is RELION's, in degrees (`monomorph::algo::rotations`, "Frames"):
//! `(rot, tilt, psi)` with `Rz(rot)·Ry(tilt)·Rz(psi)` the rotation acting on `(x, y, z)` (the
//! transpose of RELION's `Euler_angles2matrix`); in 2-D `psi` alone, on `(x, y)`. Positions are
//! array indices; STAR's `_rlnCoordinateX/Y/Z` are the array's axes 2, 1, 0 (`x, y, z`).

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
    /// RELION's Euler angles in degrees (`rot, tilt, psi`) of that rotation (module docs); in
    /// 2-D only `psi` is meaningful and written (`rot = tilt = 0`).
    pub euler: Option<[f64; 3]>,
    /// The sub-voxel position (array order), when refined: written instead of `position`
    /// (fractional coordinates, as pytme's postprocess --peak-oversampling writes them).
    pub subvoxel: Option<Vec<f64>>,
    /// The template of the best score (0-based), when several were matched in one pass: CSV
    /// column `template`, STAR `_rlnClassNumber` (the index + 1).
    pub template: Option<usize>,
}

impl PeakRow {
    /// The coordinates written, in array order: the sub-voxel position when there is one.
    fn coords(&self) -> Vec<String> {
        match &self.subvoxel {
            Some(v) => v.iter().map(|x| format!("{x}")).collect(),
            None => self.position.iter().map(|x| x.to_string()).collect(),
        }
    }
}

/// What a peak table says about how it was made, beyond its rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableMeta {
    /// Comment lines (without the leading `# `), written at the top of a STAR file.
    pub comments: Vec<String>,
    /// `_rlnMicrographName` of every row (the target the scores came from), when known.
    pub micrograph: Option<String>,
    /// The pixel size in Å (the target's voxel size), when known: a STAR file then carries a
    /// RELION 3.1+ `data_optics` block (one optics group with `_rlnImagePixelSize`, as pytme
    /// writes) and every particle `_rlnOpticsGroup 1`. Without it the block is left out (with
    /// a comment saying why) rather than written with an invented pixel size.
    pub pixel_size: Option<f64>,
}

/// Formats peaks as CSV with a header line: `z,y,x,score` (2-D `y,x,score`), plus
/// `rotation,rot,tilt,psi` (2-D `rotation,psi`) when rotations are known: the rotation's index
/// and RELION's angles in degrees.
pub fn peaks_csv(rows: &[PeakRow], ndim: usize) -> String {
    let axes: &[&str] = if ndim == 2 {
        &["y", "x"]
    } else {
        &["z", "y", "x"]
    };
    let with_rot = rows.iter().any(|r| r.rotation.is_some());
    let with_template = rows.iter().any(|r| r.template.is_some());
    let mut s = axes.join(",");
    s.push_str(",score");
    if with_rot {
        s.push_str(if ndim == 2 {
            ",rotation,psi"
        } else {
            ",rotation,rot,tilt,psi"
        });
    }
    if with_template {
        s.push_str(",template");
    }
    s.push('\n');
    for r in rows {
        for p in r.coords() {
            let _ = write!(s, "{p},");
        }
        let _ = write!(s, "{}", r.score);
        if with_rot {
            let e = r.euler.unwrap_or([0.0; 3]);
            let _ = write!(s, ",{}", r.rotation.map_or(-1i64, |v| v as i64));
            if ndim == 2 {
                let _ = write!(s, ",{:.6}", e[2]);
            } else {
                let _ = write!(s, ",{:.6},{:.6},{:.6}", e[0], e[1], e[2]);
            }
        }
        if with_template {
            let _ = write!(s, ",{}", r.template.map_or(-1i64, |v| v as i64));
        }
        s.push('\n');
    }
    s
}

/// Formats peaks as a RELION 4 particle STAR file (`# version 40001`, `data_particles`):
/// `_rlnCoordinateX/Y[/Z]` in voxels from the array's x, y[, z] (axes 2, 1[, 0]), RELION's
/// angles `_rlnAngleRot/Tilt/Psi` in degrees (2-D: `_rlnAnglePsi` alone),
/// `_rlnMicrographName` when known, the score as `_rlnAutopickFigureOfMerit`, the template of
/// a several-template match as `_rlnClassNumber` (its index + 1); with a known
/// pixel size ([`TableMeta::pixel_size`]) also a `data_optics` block and `_rlnOpticsGroup`.
pub fn peaks_star(rows: &[PeakRow], ndim: usize) -> String {
    peaks_star_with(rows, ndim, &TableMeta::default())
}

/// [`peaks_star`] with comment lines and a micrograph name.
pub fn peaks_star_with(rows: &[PeakRow], ndim: usize, meta: &TableMeta) -> String {
    let one = MicrographPeaks {
        name: meta.micrograph.as_deref(),
        rows,
        pixel_size: meta.pixel_size,
    };
    star_text(&[one], ndim, &meta.comments)
}

/// One micrograph's (tomogram's) peaks in a table of several ([`peaks_star_many`]).
#[derive(Debug, Clone, Copy)]
pub struct MicrographPeaks<'a> {
    /// Its `_rlnMicrographName`.
    pub name: Option<&'a str>,
    /// Its peaks.
    pub rows: &'a [PeakRow],
    /// Its pixel size in Å, when known.
    pub pixel_size: Option<f64>,
}

/// One RELION STAR file of several micrographs' peaks, as [`peaks_star_with`] writes one:
/// every row names its micrograph (`_rlnMicrographName`); when every micrograph has a pixel
/// size, `data_optics` holds one optics group per distinct pixel size (in order of first
/// appearance) and each row its group, else no optics block (with a comment saying why).
pub fn peaks_star_many(groups: &[MicrographPeaks<'_>], ndim: usize, comments: &[String]) -> String {
    star_text(groups, ndim, comments)
}

/// A STAR value as RELION reads it back ([`super::star::star_quote`]); a value no quoting can
/// hold (a control character, both quotes followed by a space) is written with its control
/// characters escaped: callers that name files refuse such names before writing
/// (`--target-list`).
fn star_value(m: &str) -> String {
    super::star::star_quote(m).unwrap_or_else(|| format!("\"{}\"", m.escape_default()))
}

fn star_text(groups: &[MicrographPeaks<'_>], ndim: usize, comments: &[String]) -> String {
    let mut s = format!("\n# written by monomorph {}\n", env!("CARGO_PKG_VERSION"));
    for c in comments {
        for line in c.lines() {
            let _ = writeln!(s, "# {line}");
        }
    }
    // MRC headers hold f32: a pixel size is its shortest f32 form, not the widening's digits.
    let pixels: Option<Vec<f32>> = groups
        .iter()
        .map(|g| {
            g.pixel_size
                .filter(|p| p.is_finite() && *p > 0.0)
                .map(|p| p as f32)
        })
        .collect();
    let pixels = pixels.filter(|p| !p.is_empty());
    let mut optics: Vec<f32> = Vec::new();
    for &p in pixels.iter().flatten() {
        if !optics.iter().any(|&q| q.to_bits() == p.to_bits()) {
            optics.push(p);
        }
    }
    if pixels.is_none() {
        s.push_str(
            "# no data_optics block: no single pixel size is known (the scores and the matching \
             run carry none, or an anisotropic one)\n",
        );
    }
    s.push_str("\n# version 40001\n\n");
    if !optics.is_empty() {
        s.push_str(
            "data_optics\n\nloop_\n_rlnOpticsGroup #1\n_rlnOpticsGroupName #2\n\
             _rlnImagePixelSize #3\n",
        );
        for (k, px) in optics.iter().enumerate() {
            let _ = writeln!(s, "{}\topticsGroup{}\t{px}", k + 1, k + 1);
        }
        s.push_str("\n\n# version 40001\n\n");
    }
    s.push_str("data_particles\n\nloop_\n");
    let mut cols = vec!["_rlnCoordinateX", "_rlnCoordinateY"];
    if ndim == 3 {
        cols.extend(["_rlnCoordinateZ", "_rlnAngleRot", "_rlnAngleTilt"]);
    }
    cols.push("_rlnAnglePsi");
    let named = groups.iter().any(|g| g.name.is_some());
    if named {
        cols.push("_rlnMicrographName");
    }
    cols.push("_rlnAutopickFigureOfMerit");
    let classes = groups
        .iter()
        .any(|g| g.rows.iter().any(|r| r.template.is_some()));
    if classes {
        cols.push("_rlnClassNumber");
    }
    if !optics.is_empty() {
        cols.push("_rlnOpticsGroup");
    }
    for (i, c) in cols.iter().enumerate() {
        let _ = writeln!(s, "{c} #{}", i + 1);
    }
    for (g, px) in groups.iter().zip(
        pixels
            .iter()
            .flatten()
            .map(Some)
            .chain(std::iter::repeat(None)),
    ) {
        let name = star_value(g.name.unwrap_or(""));
        let group = px.and_then(|p| optics.iter().position(|q| q.to_bits() == p.to_bits()));
        for r in g.rows {
            for v in r.coords().iter().rev() {
                let _ = write!(s, "{v}\t");
            }
            let e = r.euler.unwrap_or([0.0; 3]);
            if ndim == 3 {
                let _ = write!(s, "{:.6}\t{:.6}\t", e[0], e[1]);
            }
            let _ = write!(s, "{:.6}\t", e[2]);
            if named {
                let _ = write!(s, "{name}\t");
            }
            let _ = write!(s, "{:.6}", r.score);
            if classes {
                // RELION's classes count from 1; 0: no class (a row of another micrograph).
                let _ = write!(s, "\t{}", r.template.map_or(0, |t| t + 1));
            }
            if let Some(k) = group {
                let _ = write!(s, "\t{}", k + 1);
            }
            s.push('\n');
        }
    }
    s
}

/// Writes peaks to `path`: a RELION STAR file when it ends in `.star`, CSV otherwise.
pub fn write_peaks(path: impl AsRef<Path>, rows: &[PeakRow], ndim: usize) -> Result<()> {
    write_peaks_with(path, rows, ndim, &TableMeta::default())
}

/// [`write_peaks`] with the table's metadata (used by STAR files only: CSV has just the header
/// line and the rows).
pub fn write_peaks_with(
    path: impl AsRef<Path>,
    rows: &[PeakRow],
    ndim: usize,
    meta: &TableMeta,
) -> Result<()> {
    let path = path.as_ref();
    let star = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("star"));
    let text = if star {
        peaks_star_with(rows, ndim, meta)
    } else {
        peaks_csv(rows, ndim)
    };
    std::fs::write(path, text).map_err(|e| io_err(path, format!("cannot write: {e}")))
}

/// Reads Euler angles from a CSV file: RELION's `rot, tilt, psi` in degrees (module docs), one
/// rotation per line as three comma- or space-separated numbers. Blank lines and lines starting
/// with `#` are skipped; the first other line is a header, and skipped, only when none of its
/// fields is a number (`rot,tilt,psi`); any other line that is not three finite numbers is an
/// error naming its line (so `10,20` on line 1 is an error, not a header).
pub fn read_euler_csv(path: impl AsRef<Path>) -> Result<Vec<[f64; 3]>> {
    let path = path.as_ref();
    let text = super::read_text_file(path)?;
    parse_euler_csv(&text).map_err(|m| io_err(path, m))
}

/// The parser of [`read_euler_csv`] on the file's text; the error is the message (line number,
/// the line, what was expected).
pub fn parse_euler_csv(text: &str) -> std::result::Result<Vec<[f64; 3]>, String> {
    let mut out = Vec::new();
    let mut first = true;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = l
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .collect();
        let is_header = first && parts.iter().all(|p| p.parse::<f64>().is_err());
        first = false;
        if is_header {
            continue;
        }
        let nums: std::result::Result<Vec<f64>, _> =
            parts.iter().map(|p| p.parse::<f64>()).collect();
        match nums {
            Ok(v) if v.len() == 3 && v.iter().all(|x| x.is_finite()) => {
                out.push([v[0], v[1], v[2]])
            }
            _ => {
                return Err(format!(
                    "line {}: '{l}', expected three finite angles rot,tilt,psi in degrees \
                     (RELION's convention)",
                    i + 1
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("no rotations, expected lines of rot,tilt,psi in degrees".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euler_csv_header_only_without_numbers() {
        assert_eq!(
            parse_euler_csv("rot,tilt,psi\n10,20,30\n").unwrap(),
            vec![[10.0, 20.0, 30.0]]
        );
        assert_eq!(
            parse_euler_csv("# c\n\nphi theta psi\n1 2 3\n4,5,6").unwrap(),
            vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
        );
        let e = parse_euler_csv("10,20\n1,2,3\n").unwrap_err();
        assert!(e.starts_with("line 1: '10,20'"), "{e}");
        let e = parse_euler_csv("rot,20,psi\n1,2,3\n").unwrap_err();
        assert!(e.starts_with("line 1:"), "{e}");
        let e = parse_euler_csv("1,2,3\nrot,tilt,psi\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = parse_euler_csv("a,b,c\n").unwrap_err();
        assert!(e.contains("no rotations"), "{e}");
        assert!(parse_euler_csv("1,2,nan\n").is_err());
    }

    #[test]
    fn subvoxel_positions_replace_the_voxel() {
        let row = PeakRow {
            position: vec![1, 2, 3],
            score: 0.5,
            rotation: None,
            euler: None,
            subvoxel: Some(vec![1.125, 2.0, 2.75]),
            template: None,
        };
        let s = peaks_star(std::slice::from_ref(&row), 3);
        assert!(s.contains("2.75\t2\t1.125\t"), "{s}");
        let c = peaks_csv(&[row], 3);
        assert!(c.contains("\n1.125,2,2.75,0.5\n"), "{c}");
    }

    #[test]
    fn star_2d_has_psi_only_and_3d_reverses_axes() {
        let row = PeakRow {
            position: vec![3, 4],
            score: 0.5,
            rotation: Some(1),
            euler: Some([0.0, 0.0, 30.0]),
            subvoxel: None,
            template: None,
        };
        let s = peaks_star(std::slice::from_ref(&row), 2);
        assert!(
            s.contains("_rlnAnglePsi #3") && !s.contains("_rlnAngleRot"),
            "{s}"
        );
        assert!(s.contains("4\t3\t30.000000\t0.500000"), "{s}");
        let c = peaks_csv(&[row], 2);
        assert_eq!(c.lines().next(), Some("y,x,score,rotation,psi"));
        let row3 = PeakRow {
            position: vec![1, 2, 3],
            score: 0.25,
            rotation: Some(0),
            euler: Some([10.0, 20.0, 30.0]),
            subvoxel: None,
            template: None,
        };
        let meta = TableMeta {
            comments: vec!["hello".into()],
            micrograph: Some("my tomo.mrc".into()),
            pixel_size: None,
        };
        let s = peaks_star_with(std::slice::from_ref(&row3), 3, &meta);
        assert!(s.contains("# hello\n"), "{s}");
        assert!(s.contains("# version 40001"), "{s}");
        assert!(
            s.contains("3\t2\t1\t10.000000\t20.000000\t30.000000\t\"my tomo.mrc\"\t0.250000\n"),
            "{s}"
        );
        // No pixel size: no optics block (and a comment saying why), no optics-group column.
        assert!(
            !s.contains("\ndata_optics") && !s.contains("_rlnOpticsGroup"),
            "{s}"
        );
        assert!(s.contains("# no data_optics block"), "{s}");
        // A pixel size: RELION 3.1+'s optics block before the particles, group 1 on each row.
        let meta = TableMeta {
            pixel_size: Some(f64::from(13.48f32)),
            ..meta
        };
        let s = peaks_star_with(&[row3], 3, &meta);
        let optics = s.find("data_optics").expect("optics block");
        let particles = s.find("data_particles").expect("particles block");
        assert!(optics < particles, "{s}");
        assert!(
            s.contains("_rlnImagePixelSize #3\n1\topticsGroup1\t13.48\n"),
            "{s}"
        );
        assert!(s.contains("_rlnOpticsGroup #9\n"), "{s}");
        assert!(s.contains("\t0.250000\t1\n"), "{s}");
    }
}
