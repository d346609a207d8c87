//! Making and opening a store: the pool, the home directory walk, recovery, adoption of
//! home files the cache does not know and removal of records whose home file is gone.

use super::home_conflicts::{settle_conflicts, unsettle_trash};
use super::tx::remove_path;
use super::{CacheStore, Names, Tables, MARKER_NAME, TRASH_NAME};
use crate::cache::Cache;
use crate::format::intent::{Intent, IntentKind};
use crate::home::{host_err, HomeFiles};
use crate::{CacheConfig, Flusher};
use hostfs::{FileKind, HostFs, OpenOptions, RealHostFs};
use parking_lot::Mutex;
use pmem::{MappedRegion, Region};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use store::{Error, Ino, Result, ROOT_INO};

/// A store on a real pool file and a real home directory.
pub type HostCacheStore = CacheStore<MappedRegion, RealHostFs>;

fn pm_err(e: pmem::PmError) -> Error {
    Error::Io {
        path: "cache pool".into(),
        op: "map",
        source: std::io::Error::other(e.to_string()),
    }
}

impl HostCacheStore {
    /// Format a new store: `home` (an existing directory) holds the files, `pool` (a new file
    /// of `pool_len` bytes, best on /dev/shm or DAX) the cache.
    pub fn create(home: &Path, pool: &Path, pool_len: u64, config: &CacheConfig) -> Result<Self> {
        let home = home
            .canonicalize()
            .map_err(|e| Error::NotFound(format!("home directory {}: {e}", home.display())))?;
        let host = RealHostFs::open(&home).map_err(host_err)?;
        let region = MappedRegion::create(pool, pool_len).map_err(pm_err)?;
        Self::create_on(region, host, config, home.as_os_str().as_bytes())
    }

    /// Open the store whose pool file is `pool`, in the home directory its superblock records.
    pub fn open_recorded(pool: &Path, config: &CacheConfig) -> Result<Self> {
        let home = recorded_home(pool)?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: the pool records no home directory",
                pool.display()
            ))
        })?;
        Self::open(&home, pool, config)
    }

    /// Open an existing store, running recovery.
    pub fn open(home: &Path, pool: &Path, config: &CacheConfig) -> Result<Self> {
        let host = RealHostFs::open(home).map_err(|e| match host_err(e) {
            Error::NotFound(m) => Error::NotFound(format!("home directory missing: {m}")),
            other => other,
        })?;
        let region = MappedRegion::open(pool).map_err(pm_err)?;
        Self::open_on(region, host, config).map_err(|e| match e {
            Error::NotPermitted(m) => {
                Error::NotPermitted(m.replace(" POOL ", &format!(" {} ", pool.display())))
            }
            other => other,
        })
    }
}

/// The home directory recorded in the superblock of the pool file `pool` (read only).
pub fn recorded_home(pool: &Path) -> Result<Option<PathBuf>> {
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let mut f = std::fs::File::open(pool).map_err(|e| Error::Io {
        path: pool.display().to_string(),
        op: "open",
        source: e,
    })?;
    let n = f.read(&mut head).map_err(|e| Error::Io {
        path: pool.display().to_string(),
        op: "read",
        source: e,
    })?;
    let sb = crate::format::Superblock::decode(&head[..n])?;
    if sb.home().is_empty() {
        return Ok(None);
    }
    Ok(Some(PathBuf::from(OsStr::from_bytes(sb.home()))))
}

impl<R: Region, H: HostFs> CacheStore<R, H> {
    /// Format `region` as a new store over the (empty or existing) home `host`.
    pub fn create_on(region: R, host: H, config: &CacheConfig, home: &[u8]) -> Result<Self> {
        let host = Arc::new(host);
        let files = HomeFiles::with_open_max(host.clone(), config.home_files_open_max);
        let cache = Cache::format(region, files, config.clone(), home)?;
        write_marker(&*host, cache.superblock().store_id())?;
        let (names, found) = walk(&*host, cache.backing())?;
        Self::assemble(cache, host, names, found, config)
    }

