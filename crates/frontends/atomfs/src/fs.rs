//! The file system handle and its namespace helpers.

use crate::{DirEntry, File, FsckReport, Metadata, OpenOptions, Result, StatFs, Store, Tx};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use store::{Fh, ROOT_INO};

/// Store bytes of a path inside the file system.
pub(crate) fn path_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

/// What a [`Fs`] and its files and transactions share.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    /// Unmount (checkpoint and close) the store when the last user goes away: true for a
    /// store this crate opened, false for one handed in by [`Fs::from_store`].
    unmount_on_drop: bool,
    /// The store's lock (one owner process), released after the unmount.
    _lock: Option<engines::StoreLock>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.unmount_on_drop {
            // A destructor cannot report; call `Fs::unmount` to see the error.
            let _ = self.store.unmount();
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.store.engine_name())
    }
}

/// A file system served by one atomfs engine.
///
/// Cheap to clone (it is a shared handle). Paths are inside the file system, absolute or
/// relative to its root; symbolic links are not followed by the helpers.
#[derive(Clone, Debug)]
pub struct Fs {
    pub(crate) shared: Arc<Shared>,
}

impl Fs {
    /// A file system over a store the caller opened. The store is not unmounted when the
    /// `Fs` goes away: call [`Fs::unmount`] (or `Store::unmount`) yourself.
    pub fn from_store(store: Arc<dyn Store>) -> Fs {
        Fs {
            shared: Arc::new(Shared {
                store,
                unmount_on_drop: false,
                _lock: None,
            }),
        }
    }

    /// A file system that unmounts its store when the last `Fs`, `File` or `Tx` using it goes
    /// away.
    pub fn owning(store: Arc<dyn Store>) -> Fs {
        Self::owning_locked(store, None)
    }

    /// A file system over a store the registry opened (`engines::create`, `open`,
    /// `replace`): unmounted when the last user goes, then its lock released.
    pub fn from_opened(opened: engines::OpenedStore) -> Fs {
        Self::owning_locked(opened.store, Some(opened.lock))
    }

    fn owning_locked(store: Arc<dyn Store>, lock: Option<engines::StoreLock>) -> Fs {
        Fs {
            shared: Arc::new(Shared {
                store,
                unmount_on_drop: true,
                _lock: lock,
            }),
        }
    }

