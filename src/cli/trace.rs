//! Logging (`-v`, `--quiet`), the Chrome/Perfetto trace (`--trace FILE.json`) and progress bars.

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::error::{CliError, CliResult};

/// Keeps the trace file open until the command ends (it flushes on drop).
pub struct TraceGuard {
    _chrome: Option<tracing_chrome::FlushGuard>,
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
    let (chrome, guard) = match trace {
        Some(path) => {
            // Open the file ourselves first, so an unwritable path is a clear error.
            std::fs::File::create(path).map_err(|e| {
                CliError::input(format!("{}: cannot write the trace: {e}", path.display()))
            })?;
            let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                .file(path)
                .include_args(true)
                .build();
            (Some(layer), Some(guard))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(fmt)
        .with(chrome)
        .try_init()
        .map_err(|e| CliError::failure(format!("cannot install the logger: {e}")))?;
    Ok(TraceGuard { _chrome: guard })
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
