//! `monomorph match`: template matching over a rotation set.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use monomorph::algo::matching::Score;
use monomorph::dispatch::{BackendChoice, DefaultBackend, DispatchOptions};
use monomorph::work::{FailAfter, JobArray, MatchJob, Restriction};
use monomorph::{AxisOrder, Interpolation};

use super::error::{CliError, CliResult};
use super::global::Global;
use super::output::{Timings, check_distinct, check_out_dir, parse_bytes, read_input};
use super::peaks::{Caller, PeakQuery};
use super::templates::check_same_ndim;

/// Options of `monomorph match`.
#[derive(Args, Debug, Clone)]
pub struct MatchArgs {
    /// Target (tomogram or micrograph): `.npy` (2-D/3-D) or MRC (`.mrc`, `.map`, `.rec`).
    /// Many targets: --target-list. With --relion5-tomograms-star: the row's tomogram unless
    /// given here.
    #[arg(
        long,
        short = 'm',
        value_name = "T",
        required_unless_present_any = ["target_list", "relion5_tomograms_star"]
    )]
    pub target: Option<PathBuf>,
    /// Template, same number of axes as the target and no larger. Repeat for several
    /// templates of one shape, matched in one pass against one preparation of the target:
    /// scores.npy holds the best score over the templates (ties to the first given),
    /// template_index.npy (int32, 0-based) its template and rotation_index.npy its rotation;
    /// bit for bit the per-voxel maximum of separate runs. Not with --score-stats or
    /// --background-correction.
    #[arg(long, short = 'i', value_name = "P", required = true)]
    pub template: Vec<PathBuf>,
    /// Template mask (template-shaped) for cam, flc-sphere, flc, mcc: one for every
    /// --template, or one per --template in the same order.
    #[arg(long, value_name = "M")]
    pub template_mask: Vec<PathBuf>,
    /// Target mask (target-shaped), required by mcc.
    #[arg(long, value_name = "TM")]
    pub target_mask: Option<PathBuf>,
    /// Score (pytme's CC, LCC, NCC, CAM, FLCSphericalMask, FLC, MCC).
    #[arg(long, short = 's', value_enum, default_value_t = ScoreArg::FlcSphere)]
    pub score: ScoreArg,
    /// The rotation set (--angular-step, --rotations, --euler, --orientations, --symmetry).
    #[command(flatten)]
    pub rotation: super::rotation_set::RotationArgs,
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
    /// Handedness check (Warp's --check_hand): also match the template mirrored (its last
    /// array axis, x, reversed; its mask alike), call peaks on both score maps (the best N,
    /// at least half the template's smallest side apart) and record in run.json `check_hand`:
    /// `n`, `original` and `mirrored` (the mean of each map's best N peak scores) and
    /// `better` ("original" or "mirrored"; a tie says "original"). The maps written are the
    /// original template's. One template, one target, not under mpirun.
    #[arg(long, value_name = "N", value_parser = parse_check_hand)]
    pub check_hand: Option<usize>,
    /// Devices to split the rotations over, e.g. `0,1,2,3` (each runs a contiguous range;
    /// the results merge exactly, byte-identical to one device). With --backend cuda: CUDA
    /// devices, one thread each; with the CPU backend: that many CPU workers sharing rayon's
    /// threads, each with a pool of its own. Under mpirun: the devices the ranks of a node
    /// take in turn (node-local rank i uses the i-th, modulo the list).
    #[arg(long, value_name = "LIST", value_parser = parse_devices)]
    pub devices: Option<Devices>,
    /// Fourier filters (pytme's flags).
    #[command(flatten)]
    pub filters: super::filters::FilterArgs,
    /// Restricting the search (--scheduling-mask, --search-z/-y/-x).
    #[command(flatten)]
    pub search: super::search::SearchArgs,
    /// Many targets in one job (`--target-list`, `--peaks`).
    #[command(flatten)]
    pub list: ListArgs,
    /// Tilt-series metadata (RELION 5 project, Warp XML).
    #[command(flatten)]
    pub metadata: super::project::MetadataArgs,
}

