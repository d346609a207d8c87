//! Fault injection over any [`HostFs`]: the real directory or the crash model.
//!
//! A [`FaultPlan`] holds rules ([`Fault`]): which operation, optionally which file, after how
//! many matching calls, how many times, and what goes wrong. [`Faulty`] consults it before
//! each operation it covers:
//!
//! - [`FaultKind::NoSpace`]: ENOSPC, nothing written (write, set_len, create, clone, atomic
//!   write).
//! - [`FaultKind::Io`]: EIO. On a sync this is the "fsyncgate" case: the file's data written
//!   since its last successful sync must be treated as lost, and [`Faulty`] makes the inner
//!   file system drop it ([`HostFs::drop_unsynced`]; the crash model then never makes it
//!   durable, even after a later successful sync, as Linux marks those pages clean).
//! - [`FaultKind::ShortWrite`]: a write stores only its first bytes and says so.
//!
//! [`Faulty::truncate_behind`] and [`Faulty::delete_behind`] change a file behind the
//! engine's back, as another process (or an administrator) would.

use crate::error::io_errno;
use crate::{Capabilities, DirEntry, HostFs, HostFsResult, OpenOptions, Stat, StatFs};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The operations a fault can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    /// `write_at`, `atomic_write`, `clone_range`, `exchange_range`, `fallocate`.
    Write,
    /// `set_len`.
    SetLen,
    /// `sync_data`, `sync_all`.
    SyncFile,
    /// `sync_dir`.
    SyncDir,
    /// `open` with create.
    Create,
}

/// What goes wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    NoSpace,
    Io,
    /// Only the first `len` bytes are written (writes only).
    ShortWrite {
        len: usize,
    },
}

/// One rule of a [`FaultPlan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub op: FaultOp,
    /// Only calls on this path (as the file was opened / the directory named); any when `None`.
    pub path: Option<PathBuf>,
    /// Matching calls let through before the first fault.
    pub skip: u64,
    /// Faults injected at most (then the rule is spent).
    pub times: u64,
    pub kind: FaultKind,
}

impl Fault {
    /// Fail the next matching call once.
    pub fn once(op: FaultOp, kind: FaultKind) -> Fault {
        Fault {
            op,
            path: None,
            skip: 0,
            times: 1,
            kind,
        }
    }

    /// Only on `path`.
    pub fn on(mut self, path: impl Into<PathBuf>) -> Fault {
        self.path = Some(path.into());
        self
    }

    /// After `skip` matching calls.
    pub fn after(mut self, skip: u64) -> Fault {
        self.skip = skip;
        self
    }
}

/// The faults to inject, and a log of those injected. Shared (`Arc`) between the test and
/// the [`Faulty`] file system.
#[derive(Debug, Default)]
pub struct FaultPlan {
    rules: Mutex<Vec<Fault>>,
    injected: Mutex<Vec<(FaultOp, PathBuf, FaultKind)>>,
}

impl FaultPlan {
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan::default())
    }

    /// Add a rule.
    pub fn add(&self, fault: Fault) {
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(fault);
    }

    /// Remove every rule.
    pub fn clear(&self) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The faults injected so far (operation, path, kind).
    pub fn injected(&self) -> Vec<(FaultOp, PathBuf, FaultKind)> {
        self.injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The fault to inject into this call, if any (and count the call against the rules).
    fn check(&self, op: FaultOp, path: &Path) -> Option<FaultKind> {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let rule = rules
            .iter_mut()
            .find(|r| r.op == op && r.times > 0 && r.path.as_deref().is_none_or(|p| p == path))?;
        if rule.skip > 0 {
            rule.skip -= 1;
            return None;
        }
        rule.times -= 1;
        let kind = rule.kind;
        drop(rules);
        self.injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((op, path.to_path_buf(), kind));
        Some(kind)
    }
}

/// A [`HostFs`] that injects the faults of a [`FaultPlan`] into another one.
pub struct Faulty<F: HostFs> {
    inner: F,
    plan: Arc<FaultPlan>,
}

