//! `monomorph match`: template matching over a rotation set.

use std::ops::ControlFlow;
use std::path::PathBuf;

use clap::{ArgGroup, Args, ValueEnum};
use monomorph::algo::matching::{MatchParams, MatchResult, Score, match_template};
use monomorph::algo::rotations::{RotationSet, Symmetry};
use monomorph::io::{HostArray, read_euler_csv, write_mrc, write_npy, write_png};
use monomorph::{AxisOrder, Backend, BackendTask, FloatOf, Interpolation};
use ndarray::{Array3, ArrayD};
use serde_json::json;
use tracing::info_span;

use super::output::{
    Outputs, Timings, check_distinct, check_out_dir, opt_path_json, parse_bytes, path_json,
    peak_memory_bytes, read_input, run_info,
};
use super::peaks::{Caller, FalseAlarm, PeakQuery, RunStats, read_rotation_set};
use super::trace::progress;
use super::{CliError, CliResult, Global};

/// Options of `monomorph match`.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("rotation_set").args(["rotations", "angular_step", "euler"])))]
pub struct MatchArgs {
    /// Target (tomogram or micrograph): `.npy` (2-D/3-D) or MRC (`.mrc`, `.map`, `.rec`).
    /// Many targets: --target-list.
    #[arg(
        long,
        short = 'm',
        value_name = "T",
        required_unless_present = "target_list"
    )]
    pub target: Option<PathBuf>,
    /// Template, same number of axes as the target and no larger.
    #[arg(long, short = 'i', value_name = "P")]
    pub template: PathBuf,
    /// Template mask (template-shaped) for cam, flc-sphere, flc, mcc.
    #[arg(long, value_name = "M")]
    pub template_mask: Option<PathBuf>,
    /// Target mask (target-shaped), required by mcc.
    #[arg(long, value_name = "TM")]
    pub target_mask: Option<PathBuf>,
    /// Score (pytme's CC, LCC, NCC, CAM, FLCSphericalMask, FLC, MCC).
    #[arg(long, short = 's', value_enum, default_value_t = ScoreArg::FlcSphere)]
    pub score: ScoreArg,
    /// Rotation matrices `(n, d, d)` acting on the array's index order (z, y, x) (2-D: (y, x)),
    /// as pull-backs about the template centre: t_R[o] = t[R·(o − c) + c]. This is the frame
    /// of the rotations.npy that match writes; a matrix R_xyz from a tool whose arrays are
    /// (x, y, z), such as pytme reading MRC files, is P·R_xyz·P here (P reverses the axes).
    #[arg(long, value_name = "R.npy")]
    pub rotations: Option<PathBuf>,
    /// Even rotation sampling with this angular step in degrees (default 30); with
    /// --orientations, the cone's step.
    #[arg(long, short = 'a', value_name = "DEG")]
    pub angular_step: Option<f64>,
    /// Which even sampling --angular-step means (default `uniform`): monomorph's own
    /// (Hopf-fibration; see README) or `pytme`'s, the Karney set `pytme match -a DEG` picks
    /// (the nominal spacing nearest DEG), same matrices in the same order, so that
    /// rotation_index i is pytme's rotation i. pytme's matrices act on (x, y, z) (it transposes
    /// MRC data), so rotation i is stored here as P·R_i·P, the same physical rotation of the
    /// same MRC file. 3-D only. Built in: sets with a spacing of 16.29° and more (at most 1992
    /// rotations); the others need --pytme-data.
    #[arg(long, value_enum, value_name = "SET", conflicts_with_all = ["rotations", "euler", "orientations"])]
    pub angular_sampling_set: Option<SamplingSet>,
    /// pytme's data folder (site-packages/tme/data), read for --angular-sampling-set pytme when
    /// the step's set is not built in (c48n309.npy … c48u8649.npy).
    #[arg(long, value_name = "DIR", requires = "angular_sampling_set")]
    pub pytme_data: Option<PathBuf>,
    /// Seed orientations: a STAR file with _rlnAngleRot, _rlnAngleTilt, _rlnAnglePsi (RELION's
    /// angles, one row per particle, or `_label value` pairs for one seed; other columns,
    /// positions included, are ignored). The rotation set is, for each distinct seed S, S
    /// itself, then C·S for every C of pytme's cone set (get_cone_rotations: the template's
    /// z axis within --orientations-cone of the seed's, sampled every --angular-step degrees,
    /// spun about the template's own z axis every --orientations-inplane-step degrees). The
    /// whole set is searched at every position: a seed's cone is not tied to its position
    /// (pytme's --orientations-uncertainty, a search radius around each seed, is not
    /// supported). 3-D only.
    #[arg(long, value_name = "FILE.star", requires = "orientations_cone", conflicts_with_all = ["rotations", "euler"])]
    pub orientations: Option<PathBuf>,
    /// Half-angle in degrees (0 to 180) of the cone around each --orientations seed: pytme's
    /// acceptance test, the angle between the template's z axis placed by the rotation and by
    /// the seed. 0: the seeds' in-plane spins alone.
    #[arg(long, value_name = "DEG", requires = "orientations")]
    pub orientations_cone: Option<f64>,
    /// In-plane step in degrees of the cone search (default: the --angular-step; pytme's
    /// axis_sampling).
    #[arg(long, value_name = "DEG", requires = "orientations")]
    pub orientations_inplane_step: Option<f64>,
    /// Euler angles, one `rot,tilt,psi` per line (3-D only), in RELION's convention as in STAR
    /// files: degrees, Rz(rot)·Ry(tilt)·Rz(psi) the rotation acting on (x, y, z) (intrinsic
    /// ZYZ; the transpose of RELION's Euler_angles2matrix; scipy's from_euler("ZYZ")), the
    /// same angles `peaks` writes. A first line without numbers is a header.
    #[arg(long, value_name = "E.csv")]
    pub euler: Option<PathBuf>,
    /// Point-group symmetry of the template about its z axis (array axis 0; pytme's axis 2),
    /// `Cn` or `Dn` (`D` adds n two-fold axes perpendicular to z, the first along x): the
    /// rotation set (any of the three above) is restricted to the group's fundamental domain,
    /// keeping the rotations pytme's `--symmetry` keeps (about 1/n of them for Cn, 1/2n for
    /// Dn). 2-D: Cn only. Default C1 (no restriction).
    #[arg(long, value_name = "Cn|Dn", value_parser = parse_symmetry)]
    pub symmetry: Option<Symmetry>,
    /// Interpolation of the rotated template.
    #[arg(long, value_enum, default_value_t = InterpArg::Cubic)]
    pub interpolation: InterpArg,
    /// Extend the target symmetrically at its edges instead of wrapping around (pytme's
    /// `--pad-edges`: numpy's `symmetric` extension by n − 1 per axis, without pytme's
    /// off-by-one at index 0 for an even template length). With `--score ncc` the target is
    /// standardised over its own voxels; pytme standardises the padded target, so pytme's NCC
    /// scores are monomorph's times σ(target)/σ(padded target): one factor for the whole map
    /// (0.1–0.3% from 1 on the test targets), the same best rotations and peaks. The other
    /// scores normalise locally and are not affected.
    #[arg(long)]
    pub pad_edges: bool,
    /// At most this much memory (e.g. 8G, 512M); the target is split into tiles to fit.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_limit: Option<u64>,
    /// Output folder: scores.npy, rotation_index.npy, rotations.npy, run.json (+ scores.mrc).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: PathBuf,
    /// Also write DIR/scores.png: the central slice with the best peaks marked.
    #[arg(long)]
    pub png: bool,
    /// Also write per-voxel statistics of the score over all rotations searched, beside the
    /// scores and in the same formats: score_mean, score_std (population standard deviation
    /// over the rotations) and score_z = (best − mean) / std, 0 where std = 0 (a voxel whose
    /// score does not change with the rotation, or a single rotation); where no position was
    /// searched (outside --search-*/--scheduling-mask, score −∞) mean and std are NaN and
    /// z is −∞. Summed exactly (integer fixed point; the same bits for any number of MPI
    /// ranks or split list items; tiles of --memory-limit change the scores, and so the
    /// statistics, at round-off), 32 bytes per target voxel.
    #[arg(long)]
    pub score_stats: bool,
    /// Background correction, as pytme's: `phase-scrambling` subtracts from the best score of
    /// each voxel the best score (over the same rotations, from 0) of a phase-scrambled copy
    /// of the template (numpy's default_rng(42), pytme's scramble_phases), rotated, filtered
    /// and normalised like the template, minus its mean over pytme's FFT box. About doubles
    /// the time per rotation. Not with mcc. Reproduces pytme 0.3.6's corrected scores for the
    /// same files (one job, `-n 1`): the noise is drawn on the template as pytme holds it,
    /// (x, y, z) when the target is an MRC file (pytme transposes MRC data), as stored for a
    /// .npy target.
    #[arg(long, value_name = "METHOD", value_parser = parse_background)]
    pub background_correction: Option<monomorph::algo::matching::Background>,
    /// Devices to split the rotations over, e.g. `0,1,2,3` (each runs a contiguous range;
    /// the results merge exactly, byte-identical to one device). With --backend cuda: CUDA
    /// devices, one thread each; with the CPU backend: that many CPU workers sharing rayon's
    /// threads, each with a pool of its own. Under mpirun: the devices the ranks of a node
    /// take in turn (node-local rank i uses the i-th, modulo the list).
    #[arg(long, value_name = "LIST", value_parser = super::workers::parse_devices)]
    pub devices: Option<super::workers::Devices>,
    /// Fourier filters (pytme's flags).
    #[command(flatten)]
    pub filters: super::filters::FilterArgs,
    /// Restricting the search (--scheduling-mask, --search-z/-y/-x).
    #[command(flatten)]
    pub search: super::search::SearchArgs,
    /// Many targets in one job (`--target-list`, `--peaks`).
    #[command(flatten)]
    pub list: super::list::ListArgs,
}

