//! Cases the Rust API tests run over more than one store (the reference model, a pool).

use atomfs::Fs;

/// Files opened in a transaction (a truncation of an existing file, a creation with
/// `fresh_len` bytes written) are one unit with their writes: an abort undoes all of it, a
/// commit keeps it; fsck stays clean.
pub fn open_in_makes_creation_and_writes_one_unit(fs: &Fs, fresh_len: usize) -> atomfs::Result<()> {
    fs.write("/old", b"previous contents")?;
    let tx = fs.begin(&[])?;
    let f = fs
        .options()
        .write(true)
        .create(true)
        .truncate(true)
        .open_in(&tx, "/old")?;
    f.write_at(b"new", 0)?;
    let g = fs
        .options()
        .write(true)
        .create_new(true)
        .open_in(&tx, "/fresh")?;
    g.write_at(&vec![7u8; fresh_len], 0)?;
    drop((f, g));
    tx.abort()?;
    assert_eq!(fs.read("/old")?, b"previous contents", "truncation undone");
    assert!(!fs.exists("/fresh")?, "creation undone");
    assert!(fs.fsck()?.is_clean());
    let tx = fs.begin(&[])?;
    let f = fs
        .options()
        .write(true)
        .create(true)
        .truncate(true)
        .open_in(&tx, "/old")?;
    f.write_at(b"new", 0)?;
    tx.commit()?;
    assert_eq!(fs.read("/old")?, b"new");
    assert!(fs.fsck()?.is_clean());
    Ok(())
}