    /// The engine under this file system.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    fn st(&self) -> &dyn Store {
        &*self.shared.store
    }

    /// Options to open a file: `fs.options().read(true).write(true).open(path)`.
    pub fn options(&self) -> OpenOptions<'_> {
        OpenOptions::new(self)
    }

    /// Open a file for reading (like `std::fs::File::open`).
    pub fn open_file(&self, path: impl AsRef<Path>) -> Result<File> {
        self.options().read(true).open(path)
    }

    /// Create or truncate a file and open it for writing (like `std::fs::File::create`).
    pub fn create_file(&self, path: impl AsRef<Path>) -> Result<File> {
        self.options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    }

    /// Begin a transaction bound to `files`; more can join with [`Tx::add`].
    pub fn begin(&self, files: &[&File]) -> Result<Tx> {
        let fhs: Vec<Fh> = files.iter().map(|f| f.fh).collect();
        let id = self.st().tx_begin(&fhs)?;
        Ok(Tx::new(self.shared.clone(), id))
    }

    /// Commit the pending writes of several atomic-mode files as one unit.
    pub fn syncv(&self, files: &[&File]) -> Result<()> {
        let fhs: Vec<Fh> = files.iter().map(|f| f.fh).collect();
        self.st().syncv(&fhs)
    }

    /// Drop the pending writes of several atomic-mode files.
    pub fn abortv(&self, files: &[&File]) -> Result<()> {
        let fhs: Vec<Fh> = files.iter().map(|f| f.fh).collect();
        self.st().abortv(&fhs)
    }

    /// Attributes of the inode at `path`, symbolic links followed (as `std::fs::metadata`;
    /// see `store::path` for how links resolve: ELOOP after 40, absolute targets from the
    /// store's root).
    pub fn metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        store::path::resolve_follow(self.st(), path_bytes(path.as_ref()))
    }

    /// Attributes of `path` itself: a symbolic link in its last component is not followed
    /// (as `std::fs::symlink_metadata`).
    pub fn symlink_metadata(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        store::resolve(self.st(), path_bytes(path.as_ref()))
    }

    /// The target of the symbolic link at `path` (InvalidArgument for anything else).
    pub fn read_link(&self, path: impl AsRef<Path>) -> Result<std::path::PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        let link = self.symlink_metadata(path)?;
        let target = self.st().readlink(link.ino)?;
        Ok(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
            &target,
        )))
    }

    /// True when `path` names an inode (a link to nothing does not).
    pub fn exists(&self, path: impl AsRef<Path>) -> Result<bool> {
        match self.metadata(path) {
            Ok(_) => Ok(true),
            Err(store::Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Create a directory (its parent must exist).
    pub fn create_dir(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        let (parent, name) = store::resolve_parent(self.st(), path_bytes(path.as_ref()))?;
        self.st().mkdir(parent, &name, 0o755, None)
    }

    /// Create a directory and its missing parents.
    pub fn create_dir_all(&self, path: impl AsRef<Path>) -> Result<Metadata> {
        store::path::mkdir_all(self.st(), path_bytes(path.as_ref()), 0o755)
    }

    /// Remove a file (or symbolic link).
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let (parent, name) = store::resolve_parent(self.st(), path_bytes(path.as_ref()))?;
        self.st().unlink(parent, &name, None)
    }

    /// Remove an empty directory.
    pub fn remove_dir(&self, path: impl AsRef<Path>) -> Result<()> {
        let (parent, name) = store::resolve_parent(self.st(), path_bytes(path.as_ref()))?;
        self.st().rmdir(parent, &name, None)
    }

    /// Rename, replacing an existing target as rename(2) does, atomically.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<()> {
        let (parent, name) = store::resolve_parent(self.st(), path_bytes(from.as_ref()))?;
        let (new_parent, new_name) = store::resolve_parent(self.st(), path_bytes(to.as_ref()))?;
        self.st().rename(parent, &name, new_parent, &new_name, None)
    }

    /// Add a hard link `link` to the file at `original`.
    pub fn hard_link(
        &self,
        original: impl AsRef<Path>,
        link: impl AsRef<Path>,
    ) -> Result<Metadata> {
        // As link(2) on Linux: a symbolic link `original` is linked, not followed.
        let target = self.symlink_metadata(original)?;
        let (parent, name) = store::resolve_parent(self.st(), path_bytes(link.as_ref()))?;
        self.st().link(target.ino, parent, &name, None)
    }

    /// Create a symbolic link `link` pointing to `target` (where the engine has symlinks).
    pub fn symlink(&self, target: impl AsRef<Path>, link: impl AsRef<Path>) -> Result<Metadata> {
        let (parent, name) = store::resolve_parent(self.st(), path_bytes(link.as_ref()))?;
        self.st()
            .symlink(parent, &name, path_bytes(target.as_ref()), None)
    }

    /// Rename with a [`store::RenameMode`]: `NoReplace` fails with `Exists` when `to`
    /// exists, `Exchange` swaps two existing names, atomically.
    pub fn rename_with(
        &self,
        from: impl AsRef<Path>,
        to: impl AsRef<Path>,
        mode: store::RenameMode,
    ) -> Result<()> {
        let (parent, name) = store::resolve_parent(self.st(), path_bytes(from.as_ref()))?;
        let (new_parent, new_name) = store::resolve_parent(self.st(), path_bytes(to.as_ref()))?;
        self.st()
            .rename_with(parent, &name, new_parent, &new_name, mode, None)
    }

    /// The value of the extended attribute `name` of `path` (links followed).
    pub fn xattr(&self, path: impl AsRef<Path>, name: &str) -> Result<Vec<u8>> {
        let ino = self.metadata(path)?.ino;
        self.st().getxattr(ino, name.as_bytes())
    }

    /// Set the extended attribute `name` of `path` (created or replaced), atomically.
    pub fn set_xattr(&self, path: impl AsRef<Path>, name: &str, value: &[u8]) -> Result<()> {
        let ino = self.metadata(path)?.ino;
        self.st()
            .setxattr(ino, name.as_bytes(), value, store::XattrSet::Either, None)
    }

    /// The names of the extended attributes of `path`.
    pub fn list_xattr(&self, path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>> {
        let ino = self.metadata(path)?.ino;
        self.st().listxattr(ino)
    }

    /// Remove the extended attribute `name` of `path`.
    pub fn remove_xattr(&self, path: impl AsRef<Path>, name: &str) -> Result<()> {
        let ino = self.metadata(path)?.ino;
        self.st().removexattr(ino, name.as_bytes(), None)
    }

    /// Entries of the directory at `path`, without `.` and `..`.
    pub fn read_dir(&self, path: impl AsRef<Path>) -> Result<Vec<DirEntry>> {
        let dir = self.metadata(path)?;
        self.st().read_dir(dir.ino)
    }

    /// The whole content of a file.
    pub fn read(&self, path: impl AsRef<Path>) -> Result<Vec<u8>> {
        store::path::read_file(self.st(), path_bytes(path.as_ref()))
    }

    /// The whole content of a file as UTF-8 text.
    pub fn read_to_string(&self, path: impl AsRef<Path>) -> Result<String> {
        let bytes = self.read(path.as_ref())?;
        String::from_utf8(bytes).map_err(|_| {
            store::Error::InvalidArgument(format!("{} is not UTF-8", path.as_ref().display()))
        })
    }

    /// Replace a whole file, atomically: the truncation and the write are one transaction.
    pub fn write(&self, path: impl AsRef<Path>, data: impl AsRef<[u8]>) -> Result<()> {
        let tx = self.begin(&[])?;
        tx.write(path, data.as_ref())?;
        tx.commit()
    }

    /// Capacity and usage.
    pub fn statfs(&self) -> Result<StatFs> {
        self.st().statfs()
    }

    /// Check the engine's on-media structures.
    pub fn fsck(&self) -> Result<FsckReport> {
        self.st().fsck()
    }

    /// Attributes of the root directory.
    pub fn root(&self) -> Result<Metadata> {
        self.st().getattr(ROOT_INO)
    }

    /// Checkpoint everything and close the store; later calls fail with `Error::Closed`.
    pub fn unmount(&self) -> Result<()> {
        self.st().unmount()
    }
}
