//! File creation flags, reads and writes, holes, truncation, large files.

use super::*;
use crate::assert_err;
use store::{FileKind, OpenFlags, ROOT_INO};

/// create, create_new, truncate, open of a missing file, open of a directory.
pub fn open_create_flags(h: &dyn Harness) {
    let store = h.fresh();
    let s = store.as_ref();
    assert_err!(
        OpenOptions::new().read(true).open(s, "/f", None),
        Error::NotFound(_)
    );
    let fh = ok(
        OpenOptions::new()
            .write(true)
            .create(true)
            .open(s, "/f", None),
        "create",
    );
    let meta = ok(s.fstat(fh), "fstat");
    assert_eq!((meta.size, meta.kind, meta.nlink), (0, FileKind::File, 1));
    put(s, fh, 0, b"hello world");
    ok(s.release(fh), "release");
    // create on an existing file keeps its contents
    let fh = ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .open(s, "/f", None),
        "reopen",
    );
    assert_eq!(contents(s, fh), b"hello world");
    ok(s.release(fh), "release");
    assert_err!(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(s, "/f", None),
        Error::Exists(_)
    );
    assert_err!(s.create(ROOT_INO, b"f", 0o644, None), Error::Exists(_));
    let fh = ok(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(s, "/g", None),
        "create_new",
    );
    ok(s.release(fh), "release");
    let fh = ok(
        OpenOptions::new()
            .read(true)
            .write(true)
            .truncate(true)
            .open(s, "/f", None),
        "truncate",
    );
    assert_eq!(ok(s.fstat(fh), "fstat").size, 0);
    assert_eq!(contents(s, fh), b"");
    ok(s.release(fh), "release");
    assert_eq!(file(s, "/f"), b"");
    ok(store::path::mkdir_all(s, "/d", 0o755), "mkdir");
    assert_err!(
        OpenOptions::new().read(true).open(s, "/d", None),
        Error::IsDir(_)
    );
    let d = ok(store::resolve(s, "/d"), "resolve");
    assert_err!(
        s.open(
            d.ino,
            OpenFlags {
                read: true,
                ..Default::default()
            }
        ),
        Error::IsDir(_)
    );
    let store = h.reopen_clean(store);
    assert_eq!(file(store.as_ref(), "/f"), b"");
    finish(store);
}

/// Append handles write at the end, whatever offset they are given.
pub fn open_append(h: &dyn Harness) {
    let s = h.fresh();
    let fh = open_rw(s.as_ref(), "/log");
    put(s.as_ref(), fh, 0, b"abc");
    ok(s.release(fh), "release");
    let fh = ok(
        OpenOptions::new()
            .read(true)
            .append(true)
            .open(s.as_ref(), "/log", None),
        "append",
    );
    put(s.as_ref(), fh, 0, b"def");
    put(s.as_ref(), fh, 1, b"gh");
    assert_eq!(contents(s.as_ref(), fh), b"abcdefgh");
    ok(s.release(fh), "release");
    let s = h.reopen_clean(s);
    assert_eq!(file(s.as_ref(), "/log"), b"abcdefgh");
    finish(s);
}

/// Writing or truncating through a read-only handle fails (EBADF) and changes nothing.
pub fn read_only_handle_rejects_writes(h: &dyn Harness) {
    let s = h.fresh();
    let s_ref = s.as_ref();
    write_path(s_ref, "/f", b"data");
    let fh = ok(
        OpenOptions::new().read(true).open(s_ref, "/f", None),
        "open ro",
    );
    let e = s_ref
        .write(fh, 0, b"XX")
        .expect_err("write through a read-only handle succeeded");
    assert_eq!(e.errno(), libc_ebadf(), "write on read-only handle: {e:?}");
    // Even a write of no bytes (write(2) answers EBADF before looking at the count).
    let e = s_ref
        .write(fh, 0, b"")
        .expect_err("empty write through a read-only handle succeeded");
    assert_eq!(
        e.errno(),
        libc_ebadf(),
        "empty write on read-only handle: {e:?}"
    );
    let e = s_ref
        .set_len(fh, 0)
        .expect_err("set_len through a read-only handle succeeded");
    assert_eq!(
        e.errno(),
        libc_ebadf(),
        "set_len on read-only handle: {e:?}"
    );
    assert_eq!(contents(s_ref, fh), b"data");
    ok(s_ref.release(fh), "release");
    finish(s);
}

fn libc_ebadf() -> i32 {
    Error::BadHandle(0).errno()
}

/// Writes at offsets, overwrites, reads of every alignment across block boundaries.
pub fn read_write_seek(h: &dyn Harness) {
    let s = h.fresh();
    let st = s.as_ref();
    let fh = open_rw(st, "/f");
    let mut expect = pattern(1, 3 * 4096 + 100);
    put(st, fh, 0, &expect);
    // overwrite pieces across block boundaries and inside one block
    for (off, len, tag) in [
        (4090usize, 12usize, 7u8),
        (5, 1, 8),
        (8190, 4100, 9),
        (12000, 388, 10),
    ] {
        let data = pattern(tag, len);
        put(st, fh, off as u64, &data);
        expect[off..off + len].copy_from_slice(&data);
    }
    assert_eq!(ok(st.fstat(fh), "fstat").size, expect.len() as u64);
    for (off, len) in [
        (0usize, 1usize),
        (4095, 2),
        (4096, 4096),
        (100, 9000),
        (12287, 10),
        (1, 12387),
    ] {
        let mut buf = vec![0xEE; len];
        let n = ok(st.read(fh, off as u64, &mut buf), "read");
        assert_eq!(n, len, "read of {len} at {off}");
        assert_eq!(
            buf,
            &expect[off..off + len],
            "bytes at {off}..{}",
            off + len
        );
    }
    ok(st.release(fh), "release");
    let s = h.reopen_clean(s);
    assert_eq!(file(s.as_ref(), "/f"), expect);
    finish(s);
}