    /// Open a store: walk the home, recover the cache, reconcile the two.
    pub fn open_on(region: R, host: H, config: &CacheConfig) -> Result<Self> {
        let host = Arc::new(host);
        let files = HomeFiles::with_open_max(host.clone(), config.home_files_open_max);
        let sb = crate::format::Superblock::read_from(&region)?;
        check_marker(&*host, sb.store_id())?;
        walk(&*host, &files)?;
        let (cache, report) = Cache::open_deferred(region, files, config.clone())?;
        unsettle_trash(&cache, &*host, Path::new(TRASH_NAME))?;
        replay_intents(&cache, &*host, &report.incomplete)?;
        cache.close_recovered_units();
        empty_trash(&*host)?;
        // Names may have moved back: reach every file by its path now.
        cache.backing().reset();
        let (mut names, mut found) = walk(&*host, cache.backing())?;
        if settle_conflicts(&cache, &*host, config.home_conflict)? {
            (names, found) = walk(&*host, cache.backing())?;
        }
        Self::assemble(cache, host, names, found, config)
    }

    fn assemble(
        cache: Cache<R, HomeFiles<H>>,
        host: Arc<H>,
        names: Names,
        found: HashMap<u64, u64>,
        config: &CacheConfig,
    ) -> Result<Self> {
        let mut keys = HashMap::new();
        for (key, id) in cache.file_list() {
            if found.contains_key(&id) {
                keys.insert(names.ino_of(id), key);
            } else {
                cache.delete_file(key)?;
                cache.backing().forget(id);
            }
        }
        for (&id, &len) in &found {
            let ino = names.ino_of(id);
            if let std::collections::hash_map::Entry::Vacant(e) = keys.entry(ino) {
                e.insert(cache.create_file(id, len)?);
            }
        }
        let cache = Arc::new(cache);
        let flusher = config.flush_period.and_then(|p| Flusher::start(&cache, p));
        Ok(CacheStore {
            usage: hostfs::SharedUsage::new(),
            cache,
            host,
            t: Mutex::new(Tables {
                names,
                keys,
                handles: HashMap::new(),
                open_count: HashMap::new(),
                orphans: HashSet::new(),
                gone: HashSet::new(),
                bound: HashMap::new(),
                created_by: HashMap::new(),
                txs: HashMap::new(),
                atomic_units: HashMap::new(),
                trash_seq: 0,
                intent_seq: 0,
            }),
            flusher: Mutex::new(flusher),
            closed: AtomicBool::new(false),
            next_fh: AtomicU64::new(1),
            next_tx: AtomicU64::new(1),
        })
    }

    /// The cache (for tools and tests).
    pub fn cache(&self) -> &Cache<R, HomeFiles<H>> {
        &self.cache
    }

    /// The home file system.
    pub fn host(&self) -> &H {
        &self.host
    }
}

fn write_marker<H: HostFs>(host: &H, store_id: u64) -> Result<()> {
    let f = host
        .open(Path::new(MARKER_NAME), &OpenOptions::create())
        .map_err(host_err)?;
    host.set_len(&f, 0).map_err(host_err)?;
    host.write_all_at(&f, 0, &store_id.to_le_bytes())
        .map_err(host_err)?;
    // persist: the marker ties the home directory to this pool.
    host.sync_all(&f).map_err(host_err)?;
    host.sync_dir(Path::new("")).map_err(host_err)
}

fn check_marker<H: HostFs>(host: &H, store_id: u64) -> Result<()> {
    let f = host
        .open(Path::new(MARKER_NAME), &OpenOptions::read_only())
        .map_err(|e| Error::CrossStore(format!("home directory has no cache marker: {e}")))?;
    let mut b = [0u8; 8];
    let n = host.read_full_at(&f, 0, &mut b).map_err(host_err)?;
    if n != 8 || u64::from_le_bytes(b) != store_id {
        return Err(Error::CrossStore(
            "the home directory belongs to another cache pool".into(),
        ));
    }
    Ok(())
}

/// Remove what the trash holds (names removed by transactions that committed or, at a crash,
/// did not: see docs/engines/cache.md, "Not done yet").
fn empty_trash<H: HostFs>(host: &H) -> Result<()> {
    let trash = Path::new(TRASH_NAME);
    let Ok(entries) = host.read_dir(trash) else {
        return Ok(());
    };
    for e in entries {
        let p = trash.join(OsStr::from_bytes(&e.name));
        let _ = match e.kind {
            FileKind::Dir => remove_tree(host, &p),
            _ => host.unlink(&p).map_err(host_err),
        };
    }
    host.sync_dir(trash).map_err(host_err)
}

