//! The on-media record of an inode's extended attributes (formats 3 and 4): a chain of attribute
//! blocks holding one stream of records. Pure encoding and decoding; `namespace/xattr.rs`
//! stores and reads the blocks.
//!
//! ```text
//! attribute block (4096 bytes, little-endian)
//!  0 magic u32 "AFXA"     4 version u16 (1)    6 zero u16
//!  8 next pbn u64 (0 = last block of the chain)
//! 16 payload length u32 (1..=4064)
//! 20 crc32c u32 of the whole block with these 4 bytes zero
//! 24 records u32 (first block: records in the chain; other blocks: 0)   28 zero u32
//! 32 payload: the next part of the record stream; bytes past it zero
//!
//! record stream: per attribute, in name order
//!   name length u8 (1..=255)   value length u32 (<= 65536)   name   value
//! ```
//! The whole stream is at most `XATTR_STREAM_MAX` bytes (the per-inode limit: ENOSPC past
//! it), so a chain has at most `XATTR_CHAIN_MAX` blocks. An inode with no attribute has no
//! chain (pointer 0).

use crate::media::layout::BLOCK_SIZE;
use store::xattr::{check_xattr_name, XATTR_SIZE_MAX};
use store::{Error, Result};

/// "AFXA" as a little-endian u32.
pub(crate) const XATTR_MAGIC: u32 = u32::from_le_bytes(*b"AFXA");
/// Version of the attribute block layout.
pub(crate) const XATTR_VERSION: u16 = 1;
/// Bytes of header before the payload.
pub(crate) const XATTR_HEADER: usize = 32;
/// Payload bytes one block holds.
pub(crate) const XATTR_PAYLOAD_MAX: usize = BLOCK_SIZE as usize - XATTR_HEADER;
/// Largest record stream of one inode (names, values and 5 bytes per record): 64 KiB.
pub(crate) const XATTR_STREAM_MAX: usize = 65536;
/// Most blocks in one chain.
pub(crate) const XATTR_CHAIN_MAX: usize = XATTR_STREAM_MAX.div_ceil(XATTR_PAYLOAD_MAX);
const RECORD_HEAD: usize = 5;
const CRC_AT: usize = 20;

const _: () = assert!(XATTR_CHAIN_MAX == 17);
const _: () = assert!(XATTR_HEADER + XATTR_PAYLOAD_MAX == BLOCK_SIZE as usize);

/// One attribute: name and value.
pub(crate) type Attr = (Vec<u8>, Vec<u8>);

/// Bytes the record stream of `attrs` takes.
pub(crate) fn stream_len(attrs: &[Attr]) -> usize {
    attrs
        .iter()
        .map(|(n, v)| RECORD_HEAD + n.len() + v.len())
        .sum()
}

/// Blocks a chain holding `attrs` needs (0 for none).
pub(crate) fn chain_blocks(attrs: &[Attr]) -> usize {
    stream_len(attrs).div_ceil(XATTR_PAYLOAD_MAX)
}

/// The blocks of a chain holding `attrs` (sorted by name, names checked, the stream within
/// `XATTR_STREAM_MAX`), block i to be stored at `pbns[i]` (`pbns.len() == chain_blocks`).
pub(crate) fn encode_chain(attrs: &[Attr], pbns: &[u64]) -> Vec<Vec<u8>> {
    assert!(stream_len(attrs) <= XATTR_STREAM_MAX, "a checked stream");
    assert_eq!(
        pbns.len(),
        chain_blocks(attrs),
        "one block number per block"
    );
    let mut stream = Vec::with_capacity(stream_len(attrs));
    for (name, value) in attrs {
        assert!(!name.is_empty() && name.len() <= 255 && value.len() <= XATTR_SIZE_MAX);
        stream.push(name.len() as u8);
        stream.extend_from_slice(&(value.len() as u32).to_le_bytes());
        stream.extend_from_slice(name);
        stream.extend_from_slice(value);
    }
    let mut blocks = Vec::with_capacity(pbns.len());
    for (i, part) in stream.chunks(XATTR_PAYLOAD_MAX).enumerate() {
        let mut b = vec![0u8; BLOCK_SIZE as usize];
        b[0..4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&XATTR_VERSION.to_le_bytes());
        let next = pbns.get(i + 1).copied().unwrap_or(0);
        b[8..16].copy_from_slice(&next.to_le_bytes());
        b[16..20].copy_from_slice(&(part.len() as u32).to_le_bytes());
        if i == 0 {
            b[24..28].copy_from_slice(&(attrs.len() as u32).to_le_bytes());
        }
        b[XATTR_HEADER..XATTR_HEADER + part.len()].copy_from_slice(part);
        let crc = crc32c::crc32c(&b);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        blocks.push(b);
    }
    blocks
}

