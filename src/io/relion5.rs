//! A RELION 5 tomography project, as RELION 5 writes it (sources and every convention:
//! `notes/pipeline.md` of the shared references): the tomogram set `tomograms.star` (block
//! `data_global`, one row per tomogram) and each tomogram's per-tilt STAR (block
//! `data_<rlnTomoName>`, one row per tilt, in the file's order, never sorted). Read with the one
//! STAR reader ([`super::star`]); every error names the file, the row's line and the column.
//!
//! Paths in a project are relative to the project root, the folder RELION runs in: callers
//! resolve them against the current directory, as RELION does.

use std::path::{Path, PathBuf};

use monomorph_core::algo::filters::TiltCtf;

use super::io_err;
use super::star::{StarBlock, StarLoop, parse_star};
use super::tilt::{check_angles, number, relion_ctf_rows, star_column};
use crate::Result;

/// The `tomograms.star` columns every tomogram used for matching must have.
pub const REQUIRED: [&str; 5] = [
    "_rlnTomoName",
    "_rlnVoltage",
    "_rlnSphericalAberration",
    "_rlnAmplitudeContrast",
    "_rlnTomoTiltSeriesPixelSize",
];

/// A `tomograms.star`: its `data_global` loop, rows read on demand ([`TomogramSet::tomogram`]).
#[derive(Debug, Clone)]
pub struct TomogramSet {
    /// The file.
    pub path: PathBuf,
    /// The `data_global` loop.
    rows: StarLoop,
}

/// One tomogram of a [`TomogramSet`] (a checked row).
#[derive(Debug, Clone, PartialEq)]
pub struct Tomogram {
    /// `_rlnTomoName`.
    pub name: String,
    /// The row's line in `tomograms.star`.
    pub line: usize,
    /// `_rlnVoltage`, kV.
    pub voltage_kv: f64,
    /// `_rlnSphericalAberration`, mm (as RELION stores it).
    pub cs_mm: f64,
    /// `_rlnAmplitudeContrast`.
    pub amplitude_contrast: f64,
    /// `_rlnTomoTiltSeriesPixelSize`, Å: the unit of all tomogram geometry.
    pub ts_pixel: f64,
    /// `_rlnTomoTomogramBinning` (1 where the column is absent, as RELION defaults).
    pub binning: f64,
    /// `_rlnTomoSizeX/Y/Z`: the bin-1 size in tilt-series pixels, when the file has them.
    pub size: Option<[f64; 3]>,
    /// `_rlnTomoReconstructedTomogram`, else `_rlnTomoReconstructedTomogramDenoised`.
    pub map: Option<String>,
    /// Whether the row has half maps only (`…Half1/Half2`, no full or denoised map).
    pub halves_only: bool,
    /// `_rlnTomoTiltSeriesStarFile` as written.
    pub tilt_series: Option<String>,
    /// `_rlnOpticsGroupName`, when the file has it.
    pub optics_group: Option<String>,
}

impl Tomogram {
    /// The tomogram's voxel size in Å: tilt-series pixel × binning.
    pub fn voxel_size(&self) -> f64 {
        self.ts_pixel * self.binning
    }

    /// RELION's reconstruction dimensions `(x, y, z)` for the bin-1 size `(X, Y, Z)`:
    /// `(int(X/b + 0.5), int(Y/b + 0.5), int(Z/b))` (`reconstruct_tomogram.cpp`).
    pub fn reconstruction_dims(&self) -> Option<[usize; 3]> {
        let s = self.size?;
        let b = self.binning;
        Some([
            (s[0] / b + 0.5) as usize,
            (s[1] / b + 0.5) as usize,
            (s[2] / b) as usize,
        ])
    }
}

/// Which column gives the tilt angles of a per-tilt STAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AngleSource {
    /// `_rlnTomoNominalStageTiltAngle` (the stage's; pytom's and pytme's reading).
    #[default]
    Nominal,
    /// `_rlnTomoYTilt` (the aligned tilt; can differ from the stage by the lamella pre-tilt).
    Aligned,
}

