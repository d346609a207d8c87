//! A connection to a SQLite database through the system libsqlite3 (csrc/sqlite_bench.c,
//! built by build.rs when `pkg-config sqlite3` finds it: `cfg(has_sqlite)`). Every
//! configuration of the `sqlite` suite, the atomfs VFS included, uses this one library, so
//! like is compared with like. Without libsqlite3 every call returns `Skipped`.

use crate::error::{BenchError, Result};
use std::ffi::CString;
use std::path::Path;

/// True when this binary was built with the SQLite driver.
pub fn available() -> bool {
    cfg!(has_sqlite)
}

const NOT_BUILT: &str = "libsqlite3 was not found when atomfs-bench was built (install \
                         libsqlite3-dev and pkg-config: scripts/install-deps.sh, then rebuild)";

#[cfg(has_sqlite)]
mod ffi {
    use std::os::raw::{c_char, c_int, c_void};

    #[repr(C)]
    pub struct BenchSqlite {
        _private: [u8; 0],
    }

    extern "C" {
        pub fn bench_sqlite_libversion() -> *const c_char;
        pub fn bench_sqlite_load_extension(
            path: *const c_char,
            err: *mut c_char,
            errlen: usize,
        ) -> c_int;
        pub fn bench_sqlite_open(
            filename: *const c_char,
            uri: c_int,
            err: *mut c_char,
            errlen: usize,
        ) -> *mut BenchSqlite;
        pub fn bench_sqlite_query(
            h: *mut BenchSqlite,
            sql: *const c_char,
            out: *mut c_char,
            outlen: usize,
            err: *mut c_char,
            errlen: usize,
        ) -> c_int;
        pub fn bench_sqlite_prepare(h: *mut BenchSqlite, err: *mut c_char, errlen: usize) -> c_int;
        pub fn bench_sqlite_put(
            h: *mut BenchSqlite,
            insert: c_int,
            id: i64,
            data: *const c_void,
            len: c_int,
            err: *mut c_char,
            errlen: usize,
        ) -> c_int;
        pub fn bench_sqlite_value_length(h: *mut BenchSqlite, id: i64) -> i64;
        pub fn bench_sqlite_close(h: *mut BenchSqlite) -> c_int;
    }
}

/// Room for an error message from the C side.
const ERR_LEN: usize = 512;

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| BenchError::Invalid(format!("contains NUL: {s:?}")))
}

/// The text of a NUL-terminated buffer filled by the C side.
fn buf_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn sqlite_err(code: i32, buf: &[u8]) -> BenchError {
    BenchError::System {
        system: "sqlite".into(),
        message: format!("{} (SQLite code {code})", buf_text(buf)),
    }
}

/// The version of the SQLite library linked in, or `None` when not built.
pub fn library_version() -> Option<String> {
    #[cfg(has_sqlite)]
    {
        // SAFETY: sqlite3_libversion returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(ffi::bench_sqlite_libversion()) };
        Some(v.to_string_lossy().into_owned())
    }
    #[cfg(not(has_sqlite))]
    None
}

/// Load a SQLite extension (e.g. libatomfs_sqlite.so) into the library for good.
pub fn load_extension(path: &Path) -> Result<()> {
    let cpath = c_string(&path.display().to_string())?;
    #[cfg(has_sqlite)]
    {
        let mut err = [0u8; ERR_LEN];
        // SAFETY: cpath is a valid C string; err is writable for ERR_LEN bytes and the C side
        // writes at most that many, NUL included.
        let rc = unsafe {
            ffi::bench_sqlite_load_extension(cpath.as_ptr(), err.as_mut_ptr().cast(), ERR_LEN)
        };
        if rc != 0 {
            return Err(sqlite_err(rc, &err));
        }
        Ok(())
    }
    #[cfg(not(has_sqlite))]
    {
        let _ = cpath;
        Err(BenchError::Skipped(NOT_BUILT.into()))
    }
}

/// One open connection with its prepared statements on table `kv(id, v)`.
pub struct Db {
    #[cfg(has_sqlite)]
    handle: *mut ffi::BenchSqlite,
}

