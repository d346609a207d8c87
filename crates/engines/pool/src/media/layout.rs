//! On-media layout of a pool: superblock, log areas, inode table, blocks.
//! See docs/format.md for the full specification. All integers are little-endian.
//!
//! ```text
//! offset 0            4096                 +64*M             +64*D          +128*I      len
//! | superblock (4 KB) | metadata undo log  | data redo log   | inode table | 4 KB blocks |
//! |                   | M x 64 B entries   | D x 64 B entries| I x 128 B   | pbn 0..B    |
//! ```
//! Each area starts on a 4096-byte boundary. Block number (pbn) 0 is reserved: a block
//! pointer of 0 means "hole".

use crate::config::PoolConfig;
use store::{Error, Result};

/// Size of a data block and of an index block.
pub const BLOCK_SIZE: u64 = 4096;
/// Cache lines per block: one bit each in a 64-bit bitmap.
pub(crate) const LINES_PER_BLOCK: u64 = BLOCK_SIZE / LINE;
/// Size of a cache line.
pub(crate) const LINE: u64 = 64;
/// Size of a log entry.
pub(crate) const ENTRY_SIZE: u64 = 64;
/// Size of an on-media inode.
pub(crate) const INODE_SIZE: u64 = 128;
/// Block pointers in an index block.
pub(crate) const POINTERS_PER_BLOCK: u64 = BLOCK_SIZE / 8;
/// Deepest block-pointer tree: 512^4 blocks of 4 KB = 256 TB (height 3 is 512 GB).
pub(crate) const TREE_HEIGHT_MAX: u32 = 4;

const _: () = assert!(LINES_PER_BLOCK == 64);
const _: () = assert!(ENTRY_SIZE == LINE && BLOCK_SIZE.is_multiple_of(ENTRY_SIZE));
const _: () = assert!(POINTERS_PER_BLOCK == 512);

// ----- superblock -----
//
// ```text
//  0  magic            u64  "ATOMFSPL"
//  8  format version   u32
// 12  block size       u32  (4096)
// 16  region length    u64  bytes the pool was formatted for
// 24  inode count      u64
// 32  meta log entries u64
// 40  data log entries u64
// 48  block count      u64  blocks in the block area (pbn 0..count)
// 56  meta log offset  u64
// 64  data log offset  u64
// 72  inode offset     u64
// 80  blocks offset    u64
// 88  mode             u32  (Mode as a number; informative, runtime mode comes from the config)
// 92  incompat flags   u32  (version 1: zero; version 2: INCOMPAT_DATA_CHECKSUMS;
//                           version 3: INCOMPAT_POSIX_OBJECTS; version 4: both)
// 96  crc32c of bytes 0..96, as u32; 100..4096 zero
// ```
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"ATOMFSPL");
/// Format version of a pool without data checksums (what every build before them wrote,
/// and what this build still writes for such a pool).
pub const FORMAT_VERSION: u32 = 1;
/// Format version of a pool with data checksums: a build that knows only version 1 refuses
/// it (`UnsupportedVersion`), since it would read the checksums in the block pointers as
/// block numbers out of range.
pub(crate) const FORMAT_VERSION_CHECKSUMS: u32 = 2;
/// Format version of a pool that can hold the rest of the POSIX file API: symbolic links,
/// special files, extended attributes (incompat flag `INCOMPAT_POSIX_OBJECTS`), without
/// data checksums; `FORMAT_VERSION_POSIX_CHECKSUMS` with them. What this build formats. A
/// build that knows only versions 1 and 2 refuses them (`UnsupportedVersion`): it would read
/// the new inode kinds as corruption. Pools of versions 1 and 2 open as before; the calls
/// that need the new records answer EOPNOTSUPP on them.
pub(crate) const FORMAT_VERSION_POSIX: u32 = 3;
/// Format version 3 with data checksums (incompat flags `INCOMPAT_POSIX_OBJECTS |
/// INCOMPAT_DATA_CHECKSUMS`).
pub(crate) const FORMAT_VERSION_POSIX_CHECKSUMS: u32 = 4;
/// Incompat flag (superblock byte 92): file data blocks carry a crc32c in their pointer.
pub(crate) const INCOMPAT_DATA_CHECKSUMS: u32 = 1;
/// Incompat flag (superblock byte 92): inode kinds 3..=7 (symlink, FIFO, socket, character
/// and block device), the inode's attribute-chain pointer, device number and inline link
/// target (bytes 88..128), attribute blocks.
pub(crate) const INCOMPAT_POSIX_OBJECTS: u32 = 2;
/// Bits of a leaf block pointer holding the block number in a checksummed pool (the high
/// 32 hold the block's crc32c): 2^32 blocks of 4 KB, 16 TB.
pub(crate) const PBN_BITS: u32 = 32;
const PBN_MASK: u64 = (1 << PBN_BITS) - 1;
/// Length of the checksummed part of the superblock.
pub(crate) const SB_CHECKED_LEN: usize = 96;
/// Superblock size on media.
pub(crate) const SB_SIZE: u64 = 4096;

