//! Tilt-series metadata for the Fourier filters of `monomorph match`, in the formats pytme
//! 0.3.6 reads (`tme/filters/wedge.py`, `ctf.py`). Every error names the file and line.
//!
//! Tilt angles (`--tilt-angles FILE`), by extension:
//! * text (IMOD `.tlt` and the rest): one angle per line, or a header naming the columns
//!   `angles` and `weights` (dose); AreTomo's three columns `angle index exposure` give the
//!   cumulative exposure in acquisition order;
//! * `.star`: stopgap's `data_stopgap_wedgelist` (`_tilt_angle`, `_exposure`), Warp's
//!   `_wrpAxisAngle`/`_wrpDose`, or RELION 5's tilt-series STAR
//!   (`_rlnTomoNominalStageTiltAngle`, `_rlnMicrographPreExposure`);
//! * `.xml`: a Warp/M tilt series (`Angles`, `Dose`; tilts with `UseTilt` False are left out,
//!   see below);
//! * `.mdoc`: SerialEM (`TiltAngle` per `[ZValue = z]` section; dose `(z + 1) ·
//!   ExposureDose`, pytme's rule).
//!
//! CTF files (`--ctf-file FILE`): CTFFIND4 output and AreTomo3's `_CTF.txt` (the same columns:
//! `# df1 df2 azimuth phase_shift(rad) ...`), RELION/GCTF STAR (`_rlnDefocusU/V/Angle`),
//! stopgap's wedge list (`_defocus` in µm), Warp/M XML (`GridCTF*` per tilt, µm; phase shift
//! in units of π as Warp stores it) and SerialEM `.mdoc` (`Defocus` in µm, negative =
//! underfocus).
//!
//! Where monomorph reads a file differently from pytme 0.3.6, on purpose:
//! * Warp's `UseTilt`: tilts excluded from the reconstruction are dropped (pytme keeps them,
//!   filling planes of the wedge the tomogram does not have);
//! * Warp's phase shift is in units of π (Warp's `CTF.PhaseShift`); pytme reads the number as
//!   radians;
//! * a stopgap wedge list with several tomograms (`_tomo_num`) is refused (pytme concatenates
//!   their tilts).

use std::path::Path;

use monomorph_core::algo::filters::TiltCtf;

use super::io_err;
use super::star::{StarBlock, StarLoop, parse_star};
use crate::Result;

/// The acceleration voltage (kV) when neither a flag nor any metadata gives one (pytme's).
pub const DEFAULT_VOLTAGE: f64 = 300.0;
/// The spherical aberration (Å) when neither a flag nor any metadata gives one (pytme's).
pub const DEFAULT_CS: f64 = 2.7e7;
/// The amplitude contrast when neither a flag nor any metadata gives one (pytme's).
pub const DEFAULT_AMPLITUDE: f64 = 0.07;

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
    super::read_text_file(path)
}

pub(crate) fn number(path: &Path, line: usize, s: &str) -> Result<f64> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| io_err(path, format!("line {line}: '{s}' is not a finite number")))
}

/// The microscope values a CTF file may give, checked where they are read so that a bad one
/// is reported naming the file and line (not the flag it overrides).
#[derive(Clone, Copy)]
enum Scope {
    /// Acceleration voltage in kV.
    Voltage,
    /// Spherical aberration in mm (as files give it).
    Cs,
    /// Amplitude contrast fraction.
    Amplitude,
}

/// `v` for `what`, read at `line`: an acceleration voltage from 1 to 10 000 kV, a spherical
/// aberration from 0 to 1 000 mm, an amplitude contrast in [0, 1).
fn scope_value(path: &Path, line: usize, what: Scope, v: f64) -> Result<f64> {
    let (ok, name, want) = match what {
        Scope::Voltage => (
            (1.0..=1e4).contains(&v),
            "acceleration voltage",
            "from 1 to 10000 kV",
        ),
        Scope::Cs => (
            (0.0..=1e3).contains(&v),
            "spherical aberration",
            "from 0 to 1000 mm",
        ),
        Scope::Amplitude => ((0.0..1.0).contains(&v), "amplitude contrast", "in [0, 1)"),
    };
    if ok {
        Ok(v)
    } else {
        Err(io_err(
            path,
            format!("line {line}: {name} {v}, expected {want}"),
        ))
    }
}

fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Reads a tilt-angle file, its format chosen by the extension (see the module docs).
pub fn read_tilt_angles(path: impl AsRef<Path>) -> Result<TiltAngles> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let t = match extension(path).as_str() {
        "star" => parse_tilt_star(path, &text)?,
        "xml" => {
            let w = parse_warp_xml(path, &text)?;
            TiltAngles {
                angles: w.angles,
                doses: w.doses,
            }
        }
        "mdoc" => parse_mdoc(path, &text)?.tilt_angles(path)?,
        _ => return parse_tilt_angles(path, &text),
    };
    check_angles(path, &t.angles, None)?;
    Ok(t)
}

/// Tilt angles must be finite and within ±90°; `lines` gives each angle's line for errors.
pub(crate) fn check_angles(path: &Path, angles: &[f64], lines: Option<&[usize]>) -> Result<()> {
    if angles.is_empty() {
        return Err(io_err(path, "no tilt angles"));
    }
    for (k, a) in angles.iter().enumerate() {
        if !a.is_finite() || a.abs() > 90.0 {
            let at = lines.map_or(format!("tilt {}", k + 1), |l| format!("line {}", l[k]));
            return Err(io_err(
                path,
                format!("{at}: tilt angle {a} is beyond ±90 degrees"),
            ));
        }
    }
    Ok(())
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
        if fields.is_empty() {
            return Err(io_err(
                path,
                format!(
                    "line {}: '{line}' holds no value, expected a tilt angle",
                    i + 1
                ),
            ));
        }
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
    } else if rows[0].1.len() == 1 {
        (col(0), None)
    } else {
        return Err(io_err(
            path,
            format!(
                "line {}: {} columns and no header: expected one angle per line, a header \
                 naming the columns `angles` and `weights`, or AreTomo's three columns (angle, \
                 index, exposure)",
                rows[0].0,
                rows[0].1.len()
            ),
        ));
    };
    let lines: Vec<usize> = rows.iter().map(|(l, _)| *l).collect();
    check_angles(path, &angles, Some(&lines))?;
    Ok(TiltAngles { angles, doses })
}

/// Reads a CTF file, its format chosen by the extension: `.star` (RELION/GCTF or stopgap),
/// `.xml` (Warp/M), `.mdoc` (SerialEM), anything else CTFFIND4 or AreTomo3 output.
pub fn read_ctf_file(path: impl AsRef<Path>) -> Result<CtfFile> {
    let path = path.as_ref();
    let text = read_text(path)?;
    let c = match extension(path).as_str() {
        "star" => parse_ctf_star(path, &text)?,
        "xml" => parse_warp_xml(path, &text)?.ctf(path)?,
        "mdoc" => parse_mdoc(path, &text)?.ctf(path)?,
        _ => parse_ctffind(path, &text)?,
    };
    if let Some(a) = &c.angles {
        check_angles(path, a, None)?;
    }
    Ok(c)
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
            let ln = i + 1;
            let scope = |key: &str, what: Scope| {
                header_value(line, key)
                    .map(|v| scope_value(path, ln, what, v))
                    .transpose()
            };
            out.pixel_size = header_value(line, "pixel size:").or(out.pixel_size);
            out.voltage_kv = scope("acceleration voltage:", Scope::Voltage)?.or(out.voltage_kv);
            out.cs = scope("spherical aberration:", Scope::Cs)?
                .map(|mm| mm * 1e7)
                .or(out.cs);
            out.amplitude_contrast =
                scope("amplitude contrast:", Scope::Amplitude)?.or(out.amplitude_contrast);
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
        out.tilts.push(TiltCtf {
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

fn empty_ctf() -> CtfFile {
    CtfFile {
        tilts: Vec::new(),
        voltage_kv: None,
        cs: None,
        amplitude_contrast: None,
        pixel_size: None,
        angles: None,
    }
}

/// A loop column as numbers (`scale` applied), naming the line of a bad value.
pub(crate) fn star_column(path: &Path, l: &StarLoop, c: usize, scale: f64) -> Result<Vec<f64>> {
    l.rows
        .iter()
        .map(|(ln, r)| number(path, *ln, &r[c]).map(|v| v * scale))
        .collect()
}

/// A number from a block: a `_name value` pair or the first row of a loop column, with its
/// line.
fn star_number(path: &Path, b: &StarBlock, name: &str) -> Result<Option<(f64, usize)>> {
    b.value(name)
        .map(|(v, ln)| number(path, ln, v).map(|x| (x, ln)))
        .transpose()
}

/// The loop with column `col`: when several blocks hold one (a file of several tilt series),
/// an error naming the blocks (pytme refuses such a file too), never the first read alone.
fn one_block<'a>(path: &Path, blocks: &'a [StarBlock], col: &str) -> Result<Option<&'a StarLoop>> {
    let with: Vec<&StarBlock> = blocks
        .iter()
        .filter(|b| b.loop_with(col).is_some())
        .collect();
    if with.len() > 1 {
        let names: Vec<String> = with.iter().map(|b| format!("data_{}", b.name)).collect();
        return Err(io_err(
            path,
            format!(
                "holds {} tilt series ({} in blocks {}), expected one: write the one matched \
                 to its own file",
                with.len(),
                col,
                names.join(", ")
            ),
        ));
    }
    Ok(with.first().and_then(|b| b.loop_with(col)).map(|(l, _)| l))
}

/// The one block of a stopgap wedge list, refusing a list of several tomograms.
fn stopgap_loop<'a>(path: &Path, blocks: &'a [StarBlock]) -> Result<Option<&'a StarLoop>> {
    let Some(b) = blocks.iter().find(|b| b.name == "stopgap_wedgelist") else {
        return Ok(None);
    };
    let Some((l, _)) = b.loop_with("_tilt_angle") else {
        return Err(io_err(
            path,
            "data_stopgap_wedgelist has no _tilt_angle column",
        ));
    };
    if let Some(c) = l.column("_tomo_num") {
        let mut nums: Vec<&str> = l.rows.iter().map(|(_, r)| r[c].as_str()).collect();
        nums.dedup();
        if nums.len() > 1 {
            return Err(io_err(
                path,
                format!(
                    "the wedge list holds several tomograms (_tomo_num {}): write the one \
                     matched to its own file",
                    nums.join(", ")
                ),
            ));
        }
    }
    Ok(Some(l))
}

