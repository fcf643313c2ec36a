//! `monomorph match --target-list`: many targets in one job, one output folder per target.
//!
//! The list is read and every target is checked (read, shape against the template, the flags'
//! checks) before any matching, so a bad file stops the job with exit 2 before any work. Then
//! each target runs exactly as `monomorph match --target T --out OUT/NAME` with the same flags
//! would (the same files, byte for byte), and with `--peaks` its peaks are called as
//! `monomorph peaks` would call them on those files and gathered into one STAR file,
//! `OUT/particles.star`, one `_rlnMicrographName` per row. `OUT/list.json` (written last) says
//! which folder holds which target and how the work was spread. One process runs the targets in
//! list order; under MPI ([`super::list_mpi`]) rank 0 hands out (target, rotation range) items
//! to whichever rank asks next.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use monomorph::algo::matching::{BackgroundScores, MatchResult, background_grid, match_template};
use monomorph::io::{MicrographPeaks, PeakRow, peaks_star_many};
use monomorph::{Backend, BackendTask, FloatOf, Index, IntOf, Real};
use ndarray::{ArrayD, IxDyn};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::info_span;

use super::matching::{MatchArgs, MatchJob, Matched, Prepared, prepare, write};
use super::output::{Outputs, check_out_dir, path_json};
use super::peaks::{Caller, PeakQuery, RunStats};
use super::ranks::Watch;
use super::trace::progress;
use super::{CliError, CliResult, Global};

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
    /// With --peaks: `peaks --min-distance` (default 5).
    #[arg(
        long,
        value_name = "N",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub min_distance: Option<usize>,
    /// With --peaks: `peaks --threshold-abs` (alias --min-score, pytme's name).
    #[arg(
        long,
        visible_alias = "min-score",
        value_name = "X",
        allow_negative_numbers = true,
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub threshold_abs: Option<f64>,
    /// With --peaks: `peaks --threshold-rel`.
    #[arg(
        long,
        value_name = "Y",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub threshold_rel: Option<f64>,
    /// With --peaks: `peaks --exclude-border`.
    #[arg(
        long,
        value_name = "N",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub exclude_border: Option<usize>,
    /// With --peaks: `peaks --num-peaks` (per target).
    #[arg(
        long,
        value_name = "K",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub num_peaks: Option<usize>,
    /// With --peaks: `peaks --false-positives` (per target, from its run's statistics).
    #[arg(
        long,
        value_name = "K",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub false_positives: Option<f64>,
    /// With --peaks: `peaks --max-score`.
    #[arg(
        long,
        value_name = "X",
        allow_negative_numbers = true,
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub max_score: Option<f64>,
    /// With --peaks: `peaks --peak-oversampling`.
    #[arg(
        long,
        value_name = "F",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub peak_oversampling: Option<f64>,
    /// With --peaks: `peaks --caller` (default skimage).
    #[arg(
        long,
        value_enum,
        value_name = "CALLER",
        requires = "peaks",
        help_heading = "Many targets"
    )]
    pub caller: Option<Caller>,
}

/// One target of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The path as the list gives it (`_rlnMicrographName` in particles.star).
    pub given: String,
    /// The path to read.
    pub path: PathBuf,
    /// Its output folder's name inside --out.
    pub name: String,
    /// Its line in the list (1-based).
    pub line: usize,
}

/// The columns of a STAR list that hold target paths, in order of preference.
pub const STAR_COLUMNS: [&str; 2] = ["_rlnTomoReconstructedTomogram", "_rlnMicrographName"];

