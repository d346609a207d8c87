//! Tests of the mapped region.

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::AtomicUsize;

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new_in(parent: &Path) -> Option<Self> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("atomfs-pmem-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        Some(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir_is_tmpfs(dir: &Path) -> bool {
    let file = File::open(dir).expect("open test dir");
    is_tmpfs(&file).expect("fstatfs")
}

fn shm() -> Option<TempDir> {
    TempDir::new_in(Path::new("/dev/shm"))
}

#[test]
fn data_survives_close_and_reopen() {
    for dir in [TempDir::new_in(&std::env::temp_dir()), shm()]
        .into_iter()
        .flatten()
    {
        let path = dir.0.join("pool");
        {
            let region = MappedRegion::create(&path, 64 * 1024).expect("create");
            region.write(100, b"persistent hello");
            region.persist(100, 16); // persist: the greeting, before closing
            region.write_nt(5000, &[0x5A; 3000]);
            region.store_u64(8192, 0xDEAD_BEEF);
            region.flush(8192, 8);
            region.fence(); // persist: the non-temporal copy and the word
            region.take_sync_error().expect("no msync error");
        }
        let region = MappedRegion::open(&path).expect("open");
        assert_eq!(region.len(), 64 * 1024);
        let mut buf = [0u8; 16];
        region.read(100, &mut buf);
        assert_eq!(&buf, b"persistent hello");
        let mut nt = vec![0u8; 3000];
        region.read(5000, &mut nt);
        assert!(nt.iter().all(|&b| b == 0x5A));
        assert_eq!(region.load_u64(8192), 0xDEAD_BEEF);
        assert_eq!(region.stats().fences, 0);
    }
}

#[test]
fn durability_mode_follows_the_file_system() {
    let tmp = TempDir::new_in(&std::env::temp_dir()).expect("temp dir");
    let region = MappedRegion::create(tmp.0.join("pool"), 8192).expect("create");
    // Without DAX, a non-tmpfs file system must be msync mode.
    if dir_is_tmpfs(&tmp.0) {
        assert_eq!(region.durability(), Durability::Tmpfs);
    } else {
        assert_ne!(region.durability(), Durability::Tmpfs);
        if region.durability() != Durability::MapSync {
            assert_eq!(region.durability(), Durability::Msync);
            assert!(!region.durability().flush_is_persistence_point());
        }
    }
    // The workspace's target directory is on the root file system (ext4/overlay here).
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../target");
    if let Some(dir) = TempDir::new_in(&target) {
        let region = MappedRegion::create(dir.0.join("pool"), 8192).expect("create");
        let expect = if dir_is_tmpfs(&dir.0) {
            Durability::Tmpfs
        } else {
            Durability::Msync
        };
        assert_eq!(region.durability(), expect);
    }
    if let Some(dir) = shm() {
        assert!(dir_is_tmpfs(&dir.0), "/dev/shm is tmpfs");
        let region = MappedRegion::create(dir.0.join("pool"), 8192).expect("create");
        assert_eq!(region.durability(), Durability::Tmpfs);
        assert!(region.durability().flush_is_persistence_point());
        assert_ne!(region.flush_instruction(), FlushInstruction::None);
    }
}

#[test]
fn msync_mode_tracks_and_clears_flushed_pages() {
    let dir = TempDir::new_in(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../target")
            .as_path(),
    )
    .expect("temp dir in target");
    let region = MappedRegion::create(dir.0.join("pool"), 64 * 1024).expect("create");
    if region.durability() != Durability::Msync {
        return; // The target directory is on tmpfs or DAX on this machine: nothing to track.
    }
    region.write(10, &[1; 10]);
    region.write(20_000, &[2; 10]);
    region.flush(10, 10);
    region.flush(20_000, 10);
    region.flush(0, 4096);
    let page = page_size();
    let dirty = region.dirty.lock().expect("lock").clone();
    assert!(dirty.contains(&(0, 1)), "{dirty:?}");
    assert!(
        dirty.contains(&(20_000 / page, 20_010u64.div_ceil(page))),
        "{dirty:?}"
    );
    region.fence();
    assert!(region.dirty.lock().expect("lock").is_empty());
    region.take_sync_error().expect("msync succeeded");
}

