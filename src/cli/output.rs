//! Shared helpers of the subcommands: reading inputs, checking and writing outputs all or
//! nothing ([`Outputs`]), `run.json`, printing to stdout ([`say`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use monomorph::error::fmt_bytes;
use monomorph::io::{HostArray, Volume, read_array};
use serde_json::{Value, json};

use super::error::{CliError, CliResult};
use super::global::Global;

/// Reads a `.npy` or MRC input named by flag `flag`, checking that it is `dims`-D (any of) and
/// holds only finite values.
pub fn read_input(flag: &str, path: &Path, dims: &[usize]) -> CliResult<Volume> {
    let v = read_array_input(flag, path)?;
    let shape = v.data.shape();
    if !dims.contains(&shape.len()) {
        let want = dims
            .iter()
            .map(|d| format!("{d}-D"))
            .collect::<Vec<_>>()
            .join(" or ");
        return Err(CliError::input(format!(
            "{flag} {}: a {}-D array of shape {:?}, expected {want}",
            path.display(),
            shape.len(),
            shape
        )));
    }
    if shape.contains(&0) {
        return Err(CliError::input(format!(
            "{flag} {}: empty array of shape {shape:?}, expected data",
            path.display()
        )));
    }
    let bad = v.data.count_nonfinite();
    if bad > 0 {
        return Err(CliError::input(format!(
            "{flag} {}: {bad} NaN or infinite value(s), expected finite values",
            path.display()
        )));
    }
    Ok(v)
}

/// Reads a `.npy` or MRC input named by flag `flag` without checks beyond the format (or the
/// array an embedding program gave for the flag: [`super::session::ARRAY`]).
pub fn read_array_input(flag: &str, path: &Path) -> CliResult<Volume> {
    match super::session::take_array(flag, path) {
        Some(v) => v,
        None => read_array(path).map_err(|e| CliError::from(e).about(flag)),
    }
}

/// Reads a `.npy` without checks beyond the format (or the array an embedding program gave
/// for the flag).
pub fn read_npy_input(flag: &str, path: &Path) -> CliResult<HostArray> {
    match super::session::take_array(flag, path) {
        Some(v) => v.map(|v| v.data),
        None => monomorph::io::read_npy(path).map_err(|e| CliError::from(e).about(flag)),
    }
}

/// Reads the Euler angles CSV of `--euler` (or the text an embedding program gave for it: a
/// path under [`super::session::ARRAY`]), parsed by the same code.
pub fn read_euler_input(path: &Path) -> monomorph::Result<Vec<[f64; 3]>> {
    match super::session::document(path) {
        Some(text) => {
            monomorph::io::parse_euler_csv(&text).map_err(|m| monomorph::io::io_err(path, m))
        }
        None => monomorph::io::read_euler_csv(path),
    }
}

/// Peak resident memory of this process in bytes (VmHWM), when the OS reports it.
pub fn peak_memory_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Named wall-clock timings.
#[derive(Debug, Default)]
pub struct Timings {
    items: Vec<(String, f64)>,
}

impl Timings {
    /// Runs `f` and records its wall time under `name`.
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.items
            .push((name.to_string(), t.elapsed().as_secs_f64()));
        r
    }
    /// Records `seconds` measured elsewhere under `name`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn record(&mut self, name: &str, seconds: f64) {
        self.items.push((name.to_string(), seconds));
    }
    /// As a JSON object of seconds.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (n, s) in &self.items {
            m.insert(format!("{n}_s"), json!(s));
        }
        Value::Object(m)
    }
}

/// The common part of `run.json`: versions, backend, precision, machine.
pub fn run_info(g: &Global, backend_name: &str, device: &str) -> Value {
    json!({
        "monomorph_version": env!("CARGO_PKG_VERSION"),
        "command": super::session::argv().unwrap_or_else(|| std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()),
        "backend": backend_name,
        "device": device,
        "precision": format!("{:?}", g.precision).to_lowercase(),
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "features": {
            "cpu": cfg!(feature = "cpu"),
            "cuda": cfg!(feature = "cuda"),
        },
    })
}

