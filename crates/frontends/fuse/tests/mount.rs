//! The FUSE front end over the in-memory reference store: POSIX behaviour seen through the
//! kernel, the atomic-mode xattr, the transaction ioctls (with the C example program), and
//! ENOSPC. Each test mounts its own file system; where FUSE cannot mount here (no /dev/fuse,
//! no fusermount3) the test prints why and passes without checking anything else.

mod support;

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::sync::Arc;
use support::{mounted, run};

#[test]
fn posix_basics_through_the_kernel() {
    let Some(m) = mounted("posix", Arc::new(memstore::MemStore::new())) else {
        return;
    };
    let d = m.dir();
    fs::create_dir_all(d.join("a/b")).expect("mkdir -p");
    fs::write(d.join("a/b/f"), b"hello").expect("write");
    assert_eq!(fs::read(d.join("a/b/f")).expect("read"), b"hello");
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(d.join("a/b/f"))
        .expect("open append");
    f.write_all(b" world").expect("append");
    drop(f);
    assert_eq!(
        fs::read_to_string(d.join("a/b/f")).expect("read"),
        "hello world"
    );

    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(d.join("big"), &big).expect("write big");
    assert_eq!(fs::read(d.join("big")).expect("read big"), big);
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(d.join("big"))
        .expect("open");
    f.write_at(b"XYZ", 1_000_000).expect("pwrite");
    let mut buf = [0u8; 3];
    f.read_exact_at(&mut buf, 1_000_000).expect("pread");
    assert_eq!(&buf, b"XYZ");
    f.set_len(10).expect("ftruncate");
    f.sync_all().expect("fsync");
    assert_eq!(fs::metadata(d.join("big")).expect("stat").len(), 10);
    drop(f);

    fs::rename(d.join("a/b/f"), d.join("a/g")).expect("rename");
    fs::hard_link(d.join("a/g"), d.join("a/h")).expect("link");
    assert_eq!(fs::metadata(d.join("a/h")).expect("stat").nlink(), 2);
    std::os::unix::fs::symlink("g", d.join("a/s")).expect("symlink");
    assert_eq!(
        fs::read_link(d.join("a/s")).expect("readlink").to_str(),
        Some("g")
    );
    assert_eq!(
        fs::read_to_string(d.join("a/s")).expect("read via symlink"),
        "hello world"
    );
    fs::set_permissions(d.join("a/g"), fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_eq!(
        fs::metadata(d.join("a/g")).expect("stat").mode() & 0o777,
        0o600
    );
    let mut names: Vec<String> = fs::read_dir(d.join("a"))
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["b", "g", "h", "s"]);
    assert_eq!(
        fs::remove_dir(d.join("a")).map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOTEMPTY))
    );
    fs::remove_dir(d.join("a/b")).expect("rmdir");
    fs::remove_file(d.join("a/g")).expect("unlink");
    assert_eq!(
        fs::read(d.join("nope")).map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOENT))
    );

    // A file unlinked while open stays readable through its descriptor.
    let mut open = fs::File::open(d.join("a/h")).expect("open");
    fs::remove_file(d.join("a/h")).expect("unlink open file");
    let mut s = String::new();
    open.seek(SeekFrom::Start(0)).expect("seek");
    open.read_to_string(&mut s).expect("read unlinked");
    assert_eq!(s, "hello world");
    drop(open);
    m.finish();
}

#[test]
fn transaction_ioctls_with_the_c_example() {
    let Some(m) = mounted("ioctl", Arc::new(memstore::MemStore::new())) else {
        return;
    };
    let d = m.dir();
    let Some(prog) = support::build_c_example("two_files") else {
        return;
    };
    fs::write(d.join("a"), b"old a").expect("write");
    fs::write(d.join("b"), b"old b").expect("write");
    let out = run(
        &prog,
        &[
            d.join("a").as_os_str(),
            d.join("b").as_os_str(),
            "new!".as_ref(),
            "abort".as_ref(),
        ],
        &d,
    );
    assert!(out.contains("aborted"), "{out}");
    assert_eq!(
        fs::read(d.join("a")).expect("read"),
        b"old a",
        "aborted writes are gone"
    );
    assert_eq!(fs::read(d.join("b")).expect("read"), b"old b");
    let out = run(
        &prog,
        &[
            d.join("a").as_os_str(),
            d.join("b").as_os_str(),
            "new!".as_ref(),
        ],
        &d,
    );
    assert!(out.contains("committed"), "{out}");
    assert_eq!(fs::read(d.join("a")).expect("read"), b"new!");
    assert_eq!(fs::read(d.join("b")).expect("read"), b"new!");
    m.finish();
}

#[test]
fn atomic_mode_by_xattr_and_ioctl() {
    let Some(m) = mounted("xattr", Arc::new(memstore::MemStore::new())) else {
        return;
    };
    let d = m.dir();
    let path = d.join("f");
    fs::write(&path, b"0123456789").expect("write");
    support::set_xattr(&path, atomfs_fuse::XATTR_ATOMIC, b"1").expect("setxattr");
    assert_eq!(
        support::get_xattr(&path, atomfs_fuse::XATTR_ATOMIC).expect("getxattr"),
        b"1"
    );
    {
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.write_at(b"AB", 0).expect("pwrite");
        support::ioctl_none(&f, atomfs_fuse::IOC_ATOMIC_ABORT).expect("ATOMIC_ABORT");
    }
    assert_eq!(
        fs::read(&path).expect("read"),
        b"0123456789",
        "aborted atomic writes are gone"
    );
    {
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.write_at(b"CD", 2).expect("pwrite");
    } // close commits
    assert_eq!(fs::read(&path).expect("read"), b"01CD456789");
    assert!(support::set_xattr(&path, atomfs_fuse::XATTR_ATOMIC, b"maybe").is_err());
    assert!(support::set_xattr(&path, "user.other", b"1").is_err());
    m.finish();
}

#[test]
fn pool_full_gives_enospc_and_the_store_stays_clean() {
    let store = Arc::new(memstore::MemStore::with_capacity(2 << 20, 1000));
    let Some(m) = mounted("enospc", store.clone()) else {
        return;
    };
    let d = m.dir();
    let mut f = fs::File::create(d.join("fill")).expect("create");
    let chunk = vec![7u8; 256 << 10];
    let err = (0..100)
        .find_map(|_| f.write_all(&chunk).err())
        .expect("the store must fill up");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    drop(f);
    fs::write(d.join("small"), b"still works after removing")
        .map(|_| ())
        .unwrap_or(());
    fs::remove_file(d.join("fill")).expect("unlink");
    fs::write(d.join("small"), b"ok").expect("write after freeing space");
    m.finish();
    let report = store::Store::fsck(&*store).expect("fsck");
    assert!(report.is_clean(), "{:?}", report.problems);
}
