//! Golden persistence counts (CONVENTIONS.md §13, after PMDK `obj_persist_count`): the
//! fences, flushed lines and bytes stored by each basic operation, per mode, compared with
//! the snapshot `tests/golden/persist_counts.txt`. A change that adds a fence or a flush on a
//! hot path fails here and shows up in review. After an intended change, re-bless with
//! `POOL_GOLDEN_BLESS=1 cargo test -p atomfs-pool --test golden` and commit the new file.
//!
//! After the rows of every mode come the same operations on pools with data checksums
//! (`MODE+crc`), and for both kinds of pool the checkpoint of what the operations left
//! pending (`checkpoint-all`): a checksummed pool's checkpoint merges into a pending
//! version instead of the permanent block (docs/engines/pool.md, "Data checksums"), which
//! shows there as more lines stored.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use pmem::{DramRegion, Region};
use pool::{Mode, PoolConfig, PoolStore};
use store::{Store, ROOT_INO};

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/persist_counts.txt"
);

fn measure(s: &PoolStore<DramRegion>, op: impl FnOnce()) -> (u64, u64, u64) {
    let before = s.region().stats();
    op();
    let after = s.region().stats();
    (
        after.fences - before.fences,
        after.lines_flushed - before.lines_flushed,
        after.bytes_stored - before.bytes_stored,
    )
}

type Rows = Vec<(String, (u64, u64, u64))>;

/// The rows of the basic operations, and the row of the checkpoint that follows them.
fn counts(mode: Mode, checksums: bool) -> (Rows, Rows) {
    let cfg = PoolConfig {
        pending_versions_max: 16,
        ..PoolConfig::test_min().with_mode(mode)
    }
    .with_data_checksums(checksums);
    let label = if checksums {
        format!("{}+crc", mode.name())
    } else {
        mode.name().to_string()
    };
    let s = fresh(&cfg);
    create_with(&s, "/a", &pattern(1, 16384));
    create_with(&s, "/b", &pattern(2, 16384));
    s.checkpoint_all().unwrap();
    let fa = s.open(s.lookup(ROOT_INO, b"a").unwrap().ino, rw()).unwrap();
    let fb = s.open(s.lookup(ROOT_INO, b"b").unwrap().ino, rw()).unwrap();
    let page = pattern(3, 4096);
    let mut out = Vec::new();
    let mut row = |name: &str, c| out.push((format!("{label} {name}"), c));
    row(
        "legacy-write-4k",
        measure(&s, || {
            s.write(fa, 4096, &page).unwrap();
        }),
    );
    row(
        "legacy-write-100b-unaligned",
        measure(&s, || {
            s.write(fa, 8195, &page[..100]).unwrap();
        }),
    );
    row(
        "tx-two-4k-writes",
        measure(&s, || {
            let tx = s.tx_begin(&[fa, fb]).unwrap();
            s.write(fa, 0, &page).unwrap();
            s.write(fb, 8192, &page).unwrap();
            s.tx_commit(tx).unwrap();
        }),
    );
    row(
        "create",
        measure(&s, || {
            s.create(ROOT_INO, b"c", 0o644, None).unwrap();
        }),
    );
    row(
        "rename",
        measure(&s, || {
            s.rename(ROOT_INO, b"c", ROOT_INO, b"d", None).unwrap();
        }),
    );
    row(
        "unlink",
        measure(&s, || {
            s.unlink(ROOT_INO, b"d", None).unwrap();
        }),
    );
    posix_rows(&s, fb, &mut row);
    let checkpoint = measure(&s, || s.checkpoint_all().unwrap());
    (out, vec![(format!("{label} checkpoint-all"), checkpoint)])
}

