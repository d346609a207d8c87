//! Format and recovery (seed §III-F): (1) scan the log and index the committed transactions;
//! (2) keep the committed data entries, sorted by commit sequence, and rebuild the TLVI and
//! the committed records, dropping uncommitted data entries; (3) undo uncommitted metadata
//! entries in reverse sequence order; then free orphan inodes and rebuild the volatile
//! allocators by walking the metadata. Every step is idempotent: a crash during recovery is
//! recovered by running it again.

use crate::alloc::FreeList;
use crate::checkpoint::CheckpointQueue;
use crate::config::{Mode, PoolConfig};
use crate::core::{Core, Counters};
use crate::data::tlvi::Version;
use crate::log::commits::CommitRecord;
use crate::log::entry::*;
use crate::media::layout::*;
use crate::sharing::Padded;
use parking_lot::{Mutex, RwLock};
use pmem::Region;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use store::{Error, Result};

/// What the last open found in the log and did about it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecoveryReport {
    /// Committed transactions whose entries were still in the log.
    pub committed_txs: u64,
    /// Uncommitted transactions rolled back.
    pub undone_txs: u64,
    /// Undo entries applied.
    pub undo_entries_applied: u64,
    /// FG-WAL line undo entries applied (their saved lines copied back).
    pub line_records_applied: u64,
    /// Committed data entries kept (redone lazily through the TLVI and checkpointing).
    pub redo_entries_kept: u64,
    /// Uncommitted data entries dropped.
    pub data_entries_dropped: u64,
    /// Entries with a bad seal (torn by the crash) cleared.
    pub torn_entries: u64,
    /// Orphan inodes (no link left) freed.
    pub orphans_freed: u64,
    /// Time the recovery took, in microseconds.
    pub micros: u64,
}

/// Write a fresh pool onto `region`.
pub(crate) fn format<R: Region>(region: &R, cfg: &PoolConfig) -> Result<Geometry> {
    let geo = Geometry::plan(region.len(), cfg)?;
    // Invalidate a previous superblock first, so that a crash while formatting never leaves a
    // valid superblock over half-initialised areas.
    region.fill(0, SB_SIZE, 0);
    region.persist(0, SB_SIZE);
    region.fill(
        geo.meta_log_offset,
        geo.blocks_offset - geo.meta_log_offset,
        0,
    );
    let root = geo.inode(ROOT_INO);
    let now = store::now_ns();
    let mut inode = [0u8; INODE_SIZE as usize];
    inode[I_KIND as usize] = KIND_DIR;
    inode[I_PERM as usize..I_PERM as usize + 4].copy_from_slice(&0o755u32.to_le_bytes());
    inode[I_NLINK as usize..I_NLINK as usize + 4].copy_from_slice(&1u32.to_le_bytes());
    for field in [I_MTIME, I_CTIME, I_ATIME, I_BTIME] {
        inode[field as usize..field as usize + 8].copy_from_slice(&now.to_le_bytes());
    }
    region.write(root, &inode);
    region.flush(geo.meta_log_offset, geo.blocks_offset - geo.meta_log_offset);
    // persist: logs empty, inode table empty but for the root, before the superblock says so.
    region.fence();
    let mode_number = cfg.mode as u32;
    let sb = geo.encode(mode_number);
    // Pair assertion: the superblock about to make the pool valid reads back as this geometry.
    assert_eq!(
        Geometry::decode(&sb, region.len()).ok(),
        Some(geo),
        "superblock does not survive its own encoding"
    );
    region.write(0, &sb);
    // persist: the superblock makes the pool valid.
    region.persist(0, SB_SIZE);
    Ok(geo)
}

/// Read and validate the superblock.
pub(crate) fn read_geometry<R: Region>(region: &R) -> Result<Geometry> {
    if region.len() < SB_SIZE {
        return Err(Error::BadMagic(format!(
            "region of {} bytes is too small for a pool",
            region.len()
        )));
    }
    let mut sb = [0u8; SB_CHECKED_LEN + 4];
    region.read(0, &mut sb);
    Geometry::decode(&sb, region.len())
}

