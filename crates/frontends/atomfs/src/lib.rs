//! `atomfs` — failure-atomic, durable updates to your files, one file or many.
//!
//! A [`Fs`] is a file system held by one atomfs engine (a [`Store`]). Its [`File`]s read and
//! write like `std::fs::File`; every call outside a transaction is durable and atomic when it
//! returns. [`Fs::begin`] binds several open files to one transaction ([`Tx`]): everything
//! written through them becomes durable at once at [`Tx::commit`], or never
//! ([`Tx::abort`], drop, or a crash before the commit).
//!
//! ```
//! use atomfs::{Config, Fs};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let path = std::env::temp_dir().join(format!("atomfs-doc-{}.pool", std::process::id()));
//! let fs = Fs::create(&path, Config::pool(64 << 20))?;   // or Fs::open(&path, Config::default())
//! fs.write("/from", "100")?;
//! fs.write("/to", "0")?;
//! let from = fs.options().write(true).open("/from")?;
//! let to = fs.options().write(true).open("/to")?;
//! let tx = fs.begin(&[&from, &to])?;
//! from.set_len(0)?;                 // everything through `from` and `to` belongs to `tx` ...
//! from.write_at(b"70", 0)?;
//! to.set_len(0)?;
//! to.write_at(b"30", 0)?;
//! tx.commit()?;                     // ... and becomes durable at once, or not at all
//! assert_eq!(fs.read("/to")?, b"30");
//! # drop((from, to, fs));
//! # std::fs::remove_file(&path)?;
//! # Ok(()) }
//! ```
//!
//! Errors are the Store API's [`Error`] (each maps to an errno with [`Error::errno`]).

#![deny(unsafe_code)]

mod config;
mod file;
mod fs;
mod tx;

pub use config::{
    pool_config_for, Config, MmioConfig, PolicyMode, PoolConfig, PoolMode, POOL_SIZE_DEFAULT,
};
/// The engine registry: every engine's name, options and description.
pub use engines;
pub use file::{File, OpenOptions};
pub use fs::Fs;
pub use store::{DirEntry, Error, FileKind, FsckReport, Metadata, Result, StatFs, Store};
pub use tx::Tx;

/// Turn a Store error into an `std::io::Error` carrying the matching errno kind and the message.
pub fn io_error(err: Error) -> std::io::Error {
    let kind = std::io::Error::from_raw_os_error(err.errno()).kind();
    std::io::Error::new(kind, err)
}
