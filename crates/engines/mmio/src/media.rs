//! The media of the engine besides the log pool: the host files, reached through
//! [`FileMedia`]. [`HostMedia`](crate::HostMedia) (src/host.rs) is any `hostfs::HostFs` store
//! directory — the jailed real one in a real store; [`SimMedia`] is a namespace whose
//! directory operations are durable when they return and whose file contents are
//! fixed-capacity extents of one [`SimRegion`], so that crash images of the file contents and
//! of the log pool (another [`Window`] of the same region) come from one simulator.

use pmem::{Region, RegionStats, SimRegion};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use store::{FileKind, TimeNs};

/// Name of the file in the host directory that ties it to its log pool (holds the store id).
pub const MARKER_NAME: &str = ".atomfs-mmio";

/// Attributes of a host file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaStat {
    /// Persistent identity (inode number on a real file system).
    pub id: u64,
    pub kind: FileKind,
    pub len: u64,
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: TimeNs,
    pub mtime: TimeNs,
    pub ctime: TimeNs,
}

/// Host files: namespace operations (each durable when it returns), lengths, and whole-file
/// mappings as a [`Region`]. Paths are relative to the store's directory ("" is the root).
pub trait FileMedia: Send + Sync + 'static {
    /// The mapping of one file.
    type Map: Region;
    fn describe(&self) -> String;
    fn stat(&self, rel: &Path) -> io::Result<MediaStat>;
    /// Create an empty file (fails when the name exists); durable with its directory entry.
    fn create(&self, rel: &Path, perm: u32) -> io::Result<MediaStat>;
    fn mkdir(&self, rel: &Path, perm: u32) -> io::Result<MediaStat>;
    fn unlink(&self, rel: &Path) -> io::Result<()>;
    fn rmdir(&self, rel: &Path) -> io::Result<()>;
    /// rename(2): atomic, replaces the target, durable when it returns.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn read_dir(&self, rel: &Path) -> io::Result<Vec<(Vec<u8>, MediaStat)>>;
    /// Change the length (zero-filling a growth); durable when it returns.
    fn set_len(&self, rel: &Path, len: u64) -> io::Result<()>;
    fn set_perm(&self, rel: &Path, perm: u32) -> io::Result<()>;
    fn set_times(&self, rel: &Path, atime: Option<TimeNs>, mtime: Option<TimeNs>)
        -> io::Result<()>;
    /// Map the file whole: at least `len_min` bytes (possibly past the end, so that growth
    /// rarely needs a remap); the mapping's `len()` says how much.
    fn map(&self, rel: &Path, len_min: u64) -> io::Result<Self::Map>;
    /// Error of the last failed write-back of a mapping (msync), if any.
    fn check_map(&self, map: &Self::Map) -> io::Result<()>;
    /// Every file, as (id, path), to find the files named by per-file metadata at recovery.
    fn walk(&self) -> io::Result<Vec<(u64, PathBuf)>>;
    /// Space of the host file system: (block size, blocks total, blocks free).
    fn space(&self) -> io::Result<(u64, u64, u64)>;
    /// The store id written in the directory at format time.
    fn marker(&self) -> io::Result<Option<u64>>;
    fn set_marker(&self, store_id: u64) -> io::Result<()>;
}

