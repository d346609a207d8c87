//! Home files changed behind the store's back are refused at open with a Corrupt error
//! naming the file, and never overwritten: deleted, shrunk, replaced, and (after a clean
//! close) written in place; fsck of an open store reports a deleted one. A store stopped
//! uncleanly, or closed and reopened with nothing changed, opens. Real files in a scratch
//! directory under /dev/shm (or /tmp).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use journal::{HostJournalStore, JournalConfig, StoreConfig};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use store::path::{read_file, write_file};
use store::{Error, Store, ROOT_INO};

fn scratch(tag: &str) -> PathBuf {
    let root = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let d = PathBuf::from(format!(
        "{root}/atomfs-journal-changed-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("home")).unwrap();
    d
}

fn config() -> StoreConfig {
    StoreConfig {
        journal: JournalConfig {
            journal_blocks: 256,
            checkpoint_period: None,
            ..JournalConfig::default()
        },
        ..StoreConfig::default()
    }
}

/// A store with `/f` (20,000 bytes) and `/g`; closed cleanly when `clean`, else dropped.
/// Returns the scratch directory and the home file of `/f`.
fn store(tag: &str, clean: bool) -> (PathBuf, PathBuf) {
    let d = scratch(tag);
    let s = HostJournalStore::create(&d.join("home"), &d.join("pm"), &config()).unwrap();
    write_file(&s, "/f", &[7u8; 20_000], None).unwrap();
    write_file(&s, "/g", b"other", None).unwrap();
    let ino = s.lookup(ROOT_INO, b"f").unwrap().ino;
    if clean {
        s.unmount().unwrap();
    }
    drop(s);
    let file = d.join("home").join(format!("{ino}.data"));
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 20_000);
    (d, file)
}

fn open(d: &Path) -> store::Result<HostJournalStore> {
    HostJournalStore::open(&d.join("home"), &d.join("pm"), &config())
}

/// Open must fail with Corrupt naming `file` and saying `what`.
fn refused(d: &Path, file: &Path, what: &str) {
    match open(d) {
        Err(Error::Corrupt { what: m, .. }) => {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            assert!(m.contains(&name) && m.contains(what), "{m}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a home file {what} behind the store's back was accepted"),
    }
}

#[test]
fn unchanged_home_files_open_after_clean_and_unclean_stops() {
    for clean in [true, false] {
        let (d, _) = store(&format!("unchanged-{clean}"), clean);
        let s = open(&d).unwrap();
        assert_eq!(read_file(&s, "/f").unwrap(), vec![7u8; 20_000]);
        s.unmount().unwrap();
        drop(s);
        let s = open(&d).unwrap();
        assert!(s.fsck().unwrap().is_clean());
        drop(s);
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn a_deleted_home_file_is_refused_and_not_recreated() {
    for clean in [true, false] {
        let (d, file) = store(&format!("deleted-{clean}"), clean);
        std::fs::remove_file(&file).unwrap();
        refused(&d, &file, "missing");
        assert!(!file.exists(), "the store recreated the deleted home file");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn a_shrunk_home_file_is_refused_and_left_alone() {
    for clean in [true, false] {
        let (d, file) = store(&format!("shrunk-{clean}"), clean);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(4096)
            .unwrap();
        refused(&d, &file, "shrunk");
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 4096);
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn a_replaced_home_file_is_refused() {
    for clean in [true, false] {
        let (d, file) = store(&format!("replaced-{clean}"), clean);
        let copy = d.join("copy");
        std::fs::copy(&file, &copy).unwrap();
        std::fs::rename(&copy, &file).unwrap();
        refused(&d, &file, "replaced");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn a_home_file_written_after_a_clean_close_is_refused() {
    let (d, file) = store("written", true);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all_at(b"X", 100).unwrap();
    drop(f);
    refused(&d, &file, "changed");
    let mut byte = [0u8; 1];
    std::fs::File::open(&file)
        .unwrap()
        .read_exact_at(&mut byte, 100)
        .unwrap();
    assert_eq!(&byte, b"X", "the store overwrote the changed home file");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn fsck_reports_a_home_file_deleted_while_open() {
    let (d, file) = store("fsck", true);
    let s = open(&d).unwrap();
    assert!(s.fsck().unwrap().is_clean());
    std::fs::remove_file(&file).unwrap();
    let report = s.fsck().unwrap();
    assert!(!report.is_clean(), "fsck missed a deleted home file");
    let text = format!("{report:?}");
    assert!(text.contains("missing"), "{text}");
    drop(s);
    std::fs::remove_dir_all(&d).unwrap();
}
