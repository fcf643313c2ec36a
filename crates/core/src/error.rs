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
        "out of memory: {what} needs {requested} bytes ({:.2} GiB) but only {available} bytes ({:.2} GiB) are available",
        *requested as f64 / 1073741824.0, *available as f64 / 1073741824.0
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
