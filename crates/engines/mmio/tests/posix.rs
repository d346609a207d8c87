//! The rest of the POSIX file API across crashes, on simulated media: a punched range is never
//! brought back by an older log entry; an exchange, an extended-attribute change and a chown in
//! an uncommitted transaction are undone by recovery (a chown by an abort) (and by a second recovery of the
//! recovered image: an exchange redone would undo itself); an unnamed file leaves nothing.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::{MmioConfig, PolicyMode};
use store::{Fallocate, OpenFlags, RenameMode, Store, XattrSet, ROOT_INO};

fn cfg(mode: PolicyMode) -> MmioConfig {
    MmioConfig {
        policy_mode: mode,
        ..MmioConfig::test_min()
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn ino(s: &SimStore, path: &str) -> u64 {
    store::resolve(s, path).unwrap().ino
}

/// Recover `image`, then recover the recovered store's durable image again.
fn twice(image: SimImage, cfg: &MmioConfig) -> (SimStore, SimStore) {
    let (sim, first) = sim_reopen(image, cfg).unwrap();
    let again = sim.persistent_image();
    let (_, second) = sim_reopen(again, cfg).unwrap();
    (first, second)
}

#[test]
fn a_punched_range_is_never_brought_back_by_an_older_log_entry() {
    for mode in [PolicyMode::Undo, PolicyMode::Redo, PolicyMode::Hybrid] {
        let cfg = cfg(mode);
        let (sim, s) = sim_store(&cfg);
        let fh = open_rw(&s, "/f", false);
        let data = pattern(1, 32 << 10);
        s.write(fh, 0, &data).unwrap();
        // Committed entries over the range, not checkpointed yet.
        s.write(fh, 16 << 10, &pattern(2, 8 << 10)).unwrap();
        let mut want = data.clone();
        want[16 << 10..24 << 10].copy_from_slice(&pattern(2, 8 << 10));
        s.fallocate(fh, Fallocate::PunchHole, 12 << 10, 16 << 10)
            .unwrap();
        want[12 << 10..28 << 10].fill(0);
        assert_eq!(read_path(&s, "/f"), want, "{mode:?}: after the punch");
        s.checkpoint_all().unwrap();
        assert_eq!(read_path(&s, "/f"), want, "{mode:?}: after a checkpoint");
        // A write into the hole is read back (the hole is forgotten where it is written).
        s.write(fh, 13 << 10, b"back").unwrap();
        want[13 << 10..(13 << 10) + 4].copy_from_slice(b"back");
        assert_eq!(read_path(&s, "/f"), want, "{mode:?}: a write into the hole");
        for image in [sim.persistent_image(), sim.cache_image()] {
            let (a, b) = twice(image, &cfg);
            assert_eq!(read_path(&a, "/f"), want, "{mode:?}: recovered");
            assert_eq!(read_path(&b, "/f"), want, "{mode:?}: recovered twice");
        }
    }
}

#[test]
fn an_uncommitted_exchange_xattr_and_chown_are_undone_by_recovery() {
    let cfg = cfg(PolicyMode::Hybrid);
    let (sim, s) = sim_store(&cfg);
    for (path, data) in [("/a", b"A"), ("/b", b"B")] {
        let fh = open_rw(&s, path, false);
        s.write(fh, 0, data).unwrap();
        s.release(fh).unwrap();
    }
    let a = ino(&s, "/a");
    s.setxattr(a, b"user.k", b"old", XattrSet::Either, None)
        .unwrap();
    s.setxattr(a, b"user.gone", b"g", XattrSet::Either, None)
        .unwrap();
    let tx = s.tx_begin(&[]).unwrap();
    s.rename_with(
        ROOT_INO,
        b"a",
        ROOT_INO,
        b"b",
        RenameMode::Exchange,
        Some(tx),
    )
    .unwrap();
    s.setxattr(a, b"user.k", &[9u8; 3000], XattrSet::Replace, Some(tx))
        .unwrap();
    s.removexattr(a, b"user.gone", Some(tx)).unwrap();
    s.setxattr(a, b"user.new", b"n", XattrSet::Create, Some(tx))
        .unwrap();
    let attr = store::SetAttr {
        uid: Some(77),
        ..Default::default()
    };
    s.setattr(a, &attr, Some(tx)).unwrap();
    assert_eq!(read_path(&s, "/b"), b"A");
    for image in [sim.persistent_image(), sim.cache_image()] {
        let (first, second) = twice(image, &cfg);
        for r in [&first, &second] {
            assert_eq!(
                (read_path(r, "/a"), read_path(r, "/b")),
                (b"A".to_vec(), b"B".to_vec())
            );
            let a = ino(r, "/a");
            assert_eq!(r.getxattr(a, b"user.k").unwrap(), b"old");
            assert_eq!(r.getxattr(a, b"user.gone").unwrap(), b"g");
            assert!(r.getxattr(a, b"user.new").is_err());
        }
    }
    s.tx_commit(tx).unwrap();
    let image = sim.persistent_image();
    assert!(
        !image
            .host
            .nodes
            .keys()
            .any(|p| p.starts_with(b".atomfs-mmio-trash/")),
        "a commit leaves no saved value in the trash: {}",
        image.host.summary()
    );
    let (r, _) = twice(image, &cfg);
    assert_eq!(read_path(&r, "/a"), b"B");
    let a = ino(&r, "/b");
    assert_eq!(r.getxattr(a, b"user.k").unwrap(), vec![9u8; 3000]);
    // (Owners and permissions are not part of the host model's crash images: a chown's undo
    // is checked live, by an abort.)
    assert_eq!(s.getattr(a).unwrap().uid, 77);
    let tx = s.tx_begin(&[]).unwrap();
    let attr = store::SetAttr {
        uid: Some(5),
        gid: Some(6),
        ..Default::default()
    };
    s.setattr(a, &attr, Some(tx)).unwrap();
    assert_eq!(s.getattr(a).unwrap().gid, 6);
    s.tx_abort(tx).unwrap();
    let m = s.getattr(a).unwrap();
    assert_eq!((m.uid, m.gid), (77, 0));
}

#[test]
fn an_unnamed_file_leaves_nothing_after_a_crash_and_a_named_one_keeps_its_data() {
    let cfg = cfg(PolicyMode::Redo);
    let (sim, s) = sim_store(&cfg);
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let (_, lost) = s.tmpfile(ROOT_INO, 0o600, rw, None).unwrap();
    s.write(lost, 0, &pattern(3, 9000)).unwrap();
    let (m, kept) = s.tmpfile(ROOT_INO, 0o600, rw, None).unwrap();
    s.write(kept, 0, &pattern(4, 9000)).unwrap();
    s.link(m.ino, ROOT_INO, b"kept", None).unwrap();
    for image in [sim.persistent_image(), sim.cache_image()] {
        let (sim2, r) = sim_reopen(image, &cfg).unwrap();
        let names: Vec<Vec<u8>> = r
            .read_dir(ROOT_INO)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, vec![b"kept".to_vec()]);
        assert_eq!(read_path(&r, "/kept"), pattern(4, 9000));
        let files = sim2.host.live_image().nodes.len();
        // The store's marker, the trash directory and the one named file.
        assert_eq!(files, 3, "{}", sim2.host.live_image().summary());
    }
}

#[test]
fn a_punch_in_a_transaction_frees_host_storage_at_its_commit_only() {
    let dir = shm_dir("punch-tx");
    let c = MmioConfig::test_min();
    let s = mmio::MmioStore::create(&dir.join("files"), &dir.join("log.pool"), &c).unwrap();
    let fh = open_rw(&s, "/f", false);
    let data = pattern(5, 64 << 10);
    s.write(fh, 0, &data).unwrap();
    s.fsync(fh, false).unwrap();
    let before = s.fstat(fh).unwrap().allocated;
    if before < 64 << 10 {
        cleanup(&dir);
        return test_support::unavailable(
            "a_punch_in_a_transaction_frees_host_storage_at_its_commit_only",
            "the host file system does not report allocated blocks",
        );
    }
    let tx = s.tx_begin(&[fh]).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 16 << 10, 32 << 10)
        .unwrap();
    s.tx_abort(tx).unwrap();
    assert_eq!(
        read_path(&s, "/f"),
        data,
        "an aborted punch changes nothing"
    );
    assert_eq!(s.fstat(fh).unwrap().allocated, before);
    let tx = s.tx_begin(&[fh]).unwrap();
    s.fallocate(fh, Fallocate::PunchHole, 16 << 10, 32 << 10)
        .unwrap();
    s.tx_commit(tx).unwrap();
    let mut want = data.clone();
    want[16 << 10..48 << 10].fill(0);
    assert_eq!(read_path(&s, "/f"), want);
    let after = s.fstat(fh).unwrap().allocated;
    assert!(
        after < before,
        "the commit freed nothing ({before} -> {after})"
    );
    s.release(fh).unwrap();
    s.unmount().unwrap();
    cleanup(&dir);
}

