//! Where each area of a pool lies, computed from the pool length and the limits.

use super::intent::INTENT_LEN;
use super::{CHUNK_SIZE, RECORD_LEN, TAG_LEN};
use store::{Error, Result};

/// Bytes of one unit record: the open transaction's stamp, and the group it is linked to
/// (index + 1; 0 = none) while a group commit (syncv) is in progress.
pub const UNIT_LEN: u64 = 16;

/// Bytes of the superblock area.
pub const SUPERBLOCK_LEN: u64 = 4096;

/// The areas of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    slots: u64,
    files_max: u64,
    units_max: u64,
    intents_max: u64,
}

fn align(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Geometry {
    /// The geometry with `slots` slots; checks that the counts are in range.
    pub fn new(slots: u64, files_max: u64, units_max: u64, intents_max: u64) -> Result<Self> {
        if slots == 0 || files_max == 0 || units_max == 0 || intents_max == 0 {
            return Err(Error::InvalidArgument(
                "cache pool needs at least one slot, one file record and one unit word".into(),
            ));
        }
        if slots > (1 << 40)
            || files_max > (1 << 32)
            || units_max > (1 << 20)
            || intents_max > (1 << 20)
        {
            return Err(Error::InvalidArgument(
                "cache pool geometry out of range".into(),
            ));
        }
        Ok(Geometry {
            slots,
            files_max,
            units_max,
            intents_max,
        })
    }

    /// The most slots a pool of `pool_len` bytes holds with these limits (0 when none fits).
    pub fn slots_for(pool_len: u64, files_max: u64, units_max: u64, intents_max: u64) -> u64 {
        let fixed = align(
            SUPERBLOCK_LEN
                + units_max * UNIT_LEN
                + intents_max * INTENT_LEN
                + files_max * RECORD_LEN,
            CHUNK_SIZE,
        );
        let per_slot = 2 * (CHUNK_SIZE + TAG_LEN);
        // The tag area is rounded up to a chunk: leave one chunk for that.
        pool_len.saturating_sub(fixed + CHUNK_SIZE) / per_slot
    }

    pub fn slots(&self) -> u64 {
        self.slots
    }
    pub fn chunks(&self) -> u64 {
        self.slots * 2
    }
    pub fn files_max(&self) -> u64 {
        self.files_max
    }
    pub fn units_max(&self) -> u64 {
        self.units_max
    }
    pub fn units_off(&self) -> u64 {
        SUPERBLOCK_LEN
    }
    pub fn intents_max(&self) -> u64 {
        self.intents_max
    }
    pub fn intents_off(&self) -> u64 {
        align(self.units_off() + self.units_max * UNIT_LEN, INTENT_LEN)
    }
    pub fn records_off(&self) -> u64 {
        self.intents_off() + self.intents_max * INTENT_LEN
    }
    pub fn intent_at(&self, i: u64) -> u64 {
        assert!(i < self.intents_max, "cache: intent {i} out of range");
        self.intents_off() + i * INTENT_LEN
    }
    pub fn tags_off(&self) -> u64 {
        align(self.records_off() + self.files_max * RECORD_LEN, 64)
    }
    pub fn chunks_off(&self) -> u64 {
        align(self.tags_off() + self.chunks() * TAG_LEN, CHUNK_SIZE)
    }
    /// Bytes the pool needs.
    pub fn pool_len(&self) -> u64 {
        self.chunks_off() + self.chunks() * CHUNK_SIZE
    }
    pub fn unit_at(&self, i: u64) -> u64 {
        assert!(i < self.units_max, "cache: unit word {i} out of range");
        self.units_off() + i * UNIT_LEN
    }
    pub fn record_at(&self, i: u64) -> u64 {
        assert!(i < self.files_max, "cache: record {i} out of range");
        self.records_off() + i * RECORD_LEN
    }
    pub fn tag_at(&self, chunk: u64) -> u64 {
        assert!(chunk < self.chunks(), "cache: tag {chunk} out of range");
        self.tags_off() + chunk * TAG_LEN
    }
    pub fn chunk_at(&self, chunk: u64) -> u64 {
        assert!(chunk < self.chunks(), "cache: chunk {chunk} out of range");
        self.chunks_off() + chunk * CHUNK_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_areas_do_not_overlap_and_fit_the_pool() {
        let len = 1 << 20;
        let slots = Geometry::slots_for(len, 16, 8, 4);
        let g = Geometry::new(slots, 16, 8, 4).unwrap_or_else(|e| panic!("{e}"));
        assert!(g.pool_len() <= len, "{} > {len}", g.pool_len());
        assert!(g.records_off() >= g.units_off() + 64);
        assert!(g.tags_off() >= g.records_off() + 16 * RECORD_LEN);
        assert!(g.chunks_off() >= g.tags_off() + g.chunks() * TAG_LEN);
        assert_eq!(g.chunks_off() % CHUNK_SIZE, 0);
    }
}
