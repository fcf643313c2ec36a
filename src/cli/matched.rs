//! A finished `match`: the command's host copy of a result ([`Matched`], made from the
//! library's [`MatchResult`] on its backend), its files and run.json ([`write`]), and the
//! arrays handed to an embedding caller (the Python package).

use monomorph::algo::matching::{MatchResult, Score};
use monomorph::backend::ExportedBuffer;
use monomorph::io::{HostArray, write_mrc, write_npy, write_png};
use monomorph::work::Part;
use monomorph::{Arr, ArrayMeta, AxisOrder, Backend, BackendTask, FloatOf, Real};
use ndarray::{Array3, ArrayD, IxDyn};
use serde_json::json;
use tracing::info_span;

use super::error::CliResult;
use super::matching::{Job, MatchArgs, Prepared, pytme_frame};
use super::output::{Outputs, opt_path_json, path_json, peak_memory_bytes, run_info};
use super::peaks::{FalseAlarm, RunStats};

/// Host copy of a matching result.
pub struct Matched {
    pub scores: ArrayD<f32>,
    pub rotation_index: ArrayD<i32>,
    pub rotations: Array3<f64>,
    pub ssum: f64,
    pub tiles: usize,
    pub backend: String,
    pub device: String,
    pub match_s: f64,
    pub peaks_s: f64,
    pub peaks: Vec<monomorph::algo::peaks::Peak>,
    /// How the peaks' false-alarm threshold was made, when one was asked for.
    pub false_alarm: Option<FalseAlarm>,
    /// Over MPI ranks: the ranks, each rank's matching time and the merge time (run.json).
    pub dist: Option<serde_json::Value>,
    /// `--score-stats`: mean, standard deviation and z-score per voxel.
    pub stats: Option<[ArrayD<f32>; 3]>,
    /// Over `--devices` threads: which device ran which rotations (run.json).
    pub devices: Option<serde_json::Value>,
    /// Several templates: the template of the best score per voxel (0-based, −1 where none).
    pub template_index: Option<ArrayD<i32>>,
    /// `--check-hand`: run.json's `check_hand`.
    pub check_hand: Option<serde_json::Value>,
    /// A target on a device: the maps kept on the backend, by file stem (handed over where
    /// they live); the host maps above are then empty unless files are written.
    pub exported: Vec<(&'static str, ExportedBuffer)>,
}

impl Job {
    /// The host result of a finished match: peaks (when asked for) and downloads.
    pub fn matched<B: Backend>(
        &self,
        b: &B,
        r: MatchResult<B>,
        match_s: f64,
    ) -> monomorph::Result<Matched> {
        self.matched_as(b, r, match_s, None)
    }

