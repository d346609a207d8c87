//! Directories, names, renames, links, attributes and path resolution.

use super::*;
use crate::assert_err;
use crate::tree::Node;
use store::{resolve, FileKind, Ino, SetAttr, NAME_MAX, ROOT_INO};

fn names(s: &dyn Store, dir: Ino) -> Vec<(Vec<u8>, FileKind)> {
    let mut v: Vec<_> = ok(s.read_dir(dir), "read_dir")
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn ino(s: &dyn Store, path: &str) -> Ino {
    ok(resolve(s, path), path).ino
}

/// mkdir, read_dir, rmdir and their errors.
pub fn mkdir_rmdir_read_dir(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    assert!(names(s, ROOT_INO).is_empty(), "a fresh store is empty");
    let a = ok(s.mkdir(ROOT_INO, b"a", 0o755, None), "mkdir a");
    assert_eq!(a.kind, FileKind::Dir);
    ok(s.mkdir(a.ino, b"b", 0o755, None), "mkdir a/b");
    ok(s.create(a.ino, b"f", 0o644, None), "create a/f");
    assert_err!(s.mkdir(ROOT_INO, b"a", 0o755, None), Error::Exists(_));
    assert_err!(s.mkdir(a.ino, b"f", 0o755, None), Error::Exists(_));
    assert_eq!(names(s, ROOT_INO), vec![(b"a".to_vec(), FileKind::Dir)]);
    assert_eq!(
        names(s, a.ino),
        vec![
            (b"b".to_vec(), FileKind::Dir),
            (b"f".to_vec(), FileKind::File)
        ]
    );
    assert_err!(s.rmdir(ROOT_INO, b"a", None), Error::NotEmpty(_));
    assert_err!(s.rmdir(a.ino, b"f", None), Error::NotDir(_));
    assert_err!(s.unlink(a.ino, b"b", None), Error::IsDir(_));
    assert_err!(s.rmdir(a.ino, b"zz", None), Error::NotFound(_));
    let f = ok(s.lookup(a.ino, b"f"), "lookup");
    assert_err!(s.read_dir(f.ino), Error::NotDir(_));
    assert_err!(s.mkdir(f.ino, b"x", 0o755, None), Error::NotDir(_));
    ok(s.rmdir(a.ino, b"b", None), "rmdir a/b");
    ok(s.unlink(a.ino, b"f", None), "unlink a/f");
    assert!(names(s, a.ino).is_empty());
    ok(s.rmdir(ROOT_INO, b"a", None), "rmdir a");
    assert_err!(s.lookup(ROOT_INO, b"a"), Error::NotFound(_));
    ok(s.mkdir(ROOT_INO, b"a", 0o700, None), "mkdir a again");
    let store = h.reopen_clean(store);
    let s = store.as_ref();
    assert_eq!(names(s, ROOT_INO), vec![(b"a".to_vec(), FileKind::Dir)]);
    assert_eq!(ok(s.lookup(ROOT_INO, b"a"), "lookup").perm & 0o777, 0o700);
    finish(store);
}

/// Renames within a directory, into a subdirectory, of a directory with contents.
pub fn rename_moves(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    ok(store::path::mkdir_all(s, "/d/sub", 0o755), "mkdir");
    write_path(s, "/f", b"file f");
    write_path(s, "/d/g", b"file g");
    ok(
        s.rename(ROOT_INO, b"f", ROOT_INO, b"f2", None),
        "rename in dir",
    );
    let (d, sub) = (ino(s, "/d"), ino(s, "/d/sub"));
    ok(
        s.rename(ROOT_INO, b"f2", sub, b"f3", None),
        "rename into subdir",
    );
    ok(s.rename(ROOT_INO, b"d", ROOT_INO, b"e", None), "rename dir");
    assert_err!(resolve(s, "/f"), Error::NotFound(_));
    assert_err!(resolve(s, "/d"), Error::NotFound(_));
    assert_eq!(file(s, "/e/sub/f3"), b"file f");
    assert_eq!(file(s, "/e/g"), b"file g");
    assert_eq!(ino(s, "/e"), d, "rename keeps the inode");
    // a directory moves up and out
    ok(
        s.rename(sub, b"f3", ROOT_INO, b"back", None),
        "rename out of subdir",
    );
    ok(s.rename(d, b"sub", ROOT_INO, b"sub", None), "move dir up");
    assert_eq!(
        ok(resolve(s, "/sub/.."), "..").ino,
        ROOT_INO,
        "moved dir's .. is its new parent"
    );
    let store = h.reopen_clean(store);
    let t = tree(store.as_ref());
    let want: Vec<(&[u8], Node)> = vec![
        (b"back", Node::File(b"file f".to_vec())),
        (b"e", Node::Dir),
        (b"e/g", Node::File(b"file g".to_vec())),
        (b"sub", Node::Dir),
    ];
    let want = want.into_iter().map(|(p, n)| (p.to_vec(), n)).collect();
    assert_tree(&want, &t, "after renames and reopen");
    finish(store);
}

/// Rename replacing a file, an empty directory; rename over itself.
pub fn rename_replaces(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/a", b"AAA");
    write_path(s, "/b", b"BBBBBB");
    ok(
        s.rename(ROOT_INO, b"a", ROOT_INO, b"b", None),
        "file over file",
    );
    assert_eq!(file(s, "/b"), b"AAA");
    assert_err!(resolve(s, "/a"), Error::NotFound(_));
    ok(s.mkdir(ROOT_INO, b"d1", 0o755, None), "mkdir");
    ok(s.mkdir(ROOT_INO, b"d2", 0o755, None), "mkdir");
    write_path(s, "/d1/x", b"x");
    ok(
        s.rename(ROOT_INO, b"d1", ROOT_INO, b"d2", None),
        "dir over empty dir",
    );
    assert_eq!(file(s, "/d2/x"), b"x");
    assert_err!(resolve(s, "/d1"), Error::NotFound(_));
    ok(
        s.rename(ROOT_INO, b"b", ROOT_INO, b"b", None),
        "rename over itself",
    );
    assert_eq!(file(s, "/b"), b"AAA");
    let d2 = ino(s, "/d2");
    ok(
        s.rename(d2, b"x", d2, b"x", None),
        "rename over itself in a subdir",
    );
    assert_eq!(names(s, ROOT_INO).len(), 2);
    let store = h.reopen_clean(store);
    assert_eq!(file(store.as_ref(), "/b"), b"AAA");
    assert_eq!(file(store.as_ref(), "/d2/x"), b"x");
    finish(store);
}

/// Renames that must fail, leaving everything in place.
pub fn rename_errors(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    ok(store::path::mkdir_all(s, "/d/inner", 0o755), "mkdir");
    ok(s.mkdir(ROOT_INO, b"full", 0o755, None), "mkdir");
    write_path(s, "/full/x", b"x");
    write_path(s, "/f", b"f");
    let before = tree(s);
    let (d, inner) = (ino(s, "/d"), ino(s, "/d/inner"));
    assert_err!(
        s.rename(ROOT_INO, b"nope", ROOT_INO, b"x", None),
        Error::NotFound(_)
    );
    assert_err!(
        s.rename(ROOT_INO, b"f", ROOT_INO, b"d", None),
        Error::IsDir(_)
    );
    assert_err!(
        s.rename(ROOT_INO, b"d", ROOT_INO, b"f", None),
        Error::NotDir(_)
    );
    assert_err!(
        s.rename(ROOT_INO, b"d", ROOT_INO, b"full", None),
        Error::NotEmpty(_) | Error::Exists(_)
    );
    assert_err!(
        s.rename(ROOT_INO, b"d", inner, b"loop", None),
        Error::InvalidArgument(_)
    );
    assert_err!(
        s.rename(ROOT_INO, b"d", d, b"self", None),
        Error::InvalidArgument(_)
    );
    assert_tree(&before, &tree(s), "after failed renames");
    finish(store);
}

/// The order of a namespace call's errors: a bad name first (NameTooLong, InvalidArgument),
/// whatever the transaction; then a transaction that is not open (NoSuchTransaction), before
/// the call's own errors about the tree (Exists, NotFound, NotEmpty); and a refused call
/// changes nothing.
pub fn namespace_error_order(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/a", b"a");
    ok(s.mkdir(ROOT_INO, b"d", 0o755, None), "mkdir");
    write_path(s, "/d/f", b"f");
    let a = ok(s.lookup(ROOT_INO, b"a"), "lookup").ino;
    let t = ok(s.tx_begin(&[]), "tx_begin");
    ok(s.tx_commit(t), "commit");
    let long = vec![b'n'; NAME_MAX + 1];
    let bad_names: [&[u8]; 5] = [b".", b"..", b"", b"x/y", b"nul\0"];
    for tx in [None, Some(t)] {
        let long_err = |r: store::Result<()>, call: &str| match r {
            Err(Error::NameTooLong { .. }) => {}
            other => panic!(
                "{call} of a {}-byte name (tx {tx:?}): expected NameTooLong, got {other:?}",
                long.len()
            ),
        };
        long_err(s.create(ROOT_INO, &long, 0o644, tx).map(|_| ()), "create");
        long_err(s.mkdir(ROOT_INO, &long, 0o755, tx).map(|_| ()), "mkdir");
        long_err(s.unlink(ROOT_INO, &long, tx), "unlink");
        long_err(s.rmdir(ROOT_INO, &long, tx), "rmdir");
        long_err(s.rename(ROOT_INO, b"a", ROOT_INO, &long, tx), "rename");
        for name in bad_names {
            let bad = |r: store::Result<()>, call: &str| {
                match r {
                Err(Error::InvalidArgument(_)) => {}
                other => panic!("{call} of the name {name:?} (tx {tx:?}): expected InvalidArgument, got {other:?}"),
            }
            };
            bad(s.create(ROOT_INO, name, 0o644, tx).map(|_| ()), "create");
            bad(s.mkdir(ROOT_INO, name, 0o755, tx).map(|_| ()), "mkdir");
            bad(s.unlink(ROOT_INO, name, tx), "unlink");
            bad(s.rmdir(ROOT_INO, name, tx), "rmdir");
            bad(s.rename(ROOT_INO, b"a", ROOT_INO, name, tx), "rename");
        }
    }
    let gone = |r: store::Result<()>, call: &str| match r {
        Err(Error::NoSuchTransaction(id)) if id == t.0 => {}
        other => panic!(
            "{call} in finished transaction {}: expected NoSuchTransaction, got {other:?}",
            t.0
        ),
    };
    gone(
        s.create(ROOT_INO, b"a", 0o644, Some(t)).map(|_| ()),
        "create over an existing name",
    );
    gone(
        s.mkdir(ROOT_INO, b"d", 0o755, Some(t)).map(|_| ()),
        "mkdir over an existing name",
    );
    gone(
        s.unlink(ROOT_INO, b"missing", Some(t)),
        "unlink of a missing name",
    );
    gone(
        s.rmdir(ROOT_INO, b"d", Some(t)),
        "rmdir of a non-empty directory",
    );
    gone(
        s.rename(ROOT_INO, b"missing", ROOT_INO, b"b", Some(t)),
        "rename of a missing name",
    );
    gone(
        s.rename(ROOT_INO, b"a", ROOT_INO, b"a", Some(t)),
        "rename onto itself",
    );
    gone(
        s.create(ROOT_INO, b"new", 0o644, Some(t)).map(|_| ()),
        "create",
    );
    gone(s.unlink(ROOT_INO, b"a", Some(t)), "unlink");
    gone(
        s.setattr(
            a,
            &SetAttr {
                perm: Some(0o600),
                ..Default::default()
            },
            Some(t),
        )
        .map(|_| ()),
        "setattr",
    );
    let want = Tree::from([
        (b"a".to_vec(), Node::File(b"a".to_vec())),
        (b"d".to_vec(), Node::Dir),
        (b"d/f".to_vec(), Node::File(b"f".to_vec())),
    ]);
    assert_tree(&want, &tree(s), "after the refused calls");
    assert_eq!(
        ok(s.getattr(a), "getattr").perm & 0o777,
        0o644,
        "perm unchanged"
    );
    finish(store);
}

/// Unlink removes the name; an open handle keeps reading and writing the file until released.
pub fn unlink_keeps_open_file(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/f", b"still here");
    let fh = ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(s, "/f", None),
        "open",
    );
    ok(s.unlink(ROOT_INO, b"f", None), "unlink");
    assert_err!(s.lookup(ROOT_INO, b"f"), Error::NotFound(_));
    assert_err!(s.unlink(ROOT_INO, b"f", None), Error::NotFound(_));
    assert_eq!(contents(s, fh), b"still here");
    put(s, fh, 0, b"STILL");
    assert_eq!(contents(s, fh), b"STILL here");
    assert_eq!(ok(s.fstat(fh), "fstat").nlink, 0);
    ok(s.release(fh), "release");
    assert!(names(s, ROOT_INO).is_empty());
    let fh = open_rw(s, "/f");
    assert_eq!(contents(s, fh), b"", "a new file of the same name is new");
    ok(s.release(fh), "release");
    finish(h.reopen_clean(store));
}

