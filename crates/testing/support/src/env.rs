//! Skip or fail: a test whose environment (a tool, a device, a library) is missing prints why
//! and returns, unless `ATOMFS_REQUIRE_ALL=1` asks for every test to run — then it fails.

use std::process::Command;

/// Set (to 1) by scripts/test.sh when it runs as root, as CI does: every tool the tests need
/// is installed then, so a test that finds its environment missing must fail, not skip.
pub fn require_all() -> bool {
    std::env::var("ATOMFS_REQUIRE_ALL").is_ok_and(|v| v == "1")
}

/// Print why `what` is left out, or fail when every test must run ([`require_all`]).
pub fn unavailable(what: &str, why: &str) {
    assert!(
        !require_all(),
        "{what} cannot run here: {why} (ATOMFS_REQUIRE_ALL=1)"
    );
    println!("SKIP {what}: {why}");
}

/// Whether the program `tool` is installed (found on `PATH` by `sh -c 'command -v'`); when it
/// is not, says so through [`unavailable`] (a failure under `ATOMFS_REQUIRE_ALL=1`).
pub fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg("command -v \"$0\"")
        .arg(tool)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        unavailable(tool, "not installed (scripts/install-deps.sh installs it)");
    }
    found
}