struct Scan {
    commits: HashMap<u64, (u64, u64, u64)>, // txid -> (commit_seq, slot, members)
    /// txid -> commit time, for commits that carry one (`CommitEntry::time`).
    times: HashMap<u64, u64>,
    members: Vec<(u64, MemberEntry)>,
    undos: Vec<(u64, UndoEntry)>,
    data: Vec<(u64, DataEntry)>,
    lines: Vec<(u64, LinesEntry)>,
    max_txid: u64,
    max_seq: u64,
}

fn read_entry<R: Region>(region: &R, addr: u64) -> Entry {
    let mut line = [0u8; 64];
    region.read(addr, &mut line);
    Entry::decode(&line)
}

fn scan<R: Region>(core: &Core<R>, report: &mut RecoveryReport) -> Scan {
    let geo = core.geo;
    let mut s = Scan {
        commits: HashMap::new(),
        times: HashMap::new(),
        members: vec![],
        undos: vec![],
        data: vec![],
        lines: vec![],
        max_txid: 0,
        max_seq: 0,
    };
    for slot in 0..geo.metadata_log_entries {
        let addr = geo.meta_entry(slot);
        match read_entry(&*core.region, addr) {
            Entry::Free => {}
            Entry::Commit(c) => {
                s.max_txid = s.max_txid.max(c.txid);
                s.max_seq = s.max_seq.max(c.commit_seq);
                s.commits.insert(c.txid, (c.commit_seq, slot, c.members));
                if c.time != 0 {
                    s.times.insert(c.txid, c.time);
                }
            }
            Entry::Member(m) => {
                s.max_txid = s.max_txid.max(m.group.max(m.member));
                s.members.push((slot, m));
            }
            Entry::Undo(u) => {
                s.max_txid = s.max_txid.max(u.txid);
                s.undos.push((slot, u));
            }
            Entry::Torn | Entry::Data(_) | Entry::Lines(_) => {
                core.clear_entry(addr);
                report.torn_entries += 1;
            }
        }
    }
    for slot in 0..geo.data_log_entries {
        let addr = geo.data_entry(slot);
        match read_entry(&*core.region, addr) {
            Entry::Free => {}
            Entry::Data(d) => {
                s.max_txid = s.max_txid.max(d.txid);
                s.data.push((slot, d));
            }
            Entry::Lines(l) => {
                s.max_txid = s.max_txid.max(l.txid);
                s.lines.push((slot, l));
            }
            _ => {
                core.clear_entry(addr);
                report.torn_entries += 1;
            }
        }
    }
    s
}

/// Undo every uncommitted undo entry (reverse sequence order, later transactions first),
/// then free all undo and member entries. Returns the commit sequence of each committed
/// transaction, member transactions included.
fn undo_uncommitted<R: Region>(
    core: &Core<R>,
    s: &mut Scan,
    report: &mut RecoveryReport,
) -> HashMap<u64, u64> {
    let mut committed: HashMap<u64, u64> = s
        .commits
        .iter()
        .map(|(&t, &(seq, _, _))| (t, seq))
        .collect();
    for (_, m) in &s.members {
        if let Some(&(seq, _, _)) = s.commits.get(&m.group) {
            committed.insert(m.member, seq);
        }
    }
    let mut undone = std::collections::HashSet::new();
    // FG-WAL's saved lines first, while the member entries still say who committed.
    crate::modes::fg_wal::recover_lines(core, &s.lines, &committed, &mut undone, report);
    s.undos.sort_by_key(|(_, u)| (u.txid, u.seq));
    for (slot, u) in s.undos.iter().rev() {
        if committed.contains_key(&u.txid) {
            continue;
        }
        let len = u64::from(u.size);
        if core.geo.is_metadata_range(u.addr, len) {
            core.region.write(u.addr, &u.data[..u.size as usize]);
            core.region.flush(u.addr, len);
            report.undo_entries_applied += 1;
            undone.insert(u.txid);
        } else {
            // A sealed entry with an impossible address: rot the crc missed. Skip it.
            report.torn_entries += 1;
            let _ = slot;
        }
    }
    report.undone_txs = undone.len() as u64;
    // persist: the old bytes of every uncommitted transaction are back before its undo
    // entries are freed (a crash in between undoes them again: idempotent).
    core.region.fence();
    for (slot, _) in &s.undos {
        core.clear_entry(core.geo.meta_entry(*slot));
    }
    // persist: undo entries are gone before the member entries that name their transactions.
    core.region.fence();
    for (slot, _) in &s.members {
        core.clear_entry(core.geo.meta_entry(*slot));
    }
    core.region.fence();
    committed
}

