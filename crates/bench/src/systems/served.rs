//! The two-file update from another process than the store's owner (docs/serve.md):
//! - `fcfs-served`: the Store API of a `remote::RemoteStore` client, the store owned and
//!   served by an `atomfs serve` process (pool in /dev/shm, FCFS): `tx_begin`, two writes
//!   (batched in the client) and `tx_commit` (which carries them) — two round trips through
//!   the shared memory (docs/serve.md);
//! - `fcfs-fuse-ioctl`: the FUSE mount's transaction ioctls (`atomfs mount`, docs/fuse.md):
//!   TX_BEGIN on one file, TX_ADD of the other, two pwrites, TX_COMMIT.
//!
//! Together with `fcfs` (the owner process itself) they show what reaching a store from
//! another process costs per transaction.

use crate::error::{BenchError, Result};
use crate::system::TwoFileUpdate;
use crate::systems::fuse_mount::{cli_binary, AtomfsMount};
use crate::systems::pool::pool_bytes;
use crate::workload::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use store::{Fh, OpenFlags, Store, ROOT_INO};

fn failed(system: &str, message: impl std::fmt::Display) -> BenchError {
    BenchError::System {
        system: system.into(),
        message: message.to_string(),
    }
}

/// Files `files` of `file_size` zero bytes, written through `write` in 1 MiB pieces.
fn zero_fill(file_size: u64, mut write: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
    let chunk = vec![0u8; (1 << 20).min(file_size.max(1) as usize)];
    let mut off = 0;
    while off < file_size {
        let n = chunk.len().min((file_size - off) as usize);
        write(off, &chunk[..n])?;
        off += n as u64;
    }
    Ok(())
}

/// A client of an `atomfs serve` process.
pub struct Served {
    server: Option<Child>,
    pool: PathBuf,
    client: Option<remote::RemoteStore>,
    fhs: Vec<Fh>,
}

impl Served {
    pub fn new() -> Self {
        Served {
            server: None,
            pool: crate::scratch_path("served.pool"),
            client: None,
            fhs: Vec::new(),
        }
    }

    fn client(&self) -> Result<&remote::RemoteStore> {
        self.client
            .as_ref()
            .ok_or_else(|| failed("fcfs-served", "not set up"))
    }
}

impl Default for Served {
    fn default() -> Self {
        Self::new()
    }
}

impl TwoFileUpdate for Served {
    fn name(&self) -> String {
        "fcfs-served".into()
    }

    fn medium(&self) -> String {
        format!(
            "atomfs pool {} (FCFS) owned by an `atomfs serve` process; this process is its \
             client over {}",
            self.pool.display(),
            remote::socket_for(&self.pool).display()
        )
    }

    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        let cli = cli_binary()?;
        let size = pool_bytes(files, file_size);
        let out = Command::new(&cli)
            .arg("mkfs")
            .arg(&self.pool)
            .args(["--size", &size.to_string()])
            .output()
            .map_err(|e| failed("fcfs-served", e))?;
        if !out.status.success() {
            return Err(failed(
                "fcfs-served",
                String::from_utf8_lossy(&out.stderr).trim(),
            ));
        }
        let server = Command::new(&cli)
            .arg("serve")
            .arg(&self.pool)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed("fcfs-served", e))?;
        self.server = Some(server);
        let socket = remote::socket_for(&self.pool);
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            match remote::RemoteStore::connect(&socket) {
                Ok(c) => break c,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => return Err(failed("fcfs-served", format!("connect: {e}"))),
            }
        };
        let rw = OpenFlags {
            read: true,
            write: true,
            ..OpenFlags::default()
        };
        for i in 0..files {
            let meta = client
                .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, None)
                .map_err(|e| failed("fcfs-served", e))?;
            let fh = client
                .open(meta.ino, rw)
                .map_err(|e| failed("fcfs-served", e))?;
            zero_fill(file_size, |off, data| {
                client
                    .write(fh, off, data)
                    .map(|_| ())
                    .map_err(|e| failed("fcfs-served", e))
            })?;
            client
                .fsync(fh, false)
                .map_err(|e| failed("fcfs-served", e))?;
            self.fhs.push(fh);
        }
        self.client = Some(client);
        Ok(())
    }

    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let c = self.client()?;
        let (fa, fb) = (self.fhs[a.file as usize], self.fhs[b.file as usize]);
        let err = |e: store::Error| failed("fcfs-served", e);
        let tx = c.tx_begin(&[fa, fb]).map_err(err)?;
        c.write(fa, a.off, a.data).map_err(err)?;
        c.write(fb, b.off, b.data).map_err(err)?;
        c.tx_commit(tx).map_err(err)
    }

    fn bytes_written(&self) -> Option<u64> {
        None
    }

    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        let c = self.client()?;
        c.read(self.fhs[file as usize], off, buf)
            .map(|_| ())
            .map_err(|e| failed("fcfs-served", e))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.unmount();
        }
        if let Some(mut server) = self.server.take() {
            // SAFETY: kill(2) of the child we started and have not reaped.
            unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
            let _ = server.wait();
        }
        let _ = std::fs::remove_file(&self.pool);
        let _ = std::fs::remove_file(remote::socket_for(&self.pool));
    }
}