    /// [`Job::matched`]; with `kept` (`Some(files)`: a target on a device) the maps are
    /// exported where they live ([`Matched::exported`]), and downloaded only for `files`.
    pub fn matched_as<B: Backend>(
        &self,
        b: &B,
        r: MatchResult<B>,
        match_s: f64,
        kept: Option<bool>,
    ) -> monomorph::Result<Matched> {
        let t1 = std::time::Instant::now();
        let called = match &self.peaks {
            Some(q) => {
                let ri: ArrayD<i64> = b
                    .download(&r.rotation_index)?
                    .mapv(|v| super::output::f64_of(v) as i64);
                let ri = b.upload(ri.view())?;
                let rots = r.rotations.to_array();
                let mut q = q.clone();
                q.run_stats = Some(RunStats {
                    ssum: r.ssum,
                    n_rotations: r.n_rotations,
                });
                Some(super::peaks::call(b, &r.scores, &q, Some((&ri, &rots)))?)
            }
            None => None,
        };
        let (peaks, false_alarm) = called.map_or((Vec::new(), None), |c| (c.peaks, c.false_alarm));
        let peaks_s = t1.elapsed().as_secs_f64();
        let mut exported = Vec::new();
        let mut out = |name, a: &monomorph::Arr<B, FloatOf<B>>| {
            let host = |v: FloatOf<B>| super::output::f64_of(v) as f32;
            map_out(b, a, host, kept, name, &mut exported)
        };
        let stats = match r.statistics(b)? {
            Some(st) => {
                let [m, s, z] = STATS_NAMES;
                Some([out(m, &st.mean)?, out(s, &st.std)?, out(z, &st.z)?])
            }
            None => None,
        };
        let _s = info_span!("download").entered();
        let scores = out("scores", &r.scores)?;
        let index = |v: monomorph::IntOf<B>| super::output::f64_of(v) as i32;
        let rotation_index = map_out(
            b,
            &r.rotation_index,
            index,
            kept,
            "rotation_index",
            &mut exported,
        )?;
        let template_index = match &r.template_index {
            Some(t) => Some(map_out(b, t, index, kept, "template_index", &mut exported)?),
            None => None,
        };
        Ok(Matched {
            scores,
            rotation_index,
            rotations: r.rotations.to_array(),
            ssum: r.ssum,
            // A seeded run's searches are its seed boxes, whatever its executor merged.
            tiles: match &self.job.seeds {
                Some(s) => super::rotation_set::seed_boxes(&self.job, s)?,
                None => r.tiles,
            },
            backend: b.name().to_string(),
            device: b.device().name,
            match_s,
            peaks_s,
            peaks,
            false_alarm,
            dist: None,
            stats,
            devices: None,
            template_index,
            check_hand: None,
            exported,
        })
    }
}

/// A finished job's result assembled from its merged parts ([`MatchJob::finish`], the one
/// assembly) on a backend, then made the command's [`Matched`].
pub struct Finish<'a> {
    /// The job.
    pub job: &'a Job,
    /// Its parts, merged.
    pub part: Part,
    /// Seconds the matching took.
    pub match_s: f64,
}

impl BackendTask for Finish<'_> {
    type Output = Matched;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Matched> {
        let r = self.job.job.finish(b, self.part)?;
        self.job.matched(b, r, self.match_s)
    }
}

/// The `--score-stats` outputs, without their extension (`.npy`, and `.mrc` beside
/// `scores.mrc`).
pub const STATS_NAMES: [&str; 3] = ["score_mean", "score_std", "score_z"];

/// Stages the result's arrays: the maps (.npy, and .mrc when the target had a voxel size),
/// the rotations, the PNG and the `--score-stats` maps.
fn write_maps(
    a: &MatchArgs,
    out: &mut Outputs,
    voxel_size: Option<[f32; 3]>,
    m: &Matched,
) -> CliResult<()> {
    out.stage("scores.npy", |p| write_npy(p, &m.scores))?;
    out.stage("rotation_index.npy", |p| write_npy(p, &m.rotation_index))?;
    if let Some(t) = &m.template_index {
        out.stage("template_index.npy", |p| write_npy(p, t))?;
    }
    out.stage("rotations.npy", |p| {
        write_npy(p, &m.rotations.mapv(|v| v as f32).into_dyn())
    })?;
    if let Some(vs) = voxel_size {
        out.stage("scores.mrc", |p| write_mrc(p, &m.scores, vs))?;
    }
    if a.png {
        let coords: Vec<Vec<usize>> = m.peaks.iter().map(|p| p.coord.clone()).collect();
        out.stage("scores.png", |p| write_png(p, &m.scores, &coords))?;
    }
    if let Some(st) = &m.stats {
        for (name, arr) in STATS_NAMES.iter().zip(st) {
            out.stage(&format!("{name}.npy"), |p| write_npy(p, arr))?;
            if let Some(vs) = voxel_size {
                out.stage(&format!("{name}.mrc"), |p| write_mrc(p, arr, vs))?;
            }
        }
    }
    Ok(())
}