impl MatchArgs {
    /// The `--target` path (empty in list mode, which runs each target with its own).
    pub fn target_path(&self) -> &std::path::Path {
        self.target.as_deref().unwrap_or(std::path::Path::new(""))
    }
}

fn parse_background(s: &str) -> Result<monomorph::algo::matching::Background, String> {
    s.parse()
        .map_err(|_| format!("expected phase-scrambling (pytme's only method), got `{s}`"))
}

/// `--score`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreArg {
    /// Cross-correlation.
    Cc,
    /// Laplace-filtered cross-correlation.
    Lcc,
    /// Normalised cross-correlation (pytme's CORR).
    Ncc,
    /// Globally standardised correlation (CAM).
    Cam,
    /// Fast local correlation with a spherical mask (pytme's default).
    FlcSphere,
    /// Fast local correlation with a rotated mask.
    Flc,
    /// Masked normalised cross-correlation.
    Mcc,
}

impl ScoreArg {
    pub fn score(self) -> Score {
        match self {
            ScoreArg::Cc => Score::CC,
            ScoreArg::Lcc => Score::LCC,
            ScoreArg::Ncc => Score::NCC,
            ScoreArg::Cam => Score::CAM,
            ScoreArg::FlcSphere => Score::FLCSphericalMask,
            ScoreArg::Flc => Score::FLC,
            ScoreArg::Mcc => Score::MCC,
        }
    }
}

