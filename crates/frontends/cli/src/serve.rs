//! `atomfs serve`: own a store and serve it to other processes until a signal.

use crate::engine::open;
use crate::{CmdResult, Failure};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

pub fn run(pool: &Path, socket: Option<&Path>) -> CmdResult {
    // Before any thread starts (the engine's checkpoint threads), so that they inherit it.
    let signals = atomfs_fuse::block_termination_signals()?;
    let fs = open(pool)?;
    if fs.store().as_any().is::<remote::RemoteStore>() {
        return Err(Failure::new(format!(
            "{}: another process already serves this store",
            pool.display()
        )));
    }
    let socket = socket.map_or_else(|| remote::socket_for(pool), Path::to_path_buf);
    let server = remote::serve(fs.store().clone(), &socket)
        .map_err(|e| Failure::new(format!("serving {}: {e}", pool.display())))?;
    eprintln!(
        "atomfs: serving {} ({}) on {} (Ctrl-C to stop)",
        pool.display(),
        fs.store().engine_name(),
        socket.display()
    );
    while atomfs_fuse::wait_signal(&signals, Duration::from_millis(500)).is_none() {}
    // Clients' open transactions are aborted as their connections end; then the store closes.
    server.stop();
    fs.unmount()?;
    Ok(ExitCode::SUCCESS)
}