// The superblock's fields are twelve words, then the crc: the checked part ends where the
// words end, and the superblock area (one block) holds it.
const _: () = assert!(SB_CHECKED_LEN == 12 * 8);
const _: () = assert!((SB_CHECKED_LEN + 4) as u64 <= SB_SIZE && SB_SIZE == BLOCK_SIZE);

/// Geometry of a formatted pool: where every area lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    pub region_len: u64,
    pub inode_count: u64,
    pub metadata_log_entries: u64,
    pub data_log_entries: u64,
    pub block_count: u64,
    pub meta_log_offset: u64,
    pub data_log_offset: u64,
    pub inode_offset: u64,
    pub blocks_offset: u64,
    /// File data blocks carry a crc32c in the high bits of their leaf block pointer
    /// (docs/format.md, "Data checksums"). Fixed at format time.
    pub data_checksums: bool,
    /// The pool holds symbolic links, special files and extended attributes (format
    /// version 3, `INCOMPAT_POSIX_OBJECTS`). Every pool this build formats does.
    pub posix_objects: bool,
}

fn round_up(value: u64, to: u64) -> u64 {
    value.div_ceil(to) * to
}

impl Geometry {
    /// The geometry a region of `region_len` bytes gets with `cfg`.
    pub fn plan(region_len: u64, cfg: &PoolConfig) -> Result<Geometry> {
        if cfg.inode_count < 2 || cfg.metadata_log_entries < 8 || cfg.data_log_entries < 1 {
            return Err(Error::InvalidArgument(
                "pool geometry: too few inodes or log entries".into(),
            ));
        }
        let too_big = || Error::InvalidArgument("pool geometry: sizes overflow".into());
        let meta_log_offset = SB_SIZE;
        let meta_len = cfg
            .metadata_log_entries
            .checked_mul(ENTRY_SIZE)
            .ok_or_else(too_big)?;
        let data_log_offset = round_up(meta_log_offset + meta_len, BLOCK_SIZE);
        let data_len = cfg
            .data_log_entries
            .checked_mul(ENTRY_SIZE)
            .ok_or_else(too_big)?;
        let inode_offset = round_up(
            data_log_offset.checked_add(data_len).ok_or_else(too_big)?,
            BLOCK_SIZE,
        );
        let inode_len = cfg
            .inode_count
            .checked_mul(INODE_SIZE)
            .ok_or_else(too_big)?;
        let blocks_offset = round_up(
            inode_offset.checked_add(inode_len).ok_or_else(too_big)?,
            BLOCK_SIZE,
        );
        let block_count = region_len.saturating_sub(blocks_offset) / BLOCK_SIZE;
        if cfg.data_checksums && block_count > PBN_MASK {
            return Err(Error::InvalidArgument(format!(
                "pool geometry: data checksums address at most {PBN_MASK} blocks (16 TB)"
            )));
        }
        if block_count < 16 {
            return Err(Error::NoSpace(format!(
                "region of {region_len} bytes too small: areas need {blocks_offset} bytes plus 16 blocks"
            )));
        }
        Ok(Geometry {
            region_len,
            inode_count: cfg.inode_count,
            metadata_log_entries: cfg.metadata_log_entries,
            data_log_entries: cfg.data_log_entries,
            block_count,
            meta_log_offset,
            data_log_offset,
            inode_offset,
            blocks_offset,
            data_checksums: cfg.data_checksums,
            posix_objects: true,
        })
    }

