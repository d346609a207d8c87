//! Recovery (Libnvmmio §3.7, which the public code does not implement): apply committed
//! transaction records, scan the index entries, redo committed redo entries and undo
//! uncommitted undo entries, drop the rest, settle each file's size, free everything.
//!
//! Every step is idempotent: a crash during recovery leaves entries and records that the next
//! recovery applies again with the same result (redo copies the same new bytes, undo the same
//! old bytes; an entry is freed only after the home bytes it protects are durable).

use crate::host::FileMedia;
use crate::log::layout::{self, fm, IndexEntry, Superblock, NO_EPOCH, TX_RECORD_LEN};
use crate::{io_err, MmioError, MmioResult, Policy};
use pmem::Region;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub tx_records_applied: u64,
    pub files_recovered: u64,
    pub files_missing: u64,
    pub entries_redone: u64,
    pub entries_undone: u64,
    pub entries_discarded: u64,
    pub intents_undone: u64,
    pub intents_finished: u64,
}

pub(crate) fn recover<R: Region, M: FileMedia>(
    pool: &R,
    sb: &Superblock,
    media: &M,
) -> MmioResult<RecoveryReport> {
    let mut report = RecoveryReport::default();
    let committed = apply_tx_records(pool, sb, &mut report)?;
    recover_intents(pool, sb, media, &committed, &mut report)?;
    assert_intents_free(pool, sb);
    clear_tx_records(pool, sb);
    assert_tx_records_free(pool, sb);
    let by_slot = scan_entries(pool, sb)?;
    let mut paths: Option<HashMap<u64, PathBuf>> = None;
    for slot in 0..sb.files_max {
        let meta = layout::read_file_meta(pool, sb, slot);
        let entries = by_slot.get(&slot).map(Vec::as_slice).unwrap_or(&[]);
        if !meta.in_use {
            if !entries.is_empty() {
                return Err(MmioError::corrupt(
                    "log entries of a free per-file metadata slot",
                    sb.file_meta_at(slot),
                ));
            }
            continue;
        }
        if !meta.checksum_ok {
            return Err(MmioError::corrupt(
                "per-file metadata checksum mismatch",
                sb.file_meta_at(slot),
            ));
        }
        if meta.store_id != sb.store_id {
            return Err(MmioError::corrupt(
                "per-file metadata belongs to another store",
                sb.file_meta_at(slot),
            ));
        }
        if paths.is_none() {
            let walked = media
                .walk()
                .map_err(|e| io_err(media.describe().as_ref(), "walk", e))?;
            paths = Some(walked.into_iter().collect());
        }
        let path = paths.as_ref().and_then(|p| p.get(&meta.media_id)).cloned();
        recover_file(pool, sb, media, slot, &meta, entries, path, &mut report)?;
    }
    assert_log_empty(pool, sb);
    assert_eq!(
        report.entries_redone + report.entries_undone + report.entries_discarded,
        by_slot.values().map(|v| v.len() as u64).sum::<u64>(),
        "every index entry found is redone, undone or discarded, once"
    );
    Ok(report)
}

// Phase invariants of recovery (each phase's result, checked before the next relies on it;
// reads of the metadata areas only, once per open).

/// After the intents phase: every intent record is free (undone or finished).
fn assert_intents_free<R: Region>(pool: &R, sb: &Superblock) {
    for idx in 0..sb.intents_max {
        assert_eq!(
            pool.load_u64(sb.intent_at(idx)),
            0,
            "intent {idx} survived recovery"
        );
    }
}

/// After the transaction records phase: every record is free (its epochs are applied).
fn assert_tx_records_free<R: Region>(pool: &R, sb: &Superblock) {
    for i in 0..sb.tx_records_max {
        assert_eq!(
            pool.load_u64(sb.tx_at(i)),
            0,
            "transaction record {i} survived recovery"
        );
    }
}

/// At the end: no index entry is valid and no per-file slot is in use, so the DRAM
/// allocators may start with everything free.
fn assert_log_empty<R: Region>(pool: &R, sb: &Superblock) {
    for idx in 0..sb.index_entries_max {
        assert_eq!(
            pool.load_u64(sb.index_at(idx)),
            0,
            "index entry {idx} survived recovery"
        );
    }
    for slot in 0..sb.files_max {
        assert!(
            !layout::read_file_meta(pool, sb, slot).in_use,
            "file slot {slot} in use"
        );
    }
}