/// run.json's `parameters`: the flags and the inputs as the run used them. `target`: its
/// shape and voxel size.
fn parameters_json(
    a: &MatchArgs,
    target: &std::path::Path,
    score: Score,
    n_rot: usize,
    (tshape, voxel_size): (&[usize], Option<[f32; 3]>),
) -> serde_json::Value {
    let r = &a.rotation;
    json!({
        "target": path_json(target), "template": path_json(&a.template[0]),
        "template_mask": opt_path_json(&a.template_mask.first().cloned()),
        "templates": a.template.iter().map(|p| path_json(p)).collect::<Vec<_>>(),
        "template_masks": a.template_mask.iter().map(|p| path_json(p)).collect::<Vec<_>>(),
        "target_mask": opt_path_json(&a.target_mask), "score": score.name(),
        "rotations_file": opt_path_json(&r.rotations),
        "angular_step": r.angular_step, "euler": opt_path_json(&r.euler),
        "symmetry": r.symmetry.map(|s| s.to_string()), "n_rotations": n_rot,
        "angular_sampling_set": r.angular_sampling_set.map(|s| format!("{s:?}").to_lowercase()),
        "orientations": opt_path_json(&r.orientations),
        "orientations_cone": r.orientations_cone,
        "orientations_inplane_step": r.orientations_inplane_step,
        "orientations_inplane_range": r.orientations_inplane_range,
        "orientations_uncertainty": r.orientations_uncertainty.map(|u| u.0.to_vec()),
        "interpolation": format!("{:?}", a.interpolation).to_lowercase(),
        "pad_edges": a.pad_edges, "memory_limit": a.memory_limit,
        "background_correction": a.background_correction.map(|b| b.name()),
        "score_stats": a.score_stats,
        "pytme_frame": match pytme_frame(target) {
            AxisOrder::Reversed => "x, y, z (pytme transposes the MRC target)",
            AxisOrder::Pytme => "as stored (a .npy target)",
        },
        "target_shape": tshape, "voxel_size": voxel_size,
    })
}

/// Writes the outputs of a finished match (run.json last) and commits them.
pub fn write(a: &MatchArgs, p: Prepared, mut out: Outputs, m: Matched) -> CliResult<()> {
    let Prepared {
        g,
        voxel_size,
        tshape,
        n_rot,
        score,
        mut timings,
        filters_json,
        search_json,
        seeds_json,
        target,
        metadata: _,
    } = p;
    let g = &g;
    timings.time("write", || write_maps(a, &mut out, voxel_size, &m))?;
    let mut info = run_info(g, &m.backend, &m.device);
    if let Some(o) = info.as_object_mut() {
        o.insert(
            "parameters".into(),
            parameters_json(a, &target, score, n_rot, (&tshape, voxel_size)),
        );
        // The templates matched in one pass, in template_index order.
        o.insert(
            "templates".into(),
            json!(a.template.iter().map(|p| path_json(p)).collect::<Vec<_>>()),
        );
        if let Some(c) = &m.check_hand {
            o.insert("check_hand".into(), c.clone());
        }
        if let Some(s) = &seeds_json {
            o.insert("seeds".into(), s.clone());
        }
        o.insert("filters".into(), filters_json);
        o.insert("search".into(), search_json);
        o.insert("ssum".into(), json!(m.ssum));
        // What `peaks --false-positives` needs for pytme's rule (read back by `peaks`).
        o.insert(
            "score_statistics".into(),
            json!({
                "ssum": m.ssum,
                "ssum_definition": "pytme's: sum of score^2 over the scored positions and all rotations / (target voxels * rotations); the positions are the whole FFT grid (the target zero-padded at the high end to fast lengths) of a circular run, the target's voxels with --pad-edges",
                "n_rotations": n_rot,
                "n_templates": a.template.len(),
                "ssum_over": if a.template.len() > 1 { "every (template, rotation) pair: the sum over all templates / (target voxels * rotations * templates)" } else { "the rotations" },
                "shape": tshape,
                "n_voxels": tshape.iter().product::<usize>(),
                "scores_file": "scores.npy",
            }),
        );
        if m.stats.is_some() {
            o.insert(
                "score_stats".into(),
                json!({
                    "files": STATS_NAMES,
                    "definition": "over the rotations searched, per voxel: mean score, population standard deviation, and z = (best score - mean) / std, 0 where std = 0; NaN, NaN and -inf at positions not searched (score -inf); sums in exact integer fixed point",
                }),
            );
        }
        o.insert("tiles".into(), json!(m.tiles));
        if !m.exported.is_empty() {
            // A target on a device: the maps kept on the backend that computed them.
            let kept: Vec<&str> = m.exported.iter().map(|(n, _)| *n).collect();
            o.insert("kept_on_device".into(), json!(kept));
        }
        let mut t = timings.to_json();
        if let Some(tm) = t.as_object_mut() {
            tm.insert("match_s".into(), json!(m.match_s));
            tm.insert("peaks_s".into(), json!(m.peaks_s));
            tm.insert(
                "per_rotation_s".into(),
                json!(m.match_s / n_rot.max(1) as f64),
            );
        }
        o.insert("timings".into(), t);
        o.insert("peak_memory_bytes".into(), json!(peak_memory_bytes()));
        if let Some(d) = &m.dist {
            o.insert("mpi".into(), d.clone());
        }
        if let Some(d) = &m.devices {
            o.insert("devices".into(), d.clone());
        }
    }
    // run.json last: it marks the run complete.
    out.json("run.json", &info)?;
    out.commit()?;
    if !g.quiet {
        note!(
            "matched {} rotations ({}) on {} in {:.2} s ({:.1} ms per rotation); wrote {}",
            n_rot,
            score.name(),
            m.backend,
            m.match_s,
            1e3 * m.match_s / n_rot.max(1) as f64,
            a.out.display()
        );
    }
    hand_over(m);
    Ok(())
}

