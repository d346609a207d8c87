//! One open file: its per-file metadata slot, its mapping, its radix tree, its queue of live
//! log entries, and the write and read paths (Libnvmmio §3.2, §3.6). Commit and abort are in
//! `log/commit.rs`, checkpointing in `log/checkpoint.rs`, handles in `handles.rs`.
//!
//! Locking (as in the seed): reads and writes hold the file's lock shared and one entry's lock
//! exclusively (write) or shared (read); commit, abort, growth and policy switches hold the
//! file's lock exclusively. Checkpointing holds only entry locks (and the file's checkpoint
//! mutex), never the file's lock across a copy, so commits go on while it runs.
//!
//! Fences: a write call leaves its log and home stores flushed (or non-temporal) but not fenced
//! when the same thread commits next (a call outside a transaction): the commit's fence makes
//! them durable before the epoch bump. Otherwise it ends with one fence, because a flush or a
//! non-temporal store is drained only by a fence of the thread that issued it, and the commit
//! may run on another thread.

pub(crate) mod fallocate;
pub(crate) mod handles;
pub(crate) mod holes;
pub(crate) mod nvmmap;
pub(crate) mod radix;

use crate::host::FileMedia;
use crate::log::layout::{self, fm, IndexEntry, Policy, BLOCK_SIZE, NO_EPOCH};
use crate::shared::{EntryState, Shared};
use crate::{io_err, PolicyMode};
use parking_lot::{Mutex, RwLock};
use pmem::Region;
use radix::RadixTree;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use store::{Error, Ino, Result};

/// Size and mapping state, under the file's reader-writer lock.
pub(crate) struct FileState<Map> {
    pub(crate) map: Option<Arc<Map>>,
    pub(crate) host_len: u64,
    /// Size as of the last commit (bytes at or past it are written home directly: a crash or
    /// abort cuts the file back to it).
    pub(crate) committed_size: u64,
    /// Size reads and writes see (pending size of the running epoch, or the committed one).
    pub(crate) visible_size: u64,
    pub(crate) size_pending: bool,
    /// Host path, `None` once unlinked.
    pub(crate) path: Option<PathBuf>,
}

pub(crate) struct MmioFile<R: Region, M: FileMedia> {
    pub(crate) ino: Ino,
    pub(crate) slot: u32,
    pub(crate) state: RwLock<FileState<M::Map>>,
    pub(crate) tree: RadixTree,
    /// The file's live entries in creation order, as (index, generation): committed ones
    /// first (epochs never decrease along the queue). Entries freed out of order (a synchronous
    /// checkpoint) stay in it until they reach an end; their generation (or `live`) tells them
    /// apart from a live entry in a reused index slot.
    pub(crate) queue: Mutex<VecDeque<(u32, u32)>>,
    /// Held by whoever takes entries off the queue (checkpoint, abort): one at a time, so the
    /// queue keeps its order, and a truncation waits for a copy in flight.
    pub(crate) ckpt: Mutex<()>,
    pub(crate) live_count: AtomicU64,
    /// Live redo entries. While 0, home holds every byte's newest value and reads copy
    /// straight from the mapping (as Libnvmmio's reads under undo logging).
    pub(crate) redo_live: AtomicU64,
    pub(crate) epoch: AtomicU64,
    pub(crate) redo: AtomicBool,
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    /// Bytes written (or grown) in the running epoch, against `epoch_bytes_max`.
    pub(crate) epoch_bytes: AtomicU64,
    pub(crate) dirty_home: Mutex<Vec<(u64, u64)>>,
    pub(crate) uncommitted: AtomicBool,
    /// Home bytes were written since the last commit (the commit must fence the mapping).
    pub(crate) home_dirty: AtomicBool,
    pub(crate) closed: AtomicBool,
    /// Punched ranges read as zeros without the mapping (`holes.rs`).
    pub(crate) holes: holes::Holes,
    _pool: std::marker::PhantomData<fn() -> R>,
}

fn log_full() -> Error {
    Error::LogFull(
        "mmio log pool (raise log_pool_len or index_entries_max, or sync more often)".into(),
    )
}

/// `[a0, a1)` minus the (possibly empty) ranges `holes`, as a list of ranges.
fn subtract(a0: u64, a1: u64, holes: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = vec![(a0, a1)];
    for &(h0, h1) in holes {
        if h0 >= h1 {
            continue;
        }
        out = out
            .into_iter()
            .flat_map(|(x0, x1)| {
                let mut v = Vec::new();
                if x0 < h0.min(x1) {
                    v.push((x0, h0.min(x1)));
                }
                if h1.max(x0) < x1 {
                    v.push((h1.max(x0), x1));
                }
                v
            })
            .collect();
    }
    out
}

