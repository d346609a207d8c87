//! Single-file semantics, epochs, undo and redo logging, transactions, O_ATOMIC and
//! reopening, over simulated media and over a real directory on tmpfs.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::{MmioConfig, MmioStore, Policy, PolicyMode};
use store::{OpenOptions, Store, ROOT_INO};

fn cfg(mode: PolicyMode) -> MmioConfig {
    MmioConfig {
        policy_mode: mode,
        ..MmioConfig::test_min()
    }
}

fn roundtrip(mode: PolicyMode) {
    let c = cfg(mode);
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/a", false);
    let data: Vec<u8> = (0..20000u32).map(|i| (i * 7 % 251) as u8).collect();
    s.write(fh, 0, &data).unwrap();
    s.write(fh, 5000, b"hello").unwrap();
    let mut want = data.clone();
    want[5000..5005].copy_from_slice(b"hello");
    s.write(fh, 19998, b"tail!").unwrap();
    want.truncate(19998);
    want.extend_from_slice(b"tail!");
    assert_eq!(read_path(&s, "/a"), want);
    // Every call returned: both the durable image and the cached one recover to `want`.
    for image in [region.persistent_image(), region.cache_image()] {
        let (_r, s2) = sim_reopen(image, &c).expect("recover");
        assert_eq!(read_path(&s2, "/a"), want, "{mode:?}");
        assert!(s2.fsck().unwrap().is_clean());
    }
}

#[test]
fn roundtrip_undo() {
    roundtrip(PolicyMode::Undo);
}

#[test]
fn roundtrip_redo() {
    roundtrip(PolicyMode::Redo);
}

#[test]
fn roundtrip_hybrid() {
    roundtrip(PolicyMode::Hybrid);
}

fn atomic_uncommitted_lost(mode: PolicyMode) {
    let c = cfg(mode);
    let (region, s) = sim_store(&c);
    let fh = open_rw(&s, "/f", true);
    s.write(fh, 0, &[1u8; 9000]).unwrap();
    s.fsync(fh, false).unwrap();
    s.write(fh, 100, &[2u8; 5000]).unwrap();
    s.write(fh, 9000, &[3u8; 100]).unwrap();
    s.set_len(fh, 4000).unwrap();
    for image in [region.persistent_image(), region.cache_image()] {
        let (_r, s2) = sim_reopen(image, &c).expect("recover");
        assert_eq!(read_path(&s2, "/f"), vec![1u8; 9000], "{mode:?}");
    }
    // abortv drops them live, too.
    s.abortv(&[fh]).unwrap();
    assert_eq!(read_path(&s, "/f"), vec![1u8; 9000]);
    s.write(fh, 8990, &[4u8; 20]).unwrap();
    s.fsync(fh, false).unwrap();
    let mut want = vec![1u8; 8990];
    want.extend_from_slice(&[4u8; 20]);
    let (_r, s3) = sim_reopen(region.persistent_image(), &c).unwrap();
    assert_eq!(read_path(&s3, "/f"), want);
}

#[test]
fn atomic_uncommitted_lost_undo() {
    atomic_uncommitted_lost(PolicyMode::Undo);
}

#[test]
fn atomic_uncommitted_lost_redo() {
    atomic_uncommitted_lost(PolicyMode::Redo);
}

