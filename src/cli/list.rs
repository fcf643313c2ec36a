//! `monomorph match --target-list`: many targets in one job, one output folder per target.
//!
//! The list is read and every target is checked (read, shape against the template, the flags'
//! checks) before any matching, so a bad file stops the job with exit 2 before any work. Then
//! each target runs exactly as `monomorph match --target T --out OUT/NAME` with the same flags
//! would (the same files, byte for byte), and with `--peaks` its peaks are called as
//! `monomorph peaks` would call them on those files and gathered into one STAR file,
//! `OUT/particles.star`, one `_rlnMicrographName` per row. `OUT/list.json` (written last) says
//! which folder holds which target and how the work was spread. This file knows the list and
//! its outputs; where the targets run is chosen in `run.rs` (and `list_mpi.rs` over ranks).

use std::path::{Path, PathBuf};

use monomorph::io::{MicrographPeaks, PeakRow, peaks_star_many};
use monomorph::work::JobSize;
use monomorph::{Backend, BackendTask, FloatOf, Real};
use ndarray::ArrayD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::{CliError, CliResult};
use super::global::Global;
use super::matched::{Matched, write};
use super::matching::{ListArgs, MatchArgs, Prepared, prepare};
use super::output::{Outputs, path_json};
use super::peaks::{PeakQuery, RunStats};
use super::project::StarFormat;
use monomorph::io::relion5::ParticleGeometry;

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
    /// Its `_rlnTomoName` when the list is a RELION 5 tomograms.star read with each
    /// tomogram's own metadata.
    pub tomo_name: Option<String>,
}

/// The columns of a STAR list that hold target paths, in order of preference.
pub const STAR_COLUMNS: [&str; 2] = ["_rlnTomoReconstructedTomogram", "_rlnMicrographName"];

