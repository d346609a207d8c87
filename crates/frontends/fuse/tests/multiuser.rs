//! A mount seen by a second, unprivileged user: the kernel enforces the stored owners and
//! modes (`default_permissions`), and without `allow_other` the other user does not see
//! the mount at all. The test runs as root (as CI does), mounts a pool, and acts as uids
//! it makes up (no account needed: `setpriv` switches to bare numbers), so that nothing on
//! the machine changes. Elsewhere it prints why it cannot run (and fails under
//! `ATOMFS_REQUIRE_ALL=1`).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The other user, and a third one who owns files the other user must not touch.
const OTHER: u32 = 47_811;
const THIRD: u32 = 47_812;

fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("acting as a second user needs root".into());
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        return Some("no setpriv (package util-linux)".into());
    }
    test_support::fuse::fuse_unavailable()
}

/// Run `sh -c script` as `uid` (same gid, no supplementary groups).
fn as_user(uid: u32, script: &str) -> Output {
    Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            script.into(),
        ])
        .env("LC_ALL", "C")
        .output()
        .expect("run setpriv")
}

fn refused(out: &Output, what: &str, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(why),
        "{what}: expected a refusal ({why}), got {} with stderr {err:?}",
        out.status
    );
}

fn allowed(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: expected success, got {} with stderr {:?}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A mount point the other user can reach (/dev/shm is 1777; the target directory may not be).
fn mount_point(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!(
        "/dev/shm/atomfs-fuse-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir(&dir);
    std::fs::create_dir(&dir).expect("mount point");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

fn mount(name: &str, allow_other: bool) -> (atomfs_fuse::Mount, PathBuf, test_support::Scratch) {
    let (store, pool) = support::shm_pool(name, 64 << 20);
    let dir = mount_point(name);
    let opts = atomfs_fuse::MountOptions {
        fsname: format!("atomfs-test-{name}"),
        allow_other,
        ..Default::default()
    };
    let m = atomfs_fuse::spawn_mount(store, &dir, &opts).expect("mount");
    (m, dir, pool)
}

fn unmount(m: atomfs_fuse::Mount, dir: &Path) {
    if m.unmount().is_err() {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(dir)
            .status();
        panic!("unmount of {} failed", dir.display());
    }
    let _ = std::fs::remove_dir(dir);
}

#[test]
fn another_user_is_held_to_the_stored_owners_and_modes() {
    if let Some(why) = unavailable() {
        test_support::unavailable("another_user_is_held_to_the_stored_owners_and_modes", &why);
        return;
    }
    let (m, dir, _pool) = mount("multiuser", true);
    let at = |p: &str| dir.join(p);
    let chown = |p: &str, uid: u32| std::os::unix::fs::chown(at(p), Some(uid), Some(uid)).unwrap();
    let chmod = |p: &str, mode: u32| {
        std::fs::set_permissions(at(p), std::fs::Permissions::from_mode(mode)).unwrap()
    };
    // Root's files: a secret (0600) and a world-readable one.
    std::fs::write(at("secret"), "root only\n").unwrap();
    chmod("secret", 0o600);
    std::fs::write(at("public"), "everyone reads\n").unwrap();
    chmod("public", 0o644);
    // The third user's file, readable by all, writable by its owner only.
    std::fs::write(at("theirs"), "third's\n").unwrap();
    chmod("theirs", 0o644);
    chown("theirs", THIRD);
    // A sticky shared directory with a file of the third user in it.
    std::fs::create_dir(at("tmp")).unwrap();
    chmod("tmp", 0o1777);
    std::fs::write(at("tmp/theirs"), "third's\n").unwrap();
    chown("tmp/theirs", THIRD);
    let d = dir.display();

    refused(
        &as_user(OTHER, &format!("cat {d}/secret")),
        "read a 0600 file of root",
        "Permission denied",
    );
    assert_eq!(
        allowed(
            &as_user(OTHER, &format!("cat {d}/public")),
            "read a 0644 file"
        ),
        "everyone reads\n"
    );
    refused(
        &as_user(OTHER, &format!("echo x >> {d}/theirs")),
        "append to another user's 0644 file",
        "Permission denied",
    );
    refused(
        &as_user(OTHER, &format!("echo x > {d}/theirs")),
        "truncate another user's 0644 file",
        "Permission denied",
    );
    refused(
        &as_user(OTHER, &format!("chmod 666 {d}/theirs")),
        "chmod another user's file",
        "Operation not permitted",
    );
    refused(
        &as_user(OTHER, &format!("touch {d}/new")),
        "create in root's 0755 directory",
        "Permission denied",
    );
    refused(
        &as_user(OTHER, &format!("rm -f {d}/public")),
        "unlink in root's 0755 directory",
        "Permission denied",
    );
    refused(
        &as_user(OTHER, &format!("mv {d}/tmp/theirs {d}/tmp/mine")),
        "rename another user's file in a sticky directory",
        "Operation not permitted",
    );
    refused(
        &as_user(OTHER, &format!("rm -f {d}/tmp/theirs")),
        "unlink another user's file in a sticky directory",
        "Operation not permitted",
    );
    // What the other user may do, it can: create in the sticky directory, and rename its own.
    allowed(
        &as_user(
            OTHER,
            &format!("echo mine > {d}/tmp/own && mv {d}/tmp/own {d}/tmp/own2"),
        ),
        "create and rename own file in a sticky directory",
    );
    let meta = std::fs::metadata(at("tmp/own2")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (OTHER, OTHER),
        "a created file belongs to its creator"
    );
    // Nothing refused above changed anything.
    assert_eq!(std::fs::read_to_string(at("theirs")).unwrap(), "third's\n");
    assert_eq!(
        std::fs::read_to_string(at("tmp/theirs")).unwrap(),
        "third's\n"
    );
    assert_eq!(
        std::fs::metadata(at("theirs")).unwrap().mode() & 0o7777,
        0o644
    );
    assert!(!at("new").exists() && at("public").exists() && !at("tmp/mine").exists());
    unmount(m, &dir);
}

#[test]
fn without_allow_other_another_user_cannot_see_the_mount() {
    if let Some(why) = unavailable() {
        test_support::unavailable(
            "without_allow_other_another_user_cannot_see_the_mount",
            &why,
        );
        return;
    }
    let (m, dir, _pool) = mount("private", false);
    std::fs::write(dir.join("f"), "x").unwrap();
    std::fs::set_permissions(dir.join("f"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let d = dir.display();
    refused(
        &as_user(OTHER, &format!("stat {d}/f")),
        "stat inside a private mount",
        "Permission denied",
    );
    refused(
        &as_user(OTHER, &format!("ls {d}")),
        "list a private mount",
        "Permission denied",
    );
    // The owner still sees it.
    assert_eq!(std::fs::read_to_string(dir.join("f")).unwrap(), "x");
    unmount(m, &dir);
}

#[test]
fn posix_acls_are_enforced_and_inherited() {
    if let Some(why) = unavailable() {
        test_support::unavailable("posix_acls_are_enforced_and_inherited", &why);
        return;
    }
    for tool in ["setfacl", "getfacl"] {
        if !test_support::env::have(tool) {
            let why = format!("no {tool}: run scripts/install-deps.sh as root (package acl)");
            return test_support::unavailable("posix_acls_are_enforced_and_inherited", &why);
        }
    }
    // The reference model keeps extended attributes, so the mount enforces ACLs.
    let store = std::sync::Arc::new(conformance::ModelStore::new());
    let dir = mount_point("acl");
    let opts = atomfs_fuse::MountOptions {
        fsname: "atomfs-test-acl".into(),
        allow_other: true,
        ..Default::default()
    };
    let m = atomfs_fuse::spawn_mount(store, &dir, &opts).expect("mount");
    let root = |script: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&dir)
            .output()
            .expect("sh");
        allowed(&out, script)
    };
    let at = |p: &str| dir.join(p).display().to_string();
    root("echo secret > f && chmod 600 f && setfacl -m u:47811:r f");
    assert_eq!(
        root("stat -c %a f").trim(),
        "640",
        "the mask is the group bits"
    );
    let f = at("f");
    assert_eq!(
        allowed(&as_user(OTHER, &format!("cat {f}")), "named user reads"),
        "secret\n"
    );
    refused(
        &as_user(THIRD, &format!("cat {f}")),
        "another user",
        "Permission denied",
    );
    refused(
        &as_user(OTHER, &format!("echo x >> {f}")),
        "named user writes",
        "Permission denied",
    );
    // chmod takes the mask away: the named entry stays but grants nothing.
    root("chmod 600 f");
    assert!(root("getfacl -c f").contains("mask::---"));
    refused(
        &as_user(OTHER, &format!("cat {f}")),
        "masked named user",
        "Permission denied",
    );
    // A default ACL is inherited (the umask not applied); without one the umask is.
    root("mkdir shared && setfacl -d -m u:47811:rwx shared");
    root("umask 077 && touch shared/new plain && mkdir shared/sub");
    assert_eq!(
        root("stat -c %a plain").trim(),
        "600",
        "umask without a default ACL"
    );
    assert_eq!(
        root("stat -c %a shared/new").trim(),
        "664",
        "inherited, umask ignored"
    );
    let inherited = root("getfacl -c shared/new");
    assert!(inherited.contains("user:47811:rwx"), "{inherited}");
    assert!(root("getfacl -c shared/sub").contains("default:user:47811:rwx"));
    let new = at("shared/new");
    allowed(
        &as_user(OTHER, &format!("echo mine > {new}")),
        "inherited grant",
    );
    refused(
        &as_user(THIRD, &format!("echo x > {new}")),
        "third user",
        "Permission denied",
    );
    unmount(m, &dir);
}
