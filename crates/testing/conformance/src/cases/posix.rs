//! The rest of the POSIX file API: symbolic links, special files, unnamed files, rename
//! modes, fallocate and extended attributes.
//!
//! An engine that does not offer one of these yet is listed in [`awaited`]; its case then
//! checks that the call is refused with [`Error::Unsupported`] (EOPNOTSUPP) and changes
//! nothing, and says so on stderr. Every other engine runs the whole case.

use super::*;
use crate::assert_err;
use crate::tree::{xattr_key, Node};
use store::{
    resolve, Fallocate, FileKind, Ino, OpenFlags, RenameMode, SetAttr, XattrSet, ROOT_INO,
    SYMLINK_MAX,
};

/// A part of the POSIX file API an engine may not offer yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    Symlinks,
    SpecialFiles,
    UnnamedFiles,
    RenameModes,
    Fallocate,
    Xattrs,
}

const ALL: &[Feature] = &[
    Feature::Symlinks,
    Feature::SpecialFiles,
    Feature::UnnamedFiles,
    Feature::RenameModes,
    Feature::Fallocate,
    Feature::Xattrs,
];

/// What each engine does not offer yet, by the first word of its `engine_name` (a store
/// server's client answers its engine's name). docs/posix.md shows the same table.
pub fn awaited(engine_name: &str) -> &'static [Feature] {
    let engine = engine_name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or("");
    match engine {
        "model" | "mmio" | "pool" => &[],
        "journal" => &[],
        "remap" => &[],
        "cache" => &[],
        _ => ALL,
    }
}

/// Whether the store offers `feature`; when it is awaited (or the harness's host file system
/// lacks it), checks that `probe` is refused with Unsupported and leaves the tree as it was,
/// and says so.
fn offers(
    h: &dyn Harness,
    s: &dyn Store,
    feature: Feature,
    case: &str,
    probe: impl FnOnce(&dyn Store) -> Result<()>,
) -> bool {
    if !awaited(&s.engine_name()).contains(&feature) && !h.host_lacks().contains(&feature) {
        return true;
    }
    let before = tree(s);
    match probe(s) {
        Err(Error::Unsupported(_)) => {}
        other => panic!(
            "{case}: {} lists {feature:?} as not offered, but the call answered {other:?} \
             (take it off conformance::cases::awaited, or the harness's host_lacks)",
            s.engine_name()
        ),
    }
    assert_tree(&before, &tree(s), "after a refused call");
    eprintln!(
        "conformance {case}: {} does not offer {feature:?} yet: EOPNOTSUPP checked",
        s.engine_name()
    );
    false
}

fn ino(s: &dyn Store, path: &str) -> Ino {
    ok(resolve(s, path), path).ino
}

fn lookup(s: &dyn Store, dir: Ino, name: &[u8]) -> store::Metadata {
    ok(s.lookup(dir, name), &String::from_utf8_lossy(name))
}

