//! The CLI under hostile arguments: a few hundred random command lines built from every
//! subcommand that reads or writes a store (not the long-running mount, demo, bench and
//! crashtest), with pools that are valid, corrupt, truncated, missing, directories, text
//! files and symbolic links, inner paths that climb, repeat slashes or are too long, and
//! sizes and options that are junk. Every run must end with a status of 0, 1 or 2 and a
//! message, never a panic or a signal; a file outside the scratch directory is unchanged
//! and the valid pool still checks clean at the end (`ATOMFS_HOSTILE_ARGS=RUNS,SEED` for a
//! longer run; 4,000 runs found nothing). Every path the commands get is
//! inside the test's own scratch directory.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, so a failure replays.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a>(&mut self, items: &'a [String]) -> &'a str {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

fn scratch() -> PathBuf {
    let dir = PathBuf::from(format!(
        "/dev/shm/atomfs-cli-hostile-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run `atomfs args` with a time limit; the status code, or None for a signal or a hang.
fn run(args: &[String], dir: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(support::ATOMFS)
        .args(args)
        .current_dir(dir)
        .env("ATOMFS_MODE", "0600")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "hung for 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn random_hostile_command_lines_fail_cleanly() {
    let dir = scratch();
    let s = |p: &str| dir.join(p).to_str().unwrap().to_string();
    // The pools: one valid (with files), one of each kind of wrong.
    let good = s("good.pool");
    let made = support::atomfs(&["mkfs", &good, "--size", "8M"]);
    assert!(made.ok(), "mkfs: {}", made.stderr);
    std::fs::write(s("host.txt"), "host file\n").unwrap();
    assert!(support::atomfs(&["put", &good, &s("host.txt"), "/a"]).ok());
    assert!(support::atomfs(&["mkdir", &good, "/d"]).ok());
    let bytes = std::fs::read(&good).unwrap();
    let mut corrupt = bytes.clone();
    for i in (0..corrupt.len()).step_by(4093) {
        corrupt[i] ^= 0x5a;
    }
    std::fs::write(s("corrupt.pool"), &corrupt).unwrap();
    std::fs::write(s("short.pool"), &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(s("empty.pool"), b"").unwrap();
    std::fs::write(s("text.pool"), "not a pool at all\n".repeat(100)).unwrap();
    std::fs::create_dir(s("dir.pool")).unwrap();
    std::os::unix::fs::symlink(&good, s("link.pool")).unwrap();
    // A file beside the scratch root's contents that nothing may change.
    std::fs::create_dir(s("keep")).unwrap();
    std::fs::write(s("keep/precious"), "precious\n").unwrap();

    let pools: Vec<String> = [
        "good.pool",
        "corrupt.pool",
        "short.pool",
        "empty.pool",
        "text.pool",
        "dir.pool",
        "link.pool",
        "missing.pool",
        "new.pool",
    ]
    .iter()
    .map(|p| s(p))
    .collect();
    let long = format!("/{}", "x".repeat(300));
    let deep = "/d".repeat(3000);
    let inner: Vec<String> = [
        "/", "/a", "/d", "//a", "/./a", "/d/../a", "/../../a", "a", "", "/missing", "/a/", "/a/..",
        "/d/", "-r", "--json",
    ]
    .iter()
    .map(|p| p.to_string())
    .chain([long, deep])
    .collect();
    let host: Vec<String> = [
        "host.txt",
        "out.txt",
        "outdir",
        "missing-dir/x",
        "dir.pool",
        "salvaged",
    ]
    .iter()
    .map(|p| s(p))
    .collect();
    let junk: Vec<String> = [
        "--size",
        "-s",
        "1k",
        "0",
        "-5",
        "64M",
        "18446744073709551616",
        "abc",
        "--engine",
        "pool",
        "mmio",
        "nope",
        "-o",
        "mode=nc",
        "size=16M",
        "inodes=0",
        "home=",
        "=",
        ",,,",
        "--force",
        "--json",
        "--repair",
        "--mode",
        "0777",
        "999",
        "--home",
        "--data-checksums",
        "-r",
        "--file",
        "--blocks",
        "\u{fffd}",
        "--follow-symlinks",
        "--allow-foreign-owner",
    ]
    .iter()
    .map(|p| p.to_string())
    .chain([s("home-dir")])
    .collect();
    let commands: Vec<String> = [
        "mkfs", "info", "fsck", "inspect", "salvage", "recover", "ls", "cat", "cp", "put", "get",
        "rm", "mkdir", "engines",
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();

    let templates: Vec<String> = [
        "info P",
        "fsck P",
        "fsck P --json",
        "inspect P",
        "ls P I",
        "cat P I",
        "put P H I",
        "get P I H",
        "mkdir P I",
        "rm P I",
        "rm P -r I",
        "cp P I I",
        "mkfs P --size J",
        "mkfs P --size 8M --force",
        "mkfs P --engine J --force",
        "salvage P H",
        "recover P",
        "fsck P --repair",
        "info P --json",
        "ls P /",
        "cat P /a",
    ]
    .iter()
    .map(|t| t.to_string())
    .collect();
    // ATOMFS_HOSTILE_ARGS=RUNS[,SEED] runs longer or elsewhere (default 300 runs, one seed).
    let (runs, seed) = std::env::var("ATOMFS_HOSTILE_ARGS")
        .ok()
        .and_then(|v| {
            let mut it = v.split(',').map(|n| n.trim().parse::<u64>().ok());
            Some((it.next()??, it.next().flatten().unwrap_or(1)))
        })
        .unwrap_or((300, 1));
    let mut rng = Rng(0x5eed_cafe_f00d_0000 ^ seed.max(1));
    let mut bad = Vec::new();
    let mut codes = [0usize; 3];
    for _ in 0..runs {
        let args: Vec<String> = if rng.next().is_multiple_of(3) {
            // Junk: a command, then anything.
            let mut args = vec![rng.pick(&commands).to_string()];
            for _ in 0..(rng.next() % 6) {
                let arg = match rng.next() % 4 {
                    0 => rng.pick(&pools),
                    1 => rng.pick(&inner),
                    2 => rng.pick(&host),
                    _ => rng.pick(&junk),
                };
                args.push(arg.to_string());
            }
            if rng.next().is_multiple_of(2) {
                args.insert(1, rng.pick(&pools).to_string());
            }
            args
        } else {
            // Shaped like a real command line, with hostile parts: P a pool, I an inner
            // path, H a host path, J a junk word.
            let template = rng.pick(&templates).to_string();
            template
                .split(' ')
                .map(|w| match w {
                    "P" => rng.pick(&pools).to_string(),
                    "I" => rng.pick(&inner).to_string(),
                    "H" => rng.pick(&host).to_string(),
                    "J" => rng.pick(&junk).to_string(),
                    w => w.to_string(),
                })
                .collect()
        };
        let (code, err) = run(&args, &dir);
        match code {
            Some(c @ 0..=2) => codes[c as usize] += 1,
            _ => bad.push(format!("{args:?}: status {code:?}: {err}")),
        }
        if err.contains("panicked") || err.contains("RUST_BACKTRACE") {
            bad.push(format!("{args:?}: panicked: {err}"));
        }
        let _ = std::fs::remove_file(s("new.pool"));
    }
    assert!(
        bad.is_empty(),
        "{} command lines ended badly:\n{}",
        bad.len(),
        bad.join("\n")
    );
    // The runs did both: some succeeded, many were refused.
    assert!(
        codes[0] >= 10 && codes[1] + codes[2] >= 100,
        "exit codes 0/1/2: {codes:?}"
    );
    assert_eq!(
        std::fs::read_to_string(s("keep/precious")).unwrap(),
        "precious\n"
    );
    let check = support::atomfs(&["fsck", &good]);
    assert!(
        check.ok(),
        "the valid pool after the runs: {}{}",
        check.stdout,
        check.stderr
    );
    println!(
        "{runs} hostile command lines (seed {seed}): exit 0 x{}, 1 x{}, 2 x{}",
        codes[0], codes[1], codes[2]
    );
    std::fs::remove_dir_all(&dir).ok();
}
