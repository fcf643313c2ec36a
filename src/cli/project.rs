//! Where `monomorph match` takes its tilt-series metadata from besides the filter flags: a
//! RELION 5 project (`--relion5-tomograms-star T.star --tomo-name NAME`, or every row of a
//! `--target-list` that is a `tomograms.star`) or a Warp/M tilt-series XML (`--warp-xml`).
//! What is read becomes a [`Metadata`], which `filters::spec` turns into the same filters as
//! `--tilt-angles FILE --ctf-file FILE --tilt-weighting relion` with the microscope values
//! given as flags (the same bits); an explicit filter flag overrides the metadata's value.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use monomorph::algo::filters::TiltCtf;
use monomorph::io::relion5::{
    AngleSource, Centre, Particle, ParticleGeometry, Tomogram, read_tilt_series, read_tomogram_set,
};
use monomorph::io::tilt::{read_ctf_file, read_tilt_angles};
use serde_json::json;

use super::error::{CliError, CliResult};

/// Tilt-series metadata flags of `monomorph match`.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Tilt-series metadata (RELION 5 project, Warp XML)")]
pub struct MetadataArgs {
    /// A RELION 5 tomogram set (`Tomograms/jobNNN/tomograms.star`, block data_global); with
    /// --tomo-name, that row gives: the target (`_rlnTomoReconstructedTomogram`, else
    /// `_rlnTomoReconstructedTomogramDenoised`; a row with half maps only needs --target;
    /// --target overrides it), the voxel size (`_rlnTomoTiltSeriesPixelSize ×
    /// _rlnTomoTomogramBinning`, binning 1 if absent; the target MRC's header must agree within
    /// 1e-4 relative, a template header that agrees is used as is), the microscope
    /// (`_rlnVoltage` kV, `_rlnSphericalAberration` mm, `_rlnAmplitudeContrast`), and the
    /// per-tilt STAR (`_rlnTomoTiltSeriesStarFile`, else `<T.star's folder>/tilt_series/
    /// NAME.star`; block data_NAME): tilt angles (see --tilt-angle-source), doses
    /// (`_rlnMicrographPreExposure`), the per-tilt CTF (`_rlnDefocusU/V/Angle`), rows in the
    /// file's order. The filters are then exactly those of `--tilt-angles S --ctf-file S
    /// --tilt-weighting relion` with the row's microscope values as flags. Paths in the project
    /// are relative to the current directory (run from the project folder, as RELION does).
    /// Any explicit filter flag (--tilt-angles, --ctf-file, --defocus, --tilt-weighting,
    /// --acceleration-voltage, --spherical-aberration, --amplitude-contrast, --sampling-rate)
    /// overrides the project's value, with a note on stderr. run.json records what was taken
    /// (filters.metadata and the values used).
    #[arg(long, value_name = "T.star", conflicts_with_all = ["target_list", "warp_xml"])]
    pub relion5_tomograms_star: Option<PathBuf>,
    /// The tomogram (`_rlnTomoName`) of --relion5-tomograms-star.
    #[arg(long, value_name = "NAME", requires = "relion5_tomograms_star")]
    pub tomo_name: Option<String>,
    /// Which tilt angles of the per-tilt STAR: nominal (`_rlnTomoNominalStageTiltAngle`, the
    /// default, as pytom-match-pick and pytme read them) or aligned (`_rlnTomoYTilt`, which can
    /// differ by the lamella pre-tilt).
    #[arg(long, value_enum, value_name = "SOURCE")]
    pub tilt_angle_source: Option<AngleSourceArg>,
    /// With --target-list T.star (a RELION 5 tomograms.star): match every tomogram with the
    /// filter flags alone, not with its own metadata (the behaviour before RELION 5 projects
    /// were read).
    #[arg(long, requires = "target_list")]
    pub no_tomogram_metadata: bool,
    /// A Warp/M tilt-series XML: exactly `--tilt-angles X.xml --ctf-file X.xml --tilt-weighting
    /// relion` (angles as Warp stores them, as pytme reads them; per-tilt defocus U/V from
    /// GridCTF and its delta, with the astigmatism angle; tilts with UseTilt False left out)
    /// plus the voltage, Cs and amplitude contrast the XML holds (explicit flags override;
    /// the XML's PixelSize is the tilt images', recorded in run.json, not the voxel size).
    /// pytom-match-pick negates Warp's angles and drops the astigmatism: monomorph does not.
    #[arg(long, value_name = "X.xml")]
    pub warp_xml: Option<PathBuf>,
}