/// symlink, readlink, lstat, their errors, in transactions, across a crash.
pub fn symlinks(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    if !offers(h, s, Feature::Symlinks, "symlinks", |s| {
        s.symlink(ROOT_INO, b"l", b"t", None).map(drop)
    }) {
        return finish(store);
    }
    ok(s.mkdir(ROOT_INO, b"d", 0o755, None), "mkdir d");
    let l = ok(s.symlink(ROOT_INO, b"l", b"d/missing/x", None), "symlink l");
    assert_eq!(l.kind, FileKind::Symlink);
    assert_eq!(l.size, 11, "a symlink's size is its target's length");
    assert_eq!(ok(s.readlink(l.ino), "readlink"), b"d/missing/x");
    assert_eq!(lookup(s, ROOT_INO, b"l").kind, FileKind::Symlink);
    let f = ok(s.create(ROOT_INO, b"f", 0o644, None), "create f");
    assert_err!(s.readlink(f.ino), Error::InvalidArgument(_));
    assert_err!(s.readlink(ROOT_INO), Error::InvalidArgument(_));
    assert_err!(s.symlink(ROOT_INO, b"l", b"x", None), Error::Exists(_));
    assert_err!(s.symlink(ROOT_INO, b"e", b"", None), Error::NotFound(_));
    let long = vec![b'a'; SYMLINK_MAX + 1];
    assert_err!(
        s.symlink(ROOT_INO, b"e", &long, None),
        Error::NameTooLong { .. }
    );
    assert_err!(s.symlink(f.ino, b"e", b"x", None), Error::NotDir(_));
    assert_err!(s.open(l.ino, OpenFlags::default()), Error::SymlinkLoop(_));
    // The longest target, an absolute one, and one that leaves the store: kept as written.
    let max = vec![b'm'; SYMLINK_MAX];
    let m = ok(s.symlink(ROOT_INO, b"max", &max, None), "symlink max");
    ok(
        s.symlink(ROOT_INO, b"abs", b"/etc/passwd", None),
        "symlink abs",
    );
    ok(s.symlink(ROOT_INO, b"up", b"../../..", None), "symlink up");
    // Times and owner of the link itself; a hard link to it; a rename of it.
    let t = 1_600_000_000_000_000_000;
    let attr = SetAttr {
        mtime: Some(t),
        uid: Some(7),
        ..Default::default()
    };
    let after = ok(s.setattr(l.ino, &attr, None), "setattr of a symlink");
    assert_eq!((after.mtime, after.uid), (t, 7));
    let d = ino(s, "d");
    assert_eq!(ok(s.link(l.ino, d, b"l2", None), "link").nlink, 2);
    ok(s.rename(d, b"l2", ROOT_INO, b"l3", None), "rename");
    ok(s.unlink(ROOT_INO, b"l3", None), "unlink l3");
    // In a transaction: gone on abort, kept on commit.
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    ok(s.symlink(d, b"in-aborted", b"x", Some(tx)), "symlink in tx");
    ok(s.tx_abort(tx), "abort");
    assert_err!(s.lookup(d, b"in-aborted"), Error::NotFound(_));
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    ok(s.symlink(d, b"in-tx", b"../f", Some(tx)), "symlink in tx");
    ok(s.tx_commit(tx), "commit");
    let before = tree(s);
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    assert_tree(&before, &tree(s), "after a crash");
    assert_eq!(
        before.get(b"d/in-tx".as_slice()),
        Some(&Node::Symlink(b"../f".to_vec()))
    );
    assert_eq!(ok(s.readlink(ino(s, "max")), "readlink max"), max);
    let l = lookup(s, ROOT_INO, b"l");
    assert_eq!((l.mtime, l.uid, l.nlink), (t, 7, 1));
    assert_ne!(m.ino, 0);
    finish(store);
}

