//! The crash model checked against the kernel.
//!
//! For XFS (reflink, exchange-range) and ext4 loop images in /dev/shm, each pattern of
//! writes, syncs, renames, clones and exchanges runs twice: on the real mounted file system
//! through [`RealHostFs`] and on [`SimHostFs`]. The real file system is then cut off without
//! flushing (`xfs_io -x -c shutdown` on XFS; `EXT4_IOC_SHUTDOWN` with
//! `EXT4_GOING_FLAGS_NOLOGFLUSH` on ext4), unmounted and mounted again, and the tree it shows
//! must be one of the model's crash images: the model is never stricter than the kernel.
//!
//! Needs root and loop devices; skips with a printed reason where the kernel refuses them,
//! and fails instead under ATOMFS_REQUIRE_ALL=1.

mod common;

use common::TempDir;
use hostfs::{Capability, HostFs, HostFsResult, HostImage, OpenOptions, RealHostFs, SimHostFs};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

fn p(s: &str) -> &Path {
    Path::new(s)
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

fn run_out(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Xfs,
    Ext4,
}

/// A loop-mounted file system image in /dev/shm; unmounted, detached and removed on drop.
struct LoopFs {
    kind: Kind,
    image: PathBuf,
    device: String,
    mount: TempDir,
    mounted: bool,
}

impl LoopFs {
    fn new(kind: Kind) -> Result<LoopFs, String> {
        let image = PathBuf::from(format!(
            "/dev/shm/hostfs-kernel-{kind:?}-{}.img",
            std::process::id()
        ));
        let img = image.to_str().ok_or("image path")?.to_string();
        let size = if kind == Kind::Xfs { "320M" } else { "64M" };
        run("truncate", &["-s", size, &img])?;
        let mut fs = LoopFs {
            kind,
            image,
            device: String::new(),
            mount: TempDir::new("kernel"),
            mounted: false,
        };
        match kind {
            Kind::Xfs => {
                run("mkfs.xfs", &["-q", "-f", "-m", "reflink=1", &img])?;
                // xfsprogs before 6.10 cannot ask for exchange-range at mkfs time: set the
                // incompat bit (XFS_SB_FEAT_INCOMPAT_EXCHRANGE, 1 << 6) with xfs_db.
                let line = run_out(
                    "xfs_db",
                    &["-c", "sb 0", "-c", "print features_incompat", &img],
                )?;
                let value = line
                    .rsplit(' ')
                    .next()
                    .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
                if let Some(v) = value {
                    let set = format!("write -d features_incompat {:#x}", v | 0x40);
                    run("xfs_db", &["-x", "-c", "sb 0", "-c", &set, &img])?;
                }
            }
            Kind::Ext4 => run("mkfs.ext4", &["-q", "-F", &img])?,
        }
        fs.device = run_out("losetup", &["-f", "--show", &img])?;
        fs.mount_it()?;
        Ok(fs)
    }

    fn dir(&self) -> &Path {
        self.mount.path()
    }

    fn mount_it(&mut self) -> Result<(), String> {
        let dir = self.dir().to_str().ok_or("mount path")?.to_string();
        run("mount", &[&self.device, &dir])?;
        self.mounted = true;
        Ok(())
    }

    /// Unmount, retrying for a while when the mount is busy: a child process another test
    /// thread forks may hold a copy of a descriptor on it until it execs.
    fn unmount(&mut self) -> Result<(), String> {
        let dir = self.dir().to_str().ok_or("mount path")?.to_string();
        let mut result = run("umount", &[&dir]);
        for _ in 0..50 {
            if result.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            result = run("umount", &[&dir]);
        }
        result?;
        self.mounted = false;
        Ok(())
    }

    /// Cut the file system off without flushing anything, then unmount and mount again.
    fn crash_and_remount(&mut self) -> Result<(), String> {
        let dir = self.dir().to_str().ok_or("mount path")?.to_string();
        match self.kind {
            Kind::Xfs => run("xfs_io", &["-x", "-c", "shutdown", &dir])?,
            Kind::Ext4 => ext4_shutdown_nologflush(self.dir())?,
        }
        self.unmount()?;
        self.mount_it()
    }

    /// Remove everything but lost+found and make the empty state durable.
    fn reset(&self) -> Result<(), String> {
        for entry in std::fs::read_dir(self.dir()).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.file_name() == Some(std::ffi::OsStr::new("lost+found")) {
                continue;
            }
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
        let dir = self.dir().to_str().ok_or("mount path")?.to_string();
        run("sync", &["-f", &dir])
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.mount.path()).output();
        }
        if !self.device.is_empty() {
            let _ = Command::new("losetup").args(["-d", &self.device]).output();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32) with EXT4_GOING_FLAGS_NOLOGFLUSH (2): stop the
/// file system without writing back data or committing the journal.
fn ext4_shutdown_nologflush(dir: &Path) -> Result<(), String> {
    const EXT4_IOC_SHUTDOWN: libc::c_ulong =
        (2 << 30) | (4 << 16) | ((b'X' as libc::c_ulong) << 8) | 125;
    const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;
    let file = std::fs::File::open(dir).map_err(|e| e.to_string())?;
    let flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
    // SAFETY: the ioctl reads one u32 from the pointer, which is valid.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), EXT4_IOC_SHUTDOWN, &flags as *const u32) };
    if rc != 0 {
        return Err(format!(
            "EXT4_IOC_SHUTDOWN: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn filled(fs: &impl HostFs, path: &str, byte: u8, len: usize) -> HostFsResult<()> {
    let f = fs.open(p(path), &OpenOptions::create())?;
    fs.write_all_at(&f, 0, &vec![byte; len])?;
    fs.sync_data(&f)
}

/// The patterns: each leaves some updates synced and some not.
type Pattern = fn(&dyn Fn(Capability) -> bool, &SimOrReal) -> HostFsResult<()>;

/// One of the two file systems a pattern runs on.
enum SimOrReal<'a> {
    Sim(&'a SimHostFs),
    Real(&'a RealHostFs),
}

macro_rules! on {
    ($target:expr, |$fs:ident| $body:expr) => {
        match $target {
            SimOrReal::Sim($fs) => $body,
            SimOrReal::Real($fs) => $body,
        }
    };
}

fn overwrite_and_append(_: &dyn Fn(Capability) -> bool, t: &SimOrReal) -> HostFsResult<()> {
    on!(t, |fs| {
        filled(*fs, "a", b'A', 8192)?;
        fs.sync_dir(p(""))?;
        let f = fs.open(p("a"), &OpenOptions::read_write())?;
        fs.write_all_at(&f, 1024, &[b'B'; 2048])?;
        fs.write_all_at(&f, 8192, &[b'C'; 1000])
    })
}

fn synced_overwrite_then_unsynced(
    _: &dyn Fn(Capability) -> bool,
    t: &SimOrReal,
) -> HostFsResult<()> {
    on!(t, |fs| {
        filled(*fs, "a", b'A', 4096)?;
        fs.sync_dir(p(""))?;
        let f = fs.open(p("a"), &OpenOptions::read_write())?;
        fs.write_all_at(&f, 0, &[b'B'; 4096])?;
        fs.sync_data(&f)?;
        fs.write_all_at(&f, 0, &[b'C'; 1024])?;
        fs.set_len(&f, 2048)
    })
}

fn rename_replace(_: &dyn Fn(Capability) -> bool, t: &SimOrReal) -> HostFsResult<()> {
    on!(t, |fs| {
        filled(*fs, "target", b'O', 4096)?;
        fs.sync_dir(p(""))?;
        filled(*fs, "tmp", b'N', 4096)?;
        fs.rename(p("tmp"), p("target"))?;
        fs.mkdir(p("d"), 0o755)?;
        filled(*fs, "d/new", b'X', 512)?;
        fs.sync_dir(p("d"))
    })
}

fn create_link_unlink(_: &dyn Fn(Capability) -> bool, t: &SimOrReal) -> HostFsResult<()> {
    on!(t, |fs| {
        filled(*fs, "a", b'1', 1024)?;
        filled(*fs, "b", b'2', 1024)?;
        fs.sync_dir(p(""))?;
        fs.link(p("a"), p("c"))?;
        fs.unlink(p("b"))?;
        filled(*fs, "e", b'3', 100)
    })
}

fn clone_and_exchange(has: &dyn Fn(Capability) -> bool, t: &SimOrReal) -> HostFsResult<()> {
    on!(t, |fs| {
        filled(*fs, "src", b'S', 8192)?;
        filled(*fs, "dst", b'D', 8192)?;
        filled(*fs, "other", b'O', 8192)?;
        fs.sync_dir(p(""))?;
        let src = fs.open(p("src"), &OpenOptions::read_write())?;
        let dst = fs.open(p("dst"), &OpenOptions::read_write())?;
        let other = fs.open(p("other"), &OpenOptions::read_write())?;
        if has(Capability::Reflink) {
            fs.clone_range(&src, 0, &dst, 0, 8192)?;
        }
        if has(Capability::ExchangeRange) {
            fs.exchange_range(&src, 0, &other, 0, 8192)?;
        }
        if has(Capability::AtomicWrite { len: 4096 }) {
            fs.atomic_write(&other, 4096, &[b'W'; 4096])?;
        }
        Ok(())
    })
}

fn mapped_stores(_: &dyn Fn(Capability) -> bool, t: &SimOrReal) -> HostFsResult<()> {
    use pmem::Region;
    on!(t, |fs| {
        filled(*fs, "m", 0, 16384)?;
        fs.sync_dir(p(""))?;
        let f = fs.open(p("m"), &OpenOptions::read_write())?;
        let map = fs.map(&f, 16384)?;
        map.write(100, &[b'F'; 64]);
        // persist: flush + fence msyncs the page on a host file system.
        map.persist(100, 64);
        map.write(8192, &[b'U'; 64]);
        Ok(())
    })
}

const PATTERNS: &[(&str, Pattern)] = &[
    ("mapped stores, one page flushed", mapped_stores),
    ("overwrite and append, unsynced", overwrite_and_append),
    (
        "synced overwrite, then unsynced write and truncate",
        synced_overwrite_then_unsynced,
    ),
    (
        "rename over an existing name, unsynced directory",
        rename_replace,
    ),
    (
        "link, unlink and create, unsynced directory",
        create_link_unlink,
    ),
    (
        "clone-range, exchange-range and atomic write, unsynced",
        clone_and_exchange,
    ),
];

fn observed(fs: &RealHostFs) -> HostImage {
    let mut image = HostImage::read(fs).expect("read the remounted tree");
    image
        .nodes
        .retain(|path, _| !path.starts_with(b"lost+found"));
    image
}

fn check_kind(kind: Kind) -> Result<(), String> {
    let mut lfs = LoopFs::new(kind)?;
    let caps = RealHostFs::open(lfs.dir())
        .map_err(|e| e.to_string())?
        .capabilities();
    eprintln!("{kind:?}: {caps:?}");
    if kind == Kind::Xfs {
        assert!(caps.reflink, "the XFS image has reflink");
    }
    let mut lost = 0;
    for (name, pattern) in PATTERNS {
        lfs.reset()?;
        let real = RealHostFs::open(lfs.dir()).map_err(|e| e.to_string())?;
        let has = |c: Capability| caps.has(c);
        let sim = SimHostFs::new(hostfs::SimConfig {
            capabilities: hostfs::Capabilities {
                fs_type: hostfs::FsType::Simulated,
                ..caps
            },
            ..hostfs::SimConfig::default()
        });
        pattern(&has, &SimOrReal::Sim(&sim)).map_err(|e| format!("{name} on the model: {e}"))?;
        pattern(&has, &SimOrReal::Real(&real)).map_err(|e| format!("{name} on {kind:?}: {e}"))?;
        drop(real);
        lfs.crash_and_remount()
            .map_err(|e| format!("{name}: {e}"))?;
        let real = RealHostFs::open(lfs.dir()).map_err(|e| e.to_string())?;
        let seen = observed(&real);
        let point = sim.crash_point();
        assert!(point.is_exhaustive(), "{name}: {}", point.describe(0));
        let allowed = point.images().any(|image| image.same_tree(&seen));
        assert!(
            allowed,
            "{kind:?}, {name}: the kernel kept a state the model does not allow: {}\n({} model states; durable: {}; live: {})",
            seen.summary(),
            point.state_count(),
            point.image(0).summary(),
            sim.live_image().summary()
        );
        let kept_everything = seen.same_tree(&sim.live_image());
        lost += usize::from(!kept_everything);
        eprintln!(
            "{kind:?}: {name}: the kernel's state is a model image ({} states; {})",
            point.state_count(),
            if kept_everything {
                "nothing lost"
            } else {
                "unsynced updates lost"
            }
        );
    }
    // A shutdown that loses nothing would make this test prove nothing.
    assert!(
        lost > 0,
        "{kind:?}: the shutdown lost no unsynced update in any pattern"
    );
    Ok(())
}

fn environment() -> Result<(), String> {
    if !common::is_root() {
        return Err("not root: loop mounts need root".into());
    }
    for tool in ["mkfs.xfs", "mkfs.ext4", "xfs_io", "xfs_db", "losetup"] {
        run_out("sh", &["-c", &format!("command -v {tool}")])
            .map_err(|_| format!("{tool} not installed"))?;
    }
    Ok(())
}

fn check_or_skip(kind: Kind) {
    if let Err(reason) = environment() {
        return common::skip(&reason);
    }
    match LoopFs::new(kind) {
        Err(reason) => {
            return common::skip(&format!(
                "the kernel refuses a {kind:?} loop mount: {reason}"
            ))
        }
        Ok(probe) => drop(probe),
    }
    if let Err(e) = check_kind(kind) {
        panic!("{kind:?}: {e}");
    }
}

#[test]
fn the_model_allows_every_state_xfs_leaves_after_a_shutdown() {
    check_or_skip(Kind::Xfs);
}

#[test]
fn the_model_allows_every_state_ext4_leaves_after_a_shutdown() {
    check_or_skip(Kind::Ext4);
}
