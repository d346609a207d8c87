//! [`CutHost`]: the host model of a host-file engine's crash target (mmio, journal, cache),
//! behind a lock that gives the crash target consistent cuts when several threads run the
//! store.
//!
//! The crash target pairs each PM pool image (taken at a fence) with a crash point of the
//! host model. With one thread the two are taken at the same moment; with several, another
//! thread may change the host between them, and the pair is then no state a real crash can
//! leave (an intent cleared in the pool while its host operation is missing from the host).
//! Every host operation and mapped store holds the lock shared; a fence of the log pool
//! holds it exclusively while it records the host's crash point and fences, so the host
//! stands still from the recording until the harness has taken the fence's images.

use super::{SimFile, SimHostFs, SimMap};
use crate::{Capabilities, DirEntry, HostFs, HostFsResult, OpenOptions, Stat, StatFs};
use parking_lot::RwLock;
use pmem::{Region, RegionStats};
use std::path::Path;
use std::sync::Arc;

/// A [`SimHostFs`] whose operations hold `cut` shared.
#[derive(Clone)]
pub struct CutHost {
    pub fs: SimHostFs,
    pub cut: Arc<RwLock<()>>,
}

/// A mapping of a [`CutHost`] file: stores and fences hold the cut shared.
pub struct CutMap {
    map: SimMap,
    cut: Arc<RwLock<()>>,
}

impl Region for CutMap {
    fn len(&self) -> u64 {
        self.map.len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        self.map.read(off, buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        let _cut = self.cut.read();
        self.map.write(off, data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        let _cut = self.cut.read();
        self.map.fill(off, len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        let _cut = self.cut.read();
        self.map.write_nt(off, data)
    }
    fn load_u64(&self, off: u64) -> u64 {
        self.map.load_u64(off)
    }
    fn store_u64(&self, off: u64, value: u64) {
        let _cut = self.cut.read();
        self.map.store_u64(off, value)
    }
    fn flush(&self, off: u64, len: u64) {
        self.map.flush(off, len)
    }
    fn fence(&self) {
        let _cut = self.cut.read();
        self.map.fence()
    }
    fn stats(&self) -> RegionStats {
        self.map.stats()
    }
}

impl HostFs for CutHost {
    type File = SimFile;
    type Map = CutMap;

    fn root(&self) -> &Path {
        self.fs.root()
    }
    fn capabilities(&self) -> Capabilities {
        self.fs.capabilities()
    }
    fn open(&self, path: &Path, options: &OpenOptions) -> HostFsResult<SimFile> {
        let _cut = self.cut.read();
        self.fs.open(path, options)
    }
    fn read_at(&self, file: &SimFile, off: u64, buf: &mut [u8]) -> HostFsResult<usize> {
        self.fs.read_at(file, off, buf)
    }
    fn write_at(&self, file: &SimFile, off: u64, data: &[u8]) -> HostFsResult<usize> {
        let _cut = self.cut.read();
        self.fs.write_at(file, off, data)
    }
    fn set_len(&self, file: &SimFile, len: u64) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.set_len(file, len)
    }
    fn file_stat(&self, file: &SimFile) -> HostFsResult<Stat> {
        self.fs.file_stat(file)
    }
    fn sync_data(&self, file: &SimFile) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.sync_data(file)
    }
    fn sync_all(&self, file: &SimFile) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.sync_all(file)
    }
    fn sync_dir(&self, dir: &Path) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.rename(from, to)
    }
    fn unlink(&self, path: &Path) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.unlink(path)
    }
    fn link(&self, existing: &Path, new: &Path) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.link(existing, new)
    }
    fn mkdir(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.mkdir(path, perm)
    }
    fn rmdir(&self, path: &Path) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.rmdir(path)
    }
    fn read_dir(&self, dir: &Path) -> HostFsResult<Vec<DirEntry>> {
        self.fs.read_dir(dir)
    }
    fn stat(&self, path: &Path) -> HostFsResult<Stat> {
        self.fs.stat(path)
    }
    fn set_perm(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.set_perm(path, perm)
    }
    fn set_times(&self, path: &Path, atime: Option<u64>, mtime: Option<u64>) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.set_times(path, atime, mtime)
    }
    fn statfs(&self) -> HostFsResult<StatFs> {
        self.fs.statfs()
    }
    fn map(&self, file: &SimFile, len: u64) -> HostFsResult<CutMap> {
        Ok(CutMap {
            map: self.fs.map(file, len)?,
            cut: self.cut.clone(),
        })
    }
    fn check_map(&self, map: &CutMap) -> HostFsResult<()> {
        self.fs.check_map(&map.map)
    }
    fn clone_range(
        &self,
        src: &SimFile,
        src_off: u64,
        dst: &SimFile,
        dst_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.clone_range(src, src_off, dst, dst_off, len)
    }
    fn exchange_range(
        &self,
        a: &SimFile,
        a_off: u64,
        b: &SimFile,
        b_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.exchange_range(a, a_off, b, b_off, len)
    }
    fn atomic_write(&self, file: &SimFile, off: u64, data: &[u8]) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.atomic_write(file, off, data)
    }
    fn drop_unsynced(&self, file: &SimFile) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.drop_unsynced(file)
    }

    fn symlink(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.symlink(target, path)
    }
    fn readlink(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        self.fs.readlink(path)
    }
    fn mknod(&self, path: &Path, kind: crate::NodeKind, perm: u32, rdev: u64) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.mknod(path, kind, perm, rdev)
    }
    fn rename_with(&self, from: &Path, to: &Path, how: crate::RenameHow) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.rename_with(from, to, how)
    }
    fn set_owner(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.set_owner(path, uid, gid)
    }
    fn set_link_times(
        &self,
        path: &Path,
        atime: Option<u64>,
        mtime: Option<u64>,
    ) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.set_link_times(path, atime, mtime)
    }
    fn sync_node(&self, path: &Path) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.sync_node(path)
    }
    fn get_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        self.fs.get_xattr(path, name)
    }
    fn set_xattr(
        &self,
        path: &Path,
        name: &[u8],
        value: &[u8],
        how: crate::XattrHow,
    ) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.set_xattr(path, name, value, how)
    }
    fn list_xattr(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        self.fs.list_xattr(path)
    }
    fn remove_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.remove_xattr(path, name)
    }
    fn fallocate(
        &self,
        file: &Self::File,
        how: crate::FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        let _cut = self.cut.read();
        self.fs.fallocate(file, how, off, len)
    }
}
