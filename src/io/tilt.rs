//! Tilt-series metadata for the Fourier filters of `monomorph match`: tilt-angle files
//! (IMOD `.tlt` and other text: one angle per line, or a header naming the columns `angles`
//! and `weights`; AreTomo's three columns `angle index exposure`), CTFFIND4 output, and
//! RELION/GCTF STAR files with `_rlnDefocusU/V/Angle`. Every error names the file and line.

use std::path::Path;

use super::io_err;
use crate::Result;

/// Tilt angles (degrees) and, when the file has them, the dose per tilt (e/Å²; pytme's
/// `weights` column, or the cumulative exposure of an AreTomo file).
#[derive(Debug, Clone, PartialEq)]
pub struct TiltAngles {
    /// One angle per tilt, in degrees, in file order.
    pub angles: Vec<f64>,
    /// Dose per tilt, when the file gives it.
    pub doses: Option<Vec<f64>>,
}

/// CTF parameters read from a file: one row per tilt, and the microscope when the file says.
#[derive(Debug, Clone, PartialEq)]
pub struct CtfFile {
    /// Per tilt: mean defocus (Å), half difference (Å), astigmatism azimuth (degrees), phase
    /// shift (radians).
    pub tilts: Vec<monomorph_core::algo::filters::TiltCtf>,
    /// Acceleration voltage in kV, if given.
    pub voltage_kv: Option<f64>,
    /// Spherical aberration in Å (converted from mm), if given.
    pub cs: Option<f64>,
    /// Amplitude contrast, if given.
    pub amplitude_contrast: Option<f64>,
    /// Pixel size in Å, if given.
    pub pixel_size: Option<f64>,
    /// Tilt angles in degrees, if the file gives them (RELION tomography STAR).
    pub angles: Option<Vec<f64>>,
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| io_err(path, format!("cannot read: {e}")))
}

fn number(path: &Path, line: usize, s: &str) -> Result<f64> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| io_err(path, format!("line {line}: '{s}' is not a finite number")))
}

/// Reads a tilt-angle file (see the module docs).
pub fn read_tilt_angles(path: impl AsRef<Path>) -> Result<TiltAngles> {
    let path = path.as_ref();
    parse_tilt_angles(path, &read_text(path)?)
}

/// Parses the text of a tilt-angle file; `path` names it in errors.
pub fn parse_tilt_angles(path: &Path, text: &str) -> Result<TiltAngles> {
    let mut rows: Vec<(usize, Vec<f64>)> = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|f| !f.is_empty())
            .collect();
        if rows.is_empty() && header.is_none() && fields[0].parse::<f64>().is_err() {
            header = Some(fields.iter().map(|f| f.to_ascii_lowercase()).collect());
            continue;
        }
        let vals = fields
            .iter()
            .map(|f| number(path, i + 1, f))
            .collect::<Result<Vec<f64>>>()?;
        if let Some((_, first)) = rows.first()
            && first.len() != vals.len()
        {
            return Err(io_err(
                path,
                format!(
                    "line {}: {} columns, the first row has {}",
                    i + 1,
                    vals.len(),
                    first.len()
                ),
            ));
        }
        rows.push((i + 1, vals));
    }
    if rows.is_empty() {
        return Err(io_err(path, "no tilt angles, expected one angle per line"));
    }
    let col = |k: usize| rows.iter().map(|(_, v)| v[k]).collect::<Vec<f64>>();
    let (angles, doses) = if let Some(h) = header {
        let Some(a) = h.iter().position(|c| c == "angles") else {
            return Err(io_err(
                path,
                format!("line 1: header {h:?} has no 'angles' column"),
            ));
        };
        if h.len() != rows[0].1.len() {
            return Err(io_err(
                path,
                format!(
                    "line 1: {} column names for {} columns",
                    h.len(),
                    rows[0].1.len()
                ),
            ));
        }
        (col(a), h.iter().position(|c| c == "weights").map(col))
    } else if rows[0].1.len() == 3 {
        // AreTomo: angle, acquisition index (1-based), exposure -> cumulative exposure
        let idx = col(1);
        let mut order: Vec<usize> = (0..idx.len()).collect();
        order.sort_by(|&a, &b| idx[a].total_cmp(&idx[b]));
        let is_perm = order
            .iter()
            .enumerate()
            .all(|(k, &o)| (idx[o] - (k as f64 + 1.0)).abs() < 1e-8);
        if is_perm {
            let exp = col(2);
            let mut cum = vec![0.0; exp.len()];
            let mut acc = 0.0;
            for &o in &order {
                acc += exp[o];
                cum[o] = acc;
            }
            (col(0), Some(cum))
        } else {
            (col(0), None)
        }
    } else {
        (col(0), None)
    };
    for (k, a) in angles.iter().enumerate() {
        if a.abs() > 90.0 {
            return Err(io_err(
                path,
                format!("line {}: tilt angle {a} is beyond ±90 degrees", rows[k].0),
            ));
        }
    }
    Ok(TiltAngles { angles, doses })
}

