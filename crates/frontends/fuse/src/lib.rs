//! `atomfs-fuse`: mount any atomfs [`Store`] as a Linux file system with FUSE.
//!
//! Every program can then use the store. Each write outside a transaction is durable and
//! atomic when it returns (the engine makes every call its own transaction). On top of POSIX:
//! - per-file atomic mode (O_ATOMIC): the `user.atomfs.atomic` extended attribute ("1"/"0")
//!   or the [`IOC_SET_ATOMIC`] ioctl; writes collect until `fsync` or `close`, which commit
//!   them as one unit;
//! - multi-file transactions by ioctl ([`IOC_TX_BEGIN`], [`IOC_TX_ADD`], [`IOC_TX_COMMIT`],
//!   [`IOC_TX_ABORT`]), defined for C in `include/atomfs_fuse.h`.
//!
//! The mount uses fuser's own mount code (through `fusermount3`): no libfuse is linked.

mod acl;
mod fs;
mod ioctl;
mod names;
mod nodes;
mod txns;
mod xattrs;

pub use fs::AtomFuse;
pub use ioctl::*;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use store::Store;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Name shown as the source in /proc/mounts (`fsname=`).
    pub fsname: String,
    /// Mount read-only.
    pub read_only: bool,
    /// Let other users than the mounting one in (`allow_other`, needs `user_allow_other` in
    /// /etc/fuse.conf unless root).
    pub allow_other: bool,
    /// Further options passed to the kernel as they are (`-o noatime`, ...).
    pub extra: Vec<String>,
    /// Threads serving requests.
    pub threads: usize,
    /// How long the kernel may cache attributes, names and the absence of names
    /// ([`TTL_DEFAULT`]).
    pub ttl: Duration,
}

/// How long the kernel caches attributes and names by default. Long, because the kernel
/// hears of every change: the mount's process owns the store (a pool is locked by the
/// process that opened it), changes through this mount are the kernel's own, and the
/// changes the server makes otherwise (a transaction or atomic-mode abort, a store-server
/// client's request: [`Invalidator`]) invalidate the kernel's copy explicitly. Short timeouts only cost requests: each expired entry
/// is a LOOKUP, each expired attribute a GETATTR.
pub const TTL_DEFAULT: Duration = Duration::from_secs(60);

/// Longest `ttl=` mount option, seconds.
pub const TTL_MAX_SECS: u64 = 86_400;

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            fsname: "atomfs".into(),
            read_only: false,
            allow_other: false,
            extra: Vec::new(),
            threads: 4,
            ttl: TTL_DEFAULT,
        }
    }
}

impl MountOptions {
    /// Parse a comma-separated `-o` string: `ro`, `rw`, `allow_other`, `fsname=NAME`,
    /// `threads=N`, `ttl=SECONDS`, anything else passed to the kernel.
    pub fn parse_into(&mut self, list: &str) -> Result<(), String> {
        for opt in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match opt {
                "ro" => self.read_only = true,
                "rw" => self.read_only = false,
                "allow_other" => self.allow_other = true,
                _ if opt.starts_with("fsname=") => self.fsname = opt["fsname=".len()..].to_string(),
                _ if opt.starts_with("threads=") => {
                    self.threads = opt["threads=".len()..]
                        .parse()
                        .ok()
                        .filter(|n| (1..=64).contains(n))
                        .ok_or_else(|| format!("bad mount option {opt}: threads must be 1..64"))?;
                }
                _ if opt.starts_with("ttl=") => {
                    let secs = opt["ttl=".len()..]
                        .parse()
                        .ok()
                        .filter(|s| *s <= TTL_MAX_SECS)
                        .ok_or_else(|| {
                            format!("bad mount option {opt}: ttl must be 0..{TTL_MAX_SECS} seconds")
                        })?;
                    self.ttl = Duration::from_secs(secs);
                }
                _ => self.extra.push(opt.to_string()),
            }
        }
        Ok(())
    }

    /// The fuser configuration these options mount with (also used by the benchmark's
    /// minimal FUSE file system, to mount it the same way).
    pub fn fuser_config(&self) -> fuser::Config {
        use fuser::MountOption as M;
        let mut cfg = fuser::Config::default();
        cfg.mount_options = vec![
            M::FSName(self.fsname.clone()),
            M::Subtype("atomfs".into()),
            M::DefaultPermissions,
            if self.read_only { M::RO } else { M::RW },
        ];
        cfg.mount_options
            .extend(self.extra.iter().map(|o| M::CUSTOM(o.clone())));
        if self.allow_other {
            cfg.acl = fuser::SessionACL::All;
        }
        cfg.n_threads = Some(self.threads.max(1));
        cfg
    }
}

