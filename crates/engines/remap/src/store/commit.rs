//! Commit: turn a set of changed inodes into one journal record (SDJ: metadata operations
//! and the pending pairs' data, written once, one `sync_data`), then flip the pairs to
//! committed. The record carries, per inode, its attributes; the transaction's own
//! directory-entry operations; per file, its truncation point and its new pairs.

use super::Inner;
use crate::atree::{Block, Pair};
use crate::format::ops::{MetaOp, Op, PairRef, HOLE_INDEX};
use crate::namespace::inode::{Inode, XattrsState};
use hostfs::HostFs;
use std::sync::Arc;
use store::{FileKind, Ino, Result};

pub(crate) fn meta_op(i: &Inode) -> MetaOp {
    MetaOp {
        ino: i.meta.ino,
        kind: i.meta.kind,
        perm: i.meta.perm,
        uid: i.meta.uid,
        gid: i.meta.gid,
        size: i.meta.size,
        atime: i.meta.atime,
        mtime: i.meta.mtime,
        ctime: i.meta.ctime,
        parent: i.parent,
    }
}

/// The operations after an inode's `Meta` that carry what only some kinds have: a
/// symlink's target, a special file's device number (`Node`); the extended attributes when
/// `all_xattrs` or when they changed since the last commit (`Xattrs`).
pub(crate) fn node_ops(i: &Inode, all_xattrs: bool) -> Vec<Op> {
    let mut ops = Vec::new();
    if i.meta.kind == FileKind::Symlink || i.meta.kind.is_special() {
        ops.push(Op::Node {
            ino: i.meta.ino,
            rdev: i.meta.rdev,
            target: i.target.clone(),
        });
    }
    let changed = i.xattrs_changed == XattrsState::Changed;
    if (all_xattrs && !i.xattrs.is_empty()) || changed {
        ops.push(Op::Xattrs {
            ino: i.meta.ino,
            attrs: i
                .xattrs
                .iter()
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
        });
    }
    ops
}

/// A commit's record before it is written.
#[derive(Default)]
struct Draft {
    metas: Vec<Op>,
    data_ops: Vec<Op>,
    data: Vec<Arc<Block>>,
    /// (inode, file block, data index) of every pair the record carries.
    placed: Vec<(Ino, u64, u32)>,
    /// (inode, file block) of every hole pair the record carries.
    holes: Vec<(Ino, u64)>,
}

impl Draft {
    fn add_file(&mut self, i: &Inode) {
        let mut pairs = Vec::new();
        for (b, d) in i.atree.pending() {
            let index = self.data.len() as u32;
            pairs.push(PairRef {
                file_block: b,
                data_index: index,
                crc: crc32c::crc32c(&d[..]),
            });
            self.data.push(d.clone());
            self.placed.push((i.meta.ino, b, index));
        }
        for b in i.atree.pending_holes() {
            pairs.push(PairRef {
                file_block: b,
                data_index: HOLE_INDEX,
                crc: 0,
            });
            self.holes.push((i.meta.ino, b));
        }
        if !pairs.is_empty() || i.cut.is_some() {
            self.data_ops.push(Op::Data {
                ino: i.meta.ino,
                cut: i.cut,
                pairs,
            });
        }
    }
}

