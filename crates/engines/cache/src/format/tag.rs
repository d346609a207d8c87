//! A tag: what one chunk holds (§5.2.1, §5.2.4).
//!
//! ```text
//! 0  u64  key (bits 8..64) | status (bits 0..8: V, N, dirty, not-complete)   one atomic store
//! 8  u64  chunk index in the file (file offset / 4 KiB)
//! 16 u64  timestamp (the stamp of the write or transaction that wrote the chunk)
//! 24 u32  crc32c of bytes 8..24 and the key;  28 u32 zero
//! ```
//! The status flips of the seed's cases change only word 0 (one 8-byte store, never torn).
//! A new tag is written with V = 0 first (words 1..3 and the key), then word 0 with V = 1:
//! both stores hit the same cache line, which persists in store order.

use pmem::crc::crc32c;

/// Bytes of one tag.
pub const TAG_LEN: u64 = 32;

/// Largest key (56 bits, as in the seed's 7-byte key).
pub const KEY_MAX: u64 = (1 << 56) - 1;

/// Status bits of a tag (the seed's "status flag" byte).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status(u8);

impl Status {
    /// V: the chunk holds valid data.
    pub const VALID: u8 = 1;
    /// N: the chunk is the newer one of its slot.
    pub const NEW: u8 = 2;
    /// The chunk differs from its home block.
    pub const DIRTY: u8 = 4;
    /// The first chunk of a multi-chunk write that has not completed.
    pub const NOT_COMPLETE: u8 = 8;
    const KNOWN: u8 = 15;

    pub fn from_bits(bits: u8) -> Self {
        Status(bits)
    }
    pub fn bits(self) -> u8 {
        self.0
    }
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    pub fn with(self, bit: u8) -> Self {
        Status(self.0 | bit)
    }
    pub fn without(self, bit: u8) -> Self {
        Status(self.0 & !bit)
    }
    pub fn is_known(self) -> bool {
        self.0 & !Self::KNOWN == 0
    }
}

/// A decoded tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    pub key: u64,
    pub status: Status,
    pub index: u64,
    pub stamp: u64,
}

impl Tag {
    pub fn valid(&self) -> bool {
        self.status.has(Status::VALID)
    }
    pub fn is_new(&self) -> bool {
        self.status.has(Status::NEW)
    }
    pub fn dirty(&self) -> bool {
        self.status.has(Status::DIRTY)
    }
    pub fn not_complete(&self) -> bool {
        self.status.has(Status::NOT_COMPLETE)
    }
    /// Whether this valid chunk holds chunk `index` of the file with `key`.
    pub fn holds(&self, key: u64, index: u64) -> bool {
        self.valid() && self.key == key && self.index == index
    }

    /// Word 0: key and status.
    pub fn word0(&self) -> u64 {
        assert!(self.key <= KEY_MAX, "cache: key {} too large", self.key);
        (self.key << 8) | u64::from(self.status.bits())
    }

    fn check(&self) -> u32 {
        let mut bytes = [0u8; 24];
        bytes[..8].copy_from_slice(&self.index.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.stamp.to_le_bytes());
        bytes[16..].copy_from_slice(&self.key.to_le_bytes());
        crc32c(&bytes)
    }

    /// The 32 bytes of the tag.
    pub fn encode(&self) -> [u8; TAG_LEN as usize] {
        let mut b = [0u8; TAG_LEN as usize];
        b[..8].copy_from_slice(&self.word0().to_le_bytes());
        b[8..16].copy_from_slice(&self.index.to_le_bytes());
        b[16..24].copy_from_slice(&self.stamp.to_le_bytes());
        b[24..28].copy_from_slice(&self.check().to_le_bytes());
        let back = Tag::decode(&b);
        assert_eq!(back, Ok(*self), "cache: tag encoding does not decode back");
        b
    }

    /// Decode a tag; an invalid tag (V = 0) is returned as read, a valid one must check.
    pub fn decode(b: &[u8; TAG_LEN as usize]) -> Result<Tag, &'static str> {
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let w0 = word(0);
        let tag = Tag {
            key: w0 >> 8,
            status: Status::from_bits((w0 & 0xff) as u8),
            index: word(8),
            stamp: word(16),
        };
        if !tag.status.is_known() {
            return Err("tag status has unknown bits");
        }
        let mut c = [0u8; 4];
        c.copy_from_slice(&b[24..28]);
        if tag.valid() && u32::from_le_bytes(c) != tag.check() {
            return Err("tag checksum mismatch");
        }
        Ok(tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_round_trips_and_a_flipped_byte_is_caught() {
        let t = Tag {
            key: 77,
            status: Status::from_bits(Status::VALID | Status::DIRTY),
            index: 3,
            stamp: 9,
        };
        let mut b = t.encode();
        assert_eq!(Tag::decode(&b), Ok(t));
        b[9] ^= 1;
        assert!(Tag::decode(&b).is_err());
    }
}
