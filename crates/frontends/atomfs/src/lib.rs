//! `atomfs` — failure-atomic, durable updates to your files, one file or many.
//!
//! A [`Fs`] is a file system held by one atomfs engine (a [`Store`]). Its [`File`]s read and
//! write like `std::fs::File`; every call outside a transaction is durable and atomic when it
//! returns. [`Fs::begin`] binds several open files to one transaction ([`Tx`]): everything
//! written through them becomes durable at once at [`Tx::commit`], or never
//! ([`Tx::abort`], drop, or a crash before the commit).
//!
//! ```
//! # use std::sync::Arc;
//! # use std::io::Write;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let fs = atomfs::Fs::from_store(Arc::new(memstore::MemStore::new()));
//! // let fs = atomfs::Fs::create("/dev/shm/my.pool", atomfs::Config::default())?;
//! fs.write("/from", b"100")?;
//! fs.write("/to", b"0")?;
//! let mut from = fs.options().write(true).truncate(true).open("/from")?;
//! let mut to = fs.options().write(true).truncate(true).open("/to")?;
//! let tx = fs.begin(&[&from, &to])?;
//! from.write_all(b"70")?;     // both writes belong to `tx` ...
//! to.write_all(b"30")?;
//! tx.commit()?;               // ... and become durable together, or not at all
//! assert_eq!(fs.read("/to")?, b"30");
//! # Ok(()) }
//! ```
//!
//! Errors are the Store API's [`Error`] (each maps to an errno with [`Error::errno`]).

#![deny(unsafe_code)]

mod config;
mod file;
mod fs;
mod tx;

pub use config::{Config, POOL_SIZE_DEFAULT};
pub use file::{File, OpenOptions};
pub use fs::Fs;
/// The pool engine (FCFS), for its configuration types.
pub use pool;
pub use store::{DirEntry, Error, FileKind, FsckReport, Metadata, Result, StatFs, Store};
pub use tx::Tx;

/// Turn a Store error into an `std::io::Error` carrying the matching errno kind and the message.
pub fn io_error(err: Error) -> std::io::Error {
    let kind = std::io::Error::from_raw_os_error(err.errno()).kind();
    std::io::Error::new(kind, err)
}