/// `--tilt-angle-source`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AngleSourceArg {
    /// `_rlnTomoNominalStageTiltAngle`.
    Nominal,
    /// `_rlnTomoYTilt`.
    Aligned,
}

impl MetadataArgs {
    fn source(&self) -> AngleSource {
        match self.tilt_angle_source {
            Some(AngleSourceArg::Aligned) => AngleSource::Aligned,
            _ => AngleSource::Nominal,
        }
    }
}

/// Tilt-series metadata read for one target.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// `filters.metadata` of run.json: `{file, tomo_name, tilt_series_file, tilt_angle_source}`.
    pub record: serde_json::Value,
    /// Where it came from, for messages (`--relion5-tomograms-star T (NAME)`).
    pub origin: String,
    /// Tilt angles, degrees, file order.
    pub angles: Vec<f64>,
    /// Dose per tilt, e⁻/Å².
    pub doses: Option<Vec<f64>>,
    /// Per-tilt CTF.
    pub ctf: Option<Vec<TiltCtf>>,
    /// `[U, V, angle]` per tilt (Å, Å, degrees), as the file gives them.
    pub defocus_uv: Option<Vec<[f64; 3]>>,
    /// kV.
    pub voltage_kv: Option<f64>,
    /// Å.
    pub cs_angstrom: Option<f64>,
    /// Fraction.
    pub amplitude_contrast: Option<f64>,
    /// The tomogram's voxel size in Å (a project: TS pixel × binning).
    pub voxel_size: Option<f64>,
    /// The project's row (RELION 5 particle output, dimension checks).
    pub tomogram: Option<Tomogram>,
}

impl Metadata {
    /// A RELION 5 particle file's geometry for this tomogram.
    pub fn geometry(&self) -> Option<ParticleGeometry> {
        let t = self.tomogram.as_ref()?;
        Some(ParticleGeometry {
            tomo_name: t.name.clone(),
            binning: t.binning,
            size: t.size?,
            ts_pixel: t.ts_pixel,
            voltage_kv: t.voltage_kv,
            cs_mm: t.cs_mm,
            amplitude_contrast: t.amplitude_contrast,
            optics_group: t.optics_group.clone(),
        })
    }
}

