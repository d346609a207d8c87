//! The journal: commit records appended block-aligned, each made durable by one
//! `sync_data` of the journal file (SDJ, §4: the data is written once, here), and the scan
//! that recovery runs over them.

pub mod media;

use crate::atree::Block;
use crate::format::ops::HOLE_INDEX;
use crate::format::ops::{decode_ops, encode_ops, Op};
use crate::format::{
    decode_record_header, encode_record_head, Format, RecordHeader, BLOCK, BLOCK_USIZE,
};
use crate::host_err;
use hostfs::HostFs;
use media::Media;
use std::sync::Arc;
use store::{Error, Result};

/// The append position and numbering of the journal.
#[derive(Debug)]
pub struct Journal {
    /// The store's format: every record carries it.
    format: Format,
    generation: u64,
    next_seq: u64,
    /// Next free block (block 0 is the header).
    append_block: u64,
    records: u64,
}

/// One valid record found by [`scan`].
pub struct ScannedRecord {
    pub header: RecordHeader,
    /// Journal block of the record's first data block.
    pub data_start: u64,
    pub ops: Vec<Op>,
}

impl Journal {
    /// A journal of `generation` whose valid records end before `append_block`.
    pub fn new(format: Format, generation: u64, next_seq: u64, append_block: u64) -> Journal {
        assert!(append_block >= 1, "block 0 is the journal header");
        Journal {
            format,
            generation,
            next_seq,
            append_block,
            records: next_seq - 1,
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// Bytes of the journal in use (header included).
    pub fn len_bytes(&self) -> u64 {
        self.append_block * BLOCK
    }
    /// Records of this generation.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Append one commit record (`ops`, then `data` as its data blocks) and make it durable.
    /// Returns the journal block of the first data block. On an error the record must be
    /// treated as neither durable nor absent: the caller stops accepting commits.
    pub fn append<H: HostFs>(
        &mut self,
        media: &Media<H>,
        ops: &[Op],
        data: &[Arc<Block>],
    ) -> Result<u64> {
        let payload = encode_ops(ops);
        let header = RecordHeader {
            format: self.format,
            generation: self.generation,
            seq: self.next_seq,
            payload_len: u32::try_from(payload.len()).map_err(|_| Error::TooMany {
                what: "bytes of metadata in one commit",
                max: u32::MAX as u64,
            })?,
            data_blocks: u32::try_from(data.len()).map_err(|_| Error::TooMany {
                what: "blocks in one commit",
                max: u32::MAX as u64,
            })?,
            payload_crc: crc32c::crc32c(&payload),
        };
        let mut buf = encode_record_head(&header, &payload);
        buf.reserve(data.len() * BLOCK_USIZE);
        for d in data {
            buf.extend_from_slice(&d[..]);
        }
        let at = self.append_block * BLOCK;
        media
            .fs
            .write_all_at(&media.journal, at, &buf)
            .map_err(host_err)?;
        // persist: the record (header, payload, data blocks) is durable: this is the commit
        // point. A crash before it leaves a record whose header, payload or data checksum
        // fails (or an older generation's bytes): recovery stops there and the commit is
        // absent, as nothing acknowledged it.
        media.fs.sync_data(&media.journal).map_err(host_err)?;
        let data_start = self.append_block + header.header_blocks();
        self.append_block += header.total_blocks();
        self.next_seq += 1;
        self.records += 1;
        Ok(data_start)
    }

    /// Reclaim the journal after a checkpoint made `generation` the snapshot's: every
    /// record of earlier generations is now ignored, and truncating the file drops its
    /// references to the blocks the home files now share.
    pub fn reset<H: HostFs>(&mut self, media: &Media<H>, generation: u64) -> Result<()> {
        assert!(generation > self.generation, "generations only grow");
        // The snapshot of `generation` is durable: from here records must carry it, even if
        // the truncate below fails (stale records of older generations are ignored anyway).
        self.generation = generation;
        self.next_seq = 1;
        self.append_block = 1;
        self.records = 0;
        media.fs.set_len(&media.journal, BLOCK).map_err(host_err)
    }
}

/// Every valid record of `generation`, in order, and the block after the last one. The scan
/// stops at the first block that is not the next record of this generation or whose payload
/// or data blocks fail their checksums (a torn, never acknowledged commit). A record whose
/// checksums hold but whose operations do not decode, or that is of another format than
/// the store's, is corruption: an error.
pub fn scan<H: HostFs>(
    media: &Media<H>,
    generation: u64,
    format: Format,
) -> Result<(Vec<ScannedRecord>, u64)> {
    let mut out = Vec::new();
    let mut block = 1u64;
    let mut seq = 1u64;
    loop {
        let Some(rec) = read_record(media, block, generation, seq)? else {
            check_no_later_record(media, block, generation, seq)?;
            return Ok((out, block));
        };
        if rec.header.format != format || !rec.ops.iter().all(|op| op.in_format(format)) {
            return Err(corrupt(
                &format!(
                    "record {seq} is of format {}, the store of format {}",
                    rec.header.format.number(),
                    format.number()
                ),
                block,
            ));
        }
        block = block
            .checked_add(rec.header.total_blocks())
            .ok_or_else(|| corrupt("record length", block))?;
        seq += 1;
        out.push(rec);
    }
}

/// The scan stopped at `block` (record `seq` missing or failing a checksum). A torn commit is
/// the last record ever written (its sync never returned, so nothing was appended after it);
/// a later valid record of the same generation means the journal was edited or damaged
/// behind the engine's back, and opening would silently drop committed records: an error.
fn check_no_later_record<H: HostFs>(
    media: &Media<H>,
    block: u64,
    generation: u64,
    seq: u64,
) -> Result<()> {
    let len = media.fs.file_stat(&media.journal).map_err(host_err)?.len;
    for b in block + 1..len.div_ceil(BLOCK) {
        let head = media.read_journal_block(b)?;
        if let Some(h) = decode_record_header(&head[..]) {
            if h.generation == generation && h.seq > seq {
                return Err(corrupt(
                    &format!(
                        "record {seq} fails its checksums but record {} follows at block {b} \
                         (journal edited or damaged)",
                        h.seq
                    ),
                    block,
                ));
            }
        }
    }
    Ok(())
}

fn corrupt(what: &str, block: u64) -> Error {
    Error::Corrupt {
        what: format!("remap journal: {what}"),
        offset: block * BLOCK,
    }
}

fn read_record<H: HostFs>(
    media: &Media<H>,
    block: u64,
    generation: u64,
    seq: u64,
) -> Result<Option<ScannedRecord>> {
    let first = media.read_journal_block(block)?;
    let Some(header) = decode_record_header(&first[..]) else {
        return Ok(None);
    };
    if header.generation != generation || header.seq != seq {
        return Ok(None);
    }
    let mut head = vec![0u8; (header.header_blocks() * BLOCK) as usize];
    let got = media
        .fs
        .read_full_at(&media.journal, block * BLOCK, &mut head)
        .map_err(host_err)?;
    let payload = head
        .get(crate::format::HEADER_LEN..crate::format::HEADER_LEN + header.payload_len as usize)
        .filter(|_| got == head.len());
    let Some(payload) = payload else {
        return Ok(None);
    };
    if crc32c::crc32c(payload) != header.payload_crc {
        return Ok(None);
    }
    let ops = decode_ops(payload, block * BLOCK + crate::format::HEADER_LEN as u64)?;
    let data_start = block + header.header_blocks();
    if !data_intact(media, &ops, data_start, header.data_blocks)? {
        return Ok(None);
    }
    Ok(Some(ScannedRecord {
        header,
        data_start,
        ops,
    }))
}

/// Whether every data block the record's pairs name holds the checksum they carry.
fn data_intact<H: HostFs>(
    media: &Media<H>,
    ops: &[Op],
    data_start: u64,
    data_blocks: u32,
) -> Result<bool> {
    for op in ops {
        let Op::Data { pairs, .. } = op else { continue };
        for p in pairs {
            if p.data_index == HOLE_INDEX {
                continue; // a hole pair (format 2; checked by `scan`) carries no data
            }
            if p.data_index >= data_blocks {
                return Err(corrupt(
                    "pair names a data block past its record",
                    data_start,
                ));
            }
            let b = media.read_journal_block(data_start + u64::from(p.data_index))?;
            if crc32c::crc32c(&b[..]) != p.crc {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