/// Raise the epochs of every committed transaction record; returns their txids.
fn apply_tx_records<R: Region>(
    pool: &R,
    sb: &Superblock,
    report: &mut RecoveryReport,
) -> MmioResult<std::collections::HashSet<u64>> {
    let mut committed = std::collections::HashSet::new();
    for i in 0..sb.tx_records_max {
        let at = sb.tx_at(i);
        let mut b = vec![0u8; TX_RECORD_LEN as usize];
        pool.read(at, &mut b);
        if let Some((txid, files)) = layout::decode_tx(&b, at)? {
            for f in &files {
                if f.slot >= sb.files_max {
                    return Err(MmioError::corrupt(
                        "transaction record names a slot out of range",
                        at,
                    ));
                }
                let e = sb.file_meta_at(f.slot) + fm::EPOCH;
                if pool.load_u64(e) < f.target_epoch {
                    pool.store_u64(e, f.target_epoch);
                    pool.flush(e, 8);
                }
            }
            // persist: the committed transaction's epoch bumps are all durable.
            pool.fence();
            committed.insert(txid);
            report.tx_records_applied += 1;
        }
    }
    Ok(committed)
}

/// Free every transaction record (after their epochs and intents are settled).
fn clear_tx_records<R: Region>(pool: &R, sb: &Superblock) {
    for i in 0..sb.tx_records_max {
        let at = sb.tx_at(i);
        if pool.load_u64(at) != 0 {
            pool.store_u64(at, 0);
            pool.flush(at, 8);
        }
    }
    // persist: the records are free (a committed or a torn one).
    pool.fence();
}

/// Finish the namespace intents of committed transactions, undo the others (newest first).
fn recover_intents<R: Region, M: FileMedia>(
    pool: &R,
    sb: &Superblock,
    media: &M,
    committed: &std::collections::HashSet<u64>,
    report: &mut RecoveryReport,
) -> MmioResult<()> {
    let mut all = Vec::new();
    for idx in 0..sb.intents_max {
        let at = sb.intent_at(idx);
        let mut b = vec![0u8; crate::log::intent::INTENT_LEN as usize];
        pool.read(at, &mut b);
        if let Some(rec) = crate::log::intent::IntentRecord::decode(&b, at)? {
            all.push((idx, rec));
        }
    }
    all.sort_by_key(|(_, r)| std::cmp::Reverse(r.seq));
    for (idx, rec) in &all {
        for p in crate::log::intent::paths(&rec.intent) {
            crate::log::intent::check_no_symlink(media, p, sb.intent_at(*idx))?;
        }
    }
    for (idx, rec) in &all {
        if committed.contains(&rec.txid) {
            continue;
        }
        crate::log::intent::undo(media, &rec.intent)?;
        crate::log::intent::clear(pool, sb.intent_at(*idx));
        // persist: an undone intent is freed before the next older one is undone: replaying
        // a newer undo after an older one restored its path would undo the restoration
        // (a `Created` undo removing the name a `Renamed` undo brought back).
        pool.fence();
        report.intents_undone += 1;
    }
    for (_, rec) in all.iter().rev() {
        if committed.contains(&rec.txid) {
            crate::log::intent::finish(media, &rec.intent)?;
            report.intents_finished += 1;
        }
    }
    for (idx, _) in &all {
        crate::log::intent::clear(pool, sb.intent_at(*idx));
    }
    // persist: the intents are settled on the host (each host call is durable) and free.
    pool.fence();
    Ok(())
}

