//! The swap record in the reserved header block (seed §3.2/§3.3): the persistent copies of
//! the two headers of a swap, so that a swap is all-or-nothing.
//!
//! ```text
//! 0 slot_a u32 | 4 slot_b u32 | 8 header_a [16] | 24 header_b [16] | 40 seal u64
//! seal = (crc32c(bytes 0..40) << 32) | 0x5357_4150 ("SWAP")  — 0 when no swap is armed
//! ```
//! Protocol (journal::swap): write bytes 0..40 and the seal, persist (armed); write the two
//! headers, persist; store seal = 0, persist. Recovery applies an armed record whose crc
//! holds (idempotent: it writes the headers' final values); a record with a torn seal or
//! body has not been armed, and its headers were not touched.

use super::{Geometry, Header};
use crate::JournalResult;

/// Offset of the seal word inside the record.
pub const SEAL_OFF: u64 = 40;
/// Bytes of the record.
pub const RECORD_LEN: usize = 48;
const SEAL_TAG: u64 = 0x5357_4150;

/// The two headers of a swap, each with its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapRecord {
    pub slot_a: u32,
    pub header_a: Header,
    pub slot_b: u32,
    pub header_b: Header,
}

impl SwapRecord {
    pub fn encode(&self, g: &Geometry) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..4].copy_from_slice(&self.slot_a.to_le_bytes());
        b[4..8].copy_from_slice(&self.slot_b.to_le_bytes());
        b[8..24].copy_from_slice(&self.header_a.encode(g.format()));
        b[24..40].copy_from_slice(&self.header_b.encode(g.format()));
        let seal = (pmem::crc::crc32c(&b[0..40]) as u64) << 32 | SEAL_TAG;
        b[40..48].copy_from_slice(&seal.to_le_bytes());
        b
    }

    /// The armed record in `b`, `None` when no swap is armed (seal 0 or not matching).
    pub fn decode(b: &[u8; RECORD_LEN], g: &Geometry) -> JournalResult<Option<SwapRecord>> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let seal = u64_at(40);
        let armed =
            seal & 0xffff_ffff == SEAL_TAG && (seal >> 32) as u32 == pmem::crc::crc32c(&b[0..40]);
        if !armed {
            return Ok(None);
        }
        let (slot_a, slot_b) = (u32_at(0), u32_at(4));
        if slot_a >= g.blocks() || slot_b >= g.blocks() {
            return Err(crate::JournalError::corrupt(
                format!("swap record slots {slot_a}, {slot_b}"),
                super::RESERVED_OFF,
            ));
        }
        Ok(Some(SwapRecord {
            slot_a,
            header_a: Header::decode(u64_at(8), u64_at(16), slot_a, g)?,
            slot_b,
            header_b: Header::decode(u64_at(24), u64_at(32), slot_b, g)?,
        }))
    }
}
