//! Deterministic corrupted-image corpus (issue 4 part 4): from six valid images (fresh,
//! files, committed-not-checkpointed, an uncommitted transaction in the log, a crash in the
//! middle of a checkpoint, an open FG-WAL transaction; tests/common/images.rs),
//! systematically: every bit of the
//! superblock (with and without re-sealing its checksum), bits of every word of every log
//! entry (torn, and re-sealed so that the fields themselves are hostile), inode fields,
//! directory entries, a block shared by two files, out-of-range pointers, truncated files,
//! wrong magic and unknown version.
//!
//! Each image goes through tests/common/hostile.rs (open, fsck, read everything, write,
//! commit, unlink, unmount, reopen), then through `repair` (afterwards it opens and passes
//! fsck, or the repair is refused with a typed error) and `salvage` (never a panic; every
//! file of an image that opened clean is copied). The rules: never a panic; `open` refuses with a typed
//! error naming what and where, or opens; every fsck problem has a name and a location; a
//! structural corruption fsck can see (marked `Detect`) is refused or reported, never
//! served silently. The random-flip test beside it is tests/corrupt.rs.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/hostile.rs"]
mod hostile;
#[path = "common/images.rs"]
mod images;
#[path = "common/mutate.rs"]
mod mutate;

use hostile::Outcome;
use images::{build_image, image_config, ImageKind, IMAGE_BYTES};
use pmem::DramRegion;
use pool::{Geometry, PoolStore};
use std::sync::Arc;
use store::{Error, Store};

/// Must the corruption be noticed (refused by open or reported by fsck)?
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    /// Refused by open, or reported by fsck.
    Detect,
    /// Refused by open with this kind of error.
    Refuse,
    /// Anything but a panic (a valid-looking change fsck cannot tell from real data).
    Survive,
}

struct Case {
    label: String,
    image: Vec<u8>,
    expect: Expect,
}

#[derive(Default)]
struct Tally {
    refused: u64,
    opened_clean: u64,
    opened_reported: u64,
}

fn geometry() -> Geometry {
    Geometry::plan(IMAGE_BYTES, &image_config()).unwrap()
}

fn word(img: &[u8], at: u64) -> u64 {
    u64::from_le_bytes(img[at as usize..at as usize + 8].try_into().unwrap())
}

