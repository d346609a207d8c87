//! Punched ranges of a file whose reads must not touch the mapping. On tmpfs (and any file
//! system whose read faults allocate a page) a read through the mapping of a hole gives the
//! storage a punch just freed straight back; the file remembers its punched ranges in DRAM
//! and reads them as zeros without the mapping, until a write covers them (the write path
//! forgets the range it writes before its bytes reach home) or the file is closed.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Default)]
pub(crate) struct Holes {
    /// Fast check for the read and write paths: false while `ranges` is empty.
    any: AtomicBool,
    /// Disjoint, sorted `[start, end)` ranges.
    ranges: Mutex<Vec<(u64, u64)>>,
}

impl Holes {
    pub(crate) fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

    /// `[off, end)` reads as zeros without the mapping from now on.
    pub(crate) fn add(&self, off: u64, end: u64) {
        let mut r = self.ranges.lock();
        let (mut start, mut stop) = (off, end);
        r.retain(|&(a, b)| {
            let touches = a <= stop && start <= b;
            if touches {
                start = start.min(a);
                stop = stop.max(b);
            }
            !touches
        });
        let at = r.partition_point(|&(a, _)| a < start);
        r.insert(at, (start, stop));
        self.any.store(true, Ordering::Release);
    }

    /// `[off, end)` is about to be written (or cut off): it is read through the mapping again.
    pub(crate) fn remove(&self, off: u64, end: u64) {
        if self.is_empty() {
            return;
        }
        let mut r = self.ranges.lock();
        let mut out = Vec::with_capacity(r.len() + 1);
        for &(a, b) in r.iter() {
            if b <= off || end <= a {
                out.push((a, b));
                continue;
            }
            if a < off {
                out.push((a, off));
            }
            if end < b {
                out.push((end, b));
            }
        }
        self.any.store(!out.is_empty(), Ordering::Release);
        *r = out;
    }

    /// The pieces of `[off, end)`: (start, end, is a hole), in order.
    pub(crate) fn pieces(&self, off: u64, end: u64) -> Vec<(u64, u64, bool)> {
        let r = self.ranges.lock();
        let mut out = Vec::new();
        let mut at = off;
        for &(a, b) in r.iter().filter(|&&(a, b)| a < end && off < b) {
            if at < a {
                out.push((at, a, false));
            }
            let (s, e) = (a.max(at), b.min(end));
            out.push((s, e, true));
            at = e;
        }
        if at < end {
            out.push((at, end, false));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_split_and_cut_a_read_into_pieces() {
        let h = Holes::default();
        assert!(h.is_empty());
        h.add(10, 20);
        h.add(30, 40);
        h.add(20, 25);
        assert_eq!(
            h.pieces(0, 50),
            vec![
                (0, 10, false),
                (10, 25, true),
                (25, 30, false),
                (30, 40, true),
                (40, 50, false)
            ]
        );
        h.remove(12, 35);
        assert_eq!(
            h.pieces(0, 50),
            vec![
                (0, 10, false),
                (10, 12, true),
                (12, 35, false),
                (35, 40, true),
                (40, 50, false)
            ]
        );
        h.remove(0, 100);
        assert!(h.is_empty());
        assert_eq!(h.pieces(5, 6), vec![(5, 6, false)]);
    }
}