/// Reads at or past the end return 0; a read across the end returns the bytes before it.
pub fn read_past_eof(h: &dyn Harness) {
    let s = h.fresh();
    let st = s.as_ref();
    let fh = open_rw(st, "/f");
    let mut buf = [0u8; 16];
    assert_eq!(ok(st.read(fh, 0, &mut buf), "read empty"), 0);
    put(st, fh, 0, b"0123456789");
    assert_eq!(ok(st.read(fh, 10, &mut buf), "read at eof"), 0);
    assert_eq!(ok(st.read(fh, 1 << 40, &mut buf), "read far past eof"), 0);
    let n = ok(st.read(fh, 6, &mut buf), "read across eof");
    assert_eq!(&buf[..n], b"6789");
    assert_eq!(
        ok(st.fstat(fh), "fstat").size,
        10,
        "reads must not change the size"
    );
    ok(st.release(fh), "release");
    finish(s);
}

/// Holes (from writes past the end and from set_len) read as zeros, also after a reopen.
pub fn sparse_holes_read_zeros(h: &dyn Harness) {
    let s = h.fresh();
    let st = s.as_ref();
    let fh = open_rw(st, "/sparse");
    let far = (1 << 20) + 17;
    put(st, fh, far, b"tail");
    put(st, fh, 3, b"head");
    let meta = ok(st.fstat(fh), "fstat");
    assert_eq!(meta.size, far + 4);
    let data = contents(st, fh);
    assert_eq!(&data[3..7], b"head");
    assert!(
        data[..3].iter().all(|&b| b == 0) && data[7..far as usize].iter().all(|&b| b == 0),
        "hole not zero"
    );
    assert_eq!(&data[far as usize..], b"tail");
    // extend with set_len: the new range is a hole
    ok(st.set_len(fh, far + 4 + 50_000), "set_len extend");
    let data = contents(st, fh);
    assert!(
        data[far as usize + 4..].iter().all(|&b| b == 0),
        "extension not zero"
    );
    ok(st.release(fh), "release");
    let s = h.reopen_clean(s);
    let data = file(s.as_ref(), "/sparse");
    assert_eq!(data.len() as u64, far + 4 + 50_000);
    assert_eq!(&data[far as usize..far as usize + 4], b"tail");
    assert_eq!(
        data.iter().filter(|&&b| b != 0).count(),
        8,
        "only the 8 written bytes are non-zero"
    );
    finish(s);
}

/// set_len shrinks (bytes past the new end are gone, even after re-extending) and extends.
pub fn set_len_shrink_extend(h: &dyn Harness) {
    let s = h.fresh();
    let st = s.as_ref();
    let fh = open_rw(st, "/f");
    put(st, fh, 0, &pattern(3, 10_000));
    ok(st.set_len(fh, 100), "shrink");
    assert_eq!(ok(st.fstat(fh), "fstat").size, 100);
    assert_eq!(contents(st, fh), pattern(3, 100));
    ok(st.set_len(fh, 9000), "extend");
    let data = contents(st, fh);
    assert_eq!(&data[..100], &pattern(3, 100)[..]);
    assert!(
        data[100..].iter().all(|&b| b == 0),
        "old bytes came back after shrink + extend"
    );
    ok(st.set_len(fh, 0), "to zero");
    assert_eq!(contents(st, fh), b"");
    put(st, fh, 4096, b"x");
    ok(st.set_len(fh, 4096), "cut the last byte");
    ok(st.release(fh), "release");
    let s = h.reopen_clean(s);
    assert_eq!(file(s.as_ref(), "/f"), vec![0u8; 4096]);
    finish(s);
}

fn large_file(h: &dyn Harness, size: u64) {
    let s = h.fresh();
    let st = s.as_ref();
    let fh = open_rw(st, "/big");
    let chunk = 1 << 20;
    let mut off = 0;
    while off < size {
        let tag = (off / chunk) as u8;
        put(st, fh, off, &pattern(tag, chunk as usize));
        off += chunk;
    }
    ok(st.release(fh), "release");
    let s = h.reopen_clean(s);
    let st = s.as_ref();
    let fh = ok(OpenOptions::new().read(true).open(st, "/big", None), "open");
    assert_eq!(ok(st.fstat(fh), "fstat").size, size);
    let mut buf = vec![0u8; chunk as usize];
    let mut off = 0;
    while off < size {
        assert_eq!(ok(st.read(fh, off, &mut buf), "read"), chunk as usize);
        assert!(
            buf == pattern((off / chunk) as u8, chunk as usize),
            "chunk at {off} differs"
        );
        off += chunk;
    }
    ok(st.release(fh), "release");
    finish(s);
}

/// A 64 MiB file written in 1 MiB pieces reads back after a reopen.
pub fn large_file_64mib(h: &dyn Harness) {
    large_file(h, 64 << 20);
}

/// A 1 GiB file (ignored by default: needs a store of more than 1 GiB and minutes in a debug
/// build). Run: `cargo test -p <crate> --release -- --ignored large_file_1gib`.
pub fn large_file_1gib(h: &dyn Harness) {
    large_file(h, 1 << 30);
}
