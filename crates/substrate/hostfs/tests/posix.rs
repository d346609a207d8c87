//! The rest of the POSIX file API on a real directory: symlinks (stored, never followed),
//! special files, renameat2 modes, owners and times of a symlink, extended attributes on
//! every kind of entry, and fallocate.

mod common;

use common::TempDir;
use hostfs::{
    FallocateHow, FileKind, HostFs, NodeKind, OpenOptions, RealHostFs, RenameHow, XattrHow,
};
use std::path::Path;

fn p(s: &str) -> &Path {
    Path::new(s)
}

#[test]
fn symlinks_are_stored_and_never_followed() {
    let dir = TempDir::new("posix-symlink");
    let outside = TempDir::new("posix-symlink-outside");
    std::fs::write(outside.path().join("victim"), b"untouched").expect("victim");
    let fs = RealHostFs::open(dir.path()).expect("open");
    let target = outside.path().join("victim");
    let target = target.as_os_str().as_encoded_bytes();
    fs.symlink(target, p("l")).expect("symlink");
    assert_eq!(fs.readlink(p("l")).expect("readlink"), target);
    let st = fs.stat(p("l")).expect("lstat");
    assert_eq!((st.kind, st.len), (FileKind::Symlink, target.len() as u64));
    assert_eq!(st.mode_type, libc::S_IFLNK);
    // Nothing reaches the target through the link.
    assert!(fs.open(p("l"), &OpenOptions::read_write()).is_err());
    fs.set_link_times(p("l"), Some(1_000_000_000), Some(2_000_000_000))
        .expect("times of the link itself");
    assert_eq!(fs.stat(p("l")).expect("lstat").mtime_ns, 2_000_000_000);
    if common::is_root() {
        fs.set_owner(p("l"), Some(7), None).expect("lchown");
        assert_eq!(fs.stat(p("l")).expect("lstat").uid, 7);
        fs.set_xattr(p("l"), b"trusted.t", b"on the link", XattrHow::Either)
            .expect("trusted xattr on a symlink");
        assert_eq!(
            fs.get_xattr(p("l"), b"trusted.t").expect("get"),
            b"on the link"
        );
    }
    fs.sync_node(p("l")).expect("sync the link");
    let victim = std::fs::metadata(outside.path().join("victim")).expect("victim");
    assert_ne!(victim.len(), 0);
    assert_eq!(
        std::fs::read(outside.path().join("victim")).expect("victim"),
        b"untouched"
    );
    let err = fs.readlink(p("")).map(drop);
    assert!(err.is_err(), "readlink of the store directory");
}

#[test]
fn special_files_are_made_and_described() {
    let dir = TempDir::new("posix-mknod");
    let fs = RealHostFs::open(dir.path()).expect("open");
    fs.mknod(p("fifo"), NodeKind::Fifo, 0o640, 0).expect("fifo");
    fs.mknod(p("sock"), NodeKind::Socket, 0o600, 0)
        .expect("socket");
    let st = fs.stat(p("fifo")).expect("stat");
    assert_eq!(
        (st.kind, st.mode_type, st.perm),
        (FileKind::Other, libc::S_IFIFO, 0o640)
    );
    assert_eq!(fs.stat(p("sock")).expect("stat").mode_type, libc::S_IFSOCK);
    // Opening a FIFO as a file neither blocks nor succeeds.
    assert!(fs.open(p("fifo"), &OpenOptions::read_only()).is_err());
    let dev = libc::makedev(1, 3);
    match fs.mknod(p("null"), NodeKind::CharDevice, 0o666, dev) {
        Ok(()) => {
            let st = fs.stat(p("null")).expect("stat");
            assert_eq!((st.mode_type, st.rdev), (libc::S_IFCHR, dev));
        }
        Err(e) => assert_eq!(e.errno(), libc::EPERM, "{e}"),
    }
    fs.set_perm(p("fifo"), 0o600).expect("chmod a fifo");
    fs.set_xattr(p("fifo"), b"user.k", b"v", XattrHow::Either)
        .map(drop)
        .or_else(|e| {
            if e.errno() == libc::EPERM {
                Ok(())
            } else {
                Err(e)
            }
        })
        .expect("a user xattr on a fifo is set or refused with EPERM");
    fs.sync_node(p("fifo")).expect("sync a fifo");
    assert_eq!(fs.stat(p("fifo")).expect("stat").perm, 0o600);
}

