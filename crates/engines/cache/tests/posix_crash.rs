//! The rest of the POSIX file API across crashes: symlinks, special files, extended
//! attributes (alone and in transactions), exchanges and no-replace renames, fallocate
//! (punch, zero range with growth, in a transaction), unnamed files published by `link`
//! (alone and in a transaction), and an aborted transaction of every kind of change. The
//! store runs on the crash target (a SimRegion pool paired with a SimHostFs home cut at the
//! same moment); at every fence of each step, crash images are recovered and the whole tree
//! (data, symlink targets, special files with their rdev, extended attributes) must be the
//! tree before the step or after it; after each step a crash must give the tree after it;
//! every recovered store is fsck-clean, and recovering its image again gives the same tree
//! (an exchange redone would undo itself).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use cache::crash_target::CacheTarget;
use conformance::tree::{snapshot, Node, Tree};
use crash::CrashTarget;
use pmem::{CrashConfig, SimRegion};
use std::sync::{Arc, Mutex};
use store::{resolve, Fallocate, FileKind, OpenFlags, RenameMode, Store, XattrSet, ROOT_INO};

type Step = (&'static str, fn(&dyn Store));

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

fn ino(s: &dyn Store, path: &str) -> u64 {
    resolve(s, path).unwrap().ino
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

fn write_file(s: &dyn Store, name: &[u8], data: &[u8]) {
    let m = s.create(ROOT_INO, name, 0o644, None).unwrap();
    let fh = s.open(m.ino, rw()).unwrap();
    s.write(fh, 0, data).unwrap();
    s.release(fh).unwrap();
}

fn with_open(s: &dyn Store, path: &str, f: impl FnOnce(store::Fh)) {
    let fh = s.open(ino(s, path), rw()).unwrap();
    f(fh);
    s.release(fh).unwrap();
}

fn setup(s: &dyn Store) {
    write_file(s, b"f", &pattern(1, 20_000));
    write_file(s, b"g", b"gee");
    s.mkdir(ROOT_INO, b"d", 0o755, None).unwrap();
}

fn steps() -> Vec<Step> {
    vec![
        ("symlink", |s| {
            s.symlink(ROOT_INO, b"l", b"d/../f", None).unwrap();
        }),
        ("mknod fifo", |s| {
            s.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o640, 0, None)
                .unwrap();
        }),
        ("mknod char device", |s| {
            let dev = libc::makedev(4, 64);
            s.mknod(ROOT_INO, b"tty", FileKind::CharDevice, 0o600, dev, None)
                .unwrap();
        }),
        ("setxattr", |s| {
            let f = ino(s, "f");
            s.setxattr(f, b"user.a", b"one", XattrSet::Create, None)
                .unwrap();
        }),
        ("xattrs in a transaction", |s| {
            let (f, d) = (ino(s, "f"), ino(s, "d"));
            let tx = s.tx_begin(&[]).unwrap();
            s.setxattr(f, b"user.a", b"two", XattrSet::Replace, Some(tx))
                .unwrap();
            s.setxattr(d, b"user.on-dir", &[7; 3000], XattrSet::Either, Some(tx))
                .unwrap();
            s.setxattr(f, b"trusted.t", b"t", XattrSet::Create, Some(tx))
                .unwrap();
            s.tx_commit(tx).unwrap();
        }),
        ("removexattr", |s| {
            s.removexattr(ino(s, "f"), b"trusted.t", None).unwrap();
        }),
        ("exchange", |s| {
            s.rename_with(ROOT_INO, b"f", ROOT_INO, b"g", RenameMode::Exchange, None)
                .unwrap();
        }),
        ("exchange a directory and a symlink in a transaction", |s| {
            let tx = s.tx_begin(&[]).unwrap();
            s.rename_with(
                ROOT_INO,
                b"d",
                ROOT_INO,
                b"l",
                RenameMode::Exchange,
                Some(tx),
            )
            .unwrap();
            s.tx_commit(tx).unwrap();
        }),
        ("rename noreplace", |s| {
            s.rename_with(
                ROOT_INO,
                b"p",
                ROOT_INO,
                b"fifo",
                RenameMode::NoReplace,
                None,
            )
            .unwrap();
        }),
        ("punch", |s| {
            with_open(s, "g", |fh| {
                s.fallocate(fh, Fallocate::PunchHole, 3000, 9000).unwrap();
            });
        }),
        ("zero range past the end", |s| {
            with_open(s, "g", |fh| {
                let op = Fallocate::ZeroRange { keep_size: false };
                s.fallocate(fh, op, 18_000, 8000).unwrap();
            });
        }),
        ("allocate past the end", |s| {
            with_open(s, "g", |fh| {
                let op = Fallocate::Allocate { keep_size: false };
                s.fallocate(fh, op, 20_000, 10_000).unwrap();
            });
        }),
        ("fallocate and a write in a transaction", |s| {
            with_open(s, "g", |fh| {
                let tx = s.tx_begin(&[fh]).unwrap();
                s.fallocate(fh, Fallocate::PunchHole, 0, 5000).unwrap();
                s.write(fh, 100, b"in the transaction").unwrap();
                let op = Fallocate::ZeroRange { keep_size: false };
                s.fallocate(fh, op, 29_000, 4000).unwrap();
                s.tx_commit(tx).unwrap();
            });
        }),
        ("an unnamed file published", |s| {
            let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
            s.write(fh, 0, &pattern(3, 9000)).unwrap();
            s.link(m.ino, ROOT_INO, b"published", None).unwrap();
            s.release(fh).unwrap();
        }),
        ("an unnamed file published in a transaction", |s| {
            let tx = s.tx_begin(&[]).unwrap();
            let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), Some(tx)).unwrap();
            s.write(fh, 0, &pattern(4, 5000)).unwrap();
            s.link(m.ino, ROOT_INO, b"txed", Some(tx)).unwrap();
            s.tx_commit(tx).unwrap();
            s.release(fh).unwrap();
        }),
        ("an unnamed file released", |s| {
            let (_, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
            s.write(fh, 0, &pattern(5, 7000)).unwrap();
            s.release(fh).unwrap();
        }),
        ("an aborted transaction of every kind", |s| {
            let g = ino(s, "g");
            let fh = s.open(g, rw()).unwrap();
            let tx = s.tx_begin(&[fh]).unwrap();
            s.setxattr(g, b"user.a", b"aborted", XattrSet::Either, Some(tx))
                .unwrap();
            s.removexattr(g, b"user.a", Some(tx)).unwrap();
            s.rename_with(
                ROOT_INO,
                b"g",
                ROOT_INO,
                b"f",
                RenameMode::Exchange,
                Some(tx),
            )
            .unwrap();
            s.symlink(ROOT_INO, b"l2", b"x", Some(tx)).unwrap();
            s.mknod(ROOT_INO, b"s", FileKind::Socket, 0o644, 0, Some(tx))
                .unwrap();
            s.fallocate(fh, Fallocate::ZeroRange { keep_size: false }, 0, 40_000)
                .unwrap();
            let (m, tmp) = s.tmpfile(ROOT_INO, 0o600, rw(), Some(tx)).unwrap();
            s.write(tmp, 0, b"never").unwrap();
            s.link(m.ino, ROOT_INO, b"never", Some(tx)).unwrap();
            s.tx_abort(tx).unwrap();
            s.release(tmp).unwrap();
            s.release(fh).unwrap();
        }),
    ]
}