/// FIFOs, sockets and device nodes: kinds, device numbers, refusals, transactions, a crash.
pub fn special_files(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    if !offers(h, s, Feature::SpecialFiles, "special_files", |s| {
        s.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o644, 0, None)
            .map(drop)
    }) {
        return finish(store);
    }
    let null = libc::makedev(1, 3);
    let loop0 = libc::makedev(7, 0);
    let kinds = [
        (b"fifo".as_slice(), FileKind::Fifo, 0, 0o640),
        (b"sock", FileKind::Socket, 0, 0o755),
        (b"null", FileKind::CharDevice, null, 0o666),
        (b"loop0", FileKind::BlockDevice, loop0, 0o660),
    ];
    for (name, kind, rdev, perm) in kinds {
        let m = ok(s.mknod(ROOT_INO, name, kind, perm, rdev, None), "mknod");
        assert_eq!(
            (m.kind, m.rdev, m.perm, m.size, m.nlink),
            (kind, rdev, perm, 0, 1)
        );
        assert_err!(
            s.open(
                m.ino,
                OpenFlags {
                    read: true,
                    ..Default::default()
                }
            ),
            Error::Unsupported(_)
        );
    }
    assert_err!(
        s.mknod(ROOT_INO, b"fifo", FileKind::Fifo, 0o644, 0, None),
        Error::Exists(_)
    );
    for kind in [FileKind::File, FileKind::Dir, FileKind::Symlink] {
        assert_err!(
            s.mknod(ROOT_INO, b"x", kind, 0o644, 0, None),
            Error::InvalidArgument(_)
        );
    }
    let fifo = ino(s, "fifo");
    ok(s.link(fifo, ROOT_INO, b"fifo2", None), "link to a fifo");
    ok(
        s.rename(ROOT_INO, b"sock", ROOT_INO, b"sock2", None),
        "rename",
    );
    ok(s.unlink(ROOT_INO, b"fifo", None), "unlink");
    assert_eq!(ok(s.getattr(fifo), "getattr").nlink, 1);
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    let dev = libc::makedev(4, 64);
    ok(
        s.mknod(
            ROOT_INO,
            b"aborted",
            FileKind::CharDevice,
            0o600,
            dev,
            Some(tx),
        ),
        "mknod in tx",
    );
    ok(s.tx_abort(tx), "abort");
    assert_err!(s.lookup(ROOT_INO, b"aborted"), Error::NotFound(_));
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    ok(
        s.mknod(ROOT_INO, b"tty", FileKind::CharDevice, 0o600, dev, Some(tx)),
        "mknod in tx",
    );
    ok(s.tx_commit(tx), "commit");
    let before = tree(s);
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    assert_tree(&before, &tree(s), "after a crash");
    let tty = lookup(s, ROOT_INO, b"tty");
    assert_eq!(
        (tty.kind, tty.rdev, tty.perm),
        (FileKind::CharDevice, dev, 0o600)
    );
    assert_eq!(lookup(s, ROOT_INO, b"loop0").rdev, loop0);
    assert_eq!(lookup(s, ROOT_INO, b"sock2").kind, FileKind::Socket);
    finish(store);
}

/// O_TMPFILE: an unnamed file, published with its contents by `link`, gone otherwise.
pub fn unnamed_files(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    if !offers(h, s, Feature::UnnamedFiles, "unnamed_files", |s| {
        s.tmpfile(ROOT_INO, 0o600, rw, None).map(drop)
    }) {
        return finish(store);
    }
    let (m, fh) = ok(s.tmpfile(ROOT_INO, 0o600, rw, None), "tmpfile");
    assert_eq!((m.kind, m.nlink), (FileKind::File, 0));
    put(s, fh, 0, &pattern(1, 10_000));
    assert!(tree(s).is_empty(), "an unnamed file has no name");
    let named = ok(s.link(m.ino, ROOT_INO, b"published", None), "link");
    assert_eq!(named.nlink, 1);
    ok(s.release(fh), "release");
    assert_eq!(file(s, "published"), pattern(1, 10_000));
    // Released without a name: gone, its space back.
    let (_, fh) = ok(s.tmpfile(ROOT_INO, 0o600, rw, None), "tmpfile 2");
    put(s, fh, 0, &pattern(2, 50_000));
    ok(s.release(fh), "release 2");
    check_fsck(s, "an unnamed file released");
    // A file unlinked while open gets no new name (linkat(2) without O_TMPFILE).
    let fh = open_rw(s, "gone");
    let gone = ino(s, "gone");
    ok(s.unlink(ROOT_INO, b"gone", None), "unlink gone");
    assert_err!(s.link(gone, ROOT_INO, b"back", None), Error::NotFound(_));
    ok(s.release(fh), "release gone");
    assert_err!(s.tmpfile(gone, 0o600, rw, None), Error::NotFound(_));
    let f = ino(s, "published");
    assert_err!(s.tmpfile(f, 0o600, rw, None), Error::NotDir(_));
    // In a transaction: the name and the data come together, or not at all.
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    let (m, fh) = ok(s.tmpfile(ROOT_INO, 0o600, rw, Some(tx)), "tmpfile in tx");
    put(s, fh, 0, b"in the aborted transaction");
    ok(s.link(m.ino, ROOT_INO, b"aborted", Some(tx)), "link in tx");
    ok(s.tx_abort(tx), "abort");
    ok(s.release(fh), "release");
    assert_err!(s.lookup(ROOT_INO, b"aborted"), Error::NotFound(_));
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    let (m, fh) = ok(s.tmpfile(ROOT_INO, 0o600, rw, Some(tx)), "tmpfile in tx");
    put(s, fh, 0, b"committed with its name");
    ok(
        s.link(m.ino, ROOT_INO, b"committed", Some(tx)),
        "link in tx",
    );
    ok(s.tx_commit(tx), "commit");
    ok(s.release(fh), "release");
    // Open and unnamed at a crash: nothing of it remains.
    let (_, fh) = ok(s.tmpfile(ROOT_INO, 0o600, rw, None), "tmpfile 3");
    put(s, fh, 0, &pattern(3, 20_000));
    let before = tree(s);
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    assert_tree(&before, &tree(s), "after a crash");
    assert_eq!(file(s, "committed"), b"committed with its name");
    finish(store);
}

