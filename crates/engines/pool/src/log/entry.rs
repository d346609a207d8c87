//! The 64-byte log entries of the FCFS-Log (seed Fig. 6), and their seal word.
//!
//! Every entry fills one aligned 64-byte cache line. Its last 8-byte word is the *seal*:
//!
//! ```text
//! byte 56..59  3 bytes of payload (undo data bytes 40..43; zero in other entries)
//! byte 59      valid flag 0xA5
//! byte 60..64  crc32c of bytes 0..60
//! ```
//!
//! Writing an entry: the whole line (body, seal last) is written with one non-temporal
//! 64-byte store (no read of the cold log line; durable at the writer's next fence). A crash
//! leaves the line at one of its intermediate contents, its words in any order; only the
//! complete line has a seal whose crc matches the body, so a torn entry is never taken for a
//! valid one (and bit rot is caught too). Freeing: atomic 8-byte store of 0 to the seal word,
//! flushed. A zero seal is a free slot; a non-zero seal with a bad crc or flag is torn.

use crate::media::layout::ENTRY_SIZE;

/// Valid flag byte inside the seal.
pub(crate) const VALID: u8 = 0xA5;
/// Offset of the seal word inside an entry.
pub(crate) const SEAL_OFFSET: u64 = 56;
/// Most old bytes one undo entry carries.
pub(crate) const UNDO_DATA_MAX: usize = 43;
/// Largest transaction id an undo entry can hold (48 bits).
pub(crate) const TXID_MAX: u64 = (1 << 48) - 1;
/// Commit sequences are below this (a decoded larger one is rot).
pub(crate) const COMMIT_SEQ_LIMIT: u64 = 1 << 62;
/// Commit times are below this (2^63 ns: the year 2262); a decoded larger one is rot.
pub(crate) const TIME_LIMIT: u64 = 1 << 63;
/// Largest region address an undo entry can hold (48 bits).
pub(crate) const ADDR_MAX: u64 = (1 << 48) - 1;

pub(crate) const TYPE_UNDO: u8 = 1;
pub(crate) const TYPE_COMMIT: u8 = 2;
pub(crate) const TYPE_MEMBER: u8 = 3;
pub(crate) const TYPE_DATA: u8 = 4;
pub(crate) const TYPE_LINES: u8 = 5;

// The layout above, as compile-time relationships: an entry is one cache line, its seal is
// its last word, an undo entry's data fills bytes 16..59 exactly, and the 48-bit fields hold
// every value their limits allow.
const _: () = assert!(ENTRY_SIZE == 64);
const _: () = assert!(SEAL_OFFSET + 8 == ENTRY_SIZE);
const _: () = assert!(16 + UNDO_DATA_MAX as u64 == SEAL_OFFSET + 3);
const _: () = assert!(TXID_MAX < 1 << 48 && ADDR_MAX < 1 << 48);
const _: () = assert!(TXID_MAX < COMMIT_SEQ_LIMIT && COMMIT_SEQ_LIMIT < TIME_LIMIT);

/// A metadata undo entry: old bytes of metadata a transaction changes in place.
///
/// ```text
/// 0 type=1  1 size u8  2 sequence u16  4 txid u48  10 addr u48  16..56 data[0..40]
/// 56..59 data[40..43]  59 valid  60 crc
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UndoEntry {
    pub(crate) txid: u64,
    pub(crate) addr: u64,
    pub(crate) seq: u16,
    pub(crate) size: u8,
    pub(crate) data: [u8; UNDO_DATA_MAX],
}

/// A commit entry: the commit point of transaction `txid`.
///
/// ```text
/// 0 type=2  8 txid u64  16 commit sequence u64  24 data entries u64  32 member txs u64
/// 40 commit time u64  48..56 zero  56 seal
/// ```
///
/// `time` (ns since the epoch; 0 = none) is the new mtime and ctime of every file whose data
/// entries of this transaction carry the `times` flag: the times of a pure overwrite are
/// redone from the log like its data, not undone (docs/format.md, "Times of overwrites").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommitEntry {
    pub(crate) txid: u64,
    pub(crate) commit_seq: u64,
    pub(crate) data_entries: u64,
    pub(crate) members: u64,
    pub(crate) time: u64,
}

/// A member entry: transaction `member` commits with the commit entry of `group` (syncv of
/// several O_ATOMIC files).
///
/// ```text
/// 0 type=3  8 group txid u64  16 member txid u64  24..56 zero  56 seal
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemberEntry {
    pub(crate) group: u64,
    pub(crate) member: u64,
}