pub fn rel_path(components: &[Vec<u8>]) -> PathBuf {
    let mut p = PathBuf::new();
    for c in components {
        p.push(OsStr::from_bytes(c));
    }
    p
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

// ---------------------------------------------------------------------------------------------
// A window of a region.

/// `[base, base + len)` of a shared region, as a region of its own.
pub struct Window<R: Region> {
    region: Arc<R>,
    base: u64,
    len: u64,
}

impl<R: Region> Window<R> {
    pub fn new(region: Arc<R>, base: u64, len: u64) -> Self {
        pmem::check_range(region.len(), base, len);
        Window { region, base, len }
    }
    fn at(&self, off: u64, len: u64) -> u64 {
        pmem::check_range(self.len, off, len);
        self.base + off
    }
}

impl<R: Region> Region for Window<R> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        self.region.read(self.at(off, buf.len() as u64), buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        self.region.write(self.at(off, data.len() as u64), data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.region.fill(self.at(off, len), len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.region.write_nt(self.at(off, data.len() as u64), data)
    }
    fn load_u64(&self, off: u64) -> u64 {
        self.region.load_u64(self.at(off, 8))
    }
    fn store_u64(&self, off: u64, value: u64) {
        self.region.store_u64(self.at(off, 8), value)
    }
    fn flush(&self, off: u64, len: u64) {
        self.region.flush(self.at(off, len), len)
    }
    fn fence(&self) {
        self.region.fence()
    }
    fn stats(&self) -> RegionStats {
        self.region.stats()
    }
}

// ---------------------------------------------------------------------------------------------
// Simulated host directory.

#[derive(Clone, Debug)]
struct SimNode {
    kind: FileKind,
    perm: u32,
    parent: u64,
    name: Vec<u8>,
    len: u64,
    extent: Option<u32>,
    children: BTreeMap<Vec<u8>, u64>,
    mtime: TimeNs,
}

/// The durable namespace of a [`SimMedia`] (cloned to open a crash image with it).
#[derive(Clone, Debug)]
pub struct SimNamespace {
    nodes: HashMap<u64, SimNode>,
    next_id: u64,
    free_extents: Vec<u32>,
    marker: Option<u64>,
}

pub const SIM_ROOT_ID: u64 = 2;

impl SimNamespace {
    pub fn new(extents: u32) -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            SIM_ROOT_ID,
            SimNode {
                kind: FileKind::Dir,
                perm: 0o755,
                parent: SIM_ROOT_ID,
                name: Vec::new(),
                len: 0,
                extent: None,
                children: BTreeMap::new(),
                mtime: 0,
            },
        );
        SimNamespace {
            nodes,
            next_id: 3,
            free_extents: (0..extents).rev().collect(),
            marker: None,
        }
    }

    fn lookup(&self, rel: &Path) -> io::Result<u64> {
        let mut id = SIM_ROOT_ID;
        for c in rel.components() {
            let node = self.nodes.get(&id).ok_or_else(|| errno(libc::ENOENT))?;
            if node.kind != FileKind::Dir {
                return Err(errno(libc::ENOTDIR));
            }
            id = *node
                .children
                .get(c.as_os_str().as_bytes())
                .ok_or_else(|| errno(libc::ENOENT))?;
        }
        Ok(id)
    }

    fn split(&self, rel: &Path) -> io::Result<(u64, Vec<u8>)> {
        let name = rel
            .file_name()
            .ok_or_else(|| errno(libc::EINVAL))?
            .as_bytes()
            .to_vec();
        let parent = self.lookup(rel.parent().unwrap_or(Path::new("")))?;
        if self.nodes.get(&parent).map(|n| n.kind) != Some(FileKind::Dir) {
            return Err(errno(libc::ENOTDIR));
        }
        Ok((parent, name))
    }

    fn stat_id(&self, id: u64) -> io::Result<MediaStat> {
        let n = self.nodes.get(&id).ok_or_else(|| errno(libc::ENOENT))?;
        Ok(MediaStat {
            id,
            kind: n.kind,
            len: n.len,
            perm: n.perm,
            nlink: if n.kind == FileKind::Dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            atime: n.mtime,
            mtime: n.mtime,
            ctime: n.mtime,
        })
    }

    fn add(&mut self, rel: &Path, kind: FileKind, perm: u32) -> io::Result<MediaStat> {
        let (parent, name) = self.split(rel)?;
        if self.nodes[&parent].children.contains_key(&name) {
            return Err(errno(libc::EEXIST));
        }
        let extent = if kind == FileKind::File {
            Some(self.free_extents.pop().ok_or_else(|| errno(libc::ENOSPC))?)
        } else {
            None
        };
        let id = self.next_id;
        self.next_id += 1;
        let node = SimNode {
            kind,
            perm: perm & 0o7777,
            parent,
            name: name.clone(),
            len: 0,
            extent,
            children: BTreeMap::new(),
            mtime: store::now_ns(),
        };
        self.nodes.insert(id, node);
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.children.insert(name, id);
        }
        self.stat_id(id)
    }

    fn remove(&mut self, id: u64) {
        if let Some(node) = self.nodes.remove(&id) {
            if let Some(p) = self.nodes.get_mut(&node.parent) {
                p.children.remove(&node.name);
            }
            if let Some(e) = node.extent {
                self.free_extents.push(e);
            }
        }
    }

    fn path_of(&self, mut id: u64) -> PathBuf {
        let mut parts = Vec::new();
        while id != SIM_ROOT_ID {
            match self.nodes.get(&id) {
                Some(n) => {
                    parts.push(n.name.clone());
                    id = n.parent;
                }
                None => break,
            }
        }
        parts.reverse();
        rel_path(&parts)
    }
}

