//! The rest of the POSIX file API through the kernel, over the reference model (which offers
//! all of it): special files (FIFOs that carry data, sockets that accept, device numbers),
//! symbolic links, fallocate modes, extended attributes with the size-probe protocol, the
//! atomic-mode attribute surviving a remount, ACLs with setfacl/getfacl, and namespace calls
//! joining a transaction begun by ioctl (with the C example `namespace_tx`).

mod support;

use conformance::ModelStore;
use std::ffi::CString;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use support::mounted;
use test_support::{run, scratch};

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

/// The result of a libc call that returns 0 or -1 (the errno kept, for `raw_os_error`).
fn check(rc: libc::c_int, what: &str) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        eprintln!("{what}: {e}");
        Err(e)
    }
}

fn mknod(p: &Path, mode: u32, dev: u64) -> std::io::Result<()> {
    let c = cpath(p);
    // SAFETY: a NUL-terminated path alive across the call.
    check(unsafe { libc::mknod(c.as_ptr(), mode, dev) }, "mknod")
}

fn errno_of(r: std::io::Result<impl std::fmt::Debug>) -> Option<i32> {
    r.expect_err("expected an error").raw_os_error()
}

#[test]
fn special_files_through_the_kernel() {
    let Some(m) = mounted("special", Arc::new(ModelStore::new())) else {
        return;
    };
    let d = m.dir();
    // A FIFO: the kernel carries the data; the store keeps the inode.
    mknod(&d.join("fifo"), libc::S_IFIFO | 0o600, 0).expect("mkfifo");
    assert!(fs::symlink_metadata(d.join("fifo"))
        .expect("stat")
        .file_type()
        .is_fifo());
    let fifo = d.join("fifo");
    let writer = std::thread::spawn(move || {
        let mut w = fs::OpenOptions::new()
            .write(true)
            .open(&fifo)
            .expect("open fifo for writing");
        w.write_all(b"through the pipe").expect("write fifo");
    });
    let mut got = String::new();
    fs::File::open(d.join("fifo"))
        .expect("open fifo for reading")
        .read_to_string(&mut got)
        .expect("read fifo");
    writer.join().expect("writer");
    assert_eq!(got, "through the pipe");
    // A unix socket bound on the mount accepts a connection.
    let sock = d.join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    assert!(fs::symlink_metadata(&sock)
        .expect("stat")
        .file_type()
        .is_socket());
    let mut client = std::os::unix::net::UnixStream::connect(&sock).expect("connect");
    let (mut server, _) = listener.accept().expect("accept");
    client.write_all(b"hi").expect("send");
    let mut two = [0u8; 2];
    server.read_exact(&mut two).expect("recv");
    assert_eq!(&two, b"hi");
    // Device numbers come back as given; a mode without a type is a regular file.
    let dev = libc::makedev(4, 70_000);
    mknod(&d.join("chr"), libc::S_IFCHR | 0o644, dev).expect("mknod c");
    mknod(&d.join("blk"), libc::S_IFBLK | 0o600, libc::makedev(8, 1)).expect("mknod b");
    let chr = fs::symlink_metadata(d.join("chr")).expect("stat chr");
    assert!(chr.file_type().is_char_device());
    assert_eq!(chr.rdev(), dev);
    assert!(fs::symlink_metadata(d.join("blk"))
        .expect("stat")
        .file_type()
        .is_block_device());
    mknod(&d.join("plain"), 0o644, 0).expect("mknod regular");
    assert!(fs::metadata(d.join("plain")).expect("stat").is_file());
    assert_eq!(
        errno_of(mknod(&d.join("chr"), libc::S_IFIFO | 0o600, 0)),
        Some(libc::EEXIST)
    );
    drop((client, server, listener));
    m.finish();
}