impl AngleSource {
    /// The column read.
    pub fn column(self) -> &'static str {
        match self {
            AngleSource::Nominal => "_rlnTomoNominalStageTiltAngle",
            AngleSource::Aligned => "_rlnTomoYTilt",
        }
    }

    /// The name run.json records (`nominal`, `aligned`).
    pub fn name(self) -> &'static str {
        match self {
            AngleSource::Nominal => "nominal",
            AngleSource::Aligned => "aligned",
        }
    }
}

/// A tomogram's tilt series from its per-tilt STAR, rows in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct TiltSeries {
    /// The file read.
    pub path: PathBuf,
    /// The block read (without `data_`).
    pub block: String,
    /// Tilt angles in degrees (the [`AngleSource`] column).
    pub angles: Vec<f64>,
    /// `_rlnMicrographPreExposure`, e⁻/Å² before each tilt.
    pub doses: Vec<f64>,
    /// The per-tilt CTF, converted as `--ctf-file` converts a RELION STAR.
    pub ctf: Vec<TiltCtf>,
    /// `[_rlnDefocusU, _rlnDefocusV, _rlnDefocusAngle]` as written (Å, Å, degrees).
    pub defocus_uv: Vec<[f64; 3]>,
}

/// Reads a `tomograms.star` (its `data_global` block must exist and hold `_rlnTomoName`).
pub fn read_tomogram_set(path: impl AsRef<Path>) -> Result<TomogramSet> {
    let path = path.as_ref();
    let text = super::read_text_file(path)?;
    parse_tomogram_set(path, &text)
}

/// Parses the text of a `tomograms.star`; `path` names it in errors.
pub fn parse_tomogram_set(path: &Path, text: &str) -> Result<TomogramSet> {
    let blocks = parse_star(path, text)?;
    let Some(global) = blocks.iter().find(|b| b.name == "global") else {
        let names: Vec<String> = blocks.iter().map(|b| format!("data_{}", b.name)).collect();
        return Err(io_err(
            path,
            format!(
                "no data_global block (blocks: {}), expected a RELION 5 tomograms.star",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            ),
        ));
    };
    let Some((l, _)) = global.loop_with("_rlnTomoName") else {
        return Err(io_err(
            path,
            "data_global has no loop with column _rlnTomoName, expected one row per tomogram",
        ));
    };
    Ok(TomogramSet {
        path: path.to_path_buf(),
        rows: l.clone(),
    })
}

/// Whether `text` is a RELION 5 tomogram set: a `data_global` loop with `_rlnTomoName` and
/// `_rlnTomoTiltSeriesPixelSize`.
pub fn is_tomogram_set(blocks: &[StarBlock]) -> bool {
    blocks.iter().any(|b| {
        b.name == "global"
            && b.loop_with("_rlnTomoName").is_some()
            && b.loop_with("_rlnTomoTiltSeriesPixelSize").is_some()
    })
}

impl TomogramSet {
    /// The tomogram names, in file order.
    pub fn names(&self) -> Vec<&str> {
        let c = self
            .rows
            .column("_rlnTomoName")
            .expect("checked on reading");
        self.rows.rows.iter().map(|(_, r)| r[c].as_str()).collect()
    }