/// Bytes of one of the two namespace slots at the start of a [`SimMedia`] area.
pub const SIM_NS_SLOT_LEN: u64 = 64 << 10;

/// The simulated host directory (see the module documentation). Its area of the region:
/// two namespace slots of [`SIM_NS_SLOT_LEN`] bytes (the namespace, serialised, with a
/// sequence number and a checksum: every namespace operation writes the other slot and
/// persists it, so a crash leaves the old or the new namespace whole), then the file extents.
pub struct SimMedia {
    region: Arc<SimRegion>,
    ns_base: u64,
    base: u64,
    file_capacity: u64,
    ns: Arc<Mutex<SimNamespace>>,
    /// (Highest sequence number ever written, slot of the current namespace): serialises
    /// saves in namespace order. A sequence number is never reused (a crash may have left a
    /// half-written slot with it), and a save never overwrites the current slot.
    saved: Mutex<(u64, u64)>,
}

impl SimMedia {
    /// Bytes a media of `extents` files of `file_capacity` bytes takes in its region.
    pub fn area_len(file_capacity: u64, extents: u32) -> u64 {
        2 * SIM_NS_SLOT_LEN + file_capacity * extents as u64
    }

    /// Format an empty directory in `region` at `base` (see [`SimMedia::area_len`]).
    pub fn new(region: Arc<SimRegion>, base: u64, file_capacity: u64, extents: u32) -> Self {
        pmem::check_range(region.len(), base, Self::area_len(file_capacity, extents));
        let media = SimMedia {
            region,
            ns_base: base,
            base: base + 2 * SIM_NS_SLOT_LEN,
            file_capacity,
            ns: Arc::new(Mutex::new(SimNamespace::new(extents))),
            saved: Mutex::new((0, 0)),
        };
        let ns = media.lock();
        // An empty namespace always fits a slot.
        let _ = media.save(ns);
        media
    }