/// Reads `--target-list`: its entries with resolved paths and unique folder names.
pub fn read_list(list: &Path) -> CliResult<Vec<Entry>> {
    let err = |m: String| CliError::input(format!("--target-list {}: {m}", list.display()));
    let text = monomorph::io::read_text_file(list).map_err(|e| err(io_message(e)))?;
    let star = list
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("star"));
    let given = if star {
        star_paths(&text)
    } else {
        Ok(text_paths(&text))
    }
    .map_err(err)?;
    if given.is_empty() {
        return Err(err(
            "lists no target, expected one target path per line".into()
        ));
    }
    let base = if star {
        PathBuf::new()
    } else {
        list.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let mut entries: Vec<Entry> = Vec::with_capacity(given.len());
    // Path → line of its first entry: one look-up per entry (a list of 200 000 targets must
    // not take minutes before its first error).
    let mut seen: std::collections::HashMap<PathBuf, usize> =
        std::collections::HashMap::with_capacity(given.len());
    for (line, g) in given {
        if monomorph::io::star::star_quote(&g).is_none() {
            return Err(err(format!(
                "line {line}: {g:?} cannot be written as a STAR value (particles.star names \
                 each target), expected a path without control characters"
            )));
        }
        let p = Path::new(&g);
        let path = if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        };
        if let Some(first) = seen.get(&path) {
            return Err(err(format!(
                "line {line}: {g} is listed twice (also on line {first}), expected each target once"
            )));
        }
        seen.insert(path.clone(), line);
        entries.push(Entry {
            given: g,
            path,
            name: String::new(),
            line,
        });
    }
    let names = unique_names(&entries.iter().map(|e| e.path.clone()).collect::<Vec<_>>());
    for (e, n) in entries.iter_mut().zip(names) {
        e.name = n;
    }
    Ok(entries)
}

/// The message of a library error without the path (the caller names the file).
fn io_message(e: monomorph::Error) -> String {
    match e {
        monomorph::Error::Io { message, .. } => message,
        other => other.to_string(),
    }
}

/// The lines of a text list that name targets: (line number, path).
fn text_paths(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(i, l)| (i, l.to_string()))
        .collect()
}

/// The values of a STAR file's first loop with a column of [`STAR_COLUMNS`] (the preferred
/// column when it has several), each once: (line number, path). Read by the one STAR reader
/// ([`monomorph::io::star`], RELION's quoting rules).
fn star_paths(text: &str) -> Result<Vec<(usize, String)>, String> {
    let blocks = monomorph::io::star::parse_star(Path::new(""), text).map_err(io_message)?;
    let mut seen_cols: Vec<String> = Vec::new();
    for l in blocks.iter().flat_map(|b| &b.loops) {
        seen_cols.extend(l.columns.iter().cloned());
        let Some(c) = STAR_COLUMNS.iter().find_map(|c| l.column(c)) else {
            continue;
        };
        let mut once = std::collections::HashSet::new();
        let mut out: Vec<(usize, String)> = Vec::new();
        for (n, row) in &l.rows {
            if once.insert(row[c].as_str()) {
                out.push((*n, row[c].clone()));
            }
        }
        return Ok(out);
    }
    let found = if seen_cols.is_empty() {
        "no loop_ with columns".to_string()
    } else {
        format!("columns {}", seen_cols.join(" "))
    };
    Err(format!(
        "no {} column ({found}), expected a STAR file whose column holds the target paths \
         (_rlnTomoName names a tomogram, it is not a file)",
        STAR_COLUMNS.join(" or ")
    ))
}

/// The stem of a target file: its name without a compression and a format extension.
fn stem(p: &Path) -> String {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    let mut s = name.as_str();
    for ext in [".gz", ".bz2"] {
        if lower.ends_with(ext) {
            s = &s[..s.len() - ext.len()];
            break;
        }
    }
    let s = match s.rfind('.') {
        Some(k) if k > 0 => &s[..k],
        _ => s,
    };
    if s.is_empty() || s == "." || s == ".." {
        "target".into()
    } else {
        s.to_string()
    }
}

/// A folder name per path: its stem, the second and later paths with a stem already taken
/// getting `-2`, `-3`, … (the first number that leaves every name unique). Stable: depends
/// only on the list's order.
pub fn unique_names(paths: &[PathBuf]) -> Vec<String> {
    use std::collections::{HashMap, HashSet};
    let stems: Vec<String> = paths.iter().map(|p| stem(p)).collect();
    let mut taken: HashSet<String> = ["particles.star", "list.json"].map(String::from).into();
    // Stems still to come, and per stem the next number to try: a name tried and refused
    // stays refused (taken, or held unnumbered by a later path until that path takes it), so
    // each stem resumes where it stopped and a list of many equal stems stays linear.
    let mut later: HashMap<&str, usize> = HashMap::new();
    for s in &stems {
        *later.entry(s.as_str()).or_default() += 1;
    }
    let mut next: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::with_capacity(paths.len());
    for s in &stems {
        if let Some(c) = later.get_mut(s.as_str()) {
            *c -= 1;
        }
        let mut name = s.clone();
        if taken.contains(&name) {
            let k = next.entry(s.as_str()).or_insert(2);
            loop {
                name = format!("{s}-{k}");
                *k += 1;
                // A stem that another path holds unnumbered later is never given to this one.
                if !taken.contains(&name) && later.get(name.as_str()).is_none_or(|&c| c == 0) {
                    break;
                }
            }
        }
        taken.insert(name.clone());
        out.push(name);
    }
    out
}