fn put(img: &mut [u8], at: u64, bytes: &[u8]) {
    img[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
}

/// Re-seal a log entry after editing its body (flag 0xA5 at 59, crc32c of 0..60 at 60).
fn reseal(img: &mut [u8], entry: u64) {
    let e = entry as usize;
    img[e + 59] = 0xA5;
    let crc = crc32c::crc32c(&img[e..e + 60]);
    img[e + 60..e + 64].copy_from_slice(&crc.to_le_bytes());
}

fn check_error(label: &str, e: &Error) {
    let typed = match e {
        Error::Corrupt { what, .. } => !what.is_empty(),
        Error::BadMagic(what) => !what.is_empty(),
        Error::UnsupportedVersion { .. } => true,
        _ => false,
    };
    assert!(typed, "{label}: open refused with an untyped error: {e:?}");
}

/// `fsck --repair` on a copy of the image: it opens and passes fsck afterwards, or the
/// repair is refused with a typed error. Salvage of another copy never panics, and copies
/// every file of an image that opened clean.
fn repair_and_salvage(case: &Case, opened_clean: bool) {
    let cfg = image_config();
    let region = Arc::new(DramRegion::from_bytes(&case.image));
    match pool::repair(region.clone(), &cfg) {
        Err(e) => check_error(&format!("{}: repair", case.label), &e),
        Ok(report) => {
            assert!(
                report.is_clean(),
                "{}: repair left problems: {:?}\nchanges: {:?}",
                case.label,
                report.remaining,
                report.changes
            );
            let s = PoolStore::open(region, &cfg)
                .unwrap_or_else(|e| panic!("{}: repaired pool does not open: {e}", case.label));
            let report = s.fsck().unwrap();
            assert!(
                report.is_clean(),
                "{}: repaired pool: {:?}",
                case.label,
                report.problems
            );
            hostile::read_everything(&s);
        }
    }
    let mut sink = CountSink::default();
    let salvaged = pool::salvage(
        Arc::new(DramRegion::from_bytes(&case.image)),
        &cfg,
        &mut sink,
    );
    if opened_clean {
        let s = PoolStore::open(Arc::new(DramRegion::from_bytes(&case.image)), &cfg).unwrap();
        let files = count_files(&s);
        assert!(
            salvaged.is_ok(),
            "{}: salvage of a clean image failed",
            case.label
        );
        assert_eq!(sink.files, files, "{}: salvage missed files", case.label);
    }
}

#[derive(Default)]
struct CountSink {
    files: u64,
}

impl pool::SalvageSink for CountSink {
    fn dir(&mut self, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn file(&mut self, _: &str, _: u64, data: &mut dyn std::io::Read) -> std::io::Result<u64> {
        self.files += 1;
        // Read a bounded prefix: a corrupt size may claim terabytes of holes.
        let mut buf = vec![0u8; 64 << 10];
        data.read(&mut buf).map(|n| n as u64)
    }
}

/// Regular files reachable from the root (what salvage copies: symlinks and special files
/// it lists as not copied).
fn count_files(s: &dyn Store) -> u64 {
    let mut stack = vec![store::ROOT_INO];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for e in s.read_dir(dir).unwrap() {
            match e.kind {
                store::FileKind::Dir => stack.push(e.ino),
                store::FileKind::File => files += 1,
                _ => {}
            }
        }
    }
    files
}

fn run(case: &Case, tally: &mut Tally) {
    let cfg = image_config();
    let outcome = std::panic::catch_unwind(|| hostile::exercise(&case.image, &cfg));
    let outcome = match outcome {
        Ok(o) => o,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{}: panic: {msg}", case.label)
        }
    };
    let opened_clean = matches!(&outcome, Outcome::Opened(r) if r.is_clean());
    let repaired = std::panic::catch_unwind(|| repair_and_salvage(case, opened_clean));
    if let Err(p) = repaired {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("{}: repair or salvage: {msg}", case.label)
    }
    match outcome {
        Outcome::Refused(e) => {
            check_error(&case.label, &e);
            tally.refused += 1;
        }
        Outcome::Opened(report) => {
            assert!(
                case.expect != Expect::Refuse,
                "{}: opened, should have been refused",
                case.label
            );
            for p in &report.problems {
                assert!(
                    !p.what.is_empty() && !p.location.is_empty(),
                    "{}: fsck problem without name or location: {p:?}",
                    case.label
                );
            }
            if std::env::var("POOL_CORPUS_SHOW").is_ok() && !report.is_clean() {
                eprintln!("{}: {:?}", case.label, report.problems.first());
            }
            if report.is_clean() {
                assert!(
                    case.expect != Expect::Detect,
                    "{}: corruption served silently (open and fsck both clean)",
                    case.label
                );
                tally.opened_clean += 1;
            } else {
                tally.opened_reported += 1;
            }
        }
    }
}

fn run_all(cases: Vec<Case>) -> Tally {
    let mut tally = Tally::default();
    // Keep the panic hook quiet while panics are caught (a panic still fails the test).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for case in &cases {
            run(case, &mut tally);
        }
    }));
    std::panic::set_hook(hook);
    eprintln!(
        "{} cases: {} refused, {} opened and reported by fsck, {} opened clean",
        cases.len(),
        tally.refused,
        tally.opened_reported,
        tally.opened_clean
    );
    if let Err(p) = result {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("{msg}");
    }
    tally
}

fn case(label: String, image: Vec<u8>, expect: Expect) -> Case {
    Case {
        label,
        image,
        expect,
    }
}

/// The inode number of `path` in an image.
fn ino_of(img: &[u8], path: &str) -> u64 {
    let s = PoolStore::open(Arc::new(DramRegion::from_bytes(img)), &image_config()).unwrap();
    store::resolve(&s, path).unwrap().ino
}