/// The metadata of `a` (none when no metadata flag is given) and the target path: `--target`,
/// else the project row's map. Reads the files; creates nothing.
pub fn resolve(
    m: &MetadataArgs,
    target: Option<&Path>,
) -> CliResult<(Option<Metadata>, Option<PathBuf>)> {
    if m.tilt_angle_source.is_some() && m.relion5_tomograms_star.is_none() {
        return Err(CliError::input(
            "--tilt-angle-source: chooses a column of a RELION 5 per-tilt STAR, expected \
             --relion5-tomograms-star (or a --target-list tomograms.star)",
        ));
    }
    if let Some(x) = &m.warp_xml {
        return Ok((Some(warp(x)?), target.map(Path::to_path_buf)));
    }
    let Some(set_path) = &m.relion5_tomograms_star else {
        return Ok((None, target.map(Path::to_path_buf)));
    };
    let flag = "--relion5-tomograms-star";
    let set = read_tomogram_set(set_path).map_err(|e| CliError::from(e).about(flag))?;
    let Some(name) = &m.tomo_name else {
        return Err(CliError::input(format!(
            "{flag} {}: which tomogram? expected --tomo-name, one of: {}",
            set_path.display(),
            set.names().join(", ")
        )));
    };
    let t = set
        .tomogram(name)
        .map_err(|e| CliError::from(e).about(flag))?;
    let ts_path = set
        .tilt_series_path(&t)
        .map_err(|e| CliError::from(e).about(flag))?;
    let source = m.source();
    let ts = read_tilt_series(&ts_path, name, source)
        .map_err(|e| CliError::from(e).about(format!("{flag} {} ({name})", set_path.display())))?;
    let target = match (target, &t.map) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(map)) => PathBuf::from(map),
        (None, None) => {
            return Err(CliError::input(format!(
                "{flag} {} line {} ({name}): no _rlnTomoReconstructedTomogram or \
                 _rlnTomoReconstructedTomogramDenoised{}, expected --target",
                set_path.display(),
                t.line,
                if t.halves_only {
                    " (half maps only)"
                } else {
                    ""
                }
            )));
        }
    };
    let record = json!({
        "file": set_path.display().to_string(),
        "tomo_name": name,
        "tilt_series_file": ts_path.display().to_string(),
        "tilt_series_block": ts.block,
        "tilt_angle_source": source.name(),
        "line": t.line,
        "ts_pixel_size": t.ts_pixel,
        "binning": t.binning,
        "tomo_size": t.size,
    });
    Ok((
        Some(Metadata {
            record,
            origin: format!("{flag} {} ({name})", set_path.display()),
            angles: ts.angles,
            doses: Some(ts.doses),
            ctf: Some(ts.ctf),
            defocus_uv: Some(ts.defocus_uv),
            voltage_kv: Some(t.voltage_kv),
            cs_angstrom: Some(t.cs_mm * 1e7),
            amplitude_contrast: Some(t.amplitude_contrast),
            voxel_size: Some(t.voxel_size()),
            tomogram: Some(t),
        }),
        Some(target),
    ))
}

/// The project row alone (no per-tilt STAR): for `peaks --star-format relion5`.
pub fn project_row(m: &MetadataArgs) -> CliResult<Metadata> {
    let flag = "--relion5-tomograms-star";
    let set_path = m.relion5_tomograms_star.clone().unwrap_or_default();
    let set = read_tomogram_set(&set_path).map_err(|e| CliError::from(e).about(flag))?;
    let Some(name) = &m.tomo_name else {
        return Err(CliError::input(format!(
            "{flag} {}: which tomogram? expected --tomo-name, one of: {}",
            set_path.display(),
            set.names().join(", ")
        )));
    };
    let t = set
        .tomogram(name)
        .map_err(|e| CliError::from(e).about(flag))?;
    Ok(Metadata {
        record: json!({ "file": set_path.display().to_string(), "tomo_name": name }),
        origin: format!("{flag} {} ({name})", set_path.display()),
        angles: Vec::new(),
        doses: None,
        ctf: None,
        defocus_uv: None,
        voltage_kv: Some(t.voltage_kv),
        cs_angstrom: Some(t.cs_mm * 1e7),
        amplitude_contrast: Some(t.amplitude_contrast),
        voxel_size: Some(t.voxel_size()),
        tomogram: Some(t),
    })
}

/// `--warp-xml X`: the readers of `--tilt-angles X --ctf-file X`.
fn warp(x: &Path) -> CliResult<Metadata> {
    let ta = read_tilt_angles(x).map_err(|e| CliError::from(e).about("--warp-xml"))?;
    let c = read_ctf_file(x).map_err(|e| CliError::from(e).about("--warp-xml"))?;
    if c.tilts.len() != ta.angles.len() {
        return Err(CliError::input(format!(
            "--warp-xml {}: {} CTF rows for {} tilts",
            x.display(),
            c.tilts.len(),
            ta.angles.len()
        )));
    }
    let uv = c
        .tilts
        .iter()
        .map(|t| {
            [
                t.defocus + t.defocus_delta,
                t.defocus - t.defocus_delta,
                t.astigmatism_angle,
            ]
        })
        .collect();
    Ok(Metadata {
        record: json!({
            "file": x.display().to_string(),
            "tomo_name": null,
            "tilt_series_file": x.display().to_string(),
            "tilt_angle_source": "warp",
            "tilt_image_pixel_size": c.pixel_size,
        }),
        origin: format!("--warp-xml {}", x.display()),
        angles: ta.angles,
        doses: ta.doses,
        ctf: Some(c.tilts),
        defocus_uv: Some(uv),
        voltage_kv: c.voltage_kv,
        cs_angstrom: c.cs,
        amplitude_contrast: c.amplitude_contrast,
        voxel_size: None,
        tomogram: None,
    })
}

