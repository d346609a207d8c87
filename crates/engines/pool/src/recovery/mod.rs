//! Opening a pool and what checks or mends one: format and recovery (`recover`), the
//! read-only check (`fsck`) and views (`inspect`), `fsck --repair` (`repair`, `repair_*`),
//! and copying files out of a damaged pool (`salvage`).

pub(crate) mod fsck;
pub(crate) mod fsck_posix;
pub(crate) mod inspect;
pub(crate) mod recover;
pub(crate) mod repair;
pub(crate) mod repair_dirs;
pub(crate) mod repair_inodes;
pub(crate) mod repair_lost;
pub(crate) mod salvage;