/// The arguments of the single run of entry `e`: `--target PATH --out OUT/NAME`.
pub fn target_args(a: &MatchArgs, e: &Entry) -> MatchArgs {
    let mut t = a.clone();
    t.target = Some(e.path.clone());
    t.out = a.out.join(&e.name);
    t.list = ListArgs::default();
    t
}

/// An error about entry `e` of the list, naming the list and the line.
pub fn in_list(err: CliError, list: &Path, e: &Entry) -> CliError {
    err.about(format!(
        "--target-list {} line {} ({})",
        list.display(),
        e.line,
        e.given
    ))
}

/// The peak query of `--peaks` (checked as `monomorph peaks` checks its flags).
pub fn peak_query(a: &ListArgs) -> CliResult<Option<PeakQuery>> {
    if !a.peaks {
        return Ok(None);
    }
    PeakQuery {
        min_distance: a.min_distance.unwrap_or(5),
        threshold_abs: a.threshold_abs,
        threshold_rel: a.threshold_rel,
        exclude_border: a.exclude_border,
        num_peaks: a.num_peaks,
        false_positives: a.false_positives,
        caller: a.caller.unwrap_or(Caller::Skimage),
        run_stats: None,
        max_score: a.max_score,
        oversampling: a.peak_oversampling,
    }
    .checked()
    .map(Some)
}

/// What the up-front check learns of a target: its voxels and rotations (the work).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Info {
    /// Voxels of the target.
    pub voxels: u64,
    /// Rotations searched.
    pub nrot: u64,
}

/// Reads and checks entry `e` as its single run would, and the `--peaks` flags against it;
/// creates nothing.
pub fn precheck(
    g: &Global,
    a: &MatchArgs,
    list: &Path,
    e: &Entry,
    q: Option<&PeakQuery>,
) -> CliResult<Info> {
    let ta = target_args(a, e);
    let (p, _job) = prepare(g, &ta).map_err(|err| in_list(err, list, e))?;
    let voxels = p.tshape.iter().product::<usize>() as u64;
    if let Some(k) = q.and_then(|q| q.false_positives)
        && k >= voxels as f64 * p.n_rot as f64
    {
        return Err(in_list(
            CliError::input(format!(
                "--false-positives {}: expected fewer than the {} voxels × rotations of this target",
                super::error::show(k),
                voxels * p.n_rot as u64
            )),
            list,
            e,
        ));
    }
    if let Some(f) = q.and_then(|q| q.oversampling) {
        super::peaks::check_oversampling_memory(&p.tshape, f)
            .map_err(|err| in_list(err, list, e))?;
    }
    Ok(Info {
        voxels,
        nrot: p.n_rot as u64,
    })
}

/// A progress callback as the matching loop takes it.
pub type Callback<'a> = &'a (dyn Fn(usize, usize) -> ControlFlow<()> + Sync);

/// One whole target on a backend: `MatchJob`'s run with the caller's progress callback.
pub struct Whole<'a> {
    /// The target's job.
    pub job: MatchJob,
    /// Called after every rotation; may stop the loop.
    pub cb: Callback<'a>,
}

impl BackendTask for Whole<'_> {
    type Output = Matched;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Matched> {
        let job = &self.job;
        let _span = info_span!("match", backend = b.name(), score = %job.score, rotations = job.rotations.len()).entered();
        let up = job.upload(b)?;
        let mut params = job.params(&up);
        params.progress = Some(self.cb);
        let t0 = Instant::now();
        let r = {
            let _s = info_span!("match_template").entered();
            let r = match_template(b, &up.target, &up.template, &params)?;
            b.synchronize()?;
            r
        };
        job.finish(b, r, t0.elapsed().as_secs_f64())
    }
}

/// A peak row as it travels between ranks (floats as bits: exact).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    position: Vec<usize>,
    score: u64,
    rotation: Option<usize>,
    euler: Option<[u64; 3]>,
    #[serde(default)]
    subvoxel: Option<Vec<u64>>,
}