/// `--angular-sampling-set`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingSet {
    /// monomorph's even sampling (Hopf fibration; 2-D: an even grid).
    Uniform,
    /// pytme 0.3.6's Karney set for the step, rotation for rotation.
    Pytme,
}

/// `--interpolation`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterpArg {
    /// Cubic B-spline with prefilter (scipy order 3).
    Cubic,
    /// Trilinear / bilinear (order 1).
    Linear,
}

/// Inputs of one matching run (host data only).
pub struct MatchJob {
    pub target: HostArray,
    pub template: HostArray,
    pub template_mask: Option<HostArray>,
    pub target_mask: Option<HostArray>,
    pub rotations: RotationSet,
    pub score: Score,
    pub interpolation: Interpolation,
    pub pad_edges: bool,
    pub memory_limit: Option<u64>,
    pub quiet: bool,
    /// Also call peaks (for a PNG or the demo) with this query.
    pub peaks: Option<PeakQuery>,
    /// The Fourier filters, built on the backend before matching.
    pub filters: Option<monomorph::algo::filters::FilterSpec>,
    /// Per-voxel statistics of the score over the rotations (`--score-stats`).
    pub score_stats: bool,
    /// `--background-correction`.
    pub background: Option<monomorph::algo::matching::Background>,
    /// The search restriction (scheduling mask, search box).
    pub search: super::search::Search,
    /// How pytme would hold the arrays, from the target's file type ([`pytme_frame`]): the
    /// frame of everything pytme computes in its own axis order (filters, scrambling noise,
    /// the rotation's edge test).
    pub pytme_frame: AxisOrder,
}