/// Free an orphan's inode slot (recovery: its blocks are simply not marked in use).
/// Also continues the pool's clock (`Core::now`) past every inode's ctime.
fn free_orphans<R: Region>(core: &Core<R>, report: &mut RecoveryReport) -> Result<()> {
    core.clock.fetch_max(
        core.read_u64(core.geo.inode(ROOT_INO) + I_CTIME),
        Ordering::Relaxed,
    );
    for ino in 2..core.geo.inode_count {
        let off = core.geo.inode(ino);
        let kind = core.read_u8(off + I_KIND);
        if kind == KIND_FREE {
            continue;
        }
        if !core.kind_known(kind) {
            return Err(Error::corrupt(format!("inode {ino} has kind {kind}"), off));
        }
        core.clock
            .fetch_max(core.read_u64(off + I_CTIME), Ordering::Relaxed);
        if core.read_u32(off + I_NLINK) == 0 {
            core.region.write(off + I_KIND, &[KIND_FREE]);
            core.region.flush(off, 8);
            report.orphans_freed += 1;
        }
    }
    // persist: orphans are freed before their data entries are (they are dropped next).
    core.region.fence();
    Ok(())
}

/// Rebuild the TLVI from the committed data entries, in commit order.
fn rebuild_tlvi<R: Region>(
    core: &Core<R>,
    s: &Scan,
    committed: &HashMap<u64, u64>,
    report: &mut RecoveryReport,
) -> Result<HashMap<u64, u64>> {
    let mut kept: Vec<(u64, u64, DataEntry)> = Vec::new();
    for &(slot, d) in &s.data {
        let Some(&seq) = committed.get(&d.txid) else {
            core.clear_entry(core.geo.data_entry(slot));
            report.data_entries_dropped += 1;
            continue;
        };
        let live = d.ino > 0
            && d.ino < core.geo.inode_count
            && core.read_u8(core.geo.inode(d.ino) + I_KIND) == KIND_FILE;
        if !live {
            core.clear_entry(core.geo.data_entry(slot));
            report.data_entries_dropped += 1;
            continue;
        }
        let addr = core.geo.data_entry(slot);
        if core.pointer_addr(d.ino, d.lbn)? != Some(d.ptr_addr) || !core.geo.valid_pbn(d.pbn) {
            return Err(Error::corrupt(
                format!(
                    "redo entry for inode {} block {} names a bad pointer",
                    d.ino, d.lbn
                ),
                addr,
            ));
        }
        kept.push((seq, slot, d));
    }
    // persist: dropped data entries are gone before their slots are reused.
    core.region.fence();
    kept.sort_by_key(|&(seq, slot, _)| (seq, slot));
    let mut remaining: HashMap<u64, u64> = HashMap::new();
    for (_, slot, d) in kept {
        // The times of a pure overwrite are redone like its data (in commit order, so the
        // newest wins); the checkpoint makes them durable before it frees the entry.
        let time = match (d.times, s.times.get(&d.txid)) {
            (true, Some(&t)) => t,
            _ => 0,
        };
        if time != 0 {
            core.redo_times(d.ino, time);
            core.clock.fetch_max(time, Ordering::Relaxed);
        }
        let cell = core.cell(d.ino);
        let mut st = cell.lock();
        st.pending.list_mut(d.lbn).push(Version {
            pbn: d.pbn,
            bitmap: d.bitmap,
            txid: d.txid,
            committed: true,
            slot,
            ptr_addr: d.ptr_addr,
            time,
            from_permanent: true,
        });
        *remaining.entry(d.txid).or_default() += 1;
        report.redo_entries_kept += 1;
    }
    Ok(remaining)
}