#[test]
fn an_open_file_keeps_working_when_one_of_its_names_goes() {
    let cfg = cfg(PolicyMode::Hybrid);
    let (sim, s) = sim_store(&cfg);
    let fh = open_rw(&s, "/a", false);
    s.write(fh, 0, b"one").unwrap();
    let a = ino(&s, "/a");
    s.link(a, ROOT_INO, b"b", None).unwrap();
    s.link(a, ROOT_INO, b"c", None).unwrap();
    s.unlink(ROOT_INO, b"a", None).unwrap();
    s.write(fh, 3, b"two").unwrap();
    assert_eq!(read_path(&s, "/b"), b"onetwo");
    // In a transaction: the name goes to the trash, the file stays open under the other.
    let tx = s.tx_begin(&[]).unwrap();
    s.unlink(ROOT_INO, b"b", Some(tx)).unwrap();
    s.tx_commit(tx).unwrap();
    s.write(fh, 6, b"three").unwrap();
    s.set_len(fh, 64 << 10).unwrap();
    assert_eq!(s.fstat(fh).unwrap().nlink, 1);
    let mut want = b"onetwothree".to_vec();
    want.resize(64 << 10, 0);
    assert_eq!(read_path(&s, "/c"), want);
    let (_, r) = sim_reopen(sim.persistent_image(), &cfg).unwrap();
    assert_eq!(read_path(&r, "/c"), want);
    assert!(store::resolve(&r, "/b").is_err());
}