impl From<&PeakRow> for Row {
    fn from(r: &PeakRow) -> Self {
        Row {
            position: r.position.clone(),
            score: r.score.to_bits(),
            rotation: r.rotation,
            euler: r.euler.map(|e| e.map(f64::to_bits)),
            subvoxel: r
                .subvoxel
                .as_ref()
                .map(|v| v.iter().map(|x| x.to_bits()).collect()),
        }
    }
}

impl From<&Row> for PeakRow {
    fn from(r: &Row) -> Self {
        PeakRow {
            position: r.position.clone(),
            score: f64::from_bits(r.score),
            rotation: r.rotation,
            euler: r.euler.map(|e| e.map(f64::from_bits)),
            subvoxel: r
                .subvoxel
                .as_ref()
                .map(|v| v.iter().map(|&x| f64::from_bits(x)).collect()),
        }
    }
}

/// A finished target: its peaks (with `--peaks`) and pixel size, for particles.star.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TargetDone {
    /// Its peak rows.
    pub rows: Vec<Row>,
    /// Its pixel size in Å as f64 bits (isotropic voxel size of an MRC target).
    pub pixel: Option<u64>,
    /// Map dimensions (2 or 3).
    pub ndim: usize,
}

/// Peaks on a finished target's host result, as `monomorph peaks` calls them on the files the
/// run writes: the float32 scores, the rotation index, the rotations as stored (float32).
struct PeaksOnResult {
    scores: ArrayD<f32>,
    rotation_index: ArrayD<i64>,
    rotations: ndarray::Array3<f64>,
    query: PeakQuery,
}

impl BackendTask for PeaksOnResult {
    type Output = Vec<PeakRow>;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Vec<PeakRow>> {
        let s = b.upload_owned(self.scores.mapv(|v| FloatOf::<B>::from_f64(v as f64)))?;
        let ri = b.upload_owned(self.rotation_index)?;
        let called = super::peaks::call(b, &s, &self.query, Some((&ri, &self.rotations)))?;
        Ok(called.rows())
    }
}

/// The isotropic pixel size of a voxel size (as `peaks` takes it for RELION).
fn pixel_of(v: Option<[f32; 3]>) -> Option<f64> {
    let v = v?.map(f64::from);
    let iso = v.iter().all(|&x| (x - v[2]).abs() <= 1e-5 * v[2].abs());
    (iso && v[2].is_finite() && v[2] > 0.0).then_some(v[2])
}

/// Peaks of a finished match (`g`: the command's flags, for the backend; precision as
/// `peaks` on the float32 scores would take it).
fn call_peaks(g: &Global, m: &Matched, n_rot: usize, q: &PeakQuery) -> CliResult<Vec<Row>> {
    let mut query = q.clone();
    query.run_stats = Some(RunStats {
        ssum: m.ssum,
        n_rotations: n_rot,
    });
    let task = PeaksOnResult {
        scores: m.scores.clone(),
        rotation_index: m.rotation_index.mapv(i64::from),
        rotations: m.rotations.mapv(|v| v as f32 as f64),
        query,
    };
    let rows = monomorph::dispatch(g.dispatch(None), task)?;
    Ok(rows.iter().map(Row::from).collect())
}

/// Writes a finished target's folder (as its single run does) after calling its peaks.
pub fn write_target(
    g: &Global,
    ta: &MatchArgs,
    p: Prepared,
    out: Outputs,
    m: Matched,
    q: Option<&PeakQuery>,
) -> CliResult<TargetDone> {
    let ndim = p.tshape.len();
    let rows = match q {
        Some(q) => call_peaks(g, &m, p.n_rot, q)?,
        None => Vec::new(),
    };
    let pixel = pixel_of(p.voxel_size).map(f64::to_bits);
    write(ta, p, out, m)?;
    Ok(TargetDone { rows, pixel, ndim })
}

/// Runs entry `e` whole, as its single run would, with progress callback `cb` (which may stop
/// it), and writes its folder.
pub fn run_whole(
    g: &Global,
    a: &MatchArgs,
    list: &Path,
    e: &Entry,
    q: Option<&PeakQuery>,
    cb: Callback<'_>,
    watch: &Watch,
) -> CliResult<TargetDone> {
    let ta = target_args(a, e);
    let (mut p, job) = prepare(g, &ta).map_err(|err| in_list(err, list, e))?;
    let out = Outputs::in_dir("--out", &ta.out)?;
    let dispatch = p.g.dispatch(ta.memory_limit);
    let m = p.timings.time("total", || match &ta.devices {
        // --devices: the target's rotations split over the devices' threads.
        Some(d) => super::workers::run_split(dispatch, d, job, cb, watch),
        None => watch.outcome(
            monomorph::dispatch(dispatch, Whole { job, cb }),
            ta.memory_limit,
        ),
    })?;
    write_target(g, &ta, p, out, m, q)
}