    /// Open the directory saved in `region` at `base` (for example in a crash image).
    pub fn open(
        region: Arc<SimRegion>,
        base: u64,
        file_capacity: u64,
        extents: u32,
    ) -> io::Result<Self> {
        pmem::check_range(region.len(), base, Self::area_len(file_capacity, extents));
        let mut best: Option<(u64, SimNamespace, u64)> = None;
        let mut seq_max = 0;
        for slot in 0..2 {
            let at = base + slot * SIM_NS_SLOT_LEN;
            let mut head = [0u8; 16];
            region.read(at, &mut head);
            let seq = u64::from_le_bytes(head[0..8].try_into().unwrap_or([0; 8]));
            seq_max = seq_max.max(seq);
            let len = u32::from_le_bytes(head[8..12].try_into().unwrap_or([0; 4])) as u64;
            let crc = u32::from_le_bytes(head[12..16].try_into().unwrap_or([0; 4]));
            if seq == 0 || len > SIM_NS_SLOT_LEN - 16 {
                continue;
            }
            let mut payload = vec![0u8; len as usize];
            region.read(at + 16, &mut payload);
            if ns_checksum(seq, &payload) != crc || best.as_ref().is_some_and(|(b, _, _)| *b > seq)
            {
                continue;
            }
            if let Some(ns) = SimNamespace::decode(&payload, extents) {
                best = Some((seq, ns, slot));
            }
        }
        let (_, ns, slot) = best.ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no valid simulated namespace")
        })?;
        Ok(SimMedia {
            region,
            ns_base: base,
            base: base + 2 * SIM_NS_SLOT_LEN,
            file_capacity,
            ns: Arc::new(Mutex::new(ns)),
            saved: Mutex::new((seq_max, slot)),
        })
    }

    /// A copy of the namespace.
    pub fn namespace(&self) -> SimNamespace {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimNamespace> {
        self.ns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Persist the namespace (consumes the guard: saves happen in namespace order).
    fn save(&self, ns: std::sync::MutexGuard<'_, SimNamespace>) -> io::Result<()> {
        let payload = ns.encode();
        let mut saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        drop(ns);
        if payload.len() as u64 > SIM_NS_SLOT_LEN - 16 {
            return Err(errno(libc::ENOSPC));
        }
        let seq = saved.0 + 1;
        let slot = 1 - saved.1;
        let at = self.ns_base + slot * SIM_NS_SLOT_LEN;
        let mut head = [0u8; 16];
        head[0..8].copy_from_slice(&seq.to_le_bytes());
        head[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        head[12..16].copy_from_slice(&ns_checksum(seq, &payload).to_le_bytes());
        self.region.write(at, &head);
        self.region.write(at + 16, &payload);
        // persist: the directory operation is durable when it returns (as fsync of the
        // directory makes it on a real file system); a torn slot fails its checksum.
        self.region.persist(at, 16 + payload.len() as u64);
        *saved = (seq, slot);
        Ok(())
    }
}

/// Checksum of a namespace slot: covers the sequence number too (the header's two words may
/// persist separately: a new sequence number over an old slot must not look valid).
fn ns_checksum(seq: u64, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&seq.to_le_bytes()), payload)
}

impl SimNamespace {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&self.next_id.to_le_bytes());
        b.extend_from_slice(&self.marker.unwrap_or(0).to_le_bytes());
        b.push(self.marker.is_some() as u8);
        b.extend_from_slice(&(self.free_extents.len() as u32).to_le_bytes());
        for e in &self.free_extents {
            b.extend_from_slice(&e.to_le_bytes());
        }
        b.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        let mut ids: Vec<_> = self.nodes.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let n = &self.nodes[&id];
            b.extend_from_slice(&id.to_le_bytes());
            b.push(match n.kind {
                FileKind::File => 0,
                FileKind::Dir => 1,
                FileKind::Symlink => 2,
            });
            b.extend_from_slice(&n.perm.to_le_bytes());
            b.extend_from_slice(&n.parent.to_le_bytes());
            b.extend_from_slice(&n.len.to_le_bytes());
            b.extend_from_slice(&n.extent.unwrap_or(u32::MAX).to_le_bytes());
            b.extend_from_slice(&n.mtime.to_le_bytes());
            b.extend_from_slice(&(n.name.len() as u16).to_le_bytes());
            b.extend_from_slice(&n.name);
        }
        b
    }

    fn decode(b: &[u8], extents: u32) -> Option<SimNamespace> {
        let mut at = 0usize;
        let mut take = |n: usize| -> Option<&[u8]> {
            let s = b.get(at..at + n)?;
            at += n;
            Some(s)
        };
        let u64_of = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
        let u32_of = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap_or([0; 4]));
        let next_id = u64_of(take(8)?);
        let marker = u64_of(take(8)?);
        let has_marker = take(1)?[0] == 1;
        let free_count = u32_of(take(4)?) as usize;
        let mut free_extents = Vec::new();
        for _ in 0..free_count.min(extents as usize) {
            free_extents.push(u32_of(take(4)?));
        }
        let count = u32_of(take(4)?) as usize;
        let mut nodes = HashMap::new();
        for _ in 0..count {
            let id = u64_of(take(8)?);
            let kind = match take(1)?[0] {
                0 => FileKind::File,
                1 => FileKind::Dir,
                _ => FileKind::Symlink,
            };
            let perm = u32_of(take(4)?);
            let parent = u64_of(take(8)?);
            let len = u64_of(take(8)?);
            let extent = Some(u32_of(take(4)?)).filter(|&e| e != u32::MAX && e < extents);
            let mtime = u64_of(take(8)?);
            let name_len = u16::from_le_bytes(take(2)?.try_into().unwrap_or([0; 2])) as usize;
            let name = take(name_len)?.to_vec();
            let node = SimNode {
                kind,
                perm,
                parent,
                name,
                len,
                extent,
                children: BTreeMap::new(),
                mtime,
            };
            nodes.insert(id, node);
        }
        let links: Vec<(u64, u64, Vec<u8>)> = nodes
            .iter()
            .filter(|(&id, _)| id != SIM_ROOT_ID)
            .map(|(&id, n)| (n.parent, id, n.name.clone()))
            .collect();
        for (parent, id, name) in links {
            nodes.get_mut(&parent)?.children.insert(name, id);
        }
        nodes.get(&SIM_ROOT_ID)?;
        Some(SimNamespace {
            nodes,
            next_id,
            free_extents,
            marker: has_marker.then_some(marker),
        })
    }
}