fn names_in(s: &dyn Store, dir: Ino) -> Vec<Vec<u8>> {
    let mut v: Vec<_> = ok(s.read_dir(dir), "read_dir")
        .into_iter()
        .map(|e| e.name)
        .collect();
    v.sort();
    v
}

/// RENAME_NOREPLACE and RENAME_EXCHANGE: files, directories across parents, errors, a
/// transaction, a crash.
pub fn rename_modes(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "a", b"A");
    write_path(s, "b", b"B");
    if !offers(h, s, Feature::RenameModes, "rename_modes", |s| {
        s.rename_with(ROOT_INO, b"a", ROOT_INO, b"b", RenameMode::Exchange, None)
    }) {
        return finish(store);
    }
    assert_err!(
        s.rename_with(ROOT_INO, b"a", ROOT_INO, b"b", RenameMode::NoReplace, None),
        Error::Exists(_)
    );
    assert_eq!((file(s, "a"), file(s, "b")), (b"A".to_vec(), b"B".to_vec()));
    ok(
        s.rename_with(ROOT_INO, b"a", ROOT_INO, b"c", RenameMode::NoReplace, None),
        "noreplace to a free name",
    );
    ok(
        s.rename_with(ROOT_INO, b"c", ROOT_INO, b"b", RenameMode::Exchange, None),
        "exchange two files",
    );
    assert_eq!((file(s, "b"), file(s, "c")), (b"A".to_vec(), b"B".to_vec()));
    assert_err!(
        s.rename_with(
            ROOT_INO,
            b"b",
            ROOT_INO,
            b"none",
            RenameMode::Exchange,
            None
        ),
        Error::NotFound(_)
    );
    // A directory and a file swap across two parents; the directory's parent follows it.
    let p = ok(s.mkdir(ROOT_INO, b"p", 0o755, None), "mkdir p").ino;
    let q = ok(s.mkdir(ROOT_INO, b"q", 0o755, None), "mkdir q").ino;
    ok(s.mkdir(p, b"dir", 0o755, None), "mkdir p/dir");
    write_path(s, "p/dir/inner", b"inner");
    write_path(s, "q/file", b"file");
    ok(
        s.rename_with(p, b"dir", q, b"file", RenameMode::Exchange, None),
        "exchange a directory and a file",
    );
    assert_eq!(file(s, "q/file/inner"), b"inner");
    assert_eq!(file(s, "p/dir"), b"file");
    assert_eq!(ok(s.getattr(p), "getattr p").nlink, 2);
    assert_eq!(ok(s.getattr(q), "getattr q").nlink, 3);
    check_fsck(s, "exchanging a directory and a file");
    // A directory cannot change places with something inside it.
    ok(
        s.mkdir(ino(s, "q/file"), b"sub", 0o755, None),
        "mkdir q/file/sub",
    );
    let file_dir = ino(s, "q/file");
    assert_err!(
        s.rename_with(q, b"file", file_dir, b"sub", RenameMode::Exchange, None),
        Error::InvalidArgument(_)
    );
    // In a transaction: undone by abort, kept by commit.
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    ok(
        s.rename_with(
            ROOT_INO,
            b"b",
            ROOT_INO,
            b"c",
            RenameMode::Exchange,
            Some(tx),
        ),
        "exchange in tx",
    );
    ok(s.tx_abort(tx), "abort");
    assert_eq!((file(s, "b"), file(s, "c")), (b"A".to_vec(), b"B".to_vec()));
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    ok(
        s.rename_with(ROOT_INO, b"b", q, b"file", RenameMode::Exchange, Some(tx)),
        "exchange in tx",
    );
    ok(
        s.rename_with(ROOT_INO, b"c", p, b"moved", RenameMode::NoReplace, Some(tx)),
        "noreplace in tx",
    );
    ok(s.tx_commit(tx), "commit");
    let before = tree(s);
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    assert_tree(&before, &tree(s), "after a crash");
    assert_eq!(file(s, "b/inner"), b"inner");
    assert_eq!(file(s, "q/file"), b"A");
    assert_eq!(
        names_in(s, ino(s, "p")),
        vec![b"dir".to_vec(), b"moved".to_vec()]
    );
    finish(store);
}

