//! The seed's microbenchmark (FCFS §VI-C): `files` files of `file_size` bytes; each
//! transaction picks two distinct files and writes, in each, a random range whose length is
//! uniform in `[0, value_max]` (or exactly `value_max` with [`ValueSize::Fixed`], Fig. 8) at a
//! uniform offset that keeps it inside the file. One u64 seed drives everything, so every
//! system of a figure sees exactly the same transactions and bytes.

/// SplitMix64: tiny, fast, and stable across library versions (results stay reproducible).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, bound]` (inclusive).
    pub fn upto(&mut self, bound: u64) -> u64 {
        if bound == u64::MAX {
            return self.next_u64();
        }
        // Multiply-shift reduction; its bias is far below anything a benchmark can see.
        ((self.next_u64() as u128 * (bound as u128 + 1)) >> 64) as u64
    }
}

/// How long each write of a transaction is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueSize {
    /// Uniform in `[0, max]` bytes (Fig. 7: 0–16 KB).
    Random { max: u64 },
    /// Exactly this many bytes (Fig. 8: 64 B … 16 KB).
    Fixed(u64),
}

impl ValueSize {
    pub fn max(&self) -> u64 {
        match *self {
            ValueSize::Random { max } | ValueSize::Fixed(max) => max,
        }
    }

    pub fn describe(&self) -> String {
        match *self {
            ValueSize::Random { max } => format!("random 0-{max} B"),
            ValueSize::Fixed(n) => format!("fixed {n} B"),
        }
    }
}

/// Shape of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    pub files: u32,
    pub file_size: u64,
    pub value: ValueSize,
    pub seed: u64,
}

/// One write of a transaction: `data` at `off` in file number `file`.
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    pub file: u32,
    pub off: u64,
    pub data: &'a [u8],
}

/// One generated transaction (offsets and lengths; the bytes come from [`Generator::data`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxSpec {
    pub a: (u32, u64, u64),
    pub b: (u32, u64, u64),
}

/// Deterministic stream of transactions for a [`Workload`].
pub struct Generator {
    workload: Workload,
    rng: Rng,
    /// Pattern the written bytes are taken from (a window that moves with every tx, so
    /// consecutive writes of the same range change the data).
    pattern: Vec<u8>,
}

impl Generator {
    /// # Panics
    /// When the workload has fewer than two files or a value longer than a file: a bug in the
    /// suite definition, not user input (the CLI validates its arguments first).
    pub fn new(workload: Workload) -> Self {
        assert!(
            workload.files >= 2,
            "a two-file workload needs at least two files"
        );
        assert!(
            workload.value.max() <= workload.file_size,
            "value larger than a file"
        );
        let mut rng = Rng::new(workload.seed ^ 0x5EED_DA7A);
        let len = (2 * workload.value.max() + 4096) as usize;
        let pattern = (0..len).map(|_| rng.next_u64() as u8).collect();
        Generator {
            workload,
            rng: Rng::new(workload.seed),
            pattern,
        }
    }

    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    fn range(&mut self) -> (u64, u64) {
        let len = match self.workload.value {
            ValueSize::Random { max } => self.rng.upto(max),
            ValueSize::Fixed(n) => n,
        };
        let off = self.rng.upto(self.workload.file_size - len);
        (off, len)
    }

    /// The next transaction.
    pub fn next_tx(&mut self) -> TxSpec {
        let files = self.workload.files as u64;
        let fa = self.rng.upto(files - 1) as u32;
        let mut fb = self.rng.upto(files - 2) as u32;
        if fb >= fa {
            fb += 1; // distinct from fa, still uniform over the others
        }
        let (oa, la) = self.range();
        let (ob, lb) = self.range();
        TxSpec {
            a: (fa, oa, la),
            b: (fb, ob, lb),
        }
    }

    /// Bytes to write for a range of `len` bytes; `salt` picks a window of the pattern.
    pub fn data(&self, salt: u64, len: u64) -> &[u8] {
        let window = self.pattern.len() as u64 - len;
        let start = (salt % (window + 1)) as usize;
        &self.pattern[start..start + len as usize]
    }

    /// The two writes of `tx` with their data (salted by the offsets).
    pub fn writes(&self, tx: &TxSpec) -> (Write<'_>, Write<'_>) {
        let (fa, oa, la) = tx.a;
        let (fb, ob, lb) = tx.b;
        (
            Write {
                file: fa,
                off: oa,
                data: self.data(oa ^ fa as u64, la),
            },
            Write {
                file: fb,
                off: ob,
                data: self.data(ob ^ ((fb as u64) << 7), lb),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(value: ValueSize) -> Workload {
        Workload {
            files: 5,
            file_size: 20_000,
            value,
            seed: 42,
        }
    }

    #[test]
    fn same_seed_same_stream_and_ranges_stay_inside_files() {
        let mut g1 = Generator::new(wl(ValueSize::Random { max: 16384 }));
        let mut g2 = Generator::new(wl(ValueSize::Random { max: 16384 }));
        let mut max_len = 0;
        for _ in 0..10_000 {
            let t = g1.next_tx();
            assert_eq!(t, g2.next_tx());
            assert_ne!(t.a.0, t.b.0, "files must be distinct");
            for (f, off, len) in [t.a, t.b] {
                assert!(f < 5);
                assert!(len <= 16384 && off + len <= 20_000);
                max_len = max_len.max(len);
            }
            let (wa, wb) = g1.writes(&t);
            assert_eq!(wa.data.len() as u64, t.a.2);
            assert_eq!(wb.data.len() as u64, t.b.2);
        }
        assert!(
            max_len > 15_000,
            "lengths should cover the range, max seen {max_len}"
        );
    }

    #[test]
    fn fixed_value_size_is_exact_and_every_file_is_picked() {
        let mut g = Generator::new(wl(ValueSize::Fixed(64)));
        let mut seen = [0u32; 5];
        for _ in 0..1000 {
            let t = g.next_tx();
            assert_eq!((t.a.2, t.b.2), (64, 64));
            seen[t.a.0 as usize] += 1;
            seen[t.b.0 as usize] += 1;
        }
        assert!(
            seen.iter().all(|&n| n > 250),
            "file choice not uniform: {seen:?}"
        );
    }
}
