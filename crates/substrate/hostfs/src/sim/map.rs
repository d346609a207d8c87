//! Whole-file mappings of the crash model, as a [`pmem::Region`].
//!
//! A store changes the live content of the file (the page cache) and records the content of
//! each page it touches as a pending update of that page; [`flush`](Region::flush) notes the
//! pages, and the next [`fence`](Region::fence) is the `msync` of those pages: a sync point
//! (the sync hook sees a crash just before it) after which they are durable at their content
//! then. Pages that were stored to but not flushed stay pending: the kernel may write them
//! back at any time, or never.

use super::state::{Key, Piece};
use super::SimHostFs;
use pmem::{check_range, Region, RegionStats};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A mapping of one file of a [`SimHostFs`].
pub struct SimMap {
    fs: SimHostFs,
    ino: u64,
    len: u64,
    /// First byte of every page flushed since the last fence.
    flushed: Mutex<BTreeSet<u64>>,
    bytes_stored: AtomicU64,
    lines_flushed: AtomicU64,
    fences: AtomicU64,
}

impl SimMap {
    pub(super) fn new(fs: SimHostFs, ino: u64, len: u64) -> SimMap {
        SimMap {
            fs,
            ino,
            len,
            flushed: Mutex::new(BTreeSet::new()),
            bytes_stored: AtomicU64::new(0),
            lines_flushed: AtomicU64::new(0),
            fences: AtomicU64::new(0),
        }
    }

    fn page(&self) -> u64 {
        self.fs.shared.config.page_len
    }

    /// Store `data` at `off`: the part inside the file changes its live content; a store to a
    /// page wholly past the end is what SIGBUS is on a real mapping, a bug of the caller.
    fn store(&self, off: u64, data: &[u8]) {
        check_range(self.len, off, data.len() as u64);
        let page = self.page();
        let mut state = self.fs.lock();
        let Some(node) = state.inodes.get_mut(&self.ino) else {
            return;
        };
        let file_len = node.live.len() as u64;
        assert!(
            data.is_empty() || off < file_len.div_ceil(page) * page,
            "hostfs: mapped store at {off} in a page wholly past the end of the file ({file_len} bytes)"
        );
        let end = (off + data.len() as u64).min(file_len);
        if off < end {
            node.live[off as usize..end as usize].copy_from_slice(&data[..(end - off) as usize]);
            let mut at = off / page * page;
            while at < end {
                let stop = (at + page).min(file_len);
                let bytes = state
                    .inodes
                    .get(&self.ino)
                    .map_or_else(Vec::new, |n| n.live[at as usize..stop as usize].to_vec());
                let key = Key::Unit {
                    ino: self.ino,
                    start: at,
                    len: page,
                };
                state.push(
                    Some(key),
                    vec![Piece::Data {
                        ino: self.ino,
                        off: at,
                        bytes,
                    }],
                );
                at += page;
            }
        }
        self.bytes_stored
            .fetch_add(data.len() as u64, Ordering::Relaxed);
    }
}

impl Region for SimMap {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&self, off: u64, buf: &mut [u8]) {
        check_range(self.len, off, buf.len() as u64);
        let state = self.fs.lock();
        buf.fill(0);
        if let Some(node) = state.inodes.get(&self.ino) {
            let start = (off as usize).min(node.live.len());
            let n = buf.len().min(node.live.len() - start);
            buf[..n].copy_from_slice(&node.live[start..start + n]);
        }
    }

    fn write(&self, off: u64, data: &[u8]) {
        self.store(off, data)
    }

    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.store(off, &vec![byte; len as usize])
    }

    fn write_nt(&self, off: u64, data: &[u8]) {
        self.store(off, data);
        self.flush(off, data.len() as u64);
    }

    fn load_u64(&self, off: u64) -> u64 {
        assert!(off & 7 == 0, "hostfs: unaligned 8-byte load at {off}");
        let mut word = [0u8; 8];
        self.read(off, &mut word);
        u64::from_le_bytes(word)
    }

    fn store_u64(&self, off: u64, value: u64) {
        assert!(off & 7 == 0, "hostfs: unaligned 8-byte store at {off}");
        self.store(off, &value.to_le_bytes())
    }

    fn flush(&self, off: u64, len: u64) {
        check_range(self.len, off, len);
        if len == 0 {
            return;
        }
        let page = self.page();
        let mut flushed = self.flushed.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = off / page * page;
        while at < off + len {
            flushed.insert(at);
            at += page;
        }
        self.lines_flushed
            .fetch_add(pmem::lines_in(off, len), Ordering::Relaxed);
    }

    fn fence(&self) {
        self.fences.fetch_add(1, Ordering::Relaxed);
        let pages = std::mem::take(&mut *self.flushed.lock().unwrap_or_else(|e| e.into_inner()));
        if pages.is_empty() {
            return;
        }
        let page = self.page();
        let ino = self.ino;
        // persist: msync of the flushed pages makes them durable at their content now.
        let _ = self.fs.sync_point(|state| {
            for start in &pages {
                state.sync_range(ino, *start, start + page);
            }
        });
    }

    fn stats(&self) -> RegionStats {
        RegionStats {
            bytes_stored: self.bytes_stored.load(Ordering::Relaxed),
            lines_flushed: self.lines_flushed.load(Ordering::Relaxed),
            fences: self.fences.load(Ordering::Relaxed),
        }
    }
}
