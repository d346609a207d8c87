//! The real implementation does what each operation says on a real directory.

mod common;

use common::TempDir;
use hostfs::{Capability, FileKind, HostFs, OpenOptions, RealHostFs};
use pmem::Region;
use std::path::Path;

fn p(s: &str) -> &Path {
    Path::new(s)
}

#[test]
fn file_and_namespace_operations_round_trip() {
    let dir = TempDir::new("real");
    let fs = RealHostFs::open(dir.path()).expect("open");
    fs.mkdir(p("d"), 0o750).expect("mkdir");
    let f = fs
        .open(p("d/a"), &OpenOptions::create_new())
        .expect("create");
    fs.write_all_at(&f, 0, b"hello world").expect("write");
    fs.set_len(&f, 5).expect("truncate");
    fs.sync_data(&f).expect("fdatasync");
    fs.sync_all(&f).expect("fsync");
    fs.sync_dir(p("d")).expect("fsync dir");
    fs.sync_dir(p("")).expect("fsync root");
    let mut buf = [0u8; 16];
    assert_eq!(fs.read_full_at(&f, 0, &mut buf).expect("read"), 5);
    assert_eq!(&buf[..5], b"hello");
    assert!(
        fs.open(p("d/a"), &OpenOptions::create_new()).is_err(),
        "create_new on an existing file"
    );
    fs.link(p("d/a"), p("b")).expect("link");
    assert_eq!(fs.stat(p("b")).expect("stat").nlink, 2);
    fs.rename(p("b"), p("d/c")).expect("rename");
    let mut names: Vec<_> = fs
        .read_dir(p("d"))
        .expect("readdir")
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            (b"a".to_vec(), FileKind::File),
            (b"c".to_vec(), FileKind::File)
        ]
    );
    fs.set_perm(p("d/a"), 0o600).expect("chmod");
    fs.set_times(p("d/a"), None, Some(1_000_000_000_123))
        .expect("utimens");
    let st = fs.stat(p("d/a")).expect("stat");
    assert_eq!(
        (st.perm, st.mtime_ns, st.len),
        (0o600, 1_000_000_000_123, 5)
    );
    assert_eq!(
        fs.stat(p("d")).expect("stat").perm & 0o777,
        0o750 & !umask()
    );
    assert_eq!(fs.stat(p("")).expect("stat root").kind, FileKind::Dir);
    fs.unlink(p("d/a")).expect("unlink");
    fs.unlink(p("d/c")).expect("unlink");
    fs.rmdir(p("d")).expect("rmdir");
    assert!(fs.read_dir(p("")).expect("readdir").is_empty());
    assert!(fs.statfs().expect("statfs").blocks > 0);
}

fn umask() -> u32 {
    // SAFETY: umask has no preconditions; it is set back at once.
    let old = unsafe { libc::umask(0o022) };
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    old
}

#[test]
fn a_mapping_writes_through_to_the_file() {
    let dir = TempDir::new("map");
    let fs = RealHostFs::open(dir.path()).expect("open");
    let f = fs.open(p("m"), &OpenOptions::create()).expect("create");
    fs.set_len(&f, 8192).expect("size");
    let map = fs.map(&f, 8000).expect("map");
    assert_eq!(map.len(), 8192);
    map.write(4096, b"mapped");
    map.persist(4096, 6);
    let mut buf = [0u8; 6];
    fs.read_at(&f, 4096, &mut buf).expect("read");
    assert_eq!(&buf, b"mapped");
}

#[test]
fn a_missing_capability_is_named_with_the_file_system() {
    let dir = TempDir::new("caps");
    let fs = RealHostFs::open(dir.path()).expect("open");
    let caps = fs.capabilities();
    let a = fs.open(p("a"), &OpenOptions::create()).expect("a");
    let b = fs.open(p("b"), &OpenOptions::create()).expect("b");
    fs.write_all_at(&a, 0, &[1; 4096]).expect("write");
    fs.write_all_at(&b, 0, &[2; 4096]).expect("write");
    match fs.clone_range(&a, 0, &b, 0, 4096) {
        Ok(()) => {
            assert!(caps.reflink);
            let mut buf = [0u8; 4096];
            fs.read_at(&b, 0, &mut buf).expect("read");
            assert_eq!(buf, [1; 4096]);
        }
        Err(e) => {
            assert!(!caps.reflink);
            let text = e.to_string();
            assert!(
                text.starts_with("reflink (FICLONERANGE) is not available on "),
                "{text}"
            );
            assert!(text.contains(&caps.fs_type.to_string()), "{text}");
        }
    }
    if !caps.has(Capability::ExchangeRange) {
        let e = fs
            .exchange_range(&a, 0, &b, 0, 4096)
            .expect_err("no exchange-range");
        assert!(e.to_string().contains("exchange-range"), "{e}");
    }
}

#[test]
fn faults_are_injected_over_the_real_directory() {
    use hostfs::{Fault, FaultKind, FaultOp, FaultPlan, Faulty};
    let dir = TempDir::new("faulty");
    let plan = FaultPlan::new();
    let fs = Faulty::new(RealHostFs::open(dir.path()).expect("open"), plan.clone());
    plan.add(Fault::once(FaultOp::Create, FaultKind::NoSpace));
    let e = fs
        .open(p("a"), &OpenOptions::create())
        .err()
        .expect("ENOSPC");
    assert_eq!(e.errno(), libc::ENOSPC);
    assert!(!dir.path().join("a").exists(), "nothing created");
    let f = fs.open(p("a"), &OpenOptions::create()).expect("create");
    plan.add(Fault::once(
        FaultOp::Write,
        FaultKind::ShortWrite { len: 3 },
    ));
    assert_eq!(fs.write_at(&f, 0, b"abcdef").expect("short write"), 3);
    assert_eq!(std::fs::read(dir.path().join("a")).expect("read"), b"abc");
    plan.add(Fault::once(FaultOp::SyncFile, FaultKind::Io).on("a"));
    assert_eq!(fs.sync_data(&f).expect_err("EIO").errno(), libc::EIO);
    fs.sync_data(&f).expect("the next fsync succeeds");
    fs.truncate_behind(p("a"), 1).expect("truncate behind");
    assert_eq!(fs.file_stat(&f).expect("stat").len, 1);
    fs.delete_behind(p("a")).expect("delete behind");
    assert!(!dir.path().join("a").exists());
    assert_eq!(plan.injected().len(), 3);
}
