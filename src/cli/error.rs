//! The command's one-line errors and their exit codes.

use std::fmt;

/// Exit code for usage and input errors.
pub const EXIT_USAGE: u8 = 2;
/// Exit code for failures while running.
pub const EXIT_FAILURE: u8 = 1;

/// An error of the command: one line of text and an exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    /// A usage or input error (exit code 2).
    pub fn input(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }
    /// A failure while running (exit code 1).
    pub fn failure(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_FAILURE,
            message: message.into(),
        }
    }
    /// The library's complaint about the value `value` the user gave for `flag`, in the
    /// user's words: an invalid argument loses the library's own parameter name
    /// (`--angular-step 0: must be a positive number of degrees`, not "invalid argument
    /// `angular step`"); other errors are prefixed with the flag.
    pub fn for_flag(e: monomorph::Error, flag: &str, value: impl fmt::Display) -> Self {
        match e {
            monomorph::Error::InvalidArgument { reason, .. } => {
                CliError::input(format!("{flag} {value}: {reason}"))
            }
            other => CliError::from(other).about(format!("{flag} {value}")),
        }
    }

    /// Prefixes the message with the file or argument it concerns.
    pub fn about(self, what: impl fmt::Display) -> Self {
        CliError {
            code: self.code,
            message: format!("{what}: {}", self.message),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the source said.
        let one = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        f.write_str(&one)
    }
}

impl From<monomorph::Error> for CliError {
    fn from(e: monomorph::Error) -> Self {
        use monomorph::Error as E;
        let code = match &e {
            E::Shape { .. }
            | E::InvalidArgument { .. }
            | E::Empty(_)
            | E::NonFinite { .. }
            | E::Io { .. }
            | E::NotCompiled(_)
            | E::FftPlan { .. } => EXIT_USAGE,
            _ => EXIT_FAILURE,
        };
        CliError {
            code,
            message: e.to_string(),
        }
    }
}

/// A number as a message shows it: plain when of ordinary size, else in exponent form (`1e308`
/// rather than 309 digits).
pub fn show(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() || (1e-4..1e15).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Result of the command's functions.
pub type CliResult<T> = std::result::Result<T, CliError>;