fn parse_check_hand(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "expected a number of peaks of at least 1 (the best N peaks of each map), got `{s}`"
        )),
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

/// `--interpolation`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterpArg {
    /// Cubic B-spline with prefilter (scipy order 3).
    Cubic,
    /// Trilinear / bilinear (order 1).
    Linear,
}

/// A checked `match` run: the library's job and what the command adds to it.
pub struct Job {
    /// What to compute (host inputs and options).
    pub job: Arc<MatchJob>,
    /// Also call peaks (for a PNG) with this query.
    pub peaks: Option<PeakQuery>,
    /// `--check-hand`: the same job with the template (and its mask) mirrored.
    pub mirrored: Option<Arc<MatchJob>>,
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
    /// A seeded search's seeds, for run.json.
    pub seeds_json: Option<serde_json::Value>,
    /// The target read (`--target`, or the project row's tomogram).
    pub target: PathBuf,
    /// The tilt-series metadata the filters were built from, if any.
    pub metadata: Option<super::project::Metadata>,
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

/// A target on a device is matched in one run on that device, its result kept there: not
/// split over `--devices` or MPI ranks, not mirrored (`--check-hand`).
fn check_kept_run(g: &Global, a: &MatchArgs) -> CliResult<()> {
    let flag = if a.devices.is_some() {
        "--devices"
    } else if a.check_hand.is_some() {
        "--check-hand"
    } else if g.ranks {
        "mpirun"
    } else {
        return Ok(());
    };
    Err(CliError::input(format!(
        "{flag}: not with a target on a device (matched in one run on its device, the result \
         kept there), expected a host target"
    )))
}

/// The flag a seeded search cannot combine with, if given.
fn seeded_conflict(a: &MatchArgs) -> Option<&'static str> {
    if a.score == ScoreArg::Mcc {
        Some("--score mcc")
    } else if a.score_stats {
        Some("--score-stats")
    } else if a.background_correction.is_some() {
        Some("--background-correction")
    } else {
        None
    }
}

