//! Store errors as Python exceptions.
//!
//! The classes live in the pure-Python module `atomfs._errors`, so that they can inherit from
//! both `atomfs.Error` (an `OSError`) and the built-in `OSError` subclass of their errno:
//! `except FileNotFoundError` catches a missing file, `except atomfs.Error` catches every
//! atomfs failure. Each exception carries the errno of [`store::Error::errno`] and the
//! message of the Rust error.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

/// The `atomfs._errors` class for an error.
fn class_name(error: &store::Error) -> &'static str {
    use store::Error::*;
    match error {
        NoSpace(_) | LogFull(_) => "NoSpaceError",
        FileInTransaction(_) | NoSuchTransaction(_) => "TransactionError",
        BadMagic(_) | UnsupportedVersion { .. } | Corrupt { .. } => "CorruptError",
        Busy(_) => "BusyError",
        _ => by_errno(error.errno()),
    }
}

fn by_errno(errno: i32) -> &'static str {
    match errno {
        libc::ENOENT => "NotFoundError",
        libc::EEXIST => "ExistsError",
        libc::ENOTDIR => "NotADirError",
        libc::EISDIR => "IsADirError",
        libc::ENOTEMPTY => "NotEmptyError",
        libc::EACCES | libc::EPERM => "PermissionDeniedError",
        libc::ENOSPC => "NoSpaceError",
        libc::EBUSY => "BusyError",
        libc::EUCLEAN => "CorruptError",
        _ => "Error",
    }
}

/// The Python exception for a store error.
pub fn to_py(py: Python<'_>, error: store::Error) -> PyErr {
    let errno = error.errno();
    let message = error.to_string();
    raise(py, class_name(&error), errno, message)
}

/// An exception of class `name` of `atomfs._errors` (plain `OSError` if that module cannot be
/// imported).
pub fn raise(py: Python<'_>, name: &str, errno: i32, message: String) -> PyErr {
    let made = py
        .import("atomfs._errors")
        .and_then(|m| m.getattr(name))
        .and_then(|class| class.call1((errno, message.clone())));
    match made {
        Ok(value) => PyErr::from_value(value),
        Err(_) => PyOSError::new_err((errno, message)),
    }
}

/// Extension trait: `.py(py)?` turns a store result into a Python one.
pub trait IntoPy<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for store::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
