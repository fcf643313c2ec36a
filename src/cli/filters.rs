//! The Fourier-filter flags of `monomorph match` (pytme match's names and defaults) and the
//! few lines that turn them into a [`FilterSpec`] (built on each backend by the library's job).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use monomorph::algo::filters::{
    AxisOrder, CtfCorrection, CtfSpec, FilterSpec, Microscope, TiltWeighting, WedgeSpec,
};
use monomorph::io::tilt::{read_ctf_file, read_tilt_angles};
use serde_json::json;

use super::error::{CliError, CliResult};
use super::project::Metadata;

/// Fourier filters, as `pytme match` builds them (its flag names and defaults). Arrays are
/// (z, y, x) as numpy and mrcfile read an MRC; axis numbers in --wedge-axes are pytme's for an
/// MRC file (0 = x, 1 = y, 2 = z), so a pytme command line on MRC files means the same physical
/// filter here. The filters are built in the frame pytme holds the data in, decided by the
/// target's file type: an MRC transposed ((x, y, z)), a .npy as stored (then pytme's axis a is
/// array axis a, i.e. pytme's `--wedge-axes O,T` on a 3-D .npy is `2−O,2−T` here). Å and
/// degrees throughout.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Fourier filters (pytme match's flags)")]
pub struct FilterArgs {
    /// Missing wedge: `A,B` (a continuous wedge between two tilt limits in degrees, absolute
    /// values taken) or a tilt-angle file: IMOD .tlt / text (one angle per line, or a header
    /// `angles weights` with the dose per tilt in `weights`; AreTomo's angle/index/exposure),
    /// .star (stopgap wedge list, Warp, RELION 5 tilt series), Warp/M .xml (tilts with
    /// UseTilt False left out) or SerialEM .mdoc (dose (z + 1) × ExposureDose, as pytme).
    #[arg(long, value_name = "A,B|FILE")]
    pub tilt_angles: Option<String>,
    /// Wedge axes `OPENING,TILT` in pytme's numbering (0 = x, 1 = y, 2 = z; the tilt
    /// series rotates about the third axis). Default 2,0: beam along z, tilt axis y.
    #[arg(long, value_name = "O,T")]
    pub wedge_axes: Option<String>,
    /// Per-tilt weighting of a tilt-angle file: angle (cos), relion or grigorieff (exposure
    /// filters; need the dose per tilt in the file). Ignored for an A,B range, as in pytme.
    #[arg(long, value_enum, value_name = "W")]
    pub tilt_weighting: Option<TiltWeightingArg>,
    /// Defocus in Å (positive = underfocus): one CTF applied to the template.
    #[arg(long, value_name = "Å", conflicts_with = "ctf_file")]
    pub defocus: Option<f64>,
    /// Per-tilt CTF: CTFFIND4 or AreTomo3 (_CTF.txt) output, a RELION/GCTF or stopgap .star,
    /// a Warp/M .xml (phase shift in units of π, as Warp stores it) or a SerialEM .mdoc.
    /// Needs --tilt-angles FILE with one angle per CTF row (a file with its own angles, such
    /// as a Warp .xml, can be given to both flags; angles that disagree are an error);
    /// voltage, Cs and amplitude contrast in the file win over the flags.
    #[arg(long, value_name = "FILE")]
    pub ctf_file: Option<PathBuf>,
    /// Acceleration voltage in kV [default: 300, or the tilt-series metadata's].
    #[arg(long, value_name = "KV")]
    pub acceleration_voltage: Option<f64>,
    /// Spherical aberration in Å (not mm: 2.7 mm = 2.7e7) [default: 2.7e7, or the metadata's].
    #[arg(long, value_name = "Å")]
    pub spherical_aberration: Option<f64>,
    /// Amplitude contrast fraction [default: 0.07, or the metadata's].
    #[arg(long, value_name = "A")]
    pub amplitude_contrast: Option<f64>,
    /// Additional phase shift in DEGREES (pytme 0.3.6 documents degrees but passes the number
    /// on as radians with --defocus; monomorph converts, so pytme's runs with a non-zero
    /// value are not reproduced: give the value in degrees here).
    #[arg(long, value_name = "DEG", default_value_t = 0.0)]
    pub phase_shift: f64,
    /// How the target's CTF was treated: phase-flip (template gets |CTF|) or raw (signed CTF).
    #[arg(long, value_enum, default_value_t = CtfCorrectionArg::PhaseFlip)]
    pub ctf_correction: CtfCorrectionArg,
    /// Gaussian low-pass edge in Å (0.5 at 1/Å).
    #[arg(long, value_name = "Å")]
    pub lowpass: Option<f64>,
    /// Gaussian high-pass edge in Å (0.5 at 1/Å).
    #[arg(long, value_name = "Å")]
    pub highpass: Option<f64>,
    /// Whiten template and target with the target's radially averaged power spectrum.
    #[arg(long)]
    pub whiten_spectrum: bool,
    /// Do not filter the target (the template filter is unchanged).
    #[arg(long)]
    pub no_filter_target: bool,
    /// Negate the target once, before anything else.
    #[arg(long)]
    pub invert_target_contrast: bool,
    /// Voxel size in Å for inputs whose file carries none (.npy); an MRC header that
    /// disagrees with it is an error. The filters use the template's voxel size (as pytme).
    #[arg(long, value_name = "Å")]
    pub sampling_rate: Option<f64>,
}