/// Parses a byte count with an optional K/M/G/T unit (powers of 1024): the library's
/// [`super::args::parse_bytes`].
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    super::args::parse_bytes(s)
}

/// `v` as `f64` (monomorph's `Real::as_f64`).
pub fn f64_of<T: monomorph::Real>(v: T) -> f64 {
    v.as_f64()
}

/// Output files written all or nothing.
///
/// Each file is first written under a temporary name beside its destination (the name with
/// `.tmp-<pid>` before its extensions, hidden with a leading dot, so `particles.star` is
/// staged as `.particles.tmp-<pid>.star` and format choices by extension still hold). Nothing
/// gets its final name until [`Outputs::commit`], which renames the files in the order they
/// were staged, the last one (the run's `run.json`) last. Dropping an uncommitted `Outputs`
/// (an error, a failed write) removes the temporary files and every folder it created, so a
/// failed run leaves no empty `--out` folder, no 0-byte file and no valid-looking
/// `scores.npy` beside a truncated `rotation_index.npy`. A killed process leaves at most
/// hidden `.tmp-` files, never a final name.
#[derive(Debug)]
pub struct Outputs {
    /// The output folder (`in_dir`) and its flag.
    dir: Option<(String, PathBuf)>,
    /// Folders this created, outermost first.
    created: Vec<PathBuf>,
    /// Staged files: flag, temporary path, destination.
    staged: Vec<(String, PathBuf, PathBuf)>,
    committed: bool,
    /// Embedded with `--out (array)`: no file is written; the arrays and documents go to the
    /// session ([`super::session::hand_over`], [`Outputs::json`]).
    memory: bool,
}

impl Outputs {
    /// Outputs written to files in existing folders (no output folder).
    pub fn files() -> Self {
        Outputs {
            dir: None,
            created: Vec::new(),
            staged: Vec::new(),
            committed: false,
            memory: false,
        }
    }