/// One attribute block, checked: (next pbn, records field, payload). `at` names the block
/// in errors (its region offset).
pub(crate) fn decode_block(b: &[u8], at: u64) -> Result<(u64, u32, &[u8])> {
    let bad = |what: &str| Error::corrupt(format!("attribute block: {what}"), at);
    if b.len() != BLOCK_SIZE as usize {
        return Err(bad("short block"));
    }
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    if u32_at(0) != XATTR_MAGIC {
        return Err(bad("bad magic"));
    }
    if u16::from_le_bytes([b[4], b[5]]) != XATTR_VERSION || b[6] != 0 || b[7] != 0 {
        return Err(bad("unknown version"));
    }
    let mut copy = b.to_vec();
    copy[CRC_AT..CRC_AT + 4].fill(0);
    if crc32c::crc32c(&copy) != u32_at(CRC_AT) {
        return Err(bad("checksum mismatch"));
    }
    let len = u32_at(16) as usize;
    if len == 0 || len > XATTR_PAYLOAD_MAX || u32_at(28) != 0 {
        return Err(bad("bad payload length or reserved bytes"));
    }
    if b[XATTR_HEADER + len..].iter().any(|&x| x != 0) {
        return Err(bad("bytes past the payload"));
    }
    let mut next = [0u8; 8];
    next.copy_from_slice(&b[8..16]);
    Ok((
        u64::from_le_bytes(next),
        u32_at(24),
        &b[XATTR_HEADER..XATTR_HEADER + len],
    ))
}

/// Parse a whole record stream of `count` records (the first block's records field).
pub(crate) fn decode_stream(stream: &[u8], count: u32, at: u64) -> Result<Vec<Attr>> {
    let bad = |what: String| Error::corrupt(format!("attribute records: {what}"), at);
    let mut attrs: Vec<Attr> = Vec::new();
    let mut rest = stream;
    for i in 0..count {
        let Some((&name_len, tail)) = rest.split_first() else {
            return Err(bad(format!("stream ends before record {i}")));
        };
        let Some((len, tail)) = tail.split_first_chunk::<4>() else {
            return Err(bad(format!("record {i} is cut")));
        };
        let (name_len, value_len) = (name_len as usize, u32::from_le_bytes(*len) as usize);
        if value_len > XATTR_SIZE_MAX || tail.len() < name_len + value_len {
            return Err(bad(format!("record {i} is cut or too long")));
        }
        let (name, tail) = tail.split_at(name_len);
        let (value, tail) = tail.split_at(value_len);
        if check_xattr_name(name).is_err() {
            return Err(bad(format!("record {i} has an invalid name")));
        }
        if attrs
            .last()
            .is_some_and(|(prev, _)| prev.as_slice() >= name)
        {
            return Err(bad(format!("record {i} is out of name order")));
        }
        attrs.push((name.to_vec(), value.to_vec()));
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(bad(format!("{} bytes past the last record", rest.len())));
    }
    Ok(attrs)
}