    /// The checked row of tomogram `name`: an error listing the names when it is not there,
    /// or naming the line and column of a missing or bad value.
    pub fn tomogram(&self, name: &str) -> Result<Tomogram> {
        let path = &self.path;
        let c = self
            .rows
            .column("_rlnTomoName")
            .expect("checked on reading");
        let found: Vec<&(usize, Vec<String>)> = self
            .rows
            .rows
            .iter()
            .filter(|(_, r)| r[c] == name)
            .collect();
        let (line, row) = match found.as_slice() {
            [one] => (one.0, &one.1),
            [] => {
                return Err(io_err(
                    path,
                    format!(
                        "no tomogram named {name} in data_global, expected one of: {}",
                        self.names().join(", ")
                    ),
                ));
            }
            more => {
                let lines: Vec<String> = more.iter().map(|(l, _)| l.to_string()).collect();
                return Err(io_err(
                    path,
                    format!(
                        "tomogram {name} is listed {} times (lines {}), expected once",
                        more.len(),
                        lines.join(", ")
                    ),
                ));
            }
        };
        let l = &self.rows;
        let text = |col: &str| l.column(col).map(|k| row[k].as_str());
        let num = |col: &str| -> Result<Option<f64>> {
            let Some(k) = l.column(col) else {
                return Ok(None);
            };
            number(path, line, &row[k]).map(Some).map_err(|_| {
                io_err(
                    path,
                    format!(
                        "line {line} ({name}): {col} '{}' is not a finite number",
                        row[k]
                    ),
                )
            })
        };
        let need = |col: &str| -> Result<f64> {
            num(col)?.ok_or_else(|| {
                io_err(
                    path,
                    format!("no column {col} (needed for tomogram {name}, line {line})"),
                )
            })
        };
        let positive = |col: &str, v: f64| -> Result<f64> {
            if v > 0.0 {
                Ok(v)
            } else {
                Err(io_err(
                    path,
                    format!("line {line} ({name}): {col} {v}, expected a positive number"),
                ))
            }
        };
        let voltage_kv = positive("_rlnVoltage", need("_rlnVoltage")?)?;
        let cs_mm = need("_rlnSphericalAberration")?;
        if !(0.0..=1e3).contains(&cs_mm) {
            return Err(io_err(
                path,
                format!(
                    "line {line} ({name}): _rlnSphericalAberration {cs_mm}, expected 0 to 1000 mm"
                ),
            ));
        }
        let amplitude_contrast = need("_rlnAmplitudeContrast")?;
        if !(0.0..1.0).contains(&amplitude_contrast) {
            return Err(io_err(
                path,
                format!(
                    "line {line} ({name}): _rlnAmplitudeContrast {amplitude_contrast}, expected a \
                     fraction in [0, 1)"
                ),
            ));
        }
        let ts_pixel = positive(
            "_rlnTomoTiltSeriesPixelSize",
            need("_rlnTomoTiltSeriesPixelSize")?,
        )?;
        let binning = match num("_rlnTomoTomogramBinning")? {
            Some(b) => positive("_rlnTomoTomogramBinning", b)?,
            None => 1.0,
        };
        let size = match (
            num("_rlnTomoSizeX")?,
            num("_rlnTomoSizeY")?,
            num("_rlnTomoSizeZ")?,
        ) {
            (Some(x), Some(y), Some(z)) => {
                for (col, v) in [
                    ("_rlnTomoSizeX", x),
                    ("_rlnTomoSizeY", y),
                    ("_rlnTomoSizeZ", z),
                ] {
                    positive(col, v)?;
                }
                Some([x, y, z])
            }
            _ => None,
        };
        let map = text("_rlnTomoReconstructedTomogram")
            .or_else(|| text("_rlnTomoReconstructedTomogramDenoised"))
            .map(str::to_string);
        let halves_only = map.is_none() && text("_rlnTomoReconstructedTomogramHalf1").is_some();
        Ok(Tomogram {
            name: name.to_string(),
            line,
            voltage_kv,
            cs_mm,
            amplitude_contrast,
            ts_pixel,
            binning,
            size,
            map,
            halves_only,
            tilt_series: text("_rlnTomoTiltSeriesStarFile").map(str::to_string),
            optics_group: text("_rlnOpticsGroupName").map(str::to_string),
        })
    }

    /// Where tomogram `t`'s per-tilt STAR is: `_rlnTomoTiltSeriesStarFile` (relative to the
    /// current directory, the project root) when that file exists, else
    /// `<this file's folder>/tilt_series/<name>.star` (where pytom-match-pick looks); an error
    /// naming both places when neither exists.
    pub fn tilt_series_path(&self, t: &Tomogram) -> Result<PathBuf> {
        let fallback = self
            .path
            .parent()
            .unwrap_or(Path::new(""))
            .join("tilt_series")
            .join(format!("{}.star", t.name));
        if let Some(p) = &t.tilt_series
            && Path::new(p).is_file()
        {
            return Ok(PathBuf::from(p));
        }
        if fallback.is_file() {
            return Ok(fallback);
        }
        let first = match &t.tilt_series {
            Some(p) => format!("{p} (_rlnTomoTiltSeriesStarFile, from the current directory)"),
            None => "no _rlnTomoTiltSeriesStarFile column".into(),
        };
        Err(io_err(
            &self.path,
            format!(
                "line {} ({}): the per-tilt STAR is not found: looked at {first} and at {}",
                t.line,
                t.name,
                fallback.display()
            ),
        ))
    }
}

