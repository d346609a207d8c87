//! The crash model, rule by rule: each test builds a small state and checks the exact set of
//! crash images the rule allows (and that nothing else appears).

use super::*;
use crate::{Fault, FaultKind, FaultOp, FaultPlan, Faulty, HostFs, OpenOptions};
use pmem::Region;
use std::collections::BTreeSet;

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// The distinct contents of `path` over every image of `point` (`None`: no such file).
fn contents(point: &HostCrashPoint, path: &str) -> BTreeSet<Option<Vec<u8>>> {
    assert!(point.is_exhaustive(), "{}", point.describe(0));
    point
        .images()
        .map(|i| i.file(path).map(<[u8]>::to_vec))
        .collect()
}

fn synced_file(fs: &SimHostFs, path: &str, data: &[u8]) -> SimFile {
    let f = fs.open(p(path), &OpenOptions::create()).expect("create");
    fs.write_all_at(&f, 0, data).expect("write");
    fs.sync_data(&f).expect("sync");
    fs.sync_dir(p("")).expect("sync dir");
    f
}

#[test]
fn unsynced_sectors_survive_independently_old_or_new() {
    let fs = SimHostFs::default();
    let f = synced_file(&fs, "a", &[b'o'; 1024]);
    fs.write_all_at(&f, 0, &[b'n'; 1024]).expect("write");
    let seen = contents(&fs.crash_point(), "a");
    let sector = |x: u8, y: u8| {
        let mut v = vec![x; 512];
        v.extend_from_slice(&[y; 512]);
        Some(v)
    };
    let expected: BTreeSet<_> = [
        sector(b'o', b'o'),
        sector(b'n', b'o'),
        sector(b'o', b'n'),
        sector(b'n', b'n'),
    ]
    .into();
    assert_eq!(seen, expected);
    fs.sync_data(&f).expect("sync");
    assert_eq!(
        contents(&fs.crash_point(), "a"),
        [sector(b'n', b'n')].into()
    );
}

#[test]
fn a_sector_is_never_torn_and_takes_any_of_its_contents_since_the_sync() {
    let fs = SimHostFs::default();
    let f = synced_file(&fs, "a", &[0; 512]);
    fs.write_all_at(&f, 0, &[1; 8]).expect("write");
    fs.write_all_at(&f, 8, &[2; 8]).expect("write");
    let seen = contents(&fs.crash_point(), "a");
    let with = |parts: &[(usize, u8)]| {
        let mut v = vec![0u8; 512];
        for &(at, b) in parts {
            v[at..at + 8].fill(b);
        }
        Some(v)
    };
    // Never [0.., 2..]: the second write alone never was the sector's content.
    assert_eq!(
        seen,
        [with(&[]), with(&[(0, 1)]), with(&[(0, 1), (8, 2)])].into()
    );
}

#[test]
fn a_length_change_survives_only_after_a_sync() {
    let fs = SimHostFs::default();
    let f = synced_file(&fs, "a", b"abc");
    fs.write_all_at(&f, 3, b"def").expect("append");
    let seen = contents(&fs.crash_point(), "a");
    // Old length, or new length with the sector old (zeros past the old end) or new.
    let expected: BTreeSet<_> = [
        Some(b"abc".to_vec()),
        Some(b"abc\0\0\0".to_vec()),
        Some(b"abcdef".to_vec()),
    ]
    .into();
    assert_eq!(seen, expected);
    fs.set_len(&f, 1).expect("truncate");
    fs.sync_all(&f).expect("sync");
    assert_eq!(
        contents(&fs.crash_point(), "a"),
        [Some(b"a".to_vec())].into()
    );
}

#[test]
fn a_create_survives_only_after_sync_dir() {
    let fs = SimHostFs::default();
    let f = fs
        .open(p("new"), &OpenOptions::create_new())
        .expect("create");
    fs.write_all_at(&f, 0, b"x").expect("write");
    fs.sync_data(&f).expect("sync file");
    assert_eq!(
        contents(&fs.crash_point(), "new"),
        [None, Some(b"x".to_vec())].into()
    );
    fs.sync_dir(p("")).expect("sync dir");
    assert_eq!(
        contents(&fs.crash_point(), "new"),
        [Some(b"x".to_vec())].into()
    );
}