    /// Format version and incompat flags of this geometry's superblock.
    fn version_and_flags(&self) -> (u32, u32) {
        let sums = if self.data_checksums {
            INCOMPAT_DATA_CHECKSUMS
        } else {
            0
        };
        match (self.posix_objects, self.data_checksums) {
            (true, false) => (FORMAT_VERSION_POSIX, INCOMPAT_POSIX_OBJECTS),
            (true, true) => (
                FORMAT_VERSION_POSIX_CHECKSUMS,
                INCOMPAT_POSIX_OBJECTS | sums,
            ),
            (false, true) => (FORMAT_VERSION_CHECKSUMS, sums),
            (false, false) => (FORMAT_VERSION, 0),
        }
    }

    /// Format version written in this geometry's superblock.
    pub fn format_version(&self) -> u32 {
        self.version_and_flags().0
    }

    /// Encode as a superblock.
    pub fn encode(&self, mode_number: u32) -> [u8; SB_CHECKED_LEN + 4] {
        let mut sb = [0u8; SB_CHECKED_LEN + 4];
        let (version, flags) = self.version_and_flags();
        let fields = [
            MAGIC,
            u64::from(version) | (BLOCK_SIZE << 32),
            self.region_len,
            self.inode_count,
            self.metadata_log_entries,
            self.data_log_entries,
            self.block_count,
            self.meta_log_offset,
            self.data_log_offset,
            self.inode_offset,
            self.blocks_offset,
            u64::from(mode_number) | (u64::from(flags) << 32),
        ];
        for (i, f) in fields.iter().enumerate() {
            sb[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        let crc = crc32c::crc32c(&sb[..SB_CHECKED_LEN]);
        sb[SB_CHECKED_LEN..].copy_from_slice(&crc.to_le_bytes());
        sb
    }

    /// Decode and validate a superblock read from a region of `region_len` bytes.
    pub fn decode(sb: &[u8; SB_CHECKED_LEN + 4], region_len: u64) -> Result<Geometry> {
        let word = |i: usize| u64::from_le_bytes(sb[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        if word(0) != MAGIC {
            return Err(Error::BadMagic(format!(
                "superblock magic {:#018x}",
                word(0)
            )));
        }
        let version = word(1) as u32;
        if !(FORMAT_VERSION..=FORMAT_VERSION_POSIX_CHECKSUMS).contains(&version) {
            return Err(Error::UnsupportedVersion {
                what: "pool".into(),
                found: version,
                supported: FORMAT_VERSION_POSIX_CHECKSUMS,
            });
        }
        let crc = u32::from_le_bytes(sb[SB_CHECKED_LEN..].try_into().unwrap_or([0; 4]));
        if crc != crc32c::crc32c(&sb[..SB_CHECKED_LEN]) {
            return Err(Error::corrupt("superblock checksum mismatch", 0));
        }
        let flags = (word(11) >> 32) as u32;
        let valid = match version {
            FORMAT_VERSION => flags == 0,
            FORMAT_VERSION_CHECKSUMS => flags == INCOMPAT_DATA_CHECKSUMS,
            FORMAT_VERSION_POSIX => flags == INCOMPAT_POSIX_OBJECTS,
            _ => flags == INCOMPAT_POSIX_OBJECTS | INCOMPAT_DATA_CHECKSUMS,
        };
        if !valid {
            return Err(Error::corrupt(
                format!("superblock version {version} with incompat flags {flags:#x}"),
                92,
            ));
        }
        if (word(1) >> 32) != BLOCK_SIZE {
            return Err(Error::corrupt(
                format!("superblock block size {}", word(1) >> 32),
                12,
            ));
        }
        let geo = Geometry {
            region_len: word(2),
            inode_count: word(3),
            metadata_log_entries: word(4),
            data_log_entries: word(5),
            block_count: word(6),
            meta_log_offset: word(7),
            data_log_offset: word(8),
            inode_offset: word(9),
            blocks_offset: word(10),
            data_checksums: flags & INCOMPAT_DATA_CHECKSUMS != 0,
            posix_objects: flags & INCOMPAT_POSIX_OBJECTS != 0,
        };
        geo.check(region_len)?;
        Ok(geo)
    }

    /// The geometry must be the one `plan` computes for its own parameters and fit the region.
    fn check(&self, region_len: u64) -> Result<()> {
        if self.region_len > region_len {
            return Err(Error::corrupt(
                format!(
                    "pool formatted for {} bytes but region has {region_len}",
                    self.region_len
                ),
                16,
            ));
        }
        let cfg = PoolConfig {
            inode_count: self.inode_count,
            metadata_log_entries: self.metadata_log_entries,
            data_log_entries: self.data_log_entries,
            data_checksums: self.data_checksums,
            ..PoolConfig::default()
        };
        let mut planned = Geometry::plan(self.region_len, &cfg)
            .map_err(|_| Error::corrupt("superblock geometry", 16))?;
        planned.posix_objects = self.posix_objects;
        if planned != *self {
            return Err(Error::corrupt("superblock geometry is inconsistent", 16));
        }
        Ok(())
    }

    /// Region offset of metadata log entry `slot`.
    #[inline]
    pub fn meta_entry(&self, slot: u64) -> u64 {
        self.meta_log_offset + slot * ENTRY_SIZE
    }
    /// Region offset of data log entry `slot`.
    #[inline]
    pub fn data_entry(&self, slot: u64) -> u64 {
        self.data_log_offset + slot * ENTRY_SIZE
    }
    /// Region offset of inode `ino`.
    #[inline]
    pub fn inode(&self, ino: u64) -> u64 {
        self.inode_offset + ino * INODE_SIZE
    }
    /// Region offset of block `pbn`.
    #[inline]
    pub fn block(&self, pbn: u64) -> u64 {
        self.blocks_offset + pbn * BLOCK_SIZE
    }
    /// True when `pbn` names a usable block (not 0, inside the block area).
    #[inline]
    pub fn valid_pbn(&self, pbn: u64) -> bool {
        pbn != 0 && pbn < self.block_count
    }
    /// Check a block number read from media at `found_at`.
    pub fn check_pbn(&self, pbn: u64, found_at: u64) -> Result<u64> {
        if self.valid_pbn(pbn) {
            Ok(pbn)
        } else {
            Err(Error::corrupt(
                format!("block pointer {pbn} out of range"),
                found_at,
            ))
        }
    }
    /// The word a leaf block pointer to data block `pbn` holds: the block number, and in a
    /// checksummed pool the block's crc32c in the high 32 bits (`pbn` 0 is a hole: word 0).
    #[inline]
    pub fn leaf_word(&self, pbn: u64, crc: u32) -> u64 {
        if self.data_checksums && pbn != 0 {
            pbn | (u64::from(crc) << PBN_BITS)
        } else {
            pbn
        }
    }
    /// The block number a leaf block pointer word names (0 = hole), validated: `found_at`
    /// is where the word was read.
    #[inline]
    pub fn leaf_pbn(&self, word: u64, found_at: u64) -> Result<u64> {
        let pbn = if self.data_checksums {
            word & PBN_MASK
        } else {
            word
        };
        if pbn == 0 && word != 0 {
            return Err(Error::corrupt(
                format!("block pointer {word:#x} names no block"),
                found_at,
            ));
        }
        if pbn == 0 {
            return Ok(0);
        }
        self.check_pbn(pbn, found_at)
    }
    /// The crc32c a leaf block pointer word holds (0 in a pool without data checksums).
    #[inline]
    pub fn leaf_crc(&self, word: u64) -> u32 {
        if self.data_checksums {
            (word >> PBN_BITS) as u32
        } else {
            0
        }
    }
    /// True when `[addr, addr+len)` lies inside the metadata a transaction may undo-log:
    /// the inode table or the block area.
    pub fn is_metadata_range(&self, addr: u64, len: u64) -> bool {
        let end = match addr.checked_add(len) {
            Some(e) => e,
            None => return false,
        };
        addr >= self.inode_offset && end <= self.blocks_offset + self.block_count * BLOCK_SIZE
    }
}

// ----- inode (128 bytes) -----
//
// ```text
//  0 kind u8 (0 free, 1 file, 2 dir)   1..4 reserved   4 perm u32
//  8 uid u32     12 gid u32
// 16 nlink u32   20 height u32 (levels of the block-pointer tree, 0 = empty)
// 24 root u64    (pbn of the tree root; with height 1 the root is an index block of 512
//                 pointers to data blocks)
// 32 size u64    40 mtime u64    48 ctime u64    56 blocks u64 (data + index blocks held)
// 64 atime u64   72 btime u64   80 parent u64 (directories: the directory holding it)
// 88 xattr u64   (formats 3, 4: pbn of the first attribute block, 0 = none; namespace/xattr_record.rs)
// 96..128 by kind (formats 3, 4): a device node's rdev u64 at 96; a symlink's target when it
//                 is at most 32 bytes (height 0; a longer one is data block 0 of the tree)
// (versions 1 and 2: 88..128 reserved, zero)
// ```
pub(crate) const I_KIND: u64 = 0;
pub(crate) const I_PERM: u64 = 4;
pub(crate) const I_UID: u64 = 8;
pub(crate) const I_GID: u64 = 12;
pub(crate) const I_NLINK: u64 = 16;
pub(crate) const I_HEIGHT: u64 = 20;
pub(crate) const I_ROOT: u64 = 24;
pub(crate) const I_SIZE: u64 = 32;
pub(crate) const I_MTIME: u64 = 40;
pub(crate) const I_CTIME: u64 = 48;
pub(crate) const I_BLOCKS: u64 = 56;
pub(crate) const I_ATIME: u64 = 64;
pub(crate) const I_BTIME: u64 = 72;
pub(crate) const I_PARENT: u64 = 80;
pub(crate) const I_XATTR: u64 = 88;
pub(crate) const I_RDEV: u64 = 96;
pub(crate) const I_INLINE: u64 = 96;
/// Longest symlink target kept inline in its inode (bytes 96..128).
pub(crate) const INLINE_TARGET_MAX: u64 = INODE_SIZE - I_INLINE;
/// Kind byte of a free inode slot. The other kinds are `FileKind::code`.
pub(crate) const KIND_FREE: u8 = 0;
pub(crate) const KIND_FILE: u8 = 1;
pub(crate) const KIND_DIR: u8 = 2;
pub(crate) const KIND_SYMLINK: u8 = 3;
/// The largest kind byte of format 3 (block device).
pub(crate) const KIND_MAX: u8 = 7;
const _: () = assert!(I_XATTR == I_PARENT + 8 && I_RDEV.is_multiple_of(8));
const _: () = assert!(INLINE_TARGET_MAX == 32);

const _: () = assert!(I_BTIME + 8 <= INODE_SIZE && I_PARENT + 8 <= 88);
// A pure overwrite's times are one 16-byte store: mtime, then ctime, in one line.
const _: () = assert!(I_CTIME == I_MTIME + 8 && (I_MTIME % LINE) + 16 <= LINE);
// Every 8-byte field is 8-byte aligned (atomic stores of a size or a root).
const _: () =
    assert!(I_ROOT.is_multiple_of(8) && I_SIZE.is_multiple_of(8) && I_BLOCKS.is_multiple_of(8));
const _: () = assert!(INODE_SIZE.is_multiple_of(LINE));

// ----- directory entry (272 bytes, 15 per block) -----
//
// ```text
//   0 ino u64 (0 = free slot)   8 kind u8   9 name length u8   10..265 name   265..272 zero
// ```
pub(crate) const DIRENT_SIZE: u64 = 272;
pub(crate) const DIRENTS_PER_BLOCK: u64 = BLOCK_SIZE / DIRENT_SIZE;
pub(crate) const D_INO: u64 = 0;
pub(crate) const D_KIND: u64 = 8;
pub(crate) const D_NAME_LEN: u64 = 9;
pub(crate) const D_NAME: u64 = 10;
const _: () = assert!(D_NAME + 255 <= DIRENT_SIZE);
const _: () = assert!(DIRENTS_PER_BLOCK == 15);
const _: () = assert!(DIRENTS_PER_BLOCK * DIRENT_SIZE <= BLOCK_SIZE && D_INO.is_multiple_of(8));

/// Inode number of the root directory.
pub(crate) const ROOT_INO: u64 = store::ROOT_INO;
