//! The suite can fail: a store with one planted bug (a wrapper over ModelStore) must make the
//! case that covers that behaviour fail. A check that cannot fail is worthless.

use conformance::{cases, Harness, ModelHarness, ModelStore};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use store::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bug {
    /// tx_abort commits instead.
    AbortCommits,
    /// Reads past the end of file return zeros instead of 0 bytes.
    ReadPastEofFills,
    /// rename refuses to replace an existing target.
    RenameNoReplace,
    /// Writes through a read-only handle are accepted.
    ReadOnlyWritable,
    /// fsck reports a problem.
    FsckComplains,
}

struct Buggy {
    inner: ModelStore,
    bug: Bug,
}

impl Store for Buggy {
    fn engine_name(&self) -> String {
        "buggy-model".into()
    }
    fn lookup(&self, p: Ino, n: &[u8]) -> Result<Metadata> {
        self.inner.lookup(p, n)
    }
    fn getattr(&self, i: Ino) -> Result<Metadata> {
        self.inner.getattr(i)
    }
    fn setattr(&self, i: Ino, a: &SetAttr, tx: Option<TxId>) -> Result<Metadata> {
        self.inner.setattr(i, a, tx)
    }
    fn create(&self, p: Ino, n: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.inner.create(p, n, perm, tx)
    }
    fn mkdir(&self, p: Ino, n: &[u8], perm: u32, tx: Option<TxId>) -> Result<Metadata> {
        self.inner.mkdir(p, n, perm, tx)
    }
    fn unlink(&self, p: Ino, n: &[u8], tx: Option<TxId>) -> Result<()> {
        self.inner.unlink(p, n, tx)
    }
    fn rmdir(&self, p: Ino, n: &[u8], tx: Option<TxId>) -> Result<()> {
        self.inner.rmdir(p, n, tx)
    }
    fn rename(&self, p: Ino, n: &[u8], np: Ino, nn: &[u8], tx: Option<TxId>) -> Result<()> {
        if self.bug == Bug::RenameNoReplace
            && (p, n) != (np, nn)
            && self.inner.lookup(np, nn).is_ok()
        {
            return Err(Error::Exists("target".into()));
        }
        self.inner.rename(p, n, np, nn, tx)
    }
    fn link(&self, i: Ino, np: Ino, nn: &[u8], tx: Option<TxId>) -> Result<Metadata> {
        self.inner.link(i, np, nn, tx)
    }
    fn read_dir(&self, i: Ino) -> Result<Vec<DirEntry>> {
        self.inner.read_dir(i)
    }
    fn open(&self, i: Ino, mut f: OpenFlags) -> Result<Fh> {
        if self.bug == Bug::ReadOnlyWritable {
            f.write = true;
        }
        self.inner.open(i, f)
    }
    fn release(&self, fh: Fh) -> Result<()> {
        self.inner.release(fh)
    }
    fn read(&self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        let n = self.inner.read(fh, off, buf)?;
        if self.bug == Bug::ReadPastEofFills && n == 0 {
            buf.fill(0);
            return Ok(buf.len());
        }
        Ok(n)
    }
    fn write(&self, fh: Fh, off: u64, d: &[u8]) -> Result<usize> {
        self.inner.write(fh, off, d)
    }
    fn set_len(&self, fh: Fh, len: u64) -> Result<()> {
        self.inner.set_len(fh, len)
    }
    fn fsync(&self, fh: Fh, ds: bool) -> Result<()> {
        self.inner.fsync(fh, ds)
    }
    fn fstat(&self, fh: Fh) -> Result<Metadata> {
        self.inner.fstat(fh)
    }
    fn set_atomic(&self, fh: Fh, a: bool) -> Result<()> {
        self.inner.set_atomic(fh, a)
    }
    fn syncv(&self, fhs: &[Fh]) -> Result<()> {
        self.inner.syncv(fhs)
    }
    fn abortv(&self, fhs: &[Fh]) -> Result<()> {
        self.inner.abortv(fhs)
    }
    fn tx_begin(&self, files: &[Fh]) -> Result<TxId> {
        self.inner.tx_begin(files)
    }
    fn tx_add(&self, tx: TxId, fh: Fh) -> Result<()> {
        self.inner.tx_add(tx, fh)
    }
    fn tx_commit(&self, tx: TxId) -> Result<()> {
        self.inner.tx_commit(tx)
    }
    fn tx_abort(&self, tx: TxId) -> Result<()> {
        if self.bug == Bug::AbortCommits {
            return self.inner.tx_commit(tx);
        }
        self.inner.tx_abort(tx)
    }
    fn statfs(&self) -> Result<StatFs> {
        self.inner.statfs()
    }
    fn stats(&self) -> Vec<(String, u64)> {
        self.inner.stats()
    }
    fn fsck(&self) -> Result<FsckReport> {
        let mut r = self.inner.fsck()?;
        if self.bug == Bug::FsckComplains {
            r.problem("planted", "test");
        }
        Ok(r)
    }
    fn unmount(&self) -> Result<()> {
        self.inner.unmount()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct BuggyHarness(Bug);

fn unwrap_buggy(s: Box<dyn Store>) -> ModelStore {
    match s.as_any().downcast_ref::<Buggy>() {
        Some(b) => b.inner.crash(),
        None => panic!("not buggy"),
    }
}

impl Harness for BuggyHarness {
    fn fresh(&self) -> Box<dyn Store> {
        Box::new(Buggy {
            inner: ModelStore::new(),
            bug: self.0,
        })
    }
    fn reopen_clean(&self, s: Box<dyn Store>) -> Box<dyn Store> {
        let _ = s.unmount();
        Box::new(Buggy {
            inner: unwrap_buggy(s),
            bug: self.0,
        })
    }
    fn reopen_unclean(&self, s: Box<dyn Store>) -> Box<dyn Store> {
        Box::new(Buggy {
            inner: unwrap_buggy(s),
            bug: self.0,
        })
    }
}

fn fails(bug: Bug, case: fn(&dyn Harness)) -> bool {
    catch_unwind(AssertUnwindSafe(|| case(&BuggyHarness(bug)))).is_err()
}

#[test]
fn planted_bugs_fail_their_cases() {
    // the unmodified wrapper passes (so failures below come from the planted bugs)
    let clean: fn(&dyn Harness) = cases::tx_abort_restores_everything;
    clean(&ModelHarness);
    assert!(fails(
        Bug::AbortCommits,
        cases::tx_abort_restores_everything
    ));
    assert!(fails(Bug::ReadPastEofFills, cases::read_past_eof));
    assert!(fails(Bug::RenameNoReplace, cases::rename_replaces));
    assert!(fails(
        Bug::ReadOnlyWritable,
        cases::read_only_handle_rejects_writes
    ));
    assert!(fails(Bug::FsckComplains, cases::read_write_seek));
}

#[test]
fn wrapper_passes_cases_its_bug_does_not_touch() {
    // The wrapper is faithful apart from its planted bug.
    cases::rename_replaces(&BuggyHarness(Bug::AbortCommits));
    cases::tx_abort_restores_everything(&BuggyHarness(Bug::RenameNoReplace));
    cases::read_past_eof(&BuggyHarness(Bug::ReadOnlyWritable));
}
