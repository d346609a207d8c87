//! Helpers of the journal's tests: a journal over a SimRegion and a SimHostFs, and a small
//! file model on top of it (file 0 block 0 holds the sizes of files 1..=FILES).

#![allow(dead_code)]

pub mod posix_steps;
pub mod stores;

use hostfs::{SimConfig, SimHostFs};
use journal::home::HomeNamer;
use journal::{BlockKey, Journal, JournalConfig, JournalResult, Tx, BLOCK_LEN};
use pmem::SimRegion;
use std::path::PathBuf;
use std::sync::Arc;

pub type SimJournal = Journal<Arc<SimRegion>, SimHostFs>;

pub const FILES: usize = 3;

pub fn namer() -> HomeNamer {
    Arc::new(|id| PathBuf::from(format!("home{id}")))
}

pub fn host_config() -> SimConfig {
    SimConfig::default()
}

/// A fresh journal of `cfg.journal_blocks` blocks.
pub fn sim_journal(cfg: &JournalConfig) -> (Arc<SimRegion>, SimHostFs, SimJournal) {
    let len = journal::layout::Geometry::new(cfg.journal_blocks)
        .map(|g| g.region_len())
        .unwrap_or(1 << 20);
    let region = Arc::new(SimRegion::new(len));
    let host = SimHostFs::new(host_config());
    let j = Journal::create(region.clone(), host.clone(), namer(), cfg.clone())
        .unwrap_or_else(|e| panic!("create: {e}"));
    (region, host, j)
}

/// Open a journal on crash images.
pub fn sim_reopen(
    pool: Vec<u8>,
    host: &hostfs::HostImage,
    cfg: &JournalConfig,
) -> JournalResult<SimJournal> {
    let region = Arc::new(SimRegion::from_image(pool));
    let host = SimHostFs::from_image(host, host_config());
    Journal::open(region, host, namer(), cfg.clone())
}

/// The sizes block.
pub fn sizes_key() -> BlockKey {
    BlockKey { file: 0, block: 0 }
}

pub fn read_sizes(j: &SimJournal, tx: Option<&Tx>) -> JournalResult<Vec<u64>> {
    let mut b = vec![0u8; BLOCK_LEN as usize];
    j.read(tx, 0, 0, &mut b)?;
    Ok((0..FILES)
        .map(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8])))
        .collect())
}

pub fn put_sizes(tx: &mut Tx, sizes: &[u64]) {
    let mut b = vec![0u8; BLOCK_LEN as usize];
    for (i, s) in sizes.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&s.to_le_bytes());
    }
    tx.put_block(sizes_key(), &b);
}

/// Every file's contents as the journal shows them (committed state).
pub fn contents(j: &SimJournal) -> JournalResult<Vec<Vec<u8>>> {
    let sizes = read_sizes(j, None)?;
    let mut out = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        if len > 64 << 20 {
            return Err(journal::JournalError::corrupt(format!("size {len}"), 0));
        }
        let mut buf = vec![0u8; len as usize];
        j.read(None, i as u32 + 1, 0, &mut buf)?;
        out.push(buf);
    }
    Ok(out)
}

/// One transaction of writes `(file index, offset, data)`; returns the new model.
pub fn write_tx(
    j: &SimJournal,
    model: &[Vec<u8>],
    writes: &[(usize, u64, Vec<u8>)],
) -> Vec<Vec<u8>> {
    let mut next = model.to_vec();
    let mut tx = Tx::new();
    for (f, off, data) in writes {
        let durable = model[*f].len() as u64;
        j.write(&mut tx, *f as u32 + 1, *off, data, Some(durable))
            .unwrap_or_else(|e| panic!("write: {e}"));
        let file = &mut next[*f];
        let end = *off as usize + data.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[*off as usize..end].copy_from_slice(data);
    }
    let sizes: Vec<u64> = next.iter().map(|f| f.len() as u64).collect();
    if next.iter().zip(model).any(|(a, b)| a.len() != b.len()) {
        put_sizes(&mut tx, &sizes);
    }
    j.commit(tx).unwrap_or_else(|e| panic!("commit: {e}"));
    next
}