/// An open file of a [`Faulty`] file system.
pub struct FaultyFile<T> {
    inner: T,
    path: PathBuf,
}

impl<T> FaultyFile<T> {
    /// The inner file.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<F: HostFs> Faulty<F> {
    pub fn new(inner: F, plan: Arc<FaultPlan>) -> Faulty<F> {
        Faulty { inner, plan }
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// The plan.
    pub fn plan(&self) -> &Arc<FaultPlan> {
        &self.plan
    }

    /// Truncate `path` to `len` behind the engine's back, durably.
    pub fn truncate_behind(&self, path: &Path, len: u64) -> HostFsResult<()> {
        let file = self.inner.open(path, &OpenOptions::read_write())?;
        self.inner.set_len(&file, len)?;
        self.inner.sync_all(&file)
    }

    /// Delete `path` behind the engine's back, durably.
    pub fn delete_behind(&self, path: &Path) -> HostFsResult<()> {
        self.inner.unlink(path)?;
        let parent = path.parent().unwrap_or(Path::new(""));
        self.inner.sync_dir(parent)
    }

    fn fail(
        &self,
        op: FaultOp,
        path: &Path,
        name: &'static str,
    ) -> HostFsResult<Option<FaultKind>> {
        match self.plan.check(op, path) {
            Some(FaultKind::NoSpace) => Err(io_errno(path, name, libc::ENOSPC)),
            Some(FaultKind::Io) => Err(io_errno(path, name, libc::EIO)),
            other => Ok(other),
        }
    }

    fn sync_file(&self, file: &FaultyFile<F::File>, name: &'static str) -> HostFsResult<()> {
        if let Some(kind) = self.plan.check(FaultOp::SyncFile, &file.path) {
            // The fsyncgate rule: the data is lost, and a later sync does not bring it back.
            self.inner.drop_unsynced(&file.inner)?;
            let errno = if kind == FaultKind::NoSpace {
                libc::ENOSPC
            } else {
                libc::EIO
            };
            return Err(io_errno(&file.path, name, errno));
        }
        Ok(())
    }
}

impl<F: HostFs> HostFs for Faulty<F> {
    type File = FaultyFile<F::File>;
    type Map = F::Map;

