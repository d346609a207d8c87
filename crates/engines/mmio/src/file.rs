//! One open file: its per-file metadata slot, its mapping, its radix tree, and the write,
//! read, commit, abort and checkpoint paths (Libnvmmio §3.2–3.6).
//!
//! Locking (as in the seed): reads and writes hold the file's lock shared and one entry's lock
//! exclusively (write) or shared (read); commit, abort, growth and policy switches hold the
//! file's lock exclusively; checkpointing holds the file's lock shared and the entries' locks.

use crate::engine::{EntryState, Shared};
use crate::layout::{self, fm, IndexEntry, Policy, BLOCK_SIZE, NO_EPOCH};
use crate::media::FileMedia;
use crate::radix::RadixTree;
use crate::{io_err, PolicyMode};
use parking_lot::{Mutex, RwLock};
use pmem::Region;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use store::{Error, Ino, Result};

/// Size and mapping state, under the file's reader-writer lock.
pub struct FileState<Map> {
    pub map: Option<Arc<Map>>,
    pub host_len: u64,
    /// Size as of the last commit (bytes at or past it are written home directly: a crash or
    /// abort cuts the file back to it).
    pub committed_size: u64,
    /// Size reads and writes see (pending size of the running epoch, or the committed one).
    pub visible_size: u64,
    pub size_pending: bool,
    /// Host path, `None` once unlinked.
    pub path: Option<PathBuf>,
}

pub struct MmioFile<R: Region, M: FileMedia> {
    pub ino: Ino,
    pub slot: u32,
    pub state: RwLock<FileState<M::Map>>,
    pub tree: RadixTree,
    pub live: Mutex<BTreeSet<u32>>,
    pub epoch: AtomicU64,
    pub redo: AtomicBool,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    /// Bytes written (or grown) in the running epoch, against `epoch_bytes_max`.
    pub epoch_bytes: AtomicU64,
    pub dirty_home: Mutex<Vec<(u64, u64)>>,
    pub uncommitted: AtomicBool,
    /// Home bytes were written since the last commit (the commit must fence the mapping).
    pub home_dirty: AtomicBool,
    pub closed: AtomicBool,
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

/// Store `data` at `off` so that it is durable at the next fence of `region`.
fn store_flushed<G: Region + ?Sized>(region: &G, off: u64, data: &[u8]) {
    if data.len() >= NT_MIN {
        region.write_nt(off, data);
    } else {
        region.write(off, data);
        region.flush(off, data.len() as u64);
    }
}

impl<R: Region, M: FileMedia> MmioFile<R, M> {
    /// Store new bytes home: non-temporal when large (durable at the commit's fence), else
    /// cached and remembered for the commit's flush.
    fn write_home(&self, map: &M::Map, off: u64, data: &[u8]) {
        self.home_dirty.store(true, Ordering::Release);
        if data.len() >= NT_MIN {
            // Non-temporal: drained by the next fence of this thread (see `write`).
            map.write_nt(off, data);
        } else {
            map.write(off, data);
            self.dirty_home.lock().push((off, data.len() as u64));
        }
    }

