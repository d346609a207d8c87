//! The store's own bounded resources (`Store::limits`, what `atomfs info` shows) and the
//! check of the one a write can reach: uncommitted blocks per file.

use super::Inner;
use crate::format::BLOCK;
use hostfs::HostFs;
use store::{Error, Ino, Limit, Result};

impl<H: HostFs> Inner<H> {
    /// ENOSPC when writing `len` bytes at `off` of `ino` would leave more than
    /// `pending_blocks_max` uncommitted blocks in the file (nothing is changed then).
    pub(crate) fn check_pending_room(&self, ino: Ino, off: u64, len: u64) -> Result<()> {
        let Some(i) = self.st.inodes.get(&ino) else {
            return Ok(());
        };
        let max = self.config.pending_blocks_max;
        let (first, last) = (off / BLOCK, (off + len).div_ceil(BLOCK));
        let have = i.atree.pending_count();
        // Blocks the write adds (each touched block not yet pending), counted up to the room.
        let room = max.saturating_sub(have);
        let mut adds = 0u64;
        for b in first..last {
            if !i.atree.is_pending(b) {
                adds += 1;
                if adds > room {
                    return Err(Error::NoSpace(format!(
                        "inode {ino}: {have} uncommitted blocks, the write adds more than \
                         {room}: at most {max} per file (pending_blocks_max); commit (fsync) \
                         or abort first"
                    )));
                }
            }
        }
        Ok(())
    }

    /// ENOSPC when `adds` more uncommitted blocks would leave more than `pending_blocks_max`
    /// in file `ino` (fallocate: nothing is changed then).
    pub(crate) fn check_pending_adds(&self, ino: Ino, adds: u64) -> Result<()> {
        let Some(i) = self.st.inodes.get(&ino) else {
            return Ok(());
        };
        let (max, have) = (self.config.pending_blocks_max, i.atree.pending_count());
        if have.saturating_add(adds) > max {
            return Err(Error::NoSpace(format!(
                "inode {ino}: {have} uncommitted blocks, the call adds {adds}: at most {max} \
                 per file (pending_blocks_max); commit (fsync) or abort first"
            )));
        }
        Ok(())
    }

    pub(crate) fn limits(&self) -> Vec<Limit> {
        let pending = self
            .st
            .inodes
            .values()
            .map(|i| i.atree.pending_count())
            .max()
            .unwrap_or(0);
        let xattrs = self
            .st
            .inodes
            .values()
            .map(|i| i.xattr_bytes())
            .max()
            .unwrap_or(0);
        vec![
            Limit::new(
                "extended attribute bytes per inode (names and values; largest now)",
                self.config.xattr_bytes_max,
                Some(xattrs),
                "ENOSPC",
            ),
            Limit::new(
                "open files",
                self.config.open_files_max,
                Some(self.st.handles.len() as u64),
                "EMFILE",
            ),
            Limit::new(
                "open transactions",
                self.config.open_transactions_max,
                Some(self.st.txs.len() as u64),
                "EMFILE",
            ),
            Limit::new(
                "uncommitted blocks per file (largest now)",
                self.config.pending_blocks_max,
                Some(pending),
                "ENOSPC",
            ),
            Limit::new(
                "journal bytes before a checkpoint (grows past it while transactions or \
                 O_ATOMIC writes hold the checkpoint back)",
                self.config.checkpoint_journal_len,
                Some(self.journal.len_bytes()),
                "none: a checkpoint",
            ),
        ]
    }
}
