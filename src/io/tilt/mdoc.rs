//! SerialEM `.mdoc` files: the header and one section per `[ZValue = z]`.

use std::path::Path;

use super::{CtfFile, Scope, TiltAngles, empty_ctf, number, scope_value};
use crate::Result;
use crate::io::io_err;
use monomorph_core::algo::filters::TiltCtf;

/// A SerialEM `.mdoc`: the header's `key = value` pairs and one section per `[ZValue = z]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mdoc {
    header: Vec<(String, String, usize)>,
    /// (z, line of the section header, pairs)
    sections: Vec<(f64, usize, Vec<(String, String, usize)>)>,
}

impl Mdoc {
    fn column(&self, path: &Path, key: &str) -> Result<Option<Vec<f64>>> {
        let mut out = Vec::new();
        for (z, at, pairs) in &self.sections {
            match pairs.iter().find(|(k, _, _)| k == key) {
                Some((_, v, ln)) => {
                    let first = v.split_whitespace().next().unwrap_or_default();
                    out.push(number(path, *ln, first)?);
                }
                None if out.is_empty() => return Ok(None),
                None => {
                    return Err(io_err(
                        path,
                        format!("line {at}: section [ZValue = {z}] has no {key}"),
                    ));
                }
            }
        }
        Ok(Some(out))
    }

    fn header_number(&self, path: &Path, key: &str) -> Result<Option<f64>> {
        self.header
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, ln)| number(path, *ln, v.split_whitespace().next().unwrap_or_default()))
            .transpose()
    }

    /// `TiltAngle` per section; dose `(z + 1) · ExposureDose` (pytme's rule: a constant dose
    /// per tilt, sections in acquisition order) when the sections give `ExposureDose`.
    pub fn tilt_angles(&self, path: &Path) -> Result<TiltAngles> {
        let Some(angles) = self.column(path, "TiltAngle")? else {
            return Err(io_err(path, "no TiltAngle in the [ZValue] sections"));
        };
        let doses = self.column(path, "ExposureDose")?.map(|d| {
            d.iter()
                .zip(&self.sections)
                .map(|(d, (z, _, _))| (z + 1.0) * d)
                .collect()
        });
        Ok(TiltAngles { angles, doses })
    }

    /// `Defocus` per section (µm, negative = underfocus) as Å underfocus; `Voltage` from the
    /// sections or the header; `PixelSpacing` from the header.
    pub fn ctf(&self, path: &Path) -> Result<CtfFile> {
        let Some(df) = self.column(path, "Defocus")? else {
            return Err(io_err(path, "no Defocus in the [ZValue] sections"));
        };
        let mut out = empty_ctf();
        out.tilts = df
            .iter()
            .map(|&d| TiltCtf {
                defocus: -d * 1e4,
                defocus_delta: 0.0,
                astigmatism_angle: 0.0,
                phase_shift: 0.0,
            })
            .collect();
        let voltage_line = self
            .sections
            .iter()
            .flat_map(|(_, _, pairs)| pairs)
            .chain(&self.header)
            .find(|(k, _, _)| k == "Voltage")
            .map_or(0, |(_, _, ln)| *ln);
        out.voltage_kv = match self.column(path, "Voltage")? {
            Some(v) => v.first().copied(),
            None => self.header_number(path, "Voltage")?,
        }
        .map(|v| scope_value(path, voltage_line, Scope::Voltage, v))
        .transpose()?;
        out.pixel_size = self.header_number(path, "PixelSpacing")?;
        out.angles = self.column(path, "TiltAngle")?;
        Ok(out)
    }
}

/// Parses a SerialEM `.mdoc` file (see [`Mdoc`]).
pub fn parse_mdoc(path: &Path, text: &str) -> Result<Mdoc> {
    let mut m = Mdoc {
        header: Vec::new(),
        sections: Vec::new(),
    };
    let mut in_z = false;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let (k, v) = inner.split_once('=').unwrap_or((inner, ""));
            in_z = k.trim() == "ZValue";
            if in_z {
                let z = number(path, ln, v.trim())?;
                m.sections.push((z, ln, Vec::new()));
            }
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let pair = (k.trim().to_string(), v.trim().to_string(), ln);
        if m.sections.is_empty() {
            m.header.push(pair);
        } else if in_z && let Some((_, _, pairs)) = m.sections.last_mut() {
            pairs.push(pair);
        }
    }
    if m.sections.is_empty() {
        return Err(io_err(
            path,
            "no [ZValue = ...] sections: not a SerialEM mdoc",
        ));
    }
    Ok(m)
}
