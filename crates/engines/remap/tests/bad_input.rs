//! Bad input and failing media: a pool file or journal edited behind the engine's back (the
//! checksums catch it: open refuses, fsck reports), a missing home directory, ENOSPC during a
//! checkpoint (no committed data lost, the checkpoint retried), EIO on the journal's fsync
//! (the commit is reported failed, never acknowledged).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::{Fault, FaultKind, FaultOp, FaultPlan, Faulty, HostFs, SimHostFs};
use remap::{HostRemapStore, RemapConfig, RemapStore};
use std::path::{Path, PathBuf};
use store::{Error, OpenOptions, Store};

fn config() -> RemapConfig {
    RemapConfig {
        copy_checkpoint: false,
        checkpoint_journal_len: 64 << 10,
        ..RemapConfig::default()
    }
}

fn put(s: &dyn Store, path: &str, off: u64, data: &[u8]) {
    let fh = OpenOptions::new()
        .write(true)
        .create(true)
        .open(s, path, None)
        .unwrap();
    s.write(fh, off, data).unwrap();
    s.release(fh).unwrap();
}

fn get(s: &dyn Store, path: &str) -> Vec<u8> {
    let fh = OpenOptions::new().read(true).open(s, path, None).unwrap();
    let len = s.fstat(fh).unwrap().size as usize;
    let mut buf = vec![0u8; len];
    assert_eq!(s.read(fh, 0, &mut buf).unwrap(), len);
    s.release(fh).unwrap();
    buf
}

/// A scratch directory (tmpfs) with a copy-checkpoint store: `base/p.pool`, `base/home/`.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = PathBuf::from(format!(
            "/dev/shm/atomfs-remap-bad-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("home")).unwrap();
        Scratch(d)
    }
    fn pool(&self) -> PathBuf {
        self.0.join("p.pool")
    }
    fn home(&self) -> PathBuf {
        self.0.join("home")
    }
    fn create(&self) -> HostRemapStore {
        let c = RemapConfig {
            copy_checkpoint: true,
            checkpoint_journal_len: 1 << 30,
            ..RemapConfig::default()
        };
        HostRemapStore::create(&self.pool(), &self.home(), &c).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x5a;
    std::fs::write(path, b).unwrap();
}

fn open_err(s: &Scratch) -> Error {
    match HostRemapStore::open(&s.pool(), &config()) {
        Ok(_) => panic!("a damaged store opened"),
        Err(e) => e,
    }
}

#[test]
fn a_pool_file_with_wrong_magic_or_checksum_is_refused() {
    let s = Scratch::new("pool");
    s.create().unmount().unwrap();
    flip(&s.pool(), 30);
    let e = open_err(&s);
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    flip(&s.pool(), 30);
    flip(&s.pool(), 0);
    assert!(matches!(open_err(&s), Error::BadMagic(_)));
    std::fs::write(s.pool(), b"ATFSREMP").unwrap();
    assert!(matches!(open_err(&s), Error::Corrupt { .. }));
}

#[test]
fn a_missing_home_directory_is_named() {
    let s = Scratch::new("home");
    s.create().unmount().unwrap();
    std::fs::rename(s.home(), s.0.join("moved")).unwrap();
    let e = open_err(&s);
    assert!(
        e.to_string().contains(&s.home().display().to_string()),
        "{e}"
    );
}

#[test]
fn a_journal_record_edited_behind_the_engine_is_refused_and_fsck_reports_it() {
    let s = Scratch::new("journal");
    let st = s.create();
    for i in 0..3u8 {
        put(&st, &format!("/f{i}"), 0, &[i + 1; 5000]);
    }
    // fsck of the live store sees the journal as written.
    assert!(st.fsck().unwrap().problems.is_empty());
    let journal = s.home().join("remap.journal");
    // The first record's header block is block 1; its payload starts at byte 4096 + 48.
    flip(&journal, 4096 + 60);
    let report = st.fsck().unwrap();
    assert!(
        report.problems.iter().any(|p| p.what.contains("journal")),
        "{report:?}"
    );
    drop(st);
    let e = open_err(&s);
    assert!(
        matches!(&e, Error::Corrupt { what, .. } if what.contains("follows")),
        "{e}"
    );
}

#[test]
fn a_corrupt_snapshot_is_refused() {
    let s = Scratch::new("snapshot");
    s.create().unmount().unwrap();
    flip(&s.home().join("remap.meta"), 50);
    assert!(matches!(open_err(&s), Error::Corrupt { .. }));
}

#[test]
fn a_second_store_in_one_home_is_refused() {
    let s = Scratch::new("twice");
    s.create().unmount().unwrap();
    let c = RemapConfig {
        copy_checkpoint: true,
        ..config()
    };
    let e = HostRemapStore::create(&s.0.join("q.pool"), &s.home(), &c)
        .err()
        .unwrap();
    assert!(matches!(e, Error::Exists(_)), "{e}");
}

fn sim_store(plan: &std::sync::Arc<FaultPlan>) -> (SimHostFs, RemapStore<Faulty<SimHostFs>>) {
    let sim = SimHostFs::default();
    let fs = Faulty::new(sim.clone(), plan.clone());
    (sim, RemapStore::create_on(fs, 7, &config()).unwrap())
}

#[test]
fn enospc_during_a_checkpoint_loses_nothing_and_the_checkpoint_is_retried() {
    let plan = FaultPlan::new();
    let (sim, s) = sim_store(&plan);
    put(&s, "/a", 0, &[1; 8192]);
    // Every remap onto a home file fails with ENOSPC for a while.
    plan.add(Fault {
        times: 3,
        ..Fault::once(FaultOp::Write, FaultKind::NoSpace).on("files/2")
    });
    put(&s, "/a", 4096, &[2; 70_000]);
    let c = s.counters();
    assert!(c.checkpoint_failures >= 1, "{c:?}");
    assert_eq!(get(&s, "/a")[4096..], [2u8; 70_000][..]);
    plan.clear();
    assert!(s.checkpoint().unwrap());
    drop(s);
    let image = sim.durable_image();
    let fs = Faulty::new(
        SimHostFs::from_image(&image, Default::default()),
        FaultPlan::new(),
    );
    let r = RemapStore::open_on(fs, Some(7), &config()).unwrap();
    let mut want = vec![1u8; 4096];
    want.extend_from_slice(&[2; 70_000]);
    assert_eq!(get(&r, "/a"), want);
}

#[test]
fn eio_on_the_journal_fsync_fails_the_commit_and_it_is_never_acknowledged() {
    let plan = FaultPlan::new();
    let (sim, s) = sim_store(&plan);
    put(&s, "/a", 0, b"committed");
    plan.add(Fault::once(FaultOp::SyncFile, FaultKind::Io).on("remap.journal"));
    let fh = OpenOptions::new().write(true).open(&s, "/a", None).unwrap();
    let e = s.write(fh, 0, b"LOST!!!!!").unwrap_err();
    assert!(
        e.to_string().contains("fdatasync")
            || e.to_string().contains("EIO")
            || matches!(e, Error::Io { .. }),
        "{e}"
    );
    // The store refuses further changes until it is reopened.
    assert!(s.write(fh, 0, b"x").is_err());
    drop(s);
    let fs = Faulty::new(
        SimHostFs::from_image(&sim.durable_image(), Default::default()),
        FaultPlan::new(),
    );
    let r = RemapStore::open_on(fs, Some(7), &config()).unwrap();
    assert_eq!(get(&r, "/a"), b"committed");
    assert!(r.fsck().unwrap().problems.is_empty());
    let _ = sim.root();
}
