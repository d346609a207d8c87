//! Hostile log pools through open (recovery) and a few operations: the shared entry point of
//! the `mmio_open` fuzz target (fuzz/fuzz_targets/mmio_open.rs, by a `#[path]` include) and
//! of `tests/hostile_pools.rs`, which runs it over a few hundred mutated images in
//! `cargo test`.
//!
//! Base images are valid log pools with their host directories (over `SimRegion` and
//! `SimHostFs`), taken at a crash of a store with committed entries not yet checkpointed,
//! with an open multi-file transaction holding namespace intents, and with uncommitted
//! O_ATOMIC writes. An input is a list of 13-byte mutations of the pool bytes (op, offset,
//! value), each aimed at one area of the pool; op bit 7 re-seals every checksum after them,
//! so that field values (paths of intent records, entry offsets, epochs) reach the code that
//! acts on them instead of stopping at a checksum.
//!
//! Oracle: open returns Ok or a clean error (never a panic or an assertion); when it opens,
//! fsck, reading every file, a write, a transaction with a create and a rename, unmount and a
//! reopen never panic either; and every path the engine hands the host file system — at
//! recovery and after — is relative to the store directory, without `..`, `.` or NUL
//! (`hostfs::RelPath`), so no log pool can make the engine reach outside its directory.

#![allow(dead_code)]

use hostfs::{
    Capabilities, DirEntry, FallocateHow, HostFs, HostFsResult, HostImage, NodeKind, OpenOptions,
    RelPath, RenameHow, SimConfig, SimHostFs, Stat, StatFs, XattrHow,
};
use mmio::log::layout::{self, Superblock};
use mmio::{HostMedia, MmioConfig, MmioStore, PolicyMode};
use pmem::SimRegion;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use store::{OpenOptions as StoreOpen, Store, ROOT_INO};

/// A host file system that records every path it is asked about.
#[derive(Clone)]
pub struct Recording<F: HostFs> {
    inner: F,
    paths: Arc<Mutex<Vec<PathBuf>>>,
}