/// Reads tomogram `name`'s tilt series from its per-tilt STAR `path`: the block
/// `data_<name>`, else the file's only tilt-series block; angles from `source`'s column.
pub fn read_tilt_series(path: &Path, name: &str, source: AngleSource) -> Result<TiltSeries> {
    let text = super::read_text_file(path)?;
    parse_tilt_series(path, &text, name, source)
}

/// Parses a per-tilt STAR (see [`read_tilt_series`]).
pub fn parse_tilt_series(
    path: &Path,
    text: &str,
    name: &str,
    source: AngleSource,
) -> Result<TiltSeries> {
    let blocks = parse_star(path, text)?;
    let series = |b: &&StarBlock| {
        b.loop_with("_rlnMicrographPreExposure").is_some()
            || b.loop_with("_rlnTomoNominalStageTiltAngle").is_some()
    };
    let candidates: Vec<&StarBlock> = blocks.iter().filter(series).collect();
    let block = match candidates.iter().find(|b| b.name == name) {
        Some(b) => *b,
        None => match candidates.as_slice() {
            [one] => *one,
            [] => {
                return Err(io_err(
                    path,
                    format!(
                        "no tilt-series block (a loop with _rlnTomoNominalStageTiltAngle or \
                         _rlnMicrographPreExposure), expected data_{name}"
                    ),
                ));
            }
            more => {
                let names: Vec<String> = more.iter().map(|b| format!("data_{}", b.name)).collect();
                return Err(io_err(
                    path,
                    format!(
                        "holds {} tilt series ({}) and none is data_{name}",
                        more.len(),
                        names.join(", ")
                    ),
                ));
            }
        },
    };
    let angle_col = source.column();
    let l = block
        .loop_with(angle_col)
        .or_else(|| block.loop_with("_rlnMicrographPreExposure"))
        .map(|(l, _)| l)
        .expect("a tilt-series block");
    let col = |c: &str| -> Result<usize> {
        l.column(c)
            .ok_or_else(|| io_err(path, format!("data_{}: no column {c}", block.name)))
    };
    if l.rows.is_empty() {
        return Err(io_err(
            path,
            format!("data_{}: no rows, expected one per tilt", block.name),
        ));
    }
    let named = |e: crate::Error, c: &str| match e {
        crate::Error::Io { path, message } => crate::Error::Io {
            path,
            message: format!("{message} (column {c})"),
        },
        other => other,
    };
    let ac = col(angle_col)?;
    let angles = star_column(path, l, ac, 1.0).map_err(|e| named(e, angle_col))?;
    let dc = col("_rlnMicrographPreExposure")?;
    let doses = star_column(path, l, dc, 1.0).map_err(|e| named(e, "_rlnMicrographPreExposure"))?;
    let (u, v, a) = (
        col("_rlnDefocusU")?,
        col("_rlnDefocusV")?,
        col("_rlnDefocusAngle")?,
    );
    let ctf = relion_ctf_rows(path, l, u, Some(v), Some(a), l.column("_rlnPhaseShift"))
        .map_err(|e| named(e, "_rlnDefocusU/V/Angle or _rlnPhaseShift"))?;
    let mut defocus_uv = Vec::with_capacity(l.rows.len());
    for (ln, r) in &l.rows {
        defocus_uv.push([
            number(path, *ln, &r[u])?,
            number(path, *ln, &r[v])?,
            number(path, *ln, &r[a])?,
        ]);
    }
    let lines: Vec<usize> = l.rows.iter().map(|(ln, _)| *ln).collect();
    check_angles(path, &angles, Some(&lines)).map_err(|e| named(e, angle_col))?;
    Ok(TiltSeries {
        path: path.to_path_buf(),
        block: block.name.clone(),
        angles,
        doses,
        ctf,
        defocus_uv,
    })
}

