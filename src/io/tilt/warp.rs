//! Warp/M tilt-series XML (`.xml`): angles, doses and the per-tilt CTF grids.

use std::path::Path;

use super::{CtfFile, Scope, number, scope_value};
use crate::Result;
use crate::io::io_err;
use monomorph_core::algo::filters::TiltCtf;

/// A Warp/M tilt series (`.xml`), the tilts with `UseTilt` False already left out.
#[derive(Debug, Clone, PartialEq)]
pub struct WarpTiltSeries {
    /// Tilt angles in degrees.
    pub angles: Vec<f64>,
    /// Cumulative dose per tilt (e/Å²), when the file has `Dose`.
    pub doses: Option<Vec<f64>>,
    /// Per tilt (µm, as stored): `GridCTF`, `GridCTFDefocusDelta`, `GridCTFDefocusAngle`
    /// (degrees), `GridCTFPhase` (units of π); empty when the file has no CTF grids.
    grid: Vec<[f64; 4]>,
    /// `CTF/Param` values by name (`Voltage`, `Cs`, `Amplitude`, `PixelSize`, `Defocus`, ...).
    params: Vec<(String, f64)>,
}

impl WarpTiltSeries {
    fn param(&self, name: &str) -> Option<f64> {
        self.params.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }

    /// The per-tilt CTF: Warp's µm to Å, its full astigmatism difference halved (monomorph's
    /// `defocus_delta` is the half difference), its phase shift from units of π to radians.
    pub fn ctf(&self, path: &Path) -> Result<CtfFile> {
        let tilts: Vec<TiltCtf> = if self.grid.is_empty() {
            let d = self.param("Defocus").ok_or_else(|| {
                io_err(
                    path,
                    "no GridCTF and no CTF Param 'Defocus': no defocus per tilt",
                )
            })?;
            let one = TiltCtf {
                defocus: d * 1e4,
                defocus_delta: self.param("DefocusDelta").unwrap_or(0.0) * 0.5e4,
                astigmatism_angle: self.param("DefocusAngle").unwrap_or(0.0),
                phase_shift: self.param("PhaseShift").unwrap_or(0.0) * std::f64::consts::PI,
            };
            vec![one; self.angles.len()]
        } else {
            self.grid
                .iter()
                .map(|&[d, dd, a, p]| TiltCtf {
                    defocus: d * 1e4,
                    defocus_delta: dd * 0.5e4,
                    astigmatism_angle: a,
                    phase_shift: p * std::f64::consts::PI,
                })
                .collect()
        };
        Ok(CtfFile {
            tilts,
            voltage_kv: self.param("Voltage"),
            cs: self.param("Cs").map(|mm| mm * 1e7),
            amplitude_contrast: self.param("Amplitude"),
            pixel_size: self.param("PixelSize"),
            angles: Some(self.angles.clone()),
        })
    }
}

