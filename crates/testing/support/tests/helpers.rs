//! The shared helpers do what the tests rely on: scratch directories are fresh, unique, under
//! an `atomfs-` name and gone after drop; programs are found and run checked; the generator's
//! output for a seed never changes. (The Store path helpers run in every engine's tests.)

use std::path::PathBuf;
use test_support::{checked, have, run, scratch, Rng};

#[test]
fn scratch_directories_are_fresh_unique_and_removed_on_drop() {
    let (a, b) = (scratch("support-a"), scratch("support-a"));
    assert_ne!(a.path(), b.path());
    for dir in [&a, &b] {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        assert!(name.starts_with("atomfs-support-a-"), "{name}");
        assert_eq!(
            std::fs::read_dir(dir.path()).map(|d| d.count()).ok(),
            Some(0)
        );
    }
    std::fs::write(a.join("f"), b"x").expect("write");
    let path: PathBuf = a.to_path_buf();
    drop(a);
    assert!(!path.exists(), "{} left behind", path.display());
}

#[test]
#[should_panic(expected = "one plain path component")]
fn scratch_names_cannot_leave_the_base() {
    let _ = scratch("../escape");
}

#[test]
fn programs_are_found_and_run_checked() {
    assert!(have("sh"), "sh is everywhere");
    let dir = scratch("support-run");
    assert_eq!(run("sh", &["-c", "printf ok"], &dir), "ok");
    let failed = std::process::Command::new("sh")
        .args(["-c", "exit 3"])
        .output()
        .expect("sh");
    let caught = std::panic::catch_unwind(|| checked(&failed, "exit 3"));
    assert!(caught.is_err(), "a failed program must fail the test");
}

#[test]
fn the_generator_is_stable_for_a_seed() {
    // SplitMix64 of seed 0: its first outputs (Steele, Lea, Flood 2014) never change.
    let mut rng = Rng::new(0);
    assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    let (mut x, mut y) = (Rng::new(42), Rng::new(42));
    assert_eq!(x.bytes(100), y.bytes(100));
    assert!((0..1000).all(|_| x.below(7) < 7));
    assert_eq!(x.below(0), 0);
}