/// Blocks in use: every tree of every live inode, plus the pending blocks.
fn used_blocks<R: Region>(core: &Core<R>) -> Result<Vec<bool>> {
    let mut used = vec![false; core.geo.block_count as usize];
    used[0] = true;
    for ino in 1..core.geo.inode_count {
        if core.read_u8(core.geo.inode(ino) + I_KIND) == KIND_FREE {
            continue;
        }
        let mut mark = |pbn: u64, _, _| {
            if std::mem::replace(&mut used[pbn as usize], true) {
                return Err(Error::corrupt(
                    format!("block {pbn} referenced twice (inode {ino})"),
                    core.geo.block(pbn),
                ));
            }
            Ok(())
        };
        core.walk_tree(ino, &mut mark)?;
        for pbn in core.xattr_blocks(ino)? {
            mark(pbn, false, 0)?;
        }
    }
    let cells: Vec<_> = core.cells.read().values().cloned().collect();
    for cell in cells {
        let st = cell.lock();
        for list in st.pending.values() {
            for v in list {
                // A version may also be the permanent block (crash after a pointer swing).
                let permanent = core.pointed_pbn(v.ptr_addr);
                if std::mem::replace(&mut used[v.pbn as usize], true) && permanent != v.pbn {
                    return Err(Error::corrupt(
                        format!("pending block {} is in use elsewhere", v.pbn),
                        core.geo.block(v.pbn),
                    ));
                }
            }
        }
    }
    Ok(used)
}

/// Open a formatted pool: validate, recover, rebuild the volatile state.
pub(crate) fn open_core<R: Region>(
    region: Arc<R>,
    cfg: &PoolConfig,
) -> Result<(Core<R>, RecoveryReport)> {
    let started = Instant::now();
    let mut core = bare_core(region, cfg)?;
    let mut report = RecoveryReport::default();
    recover(&mut core, cfg, &mut report)?;
    report.micros = started.elapsed().as_micros() as u64;
    Ok((core, report))
}

/// A core over a pool whose superblock validates, with empty volatile state: nothing read
/// past the superblock, nothing written. Recovery (`recover`) and repair (repair.rs) start
/// from it.
pub(crate) fn bare_core<R: Region>(region: Arc<R>, cfg: &PoolConfig) -> Result<Core<R>> {
    let geo = read_geometry(&*region)?;
    region.define_area("superblock", 0, SB_SIZE);
    region.define_area(
        "metadata log",
        geo.meta_log_offset,
        geo.metadata_log_entries * ENTRY_SIZE,
    );
    region.define_area(
        "data log",
        geo.data_log_offset,
        geo.data_log_entries * ENTRY_SIZE,
    );
    region.define_area(
        "inode table",
        geo.inode_offset,
        geo.inode_count * INODE_SIZE,
    );
    region.define_area("blocks", geo.blocks_offset, geo.block_count * BLOCK_SIZE);
    let core = Core {
        region,
        geo,
        cfg: cfg.clone(),
        blocks: FreeList::new(0, |_| false),
        meta_slots: FreeList::new(0, |_| false),
        data_slots: FreeList::new(0, |_| false),
        inodes_free: FreeList::new(0, |_| false),
        cells: Padded::new(RwLock::new(Default::default())),
        ns: Mutex::new(()),
        unlinking: Default::default(),
        creates: Default::default(),
        next_txid: Padded::new(AtomicU64::new(1)),
        commit_seq: Padded::new(AtomicU64::new(1)),
        clock: Padded::new(AtomicU64::new(0)),
        room_credit: Padded::new(AtomicI64::new(0)),
        commits: Default::default(),
        counters: Counters::default(),
        closed: AtomicBool::new(false),
        checkpointer: Arc::new(CheckpointQueue::new()),
        spare_txs: Mutex::new(Vec::new()),
    };
    Ok(core)
}

/// Recovery starts from a core with no volatile state (`bare_core`): no allocator, no
/// inode state, no committed record. A second recovery over a running core would hand out
/// numbers twice.
fn assert_bare<R: Region>(core: &mut Core<R>) {
    assert!(
        core.blocks.total() == 0
            && core.meta_slots.total() == 0
            && core.data_slots.total() == 0
            && core.inodes_free.total() == 0,
        "recovery starts from a bare core (allocators already built)"
    );
    assert!(
        core.cells.read().is_empty() && core.commits.len_mut() == 0,
        "recovery starts from a bare core (volatile state already built)"
    );
}

