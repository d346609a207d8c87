//! The 16-byte journal header (seed §3.2), one per journal block.
//!
//! ```text
//! version 2 (wide file ids, written by this build):
//! word 0: bits 0..8 flags (f = 1, v = 2, l = 4) | bits 8..16 jh_number mod 256
//!         | bits 16..32 home file bits 16..32 | bits 32..64 write_count
//! word 1: bits 0..24 j_blocknr | bits 24..40 home file bits 0..16 | bits 40..64 home block
//! version 1 (read, and written to journals of that version):
//! word 0: bits 0..8 flags | bits 8..32 jh_number | bits 32..64 write_count
//! word 1: bits 0..24 j_blocknr | bits 24..40 home file (16 bits) | bits 40..64 home block
//! ```
//! The home file of version 2 is 32 bits wide (a file id per inode, beyond 65,535 inodes);
//! the high half lives in word 0 and is written with it whenever word 0 is (a flag update
//! rewrites both halves of the word unchanged).
//! f: occupied; v: valid; l: latest version (an old version has l = 0). Each word is written
//! by one atomic 8-byte store, so a header is never torn inside a word. jh_number is the
//! header's own slot and never changes; j_blocknr changes only through a swap (the swap
//! record makes both headers of a swap change together). The l flag is a hint for
//! inspection: recovery derives old/latest from the order of the checkpoint area.

use super::{BlockKey, Geometry, HeaderFormat};
use crate::{JournalError, JournalResult};

/// The header's flag bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(u8);

impl Flags {
    pub const FREE: Flags = Flags(0);
    /// Occupied, valid, latest.
    pub const LATEST: Flags = Flags(0b111);
    /// Occupied, valid, old version.
    pub const OLD: Flags = Flags(0b011);
    /// Occupied, invalid (a garbage block waiting for GC).
    pub const INVALID: Flags = Flags(0b001);

    pub fn occupied(self) -> bool {
        self.0 & 1 != 0
    }
    pub fn valid(self) -> bool {
        self.0 & 2 != 0
    }
    pub fn latest(self) -> bool {
        self.0 & 4 != 0
    }
    fn known(self) -> bool {
        matches!(self.0, 0 | 0b001 | 0b011 | 0b111)
    }
}

/// One journal header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub flags: Flags,
    pub jh_number: u32,
    pub write_count: u32,
    pub j_blocknr: u32,
    pub home: BlockKey,
}

impl Header {
    /// A free header matching journal block `j_blocknr`.
    pub fn free(jh_number: u32, j_blocknr: u32, write_count: u32) -> Header {
        Header {
            flags: Flags::FREE,
            jh_number,
            write_count,
            j_blocknr,
            home: BlockKey { file: 0, block: 0 },
        }
    }

    pub fn word0(&self, format: HeaderFormat) -> u64 {
        assert!(self.jh_number < 1 << 24);
        assert!(
            self.home.file <= format.file_id_max(),
            "file id past the format"
        );
        let middle = match format {
            HeaderFormat::Narrow => self.jh_number as u64,
            HeaderFormat::Wide => {
                (self.jh_number & 0xff) as u64 | ((self.home.file >> 16) as u64) << 8
            }
        };
        self.flags.0 as u64 | middle << 8 | (self.write_count as u64) << 32
    }

    pub fn word1(&self) -> u64 {
        assert!(self.j_blocknr < 1 << 24 && self.home.block < 1 << 24);
        let file_low = (self.home.file & 0xffff) as u64;
        self.j_blocknr as u64 | file_low << 24 | (self.home.block as u64) << 40
    }

    pub fn encode(&self, format: HeaderFormat) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&self.word0(format).to_le_bytes());
        b[8..16].copy_from_slice(&self.word1().to_le_bytes());
        b
    }

    /// Decode the header of `slot` and check it against the geometry.
    pub fn decode(w0: u64, w1: u64, slot: u32, g: &Geometry) -> JournalResult<Header> {
        let file_low = ((w1 >> 24) & 0xffff) as u32;
        let (jh_number, file) = match g.format() {
            HeaderFormat::Narrow => (((w0 >> 8) & 0xff_ffff) as u32, file_low),
            HeaderFormat::Wide => {
                let jh_low = ((w0 >> 8) & 0xff) as u32;
                // The low 8 bits are all the header holds: the rest is the slot's own.
                let jh = if jh_low == slot & 0xff { slot } else { jh_low };
                (jh, (((w0 >> 16) & 0xffff) as u32) << 16 | file_low)
            }
        };
        let h = Header {
            flags: Flags((w0 & 0xff) as u8),
            jh_number,
            write_count: (w0 >> 32) as u32,
            j_blocknr: (w1 & 0xff_ffff) as u32,
            home: BlockKey {
                file,
                block: (w1 >> 40) as u32,
            },
        };
        let off = g.header_off(slot);
        if !h.flags.known() {
            return Err(JournalError::corrupt(
                format!("header flags {:#x}", h.flags.0),
                off,
            ));
        }
        if h.jh_number != slot {
            return Err(JournalError::corrupt(
                format!("header {slot} says jh_number {}", h.jh_number),
                off,
            ));
        }
        if h.j_blocknr >= g.blocks() {
            return Err(JournalError::corrupt(
                format!("header {slot} maps journal block {}", h.j_blocknr),
                off + 8,
            ));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        for (format, file) in [
            (HeaderFormat::Wide, u32::MAX),
            (HeaderFormat::Wide, 70_000),
            (HeaderFormat::Narrow, 65535),
        ] {
            let g = Geometry::with_format(1024, format).unwrap_or_else(|| panic!("geometry"));
            let h = Header {
                flags: Flags::OLD,
                jh_number: 1000,
                write_count: 77,
                j_blocknr: 3,
                home: BlockKey {
                    file,
                    block: (1 << 24) - 1,
                },
            };
            let (w0, w1) = (h.word0(format), h.word1());
            assert_eq!(Header::decode(w0, w1, 1000, &g).ok(), Some(h));
            assert!(Header::decode(w0, w1, 999, &g).is_err());
            assert!(Header::decode(w0 | 0x80, w1, 1000, &g).is_err());
            let far = Header {
                j_blocknr: 1024,
                ..h
            };
            assert!(Header::decode(far.word0(format), far.word1(), 1000, &g).is_err());
        }
    }
}