#[test]
fn transaction_commit_abort_and_crash() {
    let c = cfg(PolicyMode::Hybrid);
    let (region, s) = sim_store(&c);
    let a = open_rw(&s, "/a", false);
    let b = open_rw(&s, "/b", false);
    s.write(a, 0, b"aaaa").unwrap();
    s.write(b, 0, b"bbbb").unwrap();
    let tx = s.tx_begin(&[a, b]).unwrap();
    s.write(a, 0, b"AA").unwrap();
    s.write(b, 2, b"BBBB").unwrap();
    // Not committed: a crash keeps the old contents of both.
    let (_r, s2) = sim_reopen(region.cache_image(), &c).unwrap();
    assert_eq!(read_path(&s2, "/a"), b"aaaa");
    assert_eq!(read_path(&s2, "/b"), b"bbbb");
    s.tx_commit(tx).unwrap();
    let (_r, s3) = sim_reopen(region.persistent_image(), &c).unwrap();
    assert_eq!(read_path(&s3, "/a"), b"AAaa");
    assert_eq!(read_path(&s3, "/b"), b"bbBBBB");
    // Abort restores both files.
    let tx = s.tx_begin(&[a, b]).unwrap();
    s.write(a, 0, b"xxxxxxxx").unwrap();
    s.set_len(b, 1).unwrap();
    s.tx_abort(tx).unwrap();
    assert_eq!(read_path(&s, "/a"), b"AAaa");
    assert_eq!(read_path(&s, "/b"), b"bbBBBB");
    assert!(matches!(
        s.tx_begin(&[a]).and_then(|t| s.tx_begin(&[a]).map(|_| t)),
        Err(store::Error::FileInTransaction(_))
    ));
}

#[test]
fn set_len_shrink_then_extend_reads_zeros() {
    let c = cfg(PolicyMode::Undo);
    let (_region, s) = sim_store(&c);
    let fh = open_rw(&s, "/z", true);
    s.write(fh, 0, &[9u8; 10000]).unwrap();
    s.fsync(fh, false).unwrap();
    s.set_len(fh, 100).unwrap();
    s.set_len(fh, 6000).unwrap();
    let got = store::path::read_all(&s, fh).unwrap();
    assert_eq!(&got[..100], &[9u8; 100][..]);
    assert!(
        got[100..].iter().all(|&b| b == 0),
        "stale bytes visible after shrink+extend"
    );
    s.fsync(fh, false).unwrap();
    assert_eq!(s.fstat(fh).unwrap().size, 6000);
}

#[test]
fn redo_reads_come_from_the_log_until_checkpoint() {
    let c = cfg(PolicyMode::Redo);
    let (_region, s) = sim_store(&c);
    let fh = open_rw(&s, "/r", false);
    s.write(fh, 0, &[5u8; 8192]).unwrap();
    s.write(fh, 10, b"new").unwrap();
    assert_eq!(s.file_policy(fh).unwrap(), Policy::Redo);
    assert!(
        s.live_entries(fh).unwrap() > 0,
        "committed redo entries wait for the checkpoint"
    );
    let mut buf = [0u8; 16];
    s.read(fh, 8, &mut buf).unwrap();
    assert_eq!(&buf[..8], &[5, 5, b'n', b'e', b'w', 5, 5, 5]);
    assert!(s.checkpoint_all().unwrap() > 0);
    assert_eq!(s.live_entries(fh).unwrap(), 0);
    s.read(fh, 8, &mut buf).unwrap();
    assert_eq!(&buf[..8], &[5, 5, b'n', b'e', b'w', 5, 5, 5]);
}

#[test]
fn namespace_operations_on_sim_media() {
    let c = cfg(PolicyMode::Hybrid);
    let (_region, s) = sim_store(&c);
    store::path::mkdir_all(&s, "/d/e", 0o755).unwrap();
    store::path::write_file(&s, "/d/e/f", b"x", None).unwrap();
    let d = store::resolve(&s, "/d").unwrap();
    s.rename(d.ino, b"e", ROOT_INO, b"g", None).unwrap();
    assert_eq!(read_path(&s, "/g/f"), b"x");
    let g = store::resolve(&s, "/g").unwrap();
    assert!(matches!(
        s.rmdir(ROOT_INO, b"g", None),
        Err(store::Error::NotEmpty(_))
    ));
    s.unlink(g.ino, b"f", None).unwrap();
    s.rmdir(ROOT_INO, b"g", None).unwrap();
    let names: Vec<_> = s
        .read_dir(ROOT_INO)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec![b"d".to_vec()]);
}