impl FileMedia for SimMedia {
    type Map = Window<SimRegion>;

    fn describe(&self) -> String {
        "simulated host directory".into()
    }

    fn stat(&self, rel: &Path) -> io::Result<MediaStat> {
        let ns = self.lock();
        ns.stat_id(ns.lookup(rel)?)
    }

    fn create(&self, rel: &Path, perm: u32) -> io::Result<MediaStat> {
        let mut ns = self.lock();
        let st = ns.add(rel, FileKind::File, perm)?;
        self.save(ns)?;
        Ok(st)
    }

    fn mkdir(&self, rel: &Path, perm: u32) -> io::Result<MediaStat> {
        let mut ns = self.lock();
        let st = ns.add(rel, FileKind::Dir, perm)?;
        self.save(ns)?;
        Ok(st)
    }

    fn unlink(&self, rel: &Path) -> io::Result<()> {
        let mut ns = self.lock();
        let id = ns.lookup(rel)?;
        if ns.nodes[&id].kind == FileKind::Dir {
            return Err(errno(libc::EISDIR));
        }
        ns.remove(id);
        self.save(ns)
    }

    fn rmdir(&self, rel: &Path) -> io::Result<()> {
        let mut ns = self.lock();
        let id = ns.lookup(rel)?;
        let node = &ns.nodes[&id];
        if node.kind != FileKind::Dir {
            return Err(errno(libc::ENOTDIR));
        }
        if !node.children.is_empty() {
            return Err(errno(libc::ENOTEMPTY));
        }
        if id == SIM_ROOT_ID {
            return Err(errno(libc::EBUSY));
        }
        ns.remove(id);
        self.save(ns)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut ns = self.lock();
        let id = ns.lookup(from)?;
        let (new_parent, new_name) = ns.split(to)?;
        if let Some(&old) = ns.nodes[&new_parent].children.get(&new_name) {
            if old == id {
                return Ok(());
            }
            let (ok, ek) = (ns.nodes[&old].kind, ns.nodes[&id].kind);
            if ok == FileKind::Dir && !ns.nodes[&old].children.is_empty() {
                return Err(errno(libc::ENOTEMPTY));
            }
            if ok == FileKind::Dir && ek != FileKind::Dir {
                return Err(errno(libc::EISDIR));
            }
            if ok != FileKind::Dir && ek == FileKind::Dir {
                return Err(errno(libc::ENOTDIR));
            }
            ns.remove(old);
        }
        let (parent, name) = {
            let n = &ns.nodes[&id];
            (n.parent, n.name.clone())
        };
        if let Some(p) = ns.nodes.get_mut(&parent) {
            p.children.remove(&name);
        }
        if let Some(p) = ns.nodes.get_mut(&new_parent) {
            p.children.insert(new_name.clone(), id);
        }
        if let Some(n) = ns.nodes.get_mut(&id) {
            n.parent = new_parent;
            n.name = new_name;
        }
        self.save(ns)
    }