/// Relative difference of two voxel sizes.
fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// The filters' voxel size with a project: `--sampling-rate` (overrides, said on stderr) or
/// the template's header when it agrees with the project within 1e-4 relative (the bits a
/// run given the same files by hand uses), else the project's. Checks the target's MRC header
/// against the project (exit 2 naming both) and its dimensions against RELION's
/// reconstruction (a warning).
pub fn project_voxel(
    meta: &Metadata,
    sampling_rate: Option<f64>,
    target: (&Path, Option<[f32; 3]>, &[usize]),
    template: Option<[f32; 3]>,
    quiet: bool,
) -> CliResult<Option<f64>> {
    let Some(pv) = meta.voxel_size else {
        return Ok(None);
    };
    let head = |v: Option<[f32; 3]>| {
        v.map(|a| a.iter().fold(0f64, |m, &x| m.max(f64::from(x))))
            .filter(|&h| h > 0.0)
    };
    let (tpath, tvox, tshape) = target;
    if let Some(h) = head(tvox)
        && rel(h, pv) > 1e-4
    {
        return Err(CliError::input(format!(
            "--target {}: voxel size {h} Å in its header, but {} gives {pv} Å \
             (_rlnTomoTiltSeriesPixelSize × _rlnTomoTomogramBinning), expected them to agree \
             within 1e-4",
            tpath.display(),
            meta.origin
        )));
    }
    if let Some(t) = &meta.tomogram
        && let Some(d) = t.reconstruction_dims()
        && tshape.len() == 3
    {
        let xyz = [tshape[2], tshape[1], tshape[0]];
        if xyz != d && !quiet {
            note!(
                "warning: --target {} is {}×{}×{} voxels (x×y×z), RELION's reconstruction of \
                 {} would be {}×{}×{} (cropped or resampled?); coordinates stay in this map's \
                 voxels",
                tpath.display(),
                xyz[0],
                xyz[1],
                xyz[2],
                t.name,
                d[0],
                d[1],
                d[2]
            );
        }
    }
    if let Some(sr) = sampling_rate {
        if !quiet {
            note!(
                "note: --sampling-rate {sr} overrides the voxel size {pv} Å of {}",
                meta.origin
            );
        }
        return Ok(None);
    }
    Ok(Some(match head(template) {
        Some(h) if rel(h, pv) <= 1e-4 => h,
        Some(h) => {
            if !quiet {
                note!(
                    "warning: --template has a voxel size of {h} Å in its header, {} gives \
                     {pv} Å: the filters use {pv} Å",
                    meta.origin
                );
            }
            pv
        }
        None => pv,
    }))
}

/// `--star-format`: the particle file written.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StarFormat {
    /// RELION 4: `_rlnCoordinateX/Y/Z` in voxels (array axes 2, 1, 0), `_rlnMicrographName`.
    #[default]
    Relion4,
    /// RELION 5 tomography: `_rlnTomoName`, `_rlnCenteredCoordinateX/Y/ZAngst`, `data_optics`.
    Relion5,
}

/// `--relion5-centre`: the centring rule of a RELION 5 particle file.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CentreArg {
    /// RELION's C++ reader: `c = (i·b − X/2)·ps`, read back exactly at `i·b`.
    #[default]
    #[value(alias = "relion", alias = "cpp")]
    Reader,
    /// RELION 5's picker: `c = (i·b − (X/2 − 1))·ps` (what pytom-match-pick's
    /// --relion5-compat approximates); RELION's reader puts it 1 tilt-series pixel off.
    Picker,
}

