//! `ext4-undo`: an application-level undo journal, the protocol an application would
//! hand-write (SQLite's rollback journal is this protocol). One journal file per directory:
//!
//! ```text
//! offset 0     header, 64 bytes: magic u64 | state u64 (1 = valid) | seq u64 |
//!              records_len u64 | checksum u64 (FNV-1a over seq, records_len, records) | 0...
//! offset 4096  records: file u32 | 0 u32 | off u64 | len u64 | len old bytes, repeated
//! ```
//!
//! A transaction, step by step (the numbers are the crash points of [`Step`]):
//! 1. write the old bytes of both ranges as records; 2. fdatasync the journal;
//! 3. write the header with state = valid; 4. fdatasync the journal (the commit point of the
//!    undo log: from here on a crash is rolled back);
//! 5. pwrite the new data of file A; 6. of file B; 7. fdatasync A and B;
//! 8. write the header with state = invalid; 9. fdatasync the journal (the commit point of
//!    the transaction: from here on the new data stays).
//!
//! Recovery ([`recover`]): a header with magic, state valid and a matching checksum means a
//! transaction may be half applied: write every record's old bytes back, fdatasync the files,
//! invalidate the header, fdatasync the journal. Anything else: nothing to do.

use super::fileset::{DeviceCounter, FileSet};
use crate::error::{BenchError, Result};
use crate::ramdisk::Ext4Disk;
use crate::system::TwoFileUpdate;
use crate::workload::Write;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

const MAGIC: u64 = u64::from_le_bytes(*b"ATFSUNDO");
const HEADER_LEN: usize = 64;
const RECORDS_OFF: u64 = 4096;
const RECORD_HEADER_LEN: usize = 24;
const STATE_VALID: u64 = 1;
const STATE_INVALID: u64 = 0;
/// Largest journal recovery will read (a corrupt length must not allocate without bound).
pub const RECORDS_LEN_MAX: u64 = 1 << 30;

/// Number of crash points of one transaction (see the module docs).
pub const STEPS: u32 = 9;

fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn header(state: u64, seq: u64, records: &[u8]) -> [u8; HEADER_LEN] {
    let len = records.len() as u64;
    let sum = fnv1a(&[&seq.to_le_bytes(), &len.to_le_bytes(), records]);
    let mut h = [0u8; HEADER_LEN];
    for (i, v) in [MAGIC, state, seq, len, sum].into_iter().enumerate() {
        h[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    h
}

fn u64_at(buf: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[off..off + 8]);
    u64::from_le_bytes(b)
}

pub struct UndoJournal {
    disk: Rc<Ext4Disk>,
    set: Option<FileSet>,
    journal: Option<File>,
    seq: u64,
    records: Vec<u8>,
    counter: DeviceCounter,
    /// Tests: stop the next transaction after this many steps (a simulated crash).
    crash_after: Option<u32>,
}

pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join("undo.journal")
}

fn io(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let (what, path) = (what.to_string(), path.to_path_buf());
    move |e| BenchError::io(what, path, e)
}

impl UndoJournal {
    pub fn new(disk: Rc<Ext4Disk>) -> Self {
        UndoJournal {
            disk,
            set: None,
            journal: None,
            seq: 0,
            records: Vec::new(),
            counter: DeviceCounter::default(),
            crash_after: None,
        }
    }

    /// Directory holding the files and the journal (after setup).
    pub fn dir(&self) -> Option<&Path> {
        self.set.as_ref().map(|s| s.dir.as_path())
    }

    /// Make the next transaction stop after `steps` steps, as a crash would (tests).
    pub fn crash_next_tx_after(&mut self, steps: u32) {
        self.crash_after = Some(steps);
    }

    fn append_record(&mut self, w: &Write<'_>) -> Result<()> {
        let set = self.set.as_ref().ok_or_else(not_set_up)?;
        let start = self.records.len();
        self.records.extend_from_slice(&w.file.to_le_bytes());
        self.records.extend_from_slice(&0u32.to_le_bytes());
        self.records.extend_from_slice(&w.off.to_le_bytes());
        self.records
            .extend_from_slice(&(w.data.len() as u64).to_le_bytes());
        let old = start + RECORD_HEADER_LEN;
        self.records.resize(old + w.data.len(), 0);
        set.pread(w.file, w.off, &mut self.records[old..])
    }

