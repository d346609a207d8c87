//! The registry's behaviour: create, probe and open every engine by path; bad input refused
//! with nothing created or changed; the lock.

use super::*;
use std::os::unix::fs::PermissionsExt;

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("atomfs-registry-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn small_pool() -> Options {
    Options::parse("size=16M,checkpoint_threads=0").expect("options")
}

fn write_file(store: &dyn Store, name: &[u8], data: &[u8]) {
    let m = store
        .create(store::ROOT_INO, name, 0o644, None)
        .expect("create");
    let fh = store
        .open(
            m.ino,
            store::OpenFlags {
                read: true,
                write: true,
                ..Default::default()
            },
        )
        .expect("open");
    store.write(fh, 0, data).expect("write");
    store.release(fh).expect("release");
}

fn read_file(store: &dyn Store, name: &[u8]) -> Vec<u8> {
    let m = store.lookup(store::ROOT_INO, name).expect("lookup");
    let fh = store
        .open(
            m.ino,
            store::OpenFlags {
                read: true,
                ..Default::default()
            },
        )
        .expect("open");
    let mut buf = vec![0u8; m.size as usize];
    let n = store.read(fh, 0, &mut buf).expect("read");
    buf.truncate(n);
    store.release(fh).expect("release");
    buf
}

#[test]
fn every_engine_creates_probes_and_reopens_by_path() {
    let s = Scratch::new("roundtrip");
    for engine in ENGINES {
        let pool = s.path(&format!("{}.pool", engine.name()));
        let mut options = small_pool();
        if engine.name() == "pool" {
            options.set("mode", "fcfs");
        } else {
            options = Options::new().with("size", "16M");
            let home = s.path(&format!("{}-home", engine.name()));
            std::fs::create_dir(&home).expect("home");
            options.set("home", home.display().to_string());
            if engine.name() == "remap" {
                // The scratch directory is on tmpfs, which cannot remap (no reflink).
                options.set("checkpoint", "copy");
            }
        }
        let opened = create(&pool, engine.name(), &options).expect("create");
        assert_eq!(opened.engine.name(), engine.name());
        write_file(&*opened.store, b"a", b"hello");
        opened.unmount().expect("unmount");
        let mode = std::fs::metadata(&pool).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}: pool file mode", engine.name());
        assert_eq!(probe(&pool).expect("probe").name(), engine.name());
        let reopened = open(&pool, &Options::new()).expect("open by path alone");
        assert_eq!(read_file(&*reopened.store, b"a"), b"hello");
        reopened.unmount().expect("unmount");
    }
}

#[test]
fn a_second_open_is_busy_until_the_first_unmounts() {
    let s = Scratch::new("busy");
    let pool = s.path("p.pool");
    let first = create(&pool, "pool", &small_pool()).expect("create");
    let second = open(&pool, &Options::new());
    match second {
        Err(Error::Busy(m)) => assert!(m.contains("in use by process"), "{m}"),
        other => panic!("second open: {other:?}"),
    }
    let replaced = replace(&pool, "pool", &small_pool());
    assert!(matches!(replaced, Err(Error::Busy(_))), "{replaced:?}");
    write_file(&*first.store, b"kept", b"data");
    first.unmount().expect("unmount");
    let again = open(&pool, &Options::new()).expect("open after unmount");
    assert_eq!(read_file(&*again.store, b"kept"), b"data");
    again.unmount().expect("unmount");
}

#[test]
fn replace_formats_a_store_not_in_use() {
    let s = Scratch::new("replace");
    let pool = s.path("p.pool");
    let first = create(&pool, "pool", &small_pool()).expect("create");
    write_file(&*first.store, b"old", b"x");
    first.unmount().expect("unmount");
    let new = replace(&pool, "pool", &small_pool()).expect("replace");
    assert!(matches!(
        new.store.lookup(store::ROOT_INO, b"old"),
        Err(Error::NotFound(_))
    ));
    new.unmount().expect("unmount");
}

#[test]
fn bad_input_is_one_clear_error_and_creates_nothing() {
    let s = Scratch::new("bad");
    let pool = s.path("p.pool");
    let cases: Vec<(&str, Options, &str)> = vec![
        (
            "nosuch",
            Options::new(),
            "unknown engine \"nosuch\" (known: pool, mmio",
        ),
        (
            "pool",
            Options::new().with("colour", "red"),
            "unknown option \"colour\"",
        ),
        ("pool", Options::new().with("size", "lots"), "option size"),
        (
            "pool",
            Options::new().with("home", "/tmp"),
            "unknown option \"home\" for engine pool",
        ),
        ("mmio", Options::new(), "needs a home directory"),
        (
            "mmio",
            Options::new().with("home", s.path("missing/deeper").display().to_string()),
            "missing/deeper",
        ),
    ];
    for (engine, options, expected) in cases {
        let e = create(&pool, engine, &options).expect_err("bad input accepted");
        assert!(
            e.to_string().contains(expected),
            "{engine} {options:?}: {e}"
        );
        assert!(!pool.exists(), "{engine} {options:?} left a pool file");
    }
    // A file no engine recognises, and a missing one.
    std::fs::write(&pool, vec![7u8; 8192]).expect("write");
    let e = open(&pool, &Options::new()).expect_err("garbage opened");
    assert!(
        e.to_string().contains("no engine recognised")
            && e.to_string().contains("tried: pool, mmio"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&pool).expect("read"),
        vec![7u8; 8192],
        "garbage changed"
    );
    let e = open(&s.path("absent"), &Options::new()).expect_err("missing opened");
    assert!(matches!(e, Error::Io { .. }), "{e}");
    // An existing store is never overwritten by create.
    let e = create(&pool, "pool", &small_pool()).expect_err("overwrote a file");
    assert!(matches!(e, Error::Exists(_)), "{e}");
}

