//! pytom-match-pick's extraction for `monomorph peaks --caller pytom` and `monomorph roc`: the
//! voxel size and run statistics they need, and the one backend task both run (the flags,
//! [`PytomArgs`], are declared with `peaks`' own).

use std::path::Path;

use monomorph::algo::peaks::{
    Extracted, PytomParams, TophatParams, attach_rotations, extract_pytom, pytom_cut_off,
    pytom_radius,
};
use monomorph::io::{HostArray, PeakRow, TableMeta, write_peaks_with};
use monomorph::{Backend, BackendTask, FloatOf};
use ndarray::{Array3, ArrayD};

use super::output::{Outputs, check_distinct, check_out_file, read_input};
use super::peaks::{MatchRun, PeaksArgs, PytomArgs, read_match_run, rows_of};
use super::{CliError, CliResult, Global};

/// The voxel size in Å for the particle diameter: the scores' MRC header (an unset cell, 1 Å,
/// only when nothing else gives one), else the run's, else `--sampling-rate`.
pub fn voxel_size(
    header: Option<[f32; 3]>,
    run: Option<&MatchRun>,
    sampling_rate: Option<f64>,
) -> CliResult<f64> {
    if let Some(sr) = sampling_rate
        && !(sr.is_finite() && sr > 0.0)
    {
        return Err(CliError::input(format!(
            "--sampling-rate {}: expected a positive voxel size in Å",
            super::error::show(sr)
        )));
    }
    let iso = |v: [f64; 3], what: &str| -> CliResult<Option<f64>> {
        if !v.iter().all(|x| x.is_finite() && *x > 0.0) {
            return Ok(None);
        }
        if v.iter().any(|&x| (x - v[2]).abs() > 1e-5 * v[2]) {
            return Err(CliError::input(format!(
                "--particle-diameter: {what} has an anisotropic voxel size {v:?} Å, expected one \
                 voxel size (pytom's particle radius is one number of voxels)"
            )));
        }
        Ok(Some(v[2]))
    };
    let from_header = match header {
        Some(h) => iso(h.map(f64::from), "the scores' header")?,
        None => None,
    };
    let from_run = match run.and_then(|r| r.voxel_size) {
        Some(v) => iso(v, "the matching run")?,
        None => None,
    };
    let other = from_run.or(sampling_rate);
    Ok(match (from_header, other) {
        (Some(1.0), Some(o)) => o,
        (Some(h), _) => h,
        (None, Some(o)) => o,
        (None, None) => {
            return Err(CliError::input(
                "--particle-diameter: no voxel size to convert it to voxels: the scores carry \
                 no MRC header and no run.json gives one, expected --sampling-rate Å",
            ));
        }
    })
}

/// pytom's particle radius from `--particle-diameter` (checked: a positive diameter of at
/// least a voxel, and of two voxels so that the radius is not 0).
pub fn radius(diameter: Option<f64>, voxel: f64) -> CliResult<usize> {
    let d = diameter.ok_or_else(|| {
        CliError::input("--particle-diameter: required (the particle diameter in Å)")
    })?;
    let show = super::error::show(d);
    if !d.is_finite() || d <= 0.0 {
        return Err(CliError::input(format!(
            "--particle-diameter {show}: expected a positive diameter in Å"
        )));
    }
    if d < voxel {
        return Err(CliError::input(format!(
            "--particle-diameter {show}: smaller than a voxel ({voxel} Å), expected the \
             particle's diameter in Å"
        )));
    }
    pytom_radius(d, voxel).map_err(|e| CliError::for_flag(e, "--particle-diameter", show))
}