#[test]
fn a_link_in_a_transaction_is_undone_by_abort_and_by_recovery_and_the_file_lives_on() {
    let cfg = cfg(PolicyMode::Undo);
    let (sim, s) = sim_store(&cfg);
    let fh = open_rw(&s, "/a", false);
    s.write(fh, 0, b"data").unwrap();
    let a = ino(&s, "/a");
    let tx = s.tx_begin(&[]).unwrap();
    s.link(a, ROOT_INO, b"b", Some(tx)).unwrap();
    assert_eq!(s.getattr(a).unwrap().nlink, 2);
    s.tx_abort(tx).unwrap();
    assert!(store::resolve(&s, "/b").is_err());
    assert_eq!(s.getattr(a).unwrap().nlink, 1);
    s.write(fh, 4, b"more").unwrap();
    let tx = s.tx_begin(&[]).unwrap();
    s.link(a, ROOT_INO, b"c", Some(tx)).unwrap();
    for image in [sim.persistent_image(), sim.cache_image()] {
        let (_, r) = twice(image, &cfg);
        assert!(store::resolve(&r, "/c").is_err());
        assert_eq!(read_path(&r, "/a"), b"datamore");
    }
    s.tx_commit(tx).unwrap();
    let (_, r) = twice(sim.persistent_image(), &cfg);
    assert_eq!(read_path(&r, "/c"), b"datamore");
    assert_eq!(r.getattr(ino(&r, "/c")).unwrap().nlink, 2);
}