    /// Outputs in folder `dir` (named by `flag`), created with its missing parents now.
    /// Call it after the inputs are validated: an input error must create nothing.
    pub fn in_dir(flag: &str, dir: &Path) -> CliResult<Self> {
        if super::session::in_memory(dir) {
            let mut out = Outputs::files();
            out.dir = Some((flag.to_string(), dir.to_path_buf()));
            out.memory = true;
            return Ok(out);
        }
        check_out_dir(flag, dir)?;
        let mut missing = Vec::new();
        let mut p = Some(dir);
        while let Some(q) = p.filter(|q| !q.as_os_str().is_empty() && !q.exists()) {
            missing.push(q.to_path_buf());
            p = q.parent();
        }
        missing.reverse();
        let mut out = Outputs::files();
        out.dir = Some((flag.to_string(), dir.to_path_buf()));
        for d in missing {
            match std::fs::create_dir(&d) {
                Ok(()) => out.created.push(d),
                // Another process (an MPI rank writing its own target into the same list
                // folder) made it in between: use it, and leave it alone on failure.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => {
                    return Err(CliError::input(format!(
                        "{flag} {}: cannot create the folder {}: {e}, expected a writable folder",
                        dir.display(),
                        d.display()
                    )));
                }
            }
        }
        probe_writable(flag, dir, dir)?;
        Ok(out)
    }

    /// Whether the outputs go to the embedding program only (no file is written).
    pub fn in_memory(&self) -> bool {
        self.memory
    }

    /// Writes output `name` (a file name inside the output folder of [`Outputs::in_dir`]) with
    /// `write`, which gets the temporary path to write to.
    pub fn stage(
        &mut self,
        name: &str,
        write: impl FnOnce(&Path) -> monomorph::Result<()>,
    ) -> CliResult<()> {
        let Some((flag, dir)) = self.dir.clone() else {
            return Err(CliError::failure(format!(
                "internal error: output {name} staged without an output folder"
            )));
        };
        self.stage_file(&flag, &dir.join(name), write)
    }

    /// Writes the file `dest` (named by `flag`) with `write`, which gets the temporary path to
    /// write to. A failed write is exit code 1, naming the destination and the OS error.
    pub fn stage_file(
        &mut self,
        flag: &str,
        dest: &Path,
        write: impl FnOnce(&Path) -> monomorph::Result<()>,
    ) -> CliResult<()> {
        let failed = |e: monomorph::Error| {
            let why = match e {
                monomorph::Error::Io { message, .. } => message,
                other => other.to_string(),
            };
            CliError::failure(format!("{flag} {}: {why}", dest.display()))
        };
        if self.memory || super::session::in_memory(dest) {
            // Embedded without a file: the session gets the values instead.
            return Ok(());
        }
        let Some(real) = renamable(dest) else {
            // A device or a pipe (`/dev/null`, `/dev/stdout`): written in place, never
            // replaced by a rename.
            return write(dest).map_err(failed);
        };
        let tmp = temp_name(&real);
        // Record first: a half-written temporary file is removed on drop.
        self.staged.push((flag.to_string(), tmp.clone(), real));
        write(&tmp).map_err(|e| {
            let why = match e {
                monomorph::Error::Io { message, .. } => message,
                other => other.to_string(),
            };
            CliError::failure(format!("{flag} {}: {why}", dest.display()))
        })
    }

    /// Writes pretty JSON to output `name` of the output folder. Embedded, the document is
    /// also handed to the session under the file's stem (`run` for run.json).
    pub fn json(&mut self, name: &str, v: &Value) -> CliResult<()> {
        let stem = name.strip_suffix(".json").unwrap_or(name);
        super::session::emit(stem, || v.clone());
        if self.memory {
            return Ok(());
        }
        let text = serde_json::to_string_pretty(v).map_err(|e| CliError::failure(e.to_string()))?;
        self.stage(name, |p| {
            std::fs::write(p, text + "\n")
                .map_err(|e| monomorph::io::io_err(p, format!("cannot write: {e}")))
        })
    }

    /// Gives every staged file its final name, in staging order. An existing destination of
    /// the last file (the marker of a complete run, `run.json`) is removed before the first
    /// rename, so an old marker never describes a half-replaced set; when a rename fails the
    /// files already renamed are removed again. Failure is exit code 1.
    pub fn commit(mut self) -> CliResult<()> {
        if self.memory {
            self.committed = true;
            return Ok(());
        }
        for (flag, _, dest) in &self.staged {
            if dest.is_dir() {
                return Err(CliError::failure(format!(
                    "{flag} {}: a folder of that name is in the way, expected a file path",
                    dest.display()
                )));
            }
        }
        self.commit_renames()
    }

    /// The renames of [`Outputs::commit`], after its checks. They run under an exclusive lock
    /// on the destination folders, so two runs writing the same `--out` at once commit one
    /// after the other and the folder holds one run's complete set, never one run's
    /// `scores.npy` beside the other's `run.json`.
    fn commit_renames(&mut self) -> CliResult<()> {
        let _lock = DirLocks::take(self.staged.iter().map(|(_, _, d)| d.clone())).map_err(|e| {
            let (flag, _, dest) = &self.staged[0];
            CliError::failure(format!(
                "{flag} {}: cannot lock its folder for the final renames: {e}",
                dest.display()
            ))
        })?;
        if self.staged.len() > 1
            && let Some((flag, _, dest)) = self.staged.last()
            && dest.exists()
        {
            std::fs::remove_file(dest).map_err(|e| {
                CliError::failure(format!(
                    "{flag} {}: cannot replace the old file: {e}",
                    dest.display()
                ))
            })?;
        }
        for k in 0..self.staged.len() {
            let (flag, tmp, dest) = &self.staged[k];
            if let Err(e) = std::fs::rename(tmp, dest) {
                let msg = format!("{flag} {}: cannot write: {e}", dest.display());
                for (_, _, done) in &self.staged[..k] {
                    let _ = std::fs::remove_file(done);
                }
                return Err(CliError::failure(msg));
            }
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for (_, tmp, _) in &self.staged {
            let _ = std::fs::remove_file(tmp);
        }
        // Only empty folders go (remove_dir refuses others): never a user's file.
        for d in self.created.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The path an output `dest` is renamed onto: `dest` itself, or the file a symbolic link
/// points to (the link stays a link); `None` when `dest` is not a regular file or a new one
/// (a device, a pipe, a dangling link), which must be written in place.
fn renamable(dest: &Path) -> Option<PathBuf> {
    match std::fs::symlink_metadata(dest) {
        Err(_) => Some(dest.to_path_buf()),
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(dest) {
            Ok(t) if t.is_file() => Some(t),
            _ => None,
        },
        Ok(m) if m.is_file() => Some(dest.to_path_buf()),
        Ok(_) => None,
    }
}

/// The temporary name of output `dest`: `.NAME.tmp-<pid>-<n>.EXT` beside it (the extensions
/// kept so that writers choosing a format by extension still see it; `n` counts the names
/// made by this process, so two output sets of one process never share one). The name is cut
/// at the first `.` after its first character, whatever that character's width (`é.csv`).
fn temp_name(dest: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    let name = dest.file_name().unwrap_or_default();
    let tmp = match name.to_str() {
        Some(s) => {
            let first = s.chars().next().map_or(0, char::len_utf8);
            let cut = s[first..].find('.').map_or(s.len(), |i| i + first);
            format!(".{}.tmp-{pid}-{n}{}", &s[..cut], &s[cut..])
        }
        None => {
            let ext = dest
                .extension()
                .map(|e| format!(".{}", e.to_string_lossy()))
                .unwrap_or_default();
            format!(".monomorph.tmp-{pid}-{n}{ext}")
        }
    };
    dest.with_file_name(tmp)
}

/// Holds an exclusive `flock` on each of `dirs` (sorted, so two processes never wait on each
/// other crosswise) until dropped. The OS releases it when the process ends, however it ends,
/// and it creates no file: nothing is left behind.
struct DirLocks {
    _held: Vec<std::fs::File>,
}

impl DirLocks {
    fn take(dests: impl Iterator<Item = PathBuf>) -> std::io::Result<Self> {
        let mut dirs: Vec<PathBuf> = dests
            .map(|d| {
                let parent = d
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .to_path_buf();
                std::fs::canonicalize(&parent).unwrap_or(parent)
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        let mut held = Vec::with_capacity(dirs.len());
        for d in dirs {
            let f = std::fs::File::open(&d)?;
            f.lock()?;
            held.push(f);
        }
        Ok(DirLocks { _held: held })
    }
}

/// Creates and removes a probe file in `dir`: an unwritable folder is an input error now
/// rather than a failed write after the computation.
fn probe_writable(flag: &str, shown: &Path, dir: &Path) -> CliResult<()> {
    let probe = dir.join(format!(".monomorph-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        CliError::input(format!(
            "{flag} {}: cannot write in {}: {e}, expected a writable folder",
            shown.display(),
            dir.display()
        ))
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Checks, creating nothing, that `dir` can be the output folder: it is a folder, or the
/// nearest existing folder above it is one.
pub fn check_out_dir(flag: &str, dir: &Path) -> CliResult<()> {
    if super::session::in_memory(dir) {
        return Ok(());
    }
    if dir.as_os_str().is_empty() {
        return Err(CliError::input(format!(
            "{flag} '': expected a folder path"
        )));
    }
    let mut p = dir;
    loop {
        if p.exists() {
            if !p.is_dir() {
                return Err(CliError::input(format!(
                    "{flag} {}: {} is not a folder, expected a folder path",
                    dir.display(),
                    p.display()
                )));
            }
            return Ok(());
        }
        match p.parent() {
            Some(q) if !q.as_os_str().is_empty() => p = q,
            _ => return Ok(()),
        }
    }
}

/// Checks, creating nothing, that a file can be written at `path`: not a folder, in an existing,
/// writable folder.
pub fn check_out_file(flag: &str, path: &Path) -> CliResult<()> {
    if super::session::in_memory(path) {
        return Ok(());
    }
    if path.as_os_str().is_empty() {
        return Err(CliError::input(format!("{flag} '': expected a file path")));
    }
    if path.is_dir() {
        return Err(CliError::input(format!(
            "{flag} {}: is a folder, expected a file path",
            path.display()
        )));
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(CliError::input(format!(
            "{flag} {}: the folder {} does not exist, expected a path in an existing folder",
            path.display(),
            parent.display()
        )));
    }
    match renamable(path) {
        Some(real) => {
            let dir = real
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            probe_writable(flag, path, dir)
        }
        // A device or a pipe: opened for writing when the output is written.
        None => Ok(()),
    }
}

/// Rejects an output that would replace one of the inputs (or another output): each of
/// `outputs` (flag, path) must differ from every file of `inputs` (flag, path).
pub fn check_distinct(outputs: &[(&str, PathBuf)], inputs: &[(&str, &Path)]) -> CliResult<()> {
    for (i, (oflag, o)) in outputs.iter().enumerate() {
        if super::session::in_memory(o) {
            // Handed to the embedding program: no file to overwrite.
            continue;
        }
        let others = inputs
            .iter()
            .map(|(f, p)| (*f, *p))
            .chain(outputs[..i].iter().map(|(f, p)| (*f, p.as_path())));
        for (iflag, p) in others {
            if same_file(o, p) {
                return Err(CliError::input(format!(
                    "{oflag} {}: would overwrite {iflag} {}, expected a different path",
                    o.display(),
                    p.display()
                )));
            }
        }
    }
    Ok(())
}

/// `true` when `a` and `b` name the same file (the same inode, or the same path when neither
/// exists yet).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            // Devices (`/dev/null` twice) are no files to overwrite.
            return x.is_file() && x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    let norm = |p: &Path| {
        let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        abs.components().collect::<PathBuf>()
    };
    norm(a) == norm(b)
}

/// Set once a print to stdout met a closed pipe: the rest of the run prints nothing.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints `args` and a newline on stdout (use the `say!` macro).
///
/// A reader that went away (`monomorph devices | head -1`: EPIPE) is not an error: printing
/// stops quietly for the rest of the run, the command still finishes its work (outputs are
/// written) and exits with the status it would have had, 0 on success, as `| head` expects.
/// Any other failure to write (`> /dev/full`: ENOSPC) is exit code 1 with one line naming
/// stdout.
pub fn say(args: std::fmt::Arguments<'_>) -> CliResult<()> {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{args}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(CliError::failure(format!("stdout: cannot write: {e}"))),
    }
}

/// A path for `run.json`: its text, with any bytes that are not UTF-8 replaced (a file name need
/// not be UTF-8 on Linux; JSON text must be).
pub fn path_json(p: &Path) -> Value {
    Value::String(p.to_string_lossy().into_owned())
}

/// [`path_json`] of an optional path (`null` when absent).
pub fn opt_path_json(p: &Option<PathBuf>) -> Value {
    p.as_deref().map_or(Value::Null, path_json)
}

/// Memory the OS can give this process now, when it says: Linux `MemAvailable`, and no more
/// than the address space a limit (`ulimit -v`, `RLIMIT_AS`) leaves beside what the process
/// already maps.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let avail = kb.saturating_mul(1024);
    Some(match address_space_left() {
        Some(left) => avail.min(left),
        None => avail,
    })
}

/// The address space this process may still map under its limit (`RLIMIT_AS` minus
/// `VmSize`), `None` when unlimited or unknown.
fn address_space_left() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    // "Max address space  <soft> <hard> bytes"
    let soft: u64 = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let vm = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kb: u64 = vm.split_whitespace().nth(1)?.parse().ok()?;
    Some(soft.saturating_sub(kb.saturating_mul(1024)))
}

/// Checks, before allocating, that `need` bytes fit in the available memory; else an input
/// error naming `flag` (with the value the user typed), the bytes needed and those available.
/// `None` (overflow) means more than any machine has.
pub fn check_memory(flag: &str, value: &str, need: Option<u128>) -> CliResult<()> {
    let avail = available_memory();
    match (need, avail) {
        (Some(n), Some(a)) if n <= a as u128 => Ok(()),
        (Some(n), None) if n <= u64::MAX as u128 => Ok(()),
        (Some(n), a) => Err(CliError::input(format!(
            "{flag} {value}: needs at least {} of memory but {} are available, expected a smaller value",
            fmt_bytes(u64::try_from(n).unwrap_or(u64::MAX)),
            a.map_or("not that many".to_string(), |a| format!(
                "only {}",
                fmt_bytes(a)
            ))
        ))),
        (None, _) => Err(CliError::input(format!(
            "{flag} {value}: needs more memory than a 64-bit machine can address, expected a smaller value"
        ))),
    }
}

/// Prints one line on stderr; a closed or full stderr is ignored (there is nowhere left to
/// report it).
pub fn complain(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("monomorph-outputs-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch");
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn write(text: &'static str) -> impl FnOnce(&Path) -> monomorph::Result<()> {
        move |p| std::fs::write(p, text).map_err(|e| monomorph::io::io_err(p, e.to_string()))
    }

    /// `temp_name(dest)` with its counter replaced by `N`.
    fn tmp(dest: &str) -> String {
        let t = temp_name(Path::new(dest)).to_string_lossy().into_owned();
        let pid = format!(".tmp-{}-", std::process::id());
        let at = t.find(&pid).expect("the pid") + pid.len();
        let digits = t[at..].chars().take_while(char::is_ascii_digit).count();
        format!("{}N{}", &t[..at], &t[at + digits..])
    }

    #[test]
    fn temp_names_keep_the_extensions_and_hide() {
        let pid = std::process::id();
        assert_eq!(
            tmp("d/particles.star"),
            format!("d/.particles.tmp-{pid}-N.star")
        );
        assert_eq!(tmp("scores.mrc.gz"), format!(".scores.tmp-{pid}-N.mrc.gz"));
        assert_eq!(tmp("d/.hidden.npy"), format!("d/..hidden.tmp-{pid}-N.npy"));
        assert_eq!(tmp("plain"), format!(".plain.tmp-{pid}-N"));
        // A first character of several bytes (this panicked, cutting inside it).
        assert_eq!(tmp("é.csv"), format!(".é.tmp-{pid}-N.csv"));
        assert_eq!(tmp("d/日本.png"), format!("d/.日本.tmp-{pid}-N.png"));
        assert_eq!(tmp("ü"), format!(".ü.tmp-{pid}-N"));
        // Two names for one destination differ.
        assert_ne!(temp_name(Path::new("x.npy")), temp_name(Path::new("x.npy")));
    }

    #[test]
    fn two_output_sets_committed_at_once_leave_one_complete_set() {
        // Each writer stages three files holding its own mark, then both commit together;
        // afterwards every file must hold the same mark (seen mixed without the folder lock).
        let dir = scratch("race");
        let files = ["scores.npy", "rotation_index.npy", "run.json"];
        let mut mixed = 0;
        for _ in 0..300 {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
            let hs: Vec<_> = ["A", "B"]
                .into_iter()
                .map(|mark| {
                    let (dir, barrier) = (dir.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        let mut o = Outputs::in_dir("--out", &dir).expect("in_dir");
                        for f in files {
                            o.stage(f, |p| {
                                std::fs::write(p, mark)
                                    .map_err(|e| monomorph::io::io_err(p, e.to_string()))
                            })
                            .expect("stage");
                        }
                        barrier.wait();
                        o.commit().expect("commit");
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("writer");
            }
            let marks: Vec<String> = files
                .iter()
                .map(|f| std::fs::read_to_string(dir.join(f)).expect("read"))
                .collect();
            if marks.iter().any(|m| *m != marks[0]) {
                mixed += 1;
            }
        }
        assert_eq!(mixed, 0, "{mixed} of 300 trials left a mixed set");
        assert_eq!(
            names(&dir),
            ["rotation_index.npy", "run.json", "scores.npy"]
        );
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("4G"), Ok(4 << 30));
        assert_eq!(parse_bytes("0.5G"), Ok(1 << 29));
        assert_eq!(parse_bytes("512mib"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5KB"), Ok(1536));
        assert_eq!(parse_bytes("1000000"), Ok(1_000_000));
        for bad in [
            "0", "0.5", "-1", "-1G", "nan", "inf", "1e30G", "", "G", "8E", "4 X",
        ] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn commit_renames_all_and_drop_cleans_up() {
        let dir = scratch("commit");
        let out = dir.join("a/b");
        let mut o = Outputs::in_dir("--out", &out).expect("in_dir");
        o.stage("x.npy", write("x")).expect("x");
        o.json("run.json", &json!({"ok": true})).expect("json");
        assert_eq!(names(&out).len(), 2);
        o.commit().expect("commit");
        assert_eq!(names(&out), ["run.json", "x.npy"]);
        // Uncommitted: temporary files and the folders created go, others stay.
        let out2 = dir.join("c/d");
        let mut o = Outputs::in_dir("--out", &out2).expect("in_dir");
        o.stage("x.npy", write("x")).expect("x");
        drop(o);
        assert_eq!(names(&dir), ["a"]);
        let mut o = Outputs::in_dir("--out", &out).expect("in_dir");
        o.stage("y.npy", write("y")).expect("y");
        drop(o);
        assert_eq!(names(&out), ["run.json", "x.npy"]);
    }

    #[test]
    fn a_failed_rename_takes_back_the_files_already_renamed() {
        let dir = scratch("rollback");
        let mut o = Outputs::files();
        o.stage_file("--out", &dir.join("one.csv"), write("1"))
            .expect("one");
        o.stage_file("--png", &dir.join("two.png"), write("2"))
            .expect("two");
        // A folder appears at the second destination after the checks: the rename fails.
        let blocker = dir.join("two.png");
        let mut o2 = o;
        std::fs::create_dir_all(blocker.join("inner")).expect("mkdir");
        let e = o2.commit_renames().expect_err("blocked");
        assert_eq!(e.code, crate::cli::error::EXIT_FAILURE);
        assert!(e.message.contains("two.png"), "{}", e.message);
        drop(o2);
        assert_eq!(names(&dir), ["two.png"]);
    }

    #[test]
    fn a_failed_write_is_exit_1_naming_the_destination() {
        let dir = scratch("failed");
        let mut o = Outputs::files();
        let e = o
            .stage_file("--out", &dir.join("p.csv"), |p| {
                Err(monomorph::io::io_err(p, "cannot write: disk full"))
            })
            .expect_err("fails");
        assert_eq!(e.code, crate::cli::error::EXIT_FAILURE);
        assert!(e.message.starts_with("--out "), "{}", e.message);
        assert!(
            e.message.contains("p.csv: cannot write: disk full"),
            "{}",
            e.message
        );
        assert!(!e.message.contains(".tmp-"), "{}", e.message);
        drop(o);
        assert!(names(&dir).is_empty());
    }

    #[test]
    fn outputs_must_not_be_inputs() {
        let dir = scratch("distinct");
        let f = dir.join("s.npy");
        std::fs::write(&f, b"x").expect("write");
        let via_dot = dir.join(".").join("s.npy");
        let e = check_distinct(&[("--out", via_dot)], &[("--scores", &f)]).expect_err("same");
        assert!(e.message.contains("--scores"), "{}", e.message);
        let other = dir.join("p.csv");
        check_distinct(&[("--out", other.clone())], &[("--scores", &f)]).expect("distinct");
        let e =
            check_distinct(&[("--out", other.clone()), ("--png", other)], &[]).expect_err("twice");
        assert!(e.message.contains("--png"), "{}", e.message);
    }
}
