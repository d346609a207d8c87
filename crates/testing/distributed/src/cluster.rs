//! The GlusterFS test cluster of `scripts/gluster.sh`, as the tests see it: brought up once
//! per test process (unless it is already up), torn down when the process exits if it was
//! brought up here (`ATOMFS_GLUSTER_KEEP=1` keeps it), and the server faults the fault tests
//! inject — by the pids gluster reports, never by process name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The two volumes of the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Volume {
    /// `atomfs-single`: one brick.
    Single,
    /// `atomfs-replica`: replica 2 (two bricks on this machine).
    Replica,
}

impl Volume {
    /// The volume's name in gluster.
    pub fn name(self) -> &'static str {
        match self {
            Volume::Single => "atomfs-single",
            Volume::Replica => "atomfs-replica",
        }
    }
    fn key(self) -> &'static str {
        match self {
            Volume::Single => "single",
            Volume::Replica => "replica",
        }
    }
}

/// One brick process as `gluster volume status` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Brick {
    /// `host:/path`.
    pub name: String,
    /// Its pid; `None` while it is down.
    pub pid: Option<i32>,
}

/// The cluster: what `scripts/gluster.sh status` said after `up`.
#[derive(Debug)]
pub struct Cluster {
    status: HashMap<String, String>,
}

/// Path of `scripts/gluster.sh` in this checkout.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../scripts/gluster.sh")
}

fn run_script(args: &[&str]) -> Result<(i32, String, String), String> {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .map_err(|e| format!("bash {}: {e}", script().display()))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

fn parse_status(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

extern "C" fn tear_down() {
    if std::env::var("ATOMFS_GLUSTER_KEEP").is_ok_and(|v| v == "1") {
        return;
    }
    match run_script(&["down"]) {
        Ok((0, _, _)) => {}
        Ok((code, _, err)) => eprintln!("gluster.sh down exited {code}: {err}"),
        Err(e) => eprintln!("{e}"),
    }
}

fn bring_up() -> Result<Cluster, String> {
    if let Ok((0, out, _)) = run_script(&["status"]) {
        return Ok(Cluster {
            status: parse_status(&out),
        });
    }
    let (code, out, err) = run_script(&["up"])?;
    if code != 0 {
        // Half-started state is removed again.
        let _ = run_script(&["down"]);
        return Err(format!("scripts/gluster.sh up exited {code}: {err}"));
    }
    // SAFETY: registers a plain extern "C" function with no arguments; at exit it runs
    // `gluster.sh down`, which stops only the daemons the script started.
    unsafe { libc::atexit(tear_down) };
    Ok(Cluster {
        status: parse_status(&out),
    })
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The cluster, brought up on first use; `None` (after printing why, or failing under
/// `ATOMFS_REQUIRE_ALL=1`) where GlusterFS cannot run here.
pub fn cluster(what: &str) -> Option<&'static Cluster> {
    match CLUSTER.get_or_init(bring_up) {
        Ok(c) => Some(c),
        Err(why) => {
            test_support::unavailable(what, why);
            None
        }
    }
}

impl Cluster {
    fn get(&self, key: &str) -> &str {
        self.status.get(key).map_or("", String::as_str)
    }

    /// Where `volume` is mounted.
    pub fn mount(&self, volume: Volume) -> PathBuf {
        PathBuf::from(self.get(&format!("{}_mount", volume.key())))
    }

    /// The scratch directory of the cluster (bricks, logs, mount points).
    pub fn dir(&self) -> PathBuf {
        PathBuf::from(self.get("dir"))
    }

    /// The bricks' host name and the address it resolves to.
    pub fn host(&self) -> (String, String) {
        (
            self.get("host").to_string(),
            self.get("address").to_string(),
        )
    }

    /// The network namespace the daemons run in (`None`: this one).
    pub fn netns(&self) -> Option<String> {
        Some(self.get("netns").to_string()).filter(|n| !n.is_empty())
    }

    /// The bricks of `volume` with their pids (`gluster volume status`).
    pub fn bricks(&self, volume: Volume) -> Vec<Brick> {
        let out = match run_script(&["pids"]) {
            Ok((0, out, _)) => out,
            Ok((code, _, err)) => panic!("gluster.sh pids exited {code}: {err}"),
            Err(e) => panic!("{e}"),
        };
        out.lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let (vol, name, pid) = (it.next()?, it.next()?, it.next()?);
                (vol == volume.name()).then(|| Brick {
                    name: name.to_string(),
                    pid: pid.parse().ok(),
                })
            })
            .collect()
    }

    /// SIGKILL brick `index` of `volume` by the pid gluster reports for it; returns the pid.
    pub fn kill_brick(&self, volume: Volume, index: usize) -> i32 {
        let bricks = self.bricks(volume);
        let Some(pid) = bricks.get(index).and_then(|b| b.pid) else {
            panic!("brick {index} of {} has no pid: {bricks:?}", volume.name());
        };
        assert!(pid > 1, "brick pid {pid}");
        // SAFETY: kill(2) with a pid gluster reported for a brick of our own volume.
        let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(rc, 0, "kill {pid}: {}", std::io::Error::last_os_error());
        let start = Instant::now();
        // SAFETY: signal 0 only checks whether the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        pid
    }

    /// Restart the bricks of `volume` that are down (`gluster volume start VOL force`) and
    /// wait until every brick has a pid again.
    pub fn restart_bricks(&self, volume: Volume) {
        let (code, _, err) =
            run_script(&["restart", volume.name()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 0, "gluster.sh restart {}: {err}", volume.name());
        let start = Instant::now();
        while self.bricks(volume).iter().any(|b| b.pid.is_none()) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "bricks of {} did not come back: {:?}",
                volume.name(),
                self.bricks(volume)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Detach the client mount of `volume` lazily (`umount -l`): open descriptors keep
    /// working, new lookups through the mount point no longer reach the volume.
    pub fn lose_mount(&self, volume: Volume) {
        let at = self.mount(volume);
        let out = Command::new("umount")
            .arg("-l")
            .arg(&at)
            .output()
            .unwrap_or_else(|e| panic!("umount: {e}"));
        test_support::checked(&out, &format!("umount -l {}", at.display()));
    }

    /// SIGKILL the FUSE client process serving `volume`'s mount (its pid recorded by
    /// `gluster.sh` at mount time): every descriptor on the mount then fails with ENOTCONN.
    /// Returns the pid.
    pub fn kill_client(&self, volume: Volume) -> i32 {
        let (code, out, err) = run_script(&["status"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 0, "gluster.sh status: {err}");
        let key = format!("{}_client_pid=", volume.key());
        let pid: i32 = out
            .lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no client pid for {} in {out}", volume.name()));
        assert!(pid > 1, "client pid {pid}");
        // SAFETY: kill(2) with the pid of the FUSE client the script mounted for this volume.
        let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(rc, 0, "kill {pid}: {}", std::io::Error::last_os_error());
        let start = Instant::now();
        // SAFETY: signal 0 only checks whether the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        pid
    }

    /// Mount `volume` again where it was (`gluster.sh up` mounts what is not mounted).
    pub fn remount(&self) {
        let (code, _, err) = run_script(&["up"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code, 0, "gluster.sh up: {err}");
    }

    /// Wait until the replica volume has no pending heals (self-heal after a brick came back).
    pub fn wait_healed(&self, volume: Volume, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok((0, out, _)) = run_script(&["heal-pending", volume.name()]) {
                if out.trim() == "0" {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        false
    }
}