impl CentreArg {
    /// The library's rule.
    pub fn centre(self) -> Centre {
        match self {
            CentreArg::Reader => Centre::Reader,
            CentreArg::Picker => Centre::Picker,
        }
    }
}

/// A target's RELION 5 particle geometry: the project row's when there is one (it must have
/// `_rlnTomoSizeX/Y/Z`), else `b = 1`, `ps` = the map's voxel size, `X` = the map's size
/// (x, y, z), the optics of the run's filters (else the flags' defaults), named `name`.
pub fn geometry_of(
    meta: Option<&Metadata>,
    name: &str,
    shape_zyx: &[usize],
    voxel: Option<f64>,
    filters_json: &serde_json::Value,
) -> CliResult<ParticleGeometry> {
    if shape_zyx.len() != 3 {
        return Err(CliError::input(format!(
            "--star-format relion5: a tomography particle file needs a 3-D map, {name} is {}-D",
            shape_zyx.len()
        )));
    }
    if let Some(t) = meta.and_then(|m| m.tomogram.as_ref()) {
        return meta.and_then(Metadata::geometry).ok_or_else(|| {
            CliError::input(format!(
                "--star-format relion5: tomogram {} (line {}) has no _rlnTomoSizeX/Y/Z, \
                 expected the bin-1 size RELION centres coordinates on",
                t.name, t.line
            ))
        });
    }
    let Some(ps) = voxel else {
        return Err(CliError::input(format!(
            "--star-format relion5: no voxel size for {name} (no MRC header, no \
             run.json voxel_size), expected --relion5-tomograms-star or an MRC target"
        )));
    };
    let num = |k: &str, d: f64| filters_json.get(k).and_then(|v| v.as_f64()).unwrap_or(d);
    Ok(ParticleGeometry {
        tomo_name: name.to_string(),
        binning: 1.0,
        size: [
            shape_zyx[2] as f64,
            shape_zyx[1] as f64,
            shape_zyx[0] as f64,
        ],
        ts_pixel: ps,
        voltage_kv: num(
            "acceleration_voltage_kv",
            monomorph::io::tilt::DEFAULT_VOLTAGE,
        ),
        cs_mm: num(
            "spherical_aberration_angstrom",
            monomorph::io::tilt::DEFAULT_CS,
        ) / 1e7,
        amplitude_contrast: num("amplitude_contrast", monomorph::io::tilt::DEFAULT_AMPLITUDE),
        optics_group: None,
    })
}

/// Peak rows as particles: `(x, y, z)` = array axes 2, 1, 0 (sub-voxel when refined).
pub fn particles_of(rows: &[monomorph::io::PeakRow]) -> CliResult<Vec<Particle>> {
    rows.iter()
        .map(|r| {
            let pos: Vec<f64> = match &r.subvoxel {
                Some(v) => v.clone(),
                None => r.position.iter().map(|&x| x as f64).collect(),
            };
            if pos.len() != 3 {
                return Err(CliError::input(
                    "--star-format relion5: a tomography particle file needs a 3-D map",
                ));
            }
            Ok(Particle {
                xyz: [pos[2], pos[1], pos[0]],
                euler: r.euler,
                score: r.score,
                template: r.template,
            })
        })
        .collect()
}

/// The comment lines of a RELION 5 particle file: the rule and each tomogram's sizes.
pub fn rule_comments(sets: &[(ParticleGeometry, Vec<Particle>)], centre: Centre) -> Vec<String> {
    let mut c = vec![
        format!("centred coordinates: {}", centre.formula()),
        "i = voxel (x, y, z) = array axes (2, 1, 0) of the map; b = binning, X = (X, Y, Z) \
         bin-1 size in tilt-series pixels, ps = tilt-series pixel size (A)"
            .into(),
    ];
    for (g, _) in sets {
        c.push(format!(
            "{}: b = {}, X = {} x {} x {}, ps = {}",
            g.tomo_name, g.binning, g.size[0], g.size[1], g.size[2], g.ts_pixel
        ));
    }
    c
}
