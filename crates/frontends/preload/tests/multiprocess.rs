//! Programs made of many processes, unmodified, under the shim: `make -j2` run from a
//! working directory in the store (recipes are shells whose redirections write into it), `git`
//! (init, commits, branches, gc, clones local and over its pack protocol, fsck), and Python's
//! `multiprocessing` with each start method (fork, spawn — vfork+exec — and forkserver).
//! One process opens the pool and serves it; every other is its client. Each test skips
//! with a message when its tool is missing (a failure under `ATOMFS_REQUIRE_ALL=1`).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use test_support::cc::lib_dir;
use test_support::{checked as ok, have};

fn shim() -> PathBuf {
    lib_dir().join("libatomfs_preload.so")
}

/// `sh -c script` under the shim with the pool in `dir`.
fn sh(dir: &Path, script: &str) -> Output {
    Command::new("sh")
        .args(["-c", script])
        .env("LD_PRELOAD", shim())
        .env("ATOMFS_POOL", dir.join("pool"))
        .env("ATOMFS_PREFIX", "/atomfs")
        .env("ATOMFS_CREATE_SIZE", "0")
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run sh")
}

fn needs(tools: &[&str], what: &str) -> bool {
    for tool in tools {
        if !have(tool) {
            test_support::unavailable(what, &format!("{tool} missing"));
            return false;
        }
    }
    true
}

#[test]
fn make_j2_builds_in_a_working_directory_in_the_store() {
    if !needs(&["sh", "make", "seq", "sed", "wc"], "make -j2 in the store") {
        return;
    }
    let dir = test_support::scratch("preload-make");
    let makefile = "\
all: a.txt b.txt c.txt d.txt joined.txt\n\
%.txt:\n\tseq 1 2000 | sed 's/^/$@ /' > $@\n\
joined.txt: a.txt b.txt c.txt d.txt\n\tcat $^ | wc -l > $@\n\
clean:\n\trm -f *.txt\n";
    std::fs::write(dir.join("Makefile"), makefile).unwrap();
    let script = format!(
        "mkdir /atomfs/proj && cp {}/Makefile /atomfs/proj/ && cd /atomfs/proj && pwd && \
         make -s -j2 && cat joined.txt && make -s clean && cd / && make -s -j2 -C /atomfs/proj && \
         ls /atomfs/proj",
        dir.display()
    );
    let out = ok(&sh(&dir, &script), "make");
    assert_eq!(
        out,
        "/atomfs/proj\n8000\nMakefile\na.txt\nb.txt\nc.txt\nd.txt\njoined.txt\n"
    );
    let a = ok(&sh(&dir, "cat /atomfs/proj/a.txt"), "cat a.txt");
    assert_eq!(a.lines().count(), 2000);
    assert_eq!(a.lines().nth(1999), Some("a.txt 2000"));
}

#[test]
fn git_repositories_live_in_the_store() {
    if !needs(&["sh", "git"], "git in the store") {
        return;
    }
    let dir = test_support::scratch("preload-git");
    let script = "\
        set -e; g='git -c user.email=t@t -c user.name=t -c init.defaultBranch=main'; \
        mkdir /atomfs/repo && cd /atomfs/repo && $g init -q . && \
        for i in 1 2 3 4; do seq $i > f$i; echo $i >> log; $g add -A; $g commit -qm c$i; done; \
        $g checkout -qb side HEAD~2 && echo side > s && $g add s && $g commit -qm side && \
        $g checkout -q main && $g merge -q --no-edit side && $g gc -q && $g fsck --strict 2>&1; \
        cd / && $g clone -q /atomfs/repo /atomfs/local && $g clone -q --no-local /atomfs/repo /atomfs/packed; \
        $g -C /atomfs/packed fsck --strict 2>&1; $g -C /atomfs/local log --oneline | wc -l; \
        cat /atomfs/packed/s /atomfs/packed/log | tr '\\n' ' '";
    let out = ok(&sh(&dir, script), "git");
    assert_eq!(out.trim_end(), "6\nside 1 2 3 4");
}

#[test]
fn python_multiprocessing_with_every_start_method() {
    if !needs(&["sh", "python3"], "Python multiprocessing in the store") {
        return;
    }
    let dir = test_support::scratch("preload-mp");
    let program = r#"
import multiprocessing as mp, os, sys
def work(i):
    with open(f"/atomfs/{sys.argv[1]}/{i}.txt", "w") as f:
        f.write(f"worker {i}\n" * 1000)
        f.flush()
        os.fsync(f.fileno())
    return os.getpid()
if __name__ == "__main__":
    method = sys.argv[1]
    os.makedirs(f"/atomfs/{method}")
    with open(f"/atomfs/{method}/log", "a") as log:
        log.write("start\n")
        log.flush()
        with mp.get_context(method).Pool(2) as pool:
            pids = pool.map(work, range(12))
        log.write(f"done {len(pids)} tasks\n")
    whole = all(open(f"/atomfs/{method}/{i}.txt").read() == f"worker {i}\n" * 1000 for i in range(12))
    print(method, len(os.listdir(f"/atomfs/{method}")), whole, open(f"/atomfs/{method}/log").read().split()[0:3])
"#;
    std::fs::write(dir.join("mp.py"), program).unwrap();
    for method in ["fork", "spawn", "forkserver"] {
        let out = ok(
            &sh(
                &dir,
                &format!("python3 {} {method}", dir.join("mp.py").display()),
            ),
            method,
        );
        assert_eq!(
            out.trim_end(),
            format!("{method} 13 True ['start', 'done', '12']"),
            "start method {method}"
        );
    }
}

/// `atomfs serve POOL` in the background, stopped (by its pid) when dropped.
struct Served(std::process::Child);