/// Parses a Warp/M tilt-series XML file (see [`WarpTiltSeries`]).
pub fn parse_warp_xml(path: &Path, text: &str) -> Result<WarpTiltSeries> {
    let doc = roxmltree::Document::parse(text)
        .map_err(|e| io_err(path, format!("not a readable XML file: {e}")))?;
    let root = doc.root_element();
    let child = |name: &str| root.children().find(|n| n.has_tag_name(name));
    let line = |n: roxmltree::Node| doc.text_pos_at(n.range().start).row as usize;
    let list = |name: &str| -> Result<Option<Vec<f64>>> {
        let Some(n) = child(name) else {
            return Ok(None);
        };
        n.text()
            .unwrap_or_default()
            .split_whitespace()
            .map(|s| number(path, line(n), s))
            .collect::<Result<Vec<f64>>>()
            .map(Some)
    };
    let Some(angles) = list("Angles")? else {
        return Err(io_err(
            path,
            "no <Angles> element: not a Warp/M tilt series",
        ));
    };
    if angles.is_empty() {
        let at = child("Angles").map_or(0, line);
        return Err(io_err(
            path,
            format!("line {at}: <Angles> holds no tilt angle, expected one per tilt"),
        ));
    }
    let n = angles.len();
    let sized = |name: &str, v: Vec<f64>| -> Result<Vec<f64>> {
        if v.len() != n {
            return Err(io_err(
                path,
                format!("<{name}> has {} values for {n} <Angles>", v.len()),
            ));
        }
        Ok(v)
    };
    let doses = list("Dose")?.map(|v| sized("Dose", v)).transpose()?;
    let use_tilt: Vec<bool> = match child("UseTilt") {
        None => vec![true; n],
        Some(u) => {
            let v: Vec<bool> = u
                .text()
                .unwrap_or_default()
                .split_whitespace()
                .map(|s| match s.to_ascii_lowercase().as_str() {
                    "true" | "1" => Ok(true),
                    "false" | "0" => Ok(false),
                    _ => Err(io_err(
                        path,
                        format!("line {}: UseTilt value '{s}' is not True or False", line(u)),
                    )),
                })
                .collect::<Result<_>>()?;
            if v.len() != n {
                return Err(io_err(
                    path,
                    format!("<UseTilt> has {} values for {n} <Angles>", v.len()),
                ));
            }
            v
        }
    };
    let grid = |name: &str| -> Result<Option<Vec<f64>>> {
        let Some(g) = child(name) else {
            return Ok(None);
        };
        let mut v = vec![f64::NAN; n];
        for node in g.children().filter(|c| c.has_tag_name("Node")) {
            let attr = |a: &str| {
                node.attribute(a)
                    .ok_or_else(|| io_err(path, format!("line {}: <Node> without {a}", line(node))))
            };
            let z = attr("Z")?;
            let z: usize = z.parse().ok().filter(|&z| z < n).ok_or_else(|| {
                io_err(
                    path,
                    format!(
                        "line {}: <{name}> node Z='{z}' is not a tilt index below {n}",
                        line(node)
                    ),
                )
            })?;
            v[z] = number(path, line(node), attr("Value")?)?;
        }
        if let Some(z) = v.iter().position(|x| x.is_nan()) {
            return Err(io_err(path, format!("<{name}> has no node for tilt Z={z}")));
        }
        Ok(Some(v))
    };
    let grid_rows = match grid("GridCTF")? {
        None => Vec::new(),
        Some(d) => {
            let zero = vec![0.0; n];
            let dd = grid("GridCTFDefocusDelta")?.unwrap_or_else(|| zero.clone());
            let da = grid("GridCTFDefocusAngle")?.unwrap_or_else(|| zero.clone());
            let ph = grid("GridCTFPhase")?.unwrap_or(zero);
            (0..n).map(|k| [d[k], dd[k], da[k], ph[k]]).collect()
        }
    };
    let mut params = Vec::new();
    if let Some(ctf) = child("CTF") {
        for p in ctf.children().filter(|c| c.has_tag_name("Param")) {
            let (Some(k), Some(v)) = (p.attribute("Name"), p.attribute("Value")) else {
                continue;
            };
            // The parameters monomorph uses must be numbers ("200kV" or "2,0" is an error
            // naming the line, never a silent fall-back to the flag's default).
            let x = match k {
                "Voltage" => scope_value(path, line(p), Scope::Voltage, number(path, line(p), v)?)?,
                "Cs" => scope_value(path, line(p), Scope::Cs, number(path, line(p), v)?)?,
                "Amplitude" => {
                    scope_value(path, line(p), Scope::Amplitude, number(path, line(p), v)?)?
                }
                "PixelSize" | "Defocus" | "DefocusDelta" | "DefocusAngle" | "PhaseShift" => {
                    number(path, line(p), v)?
                }
                _ => match v.parse::<f64>() {
                    Ok(x) => x,
                    Err(_) => continue,
                },
            };
            params.push((k.to_string(), x));
        }
    }
    let keep = |v: Vec<f64>| -> Vec<f64> {
        v.into_iter()
            .zip(&use_tilt)
            .filter_map(|(x, &u)| u.then_some(x))
            .collect()
    };
    let grid_rows = grid_rows
        .into_iter()
        .zip(&use_tilt)
        .filter_map(|(x, &u)| u.then_some(x))
        .collect();
    let angles = keep(angles);
    if angles.is_empty() {
        return Err(io_err(path, "every tilt has UseTilt False"));
    }
    Ok(WarpTiltSeries {
        angles,
        doses: doses.map(keep),
        grid: grid_rows,
        params,
    })
}