/// Hard links share data and count links (skipped when the engine has no hard links).
pub fn hard_links(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "/a", b"shared");
    let a = ino(s, "/a");
    ok(s.mkdir(ROOT_INO, b"d", 0o755, None), "mkdir");
    let d = ino(s, "/d");
    match s.link(a, d, b"b", None) {
        Err(Error::Unsupported(_)) => {
            skip("hard_links", "engine has no hard links");
            return finish(store);
        }
        r => assert_eq!(ok(r, "link").nlink, 2),
    }
    assert_eq!(ino(s, "/d/b"), a);
    assert_err!(s.link(a, ROOT_INO, b"a", None), Error::Exists(_));
    // POSIX link(2): EPERM when the source is a directory.
    assert_err!(
        s.link(d, ROOT_INO, b"dirlink", None),
        Error::NotPermitted(_)
    );
    let fh = ok(OpenOptions::new().write(true).open(s, "/d/b", None), "open");
    put(s, fh, 0, b"SH");
    ok(s.release(fh), "release");
    assert_eq!(file(s, "/a"), b"SHared");
    ok(s.unlink(ROOT_INO, b"a", None), "unlink");
    assert_eq!(ok(s.getattr(a), "getattr").nlink, 1);
    let store = h.reopen_clean(store);
    assert_eq!(file(store.as_ref(), "/d/b"), b"SHared");
    finish(store);
}