fn rw_flags() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

/// fallocate: allocate (with and without KEEP_SIZE), punch a hole, zero a range; errors;
/// a crash.
pub fn fallocate_modes(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let fh = open_rw(s, "f");
    let alloc = Fallocate::Allocate { keep_size: false };
    if !offers(h, s, Feature::Fallocate, "fallocate_modes", |s| {
        s.fallocate(fh, alloc, 0, 4096)
    }) {
        ok(s.release(fh), "release");
        return finish(store);
    }
    const K: u64 = 1024;
    ok(s.fallocate(fh, alloc, 0, 64 * K), "allocate 64 KiB");
    let m = ok(s.fstat(fh), "fstat");
    assert_eq!(m.size, 64 * K, "mode 0 extends the size");
    assert!(m.allocated >= 64 * K, "allocated {} < 64 KiB", m.allocated);
    assert_eq!(contents(s, fh), vec![0; 64 * K as usize]);
    let data = pattern(5, 64 * K as usize);
    put(s, fh, 0, &data);
    let before = ok(s.fstat(fh), "fstat").allocated;
    ok(
        s.fallocate(fh, Fallocate::PunchHole, 16 * K, 16 * K),
        "punch",
    );
    let mut want = data.clone();
    want[16 * K as usize..32 * K as usize].fill(0);
    assert_eq!(contents(s, fh), want);
    let m = ok(s.fstat(fh), "fstat");
    assert_eq!(m.size, 64 * K, "a punched hole keeps the size");
    assert!(
        m.allocated < before,
        "punching 16 KiB freed nothing ({} -> {})",
        before,
        m.allocated
    );
    // A punch across one block boundary with no whole block inside, starting in a hole:
    // the tail in the next block is zeroed too.
    ok(
        s.fallocate(fh, Fallocate::PunchHole, 30 * K + 100, 4 * K),
        "punch across a boundary from a hole",
    );
    want[(30 * K + 100) as usize..(34 * K + 100) as usize].fill(0);
    let got = contents(s, fh);
    let first = got.iter().zip(&want).position(|(a, b)| a != b);
    assert!(
        got.len() == want.len() && first.is_none(),
        "punch across a boundary from a hole: first difference at byte {first:?} (length {} read, {} expected)",
        got.len(),
        want.len()
    );
    ok(
        s.fallocate(
            fh,
            Fallocate::ZeroRange { keep_size: false },
            60 * K,
            12 * K,
        ),
        "zero range past the end",
    );
    want[60 * K as usize..].fill(0);
    want.resize(72 * K as usize, 0);
    assert_eq!(contents(s, fh), want);
    ok(
        s.fallocate(fh, Fallocate::ZeroRange { keep_size: true }, 100, 50),
        "zero range inside",
    );
    want[100..150].fill(0);
    ok(
        s.fallocate(fh, Fallocate::ZeroRange { keep_size: true }, 70 * K, 20 * K),
        "zero range keep size",
    );
    want[70 * K as usize..].fill(0);
    ok(
        s.fallocate(
            fh,
            Fallocate::Allocate { keep_size: true },
            64 * K,
            1024 * K,
        ),
        "allocate keep size",
    );
    assert_eq!(ok(s.fstat(fh), "fstat").size, 72 * K, "KEEP_SIZE keeps it");
    assert_eq!(contents(s, fh), want);
    assert_err!(s.fallocate(fh, alloc, 0, 0), Error::InvalidArgument(_));
    let ro = ok(
        s.open(
            ino(s, "f"),
            OpenFlags {
                read: true,
                ..Default::default()
            },
        ),
        "open read-only",
    );
    assert_err!(s.fallocate(ro, alloc, 0, 4096), Error::BadMode(..));
    ok(s.release(ro), "release ro");
    ok(s.fsync(fh, false), "fsync");
    ok(s.release(fh), "release");
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    assert_eq!(file(s, "f"), want);
    finish(store);
}

