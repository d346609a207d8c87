//! The engine's shared state: the region, its geometry, the volatile allocators, the
//! per-inode DRAM state (TLVI, directory index, binding) and the counters.

use crate::alloc::{FreeList, U64Map};
use crate::checkpoint::CheckpointQueue;
use crate::config::{Mode, PoolConfig};
use crate::data::pending_index::PendingIndex;
use crate::log::commits::Commits;
use crate::log::transaction::TxCell;
use crate::media::layout::*;
use crate::namespace::creates::Creates;
use crate::namespace::dir::DirIndex;
use crate::sharing::Padded;
use parking_lot::{Mutex, MutexGuard, RwLock};
use pmem::Region;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use store::{Error, Result};

/// DRAM state of one inode. Guarded by its own lock (per-inode locking).
#[derive(Default)]
pub(crate) struct InodeState {
    pub(crate) ino: u64,
    /// TLVI first level: logical block -> pending list, oldest (first committed) first.
    pub(crate) pending: PendingIndex,
    /// Directory name index, built on first use (directories only).
    pub(crate) dir: Option<DirIndex>,
    /// Directory slots freed by transactions that have not committed yet: never reused
    /// before that commit (an abort puts the entry back).
    pub(crate) dir_reserved: HashSet<u64>,
    /// The transaction every write and set_len of this file belongs to.
    pub(crate) bound: Option<Arc<TxCell>>,
    /// Id of the bound transaction (0 = unbound), readable without locking it.
    pub(crate) bound_id: u64,
    /// Open handles on the inode.
    pub(crate) open_handles: u32,
    /// The file was created by a transaction that aborted while handles were open on it:
    /// the inode is free on the media, its number is held back from the allocator until
    /// the last handle is released, and every handle operation fails with NotFound.
    pub(crate) gone: bool,
    /// A DRAM copy of the file's block map (`blockmap`), None until built and after every
    /// change of the tree but a checkpoint's pointer swing (which updates it).
    pub(crate) map: Option<Box<crate::data::block_map::BlockMap>>,
    /// Plans that found no `map` since it was last dropped.
    pub(crate) map_misses: u32,
    /// Whether `link` may give the inode its first name (an O_TMPFILE file).
    pub(crate) naming: Naming,
}

/// Whether an inode with no link may get one (linkat(2) of an O_TMPFILE file) or not (a
/// file whose last name was removed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Naming {
    /// Named now or before: with no link left, it never gets one again.
    #[default]
    Named,
    /// Made by `tmpfile` and never named: `link` gives it its first name.
    Unnamed,
}

impl InodeState {
    /// The inode's tree is about to change (or an undo may have changed it): forget the
    /// copy of its block map.
    pub(crate) fn drop_map(&mut self) {
        self.map = None;
        self.map_misses = 0;
    }
}

/// The DRAM state of an inode behind its lock, and how many threads are spinning for that
/// lock (`sharing::lock_spinning`), so that a checkpoint thread working through the file's
/// blocks batch by batch lets them in between two batches (`let_waiters_in`) instead of
/// taking the lock straight back.
pub(crate) struct InodeCell {
    state: Mutex<InodeState>,
    waiting: AtomicU32,
}

impl InodeCell {
    pub(crate) fn new(state: InodeState) -> Self {
        InodeCell {
            state: Mutex::new(state),
            waiting: AtomicU32::new(0),
        }
    }

    /// Take the lock (sleeping at once when it is held: for callers that are not on a
    /// transaction's path).
    pub(crate) fn lock(&self) -> MutexGuard<'_, InodeState> {
        self.state.lock()
    }

    /// The lock if it is free now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, InodeState>> {
        self.state.try_lock()
    }

    /// Take the lock, spinning first while a checkpoint batch holds it (counted in
    /// `waiting`, so that the checkpoint thread lets this thread in before its next batch).
    pub(crate) fn lock_spinning(&self) -> MutexGuard<'_, InodeState> {
        if let Some(guard) = self.state.try_lock() {
            return guard;
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let guard = crate::sharing::lock_spinning(&self.state);
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        guard
    }

    /// Called without the lock between two batches of work on this inode: while another
    /// thread spins for the lock (and for at most 50 µs: `sharing::spin_while`), wait for it to get
    /// it.
    pub(crate) fn let_waiters_in(&self) {
        crate::sharing::spin_while(|| self.waiting.load(Ordering::Relaxed) > 0);
    }
}