impl Served {
    fn start(dir: &Path) -> Served {
        let atomfs = lib_dir().join("atomfs");
        let pool = dir.join("pool");
        ok(
            &Command::new(&atomfs)
                .args(["mkfs", "--size", "256M"])
                .arg(&pool)
                .output()
                .unwrap(),
            "mkfs",
        );
        let child = Command::new(&atomfs)
            .arg("serve")
            .arg(&pool)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let served = Served(child);
        let socket = dir.join("pool.sock");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !socket.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "atomfs serve did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        served
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Record locks (fcntl) taken under the shim hold across processes: every process reaches
/// the store through one server, which keeps the locks. A second process is refused a write
/// lock the first holds, gets it once released, and F_GETLK names the holder.
#[test]
fn record_locks_hold_across_processes() {
    if !needs(&["sh", "python3"], "record locks across processes") {
        return;
    }
    let dir = test_support::scratch("preload-locks");
    let _server = Served::start(&dir);
    let program = r#"
import fcntl, os, struct, subprocess, sys
f = open("/atomfs/lockme", "w")
fcntl.lockf(f, fcntl.LOCK_EX, 10, 100)
probe = """
import fcntl, struct, sys
g = open('/atomfs/lockme', 'r+')
try:
    fcntl.lockf(g, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 105)
    print('granted')
except OSError as e:
    print('refused', e.errno)
fcntl.lockf(g, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 200)
print('other range granted')
got = fcntl.fcntl(g, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))
t, w, start, length, pid = struct.unpack('hhqqi', got)
print('holder', t == fcntl.F_WRLCK, start, length, pid == int(sys.argv[1]))
"""
run = lambda: subprocess.run([sys.executable, "-c", probe, str(os.getpid())], capture_output=True, text=True).stdout.split("\n")
print(run()[0:3])
fcntl.lockf(f, fcntl.LOCK_UN, 10, 100)
print(run()[0])
f.close()
"#;
    std::fs::write(dir.join("locks.py"), program).unwrap();
    let out = ok(
        &sh(&dir, &format!("python3 {}", dir.join("locks.py").display())),
        "locks",
    );
    assert_eq!(
        out.trim_end(),
        "['refused 11', 'other range granted', 'holder True 100 10 True']\ngranted"
    );
}

/// Two unmodified `sqlite3` shells write one database at once, each its own transactions,
/// as clients of `atomfs serve`: SQLite's locks (fcntl on the database file) keep them
/// apart, so every committed row is there and the database is intact.
#[test]
fn two_sqlite3_shells_write_one_database() {
    if !needs(&["sh", "sqlite3"], "two sqlite3 shells on one database") {
        return;
    }
    let dir = test_support::scratch("preload-sqlite2");
    let _server = Served::start(&dir);
    const ROWS: usize = 40;
    for who in ["a", "b"] {
        let mut sql = String::from(".timeout 600000\n.bail on\n");
        for i in 0..ROWS {
            sql.push_str(&format!(
                "begin immediate; insert into t values('{who}', {i}); \
                 insert into t select '{who}', i + 1000 from t where who = '{who}' and i = {i}; commit;\n"
            ));
        }
        std::fs::write(dir.join(format!("{who}.sql")), sql).unwrap();
    }
    ok(
        &sh(
            &dir,
            "sqlite3 /atomfs/t.db 'create table t(who text, i int)'",
        ),
        "create",
    );
    let d = dir.display();
    ok(
        &sh(
            &dir,
            &format!("sqlite3 /atomfs/t.db < {d}/a.sql & sqlite3 /atomfs/t.db < {d}/b.sql & wait"),
        ),
        "two writers",
    );
    let out = ok(
        &sh(
            &dir,
            "sqlite3 /atomfs/t.db 'select who, count(*), sum(i) from t group by who; pragma integrity_check'",
        ),
        "check",
    );
    let sum: usize = (0..ROWS).map(|i| 2 * i + 1000).sum();
    assert_eq!(
        out,
        format!("a|{}|{sum}\nb|{}|{sum}\nok\n", 2 * ROWS, 2 * ROWS)
    );
}

/// `make -j2` of a small C project in the store: the compiler, the assembler and the linker
/// read and write the sources, objects and program there; the program copied out runs.
#[test]
fn make_j2_compiles_a_c_project_in_the_store() {
    if !needs(&["sh", "make", "cc"], "a C project built in the store") {
        return;
    }
    let dir = test_support::scratch("preload-cc");
    let files = [
        (
            "Makefile",
            "CFLAGS = -O1 -Wall -Werror\nprog: main.o util.o\n\t$(CC) -o $@ main.o util.o\n\
             %.o: %.c util.h\n\t$(CC) $(CFLAGS) -c $< -o $@\n",
        ),
        ("util.h", "int twice(int);\n"),
        ("util.c", "#include \"util.h\"\nint twice(int x) { return 2 * x; }\n"),
        (
            "main.c",
            "#include <stdio.h>\n#include \"util.h\"\nint main(void) { printf(\"%d\\n\", twice(21)); return 0; }\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let out = dir.join("prog.out");
    let script = format!(
        "set -e; mkdir /atomfs/c; cd /atomfs/c; for f in Makefile util.h util.c main.c; do \
         cp {d}/$f .; done; make -s -j2; ls; cat prog > {out}",
        d = dir.display(),
        out = out.display()
    );
    let listing = ok(&sh(&dir, &script), "make");
    assert_eq!(
        listing,
        "Makefile\nmain.c\nmain.o\nprog\nutil.c\nutil.h\nutil.o\n"
    );
    std::fs::set_permissions(&out, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ran = Command::new(&out).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "42\n");
}
