//! Reads: a hit is served from the newest valid chunk of the slot; a miss reads the home
//! block (zeros past the home file's end, which is never past the file's length).

use super::Cache;
use crate::backing::Backing;
use crate::counters::Counters;
use crate::format::CHUNK_SIZE;
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
}
