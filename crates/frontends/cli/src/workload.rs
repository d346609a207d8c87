//! The seed's atomic two-file update workload (FCFS, Figure 1 / §VI-C): N files; each
//! transaction picks two of them and writes a random 0–16 KB range in each.
//!
//! Every transaction is a pure function of (seed, transaction number), so a checker can
//! replay any prefix of the run into a model. The bytes a transaction writes carry its
//! stamp: the 8-byte little-endian word at every 8-aligned file offset `o` is
//! `STAMP_MAGIC << 48 | file << 32 | txn` (bytes at the edges of a range are the
//! corresponding bytes of that word), so the writer of any aligned word can be read back.

use atomfs::{File, Fs};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Upper 16 bits of every stamp word.
pub const STAMP_MAGIC: u64 = 0xA70F;
/// Largest write of one transaction into one file.
pub const WRITE_MAX: u64 = 16 << 10;

/// Shape of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    pub files: u32,
    pub file_size: u64,
    pub seed: u64,
}

/// One write of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    pub file: u32,
    pub offset: u64,
    pub len: u64,
}

/// The stamp word of transaction `txn` in file `file`.
pub fn stamp_word(txn: u64, file: u32) -> u64 {
    (STAMP_MAGIC << 48) | ((file as u64 & 0xFFFF) << 32) | (txn & 0xFFFF_FFFF)
}

/// Decode a stamp word: (transaction, file), or None when it is no stamp.
pub fn decode_stamp(word: u64) -> Option<(u64, u32)> {
    (word >> 48 == STAMP_MAGIC).then_some((word & 0xFFFF_FFFF, ((word >> 32) & 0xFFFF) as u32))
}

/// Fill `buf`, which lands at file offset `offset`, with the stamp of `txn`.
pub fn fill_stamp(buf: &mut [u8], offset: u64, txn: u64, file: u32) {
    let word = stamp_word(txn, file).to_le_bytes();
    let mut pattern = [0u8; 16];
    pattern[..8].copy_from_slice(&word);
    pattern[8..].copy_from_slice(&word);
    let start = (offset % 8) as usize;
    for chunk in buf.chunks_mut(8) {
        let len = chunk.len();
        chunk.copy_from_slice(&pattern[start..start + len]);
    }
}

impl Workload {
    /// The two writes of transaction `txn` (numbered from 1; 0 is the initial fill).
    pub fn writes(&self, txn: u64) -> [Write; 2] {
        let mut rng = SmallRng::seed_from_u64(self.seed ^ txn.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let a = rng.gen_range(0..self.files);
        let b = (a + rng.gen_range(1..self.files.max(2))) % self.files.max(2);
        [a, b].map(|file| {
            let len = rng.gen_range(0..=WRITE_MAX.min(self.file_size));
            let offset = rng.gen_range(0..=self.file_size - len);
            Write { file, offset, len }
        })
    }

    /// Path of file `i` inside the file system.
    pub fn path(i: u32) -> String {
        format!("/demo/file{i:04}")
    }

    /// Create the files, each filled with the stamp of transaction 0.
    pub fn create_files(&self, fs: &Fs) -> atomfs::Result<()> {
        fs.create_dir_all("/demo")?;
        let mut buf = vec![0u8; self.file_size as usize];
        for i in 0..self.files {
            fill_stamp(&mut buf, 0, 0, i);
            fs.write(Self::path(i), &buf)?;
        }
        Ok(())
    }

    /// Open every file for writing.
    pub fn open_files(&self, fs: &Fs) -> atomfs::Result<Vec<File>> {
        (0..self.files)
            .map(|i| fs.options().read(true).write(true).open(Self::path(i)))
            .collect()
    }

    /// Run transaction `txn` through `files`; `buf` is scratch space.
    pub fn run_tx(
        &self,
        fs: &Fs,
        files: &[File],
        txn: u64,
        buf: &mut Vec<u8>,
    ) -> atomfs::Result<()> {
        let writes = self.writes(txn);
        let file = |w: &Write| {
            files
                .get(w.file as usize)
                .ok_or_else(|| atomfs::Error::InvalidArgument(format!("no file {}", w.file)))
        };
        let tx = fs.begin(&[file(&writes[0])?, file(&writes[1])?])?;
        for w in &writes {
            buf.resize(w.len as usize, 0);
            fill_stamp(buf, w.offset, txn, w.file);
            file(w)?.write_at(buf, w.offset)?;
        }
        tx.commit()
    }
}

/// The expected contents of every file after a prefix of the run.
#[derive(Clone, Debug)]
pub struct Model {
    pub work: Workload,
    pub files: Vec<Vec<u8>>,
    /// Transactions applied: 1..=applied.
    pub applied: u64,
}

impl Model {
    /// The state right after [`Workload::create_files`].
    pub fn new(work: Workload) -> Self {
        let files = (0..work.files)
            .map(|i| {
                let mut f = vec![0u8; work.file_size as usize];
                fill_stamp(&mut f, 0, 0, i);
                f
            })
            .collect();
        Model {
            work,
            files,
            applied: 0,
        }
    }

