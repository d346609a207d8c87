//! A store served to other processes: the owner process runs a [`Server`] on a Unix socket
//! beside the pool, and any other process reaches the store through a [`RemoteStore`], which
//! implements the Store API over that socket. Every front end that works on an
//! `Arc<dyn Store>` therefore works on a served store unchanged (docs/serve.md).
//!
//! - `wire.rs`: the encoding of the Store API's values, checked on decode.
//! - `op.rs`: the operation codes and the protocol version.
//! - `conn.rs`: socket frames and descriptor passing.
//! - `shm.rs`: the shared memory of a connection (its layout).
//! - `channel.rs`: requests and replies posted in the shared memory, a doorbell on the
//!   socket for a side that sleeps.
//! - `server.rs`: the owner side — per-client handles and transactions, cleaned up when a
//!   client goes away (its transactions aborted, as a crash of that client alone).
//! - `batch.rs`: writes inside a transaction batched in the client, sent with the commit.
//! - `client.rs`: [`RemoteStore`].

mod batch;
mod channel;
mod client;
mod conn;
pub mod locks;
mod op;
mod server;
mod shm;
mod wire;

pub use client::{RemoteStore, SHM_LEN};
pub use server::{serve, serve_observed, serve_with, Change, Observer, ServeOptions, Server};

use std::path::{Path, PathBuf};

use locks::{Conflict, LockKind, LockOwner, LockRange};
use store::{Ino, Result, Store};

/// Set (or remove) an advisory lock on `ino` of `store` for owner `id` of this process:
/// through the server when `store` is a client, else in this process's table of the store
/// whose server socket is `socket` (the one its server shares). The lock in the way when
/// another owner's conflicts. See [`locks`].
pub fn file_lock(
    store: &dyn Store,
    socket: &Path,
    ino: Ino,
    id: u64,
    kind: LockKind,
    range: LockRange,
) -> Result<Option<Conflict>> {
    let pid = std::process::id();
    match store.as_any().downcast_ref::<RemoteStore>() {
        Some(client) => client.lock(ino, id, pid, kind, range),
        None => Ok(locks::table_for(socket)
            .set(ino, LockOwner { conn: 0, id }, pid, kind, range)
            .err()),
    }
}

/// The lock that would stand in the way of owner `id` taking `kind` on `range` (F_GETLK).
pub fn file_lock_test(
    store: &dyn Store,
    socket: &Path,
    ino: Ino,
    id: u64,
    kind: LockKind,
    range: LockRange,
) -> Result<Option<Conflict>> {
    match store.as_any().downcast_ref::<RemoteStore>() {
        Some(client) => client.lock_test(ino, id, kind, range),
        None => Ok(locks::table_for(socket).test(ino, LockOwner { conn: 0, id }, kind, range)),
    }
}

/// Drop every lock owner `id` holds on `ino` (a POSIX lock owner closed a descriptor of it).
pub fn file_lock_release(store: &dyn Store, socket: &Path, ino: Ino, id: u64) -> Result<()> {
    match store.as_any().downcast_ref::<RemoteStore>() {
        Some(client) => client.lock_release(ino, id),
        None => {
            locks::table_for(socket).release(ino, LockOwner { conn: 0, id });
            Ok(())
        }
    }
}

/// The socket of the server of the store at `pool`: beside it, `<pool>.sock`.
pub fn socket_for(pool: &Path) -> PathBuf {
    let mut name = pool.as_os_str().to_os_string();
    name.push(".sock");
    PathBuf::from(name)
}