/// Run recovery on a bare core and rebuild its volatile state. `report` counts what was
/// done even when a damaged structure stops it part way (repair reads the partial counts).
pub(crate) fn recover<R: Region>(
    core: &mut Core<R>,
    cfg: &PoolConfig,
    report: &mut RecoveryReport,
) -> Result<()> {
    let geo = core.geo;
    assert_bare(core);
    if core.read_u8(geo.inode(ROOT_INO) + I_KIND) != KIND_DIR {
        return Err(Error::corrupt(
            "root inode is not a directory",
            geo.inode(ROOT_INO),
        ));
    }
    let mut s = scan(core, report);
    let committed = undo_uncommitted(core, &mut s, report);
    free_orphans(core, report)?;
    let remaining = rebuild_tlvi(core, &s, &committed, report)?;
    // Every kept redo entry belongs to a committed transaction and is counted once.
    assert_eq!(remaining.values().sum::<u64>(), report.redo_entries_kept);
    assert!(remaining.keys().all(|txid| committed.contains_key(txid)));
    let mut records = HashMap::new();
    for (&txid, &(_, slot, _)) in &s.commits {
        match remaining.get(&txid) {
            Some(&n) => {
                records.insert(
                    txid,
                    CommitRecord {
                        data_remaining: n,
                        commit_slot: slot,
                        undo_slots: Default::default(),
                        member_slots: Default::default(),
                    },
                );
            }
            None => core.clear_entry(geo.meta_entry(slot)),
        }
    }
    // persist: commit entries with nothing left are freed (durable before slot reuse).
    core.region.fence();
    report.committed_txs = s.commits.len() as u64;
    let used = used_blocks(core)?;
    core.blocks = FreeList::new(geo.block_count, |pbn| !used[pbn as usize]);
    let meta_used: std::collections::HashSet<u64> =
        records.values().map(|r| r.commit_slot).collect();
    core.meta_slots = FreeList::new(geo.metadata_log_entries, |slot| !meta_used.contains(&slot));
    let data_used: std::collections::HashSet<u64> = core
        .cells
        .read()
        .values()
        .flat_map(|c| {
            c.lock()
                .pending
                .values()
                .flatten()
                .map(|v| v.slot)
                .collect::<Vec<_>>()
        })
        .collect();
    // Each kept redo entry has a slot of its own (two versions naming one slot would have
    // the checkpoint free it twice).
    assert_eq!(data_used.len() as u64, report.redo_entries_kept);
    core.data_slots = FreeList::new(geo.data_log_entries, |slot| !data_used.contains(&slot));
    let inode_kinds: Vec<u8> = (0..geo.inode_count)
        .map(|i| core.read_u8(geo.inode(i) + I_KIND))
        .collect();
    core.inodes_free = FreeList::new(geo.inode_count, |ino| {
        ino > ROOT_INO && inode_kinds[ino as usize] == KIND_FREE
    });
    // In id order: the table's window starts at the oldest.
    let mut records: Vec<_> = records.into_iter().collect();
    records.sort_unstable_by_key(|r| r.0);
    core.commits.load(records);
    // The only metadata-log entries left are the commit entries still owed data entries.
    assert_eq!(
        core.meta_slots.free_count() + core.commits.len_mut() as u64,
        geo.metadata_log_entries
    );
    // Both are bounded by Entry::decode (txid <= TXID_MAX, sequence < COMMIT_SEQ_LIMIT).
    assert!(s.max_txid <= TXID_MAX && s.max_seq < COMMIT_SEQ_LIMIT);
    core.next_txid = Padded::new(AtomicU64::new(s.max_txid + 1));
    core.commit_seq = Padded::new(AtomicU64::new(s.max_seq + 1));
    if matches!(cfg.mode, Mode::Nc | Mode::FgWal | Mode::Scsp) {
        // These modes write under the block pointer and never look for versions: committed
        // versions a pool last run in FCFS, SOC or SYNC mode left are applied first, or
        // reads would keep serving their lines over the newer bytes.
        core.checkpoint_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{bare_core, format, recover, RecoveryReport};
    use crate::PoolConfig;
    use pmem::DramRegion;
    use std::sync::Arc;

    #[test]
    #[should_panic(expected = "recovery starts from a bare core")]
    fn a_second_recovery_over_a_recovered_core_is_caught() {
        let region = Arc::new(DramRegion::new(8 << 20));
        let cfg = PoolConfig::test_min();
        format(&*region, &cfg).expect("format");
        let mut core = bare_core(region, &cfg).expect("bare core");
        let mut report = RecoveryReport::default();
        recover(&mut core, &cfg, &mut report).expect("recovery");
        let _ = recover(&mut core, &cfg, &mut report);
    }
}
