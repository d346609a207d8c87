//! Read-only views of a pool for the CLI's `inspect` and `info`, and the named counters.

use crate::api::pool_store::PoolStore;
use crate::core::Core;
use crate::log::entry::Entry;
use crate::media::layout::*;
use pmem::Region;
use std::sync::atomic::Ordering;
use store::Result;

/// Superblock and geometry.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SuperblockInfo {
    pub format_version: u32,
    pub block_size: u64,
    pub mode: String,
    /// File data blocks carry a crc32c in their block pointer (format time).
    pub data_checksums: bool,
    pub geometry: Geometry,
}

/// How full the two log areas are.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LogOccupancy {
    pub metadata_entries_used: u64,
    pub metadata_entries_total: u64,
    pub data_entries_used: u64,
    pub data_entries_total: u64,
    pub blocks_free: u64,
    pub blocks_total: u64,
}

/// One valid (or torn) entry of the log.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LogEntryInfo {
    pub area: &'static str,
    pub slot: u64,
    pub kind: &'static str,
    pub txid: u64,
    /// Undo: address; data: pointer address; lines: address of the target block.
    pub addr: u64,
    /// Undo: sequence and size; commit: commit sequence and data entries; data: ino, lbn,
    /// pending pbn, bitmap; lines (FG-WAL): sequence, ino, target and undo pbn, bitmap, crc.
    pub fields: Vec<(String, u64)>,
}

/// One version in a pending list.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VersionInfo {
    pub pbn: u64,
    pub bitmap: u64,
    pub txid: u64,
    pub committed: bool,
    pub slot: u64,
}

/// The pending list of one block.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PendingListInfo {
    pub ino: u64,
    pub lbn: u64,
    pub permanent_pbn: u64,
    pub versions: Vec<VersionInfo>,
}

/// A file's block map.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BlockMapInfo {
    pub ino: u64,
    pub size: u64,
    pub tree_height: u32,
    pub tree_root: u64,
    pub index_blocks: Vec<u64>,
    /// (logical block, permanent block) for every allocated block.
    pub blocks: Vec<(u64, u64)>,
}

impl<R: Region> PoolStore<R> {
    pub fn superblock(&self) -> SuperblockInfo {
        SuperblockInfo {
            format_version: self.core.geo.format_version(),
            block_size: BLOCK_SIZE,
            mode: self.core.mode().name().into(),
            data_checksums: self.core.geo.data_checksums,
            geometry: self.core.geo,
        }
    }

    pub fn log_occupancy(&self) -> LogOccupancy {
        let c = &self.core;
        LogOccupancy {
            metadata_entries_used: c.meta_slots.total() - c.meta_slots.free_count(),
            metadata_entries_total: c.geo.metadata_log_entries,
            data_entries_used: c.data_slots.total() - c.data_slots.free_count(),
            data_entries_total: c.geo.data_log_entries,
            blocks_free: c.blocks.free_count(),
            blocks_total: c.geo.block_count,
        }
    }

    /// Every non-free entry of both log areas.
    pub fn log_entries(&self) -> Vec<LogEntryInfo> {
        let c = &self.core;
        let mut out = Vec::new();
        let areas = [
            (
                "metadata",
                c.geo.metadata_log_entries,
                c.geo.meta_log_offset,
            ),
            ("data", c.geo.data_log_entries, c.geo.data_log_offset),
        ];
        for (area, count, base) in areas {
            for slot in 0..count {
                let mut line = [0u8; 64];
                c.region.read(base + slot * ENTRY_SIZE, &mut line);
                let info = |kind, txid, addr, fields: Vec<(&str, u64)>| LogEntryInfo {
                    area,
                    slot,
                    kind,
                    txid,
                    addr,
                    fields: fields
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                };
                match Entry::decode(&line) {
                    Entry::Free => {}
                    Entry::Torn => out.push(info("torn", 0, 0, vec![])),
                    Entry::Undo(u) => out.push(info(
                        "undo",
                        u.txid,
                        u.addr,
                        vec![("seq", u.seq.into()), ("size", u.size.into())],
                    )),
                    Entry::Commit(e) => out.push(info(
                        "commit",
                        e.txid,
                        0,
                        vec![
                            ("commit_seq", e.commit_seq),
                            ("data_entries", e.data_entries),
                            ("members", e.members),
                        ],
                    )),
                    Entry::Member(m) => {
                        out.push(info("member", m.member, 0, vec![("group", m.group)]))
                    }
                    Entry::Data(d) => out.push(info(
                        "data",
                        d.txid,
                        d.ptr_addr,
                        vec![
                            ("ino", d.ino),
                            ("lbn", d.lbn),
                            ("pbn", d.pbn),
                            ("bitmap", d.bitmap),
                        ],
                    )),
                    Entry::Lines(l) => out.push(info(
                        "lines",
                        l.txid,
                        c.geo.block(l.target),
                        vec![
                            ("seq", l.seq.into()),
                            ("ino", l.ino),
                            ("target_pbn", l.target),
                            ("undo_pbn", l.undo),
                            ("bitmap", l.bitmap),
                            ("crc", l.crc.into()),
                        ],
                    )),
                }
            }
        }
        out
    }

