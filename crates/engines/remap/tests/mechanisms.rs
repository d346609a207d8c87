//! The ACCFS mechanisms, each with a test that fails without it: SDJ's single write and single
//! sync per commit, the zero-copy remap checkpoint, the A-tree's replacement of a home
//! block's earlier pair, idempotent redo recovery, and SADJ's A-flagged pairs kept out of
//! checkpoints (and out of the durable state) until the file's fsync.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use hostfs::SimHostFs;
use remap::{RemapConfig, RemapStore};
use store::{OpenOptions, Store};

fn config() -> RemapConfig {
    RemapConfig {
        copy_checkpoint: false,
        checkpoint_journal_len: 1 << 30,
        ..RemapConfig::default()
    }
}

fn store(sim: &SimHostFs) -> RemapStore<SimHostFs> {
    RemapStore::create_on(sim.clone(), 9, &config()).unwrap()
}

fn recover(sim: &SimHostFs) -> (SimHostFs, RemapStore<SimHostFs>) {
    let crashed = SimHostFs::from_image(&sim.durable_image(), Default::default());
    let s = RemapStore::open_on(crashed.clone(), Some(9), &config()).unwrap();
    (crashed, s)
}

fn open(s: &dyn Store, path: &str, atomic: bool) -> store::Fh {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .atomic(atomic)
        .open(s, path, None)
        .unwrap()
}

fn get(s: &dyn Store, path: &str) -> Vec<u8> {
    let fh = OpenOptions::new().read(true).open(s, path, None).unwrap();
    let len = s.fstat(fh).unwrap().size as usize;
    let mut buf = vec![0u8; len];
    assert_eq!(s.read(fh, 0, &mut buf).unwrap(), len);
    s.release(fh).unwrap();
    buf
}

#[test]
fn a_commit_writes_its_data_once_and_syncs_once() {
    let sim = SimHostFs::default();
    let s = store(&sim);
    let fh = open(&s, "/a", false);
    let syncs = sim.sync_count();
    s.write(fh, 0, &[3u8; 16384]).unwrap();
    assert_eq!(
        sim.sync_count() - syncs,
        1,
        "one sync of the journal per commit"
    );
    let c = s.counters();
    assert_eq!(c.commit_blocks, 4, "each block journaled once");
    assert!(s.checkpoint().unwrap());
    let c = s.counters();
    assert_eq!((c.remapped_blocks, c.copied_blocks), (4, 0), "{c:?}");
    assert_eq!(c.remap_calls, 1, "one remap per contiguous run");
}

#[test]
fn a_later_pair_of_the_same_home_block_replaces_the_earlier_one() {
    let sim = SimHostFs::default();
    let s = store(&sim);
    let fh = open(&s, "/a", false);
    for v in 1..=5u8 {
        s.write(fh, 0, &[v; 4096]).unwrap();
    }
    assert!(s.checkpoint().unwrap());
    assert_eq!(
        s.counters().remapped_blocks,
        1,
        "only the newest pair is remapped"
    );
    assert_eq!(get(&s, "/a"), vec![5u8; 4096]);
}

#[test]
fn recovery_redoes_committed_records_and_is_idempotent() {
    let sim = SimHostFs::default();
    let s = store(&sim);
    let fh = open(&s, "/a", false);
    s.write(fh, 0, &[1u8; 10000]).unwrap();
    s.write(fh, 4096, &[2u8; 100]).unwrap();
    // A crash now: committed, never checkpointed.
    let (crashed, first) = recover(&sim);
    assert!(first.counters().recovered_records >= 2);
    let mut want = vec![1u8; 10000];
    want[4096..4196].fill(2);
    assert_eq!(get(&first, "/a"), want);
    // Crash again right after (the same records may be redone): the same state.
    let (_, second) = recover(&crashed);
    assert_eq!(get(&second, "/a"), want);
}