/// (address of the pointer, pbn) of data block `lbn` of a height-1 tree.
fn data_pointer(img: &[u8], geo: &Geometry, ino: u64, lbn: u64) -> (u64, u64) {
    let off = geo.inode(ino);
    assert_eq!(
        word(img, off + 20) as u32,
        1,
        "test files have trees of height 1"
    );
    let index = word(img, off + 24);
    let at = geo.block(index) + lbn * 8;
    (at, word(img, at))
}

#[test]
fn superblock_bits() {
    let mut cases = Vec::new();
    for kind in [ImageKind::Fresh, ImageKind::Uncommitted] {
        let clean = build_image(kind);
        for bit in 0..100 * 8 {
            let mut img = clean.clone();
            img[bit / 8] ^= 1 << (bit % 8);
            cases.push(case(
                format!("{kind:?}: superblock bit {bit}"),
                img.clone(),
                Expect::Refuse,
            ));
            if bit < 96 * 8 {
                mutate::fix_superblock_crc(&mut img);
                // Bytes 88..96 (mode, informative; reserved) may change without harm.
                let expect = if (88..96).contains(&(bit / 8)) {
                    Expect::Survive
                } else {
                    Expect::Refuse
                };
                cases.push(case(
                    format!("{kind:?}: superblock bit {bit}, crc re-sealed"),
                    img,
                    expect,
                ));
            }
        }
    }
    let t = run_all(cases);
    assert!(t.refused > 1500, "refused {}", t.refused);
}

#[test]
fn magic_version_and_truncation() {
    let clean = build_image(ImageKind::Files);
    let geo = geometry();
    let mut cases = Vec::new();
    let mut img = clean.clone();
    img[0] = b'X';
    cases.push(case("wrong magic".into(), img, Expect::Refuse));
    let mut img = clean.clone();
    put(&mut img, 8, &2u32.to_le_bytes());
    cases.push(case("unknown version".into(), img.clone(), Expect::Refuse));
    mutate::fix_superblock_crc(&mut img);
    cases.push(case(
        "unknown version, crc re-sealed".into(),
        img,
        Expect::Refuse,
    ));
    for len in [
        0,
        1,
        50,
        2048,
        4095,
        4096,
        geo.blocks_offset - 1,
        geo.blocks_offset + 4096,
        IMAGE_BYTES / 2,
        IMAGE_BYTES - 4096,
        IMAGE_BYTES - 1,
    ] {
        cases.push(case(
            format!("truncated to {len} bytes"),
            clean[..len as usize].to_vec(),
            Expect::Refuse,
        ));
    }
    let t = run_all(cases);
    assert_eq!(t.refused, 14);
    // Unknown version is named as such.
    let mut img = clean.clone();
    put(&mut img, 8, &7u32.to_le_bytes());
    match PoolStore::open(Arc::new(DramRegion::from_bytes(&img)), &image_config()) {
        Err(Error::UnsupportedVersion { found: 7, .. }) => {}
        other => panic!("unknown version: {:?}", other.err()),
    }
}

