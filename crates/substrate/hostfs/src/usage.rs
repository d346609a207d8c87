//! Free space of a store that shares its host file system with other programs.
//!
//! A host-file engine's `statfs` cannot tell its own use from everyone else's on the host file
//! system, and other programs come and go: counting the host's free blocks as they are makes a
//! store's own writes invisible whenever someone else frees more meanwhile. [`SharedUsage`]
//! takes the others' use once, the first time it is asked, and from then on reports the host's
//! total less that and less what the store itself holds now — so the store's writes and frees
//! always show. The cost: space others take or free later is not seen (a write can still fail
//! with ENOSPC before `statfs` says the store is full).

use std::sync::OnceLock;

use crate::StatFs;

/// Others' use of the host file system, in bytes, taken at the first [`SharedUsage::free`].
#[derive(Debug, Default)]
pub struct SharedUsage {
    others: OnceLock<u64>,
}

impl SharedUsage {
    pub fn new() -> Self {
        SharedUsage::default()
    }

    /// (total bytes, free bytes) of the host file system as the store sees it, when the store
    /// holds `own` bytes now.
    pub fn free(&self, host: &StatFs, own: u64) -> (u64, u64) {
        let bs = host.block_size.max(1);
        let total = host.blocks.saturating_mul(bs);
        let used = total.saturating_sub(host.blocks_available.saturating_mul(bs));
        let others = *self.others.get_or_init(|| used.saturating_sub(own));
        (total, total.saturating_sub(others).saturating_sub(own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(blocks: u64, available: u64) -> StatFs {
        StatFs {
            block_size: 4096,
            blocks,
            blocks_free: available,
            blocks_available: available,
            fs_type: crate::FsType::Tmpfs,
        }
    }

    #[test]
    fn the_stores_own_writes_show_whatever_others_do() {
        let u = SharedUsage::new();
        // 100 blocks used, 10 of them the store's.
        let (total, free) = u.free(&host(1000, 900), 10 * 4096);
        assert_eq!((total, free), (1000 * 4096, 900 * 4096));
        // The store writes 5 blocks while another program frees 50: the store still sees its 5.
        let (_, free) = u.free(&host(1000, 945), 15 * 4096);
        assert_eq!(free, 895 * 4096);
        // The store frees everything.
        let (_, free) = u.free(&host(1000, 960), 0);
        assert_eq!(free, 910 * 4096);
    }
}