/// Writes of at least this many bytes use non-temporal stores (durable at the next fence, no
/// flush needed); smaller ones are cached stores plus a flush.
const NT_MIN: usize = 256;

/// Bytes [`copy_durable`] moves per step through its per-thread buffer.
const COPY_CHUNK: usize = 64 << 10;

thread_local! {
    /// The bounce buffer of [`copy_durable`] (allocated once per thread).
    static COPY_BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; COPY_CHUNK]);
}

/// Store `data` at `off` so that it is durable at the next fence of `region`.
pub(crate) fn store_flushed<G: Region + ?Sized>(region: &G, off: u64, data: &[u8]) {
    if data.len() >= NT_MIN {
        region.write_nt(off, data);
    } else {
        region.write(off, data);
        region.flush(off, data.len() as u64);
    }
}

/// Copy `len` bytes at `src` of `from` to `dst` of `to`, durable at the next fence of `to`
/// (through a per-thread buffer: no allocation on the write and checkpoint paths).
pub(crate) fn copy_durable<A: Region + ?Sized, B: Region + ?Sized>(
    from: &A,
    src: u64,
    to: &B,
    dst: u64,
    len: u64,
) {
    COPY_BUF.with(|cell| {
        let mut buf = cell.borrow_mut();
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            from.read(src + done, &mut buf[..n]);
            store_flushed(to, dst + done, &buf[..n]);
            done += n as u64;
        }
    })
}

/// What a write call stored and did not fence yet.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Unfenced {
    /// Redo log bytes, index entries or delta words in the log pool.
    pub(crate) log: bool,
    /// Non-temporal stores to the home mapping.
    pub(crate) home: bool,
}

impl<R: Region, M: FileMedia> MmioFile<R, M> {
    /// Store new bytes home: non-temporal when large (durable at the next fence of this
    /// thread), else cached and remembered for the commit's flush.
    fn write_home(&self, map: &M::Map, off: u64, data: &[u8], uf: &mut Unfenced) {
        self.home_dirty.store(true, Ordering::Release);
        if data.len() >= NT_MIN {
            map.write_nt(off, data);
            uf.home = true;
        } else {
            map.write(off, data);
            self.dirty_home.lock().push((off, data.len() as u64));
        }
    }

