//! The Rust API over the real pool engine on a mapped pool file: persistence across reopen,
//! transactions, the pool-file lock.

mod common;

use atomfs::{Config, Error, Fs};
use test_support::scratch;

#[test]
fn committed_data_survives_reopen_and_aborted_data_does_not() -> atomfs::Result<()> {
    let dir = scratch("api-reopen");
    let path = dir.join("reopen.pool");
    {
        let fs = Fs::create(&path, Config::pool(32 << 20))?;
        fs.write("/a", b"a0")?;
        fs.write("/b", b"b0")?;
        let (a, b) = (
            fs.options().write(true).open("/a")?,
            fs.options().write(true).open("/b")?,
        );
        let tx = fs.begin(&[&a, &b])?;
        a.write_at(b"A1", 0)?;
        b.write_at(b"B1", 0)?;
        tx.commit()?;
        let tx = fs.begin(&[&a, &b])?;
        a.write_at(b"A2", 0)?;
        b.write_at(b"B2", 0)?;
        tx.abort()?;
        let tx = fs.begin(&[&a])?;
        a.write_at(b"A3", 0)?;
        drop(tx); // aborted
        assert!(
            matches!(Fs::open(&path, Config::default()), Err(Error::Busy(_))),
            "one process at a time"
        );
    } // unmounted here: the last user of the pool went away
    let fs = Fs::open(&path, Config::default())?;
    assert_eq!(
        (fs.read("/a")?, fs.read("/b")?),
        (b"A1".to_vec(), b"B1".to_vec())
    );
    assert!(fs.fsck()?.is_clean());
    assert!(matches!(
        Fs::create(&path, Config::default()),
        Err(Error::Exists(_))
    ));
    drop(fs);
    Ok(())
}

#[test]
fn creation_truncation_and_writes_in_one_transaction_on_a_pool() -> atomfs::Result<()> {
    let dir = scratch("api-open-in");
    let fs = Fs::create(dir.join("open-in.pool"), Config::pool(32 << 20))?;
    common::open_in_makes_creation_and_writes_one_unit(&fs, 100_000)
}
