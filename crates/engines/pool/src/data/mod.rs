//! File data (seed §III-D): the write path into pending blocks (`write`) and its read-only
//! plan (`write_plan`) and its reservation (`reservation`), the DRAM copy of a file's block map
//! (`block_map`), the two-level volatile index (`pending_index`, `tlvi`), and the optional
//! per-block data checksums (`checksum`).

pub(crate) mod block_map;
pub(crate) mod checksum;
pub(crate) mod fallocate;
pub(crate) mod pending_index;
pub(crate) mod reservation;
pub(crate) mod tlvi;
pub(crate) mod write;
pub(crate) mod write_plan;
