//! Logging (`-v`, `--quiet`), the Chrome/Perfetto trace (`--trace FILE.json`) and progress bars.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::error::{CliError, CliResult};

/// Keeps the trace file open until the command ends; [`TraceGuard::finish`] writes it out.
pub struct TraceGuard {
    chrome: Option<tracing_chrome::FlushGuard>,
    /// The trace file and the first error writing it.
    file: Option<(PathBuf, Arc<Mutex<Option<std::io::Error>>>)>,
    /// Embedded: takes this run's trace layer out of the process's subscriber.
    detach: Option<fn()>,
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if let Some(d) = self.detach.take() {
            d();
        }
    }
}

impl TraceGuard {
    /// Ends the trace (the writer thread flushes and closes the file) and reports a failed
    /// write of it as exit code 1 naming `--trace`.
    pub fn finish(mut self) -> CliResult<()> {
        if let Some(d) = self.detach.take() {
            d();
        }
        drop(self.chrome.take());
        let Some((path, failed)) = self.file.take() else {
            return Ok(());
        };
        let err = failed.lock().map(|mut e| e.take()).unwrap_or(None);
        match err {
            Some(e) => Err(CliError::failure(format!(
                "--trace {}: cannot write the trace: {e}",
                path.display()
            ))),
            None => Ok(()),
        }
    }
}

/// The trace file as tracing-chrome's writer thread sees it: writes never fail there (that
/// thread unwraps them and would panic at exit); the first error is kept for
/// [`TraceGuard::finish`] and later writes are dropped.
struct TraceFile {
    file: std::fs::File,
    failed: Arc<Mutex<Option<std::io::Error>>>,
}

impl TraceFile {
    fn guard(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r
            && let Ok(mut slot) = self.failed.lock()
            && slot.is_none()
        {
            *slot = Some(e);
        }
    }
    fn broken(&self) -> bool {
        self.failed.lock().map_or(true, |s| s.is_some())
    }
}

impl Write for TraceFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.broken() {
            let r = self.file.write_all(buf);
            self.guard(r);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.broken() {
            let r = self.file.flush();
            self.guard(r);
        }
        Ok(())
    }
}

/// Installs the subscriber: human log lines on stderr at the level `-v`/`--quiet` choose
/// (`RUST_LOG` overrides), and a Chrome trace of every span when `trace` is given.
pub fn init(verbose: u8, quiet: bool, trace: Option<&Path>) -> CliResult<TraceGuard> {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .with_filter(filter);
    let (chrome, guard, file) = match trace {
        Some(path) => {
            let (layer, guard, file) = chrome_layer(path)?;
            (Some(layer), Some(guard), Some(file))
        }
        None => (None, None, None),
    };
    tracing_subscriber::registry()
        .with(fmt)
        .with(chrome)
        .try_init()
        .map_err(|e| CliError::failure(format!("cannot install the logger: {e}")))?;
    Ok(TraceGuard {
        chrome: guard,
        file,
        detach: None,
    })
}

/// The trace file that failed writes are kept for.
type TraceFileState = (PathBuf, Arc<Mutex<Option<std::io::Error>>>);

/// Opens the trace file `path` (an unusable path is an input error naming `--trace`, before
/// any work) and the Chrome trace layer writing it.
fn chrome_layer<S>(
    path: &Path,
) -> CliResult<(
    tracing_chrome::ChromeLayer<S>,
    tracing_chrome::FlushGuard,
    TraceFileState,
)>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    // Open the file here, at the start: an unusable path is an input error naming the
    // flag, before any work.
    if path.as_os_str().is_empty() || path.is_dir() {
        return Err(CliError::input(format!(
            "--trace '{}': expected a file path",
            path.display()
        )));
    }
    let f = std::fs::File::create(path).map_err(|e| {
        CliError::input(format!(
            "--trace {}: cannot create the trace file: {e}, expected a writable file",
            path.display()
        ))
    })?;
    // A zero-byte write costs nothing on a file or a pipe, but fails at once where
    // every write will (`/dev/full`): an error naming the flag now, before any work
    // and before any output is committed.
    let mut probe = &f;
    if let Err(e) = probe.write(&[]).and_then(|_| probe.flush()) {
        return Err(CliError::input(format!(
            "--trace {}: cannot write the trace file: {e}, expected a writable file",
            path.display()
        )));
    }
    let failed = Arc::new(Mutex::new(None));
    let writer = TraceFile {
        file: f,
        failed: failed.clone(),
    };
    let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .writer(writer)
        .include_args(true)
        .build();
    Ok((layer, guard, (path.to_path_buf(), failed)))
}

/// The subscriber of a process that runs commands embedded ([`super::embed`]): installed
/// once, on the first `--trace`; a run's Chrome layer is swapped in for the run and out after.
type Embedded = tracing_subscriber::reload::Handle<
    Option<tracing_chrome::ChromeLayer<tracing_subscriber::Registry>>,
    tracing_subscriber::Registry,
>;

static EMBEDDED: std::sync::OnceLock<Result<Embedded, String>> = std::sync::OnceLock::new();

/// Whether a run of this process is writing a trace (one at a time: the layer sees every
/// thread's spans).
static TRACING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--trace FILE` of a command run inside another program: the run's spans, on every
/// thread, go to FILE until [`TraceGuard::finish`]. Logging is left alone (the embedding
/// program shows no log lines). Fails with exit code 1 when another run of this process is
/// writing a trace, or when the program has a tracing subscriber of its own.
pub fn init_embedded(trace: Option<&Path>) -> CliResult<TraceGuard> {
    use std::sync::atomic::Ordering;
    let Some(path) = trace else {
        return Ok(TraceGuard {
            chrome: None,
            file: None,
            detach: None,
        });
    };
    let handle = EMBEDDED
        .get_or_init(|| {
            let (layer, handle) = tracing_subscriber::reload::Layer::new(None);
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
                .map(|()| handle)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            CliError::failure(format!(
                "--trace {}: this program has a tracing subscriber of its own ({e}), expected \
                 the command line for a trace",
                path.display()
            ))
        })?;
    if TRACING
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(CliError::failure(format!(
            "--trace {}: another run of this process is writing a trace, expected one traced \
             run at a time",
            path.display()
        )));
    }
    let (layer, guard, file) = match chrome_layer(path) {
        Ok(c) => c,
        Err(e) => {
            TRACING.store(false, Ordering::Release);
            return Err(e);
        }
    };
    fn detach() {
        if let Some(Ok(h)) = EMBEDDED.get() {
            let _ = h.modify(|l| *l = None);
        }
        TRACING.store(false, Ordering::Release);
    }
    if let Err(e) = handle.modify(|l| *l = Some(layer)) {
        TRACING.store(false, Ordering::Release);
        return Err(CliError::failure(format!(
            "--trace {}: {e}",
            path.display()
        )));
    }
    Ok(TraceGuard {
        chrome: Some(guard),
        file: Some(file),
        detach: Some(detach),
    })
}

/// A progress bar on stderr, hidden when stderr is not a terminal or `--quiet` is on.
pub fn progress(len: u64, what: &str, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg:>10} [{bar:40}] {pos}/{len} {elapsed_precise} (eta {eta})",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}