/// `--tilt-weighting`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TiltWeightingArg {
    /// cos(angle).
    Angle,
    /// RELION's exposure filter.
    Relion,
    /// Grant & Grigorieff's exposure filter.
    Grigorieff,
}

/// `--ctf-correction`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CtfCorrectionArg {
    /// The target was phase flipped.
    #[default]
    PhaseFlip,
    /// The target's CTF was not corrected.
    Raw,
}

fn bad(flag: &str, value: impl std::fmt::Display, why: impl std::fmt::Display) -> CliError {
    CliError::input(format!("{flag} {value}: {why}"))
}

/// Parses `--wedge-axes O,T` (pytme numbering) into ARRAY axes of `ndim`-D (z, y, x) data.
fn wedge_axes(s: &str, ndim: usize) -> CliResult<[usize; 2]> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let nums: Option<Vec<usize>> = parts.iter().map(|p| p.parse().ok()).collect();
    match nums.as_deref() {
        Some([o, t]) if *o < ndim && *t < ndim && o != t => Ok([ndim - 1 - o, ndim - 1 - t]),
        Some([o, t]) if o == t => Err(bad("--wedge-axes", s, "the two axes must differ")),
        Some([_, _]) => Err(bad(
            "--wedge-axes",
            s,
            format!("axes must be below {ndim} for {ndim}-D data"),
        )),
        _ => Err(bad(
            "--wedge-axes",
            s,
            "expected two axis numbers O,T (e.g. 2,0)",
        )),
    }
}

/// The voxel size of a file header (max over axes), if it has one other than the unset 1.
fn header_voxel(v: Option<[f32; 3]>) -> Option<f64> {
    v.map(|a| a.iter().fold(0f64, |m, &x| m.max(f64::from(x))))
}

/// Checks `--sampling-rate` against the headers and returns the filters' voxel size (the
/// template's header, else `--sampling-rate`, else 1 as pytme for a .npy template).
pub fn voxel_size(
    f: &FilterArgs,
    inputs: &[(&str, &Path, Option<[f32; 3]>)],
    template: Option<[f32; 3]>,
) -> CliResult<f64> {
    if let Some(sr) = f.sampling_rate {
        if !(sr.is_finite() && sr > 0.0) {
            return Err(bad("--sampling-rate", sr, "must be a positive number of Å"));
        }
        for (flag, path, v) in inputs {
            // an MRC without a cell reads as 1 Å: only a set, different size disagrees
            if let Some(h) = header_voxel(*v)
                && h != 1.0
                && (h - sr).abs() > 1e-3 * sr
            {
                return Err(bad(
                    "--sampling-rate",
                    sr,
                    format!(
                        "{flag} {} has a voxel size of {h} Å in its header, expected the two to agree",
                        path.display()
                    ),
                ));
            }
        }
    }
    Ok(match (header_voxel(template), f.sampling_rate) {
        (Some(1.0), Some(sr)) => sr,
        (Some(h), _) => h,
        (None, Some(sr)) => sr,
        (None, None) => 1.0,
    })
}