/// Reads pytom-match-pick's job file (`<tomo>_job.json`): its `job_stats` (`variance` = mean
/// squared score, `search_space` = voxels × rotations) and `voxel_size`.
fn read_pytom_job(path: &Path, shape: &[usize]) -> Result<MatchRun, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e})"))?;
    let st = v
        .get("job_stats")
        .filter(|s| !s.is_null())
        .ok_or("no job_stats (not a finished pytom-match-pick job)")?;
    let ssum = st["variance"]
        .as_f64()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or("job_stats.variance is not a number >= 0")?;
    let space = st["search_space"]
        .as_f64()
        .filter(|x| x.is_finite() && *x >= 1.0)
        .ok_or("job_stats.search_space is not a count")?;
    let voxels = shape.iter().product::<usize>() as f64;
    let n_rotations = (space / voxels).round().max(1.0) as usize;
    if (n_rotations as f64 * voxels - space).abs() > 0.5 {
        return Err(format!(
            "job_stats.search_space {space} is not the {voxels} voxels of --scores times a \
             number of rotations"
        ));
    }
    let vs = v["voxel_size"]
        .as_f64()
        .filter(|x| x.is_finite() && *x > 0.0);
    Ok(MatchRun {
        path: path.to_path_buf(),
        stats: super::peaks::RunStats { ssum, n_rotations },
        shape: shape.to_vec(),
        target: v["tomogram"]
            .as_str()
            .and_then(|t| Path::new(t).file_stem())
            .map(|n| n.to_string_lossy().into_owned()),
        voxel_size: vs.map(|x| [x; 3]),
        filters: serde_json::Value::Null,
    })
}

/// The matching run behind the scores for pytom's statistics: `--match-run DIR` (a `match`
/// output folder, or a pytom-match-pick job file), else a run.json beside the scores (when it
/// fits).
pub fn find_run(
    match_run: Option<&Path>,
    scores: &Path,
    shape: &[usize],
) -> CliResult<Option<MatchRun>> {
    if let Some(f) = match_run.filter(|f| f.is_file()) {
        return read_pytom_job(f, shape).map(Some).map_err(|m| {
            CliError::input(format!(
                "--match-run {}: {m}, expected a match output folder or a pytom-match-pick job \
                 file",
                f.display()
            ))
        });
    }
    let (path, explicit) = match match_run {
        Some(d) => (d.join("run.json"), true),
        None => {
            let dir = scores
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let p = dir.join("run.json");
            // Scores an embedding program gave in memory have no folder: a run.json in the
            // working folder is no run of theirs.
            if !p.is_file() || super::session::in_memory(scores) {
                return Ok(None);
            }
            (p, false)
        }
    };
    match read_match_run(&path) {
        Ok(r) if r.shape == shape => Ok(Some(r)),
        Ok(r) if explicit => Err(CliError::input(format!(
            "--match-run {}: describes a score map of shape {:?}, but --scores has shape \
             {shape:?}, expected the output folder of the match that wrote --scores",
            path.display(),
            r.shape
        ))),
        Err(m) if explicit => Err(CliError::input(format!(
            "--match-run {}: {m}, expected the output folder of the match that wrote --scores",
            path.display()
        ))),
        _ => Ok(None),
    }
}

/// Reads `--tomogram-mask` (true where > 0), of the scores' shape.
pub fn read_mask(path: &Path, shape: &[usize]) -> CliResult<ArrayD<bool>> {
    let v = read_input("--tomogram-mask", path, &[3])?;
    if v.data.shape() != shape {
        return Err(CliError::input(format!(
            "--tomogram-mask {}: shape {:?}, expected the scores' shape {shape:?}",
            path.display(),
            v.data.shape()
        )));
    }
    Ok(v.data.to_float::<f64>().mapv(|x| x > 0.0))
}

/// One extraction on the backend: scores, mask, rotations in; particles (with rotations when
/// given) out.
pub struct PytomTask {
    /// The score map.
    pub scores: HostArray,
    /// `--tomogram-mask`.
    pub mask: Option<ArrayD<bool>>,
    /// The rotation index map and the rotation list.
    pub rotations: Option<(ArrayD<i64>, Array3<f64>)>,
    /// What to extract.
    pub params: PytomParams,
}

impl BackendTask for PytomTask {
    type Output = Extracted;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Extracted> {
        let shape = self.scores.shape().to_vec();
        let s = b.upload_owned(self.scores.into_float::<FloatOf<B>>())?;
        let mut out = extract_pytom(b, &s, self.mask.as_ref().map(|m| m.view()), &self.params)?;
        if let Some((ri, rots)) = self.rotations {
            let ri = b.upload_owned(ri)?;
            attach_rotations(b, &mut out.peaks, &shape, &ri, rots.view())?;
        }
        Ok(out)
    }
}