impl<F: HostFs> Recording<F> {
    pub fn new(inner: F) -> Self {
        Recording {
            inner,
            paths: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn saw(&self, p: &Path) {
        if let Ok(mut v) = self.paths.lock() {
            v.push(p.to_path_buf());
        }
    }

    /// The recorded paths that name something outside the store directory.
    pub fn escapes(&self) -> Vec<PathBuf> {
        let v = self.paths.lock().map(|v| v.clone()).unwrap_or_default();
        v.into_iter().filter(|p| RelPath::dir(p).is_err()).collect()
    }

    /// How many paths were recorded.
    pub fn seen(&self) -> usize {
        self.paths.lock().map(|v| v.len()).unwrap_or(0)
    }
}

impl<F: HostFs> HostFs for Recording<F> {
    type File = F::File;
    type Map = F::Map;
    fn root(&self) -> &Path {
        self.inner.root()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn open(&self, path: &Path, options: &OpenOptions) -> HostFsResult<Self::File> {
        self.saw(path);
        self.inner.open(path, options)
    }
    fn read_at(&self, file: &Self::File, off: u64, buf: &mut [u8]) -> HostFsResult<usize> {
        self.inner.read_at(file, off, buf)
    }
    fn write_at(&self, file: &Self::File, off: u64, data: &[u8]) -> HostFsResult<usize> {
        self.inner.write_at(file, off, data)
    }
    fn set_len(&self, file: &Self::File, len: u64) -> HostFsResult<()> {
        self.inner.set_len(file, len)
    }
    fn file_stat(&self, file: &Self::File) -> HostFsResult<Stat> {
        self.inner.file_stat(file)
    }
    fn sync_data(&self, file: &Self::File) -> HostFsResult<()> {
        self.inner.sync_data(file)
    }
    fn sync_all(&self, file: &Self::File) -> HostFsResult<()> {
        self.inner.sync_all(file)
    }
    fn sync_dir(&self, dir: &Path) -> HostFsResult<()> {
        self.saw(dir);
        self.inner.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> HostFsResult<()> {
        self.saw(from);
        self.saw(to);
        self.inner.rename(from, to)
    }
    fn unlink(&self, path: &Path) -> HostFsResult<()> {
        self.saw(path);
        self.inner.unlink(path)
    }
    fn link(&self, existing: &Path, new: &Path) -> HostFsResult<()> {
        self.saw(existing);
        self.saw(new);
        self.inner.link(existing, new)
    }
    fn mkdir(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        self.saw(path);
        self.inner.mkdir(path, perm)
    }
    fn rmdir(&self, path: &Path) -> HostFsResult<()> {
        self.saw(path);
        self.inner.rmdir(path)
    }
    fn read_dir(&self, dir: &Path) -> HostFsResult<Vec<DirEntry>> {
        self.saw(dir);
        self.inner.read_dir(dir)
    }
    fn stat(&self, path: &Path) -> HostFsResult<Stat> {
        self.saw(path);
        self.inner.stat(path)
    }
    fn set_perm(&self, path: &Path, perm: u32) -> HostFsResult<()> {
        self.saw(path);
        self.inner.set_perm(path, perm)
    }
    fn set_times(&self, path: &Path, atime: Option<u64>, mtime: Option<u64>) -> HostFsResult<()> {
        self.saw(path);
        self.inner.set_times(path, atime, mtime)
    }
    fn statfs(&self) -> HostFsResult<StatFs> {
        self.inner.statfs()
    }
    fn map(&self, file: &Self::File, len: u64) -> HostFsResult<Self::Map> {
        self.inner.map(file, len)
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
        self.inner.clone_range(src, src_off, dst, dst_off, len)
    }
    fn exchange_range(
        &self,
        a: &Self::File,
        a_off: u64,
        b: &Self::File,
        b_off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.inner.exchange_range(a, a_off, b, b_off, len)
    }
    fn atomic_write(&self, file: &Self::File, off: u64, data: &[u8]) -> HostFsResult<()> {
        self.inner.atomic_write(file, off, data)
    }
    fn symlink(&self, target: &[u8], path: &Path) -> HostFsResult<()> {
        self.saw(path);
        self.inner.symlink(target, path)
    }
    fn readlink(&self, path: &Path) -> HostFsResult<Vec<u8>> {
        self.saw(path);
        self.inner.readlink(path)
    }
    fn mknod(&self, path: &Path, kind: NodeKind, perm: u32, rdev: u64) -> HostFsResult<()> {
        self.saw(path);
        self.inner.mknod(path, kind, perm, rdev)
    }
    fn rename_with(&self, from: &Path, to: &Path, how: RenameHow) -> HostFsResult<()> {
        self.saw(from);
        self.saw(to);
        self.inner.rename_with(from, to, how)
    }
    fn set_owner(&self, path: &Path, uid: Option<u32>, gid: Option<u32>) -> HostFsResult<()> {
        self.saw(path);
        self.inner.set_owner(path, uid, gid)
    }
    fn set_link_times(
        &self,
        path: &Path,
        atime: Option<u64>,
        mtime: Option<u64>,
    ) -> HostFsResult<()> {
        self.saw(path);
        self.inner.set_link_times(path, atime, mtime)
    }
    fn sync_node(&self, path: &Path) -> HostFsResult<()> {
        self.saw(path);
        self.inner.sync_node(path)
    }
    fn get_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<Vec<u8>> {
        self.saw(path);
        self.inner.get_xattr(path, name)
    }
    fn set_xattr(&self, path: &Path, name: &[u8], value: &[u8], how: XattrHow) -> HostFsResult<()> {
        self.saw(path);
        self.inner.set_xattr(path, name, value, how)
    }
    fn list_xattr(&self, path: &Path) -> HostFsResult<Vec<Vec<u8>>> {
        self.saw(path);
        self.inner.list_xattr(path)
    }
    fn remove_xattr(&self, path: &Path, name: &[u8]) -> HostFsResult<()> {
        self.saw(path);
        self.inner.remove_xattr(path, name)
    }
    fn fallocate(
        &self,
        file: &Self::File,
        how: FallocateHow,
        off: u64,
        len: u64,
    ) -> HostFsResult<()> {
        self.inner.fallocate(file, how, off, len)
    }
    fn drop_unsynced(&self, file: &Self::File) -> HostFsResult<()> {
        self.inner.drop_unsynced(file)
    }
}

/// A valid log pool and its host directory.
#[derive(Clone)]
pub struct Base {
    pub pool: Vec<u8>,
    pub host: HostImage,
}

pub fn config() -> MmioConfig {
    MmioConfig::test_min()
}

type RecStore = MmioStore<Arc<SimRegion>, HostMedia<Recording<SimHostFs>>>;

fn fresh(cfg: &MmioConfig) -> (Arc<SimRegion>, SimHostFs, RecStore) {
    let region = Arc::new(SimRegion::new(cfg.log_pool_len));
    let host = SimHostFs::new(SimConfig::default());
    let media = HostMedia::on(Recording::new(host.clone()));
    let store = MmioStore::create_on(region.clone(), media, cfg).expect("create base store");
    (region, host, store)
}

fn open_rw(s: &dyn Store, path: &str, atomic: bool) -> store::Fh {
    StoreOpen::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(atomic)
        .open(s, path, None)
        .expect("open base file")
}

/// The base images: 0 committed undo entries, 1 committed redo entries, 2 an open
/// transaction with namespace intents, 3 uncommitted O_ATOMIC writes that grow a file.
pub const BASE_KINDS: usize = 4;

fn build_base(kind: usize) -> Base {
    let mut cfg = config();
    if kind == 1 {
        cfg.policy_mode = PolicyMode::Redo;
    }
    let (region, host, s) = fresh(&cfg);
    let d = s.mkdir(ROOT_INO, b"dir", 0o755, None).expect("mkdir");
    let _ = d;
    let a = open_rw(&s, "/a", false);
    let b = open_rw(&s, "/dir/b", false);
    s.write(a, 0, &[7u8; 9000]).expect("write a");
    s.write(b, 100, b"base file b").expect("write b");
    s.write(a, 4096, b"overwritten").expect("overwrite a");
    match kind {
        2 => {
            let tx = s.tx_begin(&[a, b]).expect("tx");
            s.write(a, 10, b"in the transaction").expect("tx write");
            s.set_len(b, 50).expect("tx truncate");
            s.create(ROOT_INO, b"new", 0o644, Some(tx))
                .expect("tx create");
            s.rename(ROOT_INO, b"a", ROOT_INO, b"a2", Some(tx))
                .expect("tx rename");
            s.mkdir(ROOT_INO, b"newdir", 0o755, Some(tx))
                .expect("tx mkdir");
        }
        3 => {
            let c = open_rw(&s, "/c", true);
            s.write(c, 0, &[3u8; 5000]).expect("atomic write");
            s.write(c, 20000, b"far").expect("atomic growth");
        }
        _ => {}
    }
    let base = Base {
        pool: region.cache_image(),
        host: host.live_image(),
    };
    s.crash();
    base
}

pub fn bases() -> &'static Vec<Base> {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| (0..BASE_KINDS).map(build_base).collect())
}

/// Paths no intent record may make the engine use.
const HOSTILE_PATHS: [&[u8]; 8] = [
    b"..",
    b"../escape",
    b"/etc/passwd",
    b"a/../../b",
    b"./a",
    b"",
    b".atomfs-mmio-trash/../../x",
    b"a\0b",
];

/// Bytes one mutation takes: op u8, offset u32, value u64 (little-endian).
pub const MUTATION_LEN: usize = 13;

/// Apply `data`'s mutations to `pool` (laid out as `sb`); returns whether to re-seal.
pub fn mutate(pool: &mut [u8], sb: &Superblock, data: &[u8]) -> bool {
    let mut reseal = false;
    for m in data.chunks_exact(MUTATION_LEN) {
        let op = m[0];
        let off = u32::from_le_bytes([m[1], m[2], m[3], m[4]]) as u64;
        let mut v = [0u8; 8];
        v.copy_from_slice(&m[5..13]);
        let value = u64::from_le_bytes(v);
        reseal |= op & 0x80 != 0;
        let (start, len) = area(sb, op & 7);
        if len == 0 {
            continue;
        }
        let at = (start + off % len) as usize;
        match (op >> 3) & 7 {
            0 => xor_byte(pool, at, value as u8),
            1 => put(pool, at, &value.to_le_bytes()[..1]),
            2 => put(pool, at & !3, &(value as u32).to_le_bytes()),
            3 => put(pool, at & !7, &value.to_le_bytes()),
            4 => hostile_intent_path(pool, sb, off, value),
            5 => put(pool, at & !7, &small(value).to_le_bytes()),
            _ => xor_byte(pool, at, 1 << (value % 8)),
        }
    }
    reseal
}

/// Values near the interesting edges: 0..=3, u64::MAX, u32::MAX, powers of two.
fn small(v: u64) -> u64 {
    match v % 8 {
        0..=3 => v % 4,
        4 => u64::MAX,
        5 => u32::MAX as u64,
        _ => 1u64 << ((v >> 3) % 64),
    }
}

fn area(sb: &Superblock, which: u8) -> (u64, u64) {
    let intent_len = mmio::log::intent::INTENT_LEN;
    match which {
        0 => (0, 128),
        1 => (
            sb.file_meta_off,
            sb.files_max as u64 * layout::FILE_META_LEN,
        ),
        2 => (sb.tx_off, sb.tx_records_max as u64 * layout::TX_RECORD_LEN),
        3 | 4 => (
            sb.index_off,
            sb.index_entries_max as u64 * layout::INDEX_ENTRY_LEN,
        ),
        5 => (sb.intent_off, sb.intents_max as u64 * intent_len),
        6 => (sb.log_off, sb.log_len.min(1 << 16)),
        _ => (layout::HOME_RECORD_OFF, 64),
    }
}

fn xor_byte(pool: &mut [u8], at: usize, x: u8) {
    if let Some(b) = pool.get_mut(at) {
        *b ^= x;
    }
}

fn put(pool: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = pool.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// Intent record `off % intents_max` becomes a valid-looking record (txid `value | 1`) of
/// kind 1..=4 whose first or second path is a hostile one.
fn hostile_intent_path(pool: &mut [u8], sb: &Superblock, off: u64, value: u64) {
    let idx = off % sb.intents_max.max(1) as u64;
    let at = (sb.intent_off + idx * mmio::log::intent::INTENT_LEN) as usize;
    let bad = HOSTILE_PATHS[(value >> 8) as usize % HOSTILE_PATHS.len()];
    let good: &[u8] = b"a";
    let (a, b) = if value & 0x10 != 0 {
        (good, bad)
    } else {
        (bad, good)
    };
    let Some(r) = pool.get_mut(at..at + mmio::log::intent::INTENT_LEN as usize) else {
        return;
    };
    r.fill(0);
    r[0..8].copy_from_slice(&(value | 1).to_le_bytes());
    r[8] = 1 + (value % 4) as u8;
    r[10..12].copy_from_slice(&(a.len() as u16).to_le_bytes());
    r[12..14].copy_from_slice(&(b.len() as u16).to_le_bytes());
    r[16..24].copy_from_slice(&(value >> 4).to_le_bytes());
    r[52..52 + a.len()].copy_from_slice(a);
    r[52 + a.len()..52 + a.len() + b.len()].copy_from_slice(b);
}

fn crc_at(b: &mut [u8], at: usize, crc: u32) {
    b[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Recompute every checksum of the pool (superblock, per-file metadata, transaction records,
/// index entries, intent records) over its current bytes, at `sb`'s offsets.
pub fn reseal(pool: &mut [u8], sb: &Superblock) {
    if pool.len() < sb.metadata_end() as usize {
        return;
    }
    let c = crc32c::crc32c(&pool[16..128]);
    crc_at(pool, 12, c);
    for slot in 0..sb.files_max {
        let at = sb.file_meta_at(slot) as usize;
        let c = layout::file_meta_checksum(word(pool, at + 16), word(pool, at + 24), slot);
        crc_at(pool, at + 56, c);
    }
    for i in 0..sb.tx_records_max {
        let at = sb.tx_at(i) as usize;
        let r = &mut pool[at..at + layout::TX_RECORD_LEN as usize];
        let count = u32::from_le_bytes([r[8], r[9], r[10], r[11]]) as usize;
        if count <= layout::TX_FILES_MAX {
            let c = crc32c::crc32c(&r[16..24 + count * 16]);
            crc_at(r, 12, c);
        }
    }
    for i in 0..sb.index_entries_max {
        let at = sb.index_at(i) as usize;
        let r = &mut pool[at..at + 64];
        let c = crc32c::crc32c_append(crc32c::crc32c(&r[8..32]), &r[0..8]);
        crc_at(r, 40, c);
    }
    for i in 0..sb.intents_max {
        let at = sb.intent_at(i) as usize;
        let r = &mut pool[at..at + mmio::log::intent::INTENT_LEN as usize];
        let c = crc32c::crc32c(&r[8..48]);
        let c = crc32c::crc32c_append(c, &r[52..]);
        let c = crc32c::crc32c_append(c, &r[0..8]);
        crc_at(r, 48, c);
    }
}

/// What one input did (for the tests' tallies).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub opened: bool,
    pub paths_seen: usize,
}

/// Build the image an input names: byte 0 picks the base (low bits), the rest are mutations.
pub fn image_of(data: &[u8]) -> Option<(Vec<u8>, HostImage)> {
    let (&mode, rest) = data.split_first()?;
    let bases = bases();
    let base = &bases[mode as usize % bases.len()];
    let mut pool = base.pool.clone();
    let mut head = [0u8; 128];
    head.copy_from_slice(&pool[..128]);
    let sb = Superblock::decode(&head, pool.len() as u64).expect("base superblock");
    if mutate(&mut pool, &sb, rest) {
        reseal(&mut pool, &sb);
    }
    Some((pool, base.host.clone()))
}

/// Open `pool` over `host` and, if it opens, use the store; panics only on an oracle
/// violation (or a bug: a panic of the engine itself).
pub fn exercise(pool: Vec<u8>, host: &HostImage) -> Outcome {
    let cfg = config();
    let region = Arc::new(SimRegion::from_image(pool));
    let sim = SimHostFs::from_image(host, SimConfig::default());
    let rec = Recording::new(sim.clone());
    let opened = MmioStore::open_on(region.clone(), HostMedia::on(rec.clone()), &cfg);
    let mut outcome = Outcome::default();
    if let Ok(s) = opened {
        outcome.opened = true;
        use_store(&s);
        let _ = s.unmount();
        let again = Arc::new(SimRegion::from_image(region.cache_image()));
        let host2 = Recording::new(SimHostFs::from_image(
            &sim.live_image(),
            SimConfig::default(),
        ));
        if let Ok(s2) = MmioStore::open_on(again, HostMedia::on(host2.clone()), &cfg) {
            let _ = s2.fsck();
            read_tree(&s2);
            let _ = s2.unmount();
        }
        let escapes = host2.escapes();
        assert!(
            escapes.is_empty(),
            "reopen touched paths outside the store: {escapes:?}"
        );
    }
    let escapes = rec.escapes();
    assert!(
        escapes.is_empty(),
        "touched paths outside the store: {escapes:?}"
    );
    outcome.paths_seen = rec.seen();
    outcome
}

fn use_store(s: &RecStore) {
    let _ = s.fsck();
    read_tree(s);
    if let Ok(fh) = StoreOpen::new()
        .read(true)
        .write(true)
        .create(true)
        .open(s, "/after", None)
    {
        let _ = s.write(fh, 0, b"written after recovery");
        let _ = s.fsync(fh, false);
        if let Ok(tx) = s.tx_begin(&[fh]) {
            let _ = s.write(fh, 3, b"tx");
            let _ = s.create(ROOT_INO, b"tx-created", 0o644, Some(tx));
            let _ = s.rename(ROOT_INO, b"after", ROOT_INO, b"renamed", Some(tx));
            let _ = s.tx_commit(tx);
        }
        let _ = s.release(fh);
    }
    let _ = s.checkpoint_all();
    let _ = s.fsck();
}

/// Read every file reachable from the root (bounded: depth, entries and bytes).
fn read_tree(s: &dyn Store) {
    let mut stack = vec![(ROOT_INO, 0u32)];
    let mut visited = 0;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(list) = s.read_dir(dir) else { continue };
        for e in list {
            visited += 1;
            if visited > 256 {
                return;
            }
            match e.kind {
                store::FileKind::Dir if depth < 8 => stack.push((e.ino, depth + 1)),
                store::FileKind::File => read_file(s, e.ino),
                _ => {}
            }
        }
    }
}

fn read_file(s: &dyn Store, ino: store::Ino) {
    let flags = store::OpenFlags {
        read: true,
        write: false,
        append: false,
        atomic: false,
    };
    if let Ok(fh) = s.open(ino, flags) {
        let mut buf = vec![0u8; 64 << 10];
        let mut off = 0u64;
        while off < 1 << 20 {
            match s.read(fh, off, &mut buf) {
                Ok(n) if n > 0 => off += n as u64,
                _ => break,
            }
        }
        let _ = s.release(fh);
    }
}