/// Size, kind, nlink, perm, times; getattr agrees with fstat and lookup.
pub fn stat_fields(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let root = ok(s.getattr(ROOT_INO), "getattr root");
    assert_eq!((root.ino, root.kind), (ROOT_INO, FileKind::Dir));
    let created = ok(s.create(ROOT_INO, b"f", 0o640, None), "create");
    assert_eq!(
        (
            created.kind,
            created.size,
            created.nlink,
            created.perm & 0o777
        ),
        (FileKind::File, 0, 1, 0o640)
    );
    assert_eq!(ok(s.lookup(ROOT_INO, b"f"), "lookup").ino, created.ino);
    let past = SetAttr {
        mtime: Some(1_000_000_000),
        ..Default::default()
    };
    assert_eq!(
        ok(s.setattr(created.ino, &past, None), "setattr").mtime,
        1_000_000_000
    );
    let fh = ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(s, "/f", None),
        "open",
    );
    put(s, fh, 0, &[7u8; 5000]);
    let meta = ok(s.fstat(fh), "fstat");
    assert_eq!(meta.size, 5000);
    assert!(meta.mtime > 1_000_000_000, "write did not change mtime");
    assert_eq!(ok(s.getattr(created.ino), "getattr"), meta);
    ok(
        s.setattr(
            created.ino,
            &SetAttr {
                perm: Some(0o600),
                ..Default::default()
            },
            None,
        ),
        "chmod",
    );
    assert_eq!(ok(s.getattr(created.ino), "getattr").perm & 0o777, 0o600);
    ok(s.setattr(created.ino, &past, None), "setattr");
    ok(s.set_len(fh, 10), "set_len");
    let meta = ok(s.fstat(fh), "fstat");
    assert_eq!(meta.size, 10);
    assert!(meta.mtime > 1_000_000_000, "set_len did not change mtime");
    ok(s.release(fh), "release");
    let d = ok(s.mkdir(ROOT_INO, b"d", 0o755, None), "mkdir");
    assert_eq!(d.kind, FileKind::Dir);
    assert_ne!(d.ino, created.ino);
    let store = h.reopen_clean(store);
    let m = ok(store.lookup(ROOT_INO, b"f"), "lookup");
    assert_eq!(
        (m.size, m.perm & 0o777, m.nlink, m.kind),
        (10, 0o600, 1, FileKind::File)
    );
    finish(store);
}