    /// Open `path` (host length `len`, identity `media_id`) with a fresh metadata slot.
    pub(crate) fn open(
        s: &Shared<R, M>,
        ino: Ino,
        path: PathBuf,
        media_id: u64,
        len: u64,
    ) -> Result<Arc<Self>> {
        let slot = s.free_file_slots.lock().pop().ok_or(Error::TooMany {
            what: "open files (mmio files_max)",
            max: s.sb.files_max as u64,
        })?;
        let map = if len > 0 {
            match s.media.map(&path, len) {
                Ok(m) => Some(Arc::new(m)),
                Err(e) => {
                    s.free_file_slots.lock().push(slot);
                    return Err(io_err(&path, "mmap", e));
                }
            }
        } else {
            None
        };
        let redo = s.config.policy_mode == PolicyMode::Redo;
        let policy = if redo { Policy::Redo } else { Policy::Undo };
        let at = s.sb.file_meta_at(slot);
        let p = &s.pool;
        p.store_u64(at + fm::EPOCH, 1);
        p.store_u64(at + fm::MEDIA_ID, media_id);
        p.store_u64(at + fm::STORE_ID, s.sb.store_id);
        p.store_u64(at + fm::COMMITTED_SIZE, len);
        p.store_u64(at + fm::PENDING_SIZE, 0);
        p.store_u64(at + fm::PENDING_EPOCH, NO_EPOCH);
        p.write(
            at + fm::CHECKSUM,
            &layout::file_meta_checksum(media_id, s.sb.store_id, slot).to_le_bytes(),
        );
        // persist: the slot's fields are durable before its header marks it in use.
        p.persist(at, 64);
        p.store_u64(at + fm::HEADER, layout::file_header(policy));
        // persist: the slot is in use; recovery will look for the file's entries.
        p.persist(at + fm::HEADER, 8);
        let file = Arc::new(MmioFile {
            ino,
            slot,
            state: RwLock::new(FileState {
                map,
                host_len: len,
                committed_size: len,
                visible_size: len,
                size_pending: false,
                path: Some(path),
            }),
            tree: RadixTree::new(),
            queue: Mutex::new(VecDeque::new()),
            ckpt: Mutex::new(()),
            live_count: AtomicU64::new(0),
            redo_live: AtomicU64::new(0),
            epoch: AtomicU64::new(1),
            redo: AtomicBool::new(redo),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            epoch_bytes: AtomicU64::new(0),
            dirty_home: Mutex::new(Vec::new()),
            uncommitted: AtomicBool::new(false),
            home_dirty: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            holes: holes::Holes::default(),
            _pool: std::marker::PhantomData,
        });
        file.tree.cover(len.div_ceil(BLOCK_SIZE));
        s.files.lock().insert(slot, Arc::downgrade(&file));
        Ok(file)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::NotFound(format!("file {} was unlinked", self.ino)));
        }
        Ok(())
    }

    pub(crate) fn size(&self) -> u64 {
        self.state.read().visible_size
    }

    /// Live log entries of the file (committed or not).
    pub(crate) fn live_entries(&self) -> usize {
        self.live_count.load(Ordering::Acquire) as usize
    }

    // ----- writes -----

    /// Count `len` more bytes against the epoch's budget (`epoch_bytes_max`).
    fn charge_epoch(&self, s: &Shared<R, M>, len: u64) -> Result<()> {
        let used = self.epoch_bytes.fetch_add(len, Ordering::Relaxed) + len;
        if used > s.config.epoch_bytes_max {
            self.epoch_bytes.fetch_sub(len, Ordering::Relaxed);
            return Err(Error::NoSpace(format!(
                "file {}: more than epoch_bytes_max ({}) bytes in one uncommitted epoch",
                self.ino, s.config.epoch_bytes_max
            )));
        }
        Ok(())
    }

    /// Write `data` at `off` (uncommitted until the next commit). `commit_follows`: the
    /// caller commits the file next on this same thread (a call outside a transaction).
    pub(crate) fn write(
        &self,
        s: &Shared<R, M>,
        off: u64,
        data: &[u8],
        commit_follows: bool,
    ) -> Result<()> {
        self.check_open()?;
        let end = off
            .checked_add(data.len() as u64)
            .ok_or_else(|| Error::FileTooLarge("offset overflow".into()))?;
        self.charge_epoch(s, data.len() as u64)?;
        // A punched range written again is read through the mapping again (before any byte
        // of this write reaches home).
        self.holes.remove(off, end);
        self.writes.fetch_add(1, Ordering::Relaxed);
        s.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.uncommitted.store(true, Ordering::Release);
        let mut uf = Unfenced::default();
        {
            let st = self.state.read();
            if end <= st.visible_size {
                let r = self.write_inner(s, &st, off, data, &mut uf);
                self.settle(s, &st, uf, commit_follows);
                return r;
            }
        }
        let mut st = self.state.write();
        let r = if end > st.visible_size {
            self.extend_to(s, &mut st, end, &mut uf)
        } else {
            Ok(())
        };
        let r = r.and_then(|_| self.write_inner(s, &st, off, data, &mut uf));
        self.settle(s, &st, uf, commit_follows);
        r
    }

    /// End of a write call: fence what it left unfenced, unless the commit that follows on
    /// this thread will.
    fn settle(&self, s: &Shared<R, M>, st: &FileState<M::Map>, uf: Unfenced, commit_follows: bool) {
        if commit_follows {
            return;
        }
        if uf.log {
            // persist: this call's redo log bytes and entries are durable (the commit that
            // makes them count may run on another thread, whose fence would not drain them).
            s.pool.fence();
        }
        if uf.home {
            if let Some(map) = st.map.as_deref() {
                // persist: this call's non-temporal home stores are durable (as above).
                map.fence();
            }
        }
    }

    /// Truncate or extend (uncommitted until the next commit).
    pub(crate) fn set_len(&self, s: &Shared<R, M>, len: u64) -> Result<()> {
        self.check_open()?;
        self.uncommitted.store(true, Ordering::Release);
        let mut st = self.state.write();
        let mut uf = Unfenced::default();
        let r = if len > st.visible_size {
            self.extend_to(s, &mut st, len, &mut uf)
        } else {
            if len < st.visible_size {
                self.holes.remove(len, u64::MAX);
                self.set_pending_size(s, &mut st, len);
            }
            Ok(())
        };
        self.settle(s, &st, uf, false);
        r
    }

    fn extend_to(
        &self,
        s: &Shared<R, M>,
        st: &mut FileState<M::Map>,
        new_size: u64,
        uf: &mut Unfenced,
    ) -> Result<()> {
        let path = st
            .path
            .clone()
            .ok_or_else(|| Error::NotFound("unlinked file".into()))?;
        let old_visible = st.visible_size;
        let old_host = st.host_len;
        if new_size > st.host_len {
            s.media
                .set_len(&path, new_size)
                .map_err(|e| io_err(&path, "set_len", e))?;
            st.host_len = new_size;
            if st.map.as_ref().is_none_or(|m| m.len() < new_size) {
                let map = s
                    .media
                    .map(&path, new_size)
                    .map_err(|e| io_err(&path, "mmap", e))?;
                st.map = Some(Arc::new(map));
            }
            self.tree.cover(new_size.div_ceil(BLOCK_SIZE));
        }
        // Bytes between the visible end and the old host end are stale (a truncation of this
        // epoch not yet applied to the host file): they must read as zeros.
        let stale_end = new_size.min(old_host);
        if stale_end > old_visible {
            let zeros = vec![0u8; (stale_end - old_visible) as usize];
            self.write_inner(s, st, old_visible, &zeros, uf)?;
        }
        self.set_pending_size(s, st, new_size);
        Ok(())
    }

    fn set_pending_size(&self, s: &Shared<R, M>, st: &mut FileState<M::Map>, size: u64) {
        let at = s.sb.file_meta_at(self.slot);
        let p = &s.pool;
        if st.size_pending {
            p.store_u64(at + fm::PENDING_EPOCH, NO_EPOCH);
            // persist: the old pending size is withdrawn before the field is rewritten.
            p.persist(at + fm::PENDING_EPOCH, 8);
        }
        p.store_u64(at + fm::PENDING_SIZE, size);
        p.persist(at + fm::PENDING_SIZE, 8);
        p.store_u64(at + fm::PENDING_EPOCH, self.epoch.load(Ordering::Acquire));
        // persist: the new size is pending in this epoch: it commits with the epoch bump.
        p.persist(at + fm::PENDING_EPOCH, 8);
        st.visible_size = size;
        st.size_pending = true;
    }

    pub(crate) fn map_of<'a>(&self, st: &'a FileState<M::Map>) -> Result<&'a M::Map> {
        st.map
            .as_deref()
            .ok_or_else(|| Error::corrupt(format!("file {} has data but no mapping", self.ino), 0))
    }

    fn write_inner(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        off: u64,
        data: &[u8],
        uf: &mut Unfenced,
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = off + data.len() as u64;
        let cut = st.committed_size.clamp(off, end);
        // Logged part: below the committed size.
        let mut p = off;
        while p < cut {
            let at = (p - off) as usize;
            let n = self.log_piece(s, st, p, &data[at..(cut - off) as usize], uf)?;
            s.counters
                .bytes_logged
                .fetch_add(n as u64, Ordering::Relaxed);
            p += n as u64;
        }
        // Direct part: at or past the committed size, nothing to protect.
        if cut < end {
            let map = self.map_of(st)?;
            self.write_home(map, cut, &data[(cut - off) as usize..], uf);
            s.counters
                .bytes_direct
                .fetch_add(end - cut, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Log the first bytes of `piece` (at file offset `p`) into one entry; returns how many.
    fn log_piece(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        p: u64,
        piece: &[u8],
        uf: &mut Unfenced,
    ) -> Result<usize> {
        let block = p / BLOCK_SIZE;
        let slot = self.tree.slot(block);
        let mut tried_checkpoint = false;
        loop {
            let indexed = match slot {
                Some(b) => RadixTree::id_in(b),
                None => self.tree.get(block),
            };
            if let Some(id) = indexed {
                let mut e = s.entries[id as usize].write();
                if !e.covers(self.slot, p) {
                    continue; // freed meanwhile: look again
                }
                if e.epoch < self.epoch.load(Ordering::Acquire) {
                    // A committed entry: checkpoint it before a new epoch's entry (§3.3).
                    self.checkpoint_one(s, st, id, &mut e)?;
                    s.counters.sync_checkpoints.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let n = piece.len().min((e.file_off + e.size() - p) as usize);
                self.apply(s, st, id, &mut e, p, &piece[..n], uf)?;
                return Ok(n);
            }
            match self.create_entry(s, st, p, piece, slot, uf)? {
                Some(n) => return Ok(n),
                None if !tried_checkpoint => {
                    tried_checkpoint = true;
                    self.make_log_room(s, st)?;
                }
                None => return Err(log_full()),
            }
        }
    }

    /// The log is full: checkpoint every committed entry of this file and of every other file
    /// not locked right now, so that the write can retry.
    fn make_log_room(&self, s: &Shared<R, M>, st: &FileState<M::Map>) -> Result<()> {
        self.checkpoint_locked(s, st)?;
        let others: Vec<_> = s
            .files
            .lock()
            .iter()
            .filter(|(k, _)| **k != self.slot)
            .filter_map(|(_, f)| f.upgrade())
            .collect();
        for f in others {
            // try_read: blocking on another file's lock while holding ours could deadlock
            // with a multi-file commit that takes them in the other order.
            if let Some(g) = f.state.try_read() {
                f.checkpoint_locked(s, &g)?;
            }
        }
        Ok(())
    }

    /// The order of a new entry for `len` bytes at `p`: entries double with the IO size
    /// (4 KB … log_entry_max), halved until their aligned range is free in the tree.
    fn entry_order(&self, s: &Shared<R, M>, p: u64, len: u64) -> u8 {
        let want = len.next_power_of_two().max(BLOCK_SIZE);
        let mut order = (want / BLOCK_SIZE)
            .trailing_zeros()
            .min(s.sb.order_max() as u32) as u8;
        loop {
            let size = BLOCK_SIZE << order;
            let base = p - p % size;
            if order == 0 || self.tree.range_empty(base / BLOCK_SIZE, size / BLOCK_SIZE) {
                return order;
            }
            order -= 1;
        }
    }

    /// A new entry for the block(s) at `p`; `Ok(None)` when the log pool is full. `slot`:
    /// the tree bucket of `p`'s block, if the caller walked to it.
    #[allow(clippy::too_many_arguments)]
    fn create_entry(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        p: u64,
        piece: &[u8],
        slot: Option<&std::sync::atomic::AtomicU64>,
        uf: &mut Unfenced,
    ) -> Result<Option<usize>> {
        let map = self.map_of(st)?;
        let order = self.entry_order(s, p, piece.len() as u64);
        let size = BLOCK_SIZE << order;
        let base = p - p % size;
        let Some((id, log_off)) = s.reserve(order) else {
            return Ok(None);
        };
        let mut e = s.entries[id as usize].write();
        // The slot came off the free list: no live entry may sit in it.
        assert!(!e.live, "index entry {id} reserved while live");
        let redo = self.redo.load(Ordering::Acquire);
        let rel = p - base;
        let n = piece.len().min((size - rel) as usize);
        let generation = e.generation.wrapping_add(1);
        *e = EntryState {
            live: true,
            generation,
            file_slot: self.slot,
            policy_redo: redo,
            order,
            epoch: self.epoch.load(Ordering::Acquire),
            file_off: base,
            log_off,
            delta_off: rel as u32,
            delta_len: n as u32,
        };
        let indexed = match slot {
            Some(b) if order == 0 => RadixTree::claim(b, id),
            _ => self
                .tree
                .insert_range(base / BLOCK_SIZE, size / BLOCK_SIZE, id),
        };
        if !indexed {
            e.live = false;
            drop(e);
            s.unreserve(id, log_off, order);
            return Ok(Some(0)); // lost a race for the blocks: the caller looks again
        }
        self.queue.lock().push_back((id, generation));
        self.live_count.fetch_add(1, Ordering::AcqRel);
        if redo {
            self.redo_live.fetch_add(1, Ordering::AcqRel);
            store_flushed(&s.pool, log_off + rel, &piece[..n]);
        } else {
            copy_durable(map, p, &s.pool, log_off + rel, n as u64); // the old bytes
        }
        let entry = IndexEntry {
            epoch: e.epoch,
            file_slot: self.slot,
            policy: e.policy(),
            order,
            file_off: base,
            log_off,
            delta_off: rel as u32,
            delta_len: n as u32,
        };
        s.publish_entry(id, &entry, !redo);
        s.counters.entries_created.fetch_add(1, Ordering::Relaxed);
        if redo {
            uf.log = true;
        } else {
            self.write_home(map, p, &piece[..n], uf);
        }
        Ok(Some(n))
    }

    /// Write into an existing uncommitted entry (differential logging: one chunk per entry,
    /// two chunks merge into their union).
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        id: u32,
        e: &mut EntryState,
        p: u64,
        data: &[u8],
        uf: &mut Unfenced,
    ) -> Result<()> {
        let map = self.map_of(st)?;
        let rel = p - e.file_off;
        let (n0, n1) = (rel, rel + data.len() as u64);
        let (d0, d1) = (e.delta_off as u64, e.delta_off as u64 + e.delta_len as u64);
        let (u0, u1) = if d1 > d0 {
            (d0.min(n0), d1.max(n1))
        } else {
            (n0, n1)
        };
        let copy_home_to_log = |ranges: &[(u64, u64)]| {
            for &(a, b) in ranges {
                copy_durable(map, e.file_off + a, &s.pool, e.log_off + a, b - a);
            }
        };
        if e.policy_redo {
            // Bytes of the union covered by neither chunk take the current home bytes. No
            // fence: the entry is uncommitted (recovery drops it, durable or not) until the
            // commit, whose fence (or this call's, see `settle`) makes all of it durable.
            copy_home_to_log(&subtract(u0, u1, &[(d0, d1), (n0, n1)]));
            store_flushed(&s.pool, e.log_off + n0, data);
            if (u0, u1) != (d0, d1) {
                s.set_delta(id, u0 as u32, (u1 - u0) as u32);
            }
            uf.log = true;
        } else {
            // Undo: keep the first old image of every byte (the public code's second write in
            // an epoch overwrote it); log old bytes only for what the chunk does not hold yet.
            let missing = subtract(u0, u1, &[(d0, d1)]);
            if !missing.is_empty() {
                copy_home_to_log(&missing);
                // persist: the old bytes are durable before the chunk that names them grows
                // (else a crash could persist the wider chunk over stale log bytes).
                s.pool.fence();
                s.set_delta(id, u0 as u32, (u1 - u0) as u32);
                // persist: the widened chunk is durable before home changes.
                s.pool.fence();
            }
            self.write_home(map, p, data, uf);
        }
        e.delta_off = u0 as u32;
        e.delta_len = (u1 - u0) as u32;
        Ok(())
    }

    // ----- reads -----

    pub(crate) fn read(&self, s: &Shared<R, M>, off: u64, buf: &mut [u8]) -> Result<usize> {
        let st = self.state.read();
        self.reads.fetch_add(1, Ordering::Relaxed);
        s.counters.reads.fetch_add(1, Ordering::Relaxed);
        if off >= st.visible_size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(st.visible_size - off) as usize;
        let map = self.map_of(&st)?;
        if self.holes.is_empty() {
            self.read_mapped(s, map, off, &mut buf[..n]);
            return Ok(n);
        }
        for (a, b, hole) in self.holes.pieces(off, off + n as u64) {
            let out = &mut buf[(a - off) as usize..(b - off) as usize];
            if hole {
                out.fill(0);
            } else {
                self.read_mapped(s, map, a, out);
            }
        }
        Ok(n)
    }

    /// Read `buf.len()` bytes at `off` (within the visible size) from the mapping, overlaid
    /// by redo-logged bytes.
    fn read_mapped(&self, s: &Shared<R, M>, map: &M::Map, off: u64, buf: &mut [u8]) {
        let n = buf.len();
        if self.redo_live.load(Ordering::Acquire) == 0 {
            // No redo entry: home holds the newest bytes (a redo entry created meanwhile is a
            // write ordered after this read; its bytes are not home before its checkpoint).
            map.read(off, buf);
            return;
        }
        let mut p = off;
        while p < off + n as u64 {
            let seg_end = ((p / BLOCK_SIZE + 1) * BLOCK_SIZE).min(off + n as u64);
            let out = &mut buf[(p - off) as usize..(seg_end - off) as usize];
            let guard = self
                .tree
                .get(p / BLOCK_SIZE)
                .map(|id| s.entries[id as usize].read());
            map.read(p, out);
            if let Some(e) =
                guard.filter(|e| e.covers(self.slot, p) && e.policy_redo && e.delta_len > 0)
            {
                // Reads of redo-logged bytes come from the log (they hold the newest data).
                let c0 = (e.file_off + e.delta_off as u64).max(p);
                let c1 = (e.file_off + e.delta_off as u64 + e.delta_len as u64).min(seg_end);
                if c0 < c1 {
                    let from = e.log_off + (c0 - e.file_off);
                    s.pool
                        .read(from, &mut out[(c0 - p) as usize..(c1 - p) as usize]);
                }
            }
            p = seg_end;
        }
    }
}
