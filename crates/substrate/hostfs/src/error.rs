//! The error type of the host-file substrate: every variant names the path (or root) and
//! the operation it concerns, so one line tells what failed and where.

use crate::Capability;
use std::io;
use std::path::PathBuf;

/// Errors of [`HostFs`](crate::HostFs) operations.
#[derive(Debug, thiserror::Error)]
pub enum HostFsError {
    /// A path given by the caller was refused before any system call (see [`crate::path`]).
    #[error("{path}: invalid path: {reason}")]
    InvalidPath {
        /// The path as given, escaped for display.
        path: String,
        reason: &'static str,
    },
    /// The store directory cannot be used.
    #[error("{path}: unusable store directory: {reason}")]
    Root { path: PathBuf, reason: String },
    /// A system call (or the model standing for it) failed.
    #[error("{path}: {op}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// The file system lacks a capability the caller asked for.
    #[error("{capability} is not available on {fs_type} at {root}")]
    Unsupported {
        capability: Capability,
        fs_type: String,
        root: PathBuf,
    },
    /// Arguments the operation cannot accept (alignment, unit limits, ranges).
    #[error("{path}: {op}: {reason}")]
    Invalid {
        path: PathBuf,
        op: &'static str,
        reason: String,
    },
}

impl HostFsError {
    /// The errno this error stands for (for errno-speaking front ends).
    pub fn errno(&self) -> i32 {
        match self {
            HostFsError::InvalidPath { reason, .. }
                if *reason == crate::path::TOO_LONG || *reason == crate::path::TOO_DEEP =>
            {
                libc::ENAMETOOLONG
            }
            HostFsError::InvalidPath { .. } | HostFsError::Invalid { .. } => libc::EINVAL,
            HostFsError::Root { .. } => libc::ENOTDIR,
            HostFsError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            HostFsError::Unsupported { .. } => libc::EOPNOTSUPP,
        }
    }

    /// True when the error is "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        self.errno() == libc::ENOENT
    }
}

/// Results of [`HostFs`](crate::HostFs) operations.
pub type HostFsResult<T> = Result<T, HostFsError>;

/// An [`HostFsError::Io`] from a raw errno.
pub(crate) fn io_errno(path: impl Into<PathBuf>, op: &'static str, errno: i32) -> HostFsError {
    HostFsError::Io {
        path: path.into(),
        op,
        source: io::Error::from_raw_os_error(errno),
    }
}

/// An [`HostFsError::Io`] from an `io::Error`.
pub(crate) fn io_err(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> HostFsError {
    HostFsError::Io {
        path: path.into(),
        op,
        source,
    }
}

/// An [`HostFsError::Invalid`].
pub(crate) fn invalid(path: impl Into<PathBuf>, op: &'static str, reason: String) -> HostFsError {
    HostFsError::Invalid {
        path: path.into(),
        op,
        reason,
    }
}