/// Absolute and relative paths, `.` and `..`, paths through a file, over-long names.
pub fn paths(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    ok(store::path::mkdir_all(s, "/a/b", 0o755), "mkdir_all");
    write_path(s, "/a/b/f", b"deep");
    let f = ino(s, "/a/b/f");
    for p in [
        "a/b/f",
        "/a/b/f",
        "./a/./b/f",
        "/a/../a/b/f",
        "a/b/../b/f",
        "/../a/b/f",
        "//a//b//f",
    ] {
        assert_eq!(ino(s, p), f, "path {p}");
    }
    assert_eq!(ino(s, "/"), ROOT_INO);
    assert_eq!(ino(s, "/a/.."), ROOT_INO);
    assert_err!(resolve(s, "/a/b/f/x"), Error::NotDir(_));
    assert_err!(
        OpenOptions::new()
            .write(true)
            .create(true)
            .open(s, "/a/b/f/x", None),
        Error::NotDir(_)
    );
    assert_err!(resolve(s, "/a/nope/f"), Error::NotFound(_));
    let long = "n".repeat(NAME_MAX + 1);
    assert_err!(resolve(s, format!("/a/{long}")), Error::NameTooLong { .. });
    assert_err!(
        s.create(ROOT_INO, long.as_bytes(), 0o644, None),
        Error::NameTooLong { .. }
    );
    assert_err!(
        s.mkdir(ROOT_INO, long.as_bytes(), 0o755, None),
        Error::NameTooLong { .. }
    );
    assert_eq!(
        Error::NameTooLong { len: 256, max: 255 }.errno(),
        36,
        "ENAMETOOLONG"
    );
    let longest = "m".repeat(NAME_MAX);
    write_path(s, &format!("/a/{longest}"), b"ok");
    assert_eq!(file(s, &format!("a/{longest}")), b"ok");
    write_path(s, "/a/b/g", b"g");
    let a = ino(s, "/a");
    assert_err!(s.rmdir(ROOT_INO, b"a", None), Error::NotEmpty(_));
    assert_err!(s.rmdir(a, b"b", None), Error::NotEmpty(_));
    let store = h.reopen_clean(store);
    assert_eq!(file(store.as_ref(), &format!("/a/{longest}")), b"ok");
    finish(store);
}