/// Every valid entry of both logs: one bit in each of its eight words, torn (seal left as
/// it is) and re-sealed (a hostile body with a valid checksum).
#[test]
fn log_entry_bits() {
    let geo = geometry();
    let mut cases = Vec::new();
    let mut kinds_seen = std::collections::BTreeSet::new();
    for kind in [
        ImageKind::Uncommitted,
        ImageKind::MidCheckpoint,
        ImageKind::FgWalUncommitted,
    ] {
        let clean = build_image(kind);
        let entries = (0..geo.metadata_log_entries)
            .map(|s| geo.meta_entry(s))
            .chain((0..geo.data_log_entries).map(|s| geo.data_entry(s)));
        for (n, entry) in entries.enumerate() {
            if word(&clean, entry + 56) == 0 {
                continue;
            }
            let entry_kind = clean[entry as usize];
            kinds_seen.insert(entry_kind);
            for w in 0..8u64 {
                let bit = (n as u64 * 7 + w * 13) % 64;
                let mut img = clean.clone();
                img[(entry + w * 8 + bit / 8) as usize] ^= 1 << (bit % 8);
                let label =
                    format!("{kind:?}: entry type {entry_kind} at {entry:#x} word {w} bit {bit}");
                cases.push(case(format!("{label}, torn"), img.clone(), Expect::Survive));
                if w < 7 {
                    reseal(&mut img, entry);
                    cases.push(case(format!("{label}, re-sealed"), img, Expect::Survive));
                }
            }
        }
    }
    // Undo (1), commit (2), data (4) and line undo (5) entries were all covered.
    assert!(
        [1u8, 2, 4, 5].iter().all(|k| kinds_seen.contains(k)),
        "entry kinds {kinds_seen:?}"
    );
    run_all(cases);
}

/// Hostile values in the fields of log entries that pass the checksum: addresses and
/// block numbers out of range or into other areas, huge txids and sequences.
#[test]
fn log_entry_fields_resealed() {
    let geo = geometry();
    let mut cases = Vec::new();
    for kind in [ImageKind::Uncommitted, ImageKind::FgWalUncommitted] {
        cases.extend(hostile_fields(&geo, kind));
    }
    assert!(cases.len() > 200);
    run_all(cases);
}

fn hostile_fields(geo: &Geometry, kind: ImageKind) -> Vec<Case> {
    let clean = build_image(kind);
    let hostile_words = [
        0,
        u64::MAX,
        1 << 48,
        geo.block_count,
        geo.meta_log_offset,
        IMAGE_BYTES - 4,
    ];
    let mut cases = Vec::new();
    for slot in (0..geo.metadata_log_entries).chain(10_000..10_000 + geo.data_log_entries) {
        let entry = if slot >= 10_000 {
            geo.data_entry(slot - 10_000)
        } else {
            geo.meta_entry(slot)
        };
        if word(&clean, entry + 56) == 0 {
            continue;
        }
        for w in 1..7u64 {
            for (i, &value) in hostile_words.iter().enumerate() {
                let mut img = clean.clone();
                if clean[entry as usize] == 1 {
                    // Undo entry: 48-bit txid at 4, 48-bit address at 10, size at 1.
                    match w {
                        1 => img[entry as usize + 1] = value as u8,
                        2 => put(&mut img, entry + 4, &value.to_le_bytes()[..6]),
                        _ => put(&mut img, entry + 10, &value.to_le_bytes()[..6]),
                    }
                } else {
                    put(&mut img, entry + w * 8, &value.to_le_bytes());
                }
                reseal(&mut img, entry);
                cases.push(case(
                    format!("{kind:?}: entry at {entry:#x} word {w} := hostile value {i}"),
                    img,
                    Expect::Survive,
                ));
            }
        }
    }
    cases
}

/// FG-WAL line undo entries that pass both checksums (the entry's seal and the crc of the
/// saved lines, both recomputed) but name hostile blocks and lines: recovery must copy
/// lines only between blocks of the block area, and whatever it copies, never panic.
#[test]
fn line_undo_entries_resealed() {
    let geo = geometry();
    let clean = build_image(ImageKind::FgWalUncommitted);
    let lines: Vec<u64> = (0..geo.data_log_entries)
        .map(|s| geo.data_entry(s))
        .filter(|&e| clean[e as usize] == 5 && word(&clean, e + 56) != 0)
        .collect();
    assert!(lines.len() >= 3, "the image has line undo entries");
    let root_block = data_pointer(&clean, &geo, 1, 0).1;
    let f1_index = word(&clean, geo.inode(ino_of(&clean, "/f1")) + 24);
    // (label, word, value, recompute the crc of the saved lines)
    let edits: Vec<(&str, u64, u64, bool)> = vec![
        ("target := the root directory's block", 3, root_block, true),
        ("target := an index block", 3, f1_index, true),
        ("target := its own undo block", 3, u64::MAX, true),
        ("target := block 0", 3, 0, true),
        ("undo := out of range", 4, geo.block_count, false),
        ("undo := the root directory's block", 4, root_block, true),
        ("every line of the block", 5, u64::MAX, true),
        ("lines changed, crc kept", 5, 0b1011, false),
        ("txid := 0", 1, 0, false),
    ];
    let mut cases = Vec::new();
    for (n, &entry) in lines.iter().enumerate() {
        for (what, w, value, recrc) in &edits {
            let mut img = clean.clone();
            let value = if *value == u64::MAX && *w == 3 {
                word(&clean, entry + 32)
            } else {
                *value
            };
            put(&mut img, entry + w * 8, &value.to_le_bytes());
            if *recrc {
                let crc = saved_lines_crc(&img, &geo, entry);
                put(&mut img, entry + 48, &crc.to_le_bytes());
            }
            reseal(&mut img, entry);
            cases.push(case(
                format!("line undo entry {n}: {what}"),
                img,
                Expect::Survive,
            ));
        }
    }
    run_all(cases);
}

