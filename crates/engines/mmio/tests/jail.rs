//! A crafted log pool cannot make recovery touch anything outside the store directory.
//!
//! Recovery acts on paths it reads back from the pool: the intent records of unfinished
//! transactions (an uncommitted `Created` intent is undone by removing its path) and the
//! recorded home directory. Each test here writes a store, crafts its pool to name a file
//! in a sibling scratch directory (`../x`, an absolute path, an over-long name, a NUL byte,
//! a symlink planted inside the store directory pointing out), opens it, and checks that
//! the open fails with a clear error and that the outside directory is byte for byte what
//! it was.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use mmio::log::intent::{Intent, IntentRecord, INTENT_LEN};
use mmio::log::layout::{self, Superblock};
use mmio::{MmioConfig, MmioStore};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use store::{Error, Store};

/// A store in `<scratch>/files` with its pool, and a sibling scratch directory `outside`
/// holding one file, `secret`.
struct Setup {
    scratch: PathBuf,
    outside: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let scratch = shm_dir(tag);
        let outside = shm_dir(&format!("{tag}-outside"));
        std::fs::write(outside.join("secret"), b"outside the root").unwrap();
        let s =
            MmioStore::create(&scratch.join("files"), &scratch.join("log.pool"), &cfg()).unwrap();
        let fh = open_rw(&s, "/kept", false);
        s.write(fh, 0, b"inside").unwrap();
        s.release(fh).unwrap();
        s.unmount().unwrap();
        Setup { scratch, outside }
    }

    fn files(&self) -> PathBuf {
        self.scratch.join("files")
    }

    fn pool(&self) -> PathBuf {
        self.scratch.join("log.pool")
    }

    /// Every entry below `outside` with its content (directories as `None`).
    fn outside_tree(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut stack = vec![self.outside.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                if meta.is_dir() {
                    stack.push(p.clone());
                    out.push((p, None));
                } else {
                    out.push((p.clone(), Some(std::fs::read(&p).unwrap())));
                }
            }
        }
        out.sort();
        out
    }

    /// Write an uncommitted intent record into intent slot 0 of the pool.
    fn plant_intent(&self, intent: Intent) {
        let rec = IntentRecord {
            txid: 7,
            seq: 1,
            intent,
        };
        let bytes = rec.encode().expect("paths fit the record");
        assert_eq!(bytes.len() as u64, INTENT_LEN);
        let at = superblock(&self.pool()).intent_at(0);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(self.pool())
            .unwrap();
        file.write_all_at(&bytes, at).unwrap();
        file.sync_all().unwrap();
    }

    fn open(&self) -> store::Result<mmio::HostMmioStore> {
        MmioStore::open(&self.files(), &self.pool(), &cfg())
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        cleanup(&self.scratch);
        cleanup(&self.outside);
    }
}

fn cfg() -> MmioConfig {
    MmioConfig::test_min()
}

fn superblock(pool: &Path) -> Superblock {
    let bytes = std::fs::read(pool).unwrap();
    let mut head = [0u8; 128];
    head.copy_from_slice(&bytes[..128]);
    Superblock::decode(&head, bytes.len() as u64).unwrap()
}

fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// Plant `intent`, open: the open fails with an error containing `says`, and neither the
/// outside directory nor the store's own file changed.
fn refused(tag: &str, intent: impl Fn(&Setup) -> Intent, says: &str) {
    let setup = Setup::new(tag);
    let before = setup.outside_tree();
    setup.plant_intent(intent(&setup));
    let err = setup.open().err().expect("a crafted pool must not open");
    let msg = err.to_string();
    assert!(matches!(err, Error::Corrupt { .. }), "{tag}: {msg}");
    assert!(
        msg.contains("intent record names a path outside the store directory"),
        "{tag}: {msg}"
    );
    assert!(msg.contains(says), "{tag}: {msg}");
    assert_eq!(setup.outside_tree(), before, "{tag}: outside changed");
    assert_eq!(
        std::fs::read(setup.outside.join("secret")).unwrap(),
        b"outside the root"
    );
    assert_eq!(
        std::fs::read(setup.files().join("kept")).unwrap(),
        b"inside"
    );
}

fn outside_name(s: &Setup) -> Vec<u8> {
    s.outside.file_name().unwrap().as_bytes().to_vec()
}

#[test]
fn intent_naming_a_parent_path_is_refused() {
    refused(
        "jail-dotdot",
        |s| Intent::Created {
            a: path_of(&[b"../../".as_slice(), &outside_name(s), b"/secret"].concat()),
        },
        "'..' component",
    );
}

#[test]
fn intent_naming_an_absolute_path_is_refused() {
    refused(
        "jail-abs",
        |s| Intent::Created {
            a: s.outside.join("secret"),
        },
        "absolute path",
    );
}