/// fallocate in a transaction: undone by abort and by a crash, kept by commit.
pub fn fallocate_in_transaction(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    let data = pattern(9, 32 * 1024);
    write_path(s, "f", &data);
    let f = ino(s, "f");
    let fh = ok(s.open(f, rw_flags()), "open");
    if !offers(h, s, Feature::Fallocate, "fallocate_in_transaction", |s| {
        s.fallocate(fh, Fallocate::PunchHole, 0, 4096)
    }) {
        ok(s.release(fh), "release");
        return finish(store);
    }
    let tx = ok(s.tx_begin(&[fh]), "tx_begin");
    ok(
        s.fallocate(fh, Fallocate::PunchHole, 0, 8192),
        "punch in tx",
    );
    ok(
        s.fallocate(fh, Fallocate::Allocate { keep_size: false }, 0, 64 * 1024),
        "allocate in tx",
    );
    ok(s.tx_abort(tx), "abort");
    assert_eq!(contents(s, fh), data);
    let tx = ok(s.tx_begin(&[fh]), "tx_begin");
    ok(
        s.fallocate(fh, Fallocate::ZeroRange { keep_size: false }, 4096, 40_000),
        "zero in tx",
    );
    ok(s.tx_commit(tx), "commit");
    let mut want = data.clone();
    want.resize(44_096, 0);
    want[4096..].fill(0);
    assert_eq!(contents(s, fh), want);
    let tx = ok(s.tx_begin(&[fh]), "tx_begin");
    ok(
        s.fallocate(fh, Fallocate::PunchHole, 0, 4096),
        "punch, never committed",
    );
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    let _ = tx;
    assert_eq!(file(s, "f"), want);
    finish(store);
}