    /// Open `path` (host length `len`, identity `media_id`) with a fresh metadata slot.
    pub fn open(
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
            live: Mutex::new(BTreeSet::new()),
            epoch: AtomicU64::new(1),
            redo: AtomicBool::new(redo),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            epoch_bytes: AtomicU64::new(0),
            dirty_home: Mutex::new(Vec::new()),
            uncommitted: AtomicBool::new(false),
            home_dirty: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            _pool: std::marker::PhantomData,
        });
        file.tree.cover(len.div_ceil(BLOCK_SIZE));
        s.files.lock().insert(slot, Arc::downgrade(&file));
        Ok(file)
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::NotFound(format!("file {} was unlinked", self.ino)));
        }
        Ok(())
    }

    pub fn size(&self) -> u64 {
        self.state.read().visible_size
    }

    // ----- writes -----

    /// Write `data` at `off` (uncommitted until the next commit). `commit_follows`: the
    /// caller commits the file next on this same thread (a call outside a transaction).
    pub fn write(
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
        let used = self
            .epoch_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed)
            + data.len() as u64;
        if used > s.config.epoch_bytes_max {
            self.epoch_bytes
                .fetch_sub(data.len() as u64, Ordering::Relaxed);
            return Err(Error::NoSpace(format!(
                "file {}: more than epoch_bytes_max ({}) bytes in one uncommitted epoch",
                self.ino, s.config.epoch_bytes_max
            )));
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        s.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.uncommitted.store(true, Ordering::Release);
        let fence_home = |st: &FileState<M::Map>| {
            if !commit_follows {
                if let Some(map) = st.map.as_deref() {
                    // persist: non-temporal home stores drain only at a fence of the thread
                    // that issued them, and the commit may run on another thread.
                    map.fence();
                }
            }
        };
        {
            let st = self.state.read();
            if end <= st.visible_size {
                let r = self.write_inner(s, &st, off, data);
                fence_home(&st);
                return r;
            }
        }
        let mut st = self.state.write();
        if end > st.visible_size {
            self.extend_to(s, &mut st, end)?;
        }
        let r = self.write_inner(s, &st, off, data);
        fence_home(&st);
        r
    }

    /// Truncate or extend (uncommitted until the next commit).
    pub fn set_len(&self, s: &Shared<R, M>, len: u64) -> Result<()> {
        self.check_open()?;
        self.uncommitted.store(true, Ordering::Release);
        let mut st = self.state.write();
        if len > st.visible_size {
            self.extend_to(s, &mut st, len)
        } else if len < st.visible_size {
            self.set_pending_size(s, &mut st, len);
            Ok(())
        } else {
            Ok(())
        }
    }

    fn extend_to(&self, s: &Shared<R, M>, st: &mut FileState<M::Map>, new_size: u64) -> Result<()> {
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
            self.write_inner(s, st, old_visible, &zeros)?;
            if let Some(map) = st.map.as_deref() {
                // persist: drain this thread's non-temporal zeros (the commit may be elsewhere).
                map.fence();
            }
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

    fn map_of<'a>(&self, st: &'a FileState<M::Map>) -> Result<&'a M::Map> {
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
            let n = self.log_piece(s, st, p, &data[at..(cut - off) as usize])?;
            s.counters
                .bytes_logged
                .fetch_add(n as u64, Ordering::Relaxed);
            p += n as u64;
        }
        // Direct part: at or past the committed size, nothing to protect.
        if cut < end {
            let map = self.map_of(st)?;
            self.write_home(map, cut, &data[(cut - off) as usize..]);
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
    ) -> Result<usize> {
        let block = p / BLOCK_SIZE;
        let mut tried_checkpoint = false;
        loop {
            if let Some(id) = self.tree.get(block) {
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
                self.apply(s, st, id, &mut e, p, &piece[..n])?;
                return Ok(n);
            }
            match self.create_entry(s, st, p, piece)? {
                Some(n) => return Ok(n),
                None if !tried_checkpoint => {
                    // Log full: checkpoint every committed entry of every file, then retry.
                    tried_checkpoint = true;
                    self.checkpoint_locked(s, st)?;
                    let others: Vec<_> = s
                        .files
                        .lock()
                        .iter()
                        .filter(|(k, _)| **k != self.slot)
                        .filter_map(|(_, f)| f.upgrade())
                        .collect();
                    for f in others {
                        if let Some(g) = f.state.try_read() {
                            f.checkpoint_locked(s, &g)?;
                        }
                    }
                }
                None => return Err(log_full()),
            }
        }
    }

    /// A new entry for the block(s) at `p`; `Ok(None)` when the log pool is full.
    fn create_entry(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        p: u64,
        piece: &[u8],
    ) -> Result<Option<usize>> {
        let order_max = s.sb.order_max();
        // Log entries double with the IO size (4 KB … log_entry_max).
        let want = (piece.len() as u64).next_power_of_two().max(BLOCK_SIZE);
        let mut order = (want / BLOCK_SIZE).trailing_zeros().min(order_max as u32) as u8;
        loop {
            let size = BLOCK_SIZE << order;
            let base = p - p % size;
            if order == 0 || self.tree.range_empty(base / BLOCK_SIZE, size / BLOCK_SIZE) {
                break;
            }
            order -= 1;
        }
        let size = BLOCK_SIZE << order;
        let base = p - p % size;
        let Some((id, log_off)) = s.reserve(order) else {
            return Ok(None);
        };
        let mut e = s.entries[id as usize].write();
        let redo = self.redo.load(Ordering::Acquire);
        let rel = p - base;
        let n = piece.len().min((size - rel) as usize);
        *e = EntryState {
            live: true,
            file_slot: self.slot,
            policy_redo: redo,
            order,
            epoch: self.epoch.load(Ordering::Acquire),
            file_off: base,
            log_off,
            delta_off: rel as u32,
            delta_len: n as u32,
        };
        if !self
            .tree
            .insert_range(base / BLOCK_SIZE, size / BLOCK_SIZE, id)
        {
            e.live = false;
            drop(e);
            s.unreserve(id, log_off, order);
            return Ok(Some(0)); // lost a race for the blocks: the caller looks again
        }
        self.live.lock().insert(id);
        let map = self.map_of(st)?;
        if redo {
            store_flushed(&s.pool, log_off + rel, &piece[..n]);
        } else {
            let mut old = vec![0u8; n];
            map.read(p, &mut old);
            store_flushed(&s.pool, log_off + rel, &old);
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
        s.publish_entry(id, &entry);
        s.counters.entries_created.fetch_add(1, Ordering::Relaxed);
        if !redo {
            self.write_home(map, p, &piece[..n]);
        }
        Ok(Some(n))
    }

    /// Write into an existing uncommitted entry (differential logging: one chunk per entry,
    /// two chunks merge into their union).
    fn apply(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        id: u32,
        e: &mut EntryState,
        p: u64,
        data: &[u8],
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
            let mut buf = Vec::new();
            for &(a, b) in ranges {
                buf.resize((b - a) as usize, 0);
                map.read(e.file_off + a, &mut buf);
                store_flushed(&s.pool, e.log_off + a, &buf);
            }
        };
        if e.policy_redo {
            // Bytes of the union covered by neither chunk take the current home bytes.
            copy_home_to_log(&subtract(u0, u1, &[(d0, d1), (n0, n1)]));
            store_flushed(&s.pool, e.log_off + n0, data);
            if (u0, u1) != (d0, d1) {
                s.set_delta(id, u0 as u32, (u1 - u0) as u32);
            }
            // persist: the redo bytes (uncommitted until the epoch bump) are durable.
            s.pool.fence();
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
            self.write_home(map, p, data);
        }
        e.delta_off = u0 as u32;
        e.delta_len = (u1 - u0) as u32;
        Ok(())
    }

    // ----- reads -----

    pub fn read(&self, s: &Shared<R, M>, off: u64, buf: &mut [u8]) -> Result<usize> {
        let st = self.state.read();
        self.reads.fetch_add(1, Ordering::Relaxed);
        s.counters.reads.fetch_add(1, Ordering::Relaxed);
        if off >= st.visible_size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(st.visible_size - off) as usize;
        let map = self.map_of(&st)?;
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
        Ok(n)
    }

    // ----- checkpoint -----

    /// Copy a committed redo entry home and free it (entry lock held).
    fn checkpoint_one(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        id: u32,
        e: &mut EntryState,
    ) -> Result<()> {
        if e.policy_redo {
            let map = self.map_of(st)?;
            self.copy_log_home(s, st, map, e);
            // persist: the checkpointed bytes are home (msync on a non-DAX file system)
            // before the entry that protects them is freed.
            map.fence();
            M::check_map(map)
                .map_err(|err| io_err(st.path.as_deref().unwrap_or("?".as_ref()), "msync", err))?;
        }
        s.clear_entry(id);
        // persist: the entry is free.
        s.pool.fence();
        self.forget(s, id, e);
        Ok(())
    }

    fn copy_log_home(
        &self,
        s: &Shared<R, M>,
        st: &FileState<M::Map>,
        map: &M::Map,
        e: &EntryState,
    ) {
        let a = e.file_off + e.delta_off as u64;
        let b = (a + e.delta_len as u64).min(st.host_len);
        if a < b {
            let mut buf = vec![0u8; (b - a) as usize];
            s.pool.read(e.log_off + e.delta_off as u64, &mut buf);
            store_flushed(map, a, &buf);
        }
    }

    fn forget(&self, s: &Shared<R, M>, id: u32, e: &mut EntryState) {
        let blocks = e.size() / BLOCK_SIZE;
        self.tree.remove_range(e.file_off / BLOCK_SIZE, blocks, id);
        self.live.lock().remove(&id);
        e.live = false;
        s.unreserve(id, e.log_off, e.order);
        s.counters
            .entries_checkpointed
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Checkpoint every committed entry (file lock held by the caller, shared or exclusive).
    pub fn checkpoint_locked(&self, s: &Shared<R, M>, st: &FileState<M::Map>) -> Result<usize> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let ids: Vec<u32> = self.live.lock().iter().copied().collect();
        let mut taken = Vec::new();
        for id in ids {
            let g = s.entries[id as usize].write();
            if g.live && g.file_slot == self.slot && g.epoch < epoch {
                taken.push((id, g));
            }
        }
        if taken.is_empty() {
            return Ok(0);
        }
        if let Some(map) = st.map.as_deref() {
            for (_, g) in &taken {
                if g.policy_redo {
                    self.copy_log_home(s, st, map, g);
                }
            }
            // persist: every checkpointed byte is home before its entry is freed.
            map.fence();
            M::check_map(map)
                .map_err(|err| io_err(st.path.as_deref().unwrap_or("?".as_ref()), "msync", err))?;
        }
        for (id, _) in &taken {
            s.clear_entry(*id);
        }
        // persist: the checkpointed entries are free.
        s.pool.fence();
        let n = taken.len();
        for (id, mut g) in taken {
            self.forget(s, id, &mut g);
        }
        Ok(n)
    }

    /// Background or on-demand checkpoint of committed entries.
    pub fn checkpoint_committed(&self, s: &Shared<R, M>, _sync: bool) -> Result<usize> {
        let st = self.state.read();
        self.checkpoint_locked(s, &st)
    }

    // ----- commit and abort -----

    /// Step 1 of a commit (file lock exclusive): make every home write of the epoch durable.
    pub fn prepare_commit(&self, st: &FileState<M::Map>) -> Result<()> {
        if !self.home_dirty.swap(false, Ordering::AcqRel) {
            return Ok(()); // nothing written home in this epoch (redo entries are durable)
        }
        let ranges = std::mem::take(&mut *self.dirty_home.lock());
        if let Some(map) = st.map.as_deref() {
            for (a, l) in ranges {
                let l = l.min(st.host_len.saturating_sub(a));
                if l > 0 {
                    map.flush(a, l);
                }
            }
            // persist: undo-mode and direct home writes are durable before the epoch bump
            // that commits them (msync on a non-DAX file system).
            map.fence();
            M::check_map(map)
                .map_err(|e| io_err(st.path.as_deref().unwrap_or("?".as_ref()), "msync", e))?;
        }
        Ok(())
    }

    pub fn needs_commit(&self) -> bool {
        self.uncommitted.load(Ordering::Acquire)
    }

    /// Step 3 of a commit, after the epoch word(s) are durable: fold the size, apply a
    /// truncation to the host file, decide the next epoch's policy.
    pub fn finish_commit(
        &self,
        s: &Shared<R, M>,
        st: &mut FileState<M::Map>,
        new_epoch: u64,
    ) -> Result<()> {
        self.epoch.store(new_epoch, Ordering::Release);
        self.uncommitted.store(false, Ordering::Release);
        self.epoch_bytes.store(0, Ordering::Relaxed);
        s.counters.commits.fetch_add(1, Ordering::Relaxed);
        let mut force_checkpoint = false;
        if st.size_pending {
            let at = s.sb.file_meta_at(self.slot);
            s.pool.store_u64(at + fm::COMMITTED_SIZE, st.visible_size);
            s.pool.persist(at + fm::COMMITTED_SIZE, 8);
            s.pool.store_u64(at + fm::PENDING_EPOCH, NO_EPOCH);
            // persist: the committed size is folded; the pending field is free again.
            s.pool.persist(at + fm::PENDING_EPOCH, 8);
            st.size_pending = false;
            if st.visible_size < st.committed_size {
                force_checkpoint = true; // drop entries past the new end before it can regrow
            }
            st.committed_size = st.visible_size;
        }
        let w = self.writes.swap(0, Ordering::Relaxed);
        let r = self.reads.swap(0, Ordering::Relaxed);
        let mut redo_next = self.redo.load(Ordering::Acquire);
        if s.config.policy_mode == PolicyMode::Hybrid && w + r > 0 {
            // Multiply before comparing (the public code divided integers first, so any read
            // in the epoch made the ratio 0 and the switch to redo never happened).
            redo_next = w * 100 >= s.config.redo_write_percent_min * (w + r);
        }
        let switch = redo_next != self.redo.load(Ordering::Acquire);
        if switch || force_checkpoint {
            // Synchronous checkpoint at a policy switch (§3.4): the new epoch starts clean.
            self.checkpoint_locked(s, st)?;
            s.counters.sync_checkpoints.fetch_add(1, Ordering::Relaxed);
        }
        if switch {
            self.redo.store(redo_next, Ordering::Release);
            let policy = if redo_next {
                Policy::Redo
            } else {
                Policy::Undo
            };
            let at = s.sb.file_meta_at(self.slot) + fm::HEADER;
            s.pool.store_u64(at, layout::file_header(policy));
            s.pool.persist(at, 8);
            s.counters.policy_switches.fetch_add(1, Ordering::Relaxed);
        }
        if st.host_len > st.committed_size {
            if let Some(path) = st.path.clone() {
                s.media
                    .set_len(&path, st.committed_size)
                    .map_err(|e| io_err(&path, "set_len", e))?;
            }
            st.host_len = st.committed_size;
        }
        if !self.live.lock().is_empty() {
            s.signal_work();
        }
        Ok(())
    }

    /// Commit this file alone: one persisted 8-byte store of its epoch.
    pub fn commit(&self, s: &Shared<R, M>) -> Result<()> {
        let mut st = self.state.write();
        if !self.needs_commit() || self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.prepare_commit(&st)?;
        let e = self.epoch.load(Ordering::Acquire);
        let at = s.sb.file_meta_at(self.slot) + fm::EPOCH;
        s.pool.store_u64(at, e + 1);
        // persist: COMMIT POINT of the file's epoch: its entries become committed.
        s.pool.persist(at, 8);
        self.finish_commit(s, &mut st, e + 1)
    }

    /// Drop every uncommitted change (file lock exclusive).
    pub fn abort_locked(&self, s: &Shared<R, M>, st: &mut FileState<M::Map>) -> Result<()> {
        let epoch = self.epoch.load(Ordering::Acquire);
        let ids: Vec<u32> = self.live.lock().iter().copied().collect();
        let mut taken = Vec::new();
        for id in ids {
            let g = s.entries[id as usize].write();
            if g.live && g.file_slot == self.slot && g.epoch == epoch {
                taken.push((id, g));
            }
        }
        if let Some(map) = st.map.as_deref() {
            for (_, g) in &taken {
                if !g.policy_redo {
                    self.copy_log_home(s, st, map, g); // undo: old bytes back home
                }
            }
            map.fence();
        }
        for (id, _) in &taken {
            s.clear_entry(*id);
        }
        // persist: the aborted entries are free (home holds the old bytes again).
        s.pool.fence();
        for (id, mut g) in taken {
            self.forget(s, id, &mut g);
        }
        self.dirty_home.lock().clear();
        self.home_dirty.store(false, Ordering::Release);
        if st.size_pending {
            let at = s.sb.file_meta_at(self.slot) + fm::PENDING_EPOCH;
            s.pool.store_u64(at, NO_EPOCH);
            s.pool.persist(at, 8);
            st.size_pending = false;
            st.visible_size = st.committed_size;
        }
        if st.host_len > st.committed_size {
            if let Some(path) = st.path.clone() {
                s.media
                    .set_len(&path, st.committed_size)
                    .map_err(|e| io_err(&path, "set_len", e))?;
            }
            st.host_len = st.committed_size;
        }
        self.uncommitted.store(false, Ordering::Release);
        self.epoch_bytes.store(0, Ordering::Relaxed);
        s.counters.aborts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub fn abort(&self, s: &Shared<R, M>) -> Result<()> {
        let mut st = self.state.write();
        self.abort_locked(s, &mut st)
    }

    /// Checkpoint everything, drop uncommitted changes, free the metadata slot.
    pub fn close(&self, s: &Shared<R, M>) -> Result<()> {
        let mut st = self.state.write();
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.abort_locked(s, &mut st)?;
        self.checkpoint_locked(s, &st)?;
        let at = s.sb.file_meta_at(self.slot) + fm::HEADER;
        s.pool.store_u64(at, 0);
        // persist: the slot is free (nothing of the file is left in the log).
        s.pool.persist(at, 8);
        s.files.lock().remove(&self.slot);
        s.free_file_slots.lock().push(self.slot);
        Ok(())
    }
}