/// Reads a CTF file: RELION/GCTF STAR (`.star`) or CTFFIND4 output (anything else).
pub fn read_ctf_file(path: impl AsRef<Path>) -> Result<CtfFile> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let star = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("star"));
    if star {
        parse_ctf_star(path, &text)
    } else {
        parse_ctffind(path, &text)
    }
}

fn header_value(line: &str, key: &str) -> Option<f64> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find(key)? + key.len();
    let rest = line[at..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Parses CTFFIND4 output: `#` header lines (pixel size, voltage in keV, Cs in mm, amplitude
/// contrast) and rows `# df1 df2 azimuth phase_shift(rad) ...`.
pub fn parse_ctffind(path: &Path, text: &str) -> Result<CtfFile> {
    let mut out = CtfFile {
        tilts: Vec::new(),
        voltage_kv: None,
        cs: None,
        amplitude_contrast: None,
        pixel_size: None,
        angles: None,
    };
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            out.pixel_size = header_value(line, "pixel size:").or(out.pixel_size);
            out.voltage_kv = header_value(line, "acceleration voltage:").or(out.voltage_kv);
            out.cs = header_value(line, "spherical aberration:")
                .map(|mm| mm * 1e7)
                .or(out.cs);
            out.amplitude_contrast =
                header_value(line, "amplitude contrast:").or(out.amplitude_contrast);
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 {
            return Err(io_err(
                path,
                format!(
                    "line {}: {} columns, expected CTFFIND4's (#, defocus 1, defocus 2, azimuth, \
                     phase shift, ...)",
                    i + 1,
                    f.len()
                ),
            ));
        }
        let v = |k: usize| number(path, i + 1, f[k]);
        let (df1, df2) = (v(1)?, v(2)?);
        out.tilts.push(monomorph_core::algo::filters::TiltCtf {
            defocus: (df1 + df2) / 2.0,
            defocus_delta: (df1 - df2) / 2.0,
            astigmatism_angle: v(3)?,
            phase_shift: v(4)?,
        });
    }
    if out.tilts.is_empty() {
        return Err(io_err(path, "no CTF rows, expected CTFFIND4 output"));
    }
    Ok(out)
}

/// Parses a RELION/GCTF STAR file: the loop with `_rlnDefocusU` (and `_rlnDefocusV`,
/// `_rlnDefocusAngle`, optional `_rlnPhaseShift` in degrees, `_rlnTomoNominalStageTiltAngle`);
/// `_rlnVoltage`, `_rlnSphericalAberration` (mm), `_rlnAmplitudeContrast` and the pixel size
/// from any block, as a single value or a column (the first row).
pub fn parse_ctf_star(path: &Path, text: &str) -> Result<CtfFile> {
    let mut scalars: Vec<(String, String)> = Vec::new();
    let mut loops: Vec<(Vec<String>, Vec<(usize, Vec<String>)>)> = Vec::new();
    let mut in_loop = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("data_") {
            in_loop = false;
            continue;
        }
        if line == "loop_" {
            loops.push((Vec::new(), Vec::new()));
            in_loop = true;
            continue;
        }
        if line.starts_with('_') {
            let mut it = line.split_whitespace();
            let name = it.next().unwrap_or_default().to_string();
            let rest = it.next().unwrap_or_default();
            match loops.last_mut() {
                Some((cols, rows)) if in_loop && rows.is_empty() => cols.push(name),
                _ => {
                    in_loop = false;
                    scalars.push((name, rest.to_string()));
                }
            }
            continue;
        }
        if in_loop && let Some((_, rows)) = loops.last_mut() {
            rows.push((i + 1, line.split_whitespace().map(str::to_string).collect()));
        }
    }
    let find_scalar = |key: &str| -> Result<Option<f64>> {
        if let Some((_, v)) = scalars.iter().find(|(k, _)| k == key) {
            return number(path, 0, v).map(Some);
        }
        for (cols, rows) in &loops {
            if let Some(c) = cols.iter().position(|k| k == key)
                && let Some((ln, r)) = rows.first()
            {
                return r.get(c).map(|s| number(path, *ln, s)).transpose();
            }
        }
        Ok(None)
    };
    let Some((cols, rows)) = loops
        .iter()
        .find(|(cols, _)| cols.iter().any(|c| c == "_rlnDefocusU"))
    else {
        return Err(io_err(
            path,
            "no loop with _rlnDefocusU, expected a RELION/GCTF STAR file",
        ));
    };
    let idx = |k: &str| cols.iter().position(|c| c == k);
    let (u, v, ang, ps, tilt) = (
        idx("_rlnDefocusU").expect("found above"),
        idx("_rlnDefocusV"),
        idx("_rlnDefocusAngle"),
        idx("_rlnPhaseShift"),
        idx("_rlnTomoNominalStageTiltAngle"),
    );
    let mut tilts = Vec::new();
    let mut angles = Vec::new();
    for (ln, r) in rows {
        if r.len() != cols.len() {
            return Err(io_err(
                path,
                format!("line {ln}: {} values for {} columns", r.len(), cols.len()),
            ));
        }
        let get = |c: usize| number(path, *ln, &r[c]);
        let df1 = get(u)?;
        let df2 = v.map(get).transpose()?.unwrap_or(df1);
        tilts.push(monomorph_core::algo::filters::TiltCtf {
            defocus: (df1 + df2) / 2.0,
            defocus_delta: (df1 - df2) / 2.0,
            astigmatism_angle: ang.map(get).transpose()?.unwrap_or(0.0),
            phase_shift: ps.map(get).transpose()?.unwrap_or(0.0).to_radians(),
        });
        if let Some(t) = tilt {
            angles.push(get(t)?);
        }
    }
    if tilts.is_empty() {
        return Err(io_err(path, "the _rlnDefocusU loop has no rows"));
    }
    Ok(CtfFile {
        tilts,
        voltage_kv: find_scalar("_rlnVoltage")?,
        cs: find_scalar("_rlnSphericalAberration")?.map(|mm| mm * 1e7),
        amplitude_contrast: find_scalar("_rlnAmplitudeContrast")?,
        pixel_size: match find_scalar("_rlnImagePixelSize")? {
            Some(p) => Some(p),
            None => find_scalar("_rlnDetectorPixelSize")?,
        },
        angles: (tilt.is_some()).then_some(angles),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("t.txt")
    }

    #[test]
    fn one_angle_per_line() {
        let t = parse_tilt_angles(p(), "-57.0\n-48.0\n\n60\n").unwrap();
        assert_eq!(t.angles, [-57.0, -48.0, 60.0]);
        assert_eq!(t.doses, None);
    }

    #[test]
    fn header_angles_weights() {
        let t = parse_tilt_angles(p(), "angles\tweights\n-3\t10\n6\t20\n").unwrap();
        assert_eq!(t.angles, [-3.0, 6.0]);
        assert_eq!(t.doses, Some(vec![10.0, 20.0]));
    }

    #[test]
    fn aretomo_three_columns_give_cumulative_exposure() {
        let t = parse_tilt_angles(p(), "0 1 3\n3 2 3\n-3 3 3\n").unwrap();
        assert_eq!(t.angles, [0.0, 3.0, -3.0]);
        assert_eq!(t.doses, Some(vec![3.0, 6.0, 9.0]));
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let e = parse_tilt_angles(p(), "1\nabc\n").unwrap_err().to_string();
        assert!(e.contains("t.txt") && e.contains("line 2"), "{e}");
        let e = parse_tilt_angles(p(), "1\n95\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("90"), "{e}");
        let e = parse_tilt_angles(p(), "").unwrap_err().to_string();
        assert!(e.contains("no tilt angles"), "{e}");
    }

    #[test]
    fn ctffind_rows_and_header() {
        let text = "# Pixel size: 8.000 Angstroms ; acceleration voltage: 300.0 keV ; spherical \
                    aberration: 2.70 mm ; amplitude contrast: 0.07\n\
                    1.000000 29747.00 29247.00 20.00 0.000000 0.100000 16.000000\n";
        let c = parse_ctffind(p(), text).unwrap();
        assert_eq!(c.voltage_kv, Some(300.0));
        assert_eq!(c.cs, Some(2.7e7));
        assert_eq!(c.amplitude_contrast, Some(0.07));
        assert_eq!(c.pixel_size, Some(8.0));
        assert_eq!(c.tilts.len(), 1);
        assert_eq!(c.tilts[0].defocus, 29497.0);
        assert_eq!(c.tilts[0].defocus_delta, 250.0);
        assert_eq!(c.tilts[0].astigmatism_angle, 20.0);
        let e = parse_ctffind(p(), "1 2 3\n").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn relion_star_with_optics() {
        let text = "data_optics\nloop_\n_rlnVoltage #1\n_rlnSphericalAberration #2\n\
                    _rlnAmplitudeContrast #3\n300 2.7 0.1\n\ndata_micrographs\nloop_\n\
                    _rlnDefocusU #1\n_rlnDefocusV #2\n_rlnDefocusAngle #3\n\
                    30000 29000 45\n31000 31000 0\n";
        let c = parse_ctf_star(Path::new("c.star"), text).unwrap();
        assert_eq!(c.voltage_kv, Some(300.0));
        assert_eq!(c.cs, Some(2.7e7));
        assert_eq!(c.amplitude_contrast, Some(0.1));
        assert_eq!(c.tilts.len(), 2);
        assert_eq!(c.tilts[0].defocus, 29500.0);
        assert_eq!(c.tilts[0].defocus_delta, 500.0);
        assert_eq!(c.tilts[0].astigmatism_angle, 45.0);
        let e = parse_ctf_star(Path::new("c.star"), "data_\nloop_\n_rlnDefocusU #1\n1 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c.star") && e.contains("line 4"), "{e}");
    }
}