    fn read_dir(&self, rel: &Path) -> io::Result<Vec<(Vec<u8>, MediaStat)>> {
        let ns = self.lock();
        let id = ns.lookup(rel)?;
        let node = &ns.nodes[&id];
        if node.kind != FileKind::Dir {
            return Err(errno(libc::ENOTDIR));
        }
        node.children
            .iter()
            .map(|(name, &c)| Ok((name.clone(), ns.stat_id(c)?)))
            .collect()
    }

    fn set_len(&self, rel: &Path, len: u64) -> io::Result<()> {
        let (extent, old) = {
            let ns = self.lock();
            let id = ns.lookup(rel)?;
            let node = &ns.nodes[&id];
            (node.extent.ok_or_else(|| errno(libc::EISDIR))?, node.len)
        };
        if len > self.file_capacity {
            return Err(errno(libc::EFBIG));
        }
        if len > old {
            // persist: the growth reads as zeros before the new length is durable (the
            // namespace lock is not held: a fence hook may snapshot the namespace).
            let at = self.base + extent as u64 * self.file_capacity + old;
            self.region.fill(at, len - old, 0);
            self.region.persist(at, len - old);
        }
        let mut ns = self.lock();
        let id = ns.lookup(rel)?;
        if let Some(n) = ns.nodes.get_mut(&id) {
            n.len = len;
            n.mtime = store::now_ns();
        }
        self.save(ns)
    }

    fn set_perm(&self, rel: &Path, perm: u32) -> io::Result<()> {
        let mut ns = self.lock();
        let id = ns.lookup(rel)?;
        if let Some(n) = ns.nodes.get_mut(&id) {
            n.perm = perm & 0o7777;
        }
        self.save(ns)
    }

    fn set_times(
        &self,
        rel: &Path,
        _atime: Option<TimeNs>,
        mtime: Option<TimeNs>,
    ) -> io::Result<()> {
        let mut ns = self.lock();
        let id = ns.lookup(rel)?;
        if let (Some(n), Some(m)) = (ns.nodes.get_mut(&id), mtime) {
            n.mtime = m;
        }
        self.save(ns)
    }

    fn map(&self, rel: &Path, len_min: u64) -> io::Result<Window<SimRegion>> {
        let ns = self.lock();
        let id = ns.lookup(rel)?;
        let extent = ns.nodes[&id].extent.ok_or_else(|| errno(libc::EISDIR))?;
        if len_min > self.file_capacity {
            return Err(errno(libc::EFBIG));
        }
        Ok(Window::new(
            self.region.clone(),
            self.base + extent as u64 * self.file_capacity,
            self.file_capacity,
        ))
    }

    fn check_map(&self, _map: &Window<SimRegion>) -> io::Result<()> {
        Ok(())
    }

    fn walk(&self) -> io::Result<Vec<(u64, PathBuf)>> {
        let ns = self.lock();
        Ok(ns
            .nodes
            .iter()
            .filter(|(_, n)| n.kind == FileKind::File)
            .map(|(&id, _)| (id, ns.path_of(id)))
            .collect())
    }

    fn space(&self) -> io::Result<(u64, u64, u64)> {
        let ns = self.lock();
        let block = 4096;
        let used: u64 = ns
            .nodes
            .values()
            .filter(|n| n.extent.is_some())
            .map(|n| n.len.div_ceil(block))
            .sum();
        let total = self.file_capacity / block
            * (ns.free_extents.len() as u64
                + ns.nodes.values().filter(|n| n.extent.is_some()).count() as u64);
        Ok((block, total, total.saturating_sub(used)))
    }

    fn marker(&self) -> io::Result<Option<u64>> {
        Ok(self.lock().marker)
    }

    fn set_marker(&self, store_id: u64) -> io::Result<()> {
        let mut ns = self.lock();
        ns.marker = Some(store_id);
        self.save(ns)
    }
}

impl SimNamespace {
    /// (path, length) of every file (for tests and tools).
    pub fn file_lens(&self) -> Vec<(PathBuf, u64)> {
        let mut v: Vec<_> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.kind == FileKind::File)
            .map(|(&id, n)| (self.path_of(id), n.len))
            .collect();
        v.sort();
        v
    }
}
