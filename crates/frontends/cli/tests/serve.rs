//! Many processes, one store: `atomfs serve` owns the pool and every other process reaches it
//! as a client — the CLI's file commands and a C program on the C API here. Kill tests: a
//! client SIGKILLed inside a transaction loses that transaction and nothing else (the file is
//! free for the next client); the server SIGKILLed while a client commits in a loop gives
//! that client EIO (never a hang), and the store, recovered, holds every acknowledged commit.
//! `ATOMFS_SERVE_ROUNDS=200` runs 200 rounds of each (default 12).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const CLIENT_C: &str = r#"
#include <atomfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* hold POOL: begin a transaction on /acct, write into it, say so, wait to be killed.
 * loop POOL: commit "n" into both halves of /acct in one transaction, n = 1, 2, ...,
 *            printing n after each commit; on a failure print "error ERRNO" and exit 3. */
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    atomfs_pool *p = atomfs_pool_open(argv[2]);
    if (!p) { printf("open error %d\n", errno); fflush(stdout); return 3; }
    int fd = atomfs_open(p, "/acct", O_RDWR | O_CREAT, 0644);
    if (fd < 0) { printf("error %d\n", errno); fflush(stdout); return 3; }
    char block[4096];
    if (!strcmp(argv[1], "hold")) {
        struct TxInfo info = { 1, &fd };
        unsigned long tx = tx_begin(&info);
        if (!tx) { printf("error %d\n", errno); fflush(stdout); return 3; }
        memset(block, 'T', sizeof block);
        atomfs_pwrite(fd, block, sizeof block, 0);
        printf("in-tx\n"); fflush(stdout);
        for (;;) pause();
    }
    for (unsigned long n = 1;; n++) {
        struct TxInfo info = { 1, &fd };
        unsigned long tx = tx_begin(&info);
        if (!tx) { printf("error %d\n", errno); fflush(stdout); return 3; }
        memset(block, 0, sizeof block);
        snprintf(block, sizeof block, "%lu", n);
        if (atomfs_pwrite(fd, block, sizeof block, 0) != sizeof block ||
            atomfs_pwrite(fd, block, sizeof block, 8192) != sizeof block ||
            tx_commit(tx) != 0) {
            printf("error %d\n", errno); fflush(stdout); return 3;
        }
        printf("%lu\n", n); fflush(stdout);
    }
}
"#;