fn remove_tree<H: HostFs>(host: &H, dir: &Path) -> Result<()> {
    for e in host.read_dir(dir).map_err(host_err)? {
        let p = dir.join(OsStr::from_bytes(&e.name));
        match e.kind {
            FileKind::Dir => remove_tree(host, &p)?,
            _ => host.unlink(&p).map_err(host_err)?,
        }
    }
    host.rmdir(dir).map_err(host_err)
}

/// Walk the home tree: names, and every regular file (registered by path) with its length.
fn walk<H: HostFs>(host: &H, files: &HomeFiles<H>) -> Result<(Names, HashMap<u64, u64>)> {
    let root = host.stat(Path::new("")).map_err(host_err)?;
    let mut names = Names::new(root.ino);
    let mut found = HashMap::new();
    let mut stack: Vec<(Ino, PathBuf)> = vec![(ROOT_INO, PathBuf::new())];
    while let Some((dir_ino, dir)) = stack.pop() {
        for e in host.read_dir(&dir).map_err(host_err)? {
            if dir_ino == ROOT_INO
                && (e.name == TRASH_NAME.as_bytes() || e.name == MARKER_NAME.as_bytes())
            {
                continue;
            }
            let path = dir.join(OsStr::from_bytes(&e.name));
            let ino = names.ino_of(e.ino);
            names.add(ino, dir_ino, &e.name);
            match e.kind {
                FileKind::Dir => stack.push((ino, path)),
                FileKind::File => {
                    files.register(e.ino, &path, None);
                    found.insert(e.ino, host.stat(&path).map_err(host_err)?.len);
                }
                _ => {}
            }
        }
    }
    Ok((names, found))
}

/// Undo the namespace intents of transactions that did not commit (newest first), finish
/// those of transactions that did, and free every intent.
fn replay_intents<R: Region, H: HostFs>(
    cache: &Cache<R, HomeFiles<H>>,
    host: &H,
    incomplete: &[u64],
) -> Result<()> {
    let mut live = cache.live_intents()?;
    live.sort_by_key(|(_, _, it)| std::cmp::Reverse(it.seq));
    for (slot, stamp, it) in live {
        let a = Path::new(OsStr::from_bytes(&it.a));
        let b = Path::new(OsStr::from_bytes(&it.b));
        if incomplete.contains(&stamp) {
            undo_intent(cache, host, &it, a, b)?;
        } else if it.kind == IntentKind::Removed {
            remove_path(host, b)?;
        }
        cache.free_intent(slot);
    }
    Ok(())
}

fn exists<H: HostFs>(host: &H, p: &Path) -> Result<bool> {
    match host.stat(p) {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(host_err(e)),
    }
}

/// Move `from` back to `to` when the move happened and was not undone yet (idempotent).
fn move_back<H: HostFs>(host: &H, from: &Path, to: &Path) -> Result<()> {
    if exists(host, from)? && !exists(host, to)? {
        host.rename(from, to).map_err(host_err)?;
        // persist: the name is back in both directories.
        host.sync_dir(from.parent().unwrap_or(Path::new("")))
            .map_err(host_err)?;
        host.sync_dir(to.parent().unwrap_or(Path::new("")))
            .map_err(host_err)?;
    }
    Ok(())
}

/// Undo one namespace change of a transaction that did not commit (idempotent).
fn undo_intent<R: Region, H: HostFs>(
    cache: &Cache<R, HomeFiles<H>>,
    host: &H,
    it: &Intent,
    a: &Path,
    b: &Path,
) -> Result<()> {
    match it.kind {
        IntentKind::Created | IntentKind::CreatedDir | IntentKind::Linked => remove_path(host, a),
        IntentKind::Removed | IntentKind::Moved => move_back(host, b, a),
        IntentKind::Attr => {
            if let Ok(st) = host.stat(a) {
                if let Some(key) = cache.key_of(st.ino) {
                    // The cache changes the home file's times back itself.
                    cache.unsettle_key(key)?;
                }
            }
            if exists(host, a)? {
                host.set_perm(a, it.perm).map_err(host_err)?;
                host.set_times(a, Some(it.atime), Some(it.mtime))
                    .map_err(host_err)?;
                // persist: the old attributes are back for good before the intent goes.
                host.sync_node(a).map_err(host_err)?;
            }
            Ok(())
        }
    }
}