/// Named counters, each on lines of its own (`Padded`). Rust orders a struct's fields as it
/// likes: unpadded, the counters a write bumps (`versions_created`) and those a checkpoint
/// batch bumps (`checkpoint_lines_copied`) were laid out on one line, which then moved
/// between the two threads' cores on every write.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: Padded<AtomicU64>,
    pub(crate) aborts: Padded<AtomicU64>,
    pub(crate) versions_created: Padded<AtomicU64>,
    pub(crate) undo_entries: Padded<AtomicU64>,
    /// Times a data operation had to checkpoint in its own thread because the background
    /// threads had not made room in time (logs or blocks nearly exhausted).
    pub(crate) foreground_checkpoints: Padded<AtomicU64>,
    pub(crate) checkpoints: Padded<AtomicU64>,
    pub(crate) checkpoint_lines_copied: Padded<AtomicU64>,
    pub(crate) checkpoint_pointer_swings: Padded<AtomicU64>,
}

/// Shared state of an open pool.
pub(crate) struct Core<R: Region> {
    pub(crate) region: Arc<R>,
    pub(crate) geo: Geometry,
    pub(crate) cfg: PoolConfig,
    pub(crate) blocks: FreeList,
    pub(crate) meta_slots: FreeList,
    pub(crate) data_slots: FreeList,
    pub(crate) inodes_free: FreeList,
    /// Read-locked by every thread: alone on its lines, so that taking it disturbs nothing
    /// else.
    pub(crate) cells: Padded<RwLock<U64Map<Arc<InodeCell>>>>,
    /// Serialises namespace operations and aborts (never taken on the data path).
    pub(crate) ns: Mutex<()>,
    /// Inodes whose create has not committed, by creating transaction (namespace/creates.rs).
    pub(crate) creates: Creates,
    /// Bumped by every `begin`, `commit` and write: each on lines of its own (`Padded`), away
    /// from the read-mostly fields (`geo`, `region`, `cfg`, `checkpointer`) that the
    /// checkpoint threads read all the time. Sharing a line with them, each bump took the
    /// line back from the checkpoint thread's core (a round trip of up to ~300 ns when the
    /// two cores are far apart; see docs/pool.md).
    pub(crate) next_txid: Padded<AtomicU64>,
    pub(crate) commit_seq: Padded<AtomicU64>,
    /// The last time this pool handed out (`Core::now`).
    pub(crate) clock: Padded<AtomicU64>,
    /// Numbers data operations may still take before `make_room` reads the free counts
    /// again (`Core::room_headroom`; 0 or less: look now).
    pub(crate) room_credit: Padded<AtomicI64>,
    /// Inodes that open transactions took the last link of, with how many such
    /// transactions (an unlink pushes to `Tx::orphans`). Such an inode is not freed when its
    /// last handle closes (an abort gives the link back); the transaction's commit frees it
    /// (`PoolStore::finalize`). Counted under the namespace lock, outside every
    /// transaction's own lock, so that `PoolStore::reap` never has to look inside a
    /// transaction another thread holds.
    pub(crate) unlinking: Mutex<U64Map<u32>>,
    /// Records of committed transactions with data entries left (log/commits.rs).
    pub(crate) commits: Commits,
    pub(crate) counters: Counters,
    pub(crate) closed: AtomicBool,
    pub(crate) checkpointer: Arc<CheckpointQueue>,
    /// Finished transactions whose vectors are reused (`Core::recycle_tx`).
    pub(crate) spare_txs: Mutex<Vec<crate::log::transaction::Tx>>,
}