/// Parses the tilt angles and doses of a STAR file: stopgap's wedge list (`_tilt_angle`,
/// `_exposure`), Warp's (`_wrpAxisAngle`, `_wrpDose`) or RELION 5's tilt-series STAR
/// (`_rlnTomoNominalStageTiltAngle`, `_rlnMicrographPreExposure`).
pub fn parse_tilt_star(path: &Path, text: &str) -> Result<TiltAngles> {
    let blocks = parse_star(path, text)?;
    let found = if let Some(l) = stopgap_loop(path, &blocks)? {
        Some((l, "_tilt_angle", "_exposure"))
    } else {
        let mut found = None;
        for (a, d) in [
            ("_wrpAxisAngle", "_wrpDose"),
            ("_rlnTomoNominalStageTiltAngle", "_rlnMicrographPreExposure"),
        ] {
            if let Some(l) = one_block(path, &blocks, a)? {
                found = Some((l, a, d));
                break;
            }
        }
        found
    };
    let Some((l, a, d)) = found else {
        return Err(io_err(
            path,
            "no tilt angles: expected a loop with _tilt_angle (stopgap), _wrpAxisAngle (Warp) \
             or _rlnTomoNominalStageTiltAngle (RELION)",
        ));
    };
    let angles = star_column(path, l, l.column(a).expect("found"), 1.0)?;
    let doses = l
        .column(d)
        .map(|c| star_column(path, l, c, 1.0))
        .transpose()?;
    let lines: Vec<usize> = l.rows.iter().map(|(ln, _)| *ln).collect();
    check_angles(path, &angles, Some(&lines))?;
    Ok(TiltAngles { angles, doses })
}

/// The per-tilt CTF of a RELION loop, one per row: `_rlnDefocusU` (column `u`) and
/// `_rlnDefocusV` (`v`, else U) as mean defocus and half difference, `_rlnDefocusAngle`
/// (`ang`, else 0) and `_rlnPhaseShift` in degrees (`ps`, else 0) as radians. The one
/// conversion of `--ctf-file` and of a RELION 5 project (the same bits from either).
pub(crate) fn relion_ctf_rows(
    path: &Path,
    l: &StarLoop,
    u: usize,
    v: Option<usize>,
    ang: Option<usize>,
    ps: Option<usize>,
) -> Result<Vec<TiltCtf>> {
    let mut out = Vec::with_capacity(l.rows.len());
    for (ln, r) in &l.rows {
        let get = |c: usize| number(path, *ln, &r[c]);
        let df1 = get(u)?;
        let df2 = v.map(get).transpose()?.unwrap_or(df1);
        out.push(TiltCtf {
            defocus: (df1 + df2) / 2.0,
            defocus_delta: (df1 - df2) / 2.0,
            astigmatism_angle: ang.map(get).transpose()?.unwrap_or(0.0),
            phase_shift: ps.map(get).transpose()?.unwrap_or(0.0).to_radians(),
        });
    }
    Ok(out)
}