/// The centring rule of a RELION 5 particle file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Centre {
    /// RELION's C++ reader: `c = (i·b − X/2)·ps`, so that `c/ps + X/2` is `i·b` exactly.
    #[default]
    Reader,
    /// RELION 5's picker: `c = (i·b − (X/2 − 1))·ps` (one tilt-series pixel off the reader).
    Picker,
}

impl Centre {
    /// The rule as a formula (for the file's comment).
    pub fn formula(self) -> &'static str {
        match self {
            Centre::Reader => "c = (i*b - X/2)*ps (RELION's C++ reader: c/ps + X/2 = i*b)",
            Centre::Picker => "c = (i*b - (X/2 - 1))*ps (RELION 5's picker)",
        }
    }

    /// The centred Å coordinate of voxel coordinate `i` along an axis.
    pub fn centred(self, i: f64, binning: f64, size: f64, ts_pixel: f64) -> f64 {
        let half = match self {
            Centre::Reader => size / 2.0,
            Centre::Picker => size / 2.0 - 1.0,
        };
        (i * binning - half) * ts_pixel
    }
}

/// What a RELION 5 particle file needs of one tomogram: its name, geometry and optics.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "cli", derive(serde::Serialize, serde::Deserialize))]
pub struct ParticleGeometry {
    /// `_rlnTomoName`.
    pub tomo_name: String,
    /// Tomogram voxel = `binning` tilt-series pixels.
    pub binning: f64,
    /// `(X, Y, Z)`, bin-1 size in tilt-series pixels.
    pub size: [f64; 3],
    /// Tilt-series pixel size, Å.
    pub ts_pixel: f64,
    /// Optics: kV, mm, fraction.
    pub voltage_kv: f64,
    /// Spherical aberration, mm.
    pub cs_mm: f64,
    /// Amplitude contrast.
    pub amplitude_contrast: f64,
    /// `_rlnOpticsGroupName` (else `opticsGroup<k>`).
    pub optics_group: Option<String>,
}

/// One particle: voxel position `(x, y, z)` (array axes 2, 1, 0; fractional when refined),
/// RELION's angles and the score.
#[derive(Debug, Clone, PartialEq)]
pub struct Particle {
    /// Voxel coordinates `(x, y, z)`.
    pub xyz: [f64; 3],
    /// `(rot, tilt, psi)` in degrees, when known.
    pub euler: Option<[f64; 3]>,
    /// The score (`_rlnAutopickFigureOfMerit`).
    pub score: f64,
}