/// The filters asked for on the command line, or `None` when none is (checked: exit 2 on a
/// bad value or file). `voxel` is the template's voxel size in Å; `frame` how pytme holds the
/// arrays (the job's [`super::matching::pytme_frame`]): the filters are built in that frame,
/// with the wedge axes in the (z, y, x) convention of --wedge-axes whatever the frame.
pub fn spec(
    f: &FilterArgs,
    ndim: usize,
    voxel: f64,
    frame: AxisOrder,
    meta: Option<&Metadata>,
    quiet: bool,
) -> CliResult<Option<FilterSpec>> {
    if let Some(m) = meta {
        let given = [
            ("--tilt-angles", f.tilt_angles.is_some()),
            ("--ctf-file", f.ctf_file.is_some()),
            ("--defocus", f.defocus.is_some()),
            ("--tilt-weighting", f.tilt_weighting.is_some()),
            ("--acceleration-voltage", f.acceleration_voltage.is_some()),
            ("--spherical-aberration", f.spherical_aberration.is_some()),
            ("--amplitude-contrast", f.amplitude_contrast.is_some()),
        ];
        let over: Vec<&str> = given.iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect();
        if !over.is_empty() && !quiet {
            note!(
                "note: {} override(s) the value(s) from {}",
                over.join(", "),
                m.origin
            );
        }
    }
    let mut s = FilterSpec::new(voxel);
    s.axis_order = frame;
    s.wedge_axes = match &f.wedge_axes {
        Some(a) => Some(wedge_axes(a, ndim)?),
        // pytme's default 2,0 (beam along z = array axis 0), named as array axes so that it
        // stays that wedge in either frame; 2-D has no default (FilterSpec says so).
        None if ndim == 3 => Some([0, 2]),
        None => None,
    };
    s.wedge = match &f.tilt_angles {
        None => meta.map(|m| WedgeSpec::TiltSeries {
            angles: m.angles.clone(),
            doses: m.doses.clone(),
        }),
        Some(t) => {
            let pair: Vec<&str> = t.split(',').collect();
            let nums: Option<Vec<f64>> = pair.iter().map(|p| p.trim().parse().ok()).collect();
            match nums.as_deref() {
                Some([a, b]) if !Path::new(t).exists() => Some(WedgeSpec::Continuous {
                    a: a.abs(),
                    b: b.abs(),
                }),
                _ => {
                    let ta = read_tilt_angles(t)
                        .map_err(|e| CliError::from(e).about("--tilt-angles"))?;
                    Some(WedgeSpec::TiltSeries {
                        angles: ta.angles,
                        doses: ta.doses,
                    })
                }
            }
        }
    };
    s.tilt_weighting = f
        .tilt_weighting
        .map(|w| match w {
            TiltWeightingArg::Angle => TiltWeighting::Angle,
            TiltWeightingArg::Relion => TiltWeighting::Relion,
            TiltWeightingArg::Grigorieff => TiltWeighting::Grigorieff,
        })
        .or(meta.map(|_| TiltWeighting::Relion));
    s.microscope = Microscope {
        voltage_kv: f
            .acceleration_voltage
            .or(meta.and_then(|m| m.voltage_kv))
            .unwrap_or(DEFAULT_VOLTAGE),
        cs: f
            .spherical_aberration
            .or(meta.and_then(|m| m.cs_angstrom))
            .unwrap_or(DEFAULT_CS),
        amplitude_contrast: f
            .amplitude_contrast
            .or(meta.and_then(|m| m.amplitude_contrast))
            .unwrap_or(DEFAULT_AMPLITUDE),
    };
    s.ctf_correction = match f.ctf_correction {
        CtfCorrectionArg::PhaseFlip => CtfCorrection::PhaseFlip,
        CtfCorrectionArg::Raw => CtfCorrection::Raw,
    };
    if let Some(df) = f.defocus {
        for (flag, v) in [("--defocus", df), ("--phase-shift", f.phase_shift)] {
            if !v.is_finite() {
                return Err(bad(flag, super::error::show(v), "expected a finite number"));
            }
        }
        s.ctf = Some(CtfSpec::Single {
            defocus: df,
            phase_shift: f.phase_shift.to_radians(),
        });
    }
    if let Some(p) = &f.ctf_file {
        let c = read_ctf_file(p).map_err(|e| CliError::from(e).about("--ctf-file"))?;
        s.microscope.voltage_kv = c.voltage_kv.unwrap_or(s.microscope.voltage_kv);
        s.microscope.cs = c.cs.unwrap_or(s.microscope.cs);
        s.microscope.amplitude_contrast = c
            .amplitude_contrast
            .unwrap_or(s.microscope.amplitude_contrast);
        if let Some(file_angles) = &c.angles {
            check_ctf_angles(p, file_angles, &f.tilt_angles, s.wedge.as_ref())?;
        }
        s.ctf = Some(CtfSpec::PerTilt(c.tilts));
    }
    if s.ctf.is_none()
        && let Some(tilts) = meta.and_then(|m| m.ctf.clone())
    {
        s.ctf = Some(CtfSpec::PerTilt(tilts));
    }
    if s.ctf.is_some() {
        check_scope_flags(f, &s.microscope)?;
    }
    s.lowpass = f.lowpass;
    s.highpass = f.highpass;
    s.whiten = f.whiten_spectrum;
    s.filter_target = !f.no_filter_target;
    if s.is_empty() {
        if f.tilt_weighting.is_some() || f.wedge_axes.is_some() {
            return Err(CliError::input(
                "--tilt-weighting/--wedge-axes need --tilt-angles, expected a wedge to weight",
            ));
        }
        return Ok(None);
    }
    s.validate(ndim).map_err(|e| match e {
        monomorph::Error::InvalidArgument { name, reason } => {
            CliError::input(format!("--{name}: {reason}"))
        }
        other => CliError::from(other),
    })?;
    Ok(Some(s))
}