/// A data redo entry: the header of one pending block (seed Fig. 6, `fcfs_data_le`).
///
/// ```text
/// 0 type=4  1 flags u8 (bit 0: times)  2..8 zero  8 txid u64  16 ino u64  24 lbn u64
/// 32 pointer address u64  40 pending pbn u64  48 cache-line bitmap u64  56 seal
/// ```
///
/// `times`: the file's mtime and ctime become the commit entry's time (see `CommitEntry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DataEntry {
    pub(crate) txid: u64,
    pub(crate) ino: u64,
    pub(crate) lbn: u64,
    pub(crate) ptr_addr: u64,
    pub(crate) pbn: u64,
    pub(crate) bitmap: u64,
    pub(crate) times: bool,
}

/// Flag bit of a data entry: the commit's time is the file's new mtime and ctime.
pub(crate) const DATA_FLAG_TIMES: u8 = 1;

/// A line undo entry of FG-WAL (seed §VI-C "fine-grained WAL"): the old contents of the
/// `bitmap` lines of block `target`, saved whole at the same offsets in block `undo` before
/// they were overwritten in place. `crc` is the crc32c of those saved lines in line order, so
/// a record whose lines did not all reach the media is told from a complete one. Lives in
/// the data log area (see modes/fg_wal.rs, docs/format.md).
///
/// ```text
/// 0 type=5  1..4 zero  4 sequence u32  8 txid u64  16 ino u64  24 target pbn u64
/// 32 undo pbn u64  40 line bitmap u64  48 crc32c of the saved lines u32  52..56 zero
/// 56 seal
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinesEntry {
    pub(crate) txid: u64,
    pub(crate) seq: u32,
    pub(crate) ino: u64,
    pub(crate) target: u64,
    pub(crate) undo: u64,
    pub(crate) bitmap: u64,
    pub(crate) crc: u32,
}

/// What a 64-byte log line holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    Free,
    /// Non-zero seal that does not match the body: torn write or rotten media.
    Torn,
    Undo(UndoEntry),
    Commit(CommitEntry),
    Member(MemberEntry),
    Data(DataEntry),
    Lines(LinesEntry),
}