/// A mounted file system served by background threads. Unmount with [`Mount::unmount`];
/// dropping it unmounts too but cannot report errors nor checkpoint the store.
pub struct Mount {
    session: fuser::BackgroundSession,
    store: Arc<dyn Store>,
    mountpoint: std::path::PathBuf,
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
}

/// Tells the kernel to forget what it cached of a mount's inodes and names, for changes
/// made to the store other than through the mount (clients of its store server).
#[derive(Clone)]
pub struct Invalidator {
    notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
}

impl Invalidator {
    /// Forget the attributes and cached pages of `ino`.
    pub fn inode(&self, ino: store::Ino) {
        if let Some(n) = self.notifier.get() {
            // ENOENT just means the kernel holds nothing for it.
            let _ = n.inval_inode(fuser::INodeNo(ino), 0, -1);
        }
    }

    /// Forget the name `name` in directory `parent` (and the directory's listing).
    pub fn entry(&self, parent: store::Ino, name: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_entry(fuser::INodeNo(parent), std::ffi::OsStr::from_bytes(name));
            let _ = n.inval_inode(fuser::INodeNo(parent), 0, -1);
        }
    }
}

impl std::fmt::Debug for Mount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mount")
            .field("engine", &self.store.engine_name())
            .finish()
    }
}

/// Mount `store` at `mountpoint` and serve it from background threads.
///
/// Fails with a clear message when the mount point is missing, not a directory, or already
/// a mount point, and when FUSE is not available (no /dev/fuse, no fusermount3).
pub fn spawn_mount(
    store: Arc<dyn Store>,
    mountpoint: &Path,
    opts: &MountOptions,
) -> io::Result<Mount> {
    check_mountpoint(mountpoint)?;
    let fs = AtomFuse::new(store.clone(), opts.ttl);
    let notifier_slot = fs.notifier_slot();
    let session = fuser::Session::new(fs, mountpoint, &opts.fuser_config())
        .map_err(|e| mount_error(mountpoint, e))?;
    let _ = notifier_slot.set(session.notifier());
    let session = session.spawn()?;
    Ok(Mount {
        session,
        store,
        mountpoint: mountpoint.to_path_buf(),
        notifier: notifier_slot,
    })
}

impl Mount {
    /// What tells the kernel about changes made to the store around this mount.
    pub fn invalidator(&self) -> Invalidator {
        Invalidator {
            notifier: self.notifier.clone(),
        }
    }

    /// True once the kernel ended the session (an external `fusermount3 -u`, or the mount
    /// was aborted).
    pub fn is_finished(&self) -> bool {
        self.session.guard.is_finished()
    }

    /// Unmount (when still mounted), wait for the serving threads, then checkpoint and close
    /// the store.
    pub fn unmount(self) -> io::Result<()> {
        if !self.session.guard.is_finished() {
            unmount_retrying(&self.mountpoint)?;
        }
        // The kernel ended the session: the serving threads stop (fuser's own unmount at drop
        // then finds nothing mounted, which it ignores).
        let served = self.session.join();
        let closed = self
            .store
            .unmount()
            .map_err(|e| io::Error::other(format!("closing the store: {e}")));
        served.and(closed)
    }
}

/// How long [`Mount::unmount`] retries while the mount point is busy.
const UNMOUNT_BUSY_RETRY: Duration = Duration::from_secs(5);

/// `fusermount3 -u`, retried while the mount is busy: a busy mount is often transient (a
/// process that forked while holding a file of the mount keeps it until it execs or exits).
fn unmount_retrying(mountpoint: &Path) -> io::Result<()> {
    let started = std::time::Instant::now();
    loop {
        // Not `-q`: it silences the error message, which is how a busy mount is told apart
        // (with it, a transient EBUSY failed at once: a flaky fuse test on 25 Nov).
        let out = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(mountpoint)
            .output()?;
        if out.status.success() {
            return Ok(());
        }
        let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !msg.contains("busy") || started.elapsed() >= UNMOUNT_BUSY_RETRY {
            return Err(io::Error::other(format!(
                "unmounting {}: {msg}",
                mountpoint.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Refuse a mount point that is missing, not a directory, or already mounted on.
pub fn check_mountpoint(mountpoint: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(mountpoint).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::ENOTCONN) {
            " (the file system served there has died: run `atomfs umount` on it first)"
        } else {
            ""
        };
        io::Error::new(
            e.kind(),
            format!("mount point {}: {e}{hint}", mountpoint.display()),
        )
    })?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("mount point {} is not a directory", mountpoint.display()),
        ));
    }
    if is_mount_point(mountpoint)? {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "mount point {} is busy: something is already mounted there",
                mountpoint.display()
            ),
        ));
    }
    Ok(())
}

