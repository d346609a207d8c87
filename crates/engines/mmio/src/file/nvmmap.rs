//! The Libnvmmio-style interface beside the Store API: [`NvMap`] (`nvmmap`), with
//! `memcpy`-style failure-atomic writes made durable together by [`NvMap::sync`]
//! (`nvmsync`), and the read-only consistency check behind `Store::fsck`.

use crate::host::FileMedia;
use crate::log::layout::{self, IndexEntry};
use crate::shared::Shared;
use crate::MmioStore;
use pmem::Region;
use store::{Fh, FsckReport, Result, Store};

/// A file mapped for failure-atomic memory-mapped IO. Writes (`write_at`, the seed's
/// `nvmemcpy` into the mapping) become durable and visible after a crash only together, at the
/// next [`sync`](NvMap::sync); dropping the map without a sync drops them (as a crash would).
pub struct NvMap<'a, R: Region, M: FileMedia> {
    store: &'a MmioStore<R, M>,
    fh: Fh,
}

impl<'a, R: Region, M: FileMedia> NvMap<'a, R, M> {
    pub(crate) fn new(store: &'a MmioStore<R, M>, fh: Fh) -> Self {
        NvMap { store, fh }
    }

    /// Copy `data` into the mapping at `off` (growing the file if needed).
    pub fn write_at(&self, off: u64, data: &[u8]) -> Result<()> {
        self.store.write(self.fh, off, data).map(|_| ())
    }

    /// Copy from the mapping at `off` (sees this epoch's writes).
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.store.read(self.fh, off, buf)
    }

    /// Commit every write since the last sync, atomically (one 8-byte epoch store).
    pub fn sync(&self) -> Result<()> {
        self.store.fsync(self.fh, false)
    }

    /// Drop every write since the last sync.
    pub fn abort(&self) -> Result<()> {
        self.store.abortv(&[self.fh])
    }

    /// Current length of the mapped file.
    pub fn len(&self) -> Result<u64> {
        Ok(self.store.fstat(self.fh)?.size)
    }

    /// True when the mapped file is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The underlying Store handle.
    pub fn handle(&self) -> Fh {
        self.fh
    }
}

impl<R: Region, M: FileMedia> Drop for NvMap<'_, R, M> {
    fn drop(&mut self) {
        let _ = self.store.release(self.fh);
    }
}

/// Check the log pool's structures (never modifies anything).
pub(crate) fn fsck<R: Region, M: FileMedia>(s: &Shared<R, M>) -> FsckReport {
    let mut report = FsckReport::default();
    let sb = &s.sb;
    let mut in_use = vec![false; sb.files_max as usize];
    for slot in 0..sb.files_max {
        let m = layout::read_file_meta(&s.pool, sb, slot);
        if !m.in_use {
            continue;
        }
        in_use[slot as usize] = true;
        if !m.checksum_ok {
            report.problem(
                "per-file metadata checksum mismatch",
                format!("file slot {slot}"),
            );
        }
        if m.store_id != sb.store_id {
            report.problem(
                "per-file metadata of another store",
                format!("file slot {slot}"),
            );
        }
        if m.epoch == 0 {
            report.problem("per-file epoch 0", format!("file slot {slot}"));
        }
    }
    let mut live = 0u64;
    let mut used = std::collections::BTreeMap::new();
    for idx in 0..sb.index_entries_max {
        let at = sb.index_at(idx);
        let mut b = [0u8; 64];
        s.pool.read(at, &mut b);
        match IndexEntry::decode(&b, at) {
            Ok(None) => {}
            Ok(Some(e)) => {
                live += 1;
                let size = layout::BLOCK_SIZE << e.order.min(40);
                if e.file_slot >= sb.files_max || !in_use[e.file_slot as usize] {
                    report.problem(
                        "index entry of a free file slot",
                        format!("index entry {idx}"),
                    );
                }
                if e.order > sb.order_max()
                    || e.log_off < sb.log_off
                    || e.log_off % size != 0
                    || e.log_off + size > sb.log_off + sb.log_len
                    || e.delta_off as u64 + e.delta_len as u64 > size
                {
                    report.problem(
                        "index entry fields out of range",
                        format!("index entry {idx}"),
                    );
                } else if let Some((prev, _)) = used
                    .range(..e.log_off + size)
                    .next_back()
                    .filter(|(&o, &l)| o + l > e.log_off)
                {
                    report.problem(
                        format!("log space overlaps the entry at {prev:#x}"),
                        format!("index entry {idx}"),
                    );
                } else {
                    used.insert(e.log_off, size);
                }
            }
            Err(e) => report.problem(e.to_string(), format!("index entry {idx}")),
        }
    }
    report.checked.push((
        "file slots in use".into(),
        in_use.iter().filter(|u| **u).count() as u64,
    ));
    report.checked.push(("index entries live".into(), live));
    report
}