/// Reads and checks the inputs of `monomorph match` (creates nothing).
pub fn prepare(g: &Global, a: &MatchArgs) -> CliResult<(Prepared, Job)> {
    check_out_dir("--out", &a.out)?;
    // The CPU ids of --devices are worker threads of this process, not under MPI ranks.
    check_devices(g, a.devices.as_ref(), !g.ranks)?;
    let mut timings = Timings::default();
    let (metadata, resolved) = super::project::resolve(&a.metadata, a.target.as_deref())?;
    let resolved = resolved.unwrap_or_default();
    let target_path = resolved.as_path();
    let (target, g) = match super::session::take_foreign("--target", target_path) {
        // On a device: checked by shape here, by value where it lives (`JobArray::to_backend`).
        Some(f) => {
            super::device_input::check_device_input("--target", &f, &[2, 3])?;
            check_kept_run(g, a)?;
            let g = g.for_device_input(&f);
            let v = (JobArray::Foreign(f), None);
            (v, g)
        }
        None => {
            let t = timings.time("read", || read_input("--target", target_path, &[2, 3]))?;
            let g = g.for_input("--target", target_path, &t.data)?;
            ((JobArray::Host(t.data), t.voxel_size), g)
        }
    };
    let tshape = target.0.shape().to_vec();
    let d = tshape.len();
    let exclusive = [
        ("--score-stats", a.score_stats),
        ("--background-correction", a.background_correction.is_some()),
        ("--check-hand", a.check_hand.is_some()),
    ];
    let (template, more, template_mask) = super::device_input::read_job_templates(
        &a.template,
        &a.template_mask,
        &exclusive,
        &tshape,
    )?;
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
    let png_query = a.png.then(|| png_query(template.0.shape()));
    let (fvoxel, seed_voxel) = run_voxel_sizes(
        &g,
        a,
        metadata.as_ref(),
        (target_path, target.1, &tshape),
        template.1,
    )?;
    let (rotations, seeds) =
        super::rotation_set::choose(&a.rotation, &tshape, seed_voxel, metadata.as_ref())?;
    let frame = pytme_frame(target_path);
    let filters = super::filters::spec(&a.filters, d, fvoxel, frame, metadata.as_ref(), g.quiet)?;
    let filters_json = super::filters::to_json(&a.filters, filters.as_ref(), metadata.as_ref());
    let search = a.search.check(&tshape)?;
    let search_json = a.search.to_json(&search);
    let voxel_size = target.1;
    let target = match target.0 {
        JobArray::Host(h) if a.filters.invert_target_contrast => {
            JobArray::Host(super::filters::negate(h))
        }
        JobArray::Foreign(_) if a.filters.invert_target_contrast => {
            return Err(CliError::input(
                "--invert-target-contrast: not with a target on a device (its values are not \
                 negated on the host), expected a host array or the target negated by its \
                 library",
            ));
        }
        t => t,
    };
    if let Some(flag) = seeds.as_ref().and(seeded_conflict(a)) {
        return Err(CliError::input(format!(
            "{flag}: not with --orientations-uncertainty (a seeded search), expected one of the two"
        )));
    }
    let seeds_json = seeds.as_ref().map(super::rotation_set::seeds_json);
    let mut job = MatchJob::new(target, template.0, score, rotations);
    job.seeds = seeds;
    job.template_mask = template_mask;
    job.more_templates = more;
    job.target_mask = target_mask;
    job.interpolation = match a.interpolation {
        InterpArg::Cubic => Interpolation::Cubic,
        InterpArg::Linear => Interpolation::Linear,
    };
    job.pad_edges = a.pad_edges;
    job.memory_limit = a.memory_limit;
    job.filters = filters;
    job.score_stats = a.score_stats;
    job.background = a.background_correction;
    job.search = Restriction {
        mask: search.mask,
        ranges: search.ranges,
    };
    job.precision = g.dispatch(None).precision;
    job.pytme_frame = frame;
    let n_rot = job.rotations.len();
    let mirrored = match a.check_hand {
        Some(_) => Some(Arc::new(mirrored_job(&job)?)),
        None => None,
    };
    check_outputs_not_inputs(a, &resolved)?;
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
            seeds_json,
            target: resolved.clone(),
            metadata,
        },
        Job {
            job: Arc::new(job),
            peaks: png_query,
            mirrored,
        },
    ))
}

/// `--png`'s peaks: the best 100 above pytme's 1-false-positive threshold, half a template
/// apart.
fn png_query(template_shape: &[usize]) -> PeakQuery {
    PeakQuery {
        min_distance: template_shape
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
    }
}

/// The voxel size the filters are built with (the project's, else the flags' and headers'),
/// and the one seed positions in Å are converted with (the project's, else --sampling-rate,
/// else the target's header when isotropic). `target`: its path, header voxel size and shape.
fn run_voxel_sizes(
    g: &Global,
    a: &MatchArgs,
    metadata: Option<&super::project::Metadata>,
    target: (&std::path::Path, Option<[f32; 3]>, &[usize]),
    template_voxel: Option<[f32; 3]>,
) -> CliResult<(f64, Option<f64>)> {
    let (target_path, target_voxel, tshape) = target;
    let project_voxel = match metadata {
        Some(m) => super::project::project_voxel(
            m,
            a.filters.sampling_rate,
            (target_path, target_voxel, tshape),
            template_voxel,
            g.quiet,
        )?,
        None => None,
    };
    let fvoxel = match project_voxel {
        Some(v) => v,
        None => super::filters::voxel_size(
            &a.filters,
            &[
                ("--target", target_path, target_voxel),
                ("--template", &a.template[0], template_voxel),
            ],
            template_voxel,
        )?,
    };
    let seed_voxel = project_voxel.or(a.filters.sampling_rate).or_else(|| {
        let v = target_voxel?.map(f64::from);
        v.iter()
            .all(|&x| (x - v[2]).abs() <= 1e-5 * v[2])
            .then_some(v[2])
    });
    Ok((fvoxel, seed_voxel))
}