#[test]
fn symbolic_links_through_the_kernel() {
    let Some(m) = mounted("symlinks", Arc::new(ModelStore::new())) else {
        return;
    };
    let d = m.dir();
    fs::create_dir(d.join("dir")).expect("mkdir");
    fs::write(d.join("dir/file"), b"target").expect("write");
    std::os::unix::fs::symlink("dir/file", d.join("rel")).expect("symlink");
    std::os::unix::fs::symlink("dir", d.join("dlink")).expect("symlink to a dir");
    std::os::unix::fs::symlink("loop", d.join("loop")).expect("symlink loop");
    assert_eq!(
        fs::read_link(d.join("rel")).expect("readlink"),
        Path::new("dir/file")
    );
    assert_eq!(fs::read(d.join("rel")).expect("read through"), b"target");
    assert_eq!(
        fs::read(d.join("dlink/file")).expect("through a dir"),
        b"target"
    );
    let l = fs::symlink_metadata(d.join("rel")).expect("lstat");
    assert!(l.file_type().is_symlink());
    assert_eq!(l.len(), 8);
    let nofollow = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(d.join("rel"));
    assert_eq!(errno_of(nofollow), Some(libc::ELOOP));
    assert_eq!(errno_of(fs::read(d.join("loop"))), Some(libc::ELOOP));
    fs::remove_file(d.join("rel")).expect("unlink the link");
    assert_eq!(
        fs::read(d.join("dir/file")).expect("target stays"),
        b"target"
    );
    m.finish();
}

fn fallocate(f: &fs::File, mode: i32, off: i64, len: i64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: an open descriptor; fallocate takes plain integers.
    check(
        unsafe { libc::fallocate(f.as_raw_fd(), mode, off, len) },
        "fallocate",
    )
}

#[test]
fn fallocate_modes_through_the_kernel() {
    let Some(m) = mounted("fallocate", Arc::new(ModelStore::new())) else {
        return;
    };
    let path = m.dir().join("f");
    fs::write(&path, vec![b'x'; 10_000]).expect("write");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    fallocate(&f, 0, 0, 20_000).expect("allocate, growing");
    assert_eq!(fs::metadata(&path).expect("stat").len(), 20_000);
    fallocate(&f, libc::FALLOC_FL_KEEP_SIZE, 0, 40_000).expect("allocate, keep size");
    assert_eq!(fs::metadata(&path).expect("stat").len(), 20_000);
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    fallocate(&f, punch, 100, 200).expect("punch");
    fallocate(&f, libc::FALLOC_FL_ZERO_RANGE, 1_000, 50).expect("zero range");
    let data = fs::read(&path).expect("read");
    assert_eq!(data.len(), 20_000);
    assert!(data[..100].iter().all(|b| *b == b'x'));
    assert!(
        data[100..300].iter().all(|b| *b == 0),
        "punched bytes read zero"
    );
    assert!(data[300..1_000].iter().all(|b| *b == b'x'));
    assert!(data[1_000..1_050].iter().all(|b| *b == 0), "zeroed range");
    assert!(data[1_050..10_000].iter().all(|b| *b == b'x'));
    assert!(data[10_000..].iter().all(|b| *b == 0), "allocated tail");
    // PUNCH_HOLE needs KEEP_SIZE (the kernel refuses it alone).
    assert_eq!(
        errno_of(fallocate(&f, libc::FALLOC_FL_PUNCH_HOLE, 0, 1)),
        Some(libc::EOPNOTSUPP)
    );
    assert_eq!(
        errno_of(fallocate(&f, libc::FALLOC_FL_COLLAPSE_RANGE, 0, 4096)),
        Some(libc::EOPNOTSUPP)
    );
    drop(f);
    m.finish();
}

