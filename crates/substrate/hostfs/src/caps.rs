//! What a host file system can do, and the error an engine gets when it lacks something.

use crate::error::invalid;
use crate::{HostFsError, HostFsResult};
use std::fmt;
use std::path::Path;

/// The file system type of the store directory (`statfs` magic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsType {
    Xfs,
    Ext4,
    Btrfs,
    Tmpfs,
    /// The crash model.
    Simulated,
    /// Any other file system: its `statfs` magic number.
    Other(u64),
}

impl FsType {
    /// The type for a `statfs` magic number.
    pub fn from_magic(magic: u64) -> FsType {
        match magic {
            0x5846_5342 => FsType::Xfs,
            0xEF53 => FsType::Ext4,
            0x9123_683E => FsType::Btrfs,
            0x0102_1994 => FsType::Tmpfs,
            other => FsType::Other(other),
        }
    }
}

impl fmt::Display for FsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsType::Xfs => f.write_str("xfs"),
            FsType::Ext4 => f.write_str("ext4"),
            FsType::Btrfs => f.write_str("btrfs"),
            FsType::Tmpfs => f.write_str("tmpfs"),
            FsType::Simulated => f.write_str("the simulated file system"),
            FsType::Other(magic) => write!(f, "file system type {magic:#x}"),
        }
    }
}

/// One thing an engine may need from the host file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// FICLONERANGE (shared extents).
    Reflink,
    /// XFS_IOC_EXCHANGE_RANGE (crash-atomic whole-range swap).
    ExchangeRange,
    /// pwritev2(RWF_ATOMIC) with O_DIRECT of this many bytes.
    AtomicWrite { len: u32 },
    /// DAX mappings (persistent memory behind the page cache).
    Dax,
    /// O_DIRECT.
    DirectIo,
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capability::Reflink => f.write_str("reflink (FICLONERANGE)"),
            Capability::ExchangeRange => f.write_str("exchange-range (XFS_IOC_EXCHANGE_RANGE)"),
            Capability::AtomicWrite { len } => {
                write!(f, "untorn {len}-byte writes (RWF_ATOMIC)")
            }
            Capability::Dax => f.write_str("DAX"),
            Capability::DirectIo => f.write_str("O_DIRECT"),
        }
    }
}

/// What the file system of a store directory offers, probed once when it is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub fs_type: FsType,
    pub reflink: bool,
    pub exchange_range: bool,
    /// RWF_ATOMIC unit limits in bytes (min, max) as statx reports them; `None` without it.
    pub atomic_write_unit: Option<(u32, u32)>,
    pub dax: bool,
    /// O_DIRECT alignment in bytes (file offset, memory); `None` without O_DIRECT.
    pub direct_io_align: Option<(u32, u32)>,
}

impl Capabilities {
    /// Nothing but plain POSIX files.
    pub fn plain(fs_type: FsType) -> Capabilities {
        Capabilities {
            fs_type,
            reflink: false,
            exchange_range: false,
            atomic_write_unit: None,
            dax: false,
            direct_io_align: None,
        }
    }

    /// True when `capability` is offered.
    pub fn has(&self, capability: Capability) -> bool {
        match capability {
            Capability::Reflink => self.reflink,
            Capability::ExchangeRange => self.exchange_range,
            Capability::AtomicWrite { len } => self
                .atomic_write_unit
                .is_some_and(|(min, max)| len.is_power_of_two() && len >= min && len <= max),
            Capability::Dax => self.dax,
            Capability::DirectIo => self.direct_io_align.is_some(),
        }
    }

    /// `Ok` when `capability` is offered, else an error naming it and the file system.
    pub fn require(&self, capability: Capability, root: &Path) -> HostFsResult<()> {
        if self.has(capability) {
            return Ok(());
        }
        Err(HostFsError::Unsupported {
            capability,
            fs_type: self.fs_type.to_string(),
            root: root.to_path_buf(),
        })
    }
}

/// The alignment rules of RWF_ATOMIC: a power-of-two length within the unit limits, at an
/// offset that is a multiple of the length.
pub(crate) fn check_atomic(
    caps: &Capabilities,
    path: &Path,
    off: u64,
    len: usize,
) -> HostFsResult<()> {
    let len = len as u64;
    if len == 0 || !len.is_power_of_two() || !off.is_multiple_of(len) {
        return Err(invalid(
            path,
            "atomic write",
            format!("{len} bytes at {off}: the length must be a power of two and the offset a multiple of it"),
        ));
    }
    if let Some((min, max)) = caps.atomic_write_unit {
        if len < u64::from(min) || len > u64::from(max) {
            return Err(invalid(
                path,
                "atomic write",
                format!(
                    "{len} bytes outside the unit limits {min}..={max} of {}",
                    caps.fs_type
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_capability_names_itself_and_the_file_system() {
        let caps = Capabilities::plain(FsType::Ext4);
        let err = caps
            .require(Capability::Reflink, Path::new("/srv/store"))
            .expect_err("ext4 without reflink");
        assert_eq!(
            err.to_string(),
            "reflink (FICLONERANGE) is not available on ext4 at /srv/store"
        );
        let atomic = Capabilities {
            atomic_write_unit: Some((4096, 65536)),
            ..caps
        };
        assert!(atomic.has(Capability::AtomicWrite { len: 16384 }));
        assert!(!atomic.has(Capability::AtomicWrite { len: 12288 }));
        assert!(!atomic.has(Capability::AtomicWrite { len: 131072 }));
    }
}