    /// Runs the steps of one transaction; returns early (Ok) after `stop` steps.
    fn steps(&mut self, a: &Write<'_>, b: &Write<'_>, stop: u32) -> Result<()> {
        self.records.clear();
        self.append_record(a)?;
        self.append_record(b)?;
        self.seq += 1;
        let set = self.set.as_ref().ok_or_else(not_set_up)?;
        let journal = self.journal.as_ref().ok_or_else(not_set_up)?;
        let jpath = journal_path(&set.dir);
        let valid = header(STATE_VALID, self.seq, &self.records);
        let invalid = header(STATE_INVALID, self.seq, &self.records);
        let mut step = 0;
        macro_rules! step {
            ($e:expr) => {{
                if step >= stop {
                    return Ok(());
                }
                $e;
                step += 1;
            }};
        }
        step!(journal
            .write_all_at(&self.records, RECORDS_OFF)
            .map_err(io("write", &jpath))?);
        // persist: the old bytes are durable before the header can declare them valid.
        step!(journal.sync_data().map_err(io("fdatasync", &jpath))?);
        step!(journal
            .write_all_at(&valid, 0)
            .map_err(io("write", &jpath))?);
        // persist: the undo log is committed before any byte of the files changes.
        step!(journal.sync_data().map_err(io("fdatasync", &jpath))?);
        step!(set.pwrite(a.file, a.off, a.data)?);
        step!(set.pwrite(b.file, b.off, b.data)?);
        // persist: both files' new bytes are durable before the journal is dropped.
        step!({
            set.fdatasync(a.file)?;
            set.fdatasync(b.file)?
        });
        step!(journal
            .write_all_at(&invalid, 0)
            .map_err(io("write", &jpath))?);
        // persist: the transaction is committed: recovery will no longer roll it back.
        step!(journal.sync_data().map_err(io("fdatasync", &jpath))?);
        debug_assert_eq!(step, STEPS);
        Ok(())
    }
}

fn not_set_up() -> BenchError {
    BenchError::Invalid("ext4-undo used before setup".into())
}

/// What [`recover`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Recovery {
    /// No valid journal: the files are consistent as they are.
    Clean,
    /// A valid journal was rolled back: this many ranges restored.
    RolledBack(usize),
}

/// Roll back a half-applied transaction in `dir` (files named as in [`FileSet`], `file_size`
/// bytes each). Corrupt or torn journals are treated as invalid (they were never committed:
/// the header is only written after its records are durable).
pub fn recover(dir: &Path, file_size: u64) -> Result<Recovery> {
    let jpath = journal_path(dir);
    let journal = match OpenOptions::new().read(true).write(true).open(&jpath) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recovery::Clean),
        Err(e) => return Err(BenchError::io("open", &jpath, e)),
    };
    let mut head = [0u8; HEADER_LEN];
    match journal.read_exact_at(&mut head, 0) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(Recovery::Clean),
        Err(e) => return Err(BenchError::io("read", &jpath, e)),
    }
    let (magic, state, seq, len, sum) = (
        u64_at(&head, 0),
        u64_at(&head, 8),
        u64_at(&head, 16),
        u64_at(&head, 24),
        u64_at(&head, 32),
    );
    if magic != MAGIC || state != STATE_VALID || len > RECORDS_LEN_MAX {
        return Ok(Recovery::Clean);
    }
    let mut records = vec![0u8; len as usize];
    if journal.read_exact_at(&mut records, RECORDS_OFF).is_err()
        || fnv1a(&[&seq.to_le_bytes(), &len.to_le_bytes(), &records]) != sum
    {
        return Ok(Recovery::Clean);
    }
    let restored = apply_records(dir, file_size, &records)?;
    let invalid = header(STATE_INVALID, seq, &records);
    journal
        .write_all_at(&invalid, 0)
        .map_err(io("write", &jpath))?;
    // persist: the rollback is durable (files synced in apply_records) before the journal
    // stops asking for it.
    journal.sync_data().map_err(io("fdatasync", &jpath))?;
    Ok(Recovery::RolledBack(restored))
}

fn apply_records(dir: &Path, file_size: u64, records: &[u8]) -> Result<usize> {
    let mut pos = 0;
    let mut restored = 0;
    while pos < records.len() {
        let bad = || BenchError::Invalid(format!("undo journal record at {pos} malformed"));
        let head = records.get(pos..pos + RECORD_HEADER_LEN).ok_or_else(bad)?;
        let file = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let (off, len) = (u64_at(head, 8), u64_at(head, 16));
        if off.checked_add(len).is_none_or(|e| e > file_size) {
            return Err(bad());
        }
        let start = pos + RECORD_HEADER_LEN;
        let old = records.get(start..start + len as usize).ok_or_else(bad)?;
        let path = dir.join(super::fileset::file_name(file));
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io("open", &path))?;
        f.write_all_at(old, off).map_err(io("write", &path))?;
        f.sync_data().map_err(io("fdatasync", &path))?;
        restored += 1;
        pos = start + len as usize;
    }
    Ok(restored)
}