/// Host maps of a rotation range of one target (rotation indices into the whole set), for
/// the exact merge ([`merge_parts`]).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub struct HostPart {
    /// First rotation of the range.
    pub start: usize,
    /// Rotations in the range.
    pub len: usize,
    /// Best score per voxel (widened to f64: exact), C order.
    pub scores: Vec<f64>,
    /// Its rotation index (−1 where none).
    pub index: Vec<i64>,
    /// Σ score² of each (tile, rotation) call, tile by tile.
    pub ssum_parts: Vec<f64>,
    /// `--score-stats`: the score moments over the range (4 words per voxel, exact integer
    /// sums) and their scales.
    pub moments: Option<(Vec<i64>, [f64; 2])>,
    /// `--background-correction`: the background scores over the range (widened to f64,
    /// exact; C order on the background grid), not yet subtracted, and their mean's count.
    pub background: Option<(Vec<f64>, f64)>,
}

/// Merges `part`'s maps into `acc`'s, parts of disjoint rotation ranges in any order, exactly
/// as one loop over all rotations keeps its running maximum ([`monomorph::split::merge_into`],
/// the rule every split shares).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn merge_into(acc: &mut HostPart, part: HostPart) -> CliResult<()> {
    // The moments are integer sums: exact in any order.
    match (&mut acc.moments, part.moments) {
        (Some((a, _)), Some((p, _))) => monomorph::backend::host::moments_merge(a, &p),
        (a @ None, p) => *a = p,
        (Some(_), None) => {}
    }
    // Background maxima (from +0, never −0 or NaN): the greater value, exact in any order.
    match (&mut acc.background, part.background) {
        (Some((a, _)), Some((p, _))) => {
            for (x, y) in a.iter_mut().zip(p) {
                if y > *x {
                    *x = y;
                }
            }
        }
        (a @ None, p) => *a = p,
        (Some(_), None) => {}
    }
    monomorph::split::merge_into(&mut acc.scores, &mut acc.index, &part.scores, &part.index)
        .map_err(|e| CliError::failure(format!("merging the parts of a target: {e}")))
}

/// Σ score² partials of every range of a target, `(start, len, partials)` in any order, put in
/// the single loop's order ([`monomorph::split::order_ssum`]): the partials, their left fold
/// from zero, and the tile count.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn order_ssum(
    parts: Vec<(usize, usize, Vec<f64>)>,
    nrot: usize,
) -> Result<(Vec<f64>, f64, usize), String> {
    let parts: Vec<(usize, usize, &[f64])> =
        parts.iter().map(|(s, l, p)| (*s, *l, &p[..])).collect();
    monomorph::split::order_ssum(&parts, nrot)
}

/// The merged maps and Σ score² of `parts` (every range of a target, any order): what one
/// process's loop over all `nrot` rotations gives, bit for bit ([`merge_into`],
/// [`order_ssum`]).
#[cfg(test)]
pub fn merge_parts(
    parts: Vec<HostPart>,
    nrot: usize,
) -> Result<(HostPart, (Vec<f64>, f64, usize)), String> {
    let ssum = order_ssum(
        parts
            .iter()
            .map(|p| (p.start, p.len, p.ssum_parts.clone()))
            .collect(),
        nrot,
    )?;
    let mut it = parts.into_iter();
    let mut acc = it.next().ok_or("no parts")?;
    for p in it {
        merge_into(&mut acc, p).map_err(|e| e.message)?;
    }
    Ok((acc, ssum))
}