#[test]
fn an_mmio_store_whose_home_moved_names_both_paths() {
    let s = Scratch::new("moved");
    let pool = s.path("m.pool");
    let home = s.path("home");
    std::fs::create_dir(&home).expect("home");
    let options = Options::new()
        .with("size", "16M")
        .with("home", home.display().to_string());
    create(&pool, "mmio", &options)
        .expect("create")
        .unmount()
        .expect("unmount");
    std::fs::rename(&home, s.path("elsewhere")).expect("move");
    let e = open(&pool, &Options::new()).expect_err("opened without its home");
    let text = e.to_string();
    assert!(
        text.contains(&home.display().to_string()) && text.contains(&pool.display().to_string()),
        "{text}"
    );
    // Another store's directory in its place: the marker does not match.
    let other_pool = s.path("other.pool");
    std::fs::create_dir(&home).expect("home again");
    create(&other_pool, "mmio", &options)
        .expect("create other")
        .unmount()
        .expect("unmount");
    let e = open(&pool, &Options::new()).expect_err("opened another store's home");
    assert!(
        matches!(e, Error::CrossStore(_)) && e.to_string().contains(&pool.display().to_string()),
        "{e}"
    );
}

#[test]
fn a_home_directory_in_use_is_busy() {
    let s = Scratch::new("homebusy");
    let home = s.path("home");
    std::fs::create_dir(&home).expect("home");
    let options = Options::new()
        .with("size", "16M")
        .with("home", home.display().to_string());
    let first = create(&s.path("a.pool"), "mmio", &options).expect("create");
    let e = create(&s.path("b.pool"), "mmio", &options).expect_err("two stores, one home");
    assert!(matches!(e, Error::Busy(_)), "{e}");
    assert!(!s.path("b.pool").exists());
    first.unmount().expect("unmount");
}

#[test]
fn every_option_has_help_and_a_valid_default() {
    for engine in ENGINES {
        for spec in engine.options() {
            assert!(!spec.help.is_empty(), "{}.{}", engine.name(), spec.key);
            if !spec.default.is_empty() {
                let one = Options::new().with(spec.key, spec.default);
                one.validate(engine.name(), engine.options())
                    .unwrap_or_else(|e| panic!("{}.{} default: {e}", engine.name(), spec.key));
            }
        }
    }
}

#[test]
fn a_symlink_at_the_pool_path_is_not_followed() {
    let s = Scratch::new("symlink");
    let pool = s.path("real.pool");
    create(&pool, "pool", &small_pool())
        .expect("create")
        .unmount()
        .expect("unmount");
    let link = s.path("link.pool");
    std::os::unix::fs::symlink(&pool, &link).expect("symlink");
    let e = open(&link, &Options::new()).expect_err("followed a symlink");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    let e = replace(&link, "pool", &small_pool()).expect_err("replaced through a symlink");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    let e = create(&link, "pool", &small_pool()).expect_err("created through a symlink");
    assert!(matches!(e, Error::Exists(_)), "{e}");
}

#[test]
fn a_store_of_another_user_is_refused() {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var("ATOMFS_REQUIRE_ALL").is_err(),
            "needs root to give a file to another user"
        );
        eprintln!("SKIP: needs root to give a file to another user");
        return;
    }
    let s = Scratch::new("foreign");
    let pool = s.path("p.pool");
    create(&pool, "pool", &small_pool())
        .expect("create")
        .unmount()
        .expect("unmount");
    std::os::unix::fs::chown(&pool, Some(65534), Some(65534)).expect("chown");
    let e = open(&pool, &Options::new()).expect_err("opened another user's store");
    assert!(
        matches!(e, Error::PermissionDenied(_)) && e.to_string().contains("uid 65534"),
        "{e}"
    );
    let allowed = Access {
        allow_foreign_owner: true,
        ..Access::default()
    };
    assert!(allowed
        .check_owner(&pool, &std::fs::metadata(&pool).expect("stat"))
        .is_ok());
}

#[test]
fn a_missing_home_directory_is_created_owner_only() {
    let s = Scratch::new("newhome");
    let home = s.path("fresh-home");
    let options = Options::new()
        .with("size", "16M")
        .with("home", home.display().to_string());
    create(&s.path("m.pool"), "mmio", &options)
        .expect("create")
        .unmount()
        .expect("unmount");
    let mode = std::fs::metadata(&home).expect("home").permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn remap_on_a_home_without_reflink_names_the_file_system_and_the_flag() {
    let s = Scratch::new("noreflink");
    let home = s.path("home");
    std::fs::create_dir(&home).expect("home");
    let pool = s.path("r.pool");
    let options = Options::new().with("home", home.display().to_string());
    let e = create(&pool, "remap", &options).expect_err("tmpfs has no reflink");
    let text = e.to_string();
    assert!(
        text.contains("tmpfs") && text.contains("checkpoint=copy") && text.contains("reflink"),
        "{text}"
    );
    assert!(!pool.exists(), "a refused create left a pool file");
    let opened = create(&pool, "remap", &options.with("checkpoint", "copy"))
        .expect("copy-checkpoint accepted");
    assert_eq!(opened.store.engine_name(), "remap (copy-checkpoint)");
    opened.unmount().expect("unmount");
}
