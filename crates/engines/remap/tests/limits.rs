//! Every bounded resource of a remap store, hit on purpose: the call past it gets a clear
//! error, nothing committed or written before it is lost (fsck clean, contents intact, also
//! after a crash), and `limits()` — what `atomfs info` shows — reports the maximum and the use.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::SimHostFs;
use remap::{RemapConfig, RemapStore};
use store::{Error, Limit, OpenOptions, Store};

const BLOCK: usize = 4096;

fn config() -> RemapConfig {
    RemapConfig {
        checkpoint_journal_len: 1 << 30,
        open_files_max: 3,
        open_transactions_max: 2,
        pending_blocks_max: 4,
        ..RemapConfig::default()
    }
}

fn store() -> (SimHostFs, RemapStore<SimHostFs>) {
    let sim = SimHostFs::default();
    let s = RemapStore::create_on(sim.clone(), 9, &config()).unwrap();
    (sim, s)
}

fn limit(s: &dyn Store, prefix: &str) -> Limit {
    s.limits()
        .unwrap()
        .into_iter()
        .find(|l| l.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no limit {prefix:?}"))
}

fn open(s: &dyn Store, path: &str, atomic: bool) -> Result<store::Fh, Error> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(atomic)
        .open(s, path, None)
}

fn get(s: &dyn Store, path: &str) -> Vec<u8> {
    let fh = OpenOptions::new().read(true).open(s, path, None).unwrap();
    let mut buf = vec![0u8; s.fstat(fh).unwrap().size as usize];
    s.read(fh, 0, &mut buf).unwrap();
    s.release(fh).unwrap();
    buf
}