/// The single run's result from merged parts, on a backend: `MatchJob::finish` of it.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub struct FromParts {
    /// The target's job.
    pub job: MatchJob,
    /// Merged maps.
    pub merged: HostPart,
    /// Per-call partials in the single loop's order, their fold, the tile count.
    pub ssum: (Vec<f64>, f64, usize),
    /// The target's shape.
    pub shape: Vec<usize>,
    /// Seconds the parts took, summed.
    pub match_s: f64,
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl BackendTask for FromParts {
    type Output = Matched;
    fn run<B: Backend>(self, b: &B) -> monomorph::Result<Matched> {
        let shape = IxDyn(&self.shape);
        let bad = |e: ndarray::ShapeError| monomorph::Error::invalid("parts", e.to_string());
        let s = ArrayD::from_shape_vec(
            shape.clone(),
            self.merged
                .scores
                .iter()
                .map(|&v| FloatOf::<B>::from_f64(v))
                .collect(),
        )
        .map_err(bad)?;
        let i = ArrayD::from_shape_vec(
            shape,
            self.merged
                .index
                .iter()
                .map(|&v| IntOf::<B>::from_i64(v))
                .collect(),
        )
        .map_err(bad)?;
        let nrot = self.job.rotations.len();
        let voxels: usize = self.shape.iter().product();
        let (ssum_parts, sum, tiles) = self.ssum;
        let r = MatchResult {
            scores: b.upload_owned(s)?,
            rotation_index: b.upload_owned(i)?,
            rotations: self.job.rotations.clone(),
            n_rotations: nrot,
            ssum: sum / (voxels as f64 * nrot as f64),
            ssum_parts,
            tiles,
            background_shift: None,
            background: match self.merged.background {
                Some((map, count)) => {
                    let g =
                        background_grid(&self.shape, self.job.template.shape(), self.job.pad_edges)
                            .0;
                    let map = ArrayD::from_shape_vec(
                        IxDyn(&g),
                        map.into_iter().map(FloatOf::<B>::from_f64).collect(),
                    )
                    .map_err(bad)?;
                    Some(BackgroundScores {
                        map: b.upload_owned(map)?,
                        count,
                    })
                }
                None => None,
            },
            moments: match self.merged.moments {
                Some((words, scale)) => {
                    let mut mshape = self.shape.clone();
                    mshape.push(4);
                    let a = ArrayD::from_shape_vec(IxDyn(&mshape), words).map_err(bad)?;
                    Some(monomorph::algo::matching::ScoreMoments {
                        acc: b.upload_owned(a)?,
                        scale,
                    })
                }
                None => None,
            },
        };
        let mut r = r;
        r.apply_background(b)?;
        self.job.finish(b, r, self.match_s)
    }
}

/// Host maps of a backend's range result.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn host_part<B: Backend>(
    start: usize,
    len: usize,
    scores: &ArrayD<FloatOf<B>>,
    index: &ArrayD<IntOf<B>>,
    ssum_parts: Vec<f64>,
    moments: Option<(&ArrayD<i64>, [f64; 2])>,
    background: Option<(&ArrayD<FloatOf<B>>, f64)>,
) -> HostPart {
    HostPart {
        start,
        len,
        scores: scores.iter().map(|v| v.as_f64()).collect(),
        index: index
            .iter()
            .map(|v| v.to_usize().map_or(-1, |u| u as i64))
            .collect(),
        ssum_parts,
        moments: moments.map(|(a, sc)| (a.iter().copied().collect(), sc)),
        background: background.map(|(a, c)| (a.iter().map(|v| v.as_f64()).collect(), c)),
    }
}

/// Which rank ran which part of a target, and for how long (list.json).
#[derive(Debug, Clone, Serialize)]
pub struct Ran {
    /// The rank (0 without MPI).
    pub rank: i32,
    /// First and one-past-last rotation.
    pub rotations: [usize; 2],
    /// Wall seconds of the item on that rank.
    pub seconds: f64,
}