#[test]
fn rename_over_an_existing_name_leaves_old_or_new_never_neither() {
    let fs = SimHostFs::default();
    synced_file(&fs, "target", b"old");
    synced_file(&fs, "tmp", b"new");
    fs.rename(p("tmp"), p("target")).expect("rename");
    let point = fs.crash_point();
    assert_eq!(
        contents(&point, "target"),
        [Some(b"old".to_vec()), Some(b"new".to_vec())].into()
    );
    fs.sync_dir(p("")).expect("sync dir");
    let point = fs.crash_point();
    assert_eq!(contents(&point, "target"), [Some(b"new".to_vec())].into());
    assert_eq!(contents(&point, "tmp"), [None].into());
}

#[test]
fn unlink_and_link_need_the_directory_sync() {
    let fs = SimHostFs::default();
    fs.mkdir(p("d"), 0o755).expect("mkdir");
    fs.sync_dir(p("")).expect("sync root");
    synced_file(&fs, "d/f", b"1");
    fs.sync_dir(p("d")).expect("sync d");
    fs.link(p("d/f"), p("g")).expect("link");
    fs.unlink(p("d/f")).expect("unlink");
    let point = fs.crash_point();
    assert_eq!(contents(&point, "d/f"), [None, Some(b"1".to_vec())].into());
    assert_eq!(contents(&point, "g"), [None, Some(b"1".to_vec())].into());
    assert_eq!(point.state_count(), 4, "two entries, each independently");
}

#[test]
fn clone_range_survives_per_block() {
    let fs = SimHostFs::default();
    let src = synced_file(&fs, "src", &[b's'; 8192]);
    let dst = synced_file(&fs, "dst", &[b'd'; 8192]);
    fs.clone_range(&src, 0, &dst, 0, 8192).expect("clone");
    let seen = contents(&fs.crash_point(), "dst");
    assert_eq!(seen.len(), 4);
    for image in seen.into_iter().flatten() {
        for block in image.chunks(4096) {
            assert!(block.iter().all(|&b| b == block[0]), "a block was torn");
        }
    }
    let err = fs
        .clone_range(&src, 100, &dst, 0, 4096)
        .expect_err("unaligned");
    assert!(
        err.to_string().contains("multiples of the 4096-byte block"),
        "{err}"
    );
}

#[test]
fn exchange_range_is_all_or_nothing_across_both_files() {
    let fs = SimHostFs::default();
    let a = synced_file(&fs, "a", &[b'a'; 8192]);
    let b = synced_file(&fs, "b", &[b'b'; 8192]);
    fs.exchange_range(&a, 0, &b, 0, 8192).expect("exchange");
    let point = fs.crash_point();
    assert_eq!(point.state_count(), 2);
    for image in point.images() {
        let (ia, ib) = (image.file("a").expect("a"), image.file("b").expect("b"));
        let swapped = ia == [b'b'; 8192] && ib == [b'a'; 8192];
        let kept = ia == [b'a'; 8192] && ib == [b'b'; 8192];
        assert!(swapped || kept, "{}", image.summary());
    }
    fs.sync_data(&b).expect("sync b");
    let image = fs.crash_point().image(0);
    assert_eq!(
        image.file("a"),
        Some(&[b'b'; 8192][..]),
        "one commit covers both files"
    );
}

#[test]
fn atomic_write_is_all_or_nothing_within_its_unit() {
    let fs = SimHostFs::default();
    let f = synced_file(&fs, "a", &[0; 4096]);
    fs.atomic_write(&f, 0, &[7; 4096]).expect("atomic write");
    assert_eq!(
        contents(&fs.crash_point(), "a"),
        [Some(vec![0; 4096]), Some(vec![7; 4096])].into()
    );
    let err = fs
        .atomic_write(&f, 512, &[7; 4096])
        .expect_err("misaligned");
    assert!(err.to_string().contains("multiple of it"), "{err}");
    let err = fs
        .atomic_write(&f, 0, &[7; 1 << 17])
        .expect_err("too large");
    assert!(err.to_string().contains("unit limits"), "{err}");
}