/// Decode a whole chain starting at block `head`: `read(pbn)` gives a block and its region
/// offset (checking the number). Returns the chain's blocks and its attributes.
pub(crate) fn decode_chain(
    head: u64,
    mut read: impl FnMut(u64) -> Result<(Vec<u8>, u64)>,
) -> Result<(Vec<u64>, Vec<Attr>)> {
    let (mut pbns, mut stream, mut count, mut first_at) = (Vec::new(), Vec::new(), 0, 0);
    let mut next = head;
    while next != 0 {
        let (block, at) = read(next)?;
        if pbns.len() == XATTR_CHAIN_MAX || pbns.contains(&next) {
            return Err(Error::corrupt("attribute chain too long or looped", at));
        }
        let (after, records, payload) = decode_block(&block, at)?;
        if pbns.is_empty() {
            (count, first_at) = (records, at);
        } else if records != 0 {
            return Err(Error::corrupt(
                "attribute block: records field past the first",
                at,
            ));
        }
        pbns.push(next);
        stream.extend_from_slice(payload);
        next = after;
    }
    let attrs = decode_stream(&stream, count, first_at)?;
    Ok((pbns, attrs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn chain_of(blocks: &[Vec<u8>], pbns: &[u64]) -> impl FnMut(u64) -> Result<(Vec<u8>, u64)> {
        let map: BTreeMap<u64, Vec<u8>> =
            pbns.iter().copied().zip(blocks.iter().cloned()).collect();
        move |pbn| {
            map.get(&pbn)
                .cloned()
                .map(|b| (b, pbn * BLOCK_SIZE))
                .ok_or_else(|| Error::corrupt("no such block", pbn))
        }
    }

    fn attrs_strategy() -> impl Strategy<Value = Vec<Attr>> {
        let name = prop::collection::vec(b'a'..=b'z', 1..40)
            .prop_map(|n| [b"user.".as_slice(), &n].concat());
        let value = prop::collection::vec(any::<u8>(), 0..6000);
        prop::collection::btree_map(name, value, 0..12).prop_map(|m| {
            let mut v: Vec<Attr> = m.into_iter().collect();
            while stream_len(&v) > XATTR_STREAM_MAX {
                v.pop();
            }
            v
        })
    }

    proptest! {
        /// Every attribute set within the limit comes back as it was encoded.
        #[test]
        fn a_chain_round_trips(attrs in attrs_strategy()) {
            let pbns: Vec<u64> = (0..chain_blocks(&attrs) as u64).map(|i| 100 + 3 * i).collect();
            let blocks = encode_chain(&attrs, &pbns);
            let head = pbns.first().copied().unwrap_or(0);
            let (got_pbns, got) = decode_chain(head, chain_of(&blocks, &pbns)).expect("decode");
            prop_assert_eq!(got_pbns, pbns);
            prop_assert_eq!(got, attrs);
        }

        /// Any byte changed in any block of a chain is caught (an error, never a panic or
        /// other attributes).
        #[test]
        fn a_corrupt_chain_is_an_error(attrs in attrs_strategy(), which in any::<u64>(),
                                       at in 0usize..4096, xor in 1u8..=255) {
            prop_assume!(!attrs.is_empty());
            let pbns: Vec<u64> = (0..chain_blocks(&attrs) as u64).map(|i| 7 + i).collect();
            let mut blocks = encode_chain(&attrs, &pbns);
            let i = (which % blocks.len() as u64) as usize;
            blocks[i][at] ^= xor;
            prop_assert!(decode_chain(pbns[0], chain_of(&blocks, &pbns)).is_err());
        }

        /// Arbitrary bytes as a block or a stream: an error or a value, never a panic.
        #[test]
        fn arbitrary_input_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..4200),
                                        count in any::<u32>()) {
            let _ = decode_block(&bytes, 0);
            let _ = decode_stream(&bytes, count, 0);
        }
    }

    #[test]
    fn a_loop_in_the_chain_is_an_error() {
        let attrs: Vec<Attr> = vec![(b"user.a".to_vec(), vec![1; 5000])];
        let pbns = [10, 11];
        let mut blocks = encode_chain(&attrs, &pbns);
        // Block 11 points back at 10, re-sealed: a well-formed block in a looped chain.
        blocks[1][8..16].copy_from_slice(&10u64.to_le_bytes());
        blocks[1][CRC_AT..CRC_AT + 4].fill(0);
        let crc = crc32c::crc32c(&blocks[1]);
        blocks[1][CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        assert!(decode_chain(10, chain_of(&blocks, &pbns)).is_err());
    }

    #[test]
    fn the_limit_is_sixty_four_kib_of_records() {
        let fits: Vec<Attr> = vec![(b"user.m".to_vec(), vec![0; XATTR_STREAM_MAX - 11])];
        assert_eq!(stream_len(&fits), XATTR_STREAM_MAX);
        assert_eq!(chain_blocks(&fits), XATTR_CHAIN_MAX);
        let blocks = encode_chain(&fits, &(1..=17).collect::<Vec<u64>>());
        assert_eq!(blocks.len(), 17);
    }
}