/// How pytme 0.3.6 holds the data of `target`: an MRC file transposed ((x, y, z): reversed
/// against monomorph's (z, y, x)), a `.npy` as stored. Decided once per job, from the target:
/// the template, masks and rotations are taken in the target's frame (a template meant for an
/// MRC tomogram is (z, y, x) here, whatever its file type).
pub fn pytme_frame(target: &std::path::Path) -> AxisOrder {
    if monomorph::io::is_mrc(target) {
        AxisOrder::Reversed
    } else {
        AxisOrder::Pytme
    }
}

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
}

/// The job's arrays on the device, and the Fourier filters built from them (whitening reads
/// the target), so that every way of running a job (one process, a rank, a list item) applies
/// the same filters.
pub struct Uploaded<B: Backend> {
    /// The target (already contrast-inverted if asked).
    pub target: monomorph::Arr<B, FloatOf<B>>,
    /// The template.
    pub template: monomorph::Arr<B, FloatOf<B>>,
    tmask: Option<monomorph::Arr<B, FloatOf<B>>>,
    gmask: Option<monomorph::Arr<B, FloatOf<B>>>,
    filters: Option<monomorph::algo::filters::Filters>,
    smask: Option<monomorph::Arr<B, FloatOf<B>>>,
    search_box: Option<Vec<(usize, usize)>>,
}

impl MatchJob {
    /// Uploads the job's arrays to `b` in its float type and builds its filters there.
    pub fn upload<B: Backend>(&self, b: &B) -> monomorph::Result<Uploaded<B>> {
        let up = |a: &HostArray| b.upload(a.to_float::<FloatOf<B>>().view());
        let (target, template) = {
            let _s = info_span!("upload").entered();
            (up(&self.target)?, up(&self.template)?)
        };
        let tmask = self.template_mask.as_ref().map(up).transpose()?;
        let gmask = self.target_mask.as_ref().map(up).transpose()?;
        let smask = self.search.mask.as_ref().map(up).transpose()?;
        let filters =
            super::filters::build(self.filters.as_ref(), b, &target, self.template.shape())?;
        Ok(Uploaded {
            target,
            template,
            tmask,
            gmask,
            filters,
            smask,
            search_box: self.search.ranges.clone(),
        })
    }

