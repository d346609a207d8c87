//! The journal core on simulated media: write path, versions, delta updates, GC,
//! checkpoint, reopen.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::*;
use hostfs::HostFs;
use journal::{JournalConfig, Variant};
use pmem::Region;

fn model0() -> Vec<Vec<u8>> {
    vec![Vec::new(); FILES]
}

#[test]
fn overwrites_are_journaled_and_appends_go_home() {
    let cfg = JournalConfig {
        journal_blocks: 64,
        ..JournalConfig::test_min()
    };
    let (_r, _h, j) = sim_journal(&cfg);
    let m = write_tx(&j, &model0(), &[(0, 0, vec![7u8; 10_000])]);
    let s = j.stats();
    assert_eq!(s.full_blocks, 1, "only the sizes block is journaled: {s:?}");
    assert_eq!(s.appended_bytes, 10_000);
    let m = write_tx(&j, &m, &[(0, 5000, vec![9u8; 100])]);
    let s = j.stats();
    assert_eq!(
        s.full_blocks + s.delta_blocks,
        2,
        "overwrite journaled: {s:?}"
    );
    assert_eq!(contents(&j).unwrap(), m);
    // The home file still has the old bytes: the overwrite waits for a checkpoint.
    let mut home = vec![0u8; 100];
    j.home()
        .host()
        .read_full_at(&j.home().file(1).unwrap(), 5000, &mut home)
        .unwrap();
    assert_eq!(home, vec![7u8; 100]);
    j.checkpoint().unwrap();
    j.home()
        .host()
        .read_full_at(&j.home().file(1).unwrap(), 5000, &mut home)
        .unwrap();
    assert_eq!(home, vec![9u8; 100]);
    assert_eq!(contents(&j).unwrap(), m);
    assert_eq!(j.journaled_blocks(), 0);
    assert!(j.fsck().problems.is_empty(), "{:?}", j.fsck());
}

#[test]
fn third_version_is_a_delta_onto_the_old_one() {
    let cfg = JournalConfig {
        journal_blocks: 64,
        ..JournalConfig::test_min()
    };
    let (region, _h, j) = sim_journal(&cfg);
    let base = vec![1u8; 4096];
    let mut m = write_tx(&j, &model0(), &[(0, 0, base.clone())]);
    // Two journaled versions of block 0: the same 100 bytes changed each time (a counter,
    // an inode: the seed's content locality).
    for v in [0xAAu8, 0xBB] {
        let mut b = base.clone();
        b[1000..1100].fill(v);
        m = write_tx(&j, &m, &[(0, 0, b)]);
    }
    let before = region.stats().bytes_stored;
    let mut b = base.clone();
    b[1000..1100].fill(0xEE);
    let m = write_tx(&j, &m, &[(0, 0, b)]);
    let stored = region.stats().bytes_stored - before;
    let s = j.stats();
    assert_eq!(s.delta_blocks, 1, "{s:?}");
    assert_eq!(s.delta_bytes, 100, "{s:?}");
    // 100 delta bytes, a swap record (48 + 8), two swapped headers and the written one, the
    // pointers and a flag hint.
    assert!(
        stored <= 256,
        "bytes stored to PM for a 100-byte change: {stored}, {s:?}"
    );
    assert_eq!(contents(&j).unwrap(), m);
    assert!(j.fsck().problems.is_empty(), "{:?}", j.fsck());
}

#[test]
fn no_delta_variant_writes_whole_blocks() {
    let cfg = JournalConfig {
        journal_blocks: 64,
        variant: Variant {
            delta: false,
            ..Variant::NJS
        },
        ..JournalConfig::test_min()
    };
    let (region, _h, j) = sim_journal(&cfg);
    let mut m = write_tx(&j, &model0(), &[(0, 0, vec![1u8; 4096])]);
    for v in 2..=3u8 {
        m = write_tx(&j, &m, &[(0, 0, vec![v; 4096])]);
    }
    let before = region.stats().bytes_stored;
    let mut change = m[0].clone();
    change[1000..1100].fill(0xEE);
    let m = write_tx(&j, &m, &[(0, 0, change)]);
    let stored = region.stats().bytes_stored - before;
    assert!(stored >= 4096, "no-delta stores the block whole: {stored}");
    assert_eq!(j.stats().delta_blocks, 0);
    assert_eq!(contents(&j).unwrap(), m);
}

#[test]
fn reopen_recovers_the_committed_state() {
    let cfg = JournalConfig {
        journal_blocks: 32,
        ..JournalConfig::test_min()
    };
    let (region, host, j) = sim_journal(&cfg);
    let mut m = model0();
    for i in 0..40u64 {
        let f = (i % 3) as usize;
        m = write_tx(&j, &m, &[(f, (i * 1777) % 20_000, vec![i as u8; 3000])]);
    }
    let stats = j.stats();
    assert!(stats.checkpoints > 0 && stats.gc_runs > 0, "{stats:?}");
    drop(j);
    let j = sim_reopen(region.persistent_image(), &host.durable_image(), &cfg).unwrap();
    assert_eq!(contents(&j).unwrap(), m);
    assert!(j.fsck().problems.is_empty(), "{:?}", j.fsck());
}

#[test]
fn journal_full_checkpoints_and_goes_on() {
    let cfg = JournalConfig {
        journal_blocks: 8,
        ..JournalConfig::test_min()
    };
    let (_r, _h, j) = sim_journal(&cfg);
    let mut m = model0();
    m = write_tx(&j, &m, &[(0, 0, vec![1u8; 6 * 4096])]);
    for i in 0..30u8 {
        let writes: Vec<_> = (0..6)
            .map(|b| (0, b * 4096 + i as u64, vec![i; 10]))
            .collect();
        m = write_tx(&j, &m, &writes);
        assert!(j.fsck().problems.is_empty(), "{:?}", j.fsck());
    }
    assert_eq!(contents(&j).unwrap(), m);
}
