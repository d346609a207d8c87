//! Two-level volatile index (seed §III-D, Fig. 4). First level: per file, logical block ->
//! pending list (a hash map in `InodeState::pending`). Second level: the pending list, oldest
//! first, each version with the 64-bit bitmap of the cache lines it holds. The newest version
//! whose bit is set holds the latest copy of a line; if none, the permanent block does.
//!
//! A file is bound to at most one open transaction, so uncommitted versions of a block are
//! all of that transaction and sit at the end of the list; versions before them are committed,
//! in commit order.

use crate::media::layout::LINES_PER_BLOCK;
use smallvec::SmallVec;

/// The pending list of one block, oldest first. Most blocks have one or two versions between
/// checkpoints, so they live inline in the first-level map (no allocation per block).
pub(crate) type PendingList = SmallVec<[Version; 2]>;

/// One version of a block: a pending block and the lines it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    /// The pending block.
    pub(crate) pbn: u64,
    /// Cache lines present (bit i = line i).
    pub(crate) bitmap: u64,
    /// Transaction (group id once committed) that wrote it.
    pub(crate) txid: u64,
    pub(crate) committed: bool,
    /// Data log slot of its redo entry.
    pub(crate) slot: u64,
    /// Address of the block pointer the version belongs to.
    pub(crate) ptr_addr: u64,
    /// Once committed: the commit time its data entry redoes as the file's mtime and ctime
    /// (`DataEntry::times`), 0 = none. The checkpoint makes those times durable in place
    /// before it frees the entry.
    pub(crate) time: u64,
    /// Some line of it was completed from the permanent block's bytes (an edge line of a
    /// write that starts or ends inside a line), or it was rebuilt by recovery (not known):
    /// in a checksummed pool its checkpoint checks the permanent block even when no line of
    /// the result comes from it (checkpoint/ `merge_checksummed`).
    pub(crate) from_permanent: bool,
}

/// Bitmap of the lines `[first, last]`.
#[inline]
pub(crate) fn line_mask(first: u64, last: u64) -> u64 {
    assert!(first <= last && last < LINES_PER_BLOCK);
    let width = last - first + 1;
    if width == 64 {
        u64::MAX
    } else {
        ((1u64 << width) - 1) << first
    }
}

/// The block holding the latest copy of `line`: the newest version with the bit set, else
/// `permanent` (0 for a hole).
#[inline]
pub(crate) fn source_of(versions: &[Version], permanent: u64, line: u64) -> u64 {
    let bit = 1u64 << line;
    versions
        .iter()
        .rev()
        .find(|v| v.bitmap & bit != 0)
        .map_or(permanent, |v| v.pbn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pbn: u64, bitmap: u64) -> Version {
        Version {
            pbn,
            bitmap,
            txid: pbn,
            committed: true,
            slot: 0,
            ptr_addr: 0,
            time: 0,
            from_permanent: false,
        }
    }

    #[test]
    fn newest_version_with_the_bit_wins() {
        // Seed Fig. 4: D3 holds line 0, D2 holds line 2.
        let list = [v(1, 0b111), v(2, 0b101), v(3, 0b001)];
        assert_eq!(source_of(&list, 9, 0), 3);
        assert_eq!(source_of(&list, 9, 1), 1);
        assert_eq!(source_of(&list, 9, 2), 2);
        assert_eq!(source_of(&list, 9, 3), 9);
        assert_eq!(line_mask(0, 63), u64::MAX);
        assert_eq!(line_mask(2, 3), 0b1100);
    }
}
