//! The fixed-seed operation streams of the `engines` suite's workloads (the two-file
//! transactions come from `workload::Generator`).

use crate::systems::engine_mix::NS_DATA_MAX;
use crate::systems::mix::NsOp;
use crate::workload::Rng;

/// Bytes of one random overwrite (and its alignment).
pub const OVERWRITE_LEN: u64 = 4096;
/// Longest append record (records are 1..=this many bytes).
pub const APPEND_LEN_MAX: u64 = 4096;
/// Files the namespace mix keeps at most.
pub const NS_LIVE_MAX: usize = 64;

/// `len` bytes of a fixed-seed pattern the streams take their data from.
fn pattern(seed: u64, len: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ 0xDA7A);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// A window of `len` bytes of `pattern` chosen by `salt`.
fn window(pattern: &[u8], salt: u64, len: u64) -> &[u8] {
    let len = (len as usize).min(pattern.len());
    let start = (salt % (pattern.len() - len + 1) as u64) as usize;
    &pattern[start..start + len]
}

/// 4 KB writes at random 4 KB-aligned offsets of a file of `file_len` bytes.
pub struct Overwrites {
    rng: Rng,
    units: u64,
    pattern: Vec<u8>,
}

impl Overwrites {
    pub fn new(seed: u64, file_len: u64) -> Self {
        Overwrites {
            rng: Rng::new(seed),
            units: (file_len / OVERWRITE_LEN).max(1),
            pattern: pattern(seed, 3 * OVERWRITE_LEN),
        }
    }

    /// (offset, data) of the next overwrite.
    pub fn next_write(&mut self) -> (u64, &[u8]) {
        let off = self.rng.upto(self.units - 1) * OVERWRITE_LEN;
        let salt = self.rng.next_u64();
        (off, window(&self.pattern, salt, OVERWRITE_LEN))
    }
}

/// Append records of 1..=[`APPEND_LEN_MAX`] bytes.
pub struct Appends {
    rng: Rng,
    pattern: Vec<u8>,
}

impl Appends {
    pub fn new(seed: u64) -> Self {
        Appends {
            rng: Rng::new(seed),
            pattern: pattern(seed, 3 * APPEND_LEN_MAX),
        }
    }

    pub fn next_record(&mut self) -> &[u8] {
        let len = 1 + self.rng.upto(APPEND_LEN_MAX - 1);
        let salt = self.rng.next_u64();
        window(&self.pattern, salt, len)
    }
}

/// The namespace mix on an initially empty directory: about 40 % creates (of files of
/// 0..=4 KB), 30 % renames (half of them over an existing file, as write-temp + rename
/// does), 30 % unlinks, with at most [`NS_LIVE_MAX`] files at a time.
pub struct Namespace {
    rng: Rng,
    live: Vec<u64>,
    next_name: u64,
}

impl Namespace {
    pub fn new(seed: u64) -> Self {
        Namespace {
            rng: Rng::new(seed),
            live: Vec::new(),
            next_name: 0,
        }
    }

    /// Files that exist after the operations so far.
    #[cfg(test)]
    pub fn live(&self) -> &[u64] {
        &self.live
    }

    fn fresh(&mut self) -> u64 {
        self.next_name += 1;
        self.next_name
    }

    fn pick(&mut self) -> usize {
        self.rng.upto(self.live.len() as u64 - 1) as usize
    }

    pub fn next_op(&mut self) -> NsOp {
        let roll = self.rng.upto(99);
        let n = self.live.len();
        if n == 0 || (n < NS_LIVE_MAX && roll < 40) {
            let name = self.fresh();
            self.live.push(name);
            let len = self.rng.upto(NS_DATA_MAX as u64);
            return NsOp::Create { name, len };
        }
        let i = self.pick();
        if n >= NS_LIVE_MAX || roll >= 70 {
            let name = self.live.swap_remove(i);
            return NsOp::Unlink { name };
        }
        let from = self.live[i];
        if n >= 2 && self.rng.upto(1) == 0 {
            let j = (i + 1 + self.rng.upto(n as u64 - 2) as usize) % n;
            let to = self.live[j];
            self.live.swap_remove(i);
            NsOp::Rename { from, to }
        } else {
            let to = self.fresh();
            self.live[i] = to;
            NsOp::Rename { from, to }
        }
    }
}

/// One-row SQLite updates: (row id, value of 0..=`value_max` bytes).
pub struct SqlUpdates {
    rng: Rng,
    rows: u64,
    value_max: u64,
    pattern: Vec<u8>,
}

impl SqlUpdates {
    pub fn new(seed: u64, rows: u64, value_max: u64) -> Self {
        SqlUpdates {
            rng: Rng::new(seed),
            rows: rows.max(1),
            value_max,
            pattern: pattern(seed, 3 * value_max + 1),
        }
    }

    pub fn value(&mut self) -> &[u8] {
        let len = self.rng.upto(self.value_max);
        let salt = self.rng.next_u64();
        window(&self.pattern, salt, len)
    }

    pub fn next_update(&mut self) -> (i64, &[u8]) {
        let id = self.rng.upto(self.rows - 1) as i64;
        (id, self.value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overwrites_are_aligned_inside_the_file_and_seeded() {
        let (mut a, mut b) = (Overwrites::new(4, 1 << 20), Overwrites::new(4, 1 << 20));
        for _ in 0..2000 {
            let (off, data) = a.next_write();
            assert_eq!(off % OVERWRITE_LEN, 0);
            assert!(off + OVERWRITE_LEN <= 1 << 20);
            assert_eq!(data.len() as u64, OVERWRITE_LEN);
            let (off_b, data_b) = b.next_write();
            assert_eq!((off, data), (off_b, data_b));
        }
    }

    #[test]
    fn append_records_cover_their_length_range() {
        let mut s = Appends::new(9);
        let lens: Vec<usize> = (0..5000).map(|_| s.next_record().len()).collect();
        assert!(lens
            .iter()
            .all(|&n| (1..=APPEND_LEN_MAX as usize).contains(&n)));
        assert!(lens.iter().any(|&n| n < 100) && lens.iter().any(|&n| n > 4000));
    }

    /// Replays the stream on a model directory: every op is valid where it is issued.
    #[test]
    fn namespace_ops_are_valid_and_bounded() {
        let mut s = Namespace::new(3);
        let mut dir = std::collections::BTreeSet::new();
        let (mut creates, mut renames, mut replaces, mut unlinks) = (0, 0, 0, 0);
        for _ in 0..20_000 {
            match s.next_op() {
                NsOp::Create { name, len } => {
                    assert!(dir.insert(name), "create of existing {name}");
                    assert!(len <= NS_DATA_MAX as u64);
                    creates += 1;
                }
                NsOp::Rename { from, to } => {
                    assert_ne!(from, to);
                    assert!(dir.remove(&from), "rename of missing {from}");
                    if !dir.insert(to) {
                        replaces += 1;
                    }
                    renames += 1;
                }
                NsOp::Unlink { name } => {
                    assert!(dir.remove(&name), "unlink of missing {name}");
                    unlinks += 1;
                }
            }
            assert!(dir.len() <= NS_LIVE_MAX);
            let mut live: Vec<u64> = s.live().to_vec();
            live.sort();
            assert_eq!(live, dir.iter().copied().collect::<Vec<_>>());
        }
        assert!(creates > 5000 && renames > 3000 && unlinks > 3000);
        assert!(replaces > 1000 && replaces < renames);
    }
}
