//! Exchange commits: a commit that rewrites most of a file (at least
//! `exchange_blocks_min` blocks and `exchange_share_percent` of the file) on a file system
//! with XFS_IOC_EXCHANGE_RANGE builds the file's new content in a staging file and swaps it
//! into the home file with one exchange, instead of journaling every block and remapping it
//! at the checkpoint.
//!
//! Protocol (one file; the store lock is held throughout):
//! 1. stage: `files/<ino>.stage` = the home file cloned (FICLONERANGE, no copy) with the
//!    commit's blocks written over it; both files are given one block-aligned length; the
//!    staging file's data and name are made durable;
//! 2. commit point: the journal record carries the file's attributes and an `Exchange` op
//!    naming the changed blocks with the crc32c of each new block (one `sync_data`);
//! 3. swap: XFS_IOC_EXCHANGE_RANGE staging ⇄ home (all or nothing at a crash), the home
//!    file cut to the file's size and synced;
//! 4. a full checkpoint at once: its snapshot retires the record, so an exchange record is
//!    always the last record of its generation (no later clone into the home file can
//!    follow it), and the staging file (now the old content) is removed after it.
//!
//! An exchange is a swap: redoing one that happened would undo it. Recovery therefore never
//! redoes it blindly; it reads the changed blocks:
//!
//! | home blocks match the crcs | staging blocks match | meaning                 | action        |
//! |----------------------------|----------------------|-------------------------|---------------|
//! | yes                        | -                    | swapped (or no change)  | none          |
//! | no                         | yes                  | not swapped             | swap now      |
//! | no                         | no                   | damaged behind our back | error (fsck)  |
//!
//! Eligible only when nothing else is in flight (no open transaction, no pending O_ATOMIC
//! write: the checkpoint of step 4 must run) and the file has no committed block not yet
//! checkpointed (its home file is its content below `home_blocks`).

use super::Inner;
use crate::format::{BLOCK, BLOCK_USIZE};
use crate::host_err;
use crate::journal::media::Media;
use crate::CheckpointMode;
use hostfs::{HostFs, OpenOptions};
use store::{Error, FileKind, Ino, Result};

/// A staged file: its changed blocks with their crcs, and the size.
pub(crate) struct Staged {
    pub ino: Ino,
    pub size: u64,
    pub blocks: Vec<(u64, u32)>,
}

/// crc32c of block `b` of a file of `size` bytes holding `data` (bytes past the size count
/// as zeros, as the staging file holds them).
fn block_crc(data: &[u8; BLOCK_USIZE], b: u64, size: u64) -> u32 {
    let end = size.saturating_sub(b * BLOCK).min(BLOCK) as usize;
    let mut block = *data;
    block.get_mut(end..).unwrap_or_default().fill(0);
    crc32c::crc32c(&block)
}

impl<H: HostFs> Inner<H> {
    /// The files of `inos` whose commit takes the exchange path now.
    pub(crate) fn exchange_candidates(&self, inos: &[Ino]) -> Vec<Ino> {
        let caps = self.media.fs.capabilities();
        if self.mode != CheckpointMode::Remap || !caps.exchange_range || !self.st.quiescent() {
            return Vec::new();
        }
        let (min, share) = (
            self.config.exchange_blocks_min.max(1),
            self.config.exchange_share_percent,
        );
        inos.iter()
            .copied()
            .filter(|ino| {
                let Some(i) = self.st.inodes.get(ino) else {
                    return false;
                };
                let changed = i.atree.pending().count() as u64;
                let file_blocks = i.meta.size.div_ceil(BLOCK);
                // (A file with holes journals as usual: the stage clones home blocks.)
                i.meta.kind == FileKind::File
                    && i.atree.committed().next().is_none()
                    && i.atree.hole_count() == 0
                    && i.home_holes.is_empty()
                    && i.cut.is_none()
                    && changed >= min
                    && changed * 100 >= share * file_blocks
            })
            .collect()
    }