#[test]
fn write_nt_copies_exactly_at_any_alignment() {
    let region = MappedRegion::create(shm_or_tmp().0.join("pool"), 16384).expect("create");
    for (off, len) in [
        (0u64, 1usize),
        (3, 15),
        (7, 33),
        (16, 16),
        (1, 4000),
        (64, 4096),
        (100, 9000),
        // Around the 64-byte alignment of the wide (AVX-512) streaming stores.
        (0, 64),
        (48, 80),
        (60, 200),
        (128, 63),
        (192, 129),
    ] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + off as usize) as u8).collect();
        region.fill(0, 16384, 0xEE);
        region.write_nt(off, &data);
        region.fence();
        let mut back = vec![0u8; len + 2];
        let start = off.saturating_sub(1);
        region.read(start, &mut back[..len + (off - start) as usize + 1]);
        let lead = (off - start) as usize;
        assert_eq!(&back[lead..lead + len], &data[..], "off {off} len {len}");
        if lead == 1 {
            assert_eq!(back[0], 0xEE);
        }
        assert_eq!(back[lead + len], 0xEE);
    }
}

#[test]
fn store_u64_nt_stores_one_word_and_counts_one_line() {
    let region = MappedRegion::create(shm_or_tmp().0.join("pool"), 8192).expect("create");
    region.fill(0, 8192, 0xEE);
    let before = region.stats();
    region.store_u64_nt(4096 + 56, 0x1122_3344_5566_7788);
    region.fence();
    let after = region.stats();
    assert_eq!(region.load_u64(4096 + 56), 0x1122_3344_5566_7788);
    let mut around = [0u8; 16];
    region.read(4096 + 48, &mut around);
    assert_eq!(around[..8], [0xEE; 8], "the neighbouring word is untouched");
    assert_eq!(after.lines_flushed - before.lines_flushed, 1);
    assert_eq!(after.bytes_stored - before.bytes_stored, 8);
}

#[test]
fn copy_nt_within_copies_between_blocks_and_counts_lines() {
    let region = MappedRegion::create(shm_or_tmp().0.join("pool"), 16384).expect("create");
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 13 + 1) as u8).collect();
    region.write(0, &data);
    region.fill(4096, 8192, 0xEE);
    let before = region.stats();
    region.copy_nt_within(64, 8192 + 64, 1024);
    region.fence();
    let after = region.stats();
    let mut back = vec![0u8; 1024 + 2];
    region.read(8192 + 63, &mut back);
    assert_eq!(back[0], 0xEE);
    assert_eq!(&back[1..1025], &data[64..1088]);
    assert_eq!(back[1025], 0xEE);
    assert_eq!(after.lines_flushed - before.lines_flushed, 16);
}

#[test]
fn write_line_nt_stores_one_line() {
    let region = MappedRegion::create(shm_or_tmp().0.join("pool"), 8192).expect("create");
    region.fill(0, 8192, 0xEE);
    let line: [u8; 64] = std::array::from_fn(|i| i as u8);
    region.write_line_nt(128, &line);
    region.fence();
    let mut back = [0u8; 66];
    region.read(127, &mut back);
    assert_eq!((back[0], &back[1..65], back[65]), (0xEE, &line[..], 0xEE));
}

fn shm_or_tmp() -> TempDir {
    shm()
        .or_else(|| TempDir::new_in(&std::env::temp_dir()))
        .expect("a temp dir")
}