    fn root(&self) -> &Path {
        self.inner.root()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn open(&self, path: &Path, options: &OpenOptions) -> HostFsResult<Self::File> {
        if options.create || options.create_new {
            self.fail(FaultOp::Create, path, "open")?;
        }
        Ok(FaultyFile {
            inner: self.inner.open(path, options)?,
            path: path.to_path_buf(),
        })
    }

    fn read_at(&self, file: &Self::File, off: u64, buf: &mut [u8]) -> HostFsResult<usize> {
        self.inner.read_at(&file.inner, off, buf)
    }

    fn write_at(&self, file: &Self::File, off: u64, data: &[u8]) -> HostFsResult<usize> {
        match self.fail(FaultOp::Write, &file.path, "write")? {
            Some(FaultKind::ShortWrite { len }) if len < data.len() => {
                self.inner.write_at(&file.inner, off, &data[..len])
            }
            _ => self.inner.write_at(&file.inner, off, data),
        }
    }

    fn set_len(&self, file: &Self::File, len: u64) -> HostFsResult<()> {
        self.fail(FaultOp::SetLen, &file.path, "ftruncate")?;
        self.inner.set_len(&file.inner, len)
    }

    fn file_stat(&self, file: &Self::File) -> HostFsResult<Stat> {
        self.inner.file_stat(&file.inner)
    }

    fn sync_data(&self, file: &Self::File) -> HostFsResult<()> {
        self.sync_file(file, "fdatasync")?;
        self.inner.sync_data(&file.inner)
    }

    fn sync_all(&self, file: &Self::File) -> HostFsResult<()> {
        self.sync_file(file, "fsync")?;
        self.inner.sync_all(&file.inner)
    }

    fn sync_dir(&self, dir: &Path) -> HostFsResult<()> {
        self.fail(FaultOp::SyncDir, dir, "fsync directory")?;
        self.inner.sync_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> HostFsResult<()> {
        self.inner.rename(from, to)
    }

    fn unlink(&self, path: &Path) -> HostFsResult<()> {
        self.inner.unlink(path)
    }

    fn link(&self, existing: &Path, new: &Path) -> HostFsResult<()> {
        self.inner.link(existing, new)
    }

    fn mkdir(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        self.inner.mkdir(path, perm)
    }

    fn rmdir(&self, path: &Path) -> HostFsResult<()> {
        self.inner.rmdir(path)
    }

    fn read_dir(&self, dir: &Path) -> HostFsResult<Vec<DirEntry>> {
        self.inner.read_dir(dir)
    }

    fn stat(&self, path: &Path) -> HostFsResult<Stat> {
        self.inner.stat(path)
    }

    fn set_perm(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        self.inner.set_perm(path, perm)
    }

    fn set_times(&self, path: &Path, atime: Option<u64>, mtime: Option<u64>) -> HostFsResult<()> {
        self.inner.set_times(path, atime, mtime)
    }

    fn statfs(&self) -> HostFsResult<StatFs> {
        self.inner.statfs()
    }

    fn map(&self, file: &Self::File, len: u64) -> HostFsResult<Self::Map> {
        self.inner.map(&file.inner, len)
    }

    fn check_map(&self, map: &Self::Map) -> HostFsResult<()> {
        self.inner.check_map(map)
    }

    fn clone_range(
        &self,
        src: &Self::File,
        src_off: u64,
        dst: &Self::File,
        dst_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.fail(FaultOp::Write, &dst.path, "FICLONERANGE")?;
        self.inner
            .clone_range(&src.inner, src_off, &dst.inner, dst_off, len)
    }

    fn exchange_range(
        &self,
        a: &Self::File,
        a_off: u64,
        b: &Self::File,
        b_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.fail(FaultOp::Write, &b.path, "XFS_IOC_EXCHANGE_RANGE")?;
        self.inner
            .exchange_range(&a.inner, a_off, &b.inner, b_off, len)
    }

    fn atomic_write(&self, file: &Self::File, off: u64, data: &[u8]) -> HostFsResult<()> {
        self.fail(FaultOp::Write, &file.path, "pwritev2(RWF_ATOMIC)")?;
        self.inner.atomic_write(&file.inner, off, data)
    }

    fn drop_unsynced(&self, file: &Self::File) -> HostFsResult<()> {
        self.inner.drop_unsynced(&file.inner)
    }

    fn symlink(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        self.inner.symlink(target, path)
    }
    fn readlink(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        self.inner.readlink(path)
    }
    fn mknod(&self, path: &Path, kind: crate::NodeKind, perm: u32, rdev: u64) -> HostFsResult<()> {
        self.inner.mknod(path, kind, perm, rdev)
    }
    fn rename_with(&self, from: &Path, to: &Path, how: crate::RenameHow) -> HostFsResult<()> {
        self.inner.rename_with(from, to, how)
    }
    fn set_owner(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> HostFsResult<()> {
        self.inner.set_owner(path, uid, gid)
    }
    fn set_link_times(
        &self,
        path: &Path,
        atime: Option<u64>,
        mtime: Option<u64>,
    ) -> HostFsResult<()> {
        self.inner.set_link_times(path, atime, mtime)
    }
    fn sync_node(&self, path: &Path) -> HostFsResult<()> {
        self.inner.sync_node(path)
    }
    fn get_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        self.inner.get_xattr(path, name)
    }
    fn set_xattr(
        &self,
        path: &Path,
        name: &[u8],
        value: &[u8],
        how: crate::XattrHow,
    ) -> HostFsResult<()> {
        self.inner.set_xattr(path, name, value, how)
    }
    fn list_xattr(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        self.inner.list_xattr(path)
    }
    fn remove_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        self.inner.remove_xattr(path, name)
    }
    fn fallocate(
        &self,
        file: &Self::File,
        how: crate::FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.fail(FaultOp::Write, &file.path, "fallocate")?;
        self.inner.fallocate(&file.inner, how, off, len)
    }
}
