//! The measured targets: three directory trees served by the kernel (atomfs over FUSE, the
//! minimal FUSE file system, tmpfs) and the Rust API.

use crate::minimal::MinimalFs;
use std::any::Any;
use std::cell::RefCell;
use std::io;
use std::path::PathBuf;
use std::process::Command;

/// One metadata call on name number `i` of the round.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// open(fI, O_CREAT|O_EXCL|O_WRONLY) + close
    Create,
    /// link(fI, lI)
    Link,
    /// rename(lI, rI)
    Rename,
    /// unlink(rI)
    Unlink,
    /// mkdir(dI)
    Mkdir,
    /// rmdir(dI)
    Rmdir,
    /// unlink(fI), not timed
    Cleanup,
}

pub const OPS: [Op; 6] = [
    Op::Create,
    Op::Link,
    Op::Rename,
    Op::Unlink,
    Op::Mkdir,
    Op::Rmdir,
];

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Create => "create (open O_CREAT + close)",
            Op::Link => "link",
            Op::Rename => "rename",
            Op::Unlink => "unlink",
            Op::Mkdir => "mkdir",
            Op::Rmdir => "rmdir",
            Op::Cleanup => "cleanup",
        }
    }
}

pub trait Target {
    fn name(&self) -> &str;
    fn describe(&self) -> String;
    /// Start a round in a fresh directory (fresh names: no cached negative entries).
    fn begin_round(&self, round: usize) -> io::Result<()>;
    fn op(&self, op: Op, i: usize) -> io::Result<()>;
    /// CPU time its server process has used so far (all threads), when it has its own.
    fn server_cpu_ns(&self) -> Option<u64> {
        None
    }
}

/// CPU time of every thread of process `pid`, from /proc/PID/task/*/schedstat.
fn process_cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(total)
}

/// Pool size of the atomfs targets.
const POOL_BYTES: u64 = 512 << 20;

fn shm_path(what: &str) -> PathBuf {
    PathBuf::from(format!(
        "/dev/shm/atomfs-meta-latency-{}-{what}",
        std::process::id()
    ))
}

/// A directory tree served by the kernel; `guard` unmounts or deletes it when dropped.
pub struct PosixTarget {
    name: &'static str,
    describe: String,
    root: PathBuf,
    round: RefCell<PathBuf>,
    /// The serving process, when it is not this one.
    server: Option<u32>,
    _guard: Box<dyn Any>,
}

impl Target for PosixTarget {
    fn name(&self) -> &str {
        self.name
    }
    fn describe(&self) -> String {
        self.describe.clone()
    }
    fn begin_round(&self, round: usize) -> io::Result<()> {
        let dir = self.root.join(format!("round{round}"));
        std::fs::create_dir(&dir)?;
        *self.round.borrow_mut() = dir;
        Ok(())
    }
    fn op(&self, op: Op, i: usize) -> io::Result<()> {
        let dir = self.round.borrow();
        let p = |c: char| dir.join(format!("{c}{i}"));
        match op {
            Op::Create => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p('f'))
                .map(drop),
            Op::Link => std::fs::hard_link(p('f'), p('l')),
            Op::Rename => std::fs::rename(p('l'), p('r')),
            Op::Unlink => std::fs::remove_file(p('r')),
            Op::Mkdir => std::fs::create_dir(p('d')),
            Op::Rmdir => std::fs::remove_dir(p('d')),
            Op::Cleanup => std::fs::remove_file(p('f')),
        }
    }
    fn server_cpu_ns(&self) -> Option<u64> {
        process_cpu_ns(self.server?)
    }
}

/// `atomfs mount` of a pool in /dev/shm; `atomfs umount` (or a lazy unmount) on drop.
struct CliMount {
    cli: PathBuf,
    pool: PathBuf,
    dir: PathBuf,
}

impl Drop for CliMount {
    fn drop(&mut self) {
        let ok = Command::new(&self.cli)
            .arg("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.dir)
                .status();
        }
        let _ = std::fs::remove_dir(&self.dir);
        let _ = std::fs::remove_file(&self.pool);
    }
}

/// The `atomfs` command: `ATOMFS_BIN`, else next to the examples directory.
fn cli_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ATOMFS_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let beside = exe.parent()?.parent()?.join("atomfs");
    beside.is_file().then_some(beside)
}

fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.output()?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(io::Error::other(format!(
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

fn cli_mount(cli: PathBuf) -> io::Result<PosixTarget> {
    let pool = shm_path("cli.pool");
    let dir = std::env::temp_dir().join(format!("atomfs-meta-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    run(Command::new(&cli)
        .arg("mkfs")
        .arg(&pool)
        .args(["--size", &POOL_BYTES.to_string()]))?;
    let said = run(Command::new(&cli).arg("mount").arg(&pool).arg(&dir))?;
    // "mounted POOL on DIR (server pid N; ...)"
    let server = said
        .split_once("server pid ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|pid| pid.parse().ok());
    let describe = format!(
        "`{} mount` of a {} MiB pool in /dev/shm, default options",
        cli.display(),
        POOL_BYTES >> 20
    );
    Ok(PosixTarget {
        name: "atomfs-fuse",
        describe,
        root: dir.clone(),
        round: RefCell::new(dir.clone()),
        server,
        _guard: Box::new(CliMount { cli, pool, dir }),
    })
}

/// A file system mounted in this process; unmounted on drop.
struct InProcessMount {
    unmount: Option<Box<dyn FnOnce() -> io::Result<()>>>,
    dir: PathBuf,
    pool: Option<PathBuf>,
}

impl Drop for InProcessMount {
    fn drop(&mut self) {
        let clean = self.unmount.take().map(|u| u());
        if !matches!(clean, Some(Ok(()))) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.dir)
                .status();
        }
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(pool) = &self.pool {
            let _ = std::fs::remove_file(pool);
        }
    }
}

fn mount_dir(what: &str) -> io::Result<PathBuf> {
    let dir =
        std::env::temp_dir().join(format!("atomfs-meta-latency-{}-{what}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The atomfs server mounted in this process over a pool in /dev/shm.
pub fn in_process_atomfs() -> io::Result<PosixTarget> {
    let pool = shm_path("inproc.pool");
    let fs =
        atomfs::Fs::create(&pool, atomfs::Config::pool(POOL_BYTES)).map_err(atomfs::io_error)?;
    let dir = mount_dir("atomfs")?;
    let opts = atomfs_fuse::MountOptions::default();
    let mount = atomfs_fuse::spawn_mount(fs.store().clone(), &dir, &opts)?;
    Ok(PosixTarget {
        name: "atomfs-fuse",
        describe: format!(
            "atomfs server mounted in-process (spawn_mount, default options), {} MiB pool in /dev/shm",
            POOL_BYTES >> 20
        ),
        root: dir.clone(),
        round: RefCell::new(dir.clone()),
        server: None,
        _guard: Box::new(InProcessMount {
            // The Fs lives as long as the mount: dropping it would close the store.
            unmount: Some(Box::new(move || {
                let unmounted = mount.unmount();
                drop(fs);
                unmounted
            })),
            dir,
            pool: Some(pool),
        }),
    })
}

fn minimal_options() -> atomfs_fuse::MountOptions {
    atomfs_fuse::MountOptions {
        fsname: "minimal".into(),
        ..Default::default()
    }
}

/// Serve the minimal file system at `dir` in this process until it is unmounted (the child
/// side of [`minimal`] with `own_process`); "ready" on stdout once mounted.
pub fn serve_minimal(dir: &std::path::Path) -> io::Result<()> {
    let opts = minimal_options();
    let session = fuser::Session::new(MinimalFs::new(opts.ttl), dir, &opts.fuser_config())?;
    println!("ready");
    session.run()
}

/// The minimal in-memory file system, mounted with atomfs's default options and timeouts:
/// in this process, or (`own_process`) in a child process of its own session, as `atomfs
/// mount` serves atomfs.
pub fn minimal(own_process: bool) -> io::Result<PosixTarget> {
    let dir = mount_dir("minimal")?;
    let opts = minimal_options();
    let mut server = None;
    let (unmount, how): (Unmount, &str) = if own_process {
        let (pid, unmount) = spawn_minimal_server(&dir)?;
        server = Some(pid);
        (unmount, "served by a child process in its own session")
    } else {
        let session = fuser::Session::new(MinimalFs::new(opts.ttl), &dir, &opts.fuser_config())?;
        let session = session.spawn()?;
        let unmount_dir = dir.clone();
        let unmount = move || {
            run(Command::new("fusermount3").arg("-u").arg(&unmount_dir))?;
            session.join()
        };
        (Box::new(unmount), "served in this process")
    };
    Ok(PosixTarget {
        name: "minimal-fuse",
        describe: format!(
            "in-memory FUSE file system on fuser, {how}, same mount options, {} threads, timeouts {:?}",
            opts.threads, opts.ttl
        ),
        root: dir.clone(),
        round: RefCell::new(dir.clone()),
        server,
        _guard: Box::new(InProcessMount {
            unmount: Some(unmount),
            dir,
            pool: None,
        }),
    })
}

/// Re-execute this example as `--serve-minimal DIR` in a new session; wait for "ready".
type Unmount = Box<dyn FnOnce() -> io::Result<()>>;

fn spawn_minimal_server(dir: &std::path::Path) -> io::Result<(u32, Unmount)> {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("--serve-minimal")
        .arg(dir)
        .stdout(std::process::Stdio::piped());
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        std::io::BufReader::new(out).read_line(&mut line)?;
    }
    if line.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other("the minimal FUSE server did not start"));
    }
    let unmount_dir = dir.to_path_buf();
    let pid = child.id();
    let unmount = move || {
        let unmounted = run(Command::new("fusermount3").arg("-u").arg(&unmount_dir));
        if unmounted.is_err() {
            let _ = child.kill();
        }
        child.wait()?;
        unmounted.map(drop)
    };
    Ok((pid, Box::new(unmount)))
}

struct RemoveTree(PathBuf);

impl Drop for RemoveTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmpfs() -> io::Result<PosixTarget> {
    let dir = shm_path("tmpfs");
    std::fs::create_dir_all(&dir)?;
    Ok(PosixTarget {
        name: "tmpfs",
        describe: format!("directory {} (not durable)", dir.display()),
        root: dir.clone(),
        round: RefCell::new(dir.clone()),
        server: None,
        _guard: Box::new(RemoveTree(dir)),
    })
}

/// The same calls through `atomfs::Fs` on a pool in /dev/shm, in this process.
pub struct ApiTarget {
    fs: atomfs::Fs,
    pool: PathBuf,
    round: RefCell<String>,
}

impl Drop for ApiTarget {
    fn drop(&mut self) {
        let _ = self.fs.unmount();
        let _ = std::fs::remove_file(&self.pool);
    }
}

impl Target for ApiTarget {
    fn name(&self) -> &str {
        "rust-api"
    }
    fn describe(&self) -> String {
        format!(
            "atomfs::Fs on a {} MiB pool in /dev/shm (create = options().create_new(true).open() + drop)",
            POOL_BYTES >> 20
        )
    }
    fn begin_round(&self, round: usize) -> io::Result<()> {
        let dir = format!("/round{round}");
        self.fs.create_dir(&dir).map_err(atomfs::io_error)?;
        *self.round.borrow_mut() = dir;
        Ok(())
    }
    fn op(&self, op: Op, i: usize) -> io::Result<()> {
        let dir = self.round.borrow();
        let p = |c: char| format!("{dir}/{c}{i}");
        let fs = &self.fs;
        let done = match op {
            Op::Create => fs
                .options()
                .write(true)
                .create_new(true)
                .open(p('f'))
                .map(drop),
            Op::Link => fs.hard_link(p('f'), p('l')).map(drop),
            Op::Rename => fs.rename(p('l'), p('r')),
            Op::Unlink => fs.remove_file(p('r')),
            Op::Mkdir => fs.create_dir(p('d')).map(drop),
            Op::Rmdir => fs.remove_dir(p('d')),
            Op::Cleanup => fs.remove_file(p('f')),
        };
        done.map_err(atomfs::io_error)
    }
}

fn api() -> io::Result<ApiTarget> {
    let pool = shm_path("api.pool");
    let fs =
        atomfs::Fs::create(&pool, atomfs::Config::pool(POOL_BYTES)).map_err(atomfs::io_error)?;
    Ok(ApiTarget {
        fs,
        pool,
        round: RefCell::new(String::new()),
    })
}

/// A directory mounted by the caller (to measure a server started by hand, under a
/// profiler say).
fn mounted(dir: PathBuf) -> PosixTarget {
    PosixTarget {
        name: "atomfs-fuse",
        describe: format!("{} (mounted by the caller)", dir.display()),
        root: dir.clone(),
        round: RefCell::new(dir),
        server: None,
        _guard: Box::new(()),
    }
}

/// How the atomfs target is served.
pub enum Serve {
    /// `atomfs mount` when the command is found, else in this process.
    Cli,
    /// In this process, as the minimal file system is served.
    InProcess,
    /// Already mounted at this directory.
    Mounted(PathBuf),
    /// Not a measurement: serve the minimal file system at this directory (the child
    /// process of the measurement).
    Minimal(PathBuf),
}

/// All four targets; atomfs-fuse first and minimal-fuse second (the table's ratio).
pub fn all(serve: Serve) -> io::Result<Vec<Box<dyn Target>>> {
    let in_process = match serve {
        Serve::Mounted(dir) => return with_references(mounted(dir), true),
        Serve::InProcess => true,
        Serve::Cli => false,
        Serve::Minimal(_) => {
            return Err(io::Error::other(
                "--serve-minimal serves, it does not measure",
            ))
        }
    };
    let atomfs_fuse = match cli_binary().filter(|_| !in_process) {
        Some(cli) => cli_mount(cli)?,
        None => {
            if !in_process {
                eprintln!(
                    "no atomfs command next to this example nor ATOMFS_BIN: mounting in-process"
                );
            }
            in_process_atomfs()?
        }
    };
    with_references(atomfs_fuse, !in_process)
}

/// The three references; the minimal file system served from its own process unless atomfs
/// is served from this one.
fn with_references(
    atomfs_fuse: PosixTarget,
    own_process: bool,
) -> io::Result<Vec<Box<dyn Target>>> {
    Ok(vec![
        Box::new(atomfs_fuse),
        Box::new(minimal(own_process)?),
        Box::new(tmpfs()?),
        Box::new(api()?),
    ])
}
