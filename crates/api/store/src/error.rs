//! The one error type of the Store API. Every variant maps to an errno for the C and FUSE
//! front ends ([`Error::errno`]).

/// Errors of every engine and front end.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    Exists(String),
    #[error("not a directory: {0}")]
    NotDir(String),
    #[error("is a directory: {0}")]
    IsDir(String),
    #[error("directory not empty: {0}")]
    NotEmpty(String),
    #[error("name too long ({len} bytes, limit {max})")]
    NameTooLong { len: usize, max: usize },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("bad file handle {0}")]
    BadHandle(u64),
    #[error("file handle {0} is not open for {1}")]
    BadMode(u64, &'static str),
    #[error("no space left: {0}")]
    NoSpace(String),
    #[error("log full: {0}")]
    LogFull(String),
    /// The file belongs to another open transaction: it is bound to it, or that transaction
    /// created it and has not committed (see the crate documentation, "Transactions").
    #[error("file belongs to open transaction {0} (bound to it, or created by it)")]
    FileInTransaction(u64),
    #[error("no such transaction {0} (never begun, or already committed or aborted)")]
    NoSuchTransaction(u64),
    #[error("too many {what} (limit {max})")]
    TooMany { what: &'static str, max: u64 },
    #[error("file too large: {0}")]
    FileTooLarge(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The operation is never allowed on this object (a hard link to a directory).
    #[error("operation not permitted: {0}")]
    NotPermitted(String),
    #[error("resource busy: {0}")]
    Busy(String),
    #[error("cross-device or cross-store operation: {0}")]
    CrossStore(String),
    #[error("operation not supported: {0}")]
    Unsupported(String),
    /// The extended attribute does not exist (ENODATA).
    #[error("no such attribute: {0}")]
    NoAttribute(String),
    /// An argument is too large for the call (an attribute value past 64 KiB: E2BIG).
    #[error("argument too large: {0}")]
    TooLarge(String),
    /// A value does not fit the room the caller gave or the call allows (an attribute name
    /// past 255 bytes: ERANGE).
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// Too many symbolic links met while resolving a path (ELOOP).
    #[error("too many levels of symbolic links: {0}")]
    SymlinkLoop(String),
    #[error("store is closed")]
    Closed,
    #[error("not an atomfs store: {0}")]
    BadMagic(String),
    #[error("unsupported format version {found} (this build reads version {supported}): {what}")]
    UnsupportedVersion {
        what: String,
        found: u32,
        supported: u32,
    },
    #[error("corrupt store: {what} at offset {offset:#x}")]
    Corrupt { what: String, offset: u64 },
    #[error("{path}: {op}: {source}")]
    Io {
        path: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Result of every Store call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The errno a POSIX front end reports for this error.
    pub fn errno(&self) -> i32 {
        use Error::*;
        match self {
            NotFound(_) => libc::ENOENT,
            Exists(_) => libc::EEXIST,
            NotDir(_) => libc::ENOTDIR,
            IsDir(_) => libc::EISDIR,
            NotEmpty(_) => libc::ENOTEMPTY,
            NameTooLong { .. } => libc::ENAMETOOLONG,
            InvalidArgument(_) => libc::EINVAL,
            BadHandle(_) | BadMode(..) => libc::EBADF,
            NoSpace(_) | LogFull(_) => libc::ENOSPC,
            FileInTransaction(_) | Busy(_) => libc::EBUSY,
            NoSuchTransaction(_) => libc::EINVAL,
            TooMany { .. } => libc::EMFILE,
            FileTooLarge(_) => libc::EFBIG,
            PermissionDenied(_) => libc::EACCES,
            NotPermitted(_) => libc::EPERM,
            CrossStore(_) => libc::EXDEV,
            Unsupported(_) => libc::EOPNOTSUPP,
            NoAttribute(_) => libc::ENODATA,
            TooLarge(_) => libc::E2BIG,
            OutOfRange(_) => libc::ERANGE,
            SymlinkLoop(_) => libc::ELOOP,
            Closed => libc::EBADF,
            BadMagic(_) | UnsupportedVersion { .. } | Corrupt { .. } => libc::EUCLEAN,
            Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    /// What opening a special file (FIFO, socket, device node) through the store answers:
    /// the kernel opens those through a mount; the store keeps only their inode.
    pub fn special_open(ino: u64, kind: crate::FileKind) -> Self {
        Error::Unsupported(format!(
            "opening inode {ino}, a {kind:?}, through the store (the kernel opens special files)"
        ))
    }

    /// Shorthand for a corruption found at `offset`.
    pub fn corrupt(what: impl Into<String>, offset: u64) -> Self {
        Error::Corrupt {
            what: what.into(),
            offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn errors_map_to_the_posix_errno() {
        let cases = [
            (Error::NotFound("x".into()), libc::ENOENT),
            (Error::IsDir("x".into()), libc::EISDIR),
            (Error::BadMode(1, "writing"), libc::EBADF),
            (Error::FileInTransaction(7), libc::EBUSY),
            (Error::LogFull("x".into()), libc::ENOSPC),
            (Error::PermissionDenied("x".into()), libc::EACCES),
            (
                Error::NotPermitted("hard link to a directory".into()),
                libc::EPERM,
            ),
            (Error::corrupt("x", 0), libc::EUCLEAN),
            (Error::NoAttribute("user.x".into()), libc::ENODATA),
            (Error::TooLarge("x".into()), libc::E2BIG),
            (Error::OutOfRange("x".into()), libc::ERANGE),
            (Error::SymlinkLoop("x".into()), libc::ELOOP),
        ];
        for (error, errno) in cases {
            assert_eq!(error.errno(), errno, "{error}");
        }
    }
}