fn put(buf: &mut [u8; 64], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn get(buf: &[u8; 64], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Compute the seal word of a line whose bytes 0..59 are final.
pub(crate) fn seal_of(line: &[u8; 64]) -> u64 {
    let mut sealed = *line;
    sealed[59] = VALID;
    let crc = pmem::crc::crc32c(&sealed[..60]);
    let mut tail = [0u8; 8];
    tail[..3].copy_from_slice(&sealed[56..59]);
    tail[3] = VALID;
    tail[4..].copy_from_slice(&crc.to_le_bytes());
    u64::from_le_bytes(tail)
}

impl Entry {
    /// Encode into a full line (body and seal). Callers store the body first, then the seal.
    pub(crate) fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        match self {
            Entry::Free | Entry::Torn => return b,
            Entry::Undo(u) => {
                b[0] = TYPE_UNDO;
                b[1] = u.size;
                b[2..4].copy_from_slice(&u.seq.to_le_bytes());
                b[4..10].copy_from_slice(&u.txid.to_le_bytes()[..6]);
                b[10..16].copy_from_slice(&u.addr.to_le_bytes()[..6]);
                b[16..56].copy_from_slice(&u.data[..40]);
                b[56..59].copy_from_slice(&u.data[40..43]);
            }
            Entry::Commit(c) => {
                b[0] = TYPE_COMMIT;
                put(&mut b, 8, c.txid);
                put(&mut b, 16, c.commit_seq);
                put(&mut b, 24, c.data_entries);
                put(&mut b, 32, c.members);
                put(&mut b, 40, c.time);
            }
            Entry::Member(m) => {
                b[0] = TYPE_MEMBER;
                put(&mut b, 8, m.group);
                put(&mut b, 16, m.member);
            }
            Entry::Data(d) => {
                b[0] = TYPE_DATA;
                if d.times {
                    b[1] = DATA_FLAG_TIMES;
                }
                put(&mut b, 8, d.txid);
                put(&mut b, 16, d.ino);
                put(&mut b, 24, d.lbn);
                put(&mut b, 32, d.ptr_addr);
                put(&mut b, 40, d.pbn);
                put(&mut b, 48, d.bitmap);
            }
            Entry::Lines(l) => {
                b[0] = TYPE_LINES;
                b[4..8].copy_from_slice(&l.seq.to_le_bytes());
                put(&mut b, 8, l.txid);
                put(&mut b, 16, l.ino);
                put(&mut b, 24, l.target);
                put(&mut b, 32, l.undo);
                put(&mut b, 40, l.bitmap);
                b[48..52].copy_from_slice(&l.crc.to_le_bytes());
            }
        }
        let seal = seal_of(&b);
        b[56..64].copy_from_slice(&seal.to_le_bytes());
        b
    }

    /// Encode into a full line, checked by decoding it again (pair assertion: what is about
    /// to be stored reads back as this entry). An entry whose fields do not fit the line
    /// (a txid or address past 48 bits, an undo entry of 0 or more than 43 bytes, a line
    /// entry naming no line) is an engine bug and stops here, before it reaches the media.
    pub(crate) fn encode_checked(&self) -> [u8; 64] {
        let line = self.encode();
        assert_eq!(
            Entry::decode(&line),
            *self,
            "log entry does not survive its own encoding"
        );
        line
    }

    /// Decode a line read from a log area. Never panics; unknown or torn content is `Torn`.
    pub(crate) fn decode(b: &[u8; 64]) -> Entry {
        let seal = get(b, 56);
        if seal == 0 {
            return Entry::Free;
        }
        if seal_of(b) != seal {
            return Entry::Torn;
        }
        match b[0] {
            TYPE_UNDO => {
                let size = b[1];
                if size == 0 || size as usize > UNDO_DATA_MAX {
                    return Entry::Torn;
                }
                let mut six = [0u8; 8];
                six[..6].copy_from_slice(&b[4..10]);
                let txid = u64::from_le_bytes(six);
                six[..6].copy_from_slice(&b[10..16]);
                let addr = u64::from_le_bytes(six);
                let mut data = [0u8; UNDO_DATA_MAX];
                data[..40].copy_from_slice(&b[16..56]);
                data[40..].copy_from_slice(&b[56..59]);
                Entry::Undo(UndoEntry {
                    txid,
                    addr,
                    seq: u16::from_le_bytes([b[2], b[3]]),
                    size,
                    data,
                })
            }
            // Transaction ids fit 48 bits and commit sequences stay below COMMIT_SEQ_LIMIT:
            // anything else is rot the crc missed (recovery continues the counters from the
            // largest value found, which must leave room to count on).
            _ if [8, 16].iter().any(|&at| get(b, at) > TXID_MAX) && b[0] == TYPE_MEMBER => {
                Entry::Torn
            }
            _ if get(b, 8) > TXID_MAX
                || (b[0] == TYPE_COMMIT
                    && (get(b, 16) >= COMMIT_SEQ_LIMIT
                        || get(b, 40) >= TIME_LIMIT
                        || b[48..56] != [0; 8])) =>
            {
                Entry::Torn
            }
            TYPE_COMMIT => Entry::Commit(CommitEntry {
                txid: get(b, 8),
                commit_seq: get(b, 16),
                data_entries: get(b, 24),
                members: get(b, 32),
                time: get(b, 40),
            }),
            TYPE_MEMBER => Entry::Member(MemberEntry {
                group: get(b, 8),
                member: get(b, 16),
            }),
            // Unknown flags or non-zero reserved bytes: rot the crc missed.
            TYPE_DATA if b[1] & !DATA_FLAG_TIMES != 0 || b[2..8] != [0; 6] => Entry::Torn,
            TYPE_DATA => Entry::Data(DataEntry {
                times: b[1] & DATA_FLAG_TIMES != 0,
                txid: get(b, 8),
                ino: get(b, 16),
                lbn: get(b, 24),
                ptr_addr: get(b, 32),
                pbn: get(b, 40),
                bitmap: get(b, 48),
            }),
            // A line undo entry names at least one line; its reserved bytes are zero.
            TYPE_LINES if get(b, 40) == 0 || b[1..4] != [0; 3] || b[52..56] != [0; 4] => {
                Entry::Torn
            }
            TYPE_LINES => Entry::Lines(LinesEntry {
                txid: get(b, 8),
                seq: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                ino: get(b, 16),
                target: get(b, 24),
                undo: get(b, 32),
                bitmap: get(b, 40),
                crc: u32::from_le_bytes([b[48], b[49], b[50], b[51]]),
            }),
            _ => Entry::Torn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_checksum_is_standard_crc32c() {
        // The on-media format says crc32c: the fast sealing path must give the same values
        // as the reference implementation, on every kind of line.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            let mut line = [0u8; 64];
            for byte in line.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *byte = state as u8;
            }
            assert_eq!(pmem::crc::crc32c(&line[..60]), crc32c::crc32c(&line[..60]));
        }
    }

    #[test]
    fn entries_round_trip_and_torn_lines_are_detected() {
        let mut data = [0u8; UNDO_DATA_MAX];
        for (i, d) in data.iter_mut().enumerate() {
            *d = i as u8 + 1;
        }
        let entries = [
            Entry::Undo(UndoEntry {
                txid: TXID_MAX,
                addr: 0x1234_5678_9abc,
                seq: 77,
                size: 43,
                data,
            }),
            Entry::Commit(CommitEntry {
                txid: 5,
                commit_seq: 9,
                data_entries: 3,
                members: 1,
                time: 1_700_000_000_000_000_000,
            }),
            Entry::Member(MemberEntry {
                group: 5,
                member: 4,
            }),
            Entry::Data(DataEntry {
                txid: 5,
                ino: 3,
                lbn: 8,
                ptr_addr: 4096,
                pbn: 17,
                bitmap: u64::MAX,
                times: true,
            }),
            Entry::Lines(LinesEntry {
                txid: 6,
                seq: 3,
                ino: 2,
                target: 9,
                undo: 11,
                bitmap: 0b1110,
                crc: 0xdead_beef,
            }),
        ];
        for e in entries {
            let line = e.encode();
            assert_eq!(Entry::decode(&line), e);
            // Every single-byte change of a sealed line is caught.
            for i in 0..64 {
                let mut bad = line;
                bad[i] ^= 0x40;
                assert!(
                    matches!(Entry::decode(&bad), Entry::Torn | Entry::Free),
                    "byte {i} of {e:?}"
                );
            }
            // The body without its seal is free; an old seal over a new body is torn.
            let mut unsealed = line;
            unsealed[56..].fill(0);
            assert_eq!(Entry::decode(&unsealed), Entry::Free);
        }
        let a = entries[1].encode();
        let mut mixed = entries[3].encode();
        mixed[56..].copy_from_slice(&a[56..]);
        assert_eq!(Entry::decode(&mixed), Entry::Torn);
    }

    #[test]
    #[should_panic(expected = "log entry does not survive its own encoding")]
    fn an_entry_that_does_not_fit_its_line_is_never_stored() {
        // A transaction id past 48 bits would be cut to its low bits by the encoding.
        let entry = Entry::Undo(UndoEntry {
            txid: TXID_MAX + 1,
            addr: 4096,
            seq: 0,
            size: 1,
            data: [0; UNDO_DATA_MAX],
        });
        entry.encode_checked();
    }

    #[test]
    fn checked_encoding_is_the_encoding() {
        let entry = Entry::Commit(CommitEntry {
            txid: 5,
            commit_seq: 9,
            data_entries: 3,
            members: 1,
            time: 7,
        });
        assert_eq!(entry.encode_checked(), entry.encode());
    }

    #[test]
    fn data_entry_flags_and_reserved_bytes() {
        let plain = DataEntry {
            txid: 5,
            ino: 3,
            lbn: 8,
            ptr_addr: 4096,
            pbn: 17,
            bitmap: 1,
            times: false,
        };
        let line = Entry::Data(plain).encode();
        assert_eq!(
            line[1..8],
            [0; 7],
            "no flag, reserved bytes zero (the old layout)"
        );
        assert_eq!(Entry::decode(&line), Entry::Data(plain));
        let with = Entry::Data(DataEntry {
            times: true,
            ..plain
        })
        .encode();
        assert_eq!(with[1], DATA_FLAG_TIMES);
        // A sealed line with an unknown flag or a non-zero reserved byte is rot.
        for (at, value) in [(1, 2u8), (1, 0x81), (2, 1), (7, 0xff)] {
            let mut bad = line;
            bad[at] = value;
            let seal = seal_of(&bad);
            bad[56..].copy_from_slice(&seal.to_le_bytes());
            assert_eq!(Entry::decode(&bad), Entry::Torn, "byte {at} = {value:#x}");
        }
        // A commit time past 2^63 ns or a non-zero reserved word is rot too.
        let commit = CommitEntry {
            txid: 5,
            commit_seq: 9,
            data_entries: 1,
            members: 0,
            time: TIME_LIMIT - 1,
        };
        assert_eq!(
            Entry::decode(&Entry::Commit(commit).encode()),
            Entry::Commit(commit)
        );
        for (at, value) in [(47, 0x80u8), (48, 1), (55, 0xff)] {
            let mut bad = Entry::Commit(commit).encode();
            bad[at] = value;
            let seal = seal_of(&bad);
            bad[56..].copy_from_slice(&seal.to_le_bytes());
            assert_eq!(
                Entry::decode(&bad),
                Entry::Torn,
                "commit byte {at} = {value:#x}"
            );
        }
    }
}