    /// The matching parameters of this job over its uploaded masks and filters.
    pub fn params<'a, B: Backend>(&self, up: &'a Uploaded<B>) -> MatchParams<'a, B> {
        let mut params = MatchParams::new(self.score, self.rotations.clone());
        params.template_mask = up.tmask.as_ref();
        params.target_mask = up.gmask.as_ref();
        params.filters = up
            .filters
            .as_ref()
            .map(|f| f as &dyn monomorph::algo::filters::SpectralFilter);
        params.pad_edges = self.pad_edges;
        params.interpolation = self.interpolation;
        params.memory_limit = self.memory_limit;
        params.score_stats = self.score_stats;
        params.background = self.background;
        params.scheduling_mask = up.smask.as_ref();
        params.search_box = up.search_box.as_deref();
        params.pytme_frame = self.pytme_frame;
        params
    }

    /// The host result of a finished match: peaks (when asked for) and downloads.
    pub fn finish<B: Backend>(
        &self,
        b: &B,
        r: MatchResult<B>,
        match_s: f64,
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
        let stats = match r.statistics(b)? {
            Some(st) => {
                let down = |a: &monomorph::Arr<B, FloatOf<B>>| -> monomorph::Result<ArrayD<f32>> {
                    Ok(b.download(a)?.mapv(|v| super::output::f64_of(v) as f32))
                };
                Some([down(&st.mean)?, down(&st.std)?, down(&st.z)?])
            }
            None => None,
        };
        let _s = info_span!("download").entered();
        Ok(Matched {
            scores: b
                .download(&r.scores)?
                .mapv(|v| super::output::f64_of(v) as f32),
            rotation_index: b
                .download(&r.rotation_index)?
                .mapv(|v| super::output::f64_of(v) as i32),
            rotations: r.rotations.to_array(),
            ssum: r.ssum,
            tiles: r.tiles,
            backend: b.name().to_string(),
            device: b.device().name,
            match_s,
            peaks_s,
            peaks,
            false_alarm,
            dist: None,
            stats,
            devices: None,
        })
    }
}

impl BackendTask for MatchJob {
    type Output = Matched;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Matched> {
        let _span = info_span!("match", backend = b.name(), score = %self.score, rotations = self.rotations.len()).entered();
        let up = self.upload(b)?;
        let pb = progress(self.rotations.len() as u64, "rotations", self.quiet);
        let cb = |done: usize, total: usize| {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
            ControlFlow::Continue(())
        };
        let mut params = self.params(&up);
        params.progress = Some(&cb);
        let t0 = std::time::Instant::now();
        let r = {
            let _s = info_span!("match_template").entered();
            let r = match_template(b, &up.target, &up.template, &params)?;
            b.synchronize()?;
            r
        };
        let match_s = t0.elapsed().as_secs_f64();
        pb.finish_and_clear();
        self.finish(b, r, match_s)
    }
}

fn check_same_ndim(
    flag: &str,
    p: &std::path::Path,
    shape: &[usize],
    want: &[usize],
    exact: bool,
) -> CliResult<()> {
    let ok = shape.len() == want.len()
        && (!exact || shape == want)
        && (exact || shape.iter().zip(want).all(|(a, b)| a <= b));
    if ok {
        Ok(())
    } else {
        Err(CliError::input(format!(
            "{flag} {}: shape {shape:?}, expected {} {want:?}",
            p.display(),
            if exact {
                "the shape"
            } else {
                "as many axes as, and no larger than, the target"
            }
        )))
    }
}

/// A checked `match` command: what writing its outputs needs besides the result.
pub struct Prepared {
    /// The global flags with `--precision auto` resolved.
    pub g: Global,
    /// Voxel size of the target (MRC), for scores.mrc.
    pub voxel_size: Option<[f32; 3]>,
    /// Target shape.
    pub tshape: Vec<usize>,
    /// Number of rotations.
    pub n_rot: usize,
    /// The score.
    pub score: Score,
    /// Timings so far (read).
    pub timings: Timings,
    /// The Fourier filters, for run.json.
    pub filters_json: serde_json::Value,
    /// The search restriction, for run.json.
    pub search_json: serde_json::Value,
}

