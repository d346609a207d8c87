//! Byte-level delta (seed §3.5): the runs of bytes where a new block differs from an old one.
//! A delta update writes only these runs onto the old version.

/// Runs (offset, length) where `new` differs from `old`. Runs closer than `merge_gap` bytes
/// are merged (a store of a few equal bytes is cheaper than starting another run).
pub fn diff_runs(old: &[u8], new: &[u8], merge_gap: usize) -> Vec<(usize, usize)> {
    assert_eq!(old.len(), new.len(), "delta of blocks of different lengths");
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < new.len() {
        if old[i] == new[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < new.len() && old[i] != new[i] {
            i += 1;
        }
        match runs.last_mut() {
            Some((s, l)) if start - (*s + *l) <= merge_gap => *l = i - *s,
            _ => runs.push((start, i - start)),
        }
    }
    runs
}

/// Bytes a delta writes.
pub fn delta_len(runs: &[(usize, usize)]) -> usize {
    runs.iter().map(|r| r.1).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_exactly_the_differences() {
        let old = vec![0u8; 64];
        let mut new = old.clone();
        new[3] = 1;
        new[4] = 1;
        new[40] = 9;
        assert_eq!(diff_runs(&old, &new, 0), vec![(3, 2), (40, 1)]);
        assert_eq!(diff_runs(&old, &new, 64), vec![(3, 38)]);
        assert!(diff_runs(&old, &old, 8).is_empty());
        let runs = diff_runs(&old, &new, 0);
        let mut patched = old.clone();
        for (s, l) in runs {
            patched[s..s + l].copy_from_slice(&new[s..s + l]);
        }
        assert_eq!(patched, new);
    }
}