/// A tree in one line: each path with its kind and length (a file's with a checksum).
fn one_line(tree: &Tree) -> String {
    tree.iter()
        .map(|(k, v)| {
            let what = match v {
                Node::File(d) => format!("file {} crc {:08x}", d.len(), pmem::crc::crc32c(d)),
                Node::Xattr(v) => format!("xattr {} crc {:08x}", v.len(), pmem::crc::crc32c(v)),
                other => format!("{other:?}"),
            };
            format!("{}: {what}", String::from_utf8_lossy(k).replace('\0', "@"))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the crashes of one step recovered to.
#[derive(Default)]
struct Seen {
    trees: Vec<Tree>,
    errors: Vec<String>,
}

/// Recover `image`, check it, and recover its own image again: both trees.
fn recover_twice(target: &CacheTarget, image: Vec<u8>) -> Result<(Tree, Tree), String> {
    let region = Arc::new(SimRegion::from_image(image));
    let s = target
        .recover(region.clone())
        .map_err(|e| format!("recover: {e}"))?;
    let tree = snapshot(s.as_ref()).map_err(|e| format!("snapshot: {e}"))?;
    let report = s.fsck().map_err(|e| format!("fsck: {e}"))?;
    if !report.is_clean() {
        return Err(format!("fsck: {report:?}"));
    }
    drop(s);
    let again = Arc::new(SimRegion::from_image(region.persistent_image()));
    let s = target
        .recover(again)
        .map_err(|e| format!("second recover: {e}"))?;
    let second = snapshot(s.as_ref()).map_err(|e| format!("snapshot: {e}"))?;
    Ok((tree, second))
}

fn note(seen: &Mutex<Seen>, result: Result<(Tree, Tree), String>) {
    let mut seen = seen.lock().unwrap();
    match result {
        Ok((a, b)) if a == b => seen.trees.push(a),
        Ok((a, b)) => seen
            .errors
            .push(format!("a second recovery changed {a:?} into {b:?}")),
        Err(e) => seen.errors.push(e),
    }
}

fn run(target: CacheTarget) -> u64 {
    let target = Arc::new(target);
    let region = Arc::new(SimRegion::new(target.region_len()));
    region.set_crash_config(CrashConfig {
        exhaustive_limit: 2,
        sample_count: 2,
        seed: 7,
    });
    let s = target.format(region.clone()).unwrap();
    setup(s.as_ref());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut checked = 0;
    for (name, step) in steps() {
        let before = snapshot(s.as_ref()).unwrap();
        let (t, sn) = (target.clone(), seen.clone());
        region.set_fence_hook(Box::new(move |point| {
            for i in 0..point.image_count() {
                note(&sn, recover_twice(&t, point.image(i)));
            }
        }));
        step(s.as_ref());
        region.take_fence_hook();
        let after = snapshot(s.as_ref()).unwrap();
        // A crash now (the step returned): the tree after it.
        let now = recover_twice(&target, region.persistent_image());
        match &now {
            Ok((a, b)) if *a == after && *b == after => {}
            Ok((a, _)) => panic!(
                "{}: {name}: a crash after the step gave {} (want {})",
                target.name(),
                one_line(a),
                one_line(&after)
            ),
            Err(e) => panic!("{}: {name}: a crash after the step: {e}", target.name()),
        }
        let mut seen = seen.lock().unwrap();
        assert!(
            seen.errors.is_empty(),
            "{}: {name}: {:?}",
            target.name(),
            seen.errors
        );
        for (i, tree) in seen.trees.iter().enumerate() {
            assert!(
                *tree == before || *tree == after,
                "{}: {name}: crash image {i} recovered to neither the tree before nor after:\n\
                 before {}\n after {}\n got {}",
                target.name(),
                one_line(&before),
                one_line(&after),
                one_line(tree)
            );
        }
        checked += seen.trees.len() as u64 + 1;
        seen.trees.clear();
    }
    checked
}

#[test]
fn every_posix_call_recovers_to_before_or_after_at_every_fence() {
    for name in ["cache-lazy", "cache-through", "cache-collide"] {
        let target = CacheTarget::by_name(name).unwrap();
        let checked = run(target);
        println!("{name}: {checked} crash images of POSIX calls recovered and checked");
        assert!(checked > 40, "{name}: only {checked} crash images");
    }
}
