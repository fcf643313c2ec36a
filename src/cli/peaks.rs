//! `monomorph peaks`: peak calling on a score map.

use std::path::{Path, PathBuf};

use clap::Args;
use monomorph::algo::peaks::{
    ExcludeBorder, Peak, PeakParams, PytmeParams, attach_rotations, call_peaks_maximum_filter,
    call_peaks_recursive, false_alarm, find_peaks, oversample_peaks,
};
pub use monomorph::algo::peaks::{FalseAlarm, RunStats};
use monomorph::algo::rotations::{RotationSet, relion_euler_of};
use monomorph::io::{HostArray, PeakRow, TableMeta, write_peaks_with, write_png};
use monomorph::{Arr, Backend, BackendTask, FloatOf};
use ndarray::{Array3, ArrayD, Ix3};
use tracing::info_span;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::output::{Outputs, check_distinct, check_out_file, read_npy_input};
pub use super::peak_query::{Caller, PEAK_FLAG_IDS, PeakFlags, PeakQuery, PytomArgs, given_flag};

/// Options of `monomorph peaks`.
#[derive(Args, Debug, Clone)]
pub struct PeaksArgs {
    /// Score map (`.npy` or MRC), 2-D or 3-D.
    #[arg(long, value_name = "S.npy")]
    pub scores: PathBuf,
    /// Best-rotation index per voxel (int32/int64 `.npy`, same shape as the scores).
    #[arg(long, value_name = "RI.npy", requires = "rotations")]
    pub rotation_index: Option<PathBuf>,
    /// The rotation list `(n, d, d)` the index refers to (adds rotation and angle columns):
    /// matrices acting on the array's index order (z, y, x), as `match` writes them
    /// (rotations.npy); checked like `match --rotations` (finite, orthonormal, det +1).
    #[arg(long, value_name = "R.npy", requires = "rotation_index")]
    pub rotations: Option<PathBuf>,
    /// The template of the best score per voxel (int `.npy`, the scores' shape), from a
    /// `match` with several --template: rows get its index (CSV column `template`, 0-based;
    /// STAR `_rlnClassNumber`, the index + 1). Default: the template_index.npy beside
    /// --rotation-index, when the run.json there lists several templates.
    #[arg(long, value_name = "TI.npy")]
    pub template_index: Option<PathBuf>,
    /// The peak query.
    #[command(flatten)]
    pub query: PeakFlags,
    /// The `match` output folder whose run.json holds the run's score statistics (default: a
    /// run.json beside --scores, when there is one); with --caller pytom also a
    /// pytom-match-pick job file (its job_stats and voxel_size).
    #[arg(long, value_name = "DIR")]
    pub match_run: Option<PathBuf>,
    /// Accept NaN scores and treat them as never a peak (NaN is never above a threshold nor a
    /// local maximum). Without it a map holding NaN is refused: NaN in a score map usually
    /// means a broken computation upstream, and peaks called around it would look valid.
    #[arg(long)]
    pub allow_nan: bool,
    /// pytom-match-pick's extraction flags (--caller pytom).
    #[command(flatten)]
    pub pytom: PytomArgs,
    /// Output peak list: `.csv` (`z,y,x,score[,rotation,rot,tilt,psi]`; 2-D
    /// `y,x,score[,rotation,psi]`) or `.star` (RELION 4: _rlnCoordinateX/Y/Z = array axes
    /// 2, 1, 0). Angles are RELION's, in degrees: Rz(rot)·Ry(tilt)·Rz(psi) is the rotation
    /// acting on (x, y, z) (the transpose of RELION's Euler_angles2matrix); 2-D: psi alone, on
    /// (x, y).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The STAR format of --out: relion4 (default, as above) or relion5, a RELION 5
    /// tomography particle file (3-D only): `_rlnTomoName`, `_rlnCenteredCoordinateX/Y/ZAngst`,
    /// `_rlnAngleRot/Tilt/Psi`, `_rlnAutopickFigureOfMerit` (the score), `_rlnOpticsGroup` and
    /// a `data_optics` table (pixel = `_rlnTomoTiltSeriesPixelSize`, voltage, Cs, amplitude
    /// contrast). Voxel i (x, y, z = array axes 2, 1, 0) is written at `c = (i·b − X/2)·ps`
    /// (see --relion5-centre), with b (`_rlnTomoTomogramBinning`), X (`_rlnTomoSizeX/Y/Z`), ps
    /// (`_rlnTomoTiltSeriesPixelSize`) and the optics from the --relion5-tomograms-star row of
    /// --tomo-name; without a project b = 1, ps = the map's voxel size (its MRC header, else
    /// the matching run's run.json), X = the map's size, the optics of the run's filters
    /// (else 300 kV, 2.7 mm, 0.07), `_rlnTomoName` = --tomo-name, else the scores' folder
    /// name. The file's comment says which rule and sizes were used.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub star_format: Option<super::project::StarFormat>,
    /// With --star-format relion5: `reader` (default; RELION's C++ reader, c/ps + X/2, puts the
    /// particle back exactly at i·b) or `picker` (RELION 5's picker, `(i·b − (X/2 − 1))·ps`,
    /// what pytom-match-pick's --relion5-compat approximates; one tilt-series pixel off for
    /// RELION's reader).
    #[arg(long, value_enum, value_name = "RULE", requires = "star_format")]
    pub relion5_centre: Option<super::project::CentreArg>,
    /// With --star-format relion5: the RELION 5 tomograms.star giving the geometry and optics
    /// of --tomo-name's row.
    #[arg(long, value_name = "T.star", requires = "star_format")]
    pub relion5_tomograms_star: Option<PathBuf>,
    /// With --star-format relion5: the tomogram's `_rlnTomoName` (the row of
    /// --relion5-tomograms-star).
    #[arg(long, value_name = "NAME", requires = "star_format")]
    pub tomo_name: Option<String>,
    /// Also draw the central slice of the map with the peaks marked, as a 16-bit PNG.
    #[arg(long, value_name = "FILE.png")]
    pub png: Option<PathBuf>,
}