    /// Step 1: build the staging file of `ino` and make it durable.
    pub(crate) fn stage(&mut self, ino: Ino) -> Result<Staged> {
        let i = self
            .st
            .inodes
            .get(&ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let (size, keep) = (i.meta.size, i.home_blocks * BLOCK);
        let pending: Vec<(u64, std::sync::Arc<crate::atree::Block>)> = i
            .atree
            .pending()
            .filter(|(b, _)| b * BLOCK < size)
            .map(|(b, d)| (b, d.clone()))
            .collect();
        let home = self
            .media
            .home(ino, true)?
            .ok_or_else(|| Error::NotFound(format!("home file of inode {ino}")))?;
        let fs = &self.media.fs;
        // The home file past `home_blocks` is stale (until a checkpoint cuts it): drop it,
        // so that no stale byte can be swapped into view or mistaken for new data.
        let mut home_len = fs.file_stat(&home).map_err(host_err)?.len;
        if home_len > keep {
            fs.set_len(&home, keep).map_err(host_err)?;
            home_len = keep;
        }
        let path = self.media.names.stage(ino);
        let stage = fs.open(&path, &OpenOptions::create()).map_err(host_err)?;
        fs.set_len(&stage, 0).map_err(host_err)?;
        let mut blocks = Vec::with_capacity(pending.len());
        for (b, d) in &pending {
            blocks.push((*b, block_crc(d, *b, size)));
        }
        // The home file's whole blocks the commit leaves alone are cloned (no copy), the
        // changed blocks written, each contiguous run with one call.
        let whole = home_len / BLOCK;
        let mut next = 0u64;
        for run in runs(&pending) {
            let (first, n) = (run[0].0, run.len() as u64);
            if next < first.min(whole) {
                let end = first.min(whole);
                fs.clone_range(
                    &home,
                    next * BLOCK,
                    &stage,
                    next * BLOCK,
                    (end - next) * BLOCK,
                )
                .map_err(host_err)?;
            }
            let mut buf = Vec::with_capacity(run.len() * BLOCK_USIZE);
            for (_, d) in run {
                buf.extend_from_slice(&d[..]);
            }
            fs.write_all_at(&stage, first * BLOCK, &buf)
                .map_err(host_err)?;
            next = first + n;
        }
        if next < whole {
            fs.clone_range(
                &home,
                next * BLOCK,
                &stage,
                next * BLOCK,
                (whole - next) * BLOCK,
            )
            .map_err(host_err)?;
        }
        if home_len > whole * BLOCK && !pending.iter().any(|(b, _)| *b == whole) {
            let mut tail = vec![0u8; (home_len - whole * BLOCK) as usize];
            fs.read_full_at(&home, whole * BLOCK, &mut tail)
                .map_err(host_err)?;
            fs.write_all_at(&stage, whole * BLOCK, &tail)
                .map_err(host_err)?;
        }
        // Both files get one block-aligned length (the exchange's range); past `size` the
        // staging file reads as zeros.
        let len = size.max(home_len).div_ceil(BLOCK) * BLOCK;
        fs.set_len(&stage, size).map_err(host_err)?;
        fs.set_len(&stage, len).map_err(host_err)?;
        fs.set_len(&home, len).map_err(host_err)?;
        // persist: the staged content, and both files' lengths (the swap moves data within
        // them: a home file whose new length were lost would lose the swapped-in tail),
        // are durable before the record that names them.
        fs.sync_data(&stage).map_err(host_err)?;
        fs.sync_data(&home).map_err(host_err)?;
        self.media.files_dir_changed();
        self.media.sync_files_dir()?;
        Ok(Staged { ino, size, blocks })
    }

    /// Step 3, after the record is durable: swap the staged content in, cut the home file
    /// to the size and sync it; the file's blocks are then all home.
    pub(crate) fn swap_in(&mut self, staged: &Staged) -> Result<()> {
        swap(&mut self.media, staged.ino, staged.size)?;
        if let Some(i) = self.st.inodes.get_mut(&staged.ino) {
            i.atree.clear();
            i.home_blocks = staged.size.div_ceil(BLOCK);
            i.dirty = false;
        }
        self.counters.exchanges += 1;
        Ok(())
    }

    /// Recovery of an `Exchange` op of the last generation's journal (see the table above).
    pub(crate) fn redo_exchange(
        &mut self,
        ino: Ino,
        size: u64,
        blocks: &[(u64, u32)],
    ) -> Result<()> {
        let home = self.media.home(ino, true)?;
        if let Some(home) = home {
            if blocks_match(&self.media, &home, size, blocks)? {
                return Ok(());
            }
        }
        let path = self.media.names.stage(ino);
        let stage = match self.media.fs.open(&path, &OpenOptions::read_write()) {
            Ok(f) => f,
            Err(e) if e.is_not_found() => return Err(damaged(ino, "its staging file is missing")),
            Err(e) => return Err(host_err(e)),
        };
        if !blocks_match(&self.media, &stage, size, blocks)? {
            return Err(damaged(
                ino,
                "neither the home file nor the staging file holds it",
            ));
        }
        drop(stage);
        swap(&mut self.media, ino, size)?;
        self.counters.exchanges_redone += 1;
        Ok(())
    }
}

/// `pending` (sorted by block) cut into runs of consecutive blocks.
fn runs<T>(pending: &[(u64, T)]) -> Vec<&[(u64, T)]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=pending.len() {
        let breaks = match (pending.get(i - 1), pending.get(i)) {
            (Some((a, _)), Some((b, _))) => *b != a + 1,
            _ => true,
        };
        if breaks {
            if let Some(run) = pending.get(start..i) {
                out.push(run);
            }
            start = i;
        }
    }
    out
}

