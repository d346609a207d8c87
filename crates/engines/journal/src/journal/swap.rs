//! Header swaps through the reserved headers (seed §3.3): the persistent copies of the two
//! new headers are armed first, so a crash leaves either no change or, after recovery
//! applies the record, both.

use super::Journal;
use crate::layout::swap_record::{SwapRecord, SEAL_OFF};
use crate::layout::{Header, RESERVED_OFF};
use hostfs::HostFs;
use pmem::Region;

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Replace the headers of two slots by `a` and `b` (each names its slot by jh_number),
    /// all or nothing.
    pub(super) fn swap_headers(&self, a: Header, b: Header) {
        assert_ne!(a.jh_number, b.jh_number, "swap of a header with itself");
        assert_ne!(
            a.j_blocknr, b.j_blocknr,
            "a swap must keep the block mapping a permutation"
        );
        let record = SwapRecord {
            slot_a: a.jh_number,
            header_a: a,
            slot_b: b.jh_number,
            header_b: b,
        };
        let bytes = record.encode(&self.geometry);
        let check = SwapRecord::decode(&bytes, &self.geometry);
        assert!(
            matches!(check, Ok(Some(r)) if r == record),
            "swap record does not decode"
        );
        self.region.write(RESERVED_OFF, &bytes);
        // persist: the armed record (copies of both new headers) before either header changes.
        self.region.persist(RESERVED_OFF, bytes.len() as u64);
        self.apply_swap(&record);
    }

    /// Write a swap record's headers and disarm it. Idempotent (recovery calls it again).
    pub(super) fn apply_swap(&self, record: &SwapRecord) {
        self.put_header(&record.header_a);
        self.put_header(&record.header_b);
        // persist: both headers (flushed by put_header), before the record is disarmed.
        self.region.fence();
        self.region.store_u64(RESERVED_OFF + SEAL_OFF, 0);
        // persist: the record disarmed, so a later recovery does not apply it over newer
        // header changes.
        self.region.persist(RESERVED_OFF + SEAL_OFF, 8);
    }
}
