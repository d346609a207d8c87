//! The ioctl numbers of `include/atomfs_fuse.h`, computed the way Linux `_IOR`/`_IOW`/`_IO`
//! do (a test compiles the header and compares).

const IOC_MAGIC: u32 = b'A' as u32;
const IOC_NONE: u32 = 0;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | (IOC_MAGIC << 8) | nr
}

/// `_IOR('A', 1, uint64_t)`: begin a transaction bound to this descriptor; out: its id.
pub const IOC_TX_BEGIN: u32 = ioc(IOC_READ, 1, 8);
/// `_IOW('A', 2, uint64_t)`: bind this descriptor to the transaction given.
pub const IOC_TX_ADD: u32 = ioc(IOC_WRITE, 2, 8);
/// `_IOW('A', 3, uint64_t)`: commit the transaction given.
pub const IOC_TX_COMMIT: u32 = ioc(IOC_WRITE, 3, 8);
/// `_IOW('A', 4, uint64_t)`: abort the transaction given.
pub const IOC_TX_ABORT: u32 = ioc(IOC_WRITE, 4, 8);
/// `_IOW('A', 5, int32_t)`: atomic mode on (1) or off (0) for this descriptor.
pub const IOC_SET_ATOMIC: u32 = ioc(IOC_WRITE, 5, 4);
/// `_IO('A', 6)`: drop the pending atomic-mode writes of this descriptor.
pub const IOC_ATOMIC_ABORT: u32 = ioc(IOC_NONE, 6, 0);

/// Name of the extended attribute that switches a file's atomic mode.
pub const XATTR_ATOMIC: &str = "user.atomfs.atomic";