    /// Pending lists of one file (or of every file with `None`).
    pub fn pending_lists(&self, ino: Option<u64>) -> Result<Vec<PendingListInfo>> {
        let cells: Vec<_> = self
            .core
            .cells
            .read()
            .iter()
            .filter(|(i, _)| ino.is_none_or(|x| x == **i))
            .map(|(_, c)| c.clone())
            .collect();
        let mut out = Vec::new();
        for cell in cells {
            let st = cell.lock();
            for (lbn, list) in &st.pending {
                let (permanent_pbn, _) = self.core.permanent_block(st.ino, lbn)?;
                let versions = list
                    .iter()
                    .map(|v| VersionInfo {
                        pbn: v.pbn,
                        bitmap: v.bitmap,
                        txid: v.txid,
                        committed: v.committed,
                        slot: v.slot,
                    })
                    .collect();
                out.push(PendingListInfo {
                    ino: st.ino,
                    lbn,
                    permanent_pbn,
                    versions,
                });
            }
        }
        out.sort_by_key(|p| (p.ino, p.lbn));
        Ok(out)
    }

    /// A file's block map.
    pub fn block_map(&self, ino: u64) -> Result<BlockMapInfo> {
        let c = &self.core;
        c.inode_kind(ino)?;
        let (root, height) = c.tree_root(ino)?;
        let mut map = BlockMapInfo {
            ino,
            size: c.read_u64(c.geo.inode(ino) + I_SIZE),
            tree_height: height,
            tree_root: root,
            index_blocks: vec![],
            blocks: vec![],
        };
        c.walk_tree(ino, &mut |pbn, index, lbn| {
            if index {
                map.index_blocks.push(pbn);
            } else {
                map.blocks.push((lbn, pbn));
            }
            Ok(())
        })?;
        Ok(map)
    }
}

/// Named counters for `Store::stats`.
pub(crate) fn counters<R: Region>(c: &Core<R>, open_txs: u64) -> Vec<(String, u64)> {
    let n = &c.counters;
    let rs = c.region.stats();
    let pending: u64 = c
        .cells
        .read()
        .values()
        .map(|cell| {
            cell.lock()
                .pending
                .values()
                .map(|l| l.len() as u64)
                .sum::<u64>()
        })
        .sum();
    [
        ("commits", n.commits.load(Ordering::Relaxed)),
        ("aborts", n.aborts.load(Ordering::Relaxed)),
        ("checkpoints", n.checkpoints.load(Ordering::Relaxed)),
        (
            "checkpoint_lines_copied",
            n.checkpoint_lines_copied.load(Ordering::Relaxed),
        ),
        (
            "checkpoint_pointer_swings",
            n.checkpoint_pointer_swings.load(Ordering::Relaxed),
        ),
        (
            "versions_created",
            n.versions_created.load(Ordering::Relaxed),
        ),
        (
            "undo_entries_written",
            n.undo_entries.load(Ordering::Relaxed),
        ),
        (
            "foreground_checkpoints",
            n.foreground_checkpoints.load(Ordering::Relaxed),
        ),
        ("pending_versions", pending),
        ("open_transactions", open_txs),
        (
            "metadata_log_used",
            c.meta_slots.total() - c.meta_slots.free_count(),
        ),
        (
            "data_log_used",
            c.data_slots.total() - c.data_slots.free_count(),
        ),
        ("blocks_free", c.blocks.free_count()),
        ("blocks_total", c.geo.block_count),
        ("region_bytes_stored", rs.bytes_stored),
        ("region_lines_flushed", rs.lines_flushed),
        ("region_fences", rs.fences),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