impl<R: Region> Core<R> {
    /// The transaction that took the last link of `orphans` ended (committed or rolled
    /// back): they no longer wait for it (`Core::unlinking`).
    pub(crate) fn orphans_settled(&self, orphans: &[u64]) {
        if orphans.is_empty() {
            return;
        }
        let mut unlinking = self.unlinking.lock();
        for ino in orphans {
            if let Some(n) = unlinking.get_mut(ino) {
                *n -= 1;
                if *n == 0 {
                    unlinking.remove(ino);
                }
            }
        }
    }

    pub(crate) fn mode(&self) -> Mode {
        self.cfg.mode
    }

    /// The DRAM cell of an inode, created on first use.
    pub(crate) fn cell(&self, ino: u64) -> Arc<InodeCell> {
        if let Some(c) = self.cells.read().get(&ino) {
            return c.clone();
        }
        self.cells
            .write()
            .entry(ino)
            .or_insert_with(|| {
                Arc::new(InodeCell::new(InodeState {
                    ino,
                    ..InodeState::default()
                }))
            })
            .clone()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// The time (ns since the epoch) for every time the pool writes: the coarse time of
    /// day, but strictly later than every time this pool gave before (in this mount, and
    /// before it: mount starts the clock past every inode's ctime and every commit time in
    /// the log). The redo of an overwrite's times (`Core::redo_times`) tells a later change
    /// of an inode's attributes by its later ctime, which needs no two changes to share one
    /// (the coarse clock ticks every few milliseconds) and none to go back (it may step).
    pub(crate) fn now(&self) -> u64 {
        let wall = store::now_ns();
        let mut last = self.clock.load(Ordering::Relaxed);
        loop {
            // Saturating: a hostile inode or log can hold any time (no panic, no wrap).
            let next = wall.max(last.saturating_add(1));
            match self
                .clock
                .compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    // ----- raw field access -----

    pub(crate) fn read_u64(&self, addr: u64) -> u64 {
        self.region.load_u64(addr)
    }

    pub(crate) fn read_u32(&self, addr: u64) -> u32 {
        let mut b = [0u8; 4];
        self.region.read(addr, &mut b);
        u32::from_le_bytes(b)
    }

    pub(crate) fn read_u8(&self, addr: u64) -> u8 {
        let mut b = [0u8; 1];
        self.region.read(addr, &mut b);
        b[0]
    }

    /// Check an inode number taken from a caller or from media.
    pub(crate) fn check_ino(&self, ino: u64) -> Result<u64> {
        if ino == 0 || ino >= self.geo.inode_count {
            return Err(Error::NotFound(format!("inode {ino}")));
        }
        Ok(ino)
    }

    /// Kind of an in-use inode, or NotFound for a free one.
    pub(crate) fn inode_kind(&self, ino: u64) -> Result<u8> {
        self.check_ino(ino)?;
        let off = self.geo.inode(ino);
        match self.read_u8(off + I_KIND) {
            KIND_FREE => Err(Error::NotFound(format!("inode {ino}"))),
            k if self.kind_known(k) => Ok(k),
            k => Err(Error::corrupt(format!("inode {ino} has kind {k}"), off)),
        }
    }

    /// Whether `kind` names an in-use inode in this pool's format: a file or a directory,
    /// and (formats 3, 4) a symlink or a special file.
    pub(crate) fn kind_known(&self, kind: u8) -> bool {
        match kind {
            KIND_FILE | KIND_DIR => true,
            k => self.geo.posix_objects && (KIND_SYMLINK..=KIND_MAX).contains(&k),
        }
    }

    /// The calls that store symlinks, special files or attributes need format 3 or 4.
    pub(crate) fn check_posix_format(&self, what: &str) -> Result<()> {
        if self.geo.posix_objects {
            return Ok(());
        }
        Err(Error::Unsupported(format!(
            "{what}: this pool has format version {} (made before versions 3 and 4, which hold \
             symbolic links, special files and extended attributes); copy it into a new pool",
            self.geo.format_version()
        )))
    }

    /// Size of an inode, validated against the largest file (and, for a directory, against
    /// its tree: a directory has no holes).
    pub(crate) fn inode_size(&self, ino: u64) -> Result<u64> {
        let off = self.geo.inode(ino);
        let size = self.read_u64(off + I_SIZE);
        let mut bad = size > crate::data::write::FILE_SIZE_MAX;
        let kind = self.read_u8(off + I_KIND);
        if kind == KIND_SYMLINK {
            bad = size > store::SYMLINK_MAX as u64;
        } else if kind > KIND_SYMLINK {
            bad = size != 0;
        }
        if !bad && kind == KIND_DIR {
            let (_, height) = self.tree_root(ino)?;
            bad = !size.is_multiple_of(BLOCK_SIZE)
                || size / BLOCK_SIZE > capacity(height).min(self.geo.block_count);
        }
        if bad {
            return Err(Error::corrupt(
                format!("inode {ino} size {size}"),
                off + I_SIZE,
            ));
        }
        Ok(size)
    }

    /// Blocks an inode holds (data + index), validated against the pool's block count so
    /// that counting on from it cannot overflow.
    pub(crate) fn inode_blocks(&self, ino: u64) -> Result<u64> {
        let at = self.geo.inode(ino) + I_BLOCKS;
        let blocks = self.read_u64(at);
        if blocks > self.geo.block_count {
            return Err(Error::corrupt(
                format!("inode {ino} block count {blocks}"),
                at,
            ));
        }
        Ok(blocks)
    }

    /// Tree root and height of an inode, validated.
    pub(crate) fn tree_root(&self, ino: u64) -> Result<(u64, u32)> {
        let off = self.geo.inode(ino);
        let height = self.read_u32(off + I_HEIGHT);
        let root = self.read_u64(off + I_ROOT);
        if height > TREE_HEIGHT_MAX || (height == 0) != (root == 0) {
            return Err(Error::corrupt(
                format!("inode {ino} tree height {height} root {root}"),
                off + I_HEIGHT,
            ));
        }
        if root != 0 {
            self.geo.check_pbn(root, off + I_ROOT)?;
        }
        Ok((root, height))
    }

    /// Address of the block pointer for `lbn` of `ino`, if the index blocks on its path
    /// exist (no allocation). Every pointer followed is validated.
    pub(crate) fn pointer_addr(&self, ino: u64, lbn: u64) -> Result<Option<u64>> {
        let (root, height) = self.tree_root(ino)?;
        if height == 0 || lbn >= capacity(height) {
            return Ok(None);
        }
        let mut node = root;
        for level in (1..=height).rev() {
            let idx = (lbn / capacity(level - 1)) % POINTERS_PER_BLOCK;
            let addr = self.geo.block(node) + idx * 8;
            if level == 1 {
                return Ok(Some(addr));
            }
            let child = self.read_u64(addr);
            if child == 0 {
                return Ok(None);
            }
            node = self.geo.check_pbn(child, addr)?;
        }
        Ok(None)
    }

    /// The permanent block of `lbn` (0 = hole) and the address of its pointer.
    pub(crate) fn permanent_block(&self, ino: u64, lbn: u64) -> Result<(u64, Option<u64>)> {
        match self.pointer_addr(ino, lbn)? {
            None => Ok((0, None)),
            Some(addr) => {
                let pbn = self.geo.leaf_pbn(self.read_u64(addr), addr)?;
                Ok((pbn, Some(addr)))
            }
        }
    }

    /// The block a leaf block pointer at `addr` names (0 for a hole or a pointer out of
    /// range), without its checksum.
    pub(crate) fn pointed_pbn(&self, addr: u64) -> u64 {
        self.geo.leaf_pbn(self.read_u64(addr), addr).unwrap_or(0)
    }

    /// Visit every block of an inode's tree: `f(pbn, is_index, lbn_of_data)`.
    pub(crate) fn walk_tree(
        &self,
        ino: u64,
        f: &mut dyn FnMut(u64, bool, u64) -> Result<()>,
    ) -> Result<()> {
        let (root, height) = self.tree_root(ino)?;
        if height == 0 {
            return Ok(());
        }
        // A corrupt tree may name blocks many times over: never visit more than the pool has.
        let mut visits = 0u64;
        let limit = self.geo.block_count;
        let at = self.geo.inode(ino);
        let mut bounded = |pbn: u64, index: bool, lbn: u64| {
            visits += 1;
            if visits > limit {
                return Err(Error::corrupt(
                    format!("inode {ino} tree names more blocks than the pool has"),
                    at,
                ));
            }
            f(pbn, index, lbn)
        };
        self.walk_node(root, height, 0, &mut bounded)
    }

    fn walk_node(
        &self,
        node: u64,
        level: u32,
        first_lbn: u64,
        f: &mut dyn FnMut(u64, bool, u64) -> Result<()>,
    ) -> Result<()> {
        f(node, true, first_lbn)?;
        let mut ptrs = vec![0u8; BLOCK_SIZE as usize];
        self.region.read(self.geo.block(node), &mut ptrs);
        for (i, chunk) in ptrs.chunks_exact(8).enumerate() {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let child = u64::from_le_bytes(word);
            if child == 0 {
                continue;
            }
            let at = self.geo.block(node) + i as u64 * 8;
            let lbn = first_lbn + i as u64 * capacity(level - 1);
            if level == 1 {
                let child = self.geo.leaf_pbn(child, at)?;
                f(child, false, lbn)?;
            } else {
                let child = self.geo.check_pbn(child, at)?;
                self.walk_node(child, level - 1, lbn, f)?;
            }
        }
        Ok(())
    }

    /// Either log area below the low-water mark (committed entries wait for a checkpoint), or
    /// more pending versions than `PoolConfig::checkpoint_pending_high`?
    pub(crate) fn logs_low(&self) -> bool {
        self.logs_headroom() < 0
    }

    /// Free blocks below the low-water mark?
    pub(crate) fn blocks_low(&self) -> bool {
        self.blocks_headroom() < 0
    }

    /// How many numbers any free list can still give before `blocks_low` or `logs_low`
    /// holds (negative when one does).
    pub(crate) fn room_headroom(&self) -> i64 {
        self.blocks_headroom().min(self.logs_headroom())
    }

    /// Free blocks above the mark (fewer than `free_blocks_low_percent` free).
    fn blocks_headroom(&self) -> i64 {
        above_mark(&self.blocks, self.cfg.free_blocks_low_percent)
    }

    /// Log slots above the nearest log mark: a log 80 % full (twice the blocks' percentage,
    /// at least 20 %) or, with `checkpoint_pending_high`, that many pending versions.
    fn logs_headroom(&self) -> i64 {
        let percent = self.cfg.free_blocks_low_percent.max(10) * 2;
        let free = self.data_slots.free_count() as i64;
        let mut room = above_mark_of(free, self.data_slots.total(), percent)
            .min(above_mark(&self.meta_slots, percent));
        let high = self.cfg.checkpoint_pending_high;
        if high > 0 {
            let used = self.data_slots.total() as i64 - free;
            room = room.min(high as i64 - used);
        }
        room
    }
}

/// Free numbers of `list` above `percent` % of its size: negative exactly when
/// `free * 100 < total * percent`.
fn above_mark(list: &FreeList, percent: u64) -> i64 {
    above_mark_of(list.free_count() as i64, list.total(), percent)
}

fn above_mark_of(free: i64, total: u64, percent: u64) -> i64 {
    free - total.saturating_mul(percent).div_ceil(100) as i64
}

/// Data blocks a tree of `height` levels addresses.
pub(crate) fn capacity(height: u32) -> u64 {
    POINTERS_PER_BLOCK.saturating_pow(height)
}

#[cfg(test)]
mod tests {
    use super::above_mark_of;
    use proptest::prelude::*;

    proptest! {
        /// The headroom is negative exactly when the low-water test `free * 100 < total *
        /// percent` (which `blocks_low` and `logs_low` used to compute) holds.
        #[test]
        fn headroom_is_negative_exactly_below_the_mark(
            total in 0u64..10_000_000,
            free_part in 0u64..=1000,
            percent in 0u64..=100,
        ) {
            let free = total * free_part / 1000;
            prop_assert_eq!(
                above_mark_of(free as i64, total, percent) < 0,
                free * 100 < total * percent
            );
        }
    }
}
