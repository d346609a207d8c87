//! The real implementation's jail and root checks: no path a caller passes — absolute,
//! with `..`, over-long, with a NUL byte, or through a symlink inside the store directory
//! pointing outside — is acted on, and nothing outside the directory is touched. Run with
//! both resolvers (openat2 and the component walk).

mod common;

use common::TempDir;
use hostfs::real::Resolver;
use hostfs::{HostFs, HostFsError, OpenOptions, RealHostFs};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A store directory `root` beside a directory `outside` holding `secret` (content "secret"),
/// with symlinks inside the root pointing at both.
fn setup() -> (TempDir, std::path::PathBuf, std::path::PathBuf) {
    let base = TempDir::new("jail");
    let root = base.path().join("root");
    let outside = base.path().join("outside");
    std::fs::create_dir_all(&root).expect("root");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret"), b"secret").expect("secret");
    std::os::unix::fs::symlink(&outside, root.join("escape")).expect("dir symlink");
    std::os::unix::fs::symlink(outside.join("secret"), root.join("secret_link"))
        .expect("file symlink");
    std::os::unix::fs::symlink("../outside", root.join("relative_escape")).expect("rel symlink");
    (base, root, outside)
}

fn outside_untouched(outside: &Path) {
    assert_eq!(
        std::fs::read(outside.join("secret")).expect("secret"),
        b"secret"
    );
    let names: Vec<_> = std::fs::read_dir(outside)
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("secret")],
        "nothing created outside"
    );
}

fn refused<T>(result: Result<T, HostFsError>, what: &str) -> HostFsError {
    match result {
        Ok(_) => panic!("{what}: accepted"),
        Err(e) => e,
    }
}

fn check_resolver(resolver: Resolver) {
    let (_base, root, outside) = setup();
    let fs = RealHostFs::open_with_resolver(&root, resolver).expect("open root");
    let rw = OpenOptions::create();
    let long = "x".repeat(5000);
    let nul = OsStr::from_bytes(b"a\0b");
    for bad in [
        "../outside/secret",
        "/etc/passwd",
        long.as_str(),
        "a/../../x",
        "./a",
        "",
    ] {
        let e = refused(fs.open(Path::new(bad), &rw), bad);
        assert!(matches!(e, HostFsError::InvalidPath { .. }), "{bad}: {e}");
    }
    refused(fs.open(Path::new(nul), &rw), "NUL");
    let through = [
        "escape/secret",
        "secret_link",
        "relative_escape/secret",
        "escape/new_file",
        "relative_escape/new_file",
    ];
    for path in through {
        let e = refused(fs.open(Path::new(path), &rw), path);
        assert!(
            matches!(e.errno(), libc::ELOOP | libc::EXDEV | libc::ENOTDIR),
            "{path}: {e}"
        );
    }
    refused(
        fs.mkdir(Path::new("escape/d"), 0o755),
        "mkdir through symlink",
    );
    refused(
        fs.unlink(Path::new("escape/secret")),
        "unlink through symlink",
    );
    refused(
        fs.rename(Path::new("escape/secret"), Path::new("stolen")),
        "rename from outside",
    );
    refused(
        fs.link(Path::new("escape/secret"), Path::new("stolen")),
        "link from outside",
    );
    refused(fs.read_dir(Path::new("escape")), "readdir through symlink");
    refused(
        fs.set_perm(Path::new("secret_link"), 0o777),
        "chmod through symlink",
    );
    refused(
        fs.set_times(Path::new("secret_link"), Some(0), Some(0)),
        "utimens through symlink",
    );
    refused(fs.sync_dir(Path::new("escape")), "fsync through symlink");
    refused(fs.stat(Path::new("escape/secret")), "stat through symlink");
    // The symlink itself is an entry of the root: it can be described and removed.
    assert_eq!(
        fs.stat(Path::new("secret_link")).expect("lstat").kind,
        hostfs::FileKind::Symlink
    );
    fs.unlink(Path::new("secret_link"))
        .expect("unlink the link itself");
    outside_untouched(&outside);
    assert!(std::fs::metadata(root.join("stolen")).is_err());
}

#[test]
fn no_path_leaves_the_root_with_openat2() {
    let (_base, root, _) = setup();
    let fs = RealHostFs::open(&root).expect("open");
    if fs.resolver() != Resolver::Openat2 {
        return common::skip("the kernel has no openat2");
    }
    check_resolver(Resolver::Openat2);
}

#[test]
fn no_path_leaves_the_root_with_the_component_walk() {
    check_resolver(Resolver::Walk);
}

#[test]
fn unusable_roots_are_named_with_their_reason() {
    let base = TempDir::new("roots");
    let missing = base.path().join("missing");
    let e = RealHostFs::open(&missing).err().expect("missing root");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: unusable store directory: does not exist",
            missing.display()
        )
    );
    let file = base.path().join("file");
    std::fs::write(&file, b"x").expect("file");
    let e = RealHostFs::open(&file).err().expect("file root");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: unusable store directory: not a directory",
            file.display()
        )
    );
    let ro = base.path().join("ro");
    std::fs::create_dir(&ro).expect("ro");
    let Some(_guard) = make_read_only(&ro) else {
        return common::skip("cannot make a directory unwritable (root without mount rights)");
    };
    let e = RealHostFs::open(&ro).err().expect("read-only root");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "{}: unusable store directory: not writable",
            ro.display()
        )),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
}

/// Unmounts a read-only mount (if one was made) on every path out of the test.
struct ReadOnly(Option<std::path::PathBuf>);

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::process::Command::new("umount").arg(dir).output();
        }
    }
}

/// Make `dir` unwritable: a read-only tmpfs over it as root (permission bits do not stop
/// root), else mode 0555.
fn make_read_only(dir: &Path) -> Option<ReadOnly> {
    if common::is_root() {
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        mounted.then(|| ReadOnly(Some(dir.to_path_buf())))
    } else {
        use std::os::unix::fs::PermissionsExt;
        let set = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555));
        set.is_ok().then_some(ReadOnly(None))
    }
}
