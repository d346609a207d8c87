//! The real implementation: a store directory on a host file system.

mod jail;
mod ops;
mod posix;
mod probe;
mod sys;

pub use jail::Resolver;

use crate::error::{io_err, HostFsError};
use crate::{Capabilities, HostFsResult, RelPath};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A real store directory (see the crate documentation). Holds a descriptor of the
/// directory: every path is resolved relative to it, so a rename of the directory itself
/// does not redirect later operations.
pub struct RealHostFs {
    root: PathBuf,
    root_fd: OwnedFd,
    resolver: Resolver,
    caps: Capabilities,
}

/// An open file of a [`RealHostFs`].
pub struct RealFile {
    file: File,
    /// The path it was opened by, relative to the store directory (for messages).
    path: PathBuf,
    /// An O_DIRECT descriptor of the same file, opened by the first atomic write.
    direct: OnceLock<File>,
}

impl RealFile {
    /// The underlying `std::fs::File` (for engine code that needs the descriptor).
    pub fn as_file(&self) -> &File {
        &self.file
    }
}

fn root_error(root: &Path, reason: impl Into<String>) -> HostFsError {
    HostFsError::Root {
        path: root.to_path_buf(),
        reason: reason.into(),
    }
}

impl RealHostFs {
    /// Open the store directory `root`: it must exist, be a directory, and be writable.
    pub fn open(root: impl AsRef<Path>) -> HostFsResult<RealHostFs> {
        let root = root.as_ref();
        let meta = std::fs::metadata(root).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => root_error(root, "does not exist"),
            _ => root_error(root, e.to_string()),
        })?;
        if !meta.is_dir() {
            return Err(root_error(root, "not a directory"));
        }
        let c = CString::new(root.as_os_str().as_bytes())
            .map_err(|_| root_error(root, "contains a NUL byte"))?;
        // SAFETY: `c` is NUL-terminated; access has no other preconditions.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(root_error(root, format!("not writable ({e})")));
        }
        // SAFETY: `c` is NUL-terminated; the descriptor is owned by `jail::owned`.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        let root_fd = jail::owned(fd).map_err(|e| root_error(root, e.to_string()))?;
        let resolver = Resolver::detect(&root_fd);
        let caps = probe::probe(&root_fd);
        Ok(RealHostFs {
            root: root.to_path_buf(),
            root_fd,
            resolver,
            caps,
        })
    }

    /// [`open`](Self::open) forcing a resolver (tests of the fallback walk).
    pub fn open_with_resolver(root: impl AsRef<Path>, resolver: Resolver) -> HostFsResult<Self> {
        let mut fs = Self::open(root)?;
        fs.resolver = resolver;
        Ok(fs)
    }

    /// How paths are resolved on this kernel.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    fn abs(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    fn entry(&self, path: &Path, op: &'static str) -> HostFsResult<(OwnedFd, CString)> {
        let rel = RelPath::new(path)?;
        jail::parent(self.resolver, &self.root_fd, &rel).map_err(|e| io_err(self.abs(path), op, e))
    }

    fn open_fd(
        &self,
        path: &Path,
        dir: bool,
        flags: i32,
        op: &'static str,
    ) -> HostFsResult<OwnedFd> {
        let rel = if dir {
            RelPath::dir(path)?
        } else {
            RelPath::new(path)?
        };
        jail::open(self.resolver, &self.root_fd, &rel, flags, 0)
            .map_err(|e| io_err(self.abs(path), op, e))
    }

    fn file_path(&self, file: &RealFile) -> PathBuf {
        self.abs(&file.path)
    }

    fn root_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.root_fd.as_fd()
    }
}
