//! Errors of the benchmark harness.

use std::path::PathBuf;

#[derive(Debug)]
pub enum BenchError {
    /// An I/O call failed; `what` names the call and the path.
    Io {
        what: String,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A system could not run here (missing library, no root...); reported, not fatal.
    Skipped(String),
    /// A baseline's own library reported an error.
    System { system: String, message: String },
    /// Bad command line or configuration.
    Invalid(String),
    /// SIGINT/SIGTERM arrived; everything was cleaned up on the way out.
    Interrupted,
    /// Writing results (JSON, plots) failed.
    Output(String),
}

impl BenchError {
    pub fn io(what: impl Into<String>, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            what: what.into(),
            path: path.into(),
            source,
        }
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Io { what, path, source } => {
                write!(f, "{what} {}: {source}", path.display())
            }
            BenchError::Skipped(why) => write!(f, "skipped: {why}"),
            BenchError::System { system, message } => write!(f, "{system}: {message}"),
            BenchError::Invalid(why) => write!(f, "invalid: {why}"),
            BenchError::Interrupted => write!(f, "interrupted"),
            BenchError::Output(why) => write!(f, "writing results: {why}"),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, BenchError>;