/// Runs `monomorph match`.
pub fn run(g: &Global, a: MatchArgs) -> CliResult<()> {
    if a.list.target_list.is_some() {
        return super::list::run(g, &a);
    }
    if a.list.peaks {
        // Clap's `requires` does not fire for this flag here; refused rather than ignored.
        return Err(CliError::input(
            "--peaks: only with --target-list (peaks of many targets in one STAR file); for one \
             target run `monomorph peaks --scores OUT/scores.npy` on the output folder",
        ));
    }
    #[cfg(feature = "mpi")]
    if let Some(world) = super::ranks::world() {
        return super::ranks::run_match(&world, g, &a);
    }
    if let Some(d) = &a.devices {
        return super::workers::run_match(g, &a, d);
    }
    let (mut p, job) = prepare(g, &a)?;
    let out = Outputs::in_dir("--out", &a.out)?;
    let m = p
        .timings
        .time("total", || {
            monomorph::dispatch(p.g.dispatch(a.memory_limit), job)
        })
        .map_err(|e| match_error(e, a.memory_limit))?;
    write(&a, p, out, m)
}

/// The rotation set of `--angular-step` (with `--angular-sampling-set`) or `--orientations`.
fn rotation_set(a: &MatchArgs, d: usize) -> CliResult<RotationSet> {
    let step = a.angular_step.unwrap_or(30.0);
    let three_d = |flag: String| -> CliResult<()> {
        if d == 3 {
            Ok(())
        } else {
            Err(CliError::input(format!(
                "{flag}: needs a 3-D target, got {d}-D"
            )))
        }
    };
    if let Some(p) = &a.orientations {
        three_d(format!("--orientations {}", p.display()))?;
        let cone = a.orientations_cone.unwrap_or(0.0);
        let inplane = a.orientations_inplane_step.unwrap_or(step);
        return super::orientations::cone_set(p, cone, step, inplane);
    }
    if let (Some(dir), Some(SamplingSet::Uniform)) = (&a.pytme_data, a.angular_sampling_set) {
        return Err(CliError::input(format!(
            "--pytme-data {}: only read with --angular-sampling-set pytme",
            dir.display()
        )));
    }
    if a.angular_sampling_set == Some(SamplingSet::Pytme) {
        three_d("--angular-sampling-set pytme".into())?;
        return super::orientations::pytme_set(step, a.pytme_data.as_deref());
    }
    RotationSet::uniform(d, step)
        .map_err(|e| CliError::for_flag(e, "--angular-step", super::error::show(step)))
}

/// `--symmetry`: a point group `Cn` or `Dn`.
fn parse_symmetry(s: &str) -> Result<Symmetry, String> {
    s.parse().map_err(|e: monomorph::Error| e.to_string())
}

/// A matching error as the command reports it.
pub fn match_error(e: monomorph::Error, memory_limit: Option<u64>) -> CliError {
    match (e, memory_limit) {
        // The user's own limit is too small: an input error naming the flag.
        (e @ monomorph::Error::OutOfMemory { .. }, Some(l)) => CliError::input(format!(
            "--memory-limit {}: {e}, expected a larger limit",
            monomorph::error::fmt_bytes(l)
        )),
        (e, _) => CliError::from(e),
    }
}

