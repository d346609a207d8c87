//! Reads and writes of the journal's PM structures: every persistent byte goes through here
//! or through `swap`.

use super::Journal;
use crate::layout::superblock::{
    Superblock, P_CHECKPOINT_OFF, P_COMMIT_OFF, P_FIRST_FREE_OFF, P_FIRST_OFF,
};
use crate::layout::{swap_record, Flags, Geometry, Header, BLOCK_LEN, RESERVED_OFF};
use crate::JournalResult;
use hostfs::HostFs;
use pmem::Region;

/// Write an empty journal: superblock, clear swap record, free headers (header i matches
/// journal block i), pointers at 0.
pub(super) fn format(region: &impl Region, g: Geometry) {
    // The superblock's sealed line, pointers and statistics, and the reserved headers; the
    // home record (offset 1024 of the superblock page) is the caller's.
    region.fill(0, crate::layout::superblock::HOME_RECORD_OFF, 0);
    region.fill(RESERVED_OFF, crate::layout::HEADERS_OFF - RESERVED_OFF, 0);
    for slot in 0..g.blocks() {
        let h = Header::free(slot, slot, 0);
        region.write(g.header_off(slot), &h.encode(g.format()));
    }
    // persist: headers and a clear swap record before the superblock makes this a journal.
    region.persist(RESERVED_OFF, g.blocks_off() - RESERVED_OFF);
    let sb = Superblock::new(g).encode();
    let check = Superblock::decode(&sb).map(|s| s.geometry());
    assert_eq!(check.ok(), Some(g), "superblock encoding does not decode");
    region.write(0, &sb);
    // persist: the superblock; the journal exists from here on.
    region.persist(0, 4096);
}

impl<R: Region, H: HostFs> Journal<R, H> {
    /// The header in `slot`, checked.
    pub(super) fn header(&self, slot: u32) -> JournalResult<Header> {
        let off = self.geometry.header_off(slot);
        let w0 = self.region.load_u64(off);
        let w1 = self.region.load_u64(off + 8);
        Header::decode(w0, w1, slot, &self.geometry)
    }

    /// The header in `slot`, which this process wrote and checked before.
    pub(super) fn header_known(&self, slot: u32) -> Header {
        match self.header(slot) {
            Ok(h) => h,
            Err(e) => panic!("header {slot} written by this journal no longer decodes: {e}"),
        }
    }

    /// Store both words of a header and flush them (durable at the next fence).
    pub(super) fn put_header(&self, h: &Header) {
        let off = self.geometry.header_off(h.jh_number);
        self.region.store_u64(off, h.word0(self.geometry.format()));
        self.region.store_u64(off + 8, h.word1());
        self.region.flush(off, 16);
    }

    /// Change a header's flags by one atomic store of word 0 and flush it.
    pub(super) fn put_flags(&self, slot: u32, flags: Flags) {
        let mut h = self.header_known(slot);
        if h.flags == flags {
            return;
        }
        h.flags = flags;
        let off = self.geometry.header_off(slot);
        self.region.store_u64(off, h.word0(self.geometry.format()));
        self.region.flush(off, 8);
    }

    /// Read journal block `j_blocknr`.
    pub(super) fn read_jblock(&self, j_blocknr: u32, buf: &mut [u8]) {
        assert_eq!(buf.len() as u64, BLOCK_LEN);
        self.region.read(self.geometry.block_off(j_blocknr), buf);
    }

    /// Store p_checkpoint (and p_commit, p_first_free with it) and persist: the commit point.
    pub(super) fn store_checkpoint_pointer(&self, p_checkpoint: u64) {
        self.region.store_u64(P_COMMIT_OFF, p_checkpoint);
        self.region.store_u64(P_FIRST_FREE_OFF, p_checkpoint);
        self.region.store_u64(P_CHECKPOINT_OFF, p_checkpoint);
        // persist: the one 8-byte store that commits (or, after GC, shrinks the checkpoint
        // area); p_commit and p_first_free share its line and are hints.
        self.region.persist(P_FIRST_OFF, 32);
    }

    /// Store p_first and persist: the end of a checkpoint.
    pub(super) fn store_first_pointer(&self, p_first: u64, checkpoints: u64) {
        self.region
            .store_u64(crate::layout::superblock::CHECKPOINTS_OFF, checkpoints);
        self.region.store_u64(P_FIRST_OFF, p_first);
        // persist: the checkpointed blocks leave the journal only once their home copies
        // are durable (the caller synced them before).
        self.region.persist(P_FIRST_OFF, 8);
        self.region
            .flush(crate::layout::superblock::CHECKPOINTS_OFF, 8);
    }

    /// The swap record's bytes.
    pub(super) fn read_swap_record(&self) -> [u8; swap_record::RECORD_LEN] {
        let mut b = [0u8; swap_record::RECORD_LEN];
        self.region.read(RESERVED_OFF, &mut b);
        b
    }
}
