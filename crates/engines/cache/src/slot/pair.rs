//! A slot as two tags, and the choice of the case for a write to it.

use super::WriteCase;
use crate::format::Tag;

/// The two tags of slot `slot` (chunks `2·slot` and `2·slot + 1`).
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    slot: u64,
    tags: [Tag; 2],
}

/// How a write to a slot proceeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub case: WriteCase,
    /// The chunk to write.
    pub target: u64,
    /// The chunk to flush home and free first (Case 3).
    pub victim: Option<u64>,
    /// My valid chunk to copy from (Case 2-1, 3-1, 3-2).
    pub mine: Option<u64>,
    /// The other chunk whose N bit is cleared before the write.
    pub clear_new: Option<u64>,
}

impl Pair {
    pub fn new(slot: u64, tags: [Tag; 2]) -> Self {
        Pair { slot, tags }
    }
    pub fn chunk(&self, side: usize) -> u64 {
        self.slot * 2 + side as u64
    }
    pub fn tag(&self, side: usize) -> &Tag {
        &self.tags[side & 1]
    }

    /// The newest valid chunk holding chunk `index` of file `key`, if any.
    pub fn find(&self, key: u64, index: u64) -> Option<(u64, Tag)> {
        let hits: Vec<usize> = (0..2).filter(|&s| self.tags[s].holds(key, index)).collect();
        let side = match hits.as_slice() {
            [] => return None,
            [one] => *one,
            // Both valid (a multi-chunk write or transaction keeps the old copy until it
            // completes): the new one (N set; its write cleared N on the old one first).
            _ => Self::newer(&self.tags),
        };
        Some((self.chunk(side), self.tags[side]))
    }

    /// Of two valid copies of one chunk, the side of the new one: N set, else the higher
    /// stamp.
    pub fn newer(tags: &[Tag; 2]) -> usize {
        if tags[0].is_new() != tags[1].is_new() {
            usize::from(tags[1].is_new())
        } else {
            usize::from(tags[1].stamp > tags[0].stamp)
        }
    }

    /// The plan of a write of chunk `index` of file `key` by the write with stamp `stamp`.
    pub fn plan(&self, key: u64, index: u64, stamp: u64) -> Plan {
        let t = &self.tags;
        if let Some(side) = (0..2).find(|&s| t[s].holds(key, index) && t[s].stamp == stamp) {
            return self.simple(WriteCase::InPlace, side, None, None);
        }
        let valid = [t[0].valid(), t[1].valid()];
        let mine_side = (0..2).find(|&s| t[s].holds(key, index));
        match (valid, mine_side) {
            ([false, false], _) => self.simple(WriteCase::Case1, 0, None, None),
            ([true, false], Some(m)) | ([false, true], Some(m)) => {
                self.two(WriteCase::Case2_1, 1 - m, Some(m), None)
            }
            ([true, false], None) => self.two(WriteCase::Case2_2, 1, None, None),
            ([false, true], None) => self.two(WriteCase::Case2_2, 0, None, None),
            (_, Some(m)) => {
                let case = if t[m].is_new() {
                    WriteCase::Case3_2
                } else {
                    WriteCase::Case3_1
                };
                self.two(case, 1 - m, Some(m), Some(1 - m))
            }
            (_, None) => {
                // Case 3-3: free the older chunk (N = 0; the lower stamp if both say new).
                let older = if t[0].is_new() != t[1].is_new() {
                    usize::from(t[0].is_new())
                } else {
                    usize::from(t[1].stamp < t[0].stamp)
                };
                self.two(WriteCase::Case3_3, older, None, Some(older))
            }
        }
    }

    fn simple(&self, case: WriteCase, side: usize, mine: Option<usize>, v: Option<usize>) -> Plan {
        Plan {
            case,
            target: self.chunk(side),
            victim: v.map(|s| self.chunk(s)),
            mine: mine.map(|s| self.chunk(s)),
            clear_new: None,
        }
    }

    /// A plan writing `target_side` while the other side stays (its N bit cleared).
    fn two(&self, case: WriteCase, target: usize, mine: Option<usize>, v: Option<usize>) -> Plan {
        let other = 1 - target;
        let mut plan = self.simple(case, target, mine, v);
        if self.tags[other].valid() && self.tags[other].is_new() {
            plan.clear_new = Some(self.chunk(other));
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Status;

    fn tag(key: u64, index: u64, stamp: u64, new: bool) -> Tag {
        let mut bits = Status::VALID | Status::DIRTY;
        if new {
            bits |= Status::NEW;
        }
        Tag {
            key,
            status: Status::from_bits(bits),
            index,
            stamp,
        }
    }

    #[test]
    fn each_slot_state_picks_the_seeds_case() {
        let free = Tag::default();
        let cases = [
            ([free, free], WriteCase::Case1),
            ([tag(5, 0, 1, true), free], WriteCase::Case2_1),
            ([tag(9, 0, 1, true), free], WriteCase::Case2_2),
            (
                [tag(5, 0, 1, false), tag(9, 0, 2, true)],
                WriteCase::Case3_1,
            ),
            (
                [tag(5, 0, 2, true), tag(9, 0, 1, false)],
                WriteCase::Case3_2,
            ),
            (
                [tag(7, 0, 2, true), tag(9, 0, 1, false)],
                WriteCase::Case3_3,
            ),
            ([tag(5, 0, 3, true), free], WriteCase::InPlace),
        ];
        for (tags, want) in cases {
            let plan = Pair::new(4, tags).plan(5, 0, 3);
            assert_eq!(plan.case, want, "{tags:?}");
            assert!(plan.target == 8 || plan.target == 9);
        }
    }

    #[test]
    fn case_3_3_evicts_the_older_chunk_and_3_1_never_evicts_mine() {
        let p = Pair::new(0, [tag(7, 0, 2, true), tag(9, 0, 1, false)]).plan(5, 0, 3);
        assert_eq!(p.victim, Some(1));
        let p = Pair::new(0, [tag(5, 0, 1, false), tag(9, 0, 2, true)]).plan(5, 0, 3);
        assert_eq!(
            (p.victim, p.mine, p.target),
            (Some(1), Some(0), Some(1)).into_tuple()
        );
    }

    trait IntoTuple {
        fn into_tuple(self) -> (Option<u64>, Option<u64>, u64);
    }
    impl IntoTuple for (Option<u64>, Option<u64>, Option<u64>) {
        fn into_tuple(self) -> (Option<u64>, Option<u64>, u64) {
            (self.0, self.1, self.2.unwrap_or(u64::MAX))
        }
    }
}
