//! Punched block ranges of a regular file: the 4 KiB blocks a hole punch freed, which hold no
//! storage until a write, an allocation or a zeroed range covers them again. They are what
//! the file's `allocated` leaves out (and what the capacity check does not count). Disjoint,
//! sorted `[first, end)` block ranges, at most [`PUNCHED_RANGES_MAX`] of them (recorded in
//! the inode's Node record): a punch that would need more is still made (its bytes read as
//! zeros) but leaves the blocks counted as allocated.

use super::meta_log::PUNCHED_RANGES_MAX;

/// Block size of the accounting.
pub const BLOCK: u64 = 4096;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Punched(Vec<(u64, u64)>);

impl Punched {
    /// Ranges as recorded; `None` when they break the invariants (a corrupt record).
    pub fn from_ranges(ranges: Vec<(u64, u64)>) -> Option<Punched> {
        let sorted = ranges.windows(2).all(|w| w[0].1 < w[1].0);
        let valid = ranges.iter().all(|&(a, b)| a < b);
        (sorted && valid && ranges.len() <= PUNCHED_RANGES_MAX).then_some(Punched(ranges))
    }

    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.0
    }

    /// Blocks punched below block `end`.
    pub fn blocks_below(&self, end: u64) -> u64 {
        self.0
            .iter()
            .map(|&(a, b)| b.min(end).saturating_sub(a))
            .sum()
    }

    /// The blocks wholly inside byte range `[off, end)` are punched (when the ranges stay
    /// within their maximum; otherwise nothing changes). Returns whether they were.
    pub fn punch(&mut self, off: u64, end: u64) -> bool {
        let (first, stop) = (off.div_ceil(BLOCK), end / BLOCK);
        if first >= stop {
            return true;
        }
        let mut next = self.0.clone();
        let (mut a, mut b) = (first, stop);
        next.retain(|&(x, y)| {
            let touches = x <= b && a <= y;
            if touches {
                a = a.min(x);
                b = b.max(y);
            }
            !touches
        });
        let at = next.partition_point(|&(x, _)| x < a);
        next.insert(at, (a, b));
        if next.len() > PUNCHED_RANGES_MAX {
            return false;
        }
        assert!(
            next.windows(2).all(|w| w[0].1 < w[1].0),
            "punched ranges out of order after a punch"
        );
        self.0 = next;
        true
    }

    /// The blocks touched by byte range `[off, end)` hold storage again (a write, an
    /// allocation, a zeroed range). Splitting a range may need one more; past the maximum
    /// the smallest ranges are given up (counted as allocated), which only overstates it.
    pub fn fill(&mut self, off: u64, end: u64) {
        if self.0.is_empty() || off >= end {
            return;
        }
        let (first, stop) = (off / BLOCK, end.div_ceil(BLOCK));
        let mut next = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b <= first || a >= stop {
                next.push((a, b));
                continue;
            }
            if a < first {
                next.push((a, first));
            }
            if b > stop {
                next.push((stop, b));
            }
        }
        while next.len() > PUNCHED_RANGES_MAX {
            let smallest = (0..next.len()).min_by_key(|&i| next[i].1 - next[i].0);
            if let Some(i) = smallest {
                next.remove(i);
            }
        }
        self.0 = next;
        assert!(
            self.0.len() <= PUNCHED_RANGES_MAX && self.0.windows(2).all(|w| w[0].1 < w[1].0),
            "punched ranges out of order after a fill"
        );
    }

    /// The file is cut to `size` bytes: nothing past it is punched.
    pub fn cut(&mut self, size: u64) {
        let end = size.div_ceil(BLOCK);
        self.0.retain(|&(a, _)| a < end);
        if let Some(last) = self.0.last_mut() {
            last.1 = last.1.min(end);
        }
        self.0.retain(|&(a, b)| a < b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punch_fill_cut() {
        let mut p = Punched::default();
        assert!(p.punch(100, 3 * BLOCK + 5));
        assert_eq!(p.ranges(), &[(1, 3)]);
        assert!(p.punch(3 * BLOCK, 6 * BLOCK));
        assert_eq!(p.ranges(), &[(1, 6)]);
        p.fill(2 * BLOCK + 1, 2 * BLOCK + 2);
        assert_eq!(p.ranges(), &[(1, 2), (3, 6)]);
        assert_eq!(p.blocks_below(5), 3);
        p.cut(4 * BLOCK + 1);
        assert_eq!(p.ranges(), &[(1, 2), (3, 5)]);
        p.cut(0);
        assert!(p.ranges().is_empty());
        assert!(p.punch(0, BLOCK - 1), "nothing whole to punch");
        assert!(p.ranges().is_empty());
    }

    #[test]
    fn ranges_stay_within_their_maximum() {
        let mut p = Punched::default();
        for i in 0..PUNCHED_RANGES_MAX as u64 {
            assert!(p.punch(i * 2 * BLOCK, (i * 2 + 1) * BLOCK));
        }
        assert!(!p.punch(1000 * BLOCK, 1001 * BLOCK), "one range too many");
        assert_eq!(p.ranges().len(), PUNCHED_RANGES_MAX);
        p.fill(0, 1);
        assert_eq!(p.ranges().len(), PUNCHED_RANGES_MAX - 1);
        let mut q = Punched::from_ranges(vec![(0, 100)]).unwrap_or_default();
        for i in 0..PUNCHED_RANGES_MAX as u64 + 2 {
            q.fill(i * 3 * BLOCK + BLOCK, i * 3 * BLOCK + 2 * BLOCK);
            assert!(q.ranges().len() <= PUNCHED_RANGES_MAX);
        }
        assert!(Punched::from_ranges(vec![(3, 2)]).is_none());
        assert!(Punched::from_ranges(vec![(0, 2), (2, 3)]).is_none());
    }
}