/// The bytes `--peak-oversampling f` needs on a map of `shape` (the upsampled DFT of
/// [`oversample_peaks`], in f64 on the host): the map as f64 and its downloaded copy, the
/// largest pair of consecutive contraction stages (complex f64) and one kernel. `None` on
/// overflow.
pub fn oversampling_bytes(shape: &[usize], f: f64) -> Option<u128> {
    let u = (f * 1.5).ceil().max(1.0) as u128;
    let n: u128 = shape.iter().map(|&x| x as u128).product();
    let mut stages = vec![n];
    let mut cur: Vec<u128> = shape.iter().map(|&x| x as u128).collect();
    for a in (0..cur.len()).rev() {
        cur[a] = u;
        stages.push(cur.iter().product());
    }
    let pair = stages.windows(2).map(|w| w[0] + w[1]).max()?;
    let longest = shape.iter().copied().max()? as u128;
    16u128
        .checked_mul(pair)?
        .checked_add(16 * n)?
        .checked_add(16 * u * longest)
}

/// Checks before allocating that `--peak-oversampling f` fits in the memory this process may
/// take on a map of `shape` (a `ulimit -v` included): else exit 2 naming the flag.
pub fn check_oversampling_memory(shape: &[usize], f: f64) -> CliResult<()> {
    super::output::check_memory(
        "--peak-oversampling",
        &super::error::show(f),
        oversampling_bytes(shape, f),
    )
}

/// Keeps sub-voxel positions inside the searched box: a coordinate may not move from its
/// voxel towards a neighbour that was not searched (−∞, a restricted match), where the
/// interpolant only sees the zeros standing in for it. Moves across the map's edge keep
/// pytme's periodic interpolant.
fn keep_in_searched(host: &ArrayD<f64>, peaks: &[Peak], sub: &mut [Vec<f64>]) {
    for (p, pos) in peaks.iter().zip(sub.iter_mut()) {
        for (a, x) in pos.iter_mut().enumerate() {
            let at = p.coord[a] as f64;
            let step: isize = if *x > at {
                1
            } else if *x < at {
                -1
            } else {
                continue;
            };
            let next = p.coord[a] as isize + step;
            if next < 0 || next as usize >= host.shape()[a] {
                continue;
            }
            let mut idx = p.coord.clone();
            idx[a] = next as usize;
            if host[idx.as_slice()] == f64::NEG_INFINITY {
                *x = at;
            }
        }
    }
}