/// The mount's transaction ioctls.
pub struct FuseIoctl {
    mount: Option<AtomfsMount>,
    files: Vec<std::fs::File>,
}

impl FuseIoctl {
    pub fn new() -> Self {
        FuseIoctl {
            mount: None,
            files: Vec::new(),
        }
    }
}

impl Default for FuseIoctl {
    fn default() -> Self {
        Self::new()
    }
}

/// `ioctl(fd, cmd, &mut id)` of the mount's transaction calls.
fn ioctl_u64(f: &std::fs::File, cmd: u32, id: &mut u64) -> std::io::Result<()> {
    // SAFETY: the descriptor is open for the call; `id` is a valid u64 the command reads or
    // writes (each command's argument is one u64).
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), cmd as _, id as *mut u64) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl TwoFileUpdate for FuseIoctl {
    fn name(&self) -> String {
        "fcfs-fuse-ioctl".into()
    }

    fn medium(&self) -> String {
        self.mount
            .as_ref()
            .map_or_else(|| "atomfs FUSE mount".into(), AtomfsMount::label)
    }

    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        let mount = AtomfsMount::create(pool_bytes(files, file_size))?;
        let err = |e: std::io::Error| failed("fcfs-fuse-ioctl", e);
        for i in 0..files {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(mount.dir().join(format!("f{i}")))
                .map_err(err)?;
            zero_fill(file_size, |off, data| {
                f.write_all_at(data, off).map_err(err)
            })?;
            f.sync_all().map_err(err)?;
            self.files.push(f);
        }
        self.mount = Some(mount);
        Ok(())
    }

    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let (fa, fb) = (&self.files[a.file as usize], &self.files[b.file as usize]);
        let err = |e: std::io::Error| failed("fcfs-fuse-ioctl", e);
        let mut id = 0u64;
        ioctl_u64(fa, atomfs_fuse::IOC_TX_BEGIN, &mut id).map_err(err)?;
        ioctl_u64(fb, atomfs_fuse::IOC_TX_ADD, &mut id).map_err(err)?;
        fa.write_all_at(a.data, a.off).map_err(err)?;
        fb.write_all_at(b.data, b.off).map_err(err)?;
        ioctl_u64(fa, atomfs_fuse::IOC_TX_COMMIT, &mut id).map_err(err)
    }

    fn bytes_written(&self) -> Option<u64> {
        None
    }

    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        self.files[file as usize]
            .read_exact_at(buf, off)
            .map_err(|e| failed("fcfs-fuse-ioctl", e))
    }
}

impl Drop for FuseIoctl {
    fn drop(&mut self) {
        // Close the files before the mount goes.
        self.files.clear();
        self.mount.take();
    }
}