/// Writes OUT/particles.star (with `--peaks`) and OUT/list.json (last).
pub fn write_summary(
    a: &MatchArgs,
    list: &Path,
    entries: &[Entry],
    done: &[TargetDone],
    ran: &[Vec<Ran>],
    ranks: usize,
    wall_s: f64,
    quiet: bool,
) -> CliResult<()> {
    let mut out = Outputs::in_dir("--out", &a.out)?;
    let star = a.list.peaks.then(|| a.out.join("particles.star"));
    if star.is_some() {
        let groups: Vec<MicrographPeaks<'_>> = Vec::new();
        let rows: Vec<Vec<PeakRow>> = done
            .iter()
            .map(|d| d.rows.iter().map(PeakRow::from).collect())
            .collect();
        let mut groups = groups;
        for ((e, d), r) in entries.iter().zip(done).zip(&rows) {
            groups.push(MicrographPeaks {
                name: Some(e.given.as_str()),
                rows: r,
                pixel_size: d.pixel.map(f64::from_bits),
            });
        }
        let ndim = done.first().map_or(3, |d| d.ndim);
        let comments = vec![
            format!(
                "peaks of the {} targets of {} (monomorph match --target-list --peaks)",
                entries.len(),
                list.display()
            ),
            "angles: RELION's (rot, tilt, psi) in degrees, Rz(rot)Ry(tilt)Rz(psi) acting on (x, y, z)"
                .into(),
        ];
        let text = peaks_star_many(&groups, ndim, &comments);
        out.stage("particles.star", |p| {
            std::fs::write(p, text)
                .map_err(|e| monomorph::io::io_err(p, format!("cannot write: {e}")))
        })?;
    }
    let targets: Vec<serde_json::Value> = entries
        .iter()
        .zip(done)
        .zip(ran)
        .map(|((e, d), r)| {
            json!({
                "target": e.given, "path": path_json(&e.path), "folder": e.name, "line": e.line,
                "peaks": a.list.peaks.then_some(d.rows.len()), "ran": r,
            })
        })
        .collect();
    let info = json!({
        "monomorph_version": env!("CARGO_PKG_VERSION"),
        "target_list": path_json(list),
        "ranks": ranks,
        "wall_s": wall_s,
        "peaks_file": star.as_ref().map(|_| "particles.star"),
        "targets": targets,
    });
    out.json("list.json", &info)?;
    out.commit()?;
    if !quiet {
        note!(
            "matched {} targets{}; wrote {}",
            entries.len(),
            if ranks > 1 {
                format!(" on {ranks} ranks")
            } else {
                String::new()
            },
            a.out.display()
        );
    }
    Ok(())
}

/// Removes the output folder `out` after a failed run when the run created it and it is empty
/// (each target's own folder is removed by its outputs; targets finished before stay).
pub fn remove_if_new(out: &Path, existed: bool) {
    if !existed {
        let _ = std::fs::remove_dir(out);
    }
}

