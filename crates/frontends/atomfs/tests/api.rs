//! The Rust API over the in-memory reference store: files, cursors, transactions, O_ATOMIC,
//! namespace helpers and error mapping.

mod common;

use atomfs::{Error, Fs};
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;

fn fs() -> Fs {
    Fs::from_store(Arc::new(conformance::ModelStore::new()))
}

#[test]
fn read_write_seek_and_positional_io() -> atomfs::Result<()> {
    let fs = fs();
    let mut f = fs
        .options()
        .read(true)
        .write(true)
        .create(true)
        .open("/f")?;
    f.write_all(b"hello world")
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    assert_eq!(f.seek(SeekFrom::End(-5)).ok(), Some(6));
    let mut tail = String::new();
    f.read_to_string(&mut tail)
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    assert_eq!(tail, "world");
    f.write_at(b"W", 6)?;
    let mut buf = [0u8; 5];
    f.read_exact_at(&mut buf, 6)?;
    assert_eq!(&buf, b"World");
    assert!(f.read_exact_at(&mut buf, 9).is_err());
    assert!(f.seek(SeekFrom::Current(-100)).is_err());
    f.set_len(5)?;
    assert_eq!(f.metadata()?.size, 5);
    assert_eq!(fs.read("/f")?, b"hello");
    Ok(())
}

#[test]
fn append_moves_the_cursor_to_the_end() -> atomfs::Result<()> {
    let fs = fs();
    fs.write("/log", b"one\n")?;
    let mut f = fs.options().append(true).open("/log")?;
    f.write_all(b"two\n")
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    f.write_all(b"three\n")
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    assert_eq!(fs.read_to_string("/log")?, "one\ntwo\nthree\n");
    Ok(())
}

#[test]
fn transaction_commit_abort_and_drop() -> atomfs::Result<()> {
    let fs = fs();
    fs.write("/a", b"a0")?;
    fs.write("/b", b"b0")?;
    let a = fs.options().write(true).open("/a")?;
    let b = fs.options().write(true).open("/b")?;

    let tx = fs.begin(&[&a])?;
    tx.add(&b)?;
    a.write_at(b"A1", 0)?;
    b.write_at(b"B1", 0)?;
    tx.commit()?;
    assert_eq!(
        (fs.read("/a")?, fs.read("/b")?),
        (b"A1".to_vec(), b"B1".to_vec())
    );

    let tx = fs.begin(&[&a, &b])?;
    a.write_at(b"A2", 0)?;
    b.write_at(b"B2", 0)?;
    tx.create_dir("/d")?;
    tx.abort()?;
    assert_eq!(
        (fs.read("/a")?, fs.read("/b")?),
        (b"A1".to_vec(), b"B1".to_vec())
    );
    assert!(!fs.exists("/d")?);

    {
        let _tx = fs.begin(&[&a, &b])?;
        a.write_at(b"A3", 0)?;
    } // dropped: aborted
    assert_eq!(fs.read("/a")?, b"A1");

    let tx = fs.begin(&[&a])?;
    let err = fs
        .begin(&[&a])
        .expect_err("a file is bound to one transaction");
    assert!(matches!(err, Error::FileInTransaction(id) if id == tx.id().0));
    tx.commit()?;
    Ok(())
}

#[test]
fn atomic_files_commit_together_with_syncv() -> atomfs::Result<()> {
    let fs = fs();
    fs.write("/x", b"x0")?;
    fs.write("/y", b"y0")?;
    let x = fs
        .options()
        .read(true)
        .write(true)
        .atomic(true)
        .open("/x")?;
    let y = fs
        .options()
        .read(true)
        .write(true)
        .atomic(true)
        .open("/y")?;
    x.write_at(b"X1", 0)?;
    y.write_at(b"Y1", 0)?;
    assert_eq!(
        fs.read("/x")?,
        b"X1",
        "pending atomic writes are visible to reads (isolation is the application's), as in every engine"
    );
    fs.syncv(&[&x, &y])?;
    assert_eq!(
        (fs.read("/x")?, fs.read("/y")?),
        (b"X1".to_vec(), b"Y1".to_vec())
    );
    x.write_at(b"X2", 0)?;
    fs.abortv(&[&x])?;
    drop(x);
    assert_eq!(fs.read("/x")?, b"X1");
    y.write_at(b"Y3", 0)?;
    y.set_atomic(false)?;
    assert_eq!(fs.read("/y")?, b"Y3");
    Ok(())
}

#[test]
fn namespace_helpers() -> atomfs::Result<()> {
    let fs = fs();
    fs.create_dir_all("/a/b/c")?;
    fs.write("/a/b/c/f", b"1")?;
    fs.rename("/a/b/c/f", "/a/g")?;
    fs.hard_link("/a/g", "/a/h")?;
    assert_eq!(fs.metadata("/a/h")?.nlink, 2);
    let mut names: Vec<String> = fs
        .read_dir("/a")?
        .into_iter()
        .map(|e| String::from_utf8_lossy(&e.name).into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["b", "g", "h"]);
    assert!(matches!(fs.remove_dir("/a/b"), Err(Error::NotEmpty(_))));
    fs.remove_dir("/a/b/c")?;
    fs.remove_file("/a/g")?;
    assert_eq!(fs.read("/a/h")?, b"1");
    assert!(matches!(fs.open_file("/nope"), Err(Error::NotFound(_))));
    assert!(matches!(fs.create_dir("/a/h/x"), Err(Error::NotDir(_))));
    assert!(fs.fsck()?.is_clean());
    Ok(())
}

#[test]
fn io_errors_carry_the_errno() {
    let fs = fs();
    let mut f = match fs.create_file("/ro") {
        Ok(f) => f,
        Err(e) => panic!("create: {e}"),
    };
    let mut buf = [0u8; 4];
    let err = f.read(&mut buf).expect_err("write-only file");
    assert_eq!(err.raw_os_error(), None);
    assert_eq!(
        err.kind(),
        std::io::Error::from_raw_os_error(libc::EBADF).kind()
    );
    assert!(err.to_string().contains("not open for reading"), "{err}");
}

#[test]
fn open_in_a_transaction_makes_creation_and_writes_one_unit() -> atomfs::Result<()> {
    common::open_in_makes_creation_and_writes_one_unit(&fs(), 5)
}