use monomorph::io::tilt::{DEFAULT_AMPLITUDE, DEFAULT_CS, DEFAULT_VOLTAGE};

/// The microscope flags a CTF uses, each under its own name, before anything is built: an
/// acceleration voltage from 1 to 10 000 kV (`1e-300` would make every filter value
/// non-finite), a spherical aberration from 0 to 1e10 Å, an amplitude contrast in [0, 1). A
/// value a `--ctf-file` gave instead was checked where the file was read (naming its line).
fn check_scope_flags(f: &FilterArgs, m: &Microscope) -> CliResult<()> {
    let show = super::error::show;
    let checks = [
        (
            "--acceleration-voltage",
            f.acceleration_voltage,
            m.voltage_kv,
            (|v: f64| (1.0..=1e4).contains(&v)) as fn(f64) -> bool,
            "expected an acceleration voltage from 1 to 10000 kV",
        ),
        (
            "--spherical-aberration",
            f.spherical_aberration,
            m.cs,
            (|v: f64| (0.0..=1e10).contains(&v)) as fn(f64) -> bool,
            "expected a spherical aberration from 0 to 1e10 Å (1000 mm)",
        ),
        (
            "--amplitude-contrast",
            f.amplitude_contrast,
            m.amplitude_contrast,
            (|v: f64| (0.0..1.0).contains(&v)) as fn(f64) -> bool,
            "expected an amplitude contrast in [0, 1)",
        ),
    ];
    for (flag, given, used, ok, want) in checks {
        let Some(given) = given else { continue };
        // Only the flag's own value, when it is the one used.
        if given.to_bits() == used.to_bits() && !ok(given) {
            return Err(bad(flag, show(given), want));
        }
    }
    Ok(())
}

/// A CTF file that gives its own tilt angles must agree with the tilt series of
/// `--tilt-angles` (the CTF of tilt k is gridded at angle k of the tilt series): same count,
/// same angles within 0.05°. Without `--tilt-angles` the error says the file can give them.
fn check_ctf_angles(
    ctf_file: &Path,
    file_angles: &[f64],
    tilt_flag: &Option<String>,
    wedge: Option<&WedgeSpec>,
) -> CliResult<()> {
    let Some(WedgeSpec::TiltSeries { angles, .. }) = wedge else {
        return Err(CliError::input(format!(
            "--ctf-file: a per-tilt CTF needs the tilt series' angles; {} gives {} of them: \
             pass it as --tilt-angles {} too",
            ctf_file.display(),
            file_angles.len(),
            ctf_file.display()
        )));
    };
    let tilts = tilt_flag.as_deref().unwrap_or("--tilt-angles");
    if angles.len() != file_angles.len() {
        return Err(CliError::input(format!(
            "--ctf-file: {} has {} tilts, --tilt-angles {tilts} has {}",
            ctf_file.display(),
            file_angles.len(),
            angles.len()
        )));
    }
    if let Some(k) = (0..angles.len()).find(|&k| (angles[k] - file_angles[k]).abs() > 0.05) {
        return Err(CliError::input(format!(
            "--ctf-file: tilt {} of {} is at {}°, of --tilt-angles {tilts} at {}°: the CTF rows \
             must be in the tilt series' order",
            k + 1,
            ctf_file.display(),
            file_angles[k],
            angles[k]
        )));
    }
    Ok(())
}