/// A RELION 5 tomography particle file: `data_optics` (one group per distinct optics of the
/// tomograms, in order of first appearance) and `data_particles` (`_rlnTomoName`,
/// `_rlnCenteredCoordinateX/Y/ZAngst`, `_rlnAngleRot/Tilt/Psi` when every particle has
/// angles, `_rlnAutopickFigureOfMerit`, `_rlnOpticsGroup`); `comments` go on top.
pub fn particles_star(
    groups: &[(&ParticleGeometry, &[Particle])],
    centre: Centre,
    comments: &[String],
) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("\n# version 50001\n");
    let _ = writeln!(s, "# written by monomorph {}", env!("CARGO_PKG_VERSION"));
    for c in comments {
        for line in c.lines() {
            let _ = writeln!(s, "# {line}");
        }
    }
    let q = |v: &str| {
        super::star::star_quote(v).unwrap_or_else(|| format!("\"{}\"", v.escape_default()))
    };
    // Optics groups: distinct (name, ps, kV, Cs, Q0).
    type Key = (Option<String>, u64, u64, u64, u64);
    let key = |g: &ParticleGeometry| -> Key {
        (
            g.optics_group.clone(),
            g.ts_pixel.to_bits(),
            g.voltage_kv.to_bits(),
            g.cs_mm.to_bits(),
            g.amplitude_contrast.to_bits(),
        )
    };
    let mut keys: Vec<Key> = Vec::new();
    let mut of_group = Vec::with_capacity(groups.len());
    for (g, _) in groups {
        let k = key(g);
        let at = keys.iter().position(|x| *x == k).unwrap_or_else(|| {
            keys.push(k);
            keys.len() - 1
        });
        of_group.push(at + 1);
    }
    s.push_str(
        "\ndata_optics\n\nloop_\n_rlnOpticsGroup #1\n_rlnOpticsGroupName #2\n\
                _rlnTomoTiltSeriesPixelSize #3\n_rlnVoltage #4\n_rlnSphericalAberration #5\n\
                _rlnAmplitudeContrast #6\n",
    );
    let mut used_names: Vec<String> = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let g = groups[of_group.iter().position(|&o| o == k + 1).expect("a group")].0;
        let mut name = key
            .0
            .clone()
            .unwrap_or_else(|| format!("opticsGroup{}", k + 1));
        if used_names.contains(&name) {
            name = format!("{name}_{}", k + 1);
        }
        used_names.push(name.clone());
        let _ = writeln!(
            s,
            "{} {} {} {} {} {}",
            k + 1,
            q(&name),
            g.ts_pixel,
            g.voltage_kv,
            g.cs_mm,
            g.amplitude_contrast
        );
    }
    let angles = groups
        .iter()
        .all(|(_, ps)| ps.iter().all(|p| p.euler.is_some()));
    s.push_str(
        "\ndata_particles\n\nloop_\n_rlnTomoName #1\n_rlnCenteredCoordinateXAngst #2\n\
                _rlnCenteredCoordinateYAngst #3\n_rlnCenteredCoordinateZAngst #4\n",
    );
    let mut n = 5;
    if angles {
        s.push_str("_rlnAngleRot #5\n_rlnAngleTilt #6\n_rlnAnglePsi #7\n");
        n = 8;
    }
    let _ = writeln!(
        s,
        "_rlnAutopickFigureOfMerit #{n}\n_rlnOpticsGroup #{}",
        n + 1
    );
    for ((g, ps), og) in groups.iter().zip(&of_group) {
        let name = q(&g.tomo_name);
        for p in ps.iter() {
            let c: Vec<f64> = (0..3)
                .map(|a| centre.centred(p.xyz[a], g.binning, g.size[a], g.ts_pixel))
                .collect();
            let _ = write!(s, "{name} {} {} {}", c[0], c[1], c[2]);
            if angles && let Some(e) = p.euler {
                let _ = write!(s, " {} {} {}", e[0], e[1], e[2]);
            }
            let _ = writeln!(s, " {} {og}", p.score);
        }
    }
    s
}

/// A particle of a RELION 5 particle file read back by RELION's C++ rule: its tomogram and
/// its position in tomogram voxels `(c/ps + X/2)/b` (`ps` from its optics group).
#[derive(Debug, Clone, PartialEq)]
pub struct ReadParticle {
    /// `_rlnTomoName`.
    pub tomo_name: String,
    /// The voxel `(x, y, z)`.
    pub voxel: [f64; 3],
    /// The `_rlnAutopickFigureOfMerit`, when there.
    pub score: Option<f64>,
}