/// Extended attributes: set, get, list, remove; CREATE/REPLACE; names and sizes; files,
/// directories and (where offered) symlinks; a crash.
pub fn xattrs(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "f", b"data");
    let f = ino(s, "f");
    if !offers(h, s, Feature::Xattrs, "xattrs", |s| {
        s.setxattr(f, b"user.a", b"1", XattrSet::Either, None)
    }) {
        return finish(store);
    }
    let d = ok(s.mkdir(ROOT_INO, b"d", 0o755, None), "mkdir").ino;
    ok(
        s.setxattr(f, b"user.a", b"1", XattrSet::Either, None),
        "set user.a",
    );
    ok(
        s.setxattr(f, b"user.a", b"22", XattrSet::Replace, None),
        "replace",
    );
    assert_err!(
        s.setxattr(f, b"user.a", b"3", XattrSet::Create, None),
        Error::Exists(_)
    );
    assert_err!(
        s.setxattr(f, b"user.none", b"3", XattrSet::Replace, None),
        Error::NoAttribute(_)
    );
    assert_eq!(ok(s.getxattr(f, b"user.a"), "get"), b"22");
    assert_err!(s.getxattr(f, b"user.none"), Error::NoAttribute(_));
    assert_err!(s.removexattr(f, b"user.none", None), Error::NoAttribute(_));
    ok(
        s.setxattr(f, b"user.empty", b"", XattrSet::Create, None),
        "empty value",
    );
    ok(
        s.setxattr(f, b"trusted.t", &[0, 255, 0], XattrSet::Either, None),
        "trusted",
    );
    if !awaited(&s.engine_name()).contains(&Feature::SpecialFiles) {
        // user. attributes live on regular files and directories only (as on Linux).
        let fifo = ok(
            s.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o644, 0, None),
            "mkfifo",
        )
        .ino;
        assert_err!(
            s.setxattr(fifo, b"user.a", b"1", XattrSet::Either, None),
            Error::NotPermitted(_)
        );
        assert_err!(s.removexattr(fifo, b"user.a", None), Error::NotPermitted(_));
        assert_err!(s.getxattr(fifo, b"user.a"), Error::NoAttribute(_));
        ok(s.unlink(ROOT_INO, b"p", None), "unlink the fifo");
    }
    ok(
        s.setxattr(d, b"user.on-a-dir", b"dir", XattrSet::Either, None),
        "on a dir",
    );
    ok(
        s.setxattr(
            ROOT_INO,
            b"system.posix_acl_default",
            b"\x02\x00\x00\x00",
            XattrSet::Either,
            None,
        ),
        "a default ACL on the root",
    );
    // 2 KiB: what every host file system keeps (ext4 holds one block of attributes per
    // inode); the largest value is the engine's or its host's to refuse with ENOSPC.
    let big = pattern(4, 2048);
    ok(
        s.setxattr(f, b"user.big", &big, XattrSet::Either, None),
        "a 2 KiB value",
    );
    match s.setxattr(
        f,
        b"user.max",
        &vec![7; store::xattr::XATTR_SIZE_MAX],
        XattrSet::Either,
        None,
    ) {
        Ok(()) | Err(Error::NoSpace(_)) => {}
        Err(e) => panic!("a 64 KiB value: {e:?}"),
    }
    assert_err!(
        s.setxattr(
            f,
            b"user.huge",
            &vec![0; store::xattr::XATTR_SIZE_MAX + 1],
            XattrSet::Either,
            None
        ),
        Error::TooLarge(_)
    );
    assert_err!(
        s.setxattr(f, b"os2.x", b"1", XattrSet::Either, None),
        Error::Unsupported(_)
    );
    assert_err!(
        s.setxattr(f, b"user.", b"1", XattrSet::Either, None),
        Error::InvalidArgument(_)
    );
    let long = [b"user.".as_slice(), &[b'n'; 300]].concat();
    assert_err!(
        s.setxattr(f, &long, b"1", XattrSet::Either, None),
        Error::OutOfRange(_)
    );
    ok(s.removexattr(f, b"user.empty", None), "remove");
    ok(
        s.setxattr(f, b"user.gone", b"x", XattrSet::Either, None),
        "set gone",
    );
    ok(s.removexattr(f, b"user.gone", None), "remove gone");
    let mut names = ok(s.listxattr(f), "list");
    names.sort();
    let mut want = vec![
        b"trusted.t".to_vec(),
        b"user.a".to_vec(),
        b"user.big".to_vec(),
    ];
    if names.contains(&b"user.max".to_vec()) {
        want.push(b"user.max".to_vec());
    }
    want.sort();
    assert_eq!(names, want);
    if !awaited(&s.engine_name()).contains(&Feature::Symlinks) {
        let l = ok(s.symlink(ROOT_INO, b"l", b"f", None), "symlink").ino;
        ok(
            s.setxattr(l, b"trusted.link", b"on the link", XattrSet::Either, None),
            "on a symlink",
        );
        assert_err!(s.getxattr(f, b"trusted.link"), Error::NoAttribute(_));
    }
    // A hard link shares the attributes; an unlinked name takes nothing with it.
    ok(s.link(f, d, b"f2", None), "link");
    ok(s.unlink(ROOT_INO, b"f", None), "unlink f");
    assert_eq!(
        ok(s.getxattr(ino(s, "d/f2"), b"user.a"), "get via the link"),
        b"22"
    );
    let before = tree(s);
    assert_eq!(
        before.get(&xattr_key(b"d/f2", b"user.big")),
        Some(&Node::Xattr(big.clone()))
    );
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    assert_tree(&before, &tree(s), "after a crash");
    assert_eq!(
        ok(
            s.getxattr(ROOT_INO, b"system.posix_acl_default"),
            "root ACL"
        ),
        b"\x02\x00\x00\x00"
    );
    finish(store);
}

