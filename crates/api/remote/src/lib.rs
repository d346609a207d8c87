//! A store served to other processes: the owner process runs a [`Server`] on a Unix socket
//! beside the pool, and any other process reaches the store through a [`RemoteStore`], which
//! implements the Store API over that socket. Every front end that works on an
//! `Arc<dyn Store>` therefore works on a served store unchanged (docs/serve.md).
//!
//! - `wire.rs`: the encoding of the Store API's values, checked on decode.
//! - `op.rs`: the operation codes and the protocol version.
//! - `conn.rs`: frames, descriptor passing, the shared memory buffer for bulk data.
//! - `server.rs`: the owner side — per-client handles and transactions, cleaned up when a
//!   client goes away (its transactions aborted, as a crash of that client alone).
//! - `client.rs`: [`RemoteStore`].

mod client;
mod conn;
mod op;
mod server;
mod wire;

pub use client::{RemoteStore, SHM_LEN};
pub use server::{serve, serve_observed, serve_with, Change, Observer, ServeOptions, Server};

use std::path::{Path, PathBuf};

/// The socket of the server of the store at `pool`: beside it, `<pool>.sock`.
pub fn socket_for(pool: &Path) -> PathBuf {
    let mut name = pool.as_os_str().to_os_string();
    name.push(".sock");
    PathBuf::from(name)
}
