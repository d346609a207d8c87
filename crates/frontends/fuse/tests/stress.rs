//! stress-ng on a mounted store, with `--verify`: the stressors of the POSIX file API
//! (`--symlink --link --fifo --sock --fallocate --xattr --dir --rename --filename`), a few
//! seconds each, every one with zero failures.
//!
//! Each runs on a mounted pool. A stressor that needs a part of the POSIX file API the pool
//! does not offer yet (`conformance::cases::awaited("pool")`) runs on a mount of the reference
//! model instead, and says so; once the pool offers it, the same test runs it on the pool —
//! the test tightens by itself as the pool catches up.

mod support;

use conformance::cases::{awaited, Feature};
use conformance::ModelStore;
use std::process::Command;
use std::sync::Arc;
use store::Store;
use support::{mounted, shm_pool};
use test_support::unavailable;

/// How long each stressor runs.
const SECONDS: u32 = 3;

/// Why stress-ng cannot run here, if it cannot.
fn stress_ng_missing() -> Option<String> {
    match Command::new("stress-ng").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!("stress-ng --version failed: {}", out.status)),
        Err(e) => Some(format!(
            "no stress-ng ({e}): run scripts/install-deps.sh as root"
        )),
    }
}

/// The store a stressor needing `needs` runs on: a pool, or the model while the pool does
/// not offer it. Keeps the pool's scratch directory alive.
fn store_for(stressor: &str, needs: &[Feature]) -> (Arc<dyn Store>, Option<test_support::Scratch>) {
    let waiting: Vec<&Feature> = needs
        .iter()
        .filter(|f| awaited("pool").contains(f))
        .collect();
    if waiting.is_empty() {
        let (store, dir) = shm_pool(&format!("stress-{stressor}"), 256 << 20);
        return (store, Some(dir));
    }
    eprintln!(
        "stress-ng --{stressor}: waits for the pool ({waiting:?} not offered yet): \
         run on a mount of the reference model"
    );
    (Arc::new(ModelStore::new()), None)
}

/// An mmio store when mmio offers every part in `needs`.
fn mmio_store(
    stressor: &str,
    needs: &[Feature],
) -> Option<(Arc<dyn Store>, test_support::Scratch)> {
    if needs.iter().any(|f| awaited("mmio").contains(f)) {
        return None;
    }
    Some(support::mmio_store(&format!("stress-{stressor}")))
}

/// Run one stressor with `--verify` on a mounted store; any `fail:` line or a non-zero exit
/// fails the test.
fn stress(stressor: &str, needs: &[Feature], extra: &[&str]) {
    let (store, _pool) = store_for(stressor, needs);
    stress_on(stressor, store, extra);
}

/// [`stress`] on a given store.
fn stress_on(stressor: &str, store: Arc<dyn Store>, extra: &[&str]) {
    let engine = store.engine_name();
    let name = format!("stress-ng-verify-{stressor}-{engine}");
    if let Some(why) = stress_ng_missing() {
        return unavailable(&name, &why);
    }
    let Some(m) = mounted(&name, store) else {
        return;
    };
    let out = Command::new("stress-ng")
        .arg(format!("--{stressor}"))
        .arg("1")
        .args(extra)
        .arg("--temp-path")
        .arg(m.dir())
        .args(["--verify", "--metrics-brief", "--timeout"])
        .arg(format!("{SECONDS}s"))
        .output();
    m.finish();
    let out = out.expect("spawn stress-ng");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let failures: Vec<&str> = text.lines().filter(|l| l.contains(" fail: ")).collect();
    assert!(
        out.status.success() && failures.is_empty(),
        "stress-ng --{stressor} --verify on a mounted {engine}: {} with {} failure(s):\n{text}",
        out.status,
        failures.len()
    );
    assert!(
        text.contains("successful run completed"),
        "stress-ng --{stressor} did not complete on {engine}:\n{text}"
    );
    eprintln!("stress-ng --{stressor} --verify on a mounted {engine}: passed");
}

/// The stressors of the POSIX file API on a mounted mmio store too: a host-file engine that
/// offers them all (skipped, with a message, for a part mmio does not offer).
#[test]
fn posix_stressors_on_mmio() {
    let runs: [(&str, &[Feature], &[&str]); 5] = [
        ("symlink", &[Feature::Symlinks], &[]),
        ("fifo", &[Feature::SpecialFiles], &[]),
        (
            "fallocate",
            &[Feature::Fallocate],
            &["--fallocate-bytes", "16m"],
        ),
        ("xattr", &[Feature::Xattrs], &[]),
        ("link", &[], &[]),
    ];
    for (stressor, needs, extra) in runs {
        match mmio_store(stressor, needs) {
            Some((store, _dir)) => stress_on(stressor, store, extra),
            None => eprintln!("stress-ng --{stressor}: mmio does not offer {needs:?} yet"),
        }
    }
}

#[test]
fn stress_ng_symlink() {
    stress("symlink", &[Feature::Symlinks], &[]);
}

#[test]
fn stress_ng_link() {
    stress("link", &[], &[]);
}

#[test]
fn stress_ng_fifo() {
    stress("fifo", &[Feature::SpecialFiles], &[]);
}

/// In its default (ipv4) domain: stress-ng 0.15's unix domain asks for protocol 6 (TCP) and
/// fails with EPROTONOSUPPORT on any file system. Unix sockets bound on the mount are
/// tested by tests/posix.rs (`special_files_through_the_kernel`).
#[test]
fn stress_ng_sock() {
    stress("sock", &[Feature::SpecialFiles], &[]);
}

#[test]
fn stress_ng_fallocate() {
    stress(
        "fallocate",
        &[Feature::Fallocate],
        &["--fallocate-bytes", "16m"],
    );
}

#[test]
fn stress_ng_xattr() {
    stress("xattr", &[Feature::Xattrs], &[]);
}

#[test]
fn stress_ng_dir() {
    stress("dir", &[], &[]);
}

#[test]
fn stress_ng_rename() {
    stress("rename", &[], &[]);
}

#[test]
fn stress_ng_filename() {
    stress("filename", &[], &[]);
}