/// `--check-hand`: the same job with the template (and its mask) mirrored; only its scores
/// are read, so it computes no statistics.
/// The template is mirrored on the host: a template on a device is refused.
fn mirrored_job(job: &MatchJob) -> CliResult<MatchJob> {
    let mut m = job.clone();
    m.score_stats = false;
    let t = m.template.host().ok_or_else(|| {
        CliError::input("--check-hand: the template must be host data (it is mirrored on the host)")
    })?;
    m.template = super::templates::mirror(t).into();
    m.template_mask = m.template_mask.as_ref().map(super::templates::mirror);
    Ok(m)
}

/// Refuses an input that is also one of the files `--out` would write (`target`: the target
/// read, `--target` or the project row's tomogram).
fn check_outputs_not_inputs(a: &MatchArgs, target: &std::path::Path) -> CliResult<()> {
    let names = [
        "scores.npy",
        "rotation_index.npy",
        "template_index.npy",
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
    let inputs = [("--target", Some(target))]
        .into_iter()
        .chain(a.template.iter().map(|p| ("--template", Some(p.as_path()))))
        .chain(
            a.template_mask
                .iter()
                .map(|p| ("--template-mask", Some(p.as_path()))),
        )
        .chain([
            ("--target-mask", a.target_mask.as_deref()),
            ("--rotations", a.rotation.rotations.as_deref()),
            ("--euler", a.rotation.euler.as_deref()),
            ("--orientations", a.rotation.orientations.as_deref()),
            ("--scheduling-mask", a.search.scheduling_mask.as_deref()),
        ]);
    let inputs: Vec<(&str, &std::path::Path)> =
        inputs.filter_map(|(f, p)| p.map(|p| (f, p))).collect();
    let outputs: Vec<(&str, PathBuf)> = names.iter().map(|n| ("--out", a.out.join(n))).collect();
    check_distinct(&outputs, &inputs)?;
    Ok(())
}

/// The list-mode options of `monomorph match`.
#[derive(Args, Debug, Clone, Default)]
pub struct ListArgs {
    /// Many targets in one job, instead of --target: a text file with one target path per line
    /// (blank lines and `#` comments skipped; relative paths from the list's folder), or a
    /// RELION STAR file (`.star`) whose `_rlnTomoReconstructedTomogram` or `_rlnMicrographName`
    /// column holds the paths (relative paths from the current folder, as in a RELION
    /// project). --out gets one folder per target, named by the file's stem (`-2`, `-3`, …
    /// added when stems repeat), holding what a run with --target writes, and list.json.
    /// Under mpirun the targets (or, with fewer targets than ranks, their rotation ranges)
    /// go to whichever rank is free next.
    #[arg(
        long,
        value_name = "LIST",
        conflicts_with = "target",
        help_heading = "Many targets"
    )]
    pub target_list: Option<PathBuf>,
    /// Call peaks on every target's result, as `monomorph peaks` with the flags below would on
    /// its output folder, and write them all to one STAR file, OUT/particles.star, naming each
    /// row's target in `_rlnMicrographName` (the path as the list gives it).
    #[arg(long, requires = "target_list", help_heading = "Many targets")]
    pub peaks: bool,
    /// The peak query of --peaks, per target (`monomorph peaks`'s flags).
    #[command(flatten, next_help_heading = "Many targets")]
    pub query: super::peaks::PeakFlags,
    /// With --peaks: the format of OUT/particles.star: relion4 (the default: voxels,
    /// `_rlnMicrographName`) or relion5 (`_rlnTomoName`, centred Å, data_optics; each
    /// tomogram's geometry from its tomograms.star row, see `peaks --star-format`).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub star_format: Option<super::project::StarFormat>,
    /// With --star-format relion5: the centring rule (see `peaks --relion5-centre`).
    #[arg(
        long,
        value_enum,
        value_name = "RULE",
        requires = "star_format",
        help_heading = "Many targets"
    )]
    pub relion5_centre: Option<super::project::CentreArg>,
}