#[test]
fn a_flagged_pairs_stay_out_of_checkpoints_and_crashes_until_fsync() {
    let sim = SimHostFs::default();
    let small = RemapConfig {
        checkpoint_journal_len: 64 << 10,
        ..config()
    };
    let s = RemapStore::create_on(sim.clone(), 9, &small).unwrap();
    let atomic = open(&s, "/db", true);
    s.write(atomic, 0, &[7u8; 8192]).unwrap();
    // Commits of another file run past the journal limit: the checkpoint is held back
    // while the O_ATOMIC file has pending pairs.
    let other = open(&s, "/log", false);
    for i in 0..8u64 {
        s.write(other, i * 16384, &[1u8; 16384]).unwrap();
    }
    assert_eq!(s.counters().checkpoints, 1, "only the one of create");
    assert!(s.journal_len() > 64 << 10);
    // A crash now: the pending atomic writes are absent, the other file's commits present.
    let (_, crashed) = recover(&sim);
    assert!(get(&crashed, "/db").is_empty());
    assert_eq!(get(&crashed, "/log").len(), 8 * 16384);
    drop(crashed);
    s.fsync(atomic, false).unwrap();
    let c = s.counters();
    assert!(
        c.checkpoints >= 2,
        "the fsync's commit lets the checkpoint run: {c:?}"
    );
    let (_, after) = recover(&sim);
    assert_eq!(get(&after, "/db"), vec![7u8; 8192]);
}

#[test]
fn abortv_drops_and_syncv_commits_several_files_as_one() {
    let sim = SimHostFs::default();
    let s = store(&sim);
    let (a, b) = (open(&s, "/a", true), open(&s, "/b", true));
    s.write(a, 0, b"first").unwrap();
    s.write(b, 0, b"first").unwrap();
    s.abortv(&[a, b]).unwrap();
    assert!(get(&s, "/a").is_empty() && get(&s, "/b").is_empty());
    s.write(a, 0, b"second").unwrap();
    s.write(b, 0, b"second").unwrap();
    let records = s.stats();
    s.syncv(&[a, b]).unwrap();
    let count = |st: &[(String, u64)]| {
        st.iter()
            .find(|(k, _)| k == "commits")
            .map(|(_, v)| *v)
            .unwrap_or(0)
    };
    assert_eq!(
        count(&s.stats()) - count(&records),
        1,
        "one record for both files"
    );
    let (_, r) = recover(&sim);
    assert_eq!(
        (get(&r, "/a"), get(&r, "/b")),
        (b"second".to_vec(), b"second".to_vec())
    );
}

/// The FTL model driven by the engine's own block trace, for the seed's Figure 3 scenario
/// (one block of each of two files updated in one transaction, then a checkpoint): the
/// journal record is one header block (descriptor, metadata and commit mark together) and
/// the two data blocks; the checkpoint is one SHARE command plus the snapshot's page. With
/// copy-checkpoint the two home blocks are written again instead.
#[test]
fn ftl_model_counts_flash_writes_of_the_engine_trace() {
    use remap::ftl::Ftl;
    for copy in [false, true] {
        let sim = SimHostFs::default();
        let c = RemapConfig {
            copy_checkpoint: copy,
            ..config()
        };
        let s = RemapStore::create_on(sim.clone(), 9, &c).unwrap();
        let (a, b) = (open(&s, "/a", false), open(&s, "/b", false));
        s.write(a, 0, &[1u8; 4096]).unwrap();
        s.write(b, 0, &[1u8; 4096]).unwrap();
        assert!(s.checkpoint().unwrap());
        s.start_trace();
        let tx = s.tx_begin(&[a, b]).unwrap();
        s.write(a, 0, &[2u8; 4096]).unwrap();
        s.write(b, 0, &[2u8; 4096]).unwrap();
        s.tx_commit(tx).unwrap();
        assert!(s.checkpoint().unwrap());
        let counts = Ftl::replay(&s.take_trace());
        let want = if copy { (6, 0) } else { (4, 1) };
        assert_eq!(
            (counts.page_writes, counts.share_commands),
            want,
            "copy {copy}"
        );
    }
}