/// The calls of the rest of the POSIX file API (format versions 3 and 4). The punched block
/// has no pending version; adding these rows moved the checkpoint rows of FCFS and SOC that
/// follow them by one fence (fewer), nothing else. A small attribute costs a whole
/// attribute block (copy-on-write: 64 of its lines).
fn posix_rows(
    s: &PoolStore<DramRegion>,
    fb: store::Fh,
    row: &mut impl FnMut(&str, (u64, u64, u64)),
) {
    use store::{Fallocate, FileKind, RenameMode, XattrSet};
    row(
        "symlink-inline",
        measure(s, || {
            s.symlink(ROOT_INO, b"l", b"a", None).unwrap();
        }),
    );
    row(
        "symlink-block",
        measure(s, || {
            s.symlink(ROOT_INO, b"m", &[b'p'; 100], None).unwrap();
        }),
    );
    row(
        "mknod",
        measure(s, || {
            s.mknod(ROOT_INO, b"p", FileKind::Fifo, 0o600, 0, None)
                .unwrap();
        }),
    );
    row(
        "rename-exchange",
        measure(s, || {
            s.rename_with(ROOT_INO, b"l", ROOT_INO, b"p", RenameMode::Exchange, None)
                .unwrap();
        }),
    );
    let a = s.lookup(ROOT_INO, b"a").unwrap().ino;
    row(
        "setxattr-small",
        measure(s, || {
            s.setxattr(a, b"user.k", b"value", XattrSet::Either, None)
                .unwrap();
        }),
    );
    row(
        "removexattr",
        measure(s, || {
            s.removexattr(a, b"user.k", None).unwrap();
        }),
    );
    row(
        "fallocate-punch-4k",
        measure(s, || {
            s.fallocate(fb, Fallocate::PunchHole, 12288, 4096).unwrap();
        }),
    );
    row(
        "tmpfile-write-link",
        measure(s, || {
            let (m, fh) = s.tmpfile(ROOT_INO, 0o600, rw(), None).unwrap();
            s.write(fh, 0, &[1; 100]).unwrap();
            s.link(m.ino, ROOT_INO, b"t", None).unwrap();
            s.release(fh).unwrap();
        }),
    );
}

fn render() -> String {
    let mut text = String::from(
        "# mode operation: fences flushed-lines bytes-stored (tests/golden.rs; re-bless with POOL_GOLDEN_BLESS=1)\n",
    );
    let modes = [
        Mode::Nc,
        Mode::Fcfs,
        Mode::Soc,
        Mode::Sync,
        Mode::Scsp,
        Mode::FgWal,
    ];
    let mut checkpoints = Vec::new();
    for checksums in [false, true] {
        for mode in modes {
            let (rows, checkpoint) = counts(mode, checksums);
            let rows = if checksums {
                rows.into_iter().chain(checkpoint).collect()
            } else {
                checkpoints.extend(checkpoint);
                rows
            };
            for (name, (fences, lines, bytes)) in rows {
                text.push_str(&format!(
                    "{name}: fences {fences} lines {lines} bytes {bytes}\n"
                ));
            }
        }
    }
    for (name, (fences, lines, bytes)) in checkpoints {
        text.push_str(&format!(
            "{name}: fences {fences} lines {lines} bytes {bytes}\n"
        ));
    }
    text
}

#[test]
fn persistence_counts_match_the_snapshot() {
    let now = render();
    // Deterministic: the same operations give the same counts twice.
    assert_eq!(now, render());
    if std::env::var_os("POOL_GOLDEN_BLESS").is_some() {
        std::fs::write(SNAPSHOT, &now).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(SNAPSHOT)
        .unwrap_or_else(|e| panic!("{SNAPSHOT}: {e}; create it with POOL_GOLDEN_BLESS=1"));
    if golden != now {
        let diff: Vec<String> = golden
            .lines()
            .zip(now.lines())
            .filter(|(g, n)| g != n)
            .map(|(g, n)| format!("  was {g}\n  now {n}"))
            .collect();
        panic!(
            "persistence counts changed (re-bless with POOL_GOLDEN_BLESS=1 if intended):\n{}",
            diff.join("\n")
        );
    }
}