fn scan_entries<R: Region>(
    pool: &R,
    sb: &Superblock,
) -> MmioResult<BTreeMap<u32, Vec<(u32, IndexEntry)>>> {
    let mut by_slot: BTreeMap<u32, Vec<(u32, IndexEntry)>> = BTreeMap::new();
    for idx in 0..sb.index_entries_max {
        let at = sb.index_at(idx);
        let mut b = [0u8; 64];
        pool.read(at, &mut b);
        let Some(e) = IndexEntry::decode(&b, at)? else {
            continue;
        };
        let size = layout::BLOCK_SIZE << e.order.min(40);
        let sane = e.file_slot < sb.files_max
            && e.order <= sb.order_max()
            && e.file_off % size == 0
            && e.log_off >= sb.log_off
            && e.log_off % size == 0
            && e.log_off + size <= sb.log_off + sb.log_len
            && e.delta_off as u64 + e.delta_len as u64 <= size;
        if !sane {
            return Err(MmioError::corrupt("index entry fields out of range", at));
        }
        by_slot.entry(e.file_slot).or_default().push((idx, e));
    }
    Ok(by_slot)
}

#[allow(clippy::too_many_arguments)]
fn recover_file<R: Region, M: FileMedia>(
    pool: &R,
    sb: &Superblock,
    media: &M,
    slot: u32,
    meta: &layout::FileMeta,
    entries: &[(u32, IndexEntry)],
    path: Option<PathBuf>,
    report: &mut RecoveryReport,
) -> MmioResult<()> {
    let at = sb.file_meta_at(slot);
    let mut committed_size = meta.committed_size;
    if meta.pending_epoch != NO_EPOCH {
        if meta.pending_epoch < meta.epoch {
            committed_size = meta.pending_size;
            pool.store_u64(at + fm::COMMITTED_SIZE, committed_size);
            // persist: the committed pending size is folded before the pending mark goes.
            pool.persist(at + fm::COMMITTED_SIZE, 8);
        }
        pool.store_u64(at + fm::PENDING_EPOCH, NO_EPOCH);
        pool.persist(at + fm::PENDING_EPOCH, 8);
    }
    if let Some(path) = path {
        let st = media.stat(&path).map_err(|e| io_err(&path, "stat", e))?;
        if st.len < committed_size {
            return Err(MmioError::corrupt(
                format!(
                    "host file {} is {} bytes but {} are committed: truncated behind atomfs's back",
                    path.display(),
                    st.len,
                    committed_size
                ),
                at,
            ));
        }
        if st.len > 0 && !entries.is_empty() {
            let map = media
                .map(&path, st.len)
                .map_err(|e| io_err(&path, "mmap", e))?;
            for (_, e) in entries {
                if e.epoch > meta.epoch {
                    return Err(MmioError::corrupt(
                        "index entry from a future epoch",
                        sb.index_at(0),
                    ));
                }
                let committed = e.epoch < meta.epoch;
                let apply = match e.policy {
                    Policy::Redo => committed,
                    Policy::Undo => !committed,
                };
                if !apply {
                    report.entries_discarded += 1;
                    continue;
                }
                let a = e.file_off + e.delta_off as u64;
                let b = (a + e.delta_len as u64).min(st.len);
                if a < b {
                    let mut buf = vec![0u8; (b - a) as usize];
                    pool.read(e.log_off + e.delta_off as u64, &mut buf);
                    map.write(a, &buf);
                    map.flush(a, b - a);
                }
                match e.policy {
                    Policy::Redo => report.entries_redone += 1,
                    Policy::Undo => report.entries_undone += 1,
                }
            }
            // persist: redone and undone bytes are home before any entry is freed.
            map.fence();
            media
                .check_map(&map)
                .map_err(|e| io_err(&path, "msync", e))?;
        } else {
            report.entries_discarded += entries.len() as u64;
        }
        if st.len != committed_size {
            // Growth of an uncommitted epoch (or a committed truncation not yet applied).
            media
                .set_len(&path, committed_size)
                .map_err(|e| io_err(&path, "set_len", e))?;
        }
        report.files_recovered += 1;
    } else {
        report.files_missing += 1;
        report.entries_discarded += entries.len() as u64;
    }
    for (idx, _) in entries {
        pool.store_u64(sb.index_at(*idx), 0);
        pool.flush(sb.index_at(*idx), 8);
    }
    // persist: the file's entries are free ...
    pool.fence();
    pool.store_u64(at + fm::HEADER, 0);
    // persist: ... before its slot is.
    pool.persist(at + fm::HEADER, 8);
    Ok(())
}