#[test]
fn mapped_stores_are_durable_per_page_after_flush_and_fence() {
    let fs = SimHostFs::default();
    let f = synced_file(&fs, "m", &[0; 8192]);
    let map = fs.map(&f, 8192).expect("map");
    map.write(0, &[1; 16]);
    map.write(4096, &[2; 16]);
    assert_eq!(
        fs.crash_point().state_count(),
        4,
        "two pages, each old or new"
    );
    map.flush(0, 16);
    map.fence();
    let point = fs.crash_point();
    assert_eq!(
        point.state_count(),
        2,
        "the flushed page is durable, the other pending"
    );
    for image in point.images() {
        assert_eq!(&image.file("m").expect("m")[..16], &[1; 16]);
    }
    assert_eq!(map.load_u64(4096), u64::from_le_bytes([2; 8]));
}

#[test]
fn every_sync_is_a_crash_point_on_a_shared_clock() {
    let fs = SimHostFs::default();
    let clock = Arc::new(AtomicU64::new(100));
    fs.set_clock(clock.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    fs.set_sync_hook(Box::new(move |point: &HostCrashPoint| {
        log.lock()
            .expect("log")
            .push((point.sync_index(), point.clock(), point.state_count()));
    }));
    let f = fs.open(p("a"), &OpenOptions::create()).expect("create");
    fs.write_all_at(&f, 0, b"x").expect("write");
    fs.sync_data(&f).expect("sync");
    fs.sync_dir(p("")).expect("sync dir");
    // Entry + (sector, length) pending at the first sync; only the entry at the second.
    assert_eq!(
        *seen.lock().expect("log"),
        vec![(0, 100, 2 * 2 * 2), (1, 101, 2)]
    );
    assert_eq!(clock.load(Ordering::SeqCst), 102);
}

#[test]
fn sampling_above_the_limit_is_seeded_and_reproducible() {
    let config = SimConfig {
        crash: CrashConfig {
            exhaustive_limit: 64,
            sample_count: 16,
            seed: 7,
        },
        ..SimConfig::default()
    };
    let fs = SimHostFs::new(config);
    let f = synced_file(&fs, "a", &[0; 8192]);
    fs.write_all_at(&f, 0, &[1; 8192]).expect("write");
    let point = fs.crash_point();
    assert!(!point.is_exhaustive());
    assert_eq!(point.state_count(), 1 << 16);
    assert_eq!(point.image_count(), 16);
    assert_eq!(point.image(0).file("a"), Some(&[0; 8192][..]));
    assert_eq!(point.image(1).file("a"), Some(&[1; 8192][..]));
    let again = fs.crash_point();
    for index in 0..16 {
        assert_eq!(
            point.image(index),
            again.image(index),
            "{}",
            point.describe(index)
        );
    }
}

#[test]
fn four_kib_sectors_tear_at_four_kib() {
    let config = SimConfig {
        sector_len: 4096,
        ..SimConfig::default()
    };
    let fs = SimHostFs::new(config);
    let f = synced_file(&fs, "a", &[0; 8192]);
    fs.write_all_at(&f, 0, &[1; 8192]).expect("write");
    assert_eq!(fs.crash_point().state_count(), 4);
}

#[test]
fn a_failed_fsync_loses_the_data_for_good() {
    let plan = FaultPlan::new();
    let fs = Faulty::new(SimHostFs::default(), plan.clone());
    let f = fs.open(p("a"), &OpenOptions::create()).expect("create");
    fs.write_all_at(&f, 0, b"old").expect("write");
    fs.sync_data(&f).expect("sync");
    fs.sync_dir(p("")).expect("sync dir");
    fs.write_all_at(&f, 0, b"new").expect("write");
    plan.add(Fault::once(FaultOp::SyncFile, FaultKind::Io));
    let err = fs.sync_data(&f).expect_err("injected EIO");
    assert_eq!(err.errno(), libc::EIO);
    fs.sync_data(&f).expect("the next fsync succeeds");
    let mut buf = [0u8; 3];
    fs.read_at(&f, 0, &mut buf).expect("read");
    assert_eq!(&buf, b"new", "the page cache still has it");
    assert_eq!(
        fs.inner().durable_image().file("a"),
        Some(&b"old"[..]),
        "never durable"
    );
}

#[test]
fn injected_no_space_and_short_writes() {
    let plan = FaultPlan::new();
    let fs = Faulty::new(SimHostFs::default(), plan.clone());
    plan.add(Fault::once(FaultOp::Create, FaultKind::NoSpace));
    let err = fs
        .open(p("a"), &OpenOptions::create())
        .err()
        .expect("ENOSPC");
    assert_eq!(err.errno(), libc::ENOSPC);
    assert!(fs.stat(p("a")).is_err(), "nothing created");
    let f = fs.open(p("a"), &OpenOptions::create()).expect("create");
    plan.add(Fault::once(FaultOp::Write, FaultKind::ShortWrite { len: 2 }).on("a"));
    assert_eq!(fs.write_at(&f, 0, b"abcdef").expect("short"), 2);
    assert_eq!(fs.file_stat(&f).expect("stat").len, 2);
    plan.add(Fault::once(FaultOp::Write, FaultKind::Io).after(1));
    fs.write_all_at(&f, 0, b"x")
        .expect("the first write passes");
    assert_eq!(
        fs.write_at(&f, 0, b"y").expect_err("EIO").errno(),
        libc::EIO
    );
    assert_eq!(plan.injected().len(), 3);
}

#[test]
fn files_changed_behind_the_engines_back() {
    let fs = Faulty::new(SimHostFs::default(), FaultPlan::new());
    let f = fs.open(p("a"), &OpenOptions::create()).expect("create");
    fs.write_all_at(&f, 0, b"abcdef").expect("write");
    fs.truncate_behind(p("a"), 2).expect("truncate");
    assert_eq!(fs.file_stat(&f).expect("stat").len, 2);
    assert_eq!(
        fs.inner().durable_image().file("a"),
        None,
        "its entry was never synced"
    );
    fs.sync_dir(p("")).expect("sync dir");
    assert_eq!(fs.inner().durable_image().file("a"), Some(&b"ab"[..]));
    fs.delete_behind(p("a")).expect("delete");
    assert!(fs.stat(p("a")).expect_err("gone").is_not_found());
    assert_eq!(fs.inner().durable_image().file("a"), None);
}

#[test]
fn a_crash_image_opens_again_as_a_durable_file_system() {
    let fs = SimHostFs::default();
    fs.mkdir(p("d"), 0o755).expect("mkdir");
    synced_file(&fs, "d/x", b"hello");
    fs.link(p("d/x"), p("y")).expect("link");
    fs.sync_dir(p("d")).expect("sync");
    fs.sync_dir(p("")).expect("sync");
    let image = fs.durable_image();
    let reopened = SimHostFs::from_image(&image, SimConfig::default());
    assert!(reopened.durable_image().same_tree(&image));
    assert_eq!(reopened.pending_count(), 0);
    let x = reopened
        .open(p("d/x"), &OpenOptions::read_write())
        .expect("open");
    reopened.write_all_at(&x, 0, b"J").expect("write");
    let y = reopened
        .open(p("y"), &OpenOptions::read_only())
        .expect("open");
    let mut buf = [0u8; 5];
    reopened.read_at(&y, 0, &mut buf).expect("read");
    assert_eq!(&buf, b"Jello", "hard links share the inode");
    // Link counts are what the live model reported: 2 for a directory, one per name for a file.
    let nlink = |fs: &SimHostFs, path: &str| fs.stat(p(path)).expect("stat").nlink;
    assert_eq!(nlink(&reopened, "d"), nlink(&fs, "d"));
    assert_eq!(nlink(&reopened, "d"), 2);
    assert_eq!(nlink(&reopened, "y"), 2);
}

#[test]
fn namespace_errors_follow_posix() {
    let fs = SimHostFs::default();
    fs.mkdir(p("d"), 0o755).expect("mkdir");
    synced_file(&fs, "d/f", b"1");
    let errno = |r: HostFsResult<()>| r.expect_err("must fail").errno();
    assert_eq!(errno(fs.rmdir(p("d"))), libc::ENOTEMPTY);
    assert_eq!(errno(fs.unlink(p("d"))), libc::EISDIR);
    assert_eq!(errno(fs.mkdir(p("d"), 0o755)), libc::EEXIST);
    assert_eq!(errno(fs.rename(p("d"), p("d/sub"))), libc::EINVAL);
    assert_eq!(errno(fs.rename(p("d/f"), p("d"))), libc::EISDIR);
    assert_eq!(errno(fs.link(p("d"), p("e"))), libc::EPERM);
    assert_eq!(errno(fs.unlink(p("nope"))), libc::ENOENT);
    assert_eq!(errno(fs.unlink(p("../etc/passwd"))), libc::EINVAL);
}

#[test]
fn a_crash_image_keeps_the_inode_numbers_of_files() {
    // Engines find their files by inode number after a crash (a file system keeps them).
    let fs = SimHostFs::default();
    synced_file(&fs, "gone", b"g");
    fs.unlink(p("gone")).expect("unlink");
    fs.mkdir(p("d"), 0o755).expect("mkdir");
    synced_file(&fs, "d/x", b"x");
    synced_file(&fs, "y", b"y");
    fs.link(p("y"), p("d/y2")).expect("link");
    fs.sync_dir(p("d")).expect("sync dir");
    let ino = |fs: &SimHostFs, path: &str| fs.stat(p(path)).expect("stat").ino;
    let reopened = SimHostFs::from_image(&fs.durable_image(), SimConfig::default());
    for path in ["d/x", "y", "d/y2"] {
        assert_eq!(ino(&reopened, path), ino(&fs, path), "{path}");
    }
    assert_eq!(ino(&reopened, "y"), ino(&reopened, "d/y2"));
    // New files and directories never reuse one.
    let z = reopened
        .open(p("z"), &OpenOptions::create())
        .expect("create");
    let kept = [ino(&fs, "d/x"), ino(&fs, "y"), ino(&reopened, "d")];
    assert!(!kept.contains(&z.ino()));
}

#[test]
fn a_symlink_or_special_file_survives_only_after_sync_dir_and_whole() {
    let fs = SimHostFs::default();
    fs.symlink(b"../anywhere", p("l")).expect("symlink");
    fs.mknod(p("fifo"), crate::NodeKind::Fifo, 0o640, 0)
        .expect("mknod");
    let point = fs.crash_point();
    let seen: BTreeSet<(Option<ImageNode>, bool)> = point
        .images()
        .map(|i| {
            (
                i.nodes.get(b"l".as_slice()).cloned(),
                i.nodes.contains_key(b"fifo".as_slice()),
            )
        })
        .collect();
    assert_eq!(seen.len(), 4, "two entries, each independently: {seen:?}");
    fs.sync_dir(p("")).expect("sync dir");
    let image = fs.durable_image();
    match image.nodes.get(b"l".as_slice()) {
        Some(ImageNode::Symlink { target, .. }) => assert_eq!(target, b"../anywhere"),
        other => panic!("symlink in the image: {other:?}"),
    }
    match image.nodes.get(b"fifo".as_slice()) {
        Some(ImageNode::Special { mode_type, .. }) => assert_eq!(*mode_type, libc::S_IFIFO),
        other => panic!("fifo in the image: {other:?}"),
    }
    assert_eq!(fs.readlink(p("l")).expect("readlink"), b"../anywhere");
    assert!(fs.open(p("l"), &OpenOptions::read_only()).is_err());
    let reopened = SimHostFs::from_image(&image, fs.config());
    assert!(reopened.durable_image().same_tree(&image));
    assert_eq!(reopened.readlink(p("l")).expect("readlink"), b"../anywhere");
}

#[test]
fn an_exchange_is_all_or_nothing_until_either_directory_is_synced() {
    let fs = SimHostFs::default();
    fs.mkdir(p("d"), 0o755).expect("mkdir");
    fs.sync_dir(p("")).expect("sync root");
    synced_file(&fs, "a", b"A");
    synced_file(&fs, "d/b", b"B");
    fs.sync_dir(p("d")).expect("sync d");
    fs.rename_with(p("a"), p("d/b"), crate::RenameHow::Exchange)
        .expect("exchange");
    let point = fs.crash_point();
    let pairs: BTreeSet<_> = point
        .images()
        .map(|i| {
            (
                i.file("a").map(<[u8]>::to_vec),
                i.file("d/b").map(<[u8]>::to_vec),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            (Some(b"A".to_vec()), Some(b"B".to_vec())),
            (Some(b"B".to_vec()), Some(b"A".to_vec()))
        ]
        .into()
    );
    fs.sync_dir(p("d")).expect("sync one of the two");
    let pairs: BTreeSet<_> = fs
        .crash_point()
        .images()
        .map(|i| {
            (
                i.file("a").map(<[u8]>::to_vec),
                i.file("d/b").map(<[u8]>::to_vec),
            )
        })
        .collect();
    assert_eq!(pairs, [(Some(b"B".to_vec()), Some(b"A".to_vec()))].into());
    let err = fs
        .rename_with(p("a"), p("d/b"), crate::RenameHow::NoReplace)
        .expect_err("noreplace onto a name");
    assert_eq!(err.errno(), libc::EEXIST);
}

#[test]
fn an_extended_attribute_keeps_its_durable_value_or_any_since_until_fsync() {
    let fs = SimHostFs::default();
    synced_file(&fs, "f", b"x");
    fs.set_xattr(p("f"), b"user.a", b"1", crate::XattrHow::Either)
        .expect("set");
    fs.sync_node(p("f")).expect("sync");
    fs.set_xattr(p("f"), b"user.a", b"2", crate::XattrHow::Either)
        .expect("set");
    fs.remove_xattr(p("f"), b"user.a").expect("remove");
    let values: BTreeSet<Option<Vec<u8>>> = fs
        .crash_point()
        .images()
        .map(|i| {
            i.xattrs_of("f")
                .and_then(|a| a.get(b"user.a".as_slice()).cloned())
        })
        .collect();
    assert_eq!(
        values,
        [None, Some(b"1".to_vec()), Some(b"2".to_vec())].into()
    );
    assert_eq!(
        fs.get_xattr(p("f"), b"user.a")
            .expect_err("removed")
            .errno(),
        libc::ENODATA
    );
    fs.set_xattr(p(""), b"user.root", b"r", crate::XattrHow::Create)
        .expect("on the root");
    fs.sync_dir(p("")).expect("sync root");
    fs.sync_node(p("f")).expect("sync");
    let image = fs.durable_image();
    assert_eq!(image.xattrs_of("f"), None);
    assert_eq!(
        image
            .xattrs_of("")
            .and_then(|a| a.get(b"user.root".as_slice())),
        Some(&b"r".to_vec())
    );
    let reopened = SimHostFs::from_image(&image, fs.config());
    assert_eq!(reopened.get_xattr(p(""), b"user.root").expect("get"), b"r");
}

#[test]
fn a_punched_range_reads_zeros_and_tears_per_sector_until_synced() {
    let fs = SimHostFs::default();
    let f = synced_file(&fs, "f", &[5u8; 1024]);
    fs.fallocate(&f, crate::FallocateHow::PunchHole, 0, 1024)
        .expect("punch");
    let mut buf = [1u8; 1024];
    fs.read_full_at(&f, 0, &mut buf).expect("read");
    assert!(buf.iter().all(|&b| b == 0));
    assert_eq!(
        fs.crash_point().state_count(),
        4,
        "two sectors, each old or zero"
    );
    fs.fallocate(
        &f,
        crate::FallocateHow::Allocate { keep_size: false },
        0,
        4096,
    )
    .expect("allocate");
    assert_eq!(fs.file_stat(&f).expect("stat").len, 4096);
}

#[test]
fn a_chmod_is_durable_once_its_inode_is_synced_and_survives_a_reopened_image() {
    let fs = SimHostFs::default();
    synced_file(&fs, "f", b"x");
    fs.set_perm(p("f"), 0o600).expect("chmod");
    let perm_after_crash = |fs: &SimHostFs| fs.durable_image().perms.get(b"f".as_slice()).copied();
    assert_eq!(
        perm_after_crash(&fs),
        Some(0o644),
        "not synced: the old bits"
    );
    fs.sync_node(p("f")).expect("sync");
    assert_eq!(perm_after_crash(&fs), Some(0o600), "synced: the new bits");
    let reopened = SimHostFs::from_image(&fs.durable_image(), SimConfig::default());
    assert_eq!(reopened.stat(p("f")).expect("stat").perm, 0o600);
    assert_eq!(perm_after_crash(&reopened), Some(0o600));
}
