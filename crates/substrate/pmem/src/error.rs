use std::path::PathBuf;

/// Errors of the persistent-memory substrate. Every variant names the path it concerns.
#[derive(Debug, thiserror::Error)]
pub enum PmError {
    #[error("{path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

pub type PmResult<T> = Result<T, PmError>;