/// Reads a RELION 5 particle file back to tomogram voxels, with each tomogram's bin-1 size
/// `(X, Y, Z)` and binning given by `geometry` (the project's rows), as RELION's C++ reader
/// does (`particle_set.cpp` `getParticleCoordDecenteredPixel`).
pub fn read_particles_back(
    path: &Path,
    text: &str,
    geometry: &dyn Fn(&str) -> Option<([f64; 3], f64)>,
) -> Result<Vec<ReadParticle>> {
    let blocks = parse_star(path, text)?;
    let optics = blocks
        .iter()
        .find(|b| b.name == "optics")
        .and_then(|b| b.loop_with("_rlnOpticsGroup"))
        .map(|(l, _)| l)
        .ok_or_else(|| io_err(path, "no data_optics loop"))?;
    let og = optics.column("_rlnOpticsGroup").expect("found");
    let opc = optics
        .column("_rlnTomoTiltSeriesPixelSize")
        .ok_or_else(|| io_err(path, "data_optics: no _rlnTomoTiltSeriesPixelSize"))?;
    let mut ps_of = Vec::new();
    for (ln, r) in &optics.rows {
        ps_of.push((r[og].clone(), number(path, *ln, &r[opc])?));
    }
    let parts = blocks
        .iter()
        .find(|b| b.name == "particles")
        .and_then(|b| b.loop_with("_rlnTomoName"))
        .map(|(l, _)| l)
        .ok_or_else(|| io_err(path, "no data_particles loop with _rlnTomoName"))?;
    let col = |c: &str| {
        parts
            .column(c)
            .ok_or_else(|| io_err(path, format!("no column {c}")))
    };
    let (tn, cx, cy, cz, pg) = (
        col("_rlnTomoName")?,
        col("_rlnCenteredCoordinateXAngst")?,
        col("_rlnCenteredCoordinateYAngst")?,
        col("_rlnCenteredCoordinateZAngst")?,
        col("_rlnOpticsGroup")?,
    );
    let fom = parts.column("_rlnAutopickFigureOfMerit");
    let mut out = Vec::with_capacity(parts.rows.len());
    for (ln, r) in &parts.rows {
        let ps = ps_of
            .iter()
            .find(|(g, _)| *g == r[pg])
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                io_err(
                    path,
                    format!("line {ln}: optics group {} not in data_optics", r[pg]),
                )
            })?;
        let (size, b) = geometry(&r[tn])
            .ok_or_else(|| io_err(path, format!("line {ln}: unknown tomogram {}", r[tn])))?;
        let mut voxel = [0.0; 3];
        for (a, c) in [cx, cy, cz].into_iter().enumerate() {
            voxel[a] = (number(path, *ln, &r[c])? / ps + size[a] / 2.0) / b;
        }
        out.push(ReadParticle {
            tomo_name: r[tn].clone(),
            voxel,
            score: fom.map(|c| number(path, *ln, &r[c])).transpose()?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = "data_global\nloop_\n_rlnTomoName #1\n_rlnVoltage #2\n\
        _rlnSphericalAberration #3\n_rlnAmplitudeContrast #4\n_rlnTomoTiltSeriesPixelSize #5\n\
        _rlnTomoTomogramBinning #6\n_rlnTomoSizeX #7\n_rlnTomoSizeY #8\n_rlnTomoSizeZ #9\n\
        _rlnTomoReconstructedTomogram #10\n\
        TS_1 300 2.7 0.1 1.35 7.407407 4000 4000 2000 t/rec_TS_1.mrc\n\
        TS_2 200 2.7 0.08 1.724 0 4000 4000 2000 t/rec_TS_2.mrc\n";

    #[test]
    fn rows_names_and_bad_values() {
        let s = parse_tomogram_set(Path::new("t.star"), SET).unwrap();
        assert_eq!(s.names(), ["TS_1", "TS_2"]);
        let t = s.tomogram("TS_1").unwrap();
        assert_eq!(t.voxel_size(), 1.35 * 7.407407);
        assert_eq!(t.reconstruction_dims(), Some([540, 540, 270]));
        assert_eq!(t.map.as_deref(), Some("t/rec_TS_1.mrc"));
        let e = s.tomogram("TS_2").unwrap_err().to_string();
        assert!(
            e.contains("t.star") && e.contains("line 14") && e.contains("_rlnTomoTomogramBinning"),
            "{e}"
        );
        let e = s.tomogram("TS_9").unwrap_err().to_string();
        assert!(e.contains("TS_1, TS_2"), "{e}");
        let e = parse_tomogram_set(Path::new("t.star"), "data_x\nloop_\n_a\n1\n").unwrap_err();
        assert!(e.to_string().contains("no data_global"), "{e}");
    }

    #[test]
    fn centring_rules_invert() {
        let (b, x, ps) = (7.407407, 4000.0, 1.35);
        let c = Centre::Reader.centred(447.650691, b, x, ps);
        assert!(((c / ps + x / 2.0) / b - 447.650691).abs() < 1e-9);
        let p = Centre::Picker.centred(447.650691, b, x, ps);
        assert!((p - 1777.856664).abs() < 1e-5, "{p}");
    }
}