#[test]
fn intent_with_an_over_long_name_or_a_nul_byte_is_refused() {
    refused(
        "jail-long",
        |_| Intent::Created {
            a: path_of(&[b'n'; 300]),
        },
        "component longer than 255 bytes",
    );
    refused(
        "jail-nul",
        |_| Intent::Renamed {
            a: path_of(b"kept"),
            b: path_of(b"kept\0x"),
        },
        "contains a NUL byte",
    );
}

#[test]
fn intent_through_a_symlink_planted_in_the_store_directory_is_refused() {
    for (tag, intent) in [
        (
            "jail-link-create",
            Intent::Created {
                a: path_of(b"link/secret"),
            },
        ),
        (
            "jail-link-rename",
            Intent::Renamed {
                a: path_of(b"gone"),
                b: path_of(b"link/secret"),
            },
        ),
        (
            "jail-link-remove",
            Intent::Removed {
                a: path_of(b"link/secret"),
                b: path_of(b"kept"),
            },
        ),
    ] {
        let setup = Setup::new(tag);
        std::os::unix::fs::symlink(&setup.outside, setup.files().join("link")).unwrap();
        let before = setup.outside_tree();
        setup.plant_intent(intent);
        let err = setup
            .open()
            .err()
            .unwrap_or_else(|| panic!("{tag}: a crafted pool opened"));
        assert!(matches!(err, Error::Corrupt { .. }), "{tag}: {err}");
        assert!(
            err.to_string().contains("passes through the symlink link"),
            "{tag}: {err}"
        );
        assert_eq!(setup.outside_tree(), before, "{tag}: outside changed");
        assert_eq!(
            std::fs::read(setup.files().join("kept")).unwrap(),
            b"inside"
        );
    }
}

#[test]
fn an_intent_naming_a_symlink_itself_acts_on_the_link_never_its_target() {
    // The engine makes symlinks: an undone create of one removes the link, not what it names.
    let setup = Setup::new("jail-link-itself");
    std::os::unix::fs::symlink(&setup.outside, setup.files().join("link")).unwrap();
    let before = setup.outside_tree();
    setup.plant_intent(Intent::Created {
        a: path_of(b"link"),
    });
    let s = setup.open().unwrap();
    assert!(std::fs::symlink_metadata(setup.files().join("link")).is_err());
    s.unmount().unwrap();
    assert_eq!(setup.outside_tree(), before, "outside changed");
    assert_eq!(
        std::fs::read(setup.files().join("kept")).unwrap(),
        b"inside"
    );
}

#[test]
fn store_calls_never_follow_a_symlink_out_of_the_store_directory() {
    let setup = Setup::new("jail-link-api");
    std::os::unix::fs::symlink(&setup.outside, setup.files().join("link")).unwrap();
    let before = setup.outside_tree();
    let s = setup.open().unwrap();
    assert!(store::path::read_file(&s, "/link/secret").is_err());
    assert!(store::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&s, "/link/new", None)
        .is_err());
    let unlinked = store::path::resolve_parent(&s, b"/link/secret")
        .and_then(|(parent, name)| s.unlink(parent, &name, None));
    assert!(unlinked.is_err());
    s.unmount().unwrap();
    assert_eq!(setup.outside_tree(), before);
}

/// Write `home` as the pool's recorded home directory.
fn plant_home(pool: &Path, home: &[u8]) {
    let record = layout::encode_home(home).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(pool).unwrap();
    file.write_all_at(&record, layout::HOME_RECORD_OFF).unwrap();
    file.sync_all().unwrap();
}

#[test]
fn a_recorded_home_outside_the_store_is_refused_untouched() {
    let setup = Setup::new("jail-home");
    let before = setup.outside_tree();
    // Another directory, named plainly: the marker check refuses it before anything is
    // created in it.
    plant_home(&setup.pool(), setup.outside.as_os_str().as_bytes());
    let err = MmioStore::open_recorded(&setup.pool(), &cfg())
        .err()
        .unwrap();
    assert!(matches!(err, Error::CrossStore(_)), "{err}");
    // The same directory through `..` (or a relative path): refused as a crafted record.
    let dotdot = [
        setup.files().as_os_str().as_bytes(),
        b"/../../",
        &outside_name(&setup),
    ]
    .concat();
    for home in [dotdot.as_slice(), b"relative/dir".as_slice()] {
        plant_home(&setup.pool(), home);
        let err = MmioStore::open_recorded(&setup.pool(), &cfg())
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("not an absolute canonical path"),
            "{err}"
        );
    }
    assert_eq!(setup.outside_tree(), before);
}