/// Reads a 3-D score map for pytom's extraction: −∞ (not searched) allowed, +∞ never, NaN
/// only with `allow_nan`.
pub fn read_scores(path: &Path, allow_nan: bool) -> CliResult<monomorph::io::Volume> {
    let v = super::output::read_array_input("--scores", path)?;
    let shape = v.data.shape().to_vec();
    if shape.len() != 3 || shape.contains(&0) {
        return Err(CliError::input(format!(
            "--scores {}: shape {shape:?}, expected a non-empty 3-D score map",
            path.display()
        )));
    }
    let nan = v.data.count_nan();
    if nan > 0 && !allow_nan {
        return Err(CliError::input(format!(
            "--scores {}: {nan} NaN value(s), expected a score map without NaN (pass \
             --allow-nan to treat NaN as never a peak)",
            path.display()
        )));
    }
    let pos_inf = v.data.count_nonfinite() - nan - v.data.count_neg_inf();
    if pos_inf > 0 {
        return Err(CliError::input(format!(
            "--scores {}: {pos_inf} +infinite value(s), expected finite scores (or -inf where \
             not searched)",
            path.display()
        )));
    }
    Ok(v)
}

/// The checks of the pytom flags that do not need the map.
pub fn check_flags(p: &PytomArgs) -> CliResult<()> {
    if !(1..=3).contains(&p.tophat_connectivity) {
        return Err(CliError::input(format!(
            "--tophat-connectivity {}: expected 1, 2 or 3 (faces, edges, corners)",
            p.tophat_connectivity
        )));
    }
    if p.tophat_bins < 6 {
        return Err(CliError::input(format!(
            "--tophat-bins {}: expected at least 6 (pytom drops two bins and differentiates \
             twice)",
            p.tophat_bins
        )));
    }
    Ok(())
}

/// The peak query flags `--caller pytom` takes (not the other callers' own) and their values:
/// `--num-peaks` (required) and `--false-positives` (default 1).
fn check_query(a: &PeaksArgs) -> CliResult<(usize, f64)> {
    check_flags(&a.pytom)?;
    for (flag, given) in [
        ("--threshold-rel", a.query.threshold_rel.is_some()),
        ("--max-score", a.query.max_score.is_some()),
        ("--exclude-border", a.query.exclude_border.is_some()),
        ("--peak-oversampling", a.query.peak_oversampling.is_some()),
        ("--star-format", a.star_format.is_some()),
    ] {
        if given {
            return Err(CliError::input(format!(
                "{flag}: not a pytom extraction setting, expected it without --caller pytom"
            )));
        }
    }
    let num_peaks = a.query.num_peaks.ok_or_else(|| {
        CliError::input(
            "--num-peaks: required with --caller pytom (pytom's -n, the most particles to extract)",
        )
    })?;
    if num_peaks == 0 {
        return Err(CliError::input(
            "--num-peaks 0: expected at least 1 particle",
        ));
    }
    let k = a.query.false_positives.unwrap_or(1.0);
    if !(k.is_finite() && k > 0.0) {
        return Err(CliError::input(format!(
            "--false-positives {}: expected a number > 0",
            super::error::show(k)
        )));
    }
    if let Some(t) = a.query.threshold_abs
        && !t.is_finite()
    {
        return Err(CliError::input(format!(
            "--threshold-abs {t}: expected a finite number"
        )));
    }
    Ok((num_peaks, k))
}

/// `--out` is writable and no input; `--png` is refused (no map is drawn).
fn check_paths(a: &PeaksArgs) -> CliResult<()> {
    let p = &a.pytom;
    check_out_file("--out", &a.out)?;
    let inputs: Vec<(&str, &Path)> = [
        ("--scores", Some(&a.scores)),
        ("--rotation-index", a.rotation_index.as_ref()),
        ("--rotations", a.rotations.as_ref()),
        ("--template-index", a.template_index.as_ref()),
        ("--tomogram-mask", p.tomogram_mask.as_ref()),
    ]
    .into_iter()
    .filter_map(|(f, q)| q.map(|q| (f, q.as_path())))
    .collect();
    if a.png.is_some() {
        return Err(CliError::input(
            "--png: not drawn for --caller pytom (use `monomorph roc --png` for its histogram)",
        ));
    }
    check_distinct(&[("--out", a.out.clone())], &inputs)
}