fn clean(s: &dyn Store) {
    let r = s.fsck().unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn open_files_stop_at_their_maximum() {
    let (_sim, s) = store();
    let fhs: Vec<_> = (0..3)
        .map(|i| open(&s, &format!("/f{i}"), false).unwrap())
        .collect();
    assert!(matches!(
        open(&s, "/f3", false),
        Err(Error::TooMany {
            what: "open files",
            max: 3
        })
    ));
    let l = limit(&s, "open files");
    assert_eq!((l.max, l.used, l.error), (3, Some(3), "EMFILE"));
    s.release(fhs[0]).unwrap();
    let again = open(&s, "/f0", false).unwrap();
    s.write(again, 0, b"still works").unwrap();
    assert_eq!(get_after_release(&s, again, "/f0"), b"still works");
    clean(&s);
}

fn get_after_release(s: &dyn Store, fh: store::Fh, path: &str) -> Vec<u8> {
    s.release(fh).unwrap();
    get(s, path)
}

#[test]
fn open_transactions_stop_at_their_maximum() {
    let (_sim, s) = store();
    let f = open(&s, "/a", false).unwrap();
    let t1 = s.tx_begin(&[f]).unwrap();
    s.write(f, 0, b"one").unwrap();
    let _t2 = s.tx_begin(&[]).unwrap();
    assert!(matches!(
        s.tx_begin(&[]),
        Err(Error::TooMany {
            what: "open transactions",
            max: 2
        })
    ));
    let l = limit(&s, "open transactions");
    assert_eq!((l.max, l.used, l.error), (2, Some(2), "EMFILE"));
    s.tx_commit(t1).unwrap();
    s.tx_begin(&[]).unwrap();
    assert_eq!(get_after_release(&s, f, "/a"), b"one");
    clean(&s);
}

#[test]
fn uncommitted_blocks_stop_at_their_maximum_and_lose_nothing() {
    let (sim, s) = store();
    let f = open(&s, "/db", true).unwrap();
    s.write(f, 0, &[1u8; 4 * BLOCK]).unwrap();
    // A fifth new block: refused, nothing changes.
    let e = s.write(f, 4 * BLOCK as u64, &[2u8; BLOCK]).unwrap_err();
    assert!(
        matches!(&e, Error::NoSpace(m) if m.contains("pending_blocks_max")),
        "{e}"
    );
    // Overwriting blocks already uncommitted needs no room.
    s.write(f, 100, &[3u8; 200]).unwrap();
    let l = limit(&s, "uncommitted blocks");
    assert_eq!((l.max, l.used, l.error), (4, Some(4), "ENOSPC"));
    s.fsync(f, true).unwrap();
    let mut want = vec![1u8; 4 * BLOCK];
    want[100..300].fill(3);
    assert_eq!(get(&s, "/db"), want);
    // The commit freed the room.
    assert_eq!(limit(&s, "uncommitted blocks").used, Some(0));
    s.write(f, 4 * BLOCK as u64, &[2u8; BLOCK]).unwrap();
    s.fsync(f, true).unwrap();
    want.extend_from_slice(&[2u8; BLOCK]);
    // In a transaction: the refused write leaves the earlier ones to commit.
    let g = open(&s, "/t", false).unwrap();
    let tx = s.tx_begin(&[g]).unwrap();
    s.write(g, 0, &[5u8; 3 * BLOCK]).unwrap();
    assert!(matches!(
        s.write(g, 3 * BLOCK as u64, &[6u8; 2 * BLOCK]),
        Err(Error::NoSpace(_))
    ));
    s.tx_commit(tx).unwrap();
    assert_eq!(get(&s, "/t"), vec![5u8; 3 * BLOCK]);
    clean(&s);
    // Durable as acknowledged.
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    let r = RemapStore::open_on(crashed, Some(9), &config()).unwrap();
    assert_eq!(get(&r, "/db"), want);
    assert_eq!(get(&r, "/t"), vec![5u8; 3 * BLOCK]);
    clean(&r);
}

#[test]
fn limits_list_the_journal_against_its_checkpoint_point() {
    let (_sim, s) = store();
    let l = limit(&s, "journal bytes");
    assert_eq!(l.max, 1 << 30);
    assert_eq!(l.used, Some(4096), "the journal's header block");
    assert!(s
        .limits()
        .unwrap()
        .iter()
        .any(|l| l.name.starts_with("file name")));
}

#[test]
fn extended_attribute_bytes_stop_at_their_maximum_and_lose_nothing() {
    let sim = SimHostFs::default();
    let cfg = RemapConfig {
        xattr_bytes_max: 1000,
        ..config()
    };
    let s = RemapStore::create_on(sim.clone(), 9, &cfg).unwrap();
    let f = open(&s, "/x", false).unwrap();
    let ino = s.fstat(f).unwrap().ino;
    s.release(f).unwrap();
    let how = store::XattrSet::Either;
    // 6 + 594 = 600 bytes, then 6 + 394 = 400: exactly the maximum.
    s.setxattr(ino, b"user.a", &[1; 594], how, None).unwrap();
    s.setxattr(ino, b"user.b", &[2; 394], how, None).unwrap();
    let l = limit(&s, "extended attribute bytes");
    assert_eq!((l.max, l.used, l.error), (1000, Some(1000), "ENOSPC"));
    // One byte more, by a new attribute or by a larger value: refused, nothing changed.
    let e = s.setxattr(ino, b"user.c", b"", how, None).unwrap_err();
    assert!(
        matches!(&e, Error::NoSpace(m) if m.contains("xattr_bytes_max")),
        "{e}"
    );
    assert!(matches!(
        s.setxattr(ino, b"user.a", &[9; 595], how, None),
        Err(Error::NoSpace(_))
    ));
    // In a transaction too; the transaction's other changes still commit.
    let tx = s.tx_begin(&[]).unwrap();
    s.setxattr(ino, b"user.b", &[3; 100], how, Some(tx))
        .unwrap();
    assert!(matches!(
        s.setxattr(ino, b"user.a", &[9; 900], how, Some(tx)),
        Err(Error::NoSpace(_))
    ));
    s.tx_commit(tx).unwrap();
    // A replacement that shrinks the set frees room.
    s.setxattr(ino, b"user.c", &[4; 200], how, None).unwrap();
    let want = |s: &dyn Store| {
        assert_eq!(s.getxattr(ino, b"user.a").unwrap(), vec![1; 594]);
        assert_eq!(s.getxattr(ino, b"user.b").unwrap(), vec![3; 100]);
        assert_eq!(s.getxattr(ino, b"user.c").unwrap(), vec![4; 200]);
    };
    want(&s);
    clean(&s);
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    let r = RemapStore::open_on(crashed, Some(9), &cfg).unwrap();
    want(&r);
    clean(&r);
}

#[test]
fn fallocate_stops_at_the_uncommitted_blocks_maximum_and_changes_nothing() {
    let (_sim, s) = store();
    let f = open(&s, "/z", false).unwrap();
    s.write(f, 0, &[7u8; 3 * BLOCK]).unwrap();
    s.write(f, 3 * BLOCK as u64, &[7u8; 3 * BLOCK]).unwrap();
    let size = s.fstat(f).unwrap().size;
    // A zero range of a terabyte past the end: refused at once (its plan is cut at the
    // limit), the size unchanged.
    let zero = store::Fallocate::ZeroRange { keep_size: false };
    let e = s.fallocate(f, zero, 0, 1 << 40).unwrap_err();
    assert!(
        matches!(&e, Error::NoSpace(m) if m.contains("pending_blocks_max")),
        "{e}"
    );
    assert_eq!(s.fstat(f).unwrap().size, size);
    // A punch of five blocks with data: refused; of four: done (each its own commit).
    let punch = store::Fallocate::PunchHole;
    assert!(matches!(
        s.fallocate(f, punch, 0, 5 * BLOCK as u64),
        Err(Error::NoSpace(_))
    ));
    assert_eq!(get_after_release(&s, f, "/z"), vec![7u8; 6 * BLOCK]);
    let f = open(&s, "/z", false).unwrap();
    s.fallocate(f, punch, 0, 4 * BLOCK as u64).unwrap();
    let mut want = vec![7u8; 6 * BLOCK];
    want[..4 * BLOCK].fill(0);
    assert_eq!(get_after_release(&s, f, "/z"), want);
    clean(&s);
}
