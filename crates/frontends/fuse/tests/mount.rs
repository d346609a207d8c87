//! The FUSE front end over the in-memory reference model: POSIX behaviour seen through the
//! kernel, the atomic-mode xattr, the transaction ioctls (with the C example program), and
//! ENOSPC. Each test mounts its own file system; where FUSE cannot mount here (no /dev/fuse,
//! no fusermount3) the test prints why and passes, unless `ATOMFS_REQUIRE_ALL=1`.

mod support;

use conformance::ModelStore;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::sync::Arc;
use support::mounted;
use test_support::{run, scratch};

#[test]
fn posix_basics_through_the_kernel() {
    posix_basics("posix-mem", Arc::new(ModelStore::new()));
}

#[test]
fn posix_basics_through_the_kernel_on_a_pool() {
    let (store, _dir) = support::shm_pool("posix", 64 << 20);
    posix_basics("posix-pool", store);
}

fn posix_basics(name: &str, store: Arc<dyn store::Store>) {
    let symlinks = store.symlink(store::ROOT_INO, b"probe", b"x", None).is_ok();
    if symlinks {
        store
            .unlink(store::ROOT_INO, b"probe", None)
            .expect("unlink probe");
    }
    let Some(m) = mounted(name, store) else {
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
    if symlinks {
        std::os::unix::fs::symlink("g", d.join("a/s")).expect("symlink");
        assert_eq!(
            fs::read_link(d.join("a/s")).expect("readlink").to_str(),
            Some("g")
        );
        assert_eq!(
            fs::read_to_string(d.join("a/s")).expect("read via symlink"),
            "hello world"
        );
    } else {
        let err =
            std::os::unix::fs::symlink("g", d.join("a/s")).expect_err("no symlinks in this engine");
        assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP));
        fs::write(d.join("a/s"), b"stand-in").expect("write");
    }
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
    let Some(m) = mounted("ioctl", Arc::new(ModelStore::new())) else {
        return;
    };
    let d = m.dir();
    let cc_dir = scratch("fuse-cc");
    let Some(prog) = support::build_c_example("two_files", &cc_dir) else {
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
    let Some(m) = mounted("xattr", Arc::new(ModelStore::new())) else {
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
    // Other attributes are the store's (tests/posix.rs); an unknown namespace is refused.
    let err = support::set_xattr(&path, "system.other", b"1").expect_err("system.other");
    assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP));
    m.finish();
}

#[test]
fn pool_full_gives_enospc_and_the_store_stays_clean() {
    let store = Arc::new(ModelStore::with_capacity(Some(2 << 20)));
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
    // The kernel sends RELEASE for the closed descriptor after close(2) returned, so the
    // store frees the unlinked file's space a moment later: wait for it, boundedly.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match fs::write(d.join("small"), b"ok") {
            Ok(()) => break,
            Err(e)
                if e.raw_os_error() == Some(libc::ENOSPC)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("write after freeing space: {e}"),
        }
    }
    m.finish();
    let report = store::Store::fsck(&*store).expect("fsck");
    assert!(report.is_clean(), "{:?}", report.problems);
}

fn ioctl_u64(f: &fs::File, cmd: u32, value: &mut u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the descriptor is open; `value` is a valid u64 for the kernel to read or write.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), cmd as _, value as *mut u64) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn transaction_ioctl_rules() {
    let Some(m) = mounted("txrules", Arc::new(ModelStore::new())) else {
        return;
    };
    let d = m.dir();
    fs::write(d.join("a"), b"aaaa").expect("write");
    fs::write(d.join("b"), b"bbbb").expect("write");
    let a = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(d.join("a"))
        .expect("open");
    let b = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(d.join("b"))
        .expect("open");
    let mut tx = 0u64;
    ioctl_u64(&a, atomfs_fuse::IOC_TX_BEGIN, &mut tx).expect("begin");
    assert!(tx != 0);
    let mut other = 0u64;
    let busy = ioctl_u64(&a, atomfs_fuse::IOC_TX_BEGIN, &mut other).expect_err("bound twice");
    assert_eq!(busy.raw_os_error(), Some(libc::EBUSY));
    let mut bogus = tx + 1000;
    let inval = ioctl_u64(&a, atomfs_fuse::IOC_TX_COMMIT, &mut bogus).expect_err("unknown id");
    assert_eq!(inval.raw_os_error(), Some(libc::EINVAL));
    ioctl_u64(&b, atomfs_fuse::IOC_TX_ADD, &mut tx).expect("add");
    a.write_at(b"AA", 0).expect("write");
    b.write_at(b"BB", 0).expect("write");
    drop(b); // closing a bound descriptor aborts the transaction
             // The kernel sends RELEASE after close() returns: wait for the abort to land.
    let start = std::time::Instant::now();
    while fs::read(d.join("a")).expect("read") != b"aaaa" && start.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(fs::read(d.join("a")).expect("read"), b"aaaa");
    assert_eq!(fs::read(d.join("b")).expect("read"), b"bbbb");
    let gone = ioctl_u64(&a, atomfs_fuse::IOC_TX_COMMIT, &mut tx).expect_err("already aborted");
    assert_eq!(gone.raw_os_error(), Some(libc::EINVAL));
    drop(a);
    m.finish();
}

fn renameat2(dir: &std::path::Path, from: &str, to: &str, flags: u32) -> std::io::Result<()> {
    let c = |name: &str| {
        std::ffi::CString::new(dir.join(name).into_os_string().into_encoded_bytes()).expect("path")
    };
    let (f, t) = (c(from), c(to));
    // SAFETY: both paths are NUL-terminated strings alive across the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn rename_noreplace_and_exchange() {
    let Some(m) = mounted("rename2", Arc::new(ModelStore::new())) else {
        return;
    };
    let d = m.dir();
    fs::write(d.join("x"), b"x").expect("write");
    fs::write(d.join("y"), b"y").expect("write");
    let err = renameat2(&d, "x", "y", libc::RENAME_NOREPLACE).expect_err("target exists");
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    renameat2(&d, "x", "y", libc::RENAME_EXCHANGE).expect("exchange");
    assert_eq!(fs::read(d.join("x")).expect("read"), b"y");
    assert_eq!(fs::read(d.join("y")).expect("read"), b"x");
    let names: Vec<_> = fs::read_dir(&d)
        .expect("readdir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 2, "no temporary name left behind: {names:?}");
    renameat2(&d, "x", "z", libc::RENAME_NOREPLACE).expect("noreplace to a free name");
    m.finish();
}

#[test]
fn a_one_megabyte_write_reaches_the_store_as_one_call() {
    let store = Arc::new(ModelStore::new());
    let Some(m) = mounted("maxwrite", store.clone()) else {
        return;
    };
    let f = fs::File::create(m.dir().join("big")).expect("create");
    let stat = |name: &str| {
        store::Store::stats(&*store)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    };
    let before = stat("writes").expect("writes counter");
    f.write_at(&vec![3u8; 1 << 20], 0).expect("pwrite 1 MiB");
    let calls = stat("writes").expect("writes counter") - before;
    assert_eq!(
        calls, 1,
        "one 1 MiB write(2) is one atomic Store write (max_write = 1 MiB)"
    );
    assert_eq!(stat("write_max_bytes"), Some(1 << 20));
    drop(f);
    m.finish();
}