#[test]
fn host_directory_on_tmpfs_roundtrip_and_reopen() {
    let dir = shm_dir("host");
    let c = MmioConfig {
        checkpoint_period: Some(std::time::Duration::from_micros(100)),
        ..MmioConfig::test_min()
    };
    let s = MmioStore::create(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    store::path::write_file(&s, "/hello", b"hello world", None).unwrap();
    let fh = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&s, "/hello", None)
        .unwrap();
    for i in 0..50u64 {
        s.write(fh, i * 100, &[i as u8; 100]).unwrap();
    }
    s.release(fh).unwrap();
    let want = read_path(&s, "/hello");
    assert_eq!(want.len(), 5000);
    drop(s); // no unmount: as a crash at a quiescent point
    let s = MmioStore::open(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    assert_eq!(read_path(&s, "/hello"), want);
    assert_eq!(
        std::fs::read(dir.join("files/hello")).unwrap(),
        want,
        "host file holds the data"
    );
    s.unmount().unwrap();
    cleanup(&dir);
}

#[test]
fn background_checkpoint_thread_frees_committed_entries() {
    let dir = shm_dir("bg");
    let c = MmioConfig {
        policy_mode: PolicyMode::Redo,
        checkpoint_period: Some(std::time::Duration::from_micros(100)),
        ..MmioConfig::test_min()
    };
    let s = MmioStore::create(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    let fh = open_rw(&s, "/f", false);
    s.set_len(fh, 20 * 4096).unwrap(); // overwrites below the committed size are logged
    for i in 0..20u64 {
        s.write(fh, i * 4096, &[i as u8; 4096]).unwrap();
    }
    let stats: std::collections::HashMap<_, _> = s.stats().into_iter().collect();
    assert_eq!(stats["entries_created"], 20, "{stats:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while s.live_entries(fh).unwrap() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        s.live_entries(fh).unwrap(),
        0,
        "the background thread checkpoints"
    );
    let stats: std::collections::HashMap<_, _> = s.stats().into_iter().collect();
    assert!(stats["background_checkpoints"] > 0, "{stats:?}");
    let on_host = std::fs::read(dir.join("files/f")).unwrap();
    assert_eq!(on_host.len(), 20 * 4096);
    assert!((0..20usize).all(|i| on_host[i * 4096..(i + 1) * 4096]
        .iter()
        .all(|&b| b == i as u8)));
    s.release(fh).unwrap();
    s.unmount().unwrap();
    cleanup(&dir);
}

#[test]
fn concurrent_writers_and_readers_on_one_file() {
    let dir = shm_dir("conc");
    let c = MmioConfig {
        policy_mode: PolicyMode::Hybrid,
        checkpoint_period: Some(std::time::Duration::from_micros(100)),
        index_entries_max: 1024,
        log_pool_len: 8 << 20,
        ..MmioConfig::test_min()
    };
    let s = MmioStore::create(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    let fh = open_rw(&s, "/f", false);
    s.set_len(fh, 4 * 64 * 1024).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let s = &s;
            scope.spawn(move || {
                // Each thread owns a 64 KB slice and writes a counter pattern into it.
                for round in 0..200u64 {
                    let off = t * 65536 + (round % 16) * 4096 + (round % 7) * 100;
                    s.write(fh, off, &[(t * 50 + round % 50) as u8; 700])
                        .unwrap();
                    let mut buf = [0u8; 700];
                    s.read(fh, off, &mut buf).unwrap();
                    assert!(
                        buf.iter().all(|&b| b == (t * 50 + round % 50) as u8),
                        "thread {t} round {round}"
                    );
                }
            });
        }
    });
    let all = store::path::read_all(&s, fh).unwrap();
    s.release(fh).unwrap();
    drop(s); // crash at a quiescent point
    let s = MmioStore::open(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    assert_eq!(read_path(&s, "/f"), all);
    s.unmount().unwrap();
    cleanup(&dir);
}
