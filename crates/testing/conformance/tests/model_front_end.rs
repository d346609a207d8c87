//! What the front ends' tests use of ModelStore beyond the conformance suite: symbolic links
//! (which not every engine has) under the transaction rules, the byte capacity, and the
//! `write` counters of `stats`.

use conformance::ModelStore;
use store::path::{read_file, write_file};
use store::{Error, Result, Store, TxId, ROOT_INO};

/// `r` failed with FileInTransaction naming `owner`.
fn busy<T: std::fmt::Debug>(r: Result<T>, owner: TxId, what: &str) {
    match r {
        Err(Error::FileInTransaction(id)) if id == owner.0 => {}
        other => panic!(
            "{what}: expected FileInTransaction({}), got {other:?}",
            owner.0
        ),
    }
}

#[test]
fn symlinks_follow_the_transaction_rules_as_files_do() -> Result<()> {
    let st = ModelStore::new();
    let t = st.tx_begin(&[])?;
    let d = st.mkdir(ROOT_INO, b"d", 0o755, Some(t))?.ino;
    busy(
        st.symlink(d, b"l", b"/x", None),
        t,
        "symlink in the new dir",
    );
    let l = st.symlink(ROOT_INO, b"l", b"/x", Some(t))?;
    assert_eq!(l.size, 2, "a symlink's size is its target's length");
    busy(
        st.unlink(ROOT_INO, b"l", None),
        t,
        "unlink of the new symlink",
    );
    busy(
        st.rename(ROOT_INO, b"l", ROOT_INO, b"m", None),
        t,
        "rename of the new symlink",
    );
    assert_eq!(st.readlink(l.ino)?, b"/x", "reading is allowed");
    st.symlink(d, b"l", b"/x", Some(t))?;
    st.tx_commit(t)?;
    st.symlink(d, b"l2", b"/y", None)?;
    st.unlink(ROOT_INO, b"l", None)?;
    assert_eq!(st.read_dir(d)?.len(), 2);
    assert!(st.fsck()?.is_clean());
    Ok(())
}

#[test]
fn an_aborted_symlink_is_gone_and_a_file_is_no_symlink() -> Result<()> {
    let st = ModelStore::new();
    write_file(&st, "/f", b"data", None)?;
    let f = st.lookup(ROOT_INO, b"f")?.ino;
    assert!(matches!(st.readlink(f), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        st.symlink(ROOT_INO, b"e", b"", None),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        st.symlink(ROOT_INO, b"f", b"/x", None),
        Err(Error::Exists(_))
    ));
    let t = st.tx_begin(&[])?;
    st.symlink(ROOT_INO, b"l", b"f", Some(t))?;
    st.tx_abort(t)?;
    assert!(matches!(st.lookup(ROOT_INO, b"l"), Err(Error::NotFound(_))));
    // A committed symlink survives a crash; an uncommitted one does not.
    st.symlink(ROOT_INO, b"kept", b"f", None)?;
    let t = st.tx_begin(&[])?;
    st.symlink(ROOT_INO, b"lost", b"f", Some(t))?;
    let after = st.crash();
    let kept = after.lookup(ROOT_INO, b"kept")?.ino;
    assert_eq!(after.readlink(kept)?, b"f");
    assert!(after.lookup(ROOT_INO, b"lost").is_err());
    assert!(after.fsck()?.is_clean());
    Ok(())
}

#[test]
fn no_space_is_reported_and_the_store_stays_clean() -> Result<()> {
    let st = ModelStore::with_capacity(Some(8 * 4096));
    let err = write_file(&st, "/big", &vec![1u8; 9 * 4096], None).expect_err("must not fit");
    assert!(matches!(err, Error::NoSpace(_)), "{err:?}");
    write_file(&st, "/fits", &vec![2u8; 8 * 4096], None)?;
    assert_eq!(read_file(&st, "/fits")?.len(), 8 * 4096);
    assert!(st.fsck()?.is_clean());
    Ok(())
}

#[test]
fn stats_count_write_calls_and_the_largest() -> Result<()> {
    let st = ModelStore::new();
    let stat = |name: &str| {
        st.stats()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    };
    assert_eq!(
        (stat("writes"), stat("write_max_bytes")),
        (Some(0), Some(0))
    );
    let fh = test_support::create_rw(&st, "/f", false);
    st.write(fh, 0, &[1u8; 300])?;
    st.write(fh, 300, &[2u8; 7])?;
    assert_eq!(
        (stat("writes"), stat("write_max_bytes")),
        (Some(2), Some(300))
    );
    st.release(fh)?;
    Ok(())
}