/// Runs `monomorph match --target-list`.
pub fn run(g: &Global, a: &MatchArgs) -> CliResult<()> {
    #[cfg(feature = "mpi")]
    if let Some(world) = super::ranks::world() {
        return super::list_mpi::run(&world, g, a);
    }
    let t0 = Instant::now();
    let list = a.list.target_list.clone().unwrap_or_default();
    let entries = read_list(&list)?;
    let q = peak_query(&a.list)?;
    check_out_dir("--out", &a.out)?;
    let infos = entries
        .iter()
        .map(|e| precheck(g, a, &list, e, q.as_ref()))
        .collect::<CliResult<Vec<Info>>>()?;
    let existed = a.out.exists();
    let total: u64 = infos.iter().map(|i| i.nrot).sum();
    let pb = progress(total, "rotations", g.quiet);
    let quiet = Global {
        quiet: true,
        ..g.clone()
    };
    let mut done = Vec::with_capacity(entries.len());
    let mut ran = Vec::with_capacity(entries.len());
    let mut before = 0u64;
    for (e, info) in entries.iter().zip(&infos) {
        let watch = Watch::default();
        let nrot = info.nrot;
        let cb = |d: usize, t: usize| {
            pb.set_position(before + d as u64 * nrot / t.max(1) as u64);
            watch.poll(d)
        };
        let t1 = Instant::now();
        let d = run_whole(&quiet, a, &list, e, q.as_ref(), &cb, &watch);
        done.push(d.inspect_err(|_| remove_if_new(&a.out, existed))?);
        ran.push(vec![Ran {
            rank: 0,
            rotations: [0, nrot as usize],
            seconds: t1.elapsed().as_secs_f64(),
        }]);
        before += nrot;
    }
    pb.finish_and_clear();
    let wall = t0.elapsed().as_secs_f64();
    write_summary(a, &list, &entries, &done, &ran, 1, wall, g.quiet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stems_made_unique_in_list_order() {
        let p = |s: &str| PathBuf::from(s);
        let names = unique_names(&[
            p("a/tomo.mrc"),
            p("b/tomo.mrc.gz"),
            p("c/tomo-2.npy"),
            p("d/x.rec"),
            p("e/tomo.map"),
        ]);
        assert_eq!(names, ["tomo", "tomo-3", "tomo-2", "x", "tomo-4"]);
    }

    /// The rule of [`unique_names`], spelled out the slow way.
    fn unique_names_slowly(paths: &[PathBuf]) -> Vec<String> {
        let stems: Vec<String> = paths.iter().map(|p| stem(p)).collect();
        let mut taken: Vec<String> = vec!["particles.star".into(), "list.json".into()];
        let mut out = Vec::new();
        for (i, s) in stems.iter().enumerate() {
            let mut name = s.clone();
            let mut k = 2;
            while taken.contains(&name) || (name != *s && stems[i + 1..].contains(&name)) {
                name = format!("{s}-{k}");
                k += 1;
            }
            taken.push(name.clone());
            out.push(name);
        }
        out
    }

    #[test]
    fn unique_names_follow_the_rule_on_tricky_lists() {
        let stems = [
            "tomo",
            "tomo-2",
            "tomo-3",
            "x",
            "tomo-2-2",
            "particles",
            "list",
        ];
        let mut state = 7u64;
        for n in [1usize, 2, 5, 9, 20, 40] {
            for _ in 0..50 {
                let paths: Vec<PathBuf> = (0..n)
                    .map(|i| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let s = stems[(state >> 33) as usize % stems.len()];
                        let ext = if (state >> 20) % 2 == 0 {
                            "mrc"
                        } else {
                            "star"
                        };
                        PathBuf::from(format!("d{i}/{s}.{ext}"))
                    })
                    .collect();
                assert_eq!(
                    unique_names(&paths),
                    unique_names_slowly(&paths),
                    "{paths:?}"
                );
            }
        }
        // Many equal stems: linear, and as before.
        let many: Vec<PathBuf> = (0..20_000)
            .map(|i| PathBuf::from(format!("d{i}/t.mrc")))
            .collect();
        let names = unique_names(&many);
        assert_eq!(names[0], "t");
        assert_eq!(names[19_999], "t-20000");
    }

    #[test]
    fn star_lists_take_the_path_column_once_per_value() {
        let text = "data_optics\nloop_\n_rlnOpticsGroup #1\n1\n\ndata_micrographs\nloop_\n\
                    _rlnTomoName #1\n_rlnMicrographName #2\nTS_1 a.mrc\nTS_2 \"b c.mrc\"\nTS_1 a.mrc\n";
        let v = star_paths(text).unwrap();
        assert_eq!(
            v,
            vec![(10, "a.mrc".to_string()), (11, "b c.mrc".to_string())]
        );
        let e = star_paths("data_\nloop_\n_rlnTomoName #1\nTS_1\n").unwrap_err();
        assert!(e.contains("_rlnTomoName"), "{e}");
        // RELION's quoting: quotes inside a quoted path, `#` inside a value.
        let text = "data_\nloop_\n_rlnMicrographName #1\n\"my \"dir\"/t.mrc\"\na#b.mrc\n";
        let v = star_paths(text).unwrap();
        assert_eq!(
            v,
            vec![
                (4, "my \"dir\"/t.mrc".to_string()),
                (5, "a#b.mrc".to_string())
            ]
        );
    }

    #[test]
    fn merging_parts_in_any_order_keeps_the_first_best_rotation() {
        let part = |start, scores: Vec<f64>, index: Vec<i64>| HostPart {
            start,
            len: 2,
            scores,
            index,
            ssum_parts: vec![start as f64, start as f64 + 1.0],
            moments: Some((
                vec![start as i64, -1, -1, 0, -5, -1, 0, 1, 1, 0, 0, 0],
                [1.0; 2],
            )),
            background: None,
        };
        // Voxel 0: equal 1.0 at rotations 1 and 2 (1 wins); voxel 1: -0 at 0, +0 at 3 (0 wins);
        // voxel 2: none in the first part.
        let a = part(0, vec![1.0, -0.0, f64::MIN], vec![1, 0, -1]);
        let b = part(2, vec![1.0, 0.0, 0.5], vec![2, 3, 3]);
        for parts in [vec![a.clone(), b.clone()], vec![b, a]] {
            let (m, (ordered, sum, tiles)) = merge_parts(parts, 4).unwrap();
            assert_eq!(m.index, [1, 0, 3]);
            assert_eq!(m.scores[1].to_bits(), (-0.0f64).to_bits());
            assert_eq!((ordered, sum, tiles), (vec![0.0, 1.0, 2.0, 3.0], 6.0, 1));
            // The moments add as 128-bit integers ([low, high] words; carries included).
            let (m, _) = m.moments.unwrap();
            assert_eq!(m, [2, -2, -2, 1, -10, -1, 0, 2, 2, 0, 0, 0]);
        }
    }
}