/// What run.json records of the filters; with tilt-series metadata also `metadata` (where
/// it came from) and the values used: `tilt_angles` and `doses` (lists, file order),
/// `defocus_per_tilt` (`[U, V, angle]`: Å, Å, degrees).
pub fn to_json(
    f: &FilterArgs,
    s: Option<&FilterSpec>,
    meta: Option<&Metadata>,
) -> serde_json::Value {
    let mut v = plain_json(f, s);
    let (Some(m), Some(s), Some(o)) = (meta, s, v.as_object_mut()) else {
        return v;
    };
    o.insert("metadata".into(), m.record.clone());
    if let Some(WedgeSpec::TiltSeries { angles, doses }) = &s.wedge {
        o.insert("tilt_angles".into(), json!(angles));
        o.insert("doses".into(), json!(doses));
    }
    let uv: Option<Vec<[f64; 3]>> = match &s.ctf {
        // The metadata's own CTF: U and V as the file gives them.
        Some(CtfSpec::PerTilt(t)) if f.ctf_file.is_none() && f.defocus.is_none() => {
            m.defocus_uv.clone().filter(|uv| uv.len() == t.len())
        }
        Some(CtfSpec::PerTilt(t)) => Some(
            t.iter()
                .map(|c| {
                    [
                        c.defocus + c.defocus_delta,
                        c.defocus - c.defocus_delta,
                        c.astigmatism_angle,
                    ]
                })
                .collect(),
        ),
        _ => None,
    };
    o.insert("defocus_per_tilt".into(), json!(uv));
    v
}

fn plain_json(f: &FilterArgs, s: Option<&FilterSpec>) -> serde_json::Value {
    let Some(s) = s else {
        return json!({ "invert_target_contrast": f.invert_target_contrast });
    };
    json!({
        "voxel_size": s.voxel_size,
        "tilt_angles": f.tilt_angles,
        "wedge": format!("{:?}", s.wedge),
        "wedge_axes_pytme": f.wedge_axes.clone().unwrap_or_else(|| "2,0".into()),
        "tilt_weighting": s.tilt_weighting.map(|w| format!("{w:?}").to_lowercase()),
        "ctf": format!("{:?}", s.ctf),
        "ctf_file": f.ctf_file.as_ref().map(|p| p.display().to_string()),
        "acceleration_voltage_kv": s.microscope.voltage_kv,
        "spherical_aberration_angstrom": s.microscope.cs,
        "amplitude_contrast": s.microscope.amplitude_contrast,
        "phase_shift_degrees": f.phase_shift,
        "ctf_correction": format!("{:?}", f.ctf_correction).to_lowercase(),
        "lowpass": s.lowpass, "highpass": s.highpass,
        "whiten_spectrum": s.whiten, "filter_target": s.filter_target,
        "invert_target_contrast": f.invert_target_contrast,
        "sampling_rate": f.sampling_rate,
    })
}

/// The target negated (`--invert-target-contrast`), in its own type.
pub fn negate(h: monomorph::io::HostArray) -> monomorph::io::HostArray {
    use monomorph::io::HostArray as H;
    match h.into_owned() {
        H::F32(a) => H::F32(-a),
        H::F64(a) => H::F64(-a),
        H::I32(a) => H::F64(a.mapv(|v| -f64::from(v))),
        H::I64(a) => H::F64(a.mapv(|v| -(v as f64))),
        H::Borrowed(_) => unreachable!("into_owned gives an owned array"),
    }
}