/// getxattr(2) with a buffer of `size` bytes: the length it returns, or the errno.
fn getxattr_sized(p: &Path, name: &str, size: usize) -> Result<(usize, Vec<u8>), i32> {
    let (c, n) = (cpath(p), CString::new(name).expect("name"));
    let mut buf = vec![0u8; size];
    // SAFETY: NUL-terminated strings; buf is writable for `size` bytes (a null pointer with
    // size 0 is the size probe).
    let rc = unsafe {
        let ptr = if size == 0 {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr().cast()
        };
        libc::getxattr(c.as_ptr(), n.as_ptr(), ptr, size)
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    buf.truncate(if size == 0 { 0 } else { rc as usize });
    Ok((rc as usize, buf))
}

fn setxattr_flags(p: &Path, name: &str, value: &[u8], flags: i32) -> std::io::Result<()> {
    let (c, n) = (cpath(p), CString::new(name).expect("name"));
    // SAFETY: NUL-terminated strings; value is valid for its length.
    let rc = unsafe {
        libc::setxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    };
    check(rc, "setxattr")
}

fn listxattr(p: &Path) -> Vec<String> {
    let c = cpath(p);
    // SAFETY: size probe with a null buffer, then a buffer of the size returned.
    let n = unsafe { libc::listxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    assert!(
        n >= 0,
        "listxattr probe: {}",
        std::io::Error::last_os_error()
    );
    let mut buf = vec![0u8; n as usize];
    // SAFETY: buf is writable for its length.
    let got = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(got, n, "listxattr");
    buf.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

#[test]
fn extended_attributes_through_the_kernel() {
    let Some(m) = mounted("xattrs", Arc::new(ModelStore::new())) else {
        return;
    };
    let path = m.dir().join("f");
    fs::write(&path, b"data").expect("write");
    support::set_xattr(&path, "user.colour", b"blue").expect("set user.colour");
    support::set_xattr(&path, "trusted.level", b"3").expect("set trusted.level");
    assert_eq!(
        getxattr_sized(&path, "user.colour", 0),
        Ok((4, Vec::new())),
        "size probe"
    );
    assert_eq!(getxattr_sized(&path, "user.colour", 2), Err(libc::ERANGE));
    assert_eq!(
        getxattr_sized(&path, "user.colour", 64),
        Ok((4, b"blue".to_vec()))
    );
    let mut names = listxattr(&path);
    names.sort();
    assert_eq!(names, vec!["trusted.level", "user.colour"]);
    let exists = setxattr_flags(&path, "user.colour", b"red", libc::XATTR_CREATE);
    assert_eq!(errno_of(exists), Some(libc::EEXIST));
    let missing = setxattr_flags(&path, "user.none", b"x", libc::XATTR_REPLACE);
    assert_eq!(errno_of(missing), Some(libc::ENODATA));
    setxattr_flags(&path, "user.colour", b"red", libc::XATTR_REPLACE).expect("replace");
    assert_eq!(
        support::get_xattr(&path, "user.colour").expect("get"),
        b"red"
    );
    support::set_xattr(&path, "user.empty", b"").expect("empty value");
    assert_eq!(getxattr_sized(&path, "user.empty", 0), Ok((0, Vec::new())));
    let c = cpath(&path);
    let n = CString::new("user.colour").expect("name");
    // SAFETY: NUL-terminated strings alive across the call.
    check(
        unsafe { libc::removexattr(c.as_ptr(), n.as_ptr()) },
        "removexattr",
    )
    .expect("remove");
    assert_eq!(getxattr_sized(&path, "user.colour", 64), Err(libc::ENODATA));
    // SAFETY: as above.
    let again = check(
        unsafe { libc::removexattr(c.as_ptr(), n.as_ptr()) },
        "removexattr",
    );
    assert_eq!(errno_of(again), Some(libc::ENODATA));
    let big = vec![7u8; 65_536];
    support::set_xattr(&path, "user.big", &big).expect("a 64 KiB value");
    assert_eq!(
        getxattr_sized(&path, "user.big", 65_536).map(|(n, _)| n),
        Ok(65_536)
    );
    // Attributes on a directory and on a symbolic link's target.
    support::set_xattr(&m.dir(), "user.dir", b"d").expect("on the root");
    assert_eq!(support::get_xattr(&m.dir(), "user.dir").expect("get"), b"d");
    m.finish();
}

#[test]
fn the_atomic_attribute_survives_a_remount() {
    let model = Arc::new(ModelStore::new());
    let Some(m) = mounted("atomic-remount", model.clone()) else {
        return;
    };
    let path = m.dir().join("f");
    fs::write(&path, b"0123").expect("write");
    support::set_xattr(&path, atomfs_fuse::XATTR_ATOMIC, b"1").expect("atomic on");
    assert!(listxattr(&path).contains(&atomfs_fuse::XATTR_ATOMIC.to_string()));
    m.finish();
    // The model's durable state, served again (what a remount of a pool sees).
    let again = Arc::new(model.crash());
    let Some(m) = mounted("atomic-remount", again.clone()) else {
        return;
    };
    let path = m.dir().join("f");
    assert_eq!(
        support::get_xattr(&path, atomfs_fuse::XATTR_ATOMIC).expect("get"),
        b"1"
    );
    {
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        std::os::unix::fs::FileExt::write_at(&f, b"AB", 0).expect("pwrite");
        support::ioctl_none(&f, atomfs_fuse::IOC_ATOMIC_ABORT).expect("ATOMIC_ABORT");
    }
    assert_eq!(
        fs::read(&path).expect("read"),
        b"0123",
        "the descriptor opened in atomic mode: its aborted writes are gone"
    );
    support::set_xattr(&path, atomfs_fuse::XATTR_ATOMIC, b"0").expect("atomic off");
    assert!(!listxattr(&path).contains(&atomfs_fuse::XATTR_ATOMIC.to_string()));
    assert_eq!(
        support::get_xattr(&path, atomfs_fuse::XATTR_ATOMIC).expect("get"),
        b"0"
    );
    m.finish();
}

#[test]
fn acls_with_setfacl_and_getfacl() {
    for tool in ["setfacl", "getfacl"] {
        if !test_support::env::have(tool) {
            return test_support::unavailable(
                "acls_with_setfacl_and_getfacl",
                &format!("no {tool}: run scripts/install-deps.sh as root (package acl)"),
            );
        }
    }
    let Some(m) = mounted("acl", Arc::new(ModelStore::new())) else {
        return;
    };
    let d = m.dir();
    fs::write(d.join("f"), b"x").expect("write");
    fs::create_dir(d.join("dir")).expect("mkdir");
    let out = run("setfacl", &["-m", "u:1234:rw", "f"], &d);
    assert!(out.is_empty(), "setfacl: {out}");
    let got = run("getfacl", &["-c", "f"], &d);
    assert!(got.contains("user:1234:rw-"), "getfacl f:\n{got}");
    assert!(got.contains("mask::rw-"), "getfacl f:\n{got}");
    run("setfacl", &["-d", "-m", "g:77:rx", "dir"], &d);
    let got = run("getfacl", &["-c", "dir"], &d);
    assert!(got.contains("default:group:77:r-x"), "getfacl dir:\n{got}");
    m.finish();
}

/// Run the C example `namespace_tx` on a fresh mount in `mode`; returns its output and the
/// mount's root listing afterwards.
fn namespace_tx(mode: &str) -> Option<(String, Vec<String>, support::Mounted)> {
    namespace_tx_on(mode, Arc::new(ModelStore::new()))
}

fn namespace_tx_on(
    mode: &str,
    store: Arc<dyn store::Store>,
) -> Option<(String, Vec<String>, support::Mounted)> {
    let m = mounted(&format!("nstx-{mode}-{}", store.engine_name()), store)?;
    let cc_dir = scratch("fuse-cc-nstx");
    let prog = support::build_c_example("namespace_tx", &cc_dir)?;
    let out = run(&prog, &[m.dir().as_os_str(), mode.as_ref()], &m.dir());
    let mut names: Vec<String> = fs::read_dir(m.dir())
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Some((out, names, m))
}

#[test]
fn namespace_calls_join_a_transaction_and_abort_with_it() {
    for mode in ["abort", "exit"] {
        let Some((out, names, m)) = namespace_tx(mode) else {
            return;
        };
        assert!(out.contains("transaction"), "{out}");
        assert!(names.is_empty(), "after {mode}: left behind {names:?}");
        assert!(
            fs::symlink_metadata(m.dir().join("d")).is_err(),
            "after {mode}: d is gone"
        );
        // The names are free again: the same calls outside any transaction work.
        fs::create_dir(m.dir().join("d")).expect("mkdir d again");
        fs::write(m.dir().join("d/final"), b"later").expect("write");
        m.finish();
    }
}

#[test]
fn namespace_calls_join_a_transaction_and_commit_with_it() {
    let model = Arc::new(ModelStore::new());
    let Some((out, names, m)) = namespace_tx_on("commit", model.clone() as Arc<dyn store::Store>)
    else {
        return;
    };
    assert!(out.contains("committed"), "{out}");
    assert_eq!(names, vec!["d"]);
    let d = m.dir().join("d");
    let mut inside: Vec<String> = fs::read_dir(&d)
        .expect("readdir d")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    inside.sort();
    assert_eq!(inside, vec!["fifo", "final", "link"]);
    assert_eq!(
        fs::read(d.join("final")).expect("read"),
        b"written inside the transaction"
    );
    assert_eq!(
        fs::read(d.join("link")).expect("through the link"),
        fs::read(d.join("final")).expect("read")
    );
    assert!(fs::symlink_metadata(d.join("fifo"))
        .expect("stat")
        .file_type()
        .is_fifo());
    assert_eq!(
        support::get_xattr(&d.join("final"), "user.note").expect("get"),
        b"kept"
    );
    m.finish();
    // Durable: what a crash after the commit keeps has all of it.
    let tree = conformance::snapshot(&model.crash()).expect("snapshot");
    for path in ["d/final", "d/link", "d/fifo"] {
        assert!(tree.contains_key(path.as_bytes()), "{path} lost: {tree:?}");
    }
}

/// The same on a pool: its namespace transactions are the engine's own; what the pool does
/// not offer yet (symbolic links, FIFOs, attributes) the example leaves out.
#[test]
fn namespace_calls_join_a_pool_transaction() {
    for mode in ["abort", "exit", "commit"] {
        let (pool, _dir) = support::shm_pool(&format!("nstx-{mode}"), 64 << 20);
        let Some((out, names, m)) = namespace_tx_on(mode, pool) else {
            return;
        };
        if mode == "commit" {
            assert!(out.contains("committed"), "{out}");
            assert_eq!(names, vec!["d"]);
            assert_eq!(
                fs::read(m.dir().join("d/final")).expect("read"),
                b"written inside the transaction"
            );
        } else {
            assert!(
                names.is_empty(),
                "after {mode} on a pool: left behind {names:?}"
            );
        }
        m.finish();
    }
}

/// The whole example on mmio, a host-file engine that offers every call it makes.
#[test]
fn namespace_calls_join_an_mmio_transaction() {
    if !conformance::cases::awaited("mmio").is_empty() {
        return eprintln!("mmio does not offer every call of the example yet");
    }
    for mode in ["abort", "commit"] {
        let (store, _dir) = support::mmio_store(&format!("nstx-{mode}"));
        let Some((out, names, m)) = namespace_tx_on(mode, store) else {
            return;
        };
        assert!(!out.contains("not offered"), "{out}");
        if mode == "commit" {
            let d = m.dir().join("d");
            assert_eq!(names, vec!["d"]);
            assert_eq!(
                fs::read(d.join("link")).expect("through the link"),
                b"written inside the transaction"
            );
            assert!(fs::symlink_metadata(d.join("fifo"))
                .expect("stat")
                .file_type()
                .is_fifo());
            assert_eq!(
                support::get_xattr(&d.join("final"), "user.note").expect("get"),
                b"kept"
            );
        } else {
            assert!(
                names.is_empty(),
                "after abort on mmio: left behind {names:?}"
            );
        }
        m.finish();
    }
}