fn many_files(h: &dyn Harness, count: usize) {
    let store = h.fresh();
    let s = store.as_ref();
    let d = ok(s.mkdir(ROOT_INO, b"many", 0o755, None), "mkdir").ino;
    for i in 0..count {
        let name = format!("file-{i:06}");
        let m = ok(s.create(d, name.as_bytes(), 0o644, None), &name);
        if i % 97 == 0 {
            let fh = ok(
                s.open(
                    m.ino,
                    store::OpenFlags {
                        write: true,
                        read: true,
                        ..Default::default()
                    },
                ),
                "open",
            );
            put(s, fh, 0, name.as_bytes());
            ok(s.release(fh), "release");
        }
    }
    let store = h.reopen_clean(store);
    let s = store.as_ref();
    let listed = names(s, d);
    assert_eq!(listed.len(), count);
    for (i, (name, kind)) in listed.iter().enumerate() {
        assert_eq!(
            (name.as_slice(), *kind),
            (format!("file-{i:06}").as_bytes(), FileKind::File)
        );
    }
    for i in (0..count).step_by(97) {
        let name = format!("file-{i:06}");
        assert_eq!(file(s, &format!("/many/{name}")), name.as_bytes());
    }
    for i in (0..count).step_by(2) {
        ok(
            s.unlink(d, format!("file-{i:06}").as_bytes(), None),
            "unlink",
        );
    }
    let listed = names(s, d);
    assert_eq!(listed.len(), count / 2);
    assert!(
        listed
            .iter()
            .all(|(n, _)| n.last().is_some_and(|c| (c - b'0') % 2 == 1)),
        "wrong files removed"
    );
    let store = h.reopen_clean(store);
    assert_eq!(names(store.as_ref(), d).len(), count / 2);
    finish(store);
}

/// A few thousand files in one directory: create, list, look up, unlink half, reopen.
pub fn many_files_in_one_dir(h: &dyn Harness) {
    many_files(h, 3000);
}

/// 100,000 files in one directory (ignored by default: minutes in a debug build).
/// Run: `cargo test -p <crate> --release -- --ignored many_files_100k`.
pub fn many_files_100k(h: &dyn Harness) {
    many_files(h, 100_000);
}
