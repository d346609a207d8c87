//! The home directory on real files: recorded in the PM journal file at create, found again
//! by `open_recorded`; a missing home directory is a clear NotFound naming both paths; a PM
//! journal file that is not a journal is BadMagic. Scratch directories only (/dev/shm or /tmp).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use journal::{recorded_home, HostJournalStore, JournalConfig, StoreConfig};
use std::path::PathBuf;
use store::{path::read_file, path::write_file, Error, Store};

fn scratch(tag: &str) -> PathBuf {
    let root = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let d = PathBuf::from(format!(
        "{root}/atomfs-journal-home-{tag}-{}",
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

#[test]
fn the_home_directory_is_recorded_and_required() {
    let d = scratch("recorded");
    let (home, pm) = (d.join("home"), d.join("journal.pm"));
    let s = HostJournalStore::create(&home, &pm, &config()).unwrap();
    write_file(&s, "/f", b"kept", None).unwrap();
    s.unmount().unwrap();
    drop(s);
    assert_eq!(
        recorded_home(&pm).unwrap(),
        Some(home.canonicalize().unwrap())
    );
    let s = HostJournalStore::open_recorded(&pm, &config()).unwrap();
    assert_eq!(read_file(&s, "/f").unwrap(), b"kept");
    s.unmount().unwrap();
    drop(s);
    std::fs::rename(&home, d.join("moved")).unwrap();
    match HostJournalStore::open_recorded(&pm, &config()) {
        Err(Error::NotFound(m)) => {
            assert!(
                m.contains(&home.display().to_string()) && m.contains(&pm.display().to_string()),
                "{m}"
            )
        }
        Err(e) => panic!("open without the home directory: {e}"),
        Ok(_) => panic!("opened without its home directory"),
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_file_that_is_not_a_journal_is_refused() {
    let d = scratch("notjournal");
    let pm = d.join("other.pm");
    std::fs::write(&pm, vec![7u8; 1 << 20]).unwrap();
    assert!(matches!(recorded_home(&pm), Err(Error::BadMagic(_))));
    assert!(matches!(
        HostJournalStore::open(&d.join("home"), &pm, &config()),
        Err(Error::BadMagic(_))
    ));
    let _ = std::fs::remove_dir_all(&d);
}
