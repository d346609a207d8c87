//! Reads: a hit is served from the newest valid chunk of the slot; a miss reads the home
//! block (zeros past the home file's end, which is never past the file's length) and loads
//! it into a chunk by the same placement cases as a write (§5.2.2: "read misses load the
//! home block into a chunk by the same cases"), clean, so that the next read hits PM.
//!
//! | slot state at a miss                          | what the miss does                      |
//! |-----------------------------------------------|-----------------------------------------|
//! | both chunks free (Case 1)                     | the block loaded into one, C(1,1) clean |
//! | one chunk of another file (Case 2-2)          | its N cleared, the block loaded into the free one |
//! | two chunks of other files, the older clean (Case 3-3) | the older freed (nothing to flush), then as Case 2-2 |
//! | two chunks, the older dirty                   | not cached: a read never forces a flush home |
//! | a chunk of an open transaction in the slot    | not cached: the free chunk stays the transaction's |
//! | the file's length changed by an open transaction, or the block past the length | not cached |
//!
//! A cached clean chunk is evicted like any other (freed without a home write) and the
//! block is loaded again at its next miss.

use super::files::FileState;
use super::Cache;
use crate::backing::Backing;
use crate::counters::Counters;
use crate::format::{Status, Tag, CHUNK_SIZE};
use crate::slot::WriteCase;
use pmem::Region;
use store::Result;

impl<R: Region, B: Backing> Cache<R, B> {
    /// Read at `off`; returns the bytes read (0 at or past the end of the file).
    pub fn read(&self, key: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        let f = self.file(key)?;
        let size = self.record(&f).size;
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let end = size.min(off + buf.len() as u64);
        let mut pos = off;
        let mut block = vec![0u8; CHUNK_SIZE as usize];
        while pos < end {
            let index = pos / CHUNK_SIZE;
            let start = index * CHUNK_SIZE;
            let hi = end.min(start + CHUNK_SIZE);
            let slot = self.slot_of(key, index);
            {
                let _g = self.lock_slot(slot);
                match self.pair(slot)?.find(key, index) {
                    Some((chunk, _)) => {
                        Counters::bump(&self.counters.read_hits);
                        self.region
                            .read(self.geometry().chunk_at(chunk), &mut block);
                    }
                    None => {
                        Counters::bump(&self.counters.read_misses);
                        self.load_home(&f, index, &mut block)?;
                        self.fill(&f, key, index, &block)?;
                    }
                }
            }
            let from = (pos - start) as usize;
            let to = (hi - start) as usize;
            buf[(pos - off) as usize..(hi - off) as usize].copy_from_slice(&block[from..to]);
            pos = hi;
        }
        Ok((end - off) as usize)
    }

    /// Load the home block `block` of chunk `index` into a clean chunk when the slot has room
    /// without a home write (the table above); the slot lock is held.
    fn fill(&self, f: &FileState, key: u64, index: u64, block: &[u8]) -> Result<()> {
        let rec = self.record(f);
        // Checked under the slot lock: a shrink stores the length before it invalidates
        // the chunks past it (under this lock), so a chunk loaded here is never left past it.
        let length_in_flux = rec.size_stamp != 0 && self.is_open(rec.size_stamp);
        if length_in_flux || index * CHUNK_SIZE >= rec.size {
            Counters::bump(&self.counters.read_fills_skipped);
            return Ok(());
        }
        let stamp = self.take_stamp();
        let slot = self.slot_of(key, index);
        let pair = self.pair(slot)?;
        // A slot holding an open transaction's chunk keeps its free chunk for it.
        let pinned =
            (0..2).any(|side| pair.tag(side).valid() && self.is_open(pair.tag(side).stamp));
        let plan = pair.plan(key, index, stamp);
        let roomy = !pinned
            && match (plan.case, plan.victim) {
                (WriteCase::Case1 | WriteCase::Case2_2, None) => true,
                (WriteCase::Case3_3, Some(victim)) => {
                    let t = self.tag(victim)?;
                    !t.dirty() && !self.is_open(t.stamp)
                }
                _ => false,
            };
        if !roomy || self.make_room(key, index, stamp).is_err() {
            Counters::bump(&self.counters.read_fills_skipped);
            return Ok(());
        }
        if plan.victim.is_some() {
            Counters::bump(&self.counters.read_fill_evictions);
        }
        let at = self.geometry().chunk_at(plan.target);
        self.region.write_nt(at, block);
        self.region.fence();
        // persist (above): the block is durable before its tag makes it valid.
        self.put_tag(
            plan.target,
            &Tag {
                key,
                status: Status::from_bits(Status::VALID | Status::NEW),
                index,
                stamp,
            },
        );
        Counters::bump(&self.counters.read_fills);
        Ok(())
    }
}