fn reason(error: PmError) -> String {
    error.to_string()
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = shm_or_tmp();
    let small = dir.0.join("small");
    std::fs::write(&small, vec![0u8; 1024]).expect("write");
    let message = reason(MappedRegion::open(&small).err().expect("too small"));
    assert!(
        message.contains("small") && message.contains("too small"),
        "{message}"
    );

    let odd = dir.0.join("odd");
    std::fs::write(&odd, vec![0u8; 4096 + 100]).expect("write");
    let message = reason(MappedRegion::open(&odd).err().expect("odd size"));
    assert!(
        message.contains("odd") && message.contains("multiple of the page size"),
        "{message}"
    );

    let page_file = dir.0.join("page");
    std::fs::write(&page_file, vec![0u8; 8192]).expect("write");
    let message = reason(
        MappedRegion::open_with_min(&page_file, 1 << 20)
            .err()
            .expect("min"),
    );
    assert!(message.contains("need at least 1048576"), "{message}");

    let missing = dir.0.join("missing");
    match MappedRegion::open(&missing) {
        Err(PmError::Io { path, source, .. }) => {
            assert_eq!(path, missing);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected NotFound, got {:?}", other.err()),
    }
    let message = reason(
        MappedRegion::create(dir.0.join("no/such/dir/pool"), 8192)
            .err()
            .expect("no dir"),
    );
    assert!(message.contains("no/such/dir/pool"), "{message}");

    let exists = reason(
        MappedRegion::create(&page_file, 8192)
            .err()
            .expect("exists"),
    );
    assert!(
        exists.contains("page") && exists.contains("create"),
        "{exists}"
    );
    assert!(MappedRegion::create(dir.0.join("zero"), 0).is_err());
    let message = reason(MappedRegion::open(&dir.0).err().expect("a directory"));
    assert!(
        message.contains(dir.0.to_str().expect("utf-8")),
        "{message}"
    );
}

#[test]
fn permission_denied_is_an_error() {
    let dir = shm_or_tmp();
    let locked = dir.0.join("locked");
    std::fs::write(&locked, vec![0u8; 8192]).expect("write");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o400)).expect("chmod");
    // Root bypasses file modes; a read-only sysfs file denies writes even to root.
    let path = if MappedRegion::open(&locked).is_ok() {
        PathBuf::from("/sys/devices/system/cpu/online")
    } else {
        locked
    };
    match MappedRegion::open(&path) {
        Err(PmError::Io {
            path: named,
            source,
            ..
        }) => {
            assert_eq!(named, path);
            assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied);
        }
        other => panic!(
            "expected PermissionDenied for {}, got {:?}",
            path.display(),
            other.err()
        ),
    }
}

#[test]
fn concurrent_disjoint_writers() {
    let dir = shm_or_tmp();
    let region =
        std::sync::Arc::new(MappedRegion::create(dir.0.join("pool"), 65536).expect("create"));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let region = std::sync::Arc::clone(&region);
            std::thread::spawn(move || {
                for i in 0..256u64 {
                    let off = t * 16384 + i * 64;
                    region.store_u64(off, t << 32 | i);
                    region.persist(off, 8);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("writer");
    }
    for t in 0..4u64 {
        for i in 0..256u64 {
            assert_eq!(region.load_u64(t * 16384 + i * 64), t << 32 | i);
        }
    }
    assert_eq!(region.stats().fences, 1024);
}

#[test]
fn populate_keeps_every_byte() {
    let dir = shm_or_tmp();
    let path = dir.0.join("populate.pool");
    let len = 64 * page_size();
    let region = MappedRegion::create(&path, len).expect("create");
    let pattern: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
    region.write(0, &pattern);
    match region.populate() {
        Ok(()) => {}
        // A kernel older than 5.14 has no MADV_POPULATE_WRITE: the error names the call.
        Err(e) => assert!(e.to_string().contains("MADV_POPULATE_WRITE"), "{e}"),
    }
    let mut back = vec![0u8; len as usize];
    region.read(0, &mut back);
    assert!(back == pattern, "populate changed the mapping's contents");
}
