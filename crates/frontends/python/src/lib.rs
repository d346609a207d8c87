//! `atomfs._native`: the Rust half of the Python package `atomfs`.
//!
//! The package's Python half (`python/atomfs`) gives the user-facing shapes — `io.RawIOBase`
//! files wrapped by mode like the built-in `open`, `with store.transaction(...)`, `os`-style
//! namespace calls, the exception hierarchy — and calls the three classes here:
//!
//! - [`NativeStore`]: one store opened through the engine registry (every engine reachable),
//!   namespace calls by path, transactions, `syncv`/`abortv`, `info`, `fsck`, `close`;
//! - [`NativeFile`]: one open file handle with its cursor;
//! - [`NativeTx`]: one running transaction.
//!
//! Every call that reaches the store runs with the GIL released (`Python::detach`): any of them
//! may fsync, commit, checkpoint or recover, and other Python threads run meanwhile. Errors
//! become the exception classes of `atomfs._errors` ([`errors`]). A store inherited by a
//! forked child refuses every call ([`fork`]).

#![deny(clippy::unwrap_used)]

mod errors;
mod file;
mod fork;
mod shared;
mod store;
mod tx;

use pyo3::prelude::*;

pub use file::NativeFile;
pub use store::NativeStore;
pub use tx::NativeTx;

/// The extension module `atomfs._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::install();
    m.add_class::<NativeStore>()?;
    m.add_class::<NativeFile>()?;
    m.add_class::<NativeTx>()?;
    m.add_function(wrap_pyfunction!(store::create, m)?)?;
    m.add_function(wrap_pyfunction!(store::open, m)?)?;
    m.add_function(wrap_pyfunction!(store::engine_list, m)?)?;
    Ok(())
}