impl<H: HostFs> Inner<H> {
    /// Make the changes of `inos` (with the directory-entry operations `log`) durable as one
    /// record. Inodes that are gone are skipped (their entries' removal is in `log`).
    pub(crate) fn commit(&mut self, mut inos: Vec<Ino>, log: Vec<Op>) -> Result<()> {
        self.healthy()?;
        inos.sort_unstable();
        inos.dedup();
        // Exchange commits (store/exchange.rs): stage first; a failure here commits nothing.
        let mut staged = Vec::new();
        for ino in self.exchange_candidates(&inos) {
            staged.push(self.stage(ino)?);
        }
        let mut draft = Draft::default();
        for ino in &inos {
            let Some(i) = self.st.inodes.get(ino) else {
                continue;
            };
            if let Some(base) = self.st.atomic_base.get(ino) {
                // An O_ATOMIC file with writes not fsynced, changed by a namespace call
                // (setattr, setxattr, rename, link): the record carries its attributes but
                // the data as of its last fsync; the pending writes wait for theirs.
                draft.metas.push(Op::Meta(MetaOp {
                    size: base.meta.size,
                    ..meta_op(i)
                }));
                draft.metas.extend(node_ops(i, false));
                continue;
            }
            draft.metas.push(Op::Meta(meta_op(i)));
            draft.metas.extend(node_ops(i, false));
            if let Some(x) = staged.iter().find(|x| x.ino == *ino) {
                draft.data_ops.push(Op::Exchange {
                    ino: x.ino,
                    size: x.size,
                    blocks: x.blocks.clone(),
                });
            } else if i.meta.kind == FileKind::File {
                draft.add_file(i);
            }
        }
        if draft.metas.is_empty() && log.is_empty() {
            return Ok(());
        }
        let mut ops = draft.metas;
        ops.extend(log);
        ops.append(&mut draft.data_ops);
        ops.push(Op::NextIno(self.st.next_ino));
        assert!(
            ops.iter().all(|op| op.in_format(self.format)),
            "a format {} store is never given a newer format's record",
            self.format.number()
        );
        let first = self.journal.len_bytes() / crate::format::BLOCK;
        let start = match self.journal.append(&self.media, &ops, &draft.data) {
            Ok(start) => start,
            Err(e) => {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        };
        self.record(crate::ftl::TraceEvent::JournalWrite {
            block: first,
            blocks: self.journal.len_bytes() / crate::format::BLOCK - first,
        });
        self.counters.commits += 1;
        self.counters.commit_blocks += draft.data.len() as u64;
        for (ino, b, index) in draft.placed {
            if let Some(i) = self.st.inodes.get_mut(&ino) {
                i.atree.insert(b, Pair::Committed(start + u64::from(index)));
            }
        }
        for (ino, b) in draft.holes {
            if let Some(i) = self.st.inodes.get_mut(&ino) {
                i.atree.insert(b, Pair::CommittedHole);
            }
        }
        for ino in &inos {
            if self.st.atomic_base.contains_key(ino) {
                self.st.keep_attributes_in_base(*ino);
                continue;
            }
            if let Some(i) = self.st.inodes.get_mut(ino) {
                i.xattrs_changed = XattrsState::Logged;
                i.cut = None;
                i.dirty |= i.meta.kind == FileKind::File;
            }
        }
        if !staged.is_empty() {
            return self.finish_exchanges(&staged);
        }
        for ino in &inos {
            if let Some(i) = self.st.inodes.get(ino) {
                assert!(
                    i.atree.pending_count() == 0 || self.st.atomic_base.contains_key(ino),
                    "commit leaves no pending pair but an O_ATOMIC file's"
                );
            }
        }
        self.checkpoint_if_due();
        Ok(())
    }

    /// Steps 3 and 4 of an exchange commit whose record is durable: swap every staged file
    /// in, then checkpoint at once (the record must stay the last of its generation). A
    /// failure leaves the swap to recovery: the store refuses changes until reopened.
    fn finish_exchanges(&mut self, staged: &[super::exchange::Staged]) -> Result<()> {
        let mut result = Ok(());
        for x in staged {
            result = result.and_then(|()| self.swap_in(x));
        }
        let result = result.and_then(|()| match self.checkpoint()? {
            true => Ok(()),
            false => Err(store::Error::InvalidArgument(
                "remap: a checkpoint after an exchange commit was held back".into(),
            )),
        });
        if let Err(e) = &result {
            self.failed = Some(format!("completing an exchange commit: {e}"));
        }
        result
    }

    /// Checkpoint when the journal passed its limit (and nothing holds the checkpoint back).
    /// A failed checkpoint (ENOSPC on a home file, ...) loses nothing: the journal still
    /// holds every committed pair, and the next commit retries.
    pub(crate) fn checkpoint_if_due(&mut self) {
        let due = self.journal.len_bytes() >= self.config.checkpoint_journal_len;
        if due && self.st.quiescent() && self.checkpoint().is_err() {
            self.counters.checkpoint_failures += 1;
        }
    }
}
