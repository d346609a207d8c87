//! `libatomfs_sqlite.so`: the SQLite loadable extension registering the VFS `atomfs`
//! (docs/sqlite.md). The VFS is C (`atomfs_sqlite.c`, compiled by build.rs over the C API
//! libatomfs.so); this file exports its entry points, since a Rust cdylib exports only the
//! symbols Rust defines.

use libc::{c_char, c_int, c_void};

/// `SQLITE_ERROR`: what the entry points of a stub build return.
#[cfg(atomfs_sqlite_stub)]
const SQLITE_ERROR: c_int = 1;

#[cfg(not(atomfs_sqlite_stub))]
extern "C" {
    /// `sqlite3_atomfssqlite_init` of atomfs_sqlite.c, renamed by build.rs.
    fn atomfs_sqlite_vfs_init(db: *mut c_void, err: *mut *mut c_char, api: *const c_void) -> c_int;
}

/// Register the VFS: the entry point of the SQLite extension API.
///
/// # Safety
/// Called by SQLite's extension loader with a connection, an error-message slot and the API
/// routines, as `sqlite3_load_extension` documents.
unsafe fn init(db: *mut c_void, err: *mut *mut c_char, api: *const c_void) -> c_int {
    #[cfg(not(atomfs_sqlite_stub))]
    {
        // SAFETY: forwarding the loader's arguments unchanged to the C entry point, whose
        // prototype is the one declared above.
        unsafe { atomfs_sqlite_vfs_init(db, err, api) }
    }
    #[cfg(atomfs_sqlite_stub)]
    {
        let _ = (db, err, api);
        SQLITE_ERROR
    }
}

/// The entry point SQLite derives from the file name `libatomfs_sqlite.so`.
///
/// # Safety
/// As [`init`].
#[no_mangle]
pub unsafe extern "C" fn sqlite3_atomfssqlite_init(
    db: *mut c_void,
    err: *mut *mut c_char,
    api: *const c_void,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { init(db, err, api) }
}

/// The same entry point under a second name, for `.load libatomfs_sqlite sqlite3_atomfs_init`.
///
/// # Safety
/// As [`init`].
#[no_mangle]
pub unsafe extern "C" fn sqlite3_atomfs_init(
    db: *mut c_void,
    err: *mut *mut c_char,
    api: *const c_void,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { init(db, err, api) }
}