/// Reads and checks the inputs of `monomorph match` (creates nothing).
pub fn prepare(g: &Global, a: &MatchArgs) -> CliResult<(Prepared, MatchJob)> {
    check_out_dir("--out", &a.out)?;
    let threads_split = !super::ranks::under_mpi();
    super::workers::check_devices(g, a.devices.as_ref(), threads_split)?;
    let mut timings = Timings::default();
    let target_path = a.target_path();
    let target = timings.time("read", || read_input("--target", target_path, &[2, 3]))?;
    let g = g.for_input("--target", target_path, &target.data)?;
    let tshape = target.data.shape().to_vec();
    let d = tshape.len();
    let template = read_input("--template", &a.template, &[2, 3])?;
    check_same_ndim(
        "--template",
        &a.template,
        template.data.shape(),
        &tshape,
        false,
    )?;
    let template_mask = match &a.template_mask {
        Some(p) => {
            let m = read_input("--template-mask", p, &[2, 3])?;
            check_same_ndim(
                "--template-mask",
                p,
                m.data.shape(),
                template.data.shape(),
                true,
            )?;
            Some(m.data)
        }
        None => None,
    };
    let target_mask = match &a.target_mask {
        Some(p) => {
            let m = read_input("--target-mask", p, &[2, 3])?;
            check_same_ndim("--target-mask", p, m.data.shape(), &tshape, true)?;
            Some(m.data)
        }
        None => None,
    };
    let score = a.score.score();
    if score == Score::MCC && target_mask.is_none() {
        return Err(CliError::input(
            "--score mcc needs --target-mask, expected a target-shaped mask",
        ));
    }
    if score == Score::MCC && a.background_correction.is_some() {
        return Err(CliError::input(
            "--background-correction phase-scrambling: not with --score mcc (pytme's MCC \
             background differs from its own score); use flc",
        ));
    }
    let rotations = if let Some(p) = &a.rotations {
        read_rotation_set("--rotations", p, d, "target")?
    } else if let Some(p) = &a.euler {
        if d != 3 {
            return Err(CliError::input(format!(
                "--euler {}: Euler angles need a 3-D target, got {d}-D",
                p.display()
            )));
        }
        RotationSet::from_relion_euler(&read_euler_csv(p)?)
            .map_err(|e| CliError::from(e).about(format!("--euler {}", p.display())))?
    } else {
        rotation_set(a, d)?
    };
    let rotations = match a.symmetry {
        Some(sym) => {
            let n = rotations.len();
            let none = || {
                CliError::input(format!(
                    "--symmetry {sym}: leaves none of the {n} rotation(s) to search (none lies \
                     in the group's asymmetric unit), expected a rotation set that covers it"
                ))
            };
            match rotations.reduce_by_symmetry(sym) {
                Ok(r) if r.is_empty() => return Err(none()),
                Ok(r) => r,
                // The library cannot build an empty set: the shape error of no rotation.
                Err(monomorph::Error::Shape { .. }) => return Err(none()),
                Err(e) => return Err(CliError::for_flag(e, "--symmetry", sym.to_string())),
            }
        }
        None => rotations,
    };
    let png_query = a.png.then(|| PeakQuery {
        min_distance: template
            .data
            .shape()
            .iter()
            .copied()
            .min()
            .unwrap_or(2)
            .div_ceil(2)
            .max(1),
        threshold_abs: None,
        threshold_rel: None,
        exclude_border: None,
        num_peaks: Some(100),
        false_positives: Some(1.0),
        caller: Caller::Skimage,
        run_stats: None,
        max_score: None,
        oversampling: None,
    });
    let fvoxel = super::filters::voxel_size(
        &a.filters,
        &[
            ("--target", a.target_path(), target.voxel_size),
            ("--template", &a.template, template.voxel_size),
        ],
        template.voxel_size,
    )?;
    let frame = pytme_frame(target_path);
    let filters = super::filters::spec(&a.filters, d, fvoxel, frame)?;
    let filters_json = super::filters::to_json(&a.filters, filters.as_ref());
    let search = a.search.check(&tshape)?;
    let search_json = a.search.to_json(&search);
    let job = MatchJob {
        target: if a.filters.invert_target_contrast {
            super::filters::negate(target.data)
        } else {
            target.data
        },
        template: template.data,
        template_mask,
        target_mask,
        rotations,
        score,
        interpolation: match a.interpolation {
            InterpArg::Cubic => Interpolation::Cubic,
            InterpArg::Linear => Interpolation::Linear,
        },
        pad_edges: a.pad_edges,
        memory_limit: a.memory_limit,
        quiet: g.quiet,
        peaks: png_query,
        filters,
        score_stats: a.score_stats,
        background: a.background_correction,
        search,
        pytme_frame: frame,
    };
    let n_rot = job.rotations.len();
    let names = [
        "scores.npy",
        "rotation_index.npy",
        "rotations.npy",
        "scores.mrc",
        "scores.png",
        "run.json",
        "score_mean.npy",
        "score_std.npy",
        "score_z.npy",
        "score_mean.mrc",
        "score_std.mrc",
        "score_z.mrc",
    ];
    let inputs = [
        ("--target", a.target.as_ref()),
        ("--template", Some(&a.template)),
        ("--template-mask", a.template_mask.as_ref()),
        ("--target-mask", a.target_mask.as_ref()),
        ("--rotations", a.rotations.as_ref()),
        ("--euler", a.euler.as_ref()),
        ("--orientations", a.orientations.as_ref()),
        ("--scheduling-mask", a.search.scheduling_mask.as_ref()),
    ];
    let inputs: Vec<(&str, &std::path::Path)> = inputs
        .iter()
        .filter_map(|(f, p)| p.map(|p| (*f, p.as_path())))
        .collect();
    let outputs: Vec<(&str, PathBuf)> = names.iter().map(|n| ("--out", a.out.join(n))).collect();
    check_distinct(&outputs, &inputs)?;
    let voxel_size = target.voxel_size;
    Ok((
        Prepared {
            g,
            voxel_size,
            tshape,
            n_rot,
            score,
            timings,
            filters_json,
            search_json,
        },
        job,
    ))
}

