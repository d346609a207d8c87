//! The superblock: the first 4 KiB of a pool.
//!
//! ```text
//! 0    u64  magic "ATFSCACH"
//! 8    u32  version (1 or 2)   12  u32 crc32c of bytes 16..SEALED_LEN
//! 16   u64  slots              24  u64 files_max
//! 32   u64  units_max          40  u64 store id
//! 48   u32  home path length   52  u32 zero            56  u64 intents_max
//! 64   ..   home path bytes (at most HOME_MAX)
//! 2048 u64  next key (advanced by the stride at every create; one atomic store)
//! ```
//!
//! Version 2 adds intent kinds (exchanges, extended-attribute changes and owner changes
//! inside transactions, format/intent.rs); the layout is unchanged. A version-1 pool opens
//! and stays version 1: the calls that would log one of the new intents answer Unsupported
//! there (the same calls outside a transaction need no record and work). A build that knows
//! only version 1 refuses a version-2 pool with `UnsupportedVersion`.

use super::Geometry;
use pmem::crc::crc32c;
use pmem::Region;
use store::{Error, Result};

pub const MAGIC: u64 = u64::from_le_bytes(*b"ATFSCACH");
pub const VERSION: u32 = 2;
/// The first layout (no exchange, extended-attribute or owner intents).
pub const VERSION_FIRST: u32 = 1;
/// Longest home directory path recorded.
pub const HOME_MAX: usize = 1024;
const SEALED_LEN: usize = 64 + HOME_MAX;
/// Offset of the next-key word.
pub const NEXT_KEY_AT: u64 = 2048;

/// The sealed part of the superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    version: u32,
    geometry: Geometry,
    store_id: u64,
    home: Vec<u8>,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

impl Superblock {
    pub fn new(geometry: Geometry, store_id: u64, home: &[u8]) -> Result<Self> {
        if home.len() > HOME_MAX {
            return Err(Error::NameTooLong {
                len: home.len(),
                max: HOME_MAX,
            });
        }
        Ok(Superblock {
            version: VERSION,
            geometry,
            store_id,
            home: home.to_vec(),
        })
    }
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }
    /// The format version of the pool (what it may hold: see the module header).
    pub fn version(&self) -> u32 {
        self.version
    }
    /// Whether the pool may hold the intents of version 2.
    pub fn has_posix_intents(&self) -> bool {
        self.version >= VERSION
    }
    pub fn store_id(&self) -> u64 {
        self.store_id
    }
    pub fn home(&self) -> &[u8] {
        &self.home
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; SEALED_LEN];
        let g = &self.geometry;
        b[..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[16..24].copy_from_slice(&g.slots().to_le_bytes());
        b[24..32].copy_from_slice(&g.files_max().to_le_bytes());
        b[32..40].copy_from_slice(&g.units_max().to_le_bytes());
        b[40..48].copy_from_slice(&self.store_id.to_le_bytes());
        b[48..52].copy_from_slice(&(self.home.len() as u32).to_le_bytes());
        b[56..64].copy_from_slice(&g.intents_max().to_le_bytes());
        b[64..64 + self.home.len()].copy_from_slice(&self.home);
        let crc = crc32c(&b[16..]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Self::decode(&b).ok().as_ref(),
            Some(self),
            "cache: superblock does not decode back"
        );
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        if b.len() < SEALED_LEN || u64_at(b, 0) != MAGIC {
            return Err(Error::BadMagic("cache pool".into()));
        }
        let version = u32_at(b, 8);
        if !(VERSION_FIRST..=VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                what: "cache pool".into(),
                found: version,
                supported: VERSION,
            });
        }
        if u32_at(b, 12) != crc32c(&b[16..SEALED_LEN]) {
            return Err(Error::corrupt("cache superblock checksum mismatch", 12));
        }
        let geometry = Geometry::new(u64_at(b, 16), u64_at(b, 24), u64_at(b, 32), u64_at(b, 56))
            .map_err(|_| Error::corrupt("cache superblock geometry out of range", 16))?;
        let home_len = u32_at(b, 48) as usize;
        if home_len > HOME_MAX {
            return Err(Error::corrupt("cache superblock home path too long", 48));
        }
        let mut sb = Self::new(geometry, u64_at(b, 40), &b[64..64 + home_len])?;
        sb.version = version;
        Ok(sb)
    }

    /// Write the superblock (the next-key word is set to `first_key`) and persist it.
    pub fn write_to<R: Region>(&self, region: &R, first_key: u64) {
        region.write(0, &self.encode());
        region.store_u64(NEXT_KEY_AT, first_key);
        // persist: the superblock is durable before the pool is used.
        region.persist(0, NEXT_KEY_AT + 8);
    }

    /// Read and check the superblock of `region`, and that the region holds its geometry.
    pub fn read_from<R: Region>(region: &R) -> Result<Self> {
        if region.len() < 4096 {
            return Err(Error::BadMagic(
                "cache pool shorter than a superblock".into(),
            ));
        }
        let mut b = vec![0u8; SEALED_LEN];
        region.read(0, &mut b);
        let sb = Self::decode(&b)?;
        if sb.geometry.pool_len() > region.len() {
            return Err(Error::corrupt(
                format!(
                    "cache pool is {} bytes, its geometry needs {}",
                    region.len(),
                    sb.geometry.pool_len()
                ),
                16,
            ));
        }
        Ok(sb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_superblock_round_trips_and_rejects_damage() {
        let g = Geometry::new(8, 4, 2, 2).unwrap_or_else(|e| panic!("{e}"));
        let sb = Superblock::new(g, 42, b"/tmp/home").unwrap_or_else(|e| panic!("{e}"));
        let mut b = sb.encode();
        assert_eq!(Superblock::decode(&b).ok(), Some(sb));
        b[70] ^= 1;
        assert!(matches!(Superblock::decode(&b), Err(Error::Corrupt { .. })));
        b[0] ^= 1;
        assert!(matches!(Superblock::decode(&b), Err(Error::BadMagic(_))));
    }

    fn with_version(sb: &Superblock, version: u32) -> Vec<u8> {
        let mut b = sb.encode();
        b[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = crc32c(&b[16..]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn a_first_version_pool_decodes_and_a_newer_one_is_refused() {
        let g = Geometry::new(8, 4, 2, 2).unwrap_or_else(|e| panic!("{e}"));
        let sb = Superblock::new(g, 42, b"/tmp/home").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sb.version(), VERSION);
        assert!(sb.has_posix_intents());
        let old =
            Superblock::decode(&with_version(&sb, VERSION_FIRST)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.version(), VERSION_FIRST);
        assert!(!old.has_posix_intents());
        assert_eq!(old.encode(), with_version(&sb, VERSION_FIRST));
        match Superblock::decode(&with_version(&sb, VERSION + 1)) {
            Err(Error::UnsupportedVersion {
                found, supported, ..
            }) => {
                assert_eq!((found, supported), (VERSION + 1, VERSION))
            }
            other => panic!("a newer pool: {other:?}"),
        }
    }
}
