//! `atomfs mkfs --data-checksums`: a flipped byte in a file's data block is an I/O error on
//! read and a problem in fsck, naming the inode; without the option nothing is checked.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use support::*;

/// 64 KiB of numbered lines, each unique, so a line can be found in the pool file.
fn marked() -> Vec<u8> {
    (0..2048)
        .flat_map(|i| format!("checksum-marker-line-{i:010}\n").into_bytes())
        .collect()
}

/// Flip one byte in every copy of `needle` in the file at `path`; how many were flipped.
fn flip_every(path: &std::path::Path, needle: &[u8]) -> usize {
    let mut bytes = std::fs::read(path).unwrap();
    let mut hits = 0;
    let mut at = 0;
    while let Some(pos) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
        let i = at + pos;
        bytes[i] ^= 0x20;
        hits += 1;
        at = i + needle.len();
    }
    std::fs::write(path, bytes).unwrap();
    hits
}

#[test]
fn a_flipped_data_byte_is_an_io_error_and_an_fsck_problem() {
    let dir = scratch("checksums");
    let pool = dir.join("c.pool");
    atomfs_ok(&["mkfs", s(&pool), "--size", "32M", "--data-checksums"]);
    let info = atomfs_ok(&["info", s(&pool), "--json"]);
    assert!(info.contains("\"data_checksums\": true"), "{info}");
    let src = dir.join("src");
    std::fs::write(&src, marked()).unwrap();
    atomfs_ok(&["put", s(&pool), s(&src), "/f"]);
    assert_eq!(atomfs_ok(&["cat", s(&pool), "/f"]).as_bytes(), marked());
    let fsck = atomfs(&["fsck", s(&pool)]);
    assert!(fsck.ok(), "{}{}", fsck.stdout, fsck.stderr);

    assert!(flip_every(&pool, b"checksum-marker-line-0000001000") >= 1);
    let cat = atomfs(&["cat", s(&pool), "/f"]);
    assert!(
        !cat.ok(),
        "a corrupted block read back: {}",
        cat.stdout.len()
    );
    assert!(
        cat.stderr.to_lowercase().contains("i/o error") || cat.stderr.contains("checksum"),
        "{}",
        cat.stderr
    );
    let fsck = atomfs(&["fsck", s(&pool)]);
    assert_eq!(fsck.code, Some(1), "{}{}", fsck.stdout, fsck.stderr);
    assert!(fsck.stdout.contains("checksum"), "{}", fsck.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}
