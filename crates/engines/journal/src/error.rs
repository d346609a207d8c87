//! Errors of the journal core.

use hostfs::HostFsError;

/// Errors of the journal's own interface; converted to [`store::Error`].
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("PM region is not an atomfs NJS journal (bad magic)")]
    BadMagic,
    #[error("journal format version {0} (this build reads version {v})", v = crate::layout::VERSION)]
    Version(u32),
    #[error("corrupt journal: {what} at offset {offset:#x}")]
    Corrupt { what: String, offset: u64 },
    #[error("bad configuration: {0}")]
    Config(String),
    #[error("journal full: a transaction of {needed} blocks does not fit in {capacity}")]
    TooLarge { needed: u64, capacity: u64 },
    #[error(transparent)]
    Host(#[from] HostFsError),
}

impl JournalError {
    /// A corrupt-media error naming what and where.
    pub fn corrupt(what: impl Into<String>, offset: u64) -> Self {
        JournalError::Corrupt {
            what: what.into(),
            offset,
        }
    }
}

/// Result of the journal core.
pub type JournalResult<T> = Result<T, JournalError>;

impl From<JournalError> for store::Error {
    fn from(e: JournalError) -> Self {
        match e {
            JournalError::BadMagic => store::Error::BadMagic("NJS journal".into()),
            JournalError::Version(found) => store::Error::UnsupportedVersion {
                what: "NJS journal".into(),
                found,
                supported: crate::layout::VERSION,
            },
            JournalError::Corrupt { what, offset } => store::Error::Corrupt { what, offset },
            JournalError::Config(s) => store::Error::InvalidArgument(s),
            JournalError::TooLarge { needed, capacity } => store::Error::NoSpace(format!(
                "transaction of {needed} journal blocks, journal holds {capacity}"
            )),
            JournalError::Host(e) => match e.errno() {
                libc::ENOSPC => store::Error::NoSpace(e.to_string()),
                errno => store::Error::Io {
                    path: e.to_string(),
                    op: "home file",
                    source: std::io::Error::from_raw_os_error(errno),
                },
            },
        }
    }
}