impl TwoFileUpdate for UndoJournal {
    fn name(&self) -> String {
        "ext4-undo".into()
    }
    fn medium(&self) -> String {
        self.disk.label()
    }
    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        let set = FileSet::create(self.disk.clone(), "undo", files, file_size)?;
        let jpath = journal_path(&set.dir);
        let journal = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&jpath)
            .map_err(io("create", &jpath))?;
        journal
            .write_all_at(&header(STATE_INVALID, 0, &[]), 0)
            .map_err(io("write", &jpath))?;
        journal.sync_all().map_err(io("fsync", &jpath))?;
        // persist: the journal's directory entry is durable.
        super::fileset::sync_dir(&set.dir)?;
        self.set = Some(set);
        self.journal = Some(journal);
        Ok(())
    }
    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let stop = self.crash_after.take().unwrap_or(u32::MAX);
        self.steps(&a, &b, stop)
    }
    fn bytes_written(&self) -> Option<u64> {
        self.counter.total()
    }
    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        self.set
            .as_ref()
            .ok_or_else(not_set_up)?
            .pread(file, off, buf)
    }
    fn run_start(&mut self) {
        self.counter.start(&self.disk);
    }
    fn run_end(&mut self) {
        self.counter.end(&self.disk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 8192;

    /// Crash after every step k of a transaction (and of a second one on top of it),
    /// recover, and check that both files are entirely old or entirely new — old up to the
    /// undo log's commit point is irrelevant: rollback must give old whenever the header is
    /// durable-valid, and new once it is invalidated.
    #[test]
    fn recovery_after_a_crash_at_every_step_gives_all_old_or_all_new() {
        let disk = Rc::new(Ext4Disk::create(64 << 20).expect("disk"));
        for k in 0..=STEPS {
            let mut sys = UndoJournal::new(disk.clone());
            sys.setup(3, SIZE).expect("setup");
            let first = (vec![1u8; 100], vec![2u8; 300]);
            let w = |file, off, data| Write { file, off, data };
            sys.tx(w(0, 10, &first.0), w(2, 5000, &first.1))
                .expect("tx 1");
            let second = (vec![7u8; 200], vec![9u8; 3000]);
            sys.crash_next_tx_after(k);
            sys.tx(w(0, 50, &second.0), w(2, 4000, &second.1))
                .expect("tx 2");
            let dir = sys.dir().expect("dir").to_path_buf();
            let outcome = recover(&dir, SIZE).expect("recover");

            let mut f0 = vec![0u8; SIZE as usize];
            let mut f2 = vec![0u8; SIZE as usize];
            sys.read(0, 0, &mut f0).expect("read");
            sys.read(2, 0, &mut f2).expect("read");
            let mut old0 = vec![0u8; SIZE as usize];
            old0[10..110].fill(1);
            let mut old2 = vec![0u8; SIZE as usize];
            old2[5000..5300].fill(2);
            let (mut new0, mut new2) = (old0.clone(), old2.clone());
            new0[50..250].fill(7);
            new2[4000..7000].fill(9);
            // After step 3 the header says valid (the page cache keeps what was written, so a
            // "crash" here loses nothing unsynced); until step 8 invalidates it, recovery
            // must roll back.
            let expect_new = k >= 8;
            if expect_new {
                assert!(
                    f0 == new0 && f2 == new2,
                    "crash after step {k}: expected new data"
                );
            } else {
                assert!(
                    f0 == old0 && f2 == old2,
                    "crash after step {k}: expected old data"
                );
            }
            let rolled = matches!(outcome, Recovery::RolledBack(2));
            assert_eq!(
                rolled,
                (3..8).contains(&k),
                "crash after step {k}: {outcome:?}"
            );
            assert_eq!(
                recover(&dir, SIZE).expect("second recovery"),
                Recovery::Clean
            );
        }
    }

    #[test]
    fn a_corrupt_journal_is_not_applied() {
        let disk = Rc::new(Ext4Disk::create(64 << 20).expect("disk"));
        let mut sys = UndoJournal::new(disk);
        sys.setup(2, SIZE).expect("setup");
        sys.crash_next_tx_after(6);
        let d = vec![5u8; 64];
        sys.tx(
            Write {
                file: 0,
                off: 0,
                data: &d,
            },
            Write {
                file: 1,
                off: 0,
                data: &d,
            },
        )
        .expect("tx");
        let dir = sys.dir().expect("dir").to_path_buf();
        let j = OpenOptions::new()
            .write(true)
            .open(journal_path(&dir))
            .expect("open");
        j.write_all_at(&[0xFF; 8], RECORDS_OFF + 30)
            .expect("corrupt");
        assert_eq!(recover(&dir, SIZE).expect("recover"), Recovery::Clean);
    }
}
