//! The superblock: the journal's statistics and the area pointers.
//!
//! ```text
//! line 0:  0 magic u64 "ATFSNJS1" | 8 version u32 | 12 journal blocks N u32 | 16 crc32c(0..16) u32
//! line 1: 64 p_first u64 | 72 p_checkpoint u64 | 80 p_commit u64 | 88 p_first_free u64
//! line 2: 128 checkpoints u64 | 136 gc runs u64   (statistics, written with p_first)
//! 1024: home record: path length u32 | crc32c(path) u32 | path bytes (the home directory,
//!       written before the superblock is sealed; all zero when the journal records none)
//! ```
//! The static line is sealed by its crc. Each pointer is one aligned 8-byte word, changed
//! only by an atomic 8-byte store: the commit point is the store of p_checkpoint, a
//! checkpoint's end the store of p_first. Recovery checks
//! p_first <= p_checkpoint <= p_first + N and ignores p_commit / p_first_free (the commit
//! area is discarded whatever they say).

use super::{Geometry, HeaderFormat};
use crate::{JournalError, JournalResult};
use pmem::Region;

/// "ATFSNJS1" read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ATFSNJS1");
pub const P_FIRST_OFF: u64 = 64;
pub const P_CHECKPOINT_OFF: u64 = 72;
pub const P_COMMIT_OFF: u64 = 80;
pub const P_FIRST_FREE_OFF: u64 = 88;
pub const CHECKPOINTS_OFF: u64 = 128;
pub const GC_RUNS_OFF: u64 = 136;
/// Offset of the home record in the superblock page.
pub const HOME_RECORD_OFF: u64 = 1024;
/// Longest home directory path the record holds.
pub const HOME_PATH_MAX: usize = 4096 - HOME_RECORD_OFF as usize - 8;

/// The home record of `path`.
pub fn encode_home(path: &[u8]) -> Option<Vec<u8>> {
    if path.is_empty() || path.len() > HOME_PATH_MAX {
        return None;
    }
    let mut b = Vec::with_capacity(8 + path.len());
    b.extend_from_slice(&(path.len() as u32).to_le_bytes());
    b.extend_from_slice(&pmem::crc::crc32c(path).to_le_bytes());
    b.extend_from_slice(path);
    Some(b)
}

/// The home directory in a home record (`Ok(None)`: no record).
pub fn decode_home(b: &[u8]) -> JournalResult<Option<Vec<u8>>> {
    let word =
        |i: usize| -> Option<u32> { Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?)) };
    let (Some(len), Some(crc)) = (word(0), word(4)) else {
        return Err(JournalError::corrupt(
            "home record truncated",
            HOME_RECORD_OFF,
        ));
    };
    if len == 0 && crc == 0 {
        return Ok(None);
    }
    let path = b
        .get(8..8 + len as usize)
        .filter(|p| p.len() <= HOME_PATH_MAX && pmem::crc::crc32c(p) == crc)
        .ok_or_else(|| JournalError::corrupt("home record", HOME_RECORD_OFF))?;
    Ok(Some(path.to_vec()))
}

/// The static part of the superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    geometry: Geometry,
}

/// The area pointers as read from the superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pointers {
    pub p_first: u64,
    pub p_checkpoint: u64,
    pub p_commit: u64,
}

impl Superblock {
    pub fn new(geometry: Geometry) -> Self {
        Superblock { geometry }
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The 20 sealed bytes of line 0.
    pub fn encode(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&self.geometry.format().version().to_le_bytes());
        b[12..16].copy_from_slice(&self.geometry.blocks().to_le_bytes());
        let crc = pmem::crc::crc32c(&b[0..16]);
        b[16..20].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode and check line 0.
    pub fn decode(b: &[u8; 20]) -> JournalResult<Superblock> {
        let word = |r: std::ops::Range<usize>| -> u64 {
            let mut w = [0u8; 8];
            w[..r.len()].copy_from_slice(&b[r]);
            u64::from_le_bytes(w)
        };
        if word(0..8) != MAGIC {
            return Err(JournalError::BadMagic);
        }
        if word(16..20) as u32 != pmem::crc::crc32c(&b[0..16]) {
            return Err(JournalError::corrupt("superblock checksum", 16));
        }
        let version = word(8..12) as u32;
        let format = HeaderFormat::of_version(version).ok_or(JournalError::Version(version))?;
        let blocks = word(12..16) as u32;
        let geometry = Geometry::with_format(blocks, format)
            .ok_or_else(|| JournalError::corrupt(format!("journal block count {blocks}"), 12))?;
        Ok(Superblock { geometry })
    }

    /// Read the superblock of `region` and check that the region holds the whole journal.
    pub fn read(region: &impl Region) -> JournalResult<Superblock> {
        if region.len() < 4096 {
            return Err(JournalError::corrupt("region shorter than a superblock", 0));
        }
        let mut b = [0u8; 20];
        region.read(0, &mut b);
        let sb = Superblock::decode(&b)?;
        if sb.geometry.region_len() > region.len() {
            return Err(JournalError::corrupt(
                format!(
                    "journal of {} blocks needs {} bytes, region has {}",
                    sb.geometry.blocks(),
                    sb.geometry.region_len(),
                    region.len()
                ),
                12,
            ));
        }
        Ok(sb)
    }

    /// Read and check the area pointers.
    pub fn pointers(&self, region: &impl Region) -> JournalResult<Pointers> {
        let p = Pointers {
            p_first: region.load_u64(P_FIRST_OFF),
            p_checkpoint: region.load_u64(P_CHECKPOINT_OFF),
            p_commit: region.load_u64(P_COMMIT_OFF),
        };
        let n = self.geometry.blocks() as u64;
        let ok = p.p_first <= p.p_checkpoint
            && p.p_checkpoint - p.p_first <= n
            && p.p_first < u64::MAX / 2;
        if !ok {
            return Err(JournalError::corrupt(
                format!(
                    "area pointers p_first {} p_checkpoint {} (journal of {n} blocks)",
                    p.p_first, p.p_checkpoint
                ),
                P_FIRST_OFF,
            ));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let narrow = Geometry::with_format(64, HeaderFormat::Narrow);
        let narrow = Superblock::new(narrow.unwrap_or_else(|| panic!("geometry")));
        assert_eq!(Superblock::decode(&narrow.encode()).ok(), Some(narrow));
        let sb = Superblock::new(Geometry::new(64).unwrap_or_else(|| panic!("geometry")));
        let b = sb.encode();
        assert_eq!(Superblock::decode(&b).ok(), Some(sb));
        let mut future = b;
        future[8] = 3;
        let crc = pmem::crc::crc32c(&future[0..16]);
        future[16..20].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            Superblock::decode(&future),
            Err(JournalError::Version(3))
        ));
        let mut bad = b;
        bad[0] ^= 1;
        assert!(matches!(
            Superblock::decode(&bad),
            Err(JournalError::BadMagic)
        ));
        let mut bad = b;
        bad[12] ^= 1;
        assert!(matches!(
            Superblock::decode(&bad),
            Err(JournalError::Corrupt { .. })
        ));
    }
}