/// The crc32c of the lines a line undo entry names, read from its undo block in `img`.
fn saved_lines_crc(img: &[u8], geo: &Geometry, entry: u64) -> u32 {
    let (undo, bitmap) = (word(img, entry + 32), word(img, entry + 40));
    if undo == 0 || undo >= geo.block_count {
        return 0;
    }
    let mut crc = 0;
    for line in (0..64).filter(|l| bitmap & (1 << l) != 0) {
        let at = (geo.block(undo) + line * 64) as usize;
        crc = crc32c::crc32c_append(crc, &img[at..at + 64]);
    }
    crc
}

#[test]
fn inode_fields() {
    let geo = geometry();
    let clean = build_image(ImageKind::Files);
    let f1 = ino_of(&clean, "/f1");
    let f2 = ino_of(&clean, "/f2");
    let d = ino_of(&clean, "/d");
    let e = ino_of(&clean, "/d/e");
    let (_, f2_block) = data_pointer(&clean, &geo, f2, 0);
    let mut cases = Vec::new();
    for (name, ino) in [("/f1", f1), ("/d", d), ("/d/e", e), ("root", 1)] {
        let off = geo.inode(ino);
        let edits: Vec<(&str, u64, Vec<u8>, Expect)> = vec![
            (
                "size past the file limit",
                32,
                (1u64 << 47).to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "size u64::MAX",
                32,
                u64::MAX.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            ("size 0", 32, 0u64.to_le_bytes().to_vec(), Expect::Detect),
            (
                "tree height 5",
                20,
                5u32.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "tree height 0 with a root",
                20,
                0u32.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "tree height 3",
                20,
                3u32.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "root pbn out of range",
                24,
                geo.block_count.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "root pbn u64::MAX",
                24,
                u64::MAX.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "root pbn 0",
                24,
                0u64.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "root is another file's data block",
                24,
                f2_block.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            ("nlink 0", 16, 0u32.to_le_bytes().to_vec(), Expect::Detect),
            ("nlink 7", 16, 7u32.to_le_bytes().to_vec(), Expect::Detect),
            (
                "nlink u32::MAX",
                16,
                u32::MAX.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            ("kind 3", 0, vec![3], Expect::Detect),
            ("kind free", 0, vec![0], Expect::Detect),
            (
                "block count + 1",
                56,
                (word(&clean, off + 56) + 1).to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "block count u64::MAX",
                56,
                u64::MAX.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "parent out of range",
                80,
                999u64.to_le_bytes().to_vec(),
                Expect::Survive,
            ),
        ];
        for (what, field, bytes, mut expect) in edits {
            if name == "/d/e" && field == 32 && what == "size 0" {
                expect = Expect::Detect;
            }
            if ino == 1 && what == "nlink 7" {
                expect = Expect::Detect;
            }
            let mut img = clean.clone();
            put(&mut img, off + field, &bytes);
            cases.push(case(format!("inode {name}: {what}"), img, expect));
        }
        // Wrong kind: a file marked directory and the other way round.
        let mut img = clean.clone();
        img[off as usize] = if clean[off as usize] == 1 { 2 } else { 1 };
        cases.push(case(
            format!("inode {name}: kind swapped"),
            img,
            Expect::Detect,
        ));
    }
    // A directory's parent field naming the wrong directory.
    let mut img = clean.clone();
    put(&mut img, geo.inode(e) + 80, &1u64.to_le_bytes());
    cases.push(case(
        "directory /d/e parent field says root".into(),
        img,
        Expect::Detect,
    ));
    // A file's size one byte longer: valid-looking (reads a zero), nothing to detect.
    let mut img = clean.clone();
    put(
        &mut img,
        geo.inode(f1) + 32,
        &(word(&clean, geo.inode(f1) + 32) + 1).to_le_bytes(),
    );
    cases.push(case("inode /f1: size + 1".into(), img, Expect::Survive));
    let t = run_all(cases);
    assert!(t.refused + t.opened_reported > 60);
}

#[test]
fn block_pointers() {
    let geo = geometry();
    let clean = build_image(ImageKind::Files);
    let f1 = ino_of(&clean, "/f1");
    let f2 = ino_of(&clean, "/f2");
    let f3 = ino_of(&clean, "/f3");
    let (_, f2_block) = data_pointer(&clean, &geo, f2, 0);
    let (f3_ptr1, _) = data_pointer(&clean, &geo, f3, 1);
    let (f1_ptr, f1_block) = data_pointer(&clean, &geo, f1, 0);
    let f1_index = word(&clean, geo.inode(f1) + 24);
    let mut cases = Vec::new();
    let mut edit = |label: &str, at: u64, value: u64, expect: Expect| {
        let mut img = clean.clone();
        put(&mut img, at, &value.to_le_bytes());
        cases.push(case(label.into(), img, expect));
    };
    edit(
        "f1 block 0 := f2 block 0 (cross-linked)",
        f1_ptr,
        f2_block,
        Expect::Detect,
    );
    edit(
        "f3 block 1 := f1 block 0 (cross-linked)",
        f3_ptr1,
        f1_block,
        Expect::Detect,
    );
    edit(
        "f1 block 0 := its own index block",
        f1_ptr,
        f1_index,
        Expect::Detect,
    );
    edit(
        "f1 block 0 out of range",
        f1_ptr,
        geo.block_count,
        Expect::Detect,
    );
    edit("f1 block 0 := u64::MAX", f1_ptr, u64::MAX, Expect::Detect);
    edit("f1 block 0 := hole", f1_ptr, 0, Expect::Detect);
    edit(
        "f1 block 500 beyond size",
        geo.block(f1_index) + 500 * 8,
        3,
        Expect::Detect,
    );
    edit(
        "f1 index block := the root's",
        geo.inode(f1) + 24,
        word(&clean, geo.inode(1) + 24),
        Expect::Detect,
    );
    let t = run_all(cases);
    assert_eq!(t.opened_clean, 0);
}

#[test]
fn directory_entries() {
    let geo = geometry();
    let clean = build_image(ImageKind::Files);
    let (_, root_block) = data_pointer(&clean, &geo, 1, 0);
    let d = ino_of(&clean, "/d");
    let f1 = ino_of(&clean, "/f1");
    let free_ino = (2..geo.inode_count)
        .find(|&i| clean[geo.inode(i) as usize] == 0)
        .unwrap();
    let base = geo.block(root_block);
    let used: Vec<u64> = (0..15)
        .map(|i| base + i * 272)
        .filter(|&at| word(&clean, at) != 0)
        .collect();
    assert!(used.len() >= 5, "root holds d, f0..f3");
    let mut cases = Vec::new();
    for (n, &at) in used.iter().enumerate() {
        let edits: Vec<(&str, u64, Vec<u8>, Expect)> = vec![
            ("name length 0", 9, vec![0], Expect::Detect),
            ("name length 255", 9, vec![255], Expect::Survive),
            (
                "ino out of range",
                0,
                geo.inode_count.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "ino u64::MAX",
                0,
                u64::MAX.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "ino of a free inode",
                0,
                free_ino.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "ino of the root (cycle)",
                0,
                1u64.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "ino of /d (second link to a directory)",
                0,
                d.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            (
                "ino of /f1 (link not counted)",
                0,
                f1.to_le_bytes().to_vec(),
                Expect::Detect,
            ),
            ("kind 7", 8, vec![7], Expect::Detect),
            (
                "kind flipped",
                8,
                vec![clean[at as usize + 8] ^ 3],
                Expect::Detect,
            ),
            ("name with a slash", 10, vec![b'/'], Expect::Detect),
            ("name with a NUL", 10, vec![0], Expect::Detect),
        ];
        for (what, field, bytes, expect) in edits {
            let same = field == 0
                && word(&clean, at)
                    == u64::from_le_bytes(bytes.clone().try_into().unwrap_or([0; 8]));
            let mut img = clean.clone();
            put(&mut img, at + field, &bytes);
            let expect = if same { Expect::Survive } else { expect };
            cases.push(case(format!("root entry {n}: {what}"), img, expect));
        }
    }
    // Duplicate names: entry 1 gets entry 0's name.
    let mut img = clean.clone();
    let name0 = clean[used[0] as usize + 9..used[0] as usize + 265].to_vec();
    put(&mut img, used[1] + 9, &name0);
    cases.push(case(
        "root: two entries with one name".into(),
        img,
        Expect::Detect,
    ));
    // A directory containing itself, named from /d.
    let (_, d_block) = data_pointer(&clean, &geo, d, 0);
    let mut img = clean.clone();
    let first = (0..15)
        .map(|i| geo.block(d_block) + i * 272)
        .find(|&a| word(&clean, a) != 0)
        .unwrap();
    put(&mut img, first, &d.to_le_bytes());
    img[first as usize + 8] = 2;
    cases.push(case("/d names itself".into(), img, Expect::Detect));
    let t = run_all(cases);
    assert!(t.refused + t.opened_reported > 40);
}

/// The structure-aware mutations the fuzz target uses, from a fixed list of op codes:
/// every area, every edit kind, on every image.
#[test]
fn structured_mutations() {
    let geo = geometry();
    let mut cases = Vec::new();
    for kind in images::IMAGE_KINDS {
        let clean = build_image(kind);
        for n in 0..24u64 {
            let mut ops = Vec::new();
            let op = (n % 6) as u8 | (((n / 6) % 4) as u8) << 3;
            ops.push(op);
            ops.extend_from_slice(&(n.wrapping_mul(2_654_435_761) as u32).to_le_bytes());
            ops.extend_from_slice(
                &n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    .wrapping_add(5)
                    .to_le_bytes(),
            );
            let mut img = clean.clone();
            mutate::apply(&mut img, &geo, &ops);
            cases.push(case(
                format!("{kind:?}: mutation {n}"),
                img,
                Expect::Survive,
            ));
        }
    }
    run_all(cases);
}

/// fsck on a 1 GiB pool with a few hundred files: how long it takes (ignored: allocates
/// 1 GiB). `cargo test -p atomfs-pool --test corrupt_corpus -- --ignored --nocapture`.
#[test]
#[ignore]
fn fsck_of_a_1gib_pool() {
    let cfg = pool::PoolConfig::default();
    let s = PoolStore::format(Arc::new(DramRegion::new(1 << 30)), &cfg).unwrap();
    for i in 0..300u64 {
        let data = images::bytes_of(i, 64 << 10);
        store::path::write_file(&s, format!("/f{i}"), &data, None).unwrap();
    }
    let started = std::time::Instant::now();
    let report = s.fsck().unwrap();
    let took = started.elapsed();
    eprintln!("fsck of a 1 GiB pool: {took:?}, {:?}", report.checked);
    assert!(report.is_clean(), "{:?}", report.problems);
}