/// True when `path` is listed as a mount point in /proc/self/mountinfo.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    // Canonicalize the parent only: stat of a mount point whose server died fails (ENOTCONN).
    let absolute = std::path::absolute(path)?;
    let canonical = match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)?.join(name),
        _ => absolute,
    };
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|mp| unescape_mountinfo(mp) == canonical.as_os_str().to_string_lossy()))
}

fn unescape_mountinfo(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

fn mount_error(mountpoint: &Path, e: io::Error) -> io::Error {
    let hint = if !Path::new("/dev/fuse").exists() {
        " (/dev/fuse is missing: load the fuse module or run with --device /dev/fuse)"
    } else if e.kind() == io::ErrorKind::NotFound {
        " (fusermount3 not found: install the fuse3 package)"
    } else {
        ""
    };
    io::Error::new(
        e.kind(),
        format!("cannot mount on {}: {e}{hint}", mountpoint.display()),
    )
}

/// Serve `store` at `mountpoint` in the calling thread until SIGINT, SIGTERM or SIGHUP
/// arrives or the file system is unmounted from outside; then unmount and checkpoint.
/// `ready` is called once the mount is up (to signal a waiting parent).
pub fn serve_until_signal(
    store: Arc<dyn Store>,
    mountpoint: &Path,
    opts: &MountOptions,
    ready: impl FnOnce(),
) -> io::Result<()> {
    serve_until_signal_with(store, mountpoint, opts, ready, |_| Ok(()))
}

/// [`serve_until_signal`], with `beside(&mount)` started once the mount is up and dropped
/// before it is unmounted (the store server of `atomfs mount`, which needs the mount's
/// [`Invalidator`]).
pub fn serve_until_signal_with<T>(
    store: Arc<dyn Store>,
    mountpoint: &Path,
    opts: &MountOptions,
    ready: impl FnOnce(),
    beside: impl FnOnce(&Mount) -> io::Result<T>,
) -> io::Result<()> {
    let signals = block_termination_signals()?;
    let mount = spawn_mount(store, mountpoint, opts)?;
    let companion = match beside(&mount) {
        Ok(c) => c,
        Err(e) => {
            let _ = mount.unmount();
            return Err(e);
        }
    };
    ready();
    while !mount.is_finished() {
        if wait_signal(&signals, Duration::from_millis(200)).is_some() {
            break;
        }
    }
    drop(companion);
    mount.unmount()
}

/// Block SIGINT, SIGTERM and SIGHUP in this thread and in the threads it starts afterwards,
/// so that [`serve_until_signal`] can wait for them. Call it before starting any thread (an
/// engine's checkpoint threads, say) when serving from the main thread.
pub fn block_termination_signals() -> io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it fully before use,
    // and pthread_sigmask only reads it. No Rust invariants are involved.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
}

/// Wait up to `timeout` for one of the signals blocked by [`block_termination_signals`];
/// returns its number.
pub fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<i32> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    // SAFETY: `set` is an initialised signal set and `ts` a valid timespec, both live for the
    // call; a null siginfo pointer is allowed.
    let sig = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (sig > 0).then_some(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_options_parse_threads_and_ttl() {
        let mut o = MountOptions::default();
        assert_eq!(o.ttl, TTL_DEFAULT);
        o.parse_into("ro, threads=2,ttl=0,noatime")
            .expect("valid options");
        assert!(o.read_only);
        assert_eq!((o.threads, o.ttl), (2, Duration::ZERO));
        assert_eq!(o.extra, vec!["noatime".to_string()]);
        o.parse_into("ttl=3600").expect("an hour");
        assert_eq!(o.ttl, Duration::from_secs(3600));
        for bad in ["ttl=-1", "ttl=x", "ttl=86401", "threads=0"] {
            assert!(o.parse_into(bad).is_err(), "{bad} accepted");
        }
    }
}