fn damaged(ino: Ino, why: &str) -> Error {
    Error::Corrupt {
        what: format!("remap: the committed exchange of inode {ino} cannot be completed: {why}"),
        offset: 0,
    }
}

/// Whether every block of `blocks` in `file` has its crc.
fn blocks_match<H: HostFs>(
    media: &Media<H>,
    file: &H::File,
    size: u64,
    blocks: &[(u64, u32)],
) -> Result<bool> {
    let len = media.fs.file_stat(file).map_err(host_err)?.len;
    let mut buf = [0u8; BLOCK_USIZE];
    for &(b, crc) in blocks {
        buf.fill(0);
        if b * BLOCK < len {
            media
                .fs
                .read_full_at(file, b * BLOCK, &mut buf)
                .map_err(host_err)?;
        }
        if block_crc(&buf, b, size) != crc {
            return Ok(false);
        }
    }
    Ok(true)
}

/// XFS_IOC_EXCHANGE_RANGE of the staging file of `ino` with its home file over their common
/// length, then the home file cut to `size` and synced.
fn swap<H: HostFs>(media: &mut Media<H>, ino: Ino, size: u64) -> Result<()> {
    let home = media
        .home(ino, true)?
        .ok_or_else(|| Error::NotFound(format!("home file of inode {ino}")))?;
    let fs = &media.fs;
    let stage = fs
        .open(&media.names.stage(ino), &OpenOptions::read_write())
        .map_err(host_err)?;
    let len = fs.file_stat(&stage).map_err(host_err)?.len;
    assert!(len.is_multiple_of(BLOCK), "a staging file is block-aligned");
    if fs.file_stat(&home).map_err(host_err)?.len < len {
        fs.set_len(&home, len).map_err(host_err)?;
        // persist: the home file's length is durable before data is swapped into it.
        fs.sync_data(&home).map_err(host_err)?;
    }
    fs.exchange_range(&stage, 0, &home, 0, len)
        .map_err(host_err)?;
    fs.set_len(&home, size).map_err(host_err)?;
    // persist: the swap and the home file's length are durable before the checkpoint's
    // snapshot retires the record that could complete them.
    fs.sync_data(&home).map_err(host_err)?;
    Ok(())
}