/// `--devices`: distinct device numbers, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Devices(pub Vec<usize>);

impl std::fmt::Display for Devices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        f.write_str(&s.join(","))
    }
}

/// Parses `--devices`: a comma-separated list of distinct device numbers (`0,1,2,3`).
pub fn parse_devices(s: &str) -> Result<Devices, String> {
    let mut out: Vec<usize> = Vec::new();
    if s.trim().is_empty() {
        return Err("no device, expected a comma-separated list such as 0,1".into());
    }
    for t in s.split(',').map(str::trim) {
        let d: usize = t.parse().map_err(|_| {
            format!("'{t}' is not a device number, expected a comma-separated list such as 0,1")
        })?;
        if out.contains(&d) {
            return Err(format!(
                "device {d} is listed twice, expected each device once"
            ));
        }
        out.push(d);
    }
    Ok(Devices(out))
}

/// Checks `--devices` against the devices there are (an input error naming the flag): CUDA
/// devices, or under the CPU backend one worker per thread (`threads_split`: the CPU ids are
/// checked only where the CPU runs device threads, not under MPI, where a CPU rank uses no
/// device).
pub fn check_devices(g: &Global, devices: Option<&Devices>, threads_split: bool) -> CliResult<()> {
    let Some(d) = devices else { return Ok(()) };
    let backend = match g.dispatch(None).backend {
        BackendChoice::Auto => DefaultBackend::new().backend,
        b => b,
    };
    let (n, what) = match backend {
        BackendChoice::Cuda => (
            monomorph::dispatch::cuda_device_count(),
            "CUDA device(s) visible",
        ),
        _ if !threads_split => return Ok(()),
        _ => (
            monomorph::Cpu::<monomorph::Single>::new().threads(),
            "CPU worker(s): one per thread, RAYON_NUM_THREADS or the cores",
        ),
    };
    match d.0.iter().find(|&&k| k >= n) {
        Some(bad) => Err(CliError::input(format!(
            "--devices {d}: device {bad} does not exist ({n} {what}), expected numbers below {n}"
        ))),
        None => Ok(()),
    }
}

/// The test hooks, read once: `MONOMORPH_TEST_FAIL_AFTER=N` (a matching loop fails after N
/// steps, as a device error would), with `MONOMORPH_TEST_FAIL_DEVICE=D` only the worker on
/// device D.
pub fn test_hook(devices: Option<&[usize]>) -> Option<FailAfter> {
    let num = |v: &str| std::env::var(v).ok()?.trim().parse::<usize>().ok();
    let steps = num("MONOMORPH_TEST_FAIL_AFTER");
    match num("MONOMORPH_TEST_FAIL_DEVICE") {
        Some(d) => Some(FailAfter {
            worker: Some(devices?.iter().position(|&x| x == d)?),
            steps: steps.unwrap_or(0),
        }),
        None if std::env::var_os("MONOMORPH_TEST_FAIL_DEVICE").is_some() => None,
        None => steps.map(|steps| FailAfter {
            worker: None,
            steps,
        }),
    }
}

/// The dispatch of a job's own work: `g`'s backend in the job's precision.
pub fn job_dispatch(g: &Global, job: &Job, memory_limit: Option<u64>) -> DispatchOptions {
    DispatchOptions {
        precision: job.job.precision,
        ..g.dispatch(memory_limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_parse_or_say_why_not() {
        assert_eq!(parse_devices("0,1").unwrap(), Devices(vec![0, 1]));
        assert_eq!(parse_devices(" 3 , 1").unwrap(), Devices(vec![3, 1]));
        for (bad, why) in [
            ("", "no device"),
            ("0,0", "listed twice"),
            ("0,x", "'x' is not a device number"),
            ("0,", "'' is not"),
            ("-1", "'-1' is not"),
        ] {
            let e = parse_devices(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
