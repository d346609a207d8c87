//! Extended attributes by path: getxattr(2), setxattr(2), listxattr(2), removexattr(2) and
//! their `l` forms (the last symbolic link not followed), with the size-probe protocol of
//! the C calls.

use store::path::{resolve_with, LastLink};
use store::XattrSet;

use crate::{PResult, Pool};

fn err(e: store::Error) -> i32 {
    e.errno()
}

fn ino(pool: &Pool, path: &[u8], last: LastLink) -> PResult<u64> {
    resolve_with(&*pool.store, path, last)
        .map(|m| m.ino)
        .map_err(err)
}

/// Copy `value` into a caller's buffer of `room` bytes: `room` 0 asks for the length; less
/// room than the value is ERANGE. Returns the length.
pub fn sized(value: &[u8], out: Option<&mut [u8]>) -> PResult<usize> {
    match out {
        None => Ok(value.len()),
        Some(buf) if buf.len() < value.len() => Err(libc::ERANGE),
        Some(buf) => {
            buf[..value.len()].copy_from_slice(value);
            Ok(value.len())
        }
    }
}

/// The value of attribute `name` of `path`.
pub fn getxattr(pool: &Pool, path: &[u8], name: &[u8], last: LastLink) -> PResult<Vec<u8>> {
    let ino = ino(pool, path, last)?;
    pool.store.getxattr(ino, name).map_err(err)
}

/// setxattr(2) `flags` as the store's mode: 0, XATTR_CREATE, XATTR_REPLACE (EINVAL else).
pub fn set_mode(flags: i32) -> PResult<XattrSet> {
    match flags {
        0 => Ok(XattrSet::Either),
        libc::XATTR_CREATE => Ok(XattrSet::Create),
        libc::XATTR_REPLACE => Ok(XattrSet::Replace),
        _ => Err(libc::EINVAL),
    }
}

/// Set attribute `name` of `path`.
pub fn setxattr(
    pool: &Pool,
    path: &[u8],
    name: &[u8],
    value: &[u8],
    flags: i32,
    last: LastLink,
) -> PResult<()> {
    let how = set_mode(flags)?;
    let ino = ino(pool, path, last)?;
    pool.store
        .setxattr(ino, name, value, how, None)
        .map_err(err)
}

/// The attribute names of `path`, each followed by a NUL, as listxattr(2) lists them.
pub fn listxattr(pool: &Pool, path: &[u8], last: LastLink) -> PResult<Vec<u8>> {
    let ino = ino(pool, path, last)?;
    let names = pool.store.listxattr(ino).map_err(err)?;
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(&n);
        out.push(0);
    }
    Ok(out)
}

/// Remove attribute `name` of `path`.
pub fn removexattr(pool: &Pool, path: &[u8], name: &[u8], last: LastLink) -> PResult<()> {
    let ino = ino(pool, path, last)?;
    pool.store.removexattr(ino, name, None).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_probe_protocol() {
        assert_eq!(sized(b"abc", None), Ok(3));
        let mut small = [0u8; 2];
        assert_eq!(sized(b"abc", Some(&mut small)), Err(libc::ERANGE));
        let mut big = [0u8; 8];
        assert_eq!(sized(b"abc", Some(&mut big)), Ok(3));
        assert_eq!(&big[..3], b"abc");
        assert_eq!(set_mode(3), Err(libc::EINVAL));
    }
}
