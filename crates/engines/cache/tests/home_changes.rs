//! Home files changed behind the cache: a home file appended to, shrunk or deleted by
//! another program while PM holds dirty chunks of it is detected at open (the store refuses,
//! naming the file and the two choices), by fsck and by a flush (which never writes over it);
//! `Prefer::Pm` writes the cache's copy home, `Prefer::Home` drops it; a changed home file
//! with no dirty chunk in PM wins at once. Real pool file and home directory in /dev/shm.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::{CacheConfig, HomeConflictPolicy, HostCacheStore, Prefer};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use store::path::{read_file, OpenOptions};
use store::{Error, Store};

const C: usize = 4096;
const POOL_LEN: u64 = 8 << 20;

/// A scratch directory of this test (removed at the end).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let d = PathBuf::from(format!(
            "/dev/shm/atomfs-cache-home-changes-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("home")).unwrap();
        Scratch(d)
    }
    fn home(&self) -> PathBuf {
        self.0.join("home")
    }
    fn pool(&self) -> PathBuf {
        self.0.join("cache.pool")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(policy: HomeConflictPolicy) -> CacheConfig {
    CacheConfig {
        flush_period: None,
        home_conflict: policy,
        ..CacheConfig::default()
    }
}

fn write_at(s: &dyn Store, path: &str, off: u64, data: &[u8]) {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path, None)
        .unwrap();
    s.write(fh, off, data).unwrap();
    s.release(fh).unwrap();
}

/// A store whose file `a` is 2 chunks of 1s at home (flushed, settled) and whose first
/// chunk is 2s in PM only (dirty); then the store is dropped (a crash: nothing flushed).
fn dirty_store(sc: &Scratch) -> Vec<u8> {
    let s = HostCacheStore::create(
        &sc.home(),
        &sc.pool(),
        POOL_LEN,
        &config(HomeConflictPolicy::Refuse),
    )
    .unwrap();
    write_at(&s, "/a", 0, &[1u8; 2 * C]);
    s.cache().flush_all().unwrap();
    write_at(&s, "/a", 0, &[2u8; C]);
    let mut pm = vec![2u8; C];
    pm.extend_from_slice(&[1u8; C]);
    // (No stat here: a stat flushes the file's chunks, the seed's rule.)
    assert_eq!(
        std::fs::read(sc.home().join("a")).unwrap(),
        vec![1u8; 2 * C],
        "the second write is in PM only"
    );
    drop(s);
    pm
}

fn open(sc: &Scratch, policy: HomeConflictPolicy) -> store::Result<HostCacheStore> {
    HostCacheStore::open(&sc.home(), &sc.pool(), &config(policy))
}

fn append(path: &Path, data: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(data).unwrap();
}

fn refused(sc: &Scratch, names: &str) {
    match open(sc, HomeConflictPolicy::Refuse) {
        Err(Error::NotPermitted(m)) => {
            assert!(m.contains(names), "names the file: {m}");
            assert!(
                m.contains("--prefer pm") && m.contains("--prefer home"),
                "{m}"
            );
            assert!(
                m.contains(&sc.pool().display().to_string()),
                "names the pool: {m}"
            );
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a home file changed behind the cache was not detected"),
    }
}

#[test]
fn an_appended_home_file_is_refused_then_pm_wins_when_preferred() {
    let sc = Scratch::new();
    let pm = dirty_store(&sc);
    let a = sc.home().join("a");
    append(&a, b"someone else");
    let theirs = std::fs::read(&a).unwrap();
    refused(&sc, "home file a ");
    assert_eq!(
        std::fs::read(&a).unwrap(),
        theirs,
        "a refused open never writes the home file"
    );
    refused(&sc, "home file a ");
    let s = open(&sc, HomeConflictPolicy::Resolve(Prefer::Pm)).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), pm, "the cache's copy is home");
    assert_eq!(read_file(&s, "/a").unwrap(), pm);
    assert!(s.fsck().unwrap().is_clean());
    let resolved = s
        .stats()
        .into_iter()
        .find(|(k, _)| k == "home_conflicts_resolved");
    assert_eq!(resolved, Some(("home_conflicts_resolved".into(), 1)));
    s.unmount().unwrap();
    let s = open(&sc, HomeConflictPolicy::Refuse).unwrap();
    assert_eq!(read_file(&s, "/a").unwrap(), pm);
    s.unmount().unwrap();
}

#[test]
fn a_shrunk_home_file_is_refused_then_home_wins_when_preferred() {
    let sc = Scratch::new();
    dirty_store(&sc);
    let a = sc.home().join("a");
    std::fs::write(&a, b"short").unwrap();
    refused(&sc, "home file a ");
    let s = open(&sc, HomeConflictPolicy::Resolve(Prefer::Home)).unwrap();
    assert_eq!(
        std::fs::read(&a).unwrap(),
        b"short",
        "the home file is kept"
    );
    assert_eq!(read_file(&s, "/a").unwrap(), b"short", "and served");
    s.unmount().unwrap();
    assert_eq!(
        std::fs::read(&a).unwrap(),
        b"short",
        "the PM chunks were dropped"
    );
}