/// Parses a CTF STAR file: stopgap's wedge list (`_defocus` in µm, `_voltage`, `_cs` in mm,
/// `_amp_contrast`, `_pixelsize`, `_tilt_angle`), or RELION/GCTF: the loop with
/// `_rlnDefocusU` (and `_rlnDefocusV`, `_rlnDefocusAngle`, optional `_rlnPhaseShift` in
/// degrees, `_rlnTomoNominalStageTiltAngle`); `_rlnVoltage`, `_rlnSphericalAberration` (mm),
/// `_rlnAmplitudeContrast` and the pixel size from any block, as a single value or a column
/// (the first row).
pub fn parse_ctf_star(path: &Path, text: &str) -> Result<CtfFile> {
    let blocks = parse_star(path, text)?;
    if let Some(l) = stopgap_loop(path, &blocks)? {
        let col = |name: &str| {
            l.column(name)
                .ok_or_else(|| io_err(path, format!("the stopgap wedge list has no {name} column")))
        };
        let defocus = star_column(path, l, col("_defocus")?, 1e4)?;
        let first = |name: &str, scale: f64| -> Result<Option<f64>> {
            match l.column(name) {
                Some(c) => Ok(star_column(path, l, c, scale)?.first().copied()),
                None => Ok(None),
            }
        };
        let scope = |name: &str, what: Scope| -> Result<Option<f64>> {
            match (l.column(name), l.rows.first()) {
                (Some(c), Some((ln, r))) => {
                    scope_value(path, *ln, what, number(path, *ln, &r[c])?).map(Some)
                }
                _ => Ok(None),
            }
        };
        let mut out = empty_ctf();
        out.tilts = defocus
            .iter()
            .map(|&d| TiltCtf {
                defocus: d,
                defocus_delta: 0.0,
                astigmatism_angle: 0.0,
                phase_shift: 0.0,
            })
            .collect();
        out.voltage_kv = scope("_voltage", Scope::Voltage)?;
        out.cs = scope("_cs", Scope::Cs)?.map(|mm| mm * 1e7);
        out.amplitude_contrast = scope("_amp_contrast", Scope::Amplitude)?;
        out.pixel_size = first("_pixelsize", 1.0)?;
        out.angles = Some(star_column(path, l, col("_tilt_angle")?, 1.0)?);
        return Ok(out);
    }
    let Some(l) = one_block(path, &blocks, "_rlnDefocusU")? else {
        return Err(io_err(
            path,
            "no loop with _rlnDefocusU, expected a RELION/GCTF STAR file or a stopgap wedge list",
        ));
    };
    let u = l.column("_rlnDefocusU").expect("found");
    let (v, ang, ps, tilt) = (
        l.column("_rlnDefocusV"),
        l.column("_rlnDefocusAngle"),
        l.column("_rlnPhaseShift"),
        l.column("_rlnTomoNominalStageTiltAngle"),
    );
    let mut out = empty_ctf();
    out.tilts = relion_ctf_rows(path, l, u, v, ang, ps)?;
    let mut angles = Vec::new();
    if let Some(t) = tilt {
        angles = star_column(path, l, t, 1.0)?;
    }
    if out.tilts.is_empty() {
        return Err(io_err(path, "the _rlnDefocusU loop has no rows"));
    }
    let any = |name: &str| -> Result<Option<(f64, usize)>> {
        for b in &blocks {
            if let Some(x) = star_number(path, b, name)? {
                return Ok(Some(x));
            }
        }
        Ok(None)
    };
    let scope = |name: &str, what: Scope| -> Result<Option<f64>> {
        any(name)?
            .map(|(v, ln)| scope_value(path, ln, what, v))
            .transpose()
    };
    out.voltage_kv = scope("_rlnVoltage", Scope::Voltage)?;
    out.cs = scope("_rlnSphericalAberration", Scope::Cs)?.map(|mm| mm * 1e7);
    out.amplitude_contrast = scope("_rlnAmplitudeContrast", Scope::Amplitude)?;
    out.pixel_size = match any("_rlnImagePixelSize")? {
        Some((p, _)) => Some(p),
        None => any("_rlnDetectorPixelSize")?.map(|(p, _)| p),
    };
    out.angles = tilt.is_some().then_some(angles);
    Ok(out)
}

mod mdoc;
mod warp;

pub use mdoc::{Mdoc, parse_mdoc};
pub use warp::{WarpTiltSeries, parse_warp_xml};

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
        // A CTF file given as tilt angles: its first column is not an angle.
        let e = parse_tilt_angles(p(), "# Columns\n1 30600 30400 12 0 0.04 6.1 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: 8 columns and no header"), "{e}");
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