/// Extended attributes in a transaction; a file created by an open transaction refuses
/// attribute changes from outside it.
pub fn xattrs_in_transaction(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    write_path(s, "f", b"data");
    let f = ino(s, "f");
    if !offers(h, s, Feature::Xattrs, "xattrs_in_transaction", |s| {
        s.setxattr(f, b"user.a", b"1", XattrSet::Either, None)
    }) {
        return finish(store);
    }
    ok(
        s.setxattr(f, b"user.keep", b"old", XattrSet::Either, None),
        "set keep",
    );
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    ok(
        s.setxattr(f, b"user.keep", b"new", XattrSet::Either, Some(tx)),
        "replace in tx",
    );
    ok(
        s.setxattr(f, b"user.added", b"a", XattrSet::Either, Some(tx)),
        "add in tx",
    );
    ok(s.tx_abort(tx), "abort");
    assert_eq!(ok(s.getxattr(f, b"user.keep"), "get"), b"old");
    assert_err!(s.getxattr(f, b"user.added"), Error::NoAttribute(_));
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    let g = ok(s.create(ROOT_INO, b"g", 0o644, Some(tx)), "create in tx").ino;
    ok(
        s.setxattr(g, b"user.new", b"n", XattrSet::Create, Some(tx)),
        "set on new file",
    );
    assert_err!(
        s.setxattr(g, b"user.outside", b"o", XattrSet::Either, None),
        Error::FileInTransaction(_)
    );
    ok(s.removexattr(f, b"user.keep", Some(tx)), "remove in tx");
    ok(s.tx_commit(tx), "commit");
    let tx = ok(s.tx_begin(&[]), "tx_begin");
    ok(
        s.setxattr(f, b"user.lost", b"l", XattrSet::Either, Some(tx)),
        "never committed",
    );
    let store = crash_or_reopen(h, store);
    let s = store.as_ref();
    let _ = tx;
    let f = ino(s, "f");
    assert_err!(s.getxattr(f, b"user.keep"), Error::NoAttribute(_));
    assert_err!(s.getxattr(f, b"user.lost"), Error::NoAttribute(_));
    assert_eq!(ok(s.getxattr(ino(s, "g"), b"user.new"), "get"), b"n");
    finish(store);
}