/// Reads `--target-list`: its entries with resolved paths and unique folder names. With
/// `metadata`, a RELION 5 tomograms.star lists its rows, each with its `_rlnTomoName`.
pub fn read_list(list: &Path, metadata: bool) -> CliResult<Vec<Entry>> {
    let err = |m: String| CliError::input(format!("--target-list {}: {m}", list.display()));
    let text = match super::session::document(list) {
        Some(text) => text,
        None => monomorph::io::read_text_file(list).map_err(|e| err(io_message(e)))?,
    };
    let star = list
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("star"));
    let mut names: Vec<String> = Vec::new();
    let given = if star && metadata {
        match relion5_rows(list, &text).map_err(err)? {
            Some(rows) => {
                let (paths, n): (Vec<_>, Vec<_>) = rows
                    .into_iter()
                    .map(|(line, path, name)| ((line, path), name))
                    .unzip();
                names = n;
                Ok(paths)
            }
            None => star_paths(&text),
        }
    } else if star {
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
            tomo_name: names.get(entries.len()).cloned(),
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

/// The rows of a RELION 5 tomograms.star (`None` when `text` is not one): (line, the row's
/// tomogram map, `_rlnTomoName`); a row without a map (half maps only) is an error naming it.
fn relion5_rows(list: &Path, text: &str) -> Result<Option<Vec<(usize, String, String)>>, String> {
    let blocks = monomorph::io::star::parse_star(list, text).map_err(io_message)?;
    if !monomorph::io::relion5::is_tomogram_set(&blocks) {
        return Ok(None);
    }
    let set = monomorph::io::relion5::parse_tomogram_set(list, text).map_err(io_message)?;
    let mut out = Vec::new();
    for name in set.names() {
        let t = set.tomogram(name).map_err(io_message)?;
        let Some(map) = t.map else {
            return Err(format!(
                "line {} ({name}): no _rlnTomoReconstructedTomogram or                  _rlnTomoReconstructedTomogramDenoised{}, expected a tomogram per row",
                t.line,
                if t.halves_only {
                    " (half maps only)"
                } else {
                    ""
                }
            ));
        };
        out.push((t.line, map, t.name));
    }
    Ok(Some(out))
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
    if let Some(name) = &e.tomo_name {
        t.metadata.relion5_tomograms_star = a.list.target_list.clone();
        t.metadata.tomo_name = Some(name.clone());
    }
    t.list = ListArgs::default();
    t
}

/// An error about entry `e` of the list, naming the list and the line.
pub fn in_list(err: CliError, list: &Path, e: &Entry) -> CliError {
    let what = match &e.tomo_name {
        Some(n) => format!("tomogram {n}: {}", e.given),
        None => e.given.clone(),
    };
    err.about(format!(
        "--target-list {} line {} ({what})",
        list.display(),
        e.line,
    ))
}

/// The peak query of `--peaks` (checked as `monomorph peaks` checks its flags).
pub fn peak_query(a: &ListArgs) -> CliResult<Option<PeakQuery>> {
    if !a.peaks {
        return Ok(None);
    }
    let f = &a.query;
    PeakQuery {
        min_distance: f.min_distance,
        threshold_abs: f.threshold_abs,
        threshold_rel: f.threshold_rel,
        exclude_border: f.exclude_border,
        num_peaks: f.num_peaks,
        false_positives: f.false_positives,
        caller: f.caller,
        run_stats: None,
        max_score: f.max_score,
        oversampling: f.peak_oversampling,
    }
    .checked()
    .map(Some)
}

/// Reads and checks entry `e` as its single run would, and the `--peaks` flags against it;
/// creates nothing.
pub fn precheck(
    g: &Global,
    a: &MatchArgs,
    list: &Path,
    e: &Entry,
    q: Option<&PeakQuery>,
) -> CliResult<JobSize> {
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
    if q.is_some() && a.list.star_format == Some(StarFormat::Relion5) {
        // The particle file's geometry, checked before any work.
        super::project::geometry_of(
            p.metadata.as_ref(),
            &e.name,
            &p.tshape,
            pixel_of(p.voxel_size),
            &p.filters_json,
        )
        .map_err(|err| in_list(err, list, e))?;
    }
    Ok(JobSize {
        voxels,
        rotations: p.n_rot as u64,
    })
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
    #[serde(default)]
    template: Option<usize>,
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
            template: r.template,
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
            template: r.template,
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
    /// Its RELION 5 particle geometry (`--star-format relion5`).
    #[serde(default)]
    pub geometry: Option<ParticleGeometry>,
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
    let mut rows = monomorph::dispatch(g.dispatch(None), task)?;
    if let Some(t) = &m.template_index {
        super::peaks::attach_templates(&mut rows, t.view());
    }
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
    star_format: StarFormat,
) -> CliResult<TargetDone> {
    let ndim = p.tshape.len();
    let rows = match q {
        Some(q) => call_peaks(g, &m, p.n_rot, q)?,
        None => Vec::new(),
    };
    let pixel = pixel_of(p.voxel_size).map(f64::to_bits);
    let geometry = if star_format == StarFormat::Relion5 {
        let name = ta
            .out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Some(super::project::geometry_of(
            p.metadata.as_ref(),
            &name,
            &p.tshape,
            pixel_of(p.voxel_size),
            &p.filters_json,
        )?)
    } else {
        None
    };
    write(ta, p, out, m)?;
    Ok(TargetDone {
        rows,
        pixel,
        ndim,
        geometry,
    })
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
        let text = match a.list.star_format.unwrap_or_default() {
            StarFormat::Relion4 => peaks_star_many(&groups, ndim, &comments),
            StarFormat::Relion5 => {
                let centre = a.list.relion5_centre.unwrap_or_default().centre();
                let mut sets = Vec::with_capacity(done.len());
                for (e, (d, r)) in entries.iter().zip(done.iter().zip(&rows)) {
                    let geo = d.geometry.clone().ok_or_else(|| {
                        CliError::failure(format!("{}: no RELION 5 geometry", e.given))
                    })?;
                    sets.push((geo, super::project::particles_of(r)?));
                }
                let mut comments = comments;
                comments.extend(super::project::rule_comments(&sets, centre));
                let refs: Vec<_> = sets.iter().map(|(g, p)| (g, p.as_slice())).collect();
                monomorph::io::relion5::particles_star(&refs, centre, &comments)
            }
        };
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
                        let ext = if (state >> 20).is_multiple_of(2) {
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
}