#[cfg(has_sqlite)]
impl Db {
    /// Open (creating) `filename`; a `file:` URI when `uri`.
    pub fn open(filename: &str, uri: bool) -> Result<Db> {
        let cname = c_string(filename)?;
        let mut err = [0u8; ERR_LEN];
        // SAFETY: cname is a valid C string, err writable for ERR_LEN bytes.
        let handle = unsafe {
            ffi::bench_sqlite_open(cname.as_ptr(), uri as i32, err.as_mut_ptr().cast(), ERR_LEN)
        };
        if handle.is_null() {
            return Err(sqlite_err(-1, &err));
        }
        Ok(Db { handle })
    }

    /// Run one statement to completion; the first column of its first row as text ("" if
    /// it returns no row).
    pub fn query(&mut self, sql: &str) -> Result<String> {
        let csql = c_string(sql)?;
        let mut out = [0u8; 256];
        let mut err = [0u8; ERR_LEN];
        // SAFETY: the handle is live (owned by self); csql is a valid C string; out and err
        // are writable for the lengths passed.
        let rc = unsafe {
            ffi::bench_sqlite_query(
                self.handle,
                csql.as_ptr(),
                out.as_mut_ptr().cast(),
                out.len(),
                err.as_mut_ptr().cast(),
                ERR_LEN,
            )
        };
        if rc != 0 {
            return Err(sqlite_err(rc, &err));
        }
        Ok(buf_text(&out))
    }

    /// Prepare the insert, update and length statements (the table must exist).
    pub fn prepare(&mut self) -> Result<()> {
        let mut err = [0u8; ERR_LEN];
        // SAFETY: the handle is live; err is writable for ERR_LEN bytes.
        let rc =
            unsafe { ffi::bench_sqlite_prepare(self.handle, err.as_mut_ptr().cast(), ERR_LEN) };
        if rc != 0 {
            return Err(sqlite_err(rc, &err));
        }
        Ok(())
    }

    /// Insert (or with `insert` false, update) row `id` with `value`: one committed
    /// transaction when no BEGIN is open.
    pub fn put(&mut self, insert: bool, id: i64, value: &[u8]) -> Result<()> {
        let len = i32::try_from(value.len())
            .map_err(|_| BenchError::Invalid(format!("value of {} bytes", value.len())))?;
        let mut err = [0u8; ERR_LEN];
        // SAFETY: the handle is live; value is valid for len bytes for the whole call (the C
        // side binds it SQLITE_STATIC and resets the statement before returning); err is
        // writable for ERR_LEN bytes.
        let rc = unsafe {
            ffi::bench_sqlite_put(
                self.handle,
                insert as i32,
                id,
                value.as_ptr().cast(),
                len,
                err.as_mut_ptr().cast(),
                ERR_LEN,
            )
        };
        if rc != 0 {
            return Err(sqlite_err(rc, &err));
        }
        Ok(())
    }

    /// `length(v)` of row `id`, `None` when there is no such row.
    pub fn value_length(&mut self, id: i64) -> Option<u64> {
        // SAFETY: the handle is live.
        let n = unsafe { ffi::bench_sqlite_value_length(self.handle, id) };
        u64::try_from(n).ok()
    }
}

#[cfg(not(has_sqlite))]
impl Db {
    pub fn open(_: &str, _: bool) -> Result<Db> {
        Err(BenchError::Skipped(NOT_BUILT.into()))
    }
    pub fn query(&mut self, _: &str) -> Result<String> {
        Err(BenchError::Skipped(NOT_BUILT.into()))
    }
    pub fn prepare(&mut self) -> Result<()> {
        Err(BenchError::Skipped(NOT_BUILT.into()))
    }
    pub fn put(&mut self, _: bool, _: i64, _: &[u8]) -> Result<()> {
        Err(BenchError::Skipped(NOT_BUILT.into()))
    }
    pub fn value_length(&mut self, _: i64) -> Option<u64> {
        None
    }
}

#[cfg(has_sqlite)]
impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: the handle came from bench_sqlite_open and is closed exactly once.
        unsafe { ffi::bench_sqlite_close(self.handle) };
    }
}

/// Why the suite cannot run here, when the driver was not built.
pub fn not_built() -> BenchError {
    BenchError::Skipped(NOT_BUILT.into())
}
