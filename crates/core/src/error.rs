//! The one error type of monomorph.

/// Result alias used by every fallible function in monomorph.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in monomorph, with the numbers in the message.
///
/// Bad user input (shapes, values, parameters) is always reported through this type:
/// a panic on user input is a bug.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An array's shape is not what an operation needs.
    #[error("shape mismatch in {what}: expected {expected}, got {got}")]
    Shape {
        /// Which argument (e.g. "`y` of conjugate_gradient").
        what: String,
        /// What was expected, in words or as a shape.
        expected: String,
        /// What was given.
        got: String,
    },
    /// An argument has a value outside its allowed range.
    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument {
        /// The argument's name.
        name: String,
        /// What is wrong with it and what was expected.
        reason: String,
    },
    /// An array is empty where data is needed.
    #[error("`{0}` is empty (zero-sized array)")]
    Empty(String),
    /// An array holds NaN or infinite values where finite ones are needed.
    #[error("`{what}` contains {count} non-finite value(s) (NaN or infinity)")]
    NonFinite {
        /// Which argument.
        what: String,
        /// How many non-finite values were found.
        count: usize,
    },
    /// An allocation or a run needs more memory than the backend can give.
    #[error(
        "out of memory: {what} needs {} but only {} are available",
        fmt_bytes(*requested), fmt_bytes(*available)
    )]
    OutOfMemory {
        /// What was being allocated.
        what: String,
        /// Bytes requested.
        requested: u64,
        /// Bytes available (backend free memory or the user's limit).
        available: u64,
    },
    /// The device or one of its libraries is missing (e.g. no CUDA driver).
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),
    /// A backend was requested that this build does not contain.
    #[error(
        "backend `{0}` was not compiled into this build: enable the `{0}` feature of the \
         `monomorph` crate (`features = [\"{0}\"]` on its line in Cargo.toml, or \
         `--features {0}` when building monomorph itself)"
    )]
    NotCompiled(&'static str),
    /// An error reported by a backend's device or library (driver, cuFFT, NVRTC…).
    #[error("{backend} backend error: {message}")]
    Backend {
        /// Backend name ("cpu", "cuda").
        backend: &'static str,
        /// The library's message.
        message: String,
    },
    /// An FFT plan was used with arrays it was not built for.
    #[error("FFT plan mismatch: plan is for {plan}, got {got}")]
    FftPlan {
        /// The plan's shape and axes.
        plan: String,
        /// The shapes given.
        got: String,
    },
    /// The caller asked for the run to stop (through a progress callback).
    #[error("cancelled after {done} of {total} steps")]
    Cancelled {
        /// Steps completed.
        done: usize,
        /// Steps requested.
        total: usize,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

impl Error {
    /// Builds [`Error::Shape`] from anything printable.
    pub fn shape(
        what: impl Into<String>,
        expected: impl std::fmt::Display,
        got: impl std::fmt::Display,
    ) -> Self {
        Error::Shape {
            what: what.into(),
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }

    /// Builds [`Error::InvalidArgument`].
    pub fn invalid(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            name: name.into(),
            reason: reason.into(),
        }
    }
}

/// Formats a shape as `(a, b, c)` for messages.
pub fn fmt_shape(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
    if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    }
}

/// `n` bytes as a person reads them: the exact count and, from 1 KiB up, the size in the
/// largest binary unit that keeps the number at least 1 (`1048576 bytes (1.0 MiB)`), so a
/// small limit does not print as `0.00 GiB`.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{n} bytes ({v:.1} {})", UNITS[u])
}

#[cfg(test)]
mod fmt_tests {
    use super::fmt_bytes;

    #[test]
    fn bytes_read_in_the_largest_unit() {
        assert_eq!(fmt_bytes(0), "0 bytes");
        assert_eq!(fmt_bytes(1023), "1023 bytes");
        assert_eq!(fmt_bytes(102400), "102400 bytes (100.0 KiB)");
        assert_eq!(fmt_bytes(1 << 20), "1048576 bytes (1.0 MiB)");
        assert_eq!(fmt_bytes(3 << 30), "3221225472 bytes (3.0 GiB)");
    }
}