fn rounds() -> usize {
    std::env::var("ATOMFS_SERVE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

fn lib_dir() -> PathBuf {
    PathBuf::from(ATOMFS).parent().unwrap().to_path_buf()
}

fn client_binary(dir: &Path) -> Option<PathBuf> {
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../capi/include");
    let src = dir.join("client.c");
    std::fs::write(&src, CLIENT_C).unwrap();
    let exe = dir.join("client");
    let lib = lib_dir();
    match Command::new("cc")
        .arg(format!("-I{}", include.display()))
        .arg(&src)
        .arg(format!("-L{}", lib.display()))
        .arg("-latomfs")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
    {
        Ok(o) if o.status.success() => Some(exe),
        Ok(o) => panic!(
            "building the C client: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            test_support::unavailable("C client", &format!("no C compiler: {e}"));
            None
        }
    }
}

/// `atomfs serve POOL` in the background, ready once its socket answers.
fn start_server(pool: &Path) -> Child {
    let child = Command::new(ATOMFS)
        .args(["serve", s(pool)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = PathBuf::from(format!("{}.sock", pool.display()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "atomfs serve did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn stop(mut server: Child) {
    // SAFETY: kill(2) of a child we started and have not reaped; no memory involved.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let status = server.wait().unwrap();
    assert!(status.success(), "atomfs serve exited with {status}");
}

fn sigkill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The first 4 KiB half of /acct, up to its first NUL, and whether both halves agree.
fn acct(pool: &Path) -> (String, bool) {
    let out = Command::new(ATOMFS)
        .args(["cat", s(pool), "/acct"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cat: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = out.stdout;
    let half = |at: usize| -> Vec<u8> {
        let b = bytes.get(at..at + 4096).unwrap_or(&[]);
        b.iter().take_while(|&&c| c != 0).copied().collect()
    };
    let (a, b) = (half(0), half(8192));
    (String::from_utf8_lossy(&a).into_owned(), a == b)
}

#[test]
fn cli_commands_are_clients_of_a_served_store() {
    let dir = scratch("serve-cli");
    let pool = dir.join("p.pool");
    atomfs_ok(&["mkfs", s(&pool), "--size", "64M"]);
    let server = start_server(&pool);
    std::fs::write(dir.join("in.txt"), "through the server\n").unwrap();
    atomfs_ok(&["put", s(&pool), s(&dir.join("in.txt")), "/f"]);
    assert_eq!(atomfs_ok(&["cat", s(&pool), "/f"]), "through the server\n");
    atomfs_ok(&["mkdir", s(&pool), "/d"]);
    let ls = atomfs_ok(&["ls", s(&pool), "/"]);
    assert!(ls.contains('f') && ls.contains('d'), "ls: {ls}");
    // Replacing a served store is refused: it has an owner.
    let forced = atomfs(&["mkfs", s(&pool), "--size", "64M", "--force"]);
    assert!(!forced.ok(), "mkfs --force of a served store succeeded");
    // A second server is refused.
    let second = atomfs(&["serve", s(&pool)]);
    assert!(
        !second.ok() && second.stderr.contains("serves"),
        "{}",
        second.stderr
    );
    stop(server);
    // Closed cleanly: the owner-less store opens directly and has it all.
    assert_eq!(atomfs_ok(&["cat", s(&pool), "/f"]), "through the server\n");
    assert!(!PathBuf::from(format!("{}.sock", pool.display())).exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_client_killed_mid_transaction_loses_only_that_transaction() {
    let dir = scratch("serve-client-kill");
    let Some(client) = client_binary(&dir) else {
        return;
    };
    let pool = dir.join("p.pool");
    atomfs_ok(&["mkfs", s(&pool), "--size", "64M"]);
    let server = start_server(&pool);
    // One committed value to keep.
    let mut first = Command::new(&client)
        .args(["loop", s(&pool)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "1");
    sigkill(&mut first);
    let (mut kept, whole) = acct(&pool);
    assert!(
        whole && !kept.is_empty(),
        "after the first client: {kept:?}"
    );
    for round in 0..rounds() {
        let mut holder = Command::new(&client)
            .args(["hold", s(&pool)])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(holder.stdout.take().unwrap()).lines();
        assert_eq!(out.next().unwrap().unwrap(), "in-tx", "round {round}");
        sigkill(&mut holder);
        // Its transaction is gone: the committed value, whole; and the file is free again.
        let (now, whole) = acct(&pool);
        assert!(
            whole && now == kept,
            "round {round}: {now:?} (whole {whole}), kept {kept:?}"
        );
        let mut next = Command::new(&client)
            .args(["loop", s(&pool)])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(next.stdout.take().unwrap()).lines();
        let line = out.next().unwrap().unwrap();
        assert_eq!(line, "1", "round {round}: the next client could not commit");
        sigkill(&mut next);
        let (now, whole) = acct(&pool);
        assert!(
            whole,
            "round {round}: torn after a killed committer: {now:?}"
        );
        kept = now;
    }
    stop(server);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_killed_server_fails_its_client_and_keeps_every_acknowledged_commit() {
    let dir = scratch("serve-server-kill");
    let Some(client) = client_binary(&dir) else {
        return;
    };
    let pool = dir.join("p.pool");
    atomfs_ok(&["mkfs", s(&pool), "--size", "64M"]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..rounds() {
        let mut server = start_server(&pool);
        let mut c = Command::new(&client)
            .args(["loop", s(&pool)])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let reader = BufReader::new(c.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reading = std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Let it commit for a while (1..40 ms after its first acknowledgement).
        let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(first, "1", "round {round}");
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(1 + seed % 40));
        sigkill(&mut server);
        // The client must fail (EIO), not hang.
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the client hangs after the server died"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        reading.join().unwrap();
        let lines: Vec<String> = rx.try_iter().collect();
        let last_ack: u64 = std::iter::once(first.as_str())
            .chain(lines.iter().map(String::as_str))
            .filter_map(|l| l.parse().ok())
            .max()
            .unwrap();
        let failure = lines.last().cloned().unwrap_or_default();
        assert_eq!(
            status.code(),
            Some(3),
            "round {round}: client status {status}"
        );
        assert_eq!(failure, format!("error {}", libc::EIO), "round {round}");
        // Recovery (this open owns the store: the server is gone) keeps the last
        // acknowledged commit, whole; a later one may be there too if it reached the
        // server's durable commit point before the kill.
        let (value, whole) = acct(&pool);
        let value: u64 = value.parse().unwrap_or(0);
        assert!(
            whole,
            "round {round}: torn transaction after the server was killed"
        );
        assert!(
            value == last_ack || value == last_ack + 1,
            "round {round}: recovered {value}, last acknowledged {last_ack}"
        );
        // A stale socket is left behind by the killed server; the next serve replaces it.
    }
    std::fs::remove_dir_all(&dir).ok();
}
