//! The write path (seed §3.1) and reads: a running transaction collects journaled home
//! blocks in DRAM and appends home files directly; reads see the transaction's blocks, then
//! the latest journaled version (the version table), then the home file.

use super::Journal;
use crate::layout::{BlockKey, BLOCK_LEN};
use crate::{JournalError, JournalResult};
use hostfs::HostFs;
use pmem::Region;
use std::collections::{BTreeMap, BTreeSet};

/// A running transaction: its journaled blocks and the home files it appended to.
#[derive(Debug, Default)]
pub struct Tx {
    blocks: BTreeMap<BlockKey, Box<[u8]>>,
    appended: BTreeSet<u32>,
    appended_bytes: u64,
}

impl Tx {
    pub fn new() -> Tx {
        Tx::default()
    }

    /// Journal blocks the transaction will write.
    pub fn journal_blocks(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.appended.is_empty()
    }

    pub(super) fn into_parts(self) -> (BTreeMap<BlockKey, Box<[u8]>>, BTreeSet<u32>, u64) {
        (self.blocks, self.appended, self.appended_bytes)
    }

    /// Home files the transaction appended to directly.
    pub fn appended_files(&self) -> impl Iterator<Item = u32> + '_ {
        self.appended.iter().copied()
    }

    /// Per home file, the end (bytes) of the last block the transaction journals.
    pub fn journaled_ends(&self) -> BTreeMap<u32, u64> {
        let mut ends = BTreeMap::new();
        for key in self.blocks.keys() {
            let end = (key.block as u64 + 1) * BLOCK_LEN;
            let e = ends.entry(key.file).or_insert(0);
            *e = end.max(*e);
        }
        ends
    }

    /// Take over `other`'s blocks (its versions win) and appended files.
    pub fn absorb(&mut self, other: Tx) {
        self.blocks.extend(other.blocks);
        self.appended.extend(other.appended);
        self.appended_bytes += other.appended_bytes;
    }

    /// Journal a whole home block (metadata blocks are written this way).
    pub fn put_block(&mut self, key: BlockKey, data: &[u8]) {
        assert_eq!(data.len() as u64, BLOCK_LEN, "a journal block is 4 KiB");
        self.blocks.insert(key, data.into());
    }
}

fn block_key(file: u32, block: u64) -> JournalResult<BlockKey> {
    BlockKey::new(file, block).ok_or_else(|| {
        JournalError::Config(format!(
            "home block {block} of file {file} past the 64 GiB limit"
        ))
    })
}

impl<R: Region, H: HostFs> Journal<R, H> {
    /// Write `data` at `off` of home file `file` in `tx`. A block that holds durable bytes
    /// (below `durable_len` rounded up to a block) is over-written through the journal; a
    /// block wholly past it is appended straight to the home file (durable at commit).
    /// `durable_len` `None`: everything is journaled (for writers that may not touch the
    /// home file before they commit, e.g. several O_ATOMIC handles of one file).
    pub fn write(
        &self,
        tx: &mut Tx,
        file: u32,
        off: u64,
        data: &[u8],
        durable_len: Option<u64>,
    ) -> JournalResult<()> {
        let file_id_max = self.geometry.format().file_id_max();
        if file > file_id_max {
            return Err(JournalError::Config(format!(
                "home file id {file} past this journal format's {file_id_max}"
            )));
        }
        let direct = durable_len.is_some();
        let durable_len = durable_len.unwrap_or(u64::MAX);
        let durable_blocks = durable_len.div_ceil(BLOCK_LEN);
        let mut done = 0usize;
        while done < data.len() {
            let pos = off + done as u64;
            let block = pos / BLOCK_LEN;
            let in_block = (pos % BLOCK_LEN) as usize;
            let n = (BLOCK_LEN as usize - in_block).min(data.len() - done);
            let part = &data[done..done + n];
            let key = block_key(file, block)?;
            // A block past the durable end with a journaled version (left by a truncation)
            // is journaled again, so that reads never see the stale version.
            let appended = direct
                && block >= durable_blocks
                && !self.config.variant.all_journal
                && !self.has_version(key);
            if appended && !tx.blocks.contains_key(&key) {
                self.home.write_at(file, pos, part)?;
                tx.appended.insert(file);
                tx.appended_bytes += n as u64;
            } else {
                let buf = match tx.blocks.get_mut(&key) {
                    Some(b) => b,
                    None => {
                        let mut b = vec![0u8; BLOCK_LEN as usize].into_boxed_slice();
                        self.read_block(key, &mut b)?;
                        tx.blocks.entry(key).or_insert(b)
                    }
                };
                buf[in_block..in_block + n].copy_from_slice(part);
            }
            done += n;
        }
        Ok(())
    }

    /// Per home file with a version in the journal, the end (bytes) of its last one.
    pub fn journaled_ends(&self) -> std::collections::HashMap<u32, u64> {
        let st = self.state.lock();
        let mut ends = std::collections::HashMap::new();
        for (key, _) in st.versions.iter() {
            let end = (key.block as u64 + 1) * BLOCK_LEN;
            let e = ends.entry(key.file).or_insert(0);
            *e = end.max(*e);
        }
        ends
    }

    /// End (bytes) of the last journaled block of `file` (0 when none).
    pub fn journaled_end(&self, file: u32) -> u64 {
        let st = self.state.lock();
        st.versions
            .latest_sorted()
            .iter()
            .filter(|(k, _)| k.file == file)
            .map(|(k, _)| (k.block as u64 + 1) * BLOCK_LEN)
            .max()
            .unwrap_or(0)
    }

    /// Whether the journal holds a version of `key`.
    pub fn has_version(&self, key: BlockKey) -> bool {
        self.state.lock().versions.get(&key).is_some()
    }

    /// The committed content of a home block: its latest journaled version, else the home
    /// file's block.
    pub fn read_block(&self, key: BlockKey, buf: &mut [u8]) -> JournalResult<()> {
        assert_eq!(buf.len() as u64, BLOCK_LEN);
        {
            let st = self.state.lock();
            if let Some(v) = st.versions.get(&key) {
                let h = self.header_known(self.geometry.slot(v.latest));
                assert!(
                    h.flags.valid() && h.home == key,
                    "version table out of step at {key:?}"
                );
                self.read_jblock(h.j_blocknr, buf);
                return Ok(());
            }
        }
        self.home.read_block(key.file, key.block, buf)?;
        Ok(())
    }

    /// Read `buf.len()` bytes at `off` of home file `file` as `tx` sees it (or as committed).
    pub fn read(&self, tx: Option<&Tx>, file: u32, off: u64, buf: &mut [u8]) -> JournalResult<()> {
        let mut block_buf = vec![0u8; BLOCK_LEN as usize];
        let mut done = 0usize;
        while done < buf.len() {
            let pos = off + done as u64;
            let key = block_key(file, pos / BLOCK_LEN)?;
            let in_block = (pos % BLOCK_LEN) as usize;
            let n = (BLOCK_LEN as usize - in_block).min(buf.len() - done);
            match tx.and_then(|t| t.blocks.get(&key)) {
                Some(b) => block_buf.copy_from_slice(b),
                None => self.read_block(key, &mut block_buf)?,
            }
            buf[done..done + n].copy_from_slice(&block_buf[in_block..in_block + n]);
            done += n;
        }
        Ok(())
    }
}