/// pytom's cut-off and the search's σ (when known): `--threshold-abs` (negative: 0), else
/// erfcinv(2K / search space)·√2·σ from the matching run's statistics.
fn cut_off(
    a: &PeaksArgs,
    k: f64,
    run: Option<&MatchRun>,
    n_voxels: usize,
) -> CliResult<(f64, Option<f64>)> {
    Ok(match (a.query.threshold_abs, run) {
        (Some(t), _) => (t.max(0.0), run.map(|r| r.stats.ssum.sqrt())),
        (None, Some(run)) => {
            let space = n_voxels as f64 * run.stats.n_rotations as f64;
            let sigma = run.stats.ssum.sqrt();
            let c = pytom_cut_off(k, space, sigma)
                .map_err(|e| CliError::for_flag(e, "--false-positives", super::error::show(k)))?;
            (c, Some(sigma))
        }
        (None, None) => {
            return Err(CliError::input(format!(
                "--match-run: --caller pytom's cut-off erfcinv(2K/search space)·√2·σ needs the \
                 matching run's score statistics, and no usable run.json is beside {}: pass \
                 --match-run DIR (or a cut with --threshold-abs)",
                a.scores.display()
            )));
        }
    })
}

/// `monomorph peaks --caller pytom` (see [`PytomArgs`]).
pub fn run_peaks(g: &Global, a: PeaksArgs) -> CliResult<()> {
    let p = &a.pytom;
    let (num_peaks, k) = check_query(&a)?;
    check_paths(&a)?;
    let vol = read_scores(&a.scores, a.allow_nan)?;
    let g = &g.for_input("--scores", &a.scores, &vol.data)?;
    let shape = vol.data.shape().to_vec();
    let run = find_run(a.match_run.as_deref(), &a.scores, &shape)?;
    let voxel = voxel_size(vol.voxel_size, run.as_ref(), p.sampling_rate)?;
    let r = radius(p.particle_diameter, voxel)?;
    let (cut, sigma) = cut_off(&a, k, run.as_ref(), shape.iter().product())?;
    let template_index = super::peaks::read_template_index(&a, &shape)?;
    let rotations = super::peaks::read_rotations(&a, &shape, 3)?;
    let mask = match &p.tomogram_mask {
        Some(m) => Some(read_mask(m, &shape)?),
        None => None,
    };
    let params = PytomParams {
        num_peaks,
        radius: r,
        cut_off: cut,
        tophat: p.tophat_filter.then_some(TophatParams {
            connectivity: p.tophat_connectivity,
            bins: p.tophat_bins,
            n_false_positives: k,
        }),
    };
    let task = PytomTask {
        scores: vol.data,
        mask,
        rotations,
        params,
    };
    let ex = monomorph::dispatch(g.dispatch(None), task).map_err(|e| match e {
        monomorph::Error::InvalidArgument { name, reason } if name == "tophat_bins" => {
            CliError::input(format!("--tophat-filter: {reason}"))
        }
        other => CliError::from(other),
    })?;
    let mut rows: Vec<PeakRow> = rows_of(&ex.peaks, None);
    if let Some(t) = &template_index {
        super::peaks::attach_templates(&mut rows, t.view());
    }
    super::session::emit("peaks", || super::peaks::rows_json(&rows, Some(ex.cut_off)));
    let mut meta = TableMeta {
        micrograph: run.as_ref().and_then(|r| r.target.clone()),
        pixel_size: Some(voxel),
        ..TableMeta::default()
    };
    meta.comments.push(format!(
        "pytom-match-pick extraction of {}: radius {r} voxels (diameter {} Å at {voxel} Å), \
         cut-off {} ({}), cube suppression",
        a.scores.display(),
        p.particle_diameter.unwrap_or(0.0),
        ex.cut_off,
        if a.query.threshold_abs.is_some() {
            "--threshold-abs".to_string()
        } else {
            format!("erfcinv(2*{k}/search space)*sqrt(2)*sigma")
        }
    ));
    if let Some(s) = sigma {
        meta.comments.push(format!("search std (sigma) {s}"));
    }
    if let Some(t) = &ex.tophat {
        meta.comments.push(format!(
            "top-hat filter: connectivity {}, {} bins, cut {} on the top-hat transform, {} voxels kept",
            p.tophat_connectivity, p.tophat_bins, t.cut_off, t.mask_voxels
        ));
    }
    let mut out = Outputs::files();
    out.stage_file("--out", &a.out, |q| write_peaks_with(q, &rows, 3, &meta))?;
    out.commit()?;
    if !g.quiet {
        if let Some(t) = &ex.tophat {
            note!("top-hat cut {} ({} voxels kept)", t.cut_off, t.mask_voxels);
        }
        note!(
            "{} particles above the cut-off {} written to {}",
            ex.peaks.len(),
            ex.cut_off,
            a.out.display()
        );
    }
    Ok(())
}