#[test]
fn rename_modes() {
    let dir = TempDir::new("posix-rename");
    let fs = RealHostFs::open(dir.path()).expect("open");
    for (name, data) in [("a", b"A"), ("b", b"B")] {
        let f = fs
            .open(p(name), &OpenOptions::create_new())
            .expect("create");
        fs.write_all_at(&f, 0, data).expect("write");
    }
    let err = fs
        .rename_with(p("a"), p("b"), RenameHow::NoReplace)
        .expect_err("noreplace onto an existing name");
    assert_eq!(err.errno(), libc::EEXIST);
    fs.mkdir(p("d"), 0o755).expect("mkdir");
    fs.rename_with(p("a"), p("d/c"), RenameHow::NoReplace)
        .expect("noreplace to a free name");
    fs.rename_with(p("d/c"), p("b"), RenameHow::Exchange)
        .expect("exchange");
    let read = |name: &str| {
        let f = fs.open(p(name), &OpenOptions::read_only()).expect("open");
        let mut buf = [0u8; 1];
        fs.read_full_at(&f, 0, &mut buf).expect("read");
        buf[0]
    };
    assert_eq!((read("b"), read("d/c")), (b'A', b'B'));
    let err = fs
        .rename_with(p("b"), p("none"), RenameHow::Exchange)
        .expect_err("exchange with a missing name");
    assert_eq!(err.errno(), libc::ENOENT);
}

#[test]
fn extended_attributes_round_trip() {
    let dir = TempDir::new("posix-xattr");
    let fs = RealHostFs::open(dir.path()).expect("open");
    fs.open(p("f"), &OpenOptions::create_new()).expect("create");
    match fs.set_xattr(p("f"), b"user.a", b"1", XattrHow::Either) {
        Ok(()) => {}
        Err(e) if e.errno() == libc::EOPNOTSUPP => {
            return common::skip("user extended attributes unsupported on this file system")
        }
        Err(e) => panic!("setxattr: {e}"),
    }
    let err = fs
        .set_xattr(p("f"), b"user.a", b"2", XattrHow::Create)
        .expect_err("create over an existing one");
    assert_eq!(err.errno(), libc::EEXIST);
    let err = fs
        .set_xattr(p("f"), b"user.none", b"2", XattrHow::Replace)
        .expect_err("replace of a missing one");
    assert_eq!(err.errno(), libc::ENODATA);
    let big = vec![7u8; 2000];
    fs.set_xattr(p("f"), b"user.big", &big, XattrHow::Either)
        .expect("a 2000-byte value");
    assert_eq!(fs.get_xattr(p("f"), b"user.big").expect("get"), big);
    fs.set_xattr(p(""), b"user.root", b"r", XattrHow::Either)
        .expect("on the store directory");
    assert_eq!(fs.get_xattr(p(""), b"user.root").expect("get"), b"r");
    let mut names = fs.list_xattr(p("f")).expect("list");
    names.sort();
    assert_eq!(names, vec![b"user.a".to_vec(), b"user.big".to_vec()]);
    fs.remove_xattr(p("f"), b"user.a").expect("remove");
    let err = fs.get_xattr(p("f"), b"user.a").expect_err("removed");
    assert_eq!(err.errno(), libc::ENODATA);
    let err = fs
        .remove_xattr(p("f"), b"user.a")
        .expect_err("removed twice");
    assert_eq!(err.errno(), libc::ENODATA);
}

#[test]
fn fallocate_allocates_punches_and_zeroes() {
    let dir = TempDir::new("posix-fallocate");
    let fs = RealHostFs::open(dir.path()).expect("open");
    let f = fs.open(p("f"), &OpenOptions::create_new()).expect("create");
    fs.fallocate(&f, FallocateHow::Allocate { keep_size: false }, 0, 64 << 10)
        .expect("allocate");
    let st = fs.file_stat(&f).expect("stat");
    assert_eq!(st.len, 64 << 10);
    assert!(st.allocated >= 64 << 10, "allocated {}", st.allocated);
    fs.write_all_at(&f, 0, &vec![9u8; 64 << 10]).expect("write");
    fs.fallocate(&f, FallocateHow::PunchHole, 16 << 10, 16 << 10)
        .expect("punch");
    let after = fs.file_stat(&f).expect("stat");
    assert_eq!(after.len, 64 << 10);
    assert!(after.allocated < st.allocated.max(64 << 10));
    let mut buf = vec![1u8; 16 << 10];
    fs.read_full_at(&f, 16 << 10, &mut buf).expect("read");
    assert!(buf.iter().all(|&b| b == 0));
    fs.fallocate(&f, FallocateHow::ZeroRange { keep_size: true }, 0, 100)
        .expect("zero range");
    fs.read_full_at(&f, 0, &mut buf[..200]).expect("read");
    assert!(buf[..100].iter().all(|&b| b == 0) && buf[100..200].iter().all(|&b| b == 9));
}