/// Embedded (the Python package): the arrays the .npy files hold, moved to it.
/// Maps kept on their backend ([`Matched::exported`]) are handed over where they live.
fn hand_over(m: Matched) {
    use super::session::hand_over as hand;
    let kept: Vec<&str> = m.exported.iter().map(|(n, _)| *n).collect();
    let host = |name: &str| !kept.contains(&name);
    if host("scores") {
        hand("scores", || HostArray::F32(m.scores));
    }
    if host("rotation_index") {
        hand("rotation_index", || HostArray::I32(m.rotation_index));
    }
    if let Some(t) = m.template_index.filter(|_| host("template_index")) {
        hand("template_index", || HostArray::I32(t));
    }
    hand("rotations", || {
        HostArray::F32(m.rotations.mapv(|v| v as f32).into_dyn())
    });
    for (name, arr) in STATS_NAMES.iter().zip(m.stats.into_iter().flatten()) {
        if host(name) {
            hand(name, || HostArray::F32(arr));
        }
    }
    for (name, e) in m.exported {
        super::session::hand_over_exported(name, e);
    }
}

/// One map of a result: downloaded and converted on the host by `host` (no `kept`), or
/// converted to `D` on the backend and exported ([`Matched::exported`], under `name`),
/// downloaded too only for files (`kept == Some(true)`; an empty host array otherwise).
pub(super) fn map_out<B: Backend, S: Real, D: Real>(
    b: &B,
    a: &Arr<B, S>,
    host: impl Fn(S) -> D,
    kept: Option<bool>,
    name: &'static str,
    exported: &mut Vec<(&'static str, ExportedBuffer)>,
) -> monomorph::Result<ArrayD<D>> {
    let Some(files) = kept else {
        return Ok(b.download(a)?.mapv(host));
    };
    // `D::from_f64(S::as_f64)`: the host conversion (`as`, through f64), on the device.
    let mut d = b.zeros::<D>(a.shape())?;
    b.cast(a, &mut d)?;
    let h = if files {
        b.download(&d)?
    } else {
        ArrayD::zeros(IxDyn(&[0]))
    };
    exported.push((name, b.export(d)?));
    Ok(h)
}