/// RELION's Euler angles in degrees of a row-major rotation acting on the array's index order
/// (`[rot, tilt, psi]`; 2-D `[0, 0, psi]`): see `monomorph::algo::rotations`, "Frames".
pub fn euler_of(m: &[f64]) -> [f64; 3] {
    relion_euler_of(m).unwrap_or([f64::NAN; 3])
}

/// Sets each row's template from a template-index map (at the row's voxel; none where the
/// map holds a negative index).
pub fn attach_templates<D: ndarray::Dimension>(
    rows: &mut [PeakRow],
    index: ndarray::ArrayView<'_, i32, D>,
) {
    let index = index.into_dyn();
    for r in rows {
        r.template = index
            .get(ndarray::IxDyn(&r.position))
            .and_then(|&t| usize::try_from(t).ok());
    }
}

/// The `--template-index` of `peaks`: the flag's file, else template_index.npy beside
/// `--rotation-index`; checked against the scores' shape.
pub(super) fn read_template_index(
    a: &PeaksArgs,
    shape: &[usize],
) -> CliResult<Option<ArrayD<i32>>> {
    // Beside --rotation-index only when that folder's run.json (written last by every match)
    // lists several templates: a template_index.npy left there by an earlier run is not read.
    let several = |ri: &Path| {
        std::fs::read(ri.with_file_name("run.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["templates"].as_array().map(|t| t.len() > 1))
            .unwrap_or(false)
    };
    let beside = a
        .rotation_index
        .as_ref()
        .filter(|ri| !super::session::in_memory(ri) && several(ri))
        .map(|ri| ri.with_file_name("template_index.npy"))
        .filter(|p| p.is_file());
    let Some(path) = a.template_index.clone().or(beside) else {
        return Ok(None);
    };
    let bad = |m: String| CliError::input(format!("--template-index {}: {m}", path.display()));
    let idx = read_npy_input("--template-index", &path)?
        .to_i64()
        .map_err(bad)?;
    if idx.shape() != shape {
        return Err(bad(format!(
            "shape {:?}, expected the score map's shape {shape:?}",
            idx.shape()
        )));
    }
    if idx.iter().any(|&t| t < -1 || t > i32::MAX as i64) {
        return Err(bad(
            "holds an index below -1 or too large, expected template indices".into(),
        ));
    }
    Ok(Some(idx.mapv(|t| t as i32)))
}

/// Table rows of called peaks, with their sub-voxel positions when given (one per peak).
pub fn rows_of(peaks: &[Peak], subvoxel: Option<&[Vec<f64>]>) -> Vec<PeakRow> {
    peaks
        .iter()
        .enumerate()
        .map(|(i, p)| PeakRow {
            position: p.coord.clone(),
            score: p.score,
            rotation: p.rotation.as_ref().map(|(k, _)| *k),
            euler: p.rotation.as_ref().map(|(_, m)| euler_of(m)),
            subvoxel: subvoxel.and_then(|s| s.get(i).cloned()),
            template: None,
        })
        .collect()
}

/// Called peaks as data for an embedding program: `positions` (voxels, or sub-voxel
/// `subvoxel`), `scores`, `rotation` and `euler` (when known) per peak, and `threshold`.
pub fn rows_json(rows: &[PeakRow], threshold: Option<f64>) -> serde_json::Value {
    let sub = rows.iter().any(|r| r.subvoxel.is_some());
    serde_json::json!({
        "positions": rows.iter().map(|r| r.position.clone()).collect::<Vec<_>>(),
        "subvoxel": sub.then(|| rows.iter().map(|r| r.subvoxel.clone()).collect::<Vec<_>>()),
        "scores": rows.iter().map(|r| r.score).collect::<Vec<_>>(),
        "rotation": rows.iter().map(|r| r.rotation).collect::<Vec<_>>(),
        "euler": rows.iter().map(|r| r.euler.map(|e| e.to_vec())).collect::<Vec<_>>(),
        "template": rows
            .iter()
            .any(|r| r.template.is_some())
            .then(|| rows.iter().map(|r| r.template).collect::<Vec<_>>()),
        "threshold": threshold,
    })
}

/// Peaks and how their false-alarm threshold was made.
#[derive(Debug, Clone)]
pub struct Called {
    /// The peaks, best first.
    pub peaks: Vec<Peak>,
    /// The `--false-positives` threshold, when asked for.
    pub false_alarm: Option<FalseAlarm>,
    /// Sub-voxel positions (`--peak-oversampling`), one per peak.
    pub subvoxel: Option<Vec<Vec<f64>>>,
    /// The lowest score a peak could have been called with: the largest of --threshold-abs,
    /// the --false-positives threshold and --threshold-rel × the map's maximum (`None`: no
    /// threshold was asked for).
    pub threshold: Option<f64>,
}

impl Called {
    /// The table rows of the peaks.
    pub fn rows(&self) -> Vec<PeakRow> {
        rows_of(&self.peaks, self.subvoxel.as_deref())
    }
}

/// Calls peaks on a device score map; attaches rotations when given.
pub fn call<B: Backend>(
    b: &B,
    scores: &Arr<B, FloatOf<B>>,
    q: &PeakQuery,
    rotations: Option<(&Arr<B, i64>, &Array3<f64>)>,
) -> monomorph::Result<Called> {
    let _span = info_span!("peaks", caller = ?q.caller, min_distance = q.min_distance).entered();
    let shape = scores.shape().to_vec();
    let mut threshold = q.threshold_abs;
    let fa = match q.false_positives {
        Some(k) => {
            let n_rot = rotations.map_or(1, |(_, r)| r.shape()[0]);
            let border = q.border(shape.len());
            let fa =
                false_alarm(b, scores, &border, k, q.run_stats, n_rot).map_err(|e| match e {
                    // The library names its argument; the command names the flag.
                    monomorph::Error::InvalidArgument { name, reason }
                        if name == "false_positives" =>
                    {
                        monomorph::Error::invalid("--false-positives", reason)
                    }
                    e => e,
                })?;
            Some(fa)
        }
        None => None,
    };
    if let Some(t) = fa.as_ref().and_then(|f| f.threshold) {
        threshold = Some(threshold.map_or(t, |a| a.max(t)));
    }
    let mut used = threshold;
    if let Some(r) = q.threshold_rel {
        let rel = r * super::output::f64_of(b.max(scores)?);
        used = Some(used.map_or(rel, |m| m.max(rel)));
    }
    let mut peaks = match q.caller {
        Caller::Skimage => {
            let params = PeakParams {
                min_distance: q.min_distance,
                threshold_abs: threshold,
                threshold_rel: q.threshold_rel,
                exclude_border: q
                    .exclude_border
                    .map_or(ExcludeBorder::Bool(true), ExcludeBorder::Width),
                num_peaks: if q.max_score.is_some() {
                    None
                } else {
                    q.num_peaks
                },
                ..PeakParams::default()
            };
            let mut p = find_peaks(b, scores, &params)?;
            if let Some(hi) = q.max_score {
                p.retain(|p| p.score <= hi);
                p.truncate(q.num_peaks.unwrap_or(usize::MAX));
            }
            p
        }
        Caller::Pytom => {
            return Err(monomorph::Error::invalid(
                "caller",
                "pytom's extraction runs through `monomorph peaks --caller pytom`",
            ));
        }
        Caller::Maxfilter | Caller::Recursive => {
            let min_score = used;
            let params = PytmeParams {
                num_peaks: q.num_peaks.unwrap_or(1000),
                min_distance: q.min_distance,
                min_boundary_distance: q.exclude_border.unwrap_or(0),
                min_score,
                max_score: q.max_score,
            };
            if q.caller == Caller::Maxfilter {
                call_peaks_maximum_filter(b, scores, &params)?
            } else {
                call_peaks_recursive::<B, FloatOf<B>, i64>(b, scores, &params, None)?
            }
        }
    };
    if let Some((ri, rots)) = rotations {
        attach_rotations(b, &mut peaks, &shape, ri, rots.view())?;
    }
    let subvoxel = match q.oversampling {
        Some(f) => {
            let mut sub = oversample_peaks(b, scores, &peaks, f)?;
            if !peaks.is_empty() {
                let host = b.download(scores)?.mapv(super::output::f64_of);
                keep_in_searched(&host, &peaks, &mut sub);
            }
            Some(sub)
        }
        None => None,
    };
    Ok(Called {
        peaks,
        false_alarm: fa,
        subvoxel,
        threshold: used,
    })
}

use monomorph::ArrayMeta;

struct PeaksTask {
    scores: HostArray,
    rotation_index: Option<ArrayD<i64>>,
    rotations: Option<Array3<f64>>,
    query: PeakQuery,
}

impl BackendTask for PeaksTask {
    type Output = Called;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Called> {
        let s = b.upload_owned(self.scores.into_float::<FloatOf<B>>())?;
        let ri = match self.rotation_index {
            Some(r) => Some(b.upload_owned(r)?),
            None => None,
        };
        let rot = ri.as_ref().zip(self.rotations.as_ref());
        call(b, &s, &self.query, rot)
    }
}

/// Reads `(n, d, d)` rotation matrices from a `.npy` for a `d`-D map (`what`: "target" or
/// "map") and validates them as every rotation input is: finite, orthonormal, determinant +1
/// ([`RotationSet::from_array`]). The one reader of `match --rotations` and `peaks --rotations`.
pub fn read_rotation_set(flag: &str, path: &Path, d: usize, what: &str) -> CliResult<RotationSet> {
    let r = read_npy_input(flag, path)?;
    let shape = r.shape().to_vec();
    let ok = shape.len() == 3
        && shape[1] == shape[2]
        && (shape[1] == 2 || shape[1] == 3)
        && shape[0] > 0;
    if !ok {
        return Err(CliError::input(format!(
            "{flag} {}: shape {shape:?}, expected (n, d, d) rotation matrices with d = 2 or 3",
            path.display()
        )));
    }
    if shape[1] != d {
        return Err(CliError::input(format!(
            "{flag} {}: {}×{} matrices, expected {d}×{d} for a {d}-D {what}",
            path.display(),
            shape[1],
            shape[2]
        )));
    }
    let arr = r
        .to_float::<f64>()
        .into_dimensionality::<Ix3>()
        .map_err(|e| CliError::input(format!("{flag} {}: {e}", path.display())))?;
    RotationSet::from_array(arr.view())
        .map_err(|e| CliError::from(e).about(format!("{flag} {}", path.display())))
}

/// What `peaks` takes from a matching run's `run.json`.
#[derive(Debug, Clone)]
pub(super) struct MatchRun {
    pub(super) path: PathBuf,
    pub(super) stats: RunStats,
    pub(super) shape: Vec<usize>,
    pub(super) target: Option<String>,
    /// The target's voxel size `(z, y, x)` in Å, when the run recorded one.
    pub(super) voxel_size: Option<[f64; 3]>,
    /// The run's `filters` record.
    pub(super) filters: serde_json::Value,
}

/// Reads the score statistics `match` writes into run.json (`score_statistics`).
pub(super) fn read_match_run(path: &Path) -> Result<MatchRun, String> {
    let text = match super::session::document(path) {
        // Embedded: `--match-run (array)`, the run.json document the program gave.
        Some(t) => t,
        None => std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?,
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e})"))?;
    let st = v
        .get("score_statistics")
        .ok_or("no score_statistics (not written by monomorph match, or by an older version)")?;
    let ssum = st["ssum"]
        .as_f64()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or("score_statistics.ssum is not a number >= 0")?;
    let n_rotations = st["n_rotations"]
        .as_u64()
        .filter(|&n| n > 0)
        .ok_or("score_statistics.n_rotations is not a count > 0")? as usize;
    let shape: Vec<usize> = st["shape"]
        .as_array()
        .and_then(|a| a.iter().map(|x| x.as_u64().map(|n| n as usize)).collect())
        .ok_or("score_statistics.shape is not a list of sizes")?;
    let target = v["parameters"]["target"]
        .as_str()
        .and_then(|t| Path::new(t).file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let voxel_size = v["parameters"]["voxel_size"].as_array().and_then(|a| {
        let v: Vec<f64> = a.iter().filter_map(|x| x.as_f64()).collect();
        <[f64; 3]>::try_from(v).ok()
    });
    Ok(MatchRun {
        path: path.to_path_buf(),
        stats: RunStats { ssum, n_rotations },
        shape,
        target,
        voxel_size,
        filters: v.get("filters").cloned().unwrap_or(serde_json::Value::Null),
    })
}

/// The matching run behind `--scores`: `--match-run DIR` (its run.json must be valid and fit
/// the scores and rotations) or a run.json beside the scores (used when it fits; otherwise a
/// warning, when it matters, and no run).
fn find_match_run(
    g: &Global,
    a: &PeaksArgs,
    shape: &[usize],
    n_rotations: Option<usize>,
) -> CliResult<Option<MatchRun>> {
    let (path, explicit) = match &a.match_run {
        Some(d) => (d.join("run.json"), true),
        None => {
            let dir = a
                .scores
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let p = dir.join("run.json");
            // Scores an embedding program gave in memory have no folder: a run.json in the
            // working folder is no run of theirs.
            if !p.is_file() || super::session::in_memory(&a.scores) {
                return Ok(None);
            }
            (p, false)
        }
    };
    let checked = read_match_run(&path).and_then(|r| {
        if r.shape != shape {
            return Err(format!(
                "describes a score map of shape {:?}, but --scores has shape {shape:?}",
                r.shape
            ));
        }
        if let Some(n) = n_rotations
            && n != r.stats.n_rotations
        {
            return Err(format!(
                "describes a search over {} rotations, but --rotations has {n}",
                r.stats.n_rotations
            ));
        }
        Ok(r)
    });
    match checked {
        Ok(r) => Ok(Some(r)),
        Err(m) if explicit => Err(CliError::input(format!(
            "--match-run {}: {m}, expected the output folder of the match that wrote --scores",
            path.display()
        ))),
        Err(m) => {
            if a.query.false_positives.is_some() && !g.quiet {
                note!("warning: ignoring {} beside --scores: {m}", path.display());
            }
            Ok(None)
        }
    }
}

/// The RELION 5 particle geometry of `--star-format relion5` (checked before any work), or
/// `None` for RELION 4 / CSV output.
fn relion5_geometry(
    a: &PeaksArgs,
    shape: &[usize],
    header: Option<[f32; 3]>,
    run: Option<&MatchRun>,
) -> CliResult<Option<monomorph::io::relion5::ParticleGeometry>> {
    use super::project::StarFormat;
    if a.star_format != Some(StarFormat::Relion5) {
        if a.relion5_tomograms_star.is_some() || a.tomo_name.is_some() {
            return Err(CliError::input(
                "--relion5-tomograms-star/--tomo-name: only with --star-format relion5",
            ));
        }
        return Ok(None);
    }
    let star = a
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("star"));
    if !star {
        return Err(CliError::input(format!(
            "--star-format relion5: --out {} is not a .star file",
            a.out.display()
        )));
    }
    let meta = match &a.relion5_tomograms_star {
        Some(t) => {
            let flags = super::project::MetadataArgs {
                relion5_tomograms_star: Some(t.clone()),
                tomo_name: a.tomo_name.clone(),
                ..Default::default()
            };
            Some(super::project::project_row(&flags)?)
        }
        None => None,
    };
    let name = match &a.tomo_name {
        Some(n) => n.clone(),
        None => a
            .scores
            .canonicalize()
            .ok()
            .and_then(|p| {
                p.parent()
                    .and_then(|d| d.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "tomogram".into()),
    };
    let voxel = header
        .map(|v| v.map(f64::from))
        .or_else(|| run.and_then(|r| r.voxel_size))
        .and_then(|v| {
            let iso = v.iter().all(|&x| (x - v[2]).abs() <= 1e-5 * v[2].abs());
            (iso && v[2].is_finite() && v[2] > 0.0).then_some(v[2])
        });
    let null = serde_json::Value::Null;
    let filters = run.map_or(&null, |r| &r.filters);
    super::project::geometry_of(meta.as_ref(), &name, shape, voxel, filters).map(Some)
}

/// Runs `monomorph peaks` with the skimage, maxfilter and recursive callers (`--caller pytom`
/// runs `pytom::run_peaks`, chosen where the command is dispatched).
pub fn run(g: &Global, a: PeaksArgs) -> CliResult<()> {
    if let Some(flag) = given_flag(&a.pytom) {
        return Err(CliError::input(format!(
            "{flag}: a pytom extraction setting, expected it with --caller pytom"
        )));
    }
    let mut query = PeakQuery::from_flags(&a.query)?;
    check_paths(&a)?;
    let vol = super::output::read_array_input("--scores", &a.scores)?;
    let g = &g.for_input("--scores", &a.scores, &vol.data)?;
    check_scores(&a, &vol.data)?;
    let shape = vol.data.shape().to_vec();
    let (rotation_index, rotations) = read_rotations(&a, &shape, shape.len())?.unzip();
    let template_index = read_template_index(&a, &shape)?;
    let run = find_match_run(g, &a, &shape, rotations.as_ref().map(|r| r.shape()[0]))?;
    query.run_stats = run.as_ref().map(|r| r.stats);
    check_false_positives(&a, &vol.data, run.as_ref(), rotations.as_ref())?;
    let relion5 = relion5_geometry(&a, &shape, vol.voxel_size, run.as_ref())?;
    // The PNG needs the map after the run; otherwise it moves into the task uncopied.
    let png_map = a.png.as_ref().map(|_| vol.data.to_float::<f32>());
    let task = PeaksTask {
        scores: vol.data,
        rotation_index,
        rotations,
        query,
    };
    let called = monomorph::dispatch(g.dispatch(None), task)?;
    let meta = table_meta(g, &a, vol.voxel_size, run.as_ref(), &called);
    let mut rows = called.rows();
    if let Some(t) = &template_index {
        attach_templates(&mut rows, t.view());
    }
    super::session::emit("peaks", || rows_json(&rows, called.threshold));
    let peaks = called.peaks;
    let mut out = Outputs::files();
    match &relion5 {
        Some(geo) => {
            let centre = a.relion5_centre.unwrap_or_default().centre();
            let sets = vec![(geo.clone(), super::project::particles_of(&rows)?)];
            let mut comments = meta.comments.clone();
            comments.extend(super::project::rule_comments(&sets, centre));
            let text =
                monomorph::io::relion5::particles_star(&[(geo, &sets[0].1)], centre, &comments);
            out.stage_file("--out", &a.out, |p| {
                std::fs::write(p, text)
                    .map_err(|e| monomorph::io::io_err(p, format!("cannot write: {e}")))
            })?;
        }
        None => out.stage_file("--out", &a.out, |p| {
            write_peaks_with(p, &rows, shape.len(), &meta)
        })?,
    }
    if let Some(png) = &a.png {
        let coords: Vec<Vec<usize>> = peaks.iter().map(|p| p.coord.clone()).collect();
        if let Some(map) = &png_map {
            out.stage_file("--png", png, |p| write_png(p, map, &coords))?;
        }
    }
    out.commit()?;
    if !g.quiet {
        note!("{} peaks written to {}", peaks.len(), a.out.display());
    }
    Ok(())
}

/// The files `peaks` writes (`--out`, `--png`): writable, and none of them an input.
fn check_paths(a: &PeaksArgs) -> CliResult<()> {
    check_out_file("--out", &a.out)?;
    if let Some(p) = &a.png {
        check_out_file("--png", p)?;
    }
    let mut outputs = vec![("--out", a.out.clone())];
    outputs.extend(a.png.iter().map(|p| ("--png", p.clone())));
    let inputs: Vec<(&str, &std::path::Path)> = [
        ("--scores", Some(&a.scores)),
        ("--rotation-index", a.rotation_index.as_ref()),
        ("--rotations", a.rotations.as_ref()),
        ("--template-index", a.template_index.as_ref()),
    ]
    .into_iter()
    .filter_map(|(f, p)| p.map(|p| (f, p.as_path())))
    .collect();
    check_distinct(&outputs, &inputs)
}

/// The score map: no NaN unless `--allow-nan` (and none with `--peak-oversampling`), 2-D or
/// 3-D and not empty, and small enough to oversample.
fn check_scores(a: &PeaksArgs, scores: &HostArray) -> CliResult<()> {
    if !a.allow_nan {
        let nan = scores.count_nan();
        if nan > 0 {
            return Err(CliError::input(format!(
                "--scores {}: {nan} NaN value(s), expected a score map without NaN (pass \
                 --allow-nan to treat NaN as never a peak)",
                a.scores.display()
            )));
        }
    }
    let shape = scores.shape();
    if !(shape.len() == 2 || shape.len() == 3) || shape.contains(&0) {
        return Err(CliError::input(format!(
            "--scores {}: shape {shape:?}, expected a non-empty 2-D or 3-D map",
            a.scores.display()
        )));
    }
    if let Some(f) = a.query.peak_oversampling {
        // Sub-voxel positions interpolate the whole map: NaN (accepted by --allow-nan for
        // calling) would make every position NaN.
        let nan = scores.count_nan();
        if nan > 0 {
            return Err(CliError::input(format!(
                "--peak-oversampling {}: needs a score map without NaN, but --scores {} holds \
                 {nan} (accepted for calling by --allow-nan), expected no --peak-oversampling \
                 or a map without NaN",
                super::error::show(f),
                a.scores.display()
            )));
        }
        check_oversampling_memory(shape, f)?;
    }
    Ok(())
}

/// `--rotation-index` and `--rotations` when both are given: the index map (the score map's
/// `shape`) and the `ndim`-D rotation matrices it indexes.
pub(super) fn read_rotations(
    a: &PeaksArgs,
    shape: &[usize],
    ndim: usize,
) -> CliResult<Option<(ArrayD<i64>, Array3<f64>)>> {
    let (Some(ri), Some(r)) = (&a.rotation_index, &a.rotations) else {
        return Ok(None);
    };
    let idx = read_npy_input("--rotation-index", ri)?
        .to_i64()
        .map_err(|m| CliError::input(format!("--rotation-index {}: {m}", ri.display())))?;
    if idx.shape() != shape {
        return Err(CliError::input(format!(
            "--rotation-index {}: shape {:?}, expected the score map's shape {shape:?}",
            ri.display(),
            idx.shape()
        )));
    }
    let rots = read_rotation_set("--rotations", r, ndim, "map")?;
    Ok(Some((idx, rots.to_array())))
}

/// `--false-positives K`: finite scores (−∞, a position a restricted match did not search, is
/// no trial and allowed) and fewer than the voxels × rotations searched. Checked here so that
/// the message names the flags, not the library's `k` and `sigma`.
fn check_false_positives(
    a: &PeaksArgs,
    scores: &HostArray,
    run: Option<&MatchRun>,
    rotations: Option<&Array3<f64>>,
) -> CliResult<()> {
    let Some(k) = a.query.false_positives else {
        return Ok(());
    };
    let bad = scores.count_nonfinite() - scores.count_neg_inf();
    if bad > 0 {
        return Err(CliError::input(format!(
            "--scores {}: {bad} NaN or +infinite value(s), expected finite scores (or -inf, not searched) for --false-positives",
            a.scores.display()
        )));
    }
    let n_rot = match (run, rotations) {
        (Some(r), _) => r.stats.n_rotations,
        (None, Some(r)) => r.shape()[0],
        (None, None) => 1,
    };
    let trials = scores.shape().iter().product::<usize>() as f64 * n_rot as f64;
    if k >= trials {
        return Err(CliError::input(format!(
            "--false-positives {}: expected fewer than the {trials} voxels × rotations of the map",
            super::error::show(k)
        )));
    }
    Ok(())
}

/// The table's micrograph, pixel size and comments (how the threshold was made), and the
/// notes saying so on the terminal.
fn table_meta(
    g: &Global,
    a: &PeaksArgs,
    header_voxel: Option<[f32; 3]>,
    run: Option<&MatchRun>,
    called: &Called,
) -> TableMeta {
    // RELION's pixel size: the scores' own voxel size (an MRC map), else the matching run's,
    // when isotropic (RELION has one pixel size per optics group).
    let voxel_size = header_voxel
        .map(|v| v.map(f64::from))
        .or_else(|| run.and_then(|r| r.voxel_size));
    let pixel_size = voxel_size.and_then(|v| {
        let iso = v.iter().all(|&x| (x - v[2]).abs() <= 1e-5 * v[2].abs());
        (iso && v[2].is_finite() && v[2] > 0.0).then_some(v[2])
    });
    let mut meta = TableMeta {
        micrograph: run.and_then(|r| r.target.clone()),
        pixel_size,
        ..TableMeta::default()
    };
    meta.comments
        .push(format!("peaks of {}", a.scores.display()));
    meta.comments.push(
        "angles: RELION's (rot, tilt, psi) in degrees, Rz(rot)Ry(tilt)Rz(psi) acting on (x, y, z)"
            .into(),
    );
    if let Some(fa) = &called.false_alarm {
        meta.comments.push(fa.describe());
        if let Some(r) = run {
            meta.comments
                .push(format!("matching run statistics: {}", r.path.display()));
        }
        if !g.quiet {
            if !fa.from_run {
                note!(
                    "warning: --false-positives without the matching run's statistics (no \
                     usable run.json beside --scores; pass --match-run DIR): sigma is the score \
                     map's standard deviation, not pytme's rule, and the rotation count is {}",
                    if a.rotations.is_some() {
                        "that of --rotations"
                    } else {
                        "1 (no --rotations)"
                    }
                );
            }
            note!("{}", fa.describe());
        }
    }
    meta
}