/// The `--score-stats` outputs, without their extension (`.npy`, and `.mrc` beside
/// `scores.mrc`).
pub const STATS_NAMES: [&str; 3] = ["score_mean", "score_std", "score_z"];

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
    } = p;
    let g = &g;
    timings.time("write", || -> CliResult<()> {
        out.stage("scores.npy", |p| write_npy(p, &m.scores))?;
        out.stage("rotation_index.npy", |p| write_npy(p, &m.rotation_index))?;
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
    })?;
    let mut info = run_info(g, &m.backend, &m.device);
    if let Some(o) = info.as_object_mut() {
        o.insert(
            "parameters".into(),
            json!({
                "target": path_json(a.target_path()), "template": path_json(&a.template),
                "template_mask": opt_path_json(&a.template_mask),
                "target_mask": opt_path_json(&a.target_mask), "score": score.name(),
                "rotations_file": opt_path_json(&a.rotations),
                "angular_step": a.angular_step, "euler": opt_path_json(&a.euler),
                "symmetry": a.symmetry.map(|s| s.to_string()), "n_rotations": n_rot,
                "angular_sampling_set": a.angular_sampling_set.map(|s| format!("{s:?}").to_lowercase()),
                "orientations": opt_path_json(&a.orientations),
                "orientations_cone": a.orientations_cone,
                "orientations_inplane_step": a.orientations_inplane_step,
                "interpolation": format!("{:?}", a.interpolation).to_lowercase(),
                "pad_edges": a.pad_edges, "memory_limit": a.memory_limit,
                "background_correction": a.background_correction.map(|b| b.name()),
                "score_stats": a.score_stats,
                "pytme_frame": match pytme_frame(a.target_path()) {
                    AxisOrder::Reversed => "x, y, z (pytme transposes the MRC target)",
                    AxisOrder::Pytme => "as stored (a .npy target)",
                },
                "target_shape": tshape, "voxel_size": voxel_size,
            }),
        );
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
    Ok(())
}