#[test]
fn a_deleted_home_file_is_refused_then_recreated_or_dropped() {
    for prefer in [Prefer::Pm, Prefer::Home] {
        let sc = Scratch::new();
        let pm = dirty_store(&sc);
        let a = sc.home().join("a");
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&a).unwrap());
        std::fs::remove_file(&a).unwrap();
        refused(&sc, &format!("inode {ino} is gone"));
        let s = open(&sc, HomeConflictPolicy::Resolve(prefer)).unwrap();
        let recovered = format!("atomfs-recovered-{ino}");
        match prefer {
            Prefer::Pm => {
                // The cache held both chunks (the first written, the second flushed).
                assert_eq!(std::fs::read(sc.home().join(&recovered)).unwrap(), pm);
                assert_eq!(read_file(&s, format!("/{recovered}")).unwrap(), pm);
            }
            Prefer::Home => {
                assert!(!sc.home().join(&recovered).exists());
                assert!(matches!(read_file(&s, "/a"), Err(Error::NotFound(_))));
            }
        }
        assert!(s.fsck().unwrap().is_clean());
        s.unmount().unwrap();
    }
}

#[test]
fn a_running_store_never_flushes_over_a_changed_home_file_and_fsck_reports_it() {
    let sc = Scratch::new();
    let s = HostCacheStore::create(
        &sc.home(),
        &sc.pool(),
        POOL_LEN,
        &config(HomeConflictPolicy::Refuse),
    )
    .unwrap();
    write_at(&s, "/a", 0, &[1u8; C]);
    s.cache().flush_all().unwrap();
    write_at(&s, "/a", 0, &[2u8; 100]);
    let a = sc.home().join("a");
    append(&a, b"theirs");
    let theirs = std::fs::read(&a).unwrap();
    let report = s.fsck().unwrap();
    assert!(!report.is_clean());
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.what.contains("home file a was changed")),
        "{:?}",
        report.problems
    );
    assert!(matches!(s.cache().flush_all(), Err(Error::NotPermitted(_))));
    assert_eq!(std::fs::read(&a).unwrap(), theirs, "not written over");
    assert!(s.cache().flush_error().is_some(), "the error is pending");
    drop(s);
    refused(&sc, "home file a ");
}

#[test]
fn a_changed_home_file_with_no_dirty_chunk_wins_at_open() {
    let sc = Scratch::new();
    let s = HostCacheStore::create(
        &sc.home(),
        &sc.pool(),
        POOL_LEN,
        &config(HomeConflictPolicy::Refuse),
    )
    .unwrap();
    write_at(&s, "/a", 0, &[1u8; C]);
    s.cache().flush_all().unwrap();
    drop(s);
    let a = sc.home().join("a");
    let mut theirs = vec![7u8; 3 * C];
    theirs.extend_from_slice(b"tail");
    std::fs::write(&a, &theirs).unwrap();
    let s = open(&sc, HomeConflictPolicy::Refuse).unwrap();
    assert_eq!(read_file(&s, "/a").unwrap(), theirs, "never truncated");
    let adopted = s.stats().into_iter().find(|(k, _)| k == "homes_adopted");
    assert_eq!(adopted, Some(("homes_adopted".into(), 1)));
    s.unmount().unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), theirs);
}

#[test]
fn a_stat_puts_the_data_in_the_home_file_and_a_second_stat_changes_nothing() {
    let sc = Scratch::new();
    let s = HostCacheStore::create(
        &sc.home(),
        &sc.pool(),
        POOL_LEN,
        &config(HomeConflictPolicy::Refuse),
    )
    .unwrap();
    let m = s.create(store::ROOT_INO, b"a", 0o644, None).unwrap();
    let fh = s
        .open(
            m.ino,
            store::OpenFlags {
                read: true,
                write: true,
                ..Default::default()
            },
        )
        .unwrap();
    s.write(fh, 0, &[5u8; C + 10]).unwrap();
    let a = sc.home().join("a");
    assert!(
        std::fs::read(&a).unwrap().is_empty(),
        "PM only before the stat"
    );
    let first = s.fstat(fh).unwrap();
    assert_eq!(
        std::fs::read(&a).unwrap(),
        vec![5u8; C + 10],
        "home after a stat"
    );
    let dirty = s.stats().into_iter().find(|(k, _)| k == "dirty_chunks_max");
    assert_eq!(
        dirty,
        Some(("dirty_chunks_max".into(), 2)),
        "not synced: still dirty"
    );
    let home_mtime = std::fs::metadata(&a).unwrap().modified().unwrap();
    // (The atime moved: this test read the home file.)
    let second = s.getattr(m.ino).unwrap();
    assert_eq!((second.size, second.mtime), (first.size, first.mtime));
    assert_eq!(
        std::fs::metadata(&a).unwrap().modified().unwrap(),
        home_mtime
    );
    s.flush_home().unwrap();
    let dirty = s.stats().into_iter().find(|(k, _)| k == "dirty_chunks_max");
    assert_eq!(dirty, Some(("dirty_chunks_max".into(), 0)));
    s.release(fh).unwrap();
    s.unmount().unwrap();
}