    /// Apply the next transaction.
    pub fn step(&mut self) {
        let txn = self.applied + 1;
        for w in self.work.writes(txn) {
            let (start, end) = (w.offset as usize, (w.offset + w.len) as usize);
            fill_stamp(
                &mut self.files[w.file as usize][start..end],
                w.offset,
                txn,
                w.file,
            );
        }
        self.applied = txn;
    }

    /// Apply transactions up to `txn`.
    pub fn advance_to(&mut self, txn: u64) {
        while self.applied < txn {
            self.step();
        }
    }
}

/// Which transaction's stamp covers `offset` in `data` (the aligned word holding it).
pub fn writer_at(data: &[u8], offset: usize) -> Option<u64> {
    let start = offset & !7;
    let word = data.get(start..start + 8)?;
    decode_stamp(u64::from_le_bytes(word.try_into().ok()?)).map(|(txn, _)| txn)
}

/// A pool engine on volatile memory, for unit tests of the workload logic.
#[cfg(test)]
pub fn dram_pool(bytes: u64) -> std::sync::Arc<dyn store::Store> {
    let region = std::sync::Arc::new(pmem::DramRegion::new(bytes));
    let config = atomfs::pool_config_for(bytes);
    std::sync::Arc::new(pool::PoolStore::format(region, &config).expect("format a DRAM pool"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_deterministic_and_in_bounds() {
        let w = Workload {
            files: 8,
            file_size: 64 << 10,
            seed: 42,
        };
        for txn in 1..2000 {
            let ws = w.writes(txn);
            assert_eq!(ws, w.writes(txn));
            assert_ne!(ws[0].file, ws[1].file);
            for x in ws {
                assert!(x.file < 8 && x.len <= WRITE_MAX && x.offset + x.len <= w.file_size);
            }
        }
    }

    #[test]
    fn stamps_identify_the_writer() {
        let mut buf = vec![0u8; 40];
        fill_stamp(&mut buf, 13, 77, 5);
        // file offset 16 is at buf[3]; the word at file offsets 16..24 is buf[3..11]
        assert_eq!(
            decode_stamp(u64::from_le_bytes(
                buf[3..11].try_into().unwrap_or_default()
            )),
            Some((77, 5))
        );
    }

    #[test]
    fn run_on_a_store_matches_the_model() -> atomfs::Result<()> {
        let fs = Fs::owning(crate::workload::dram_pool(16 << 20));
        let work = Workload {
            files: 4,
            file_size: 32 << 10,
            seed: 7,
        };
        work.create_files(&fs)?;
        let files = work.open_files(&fs)?;
        let mut buf = Vec::new();
        for txn in 1..=50 {
            work.run_tx(&fs, &files, txn, &mut buf)?;
        }
        let mut model = Model::new(work);
        model.advance_to(50);
        for i in 0..4 {
            assert_eq!(fs.read(Workload::path(i))?, model.files[i as usize]);
        }
        let last = work.writes(50)[0];
        if last.len >= 16 {
            let data = &model.files[last.file as usize];
            assert_eq!(writer_at(data, (last.offset as usize + 8) & !7), Some(50));
        }
        Ok(())
    }
}
