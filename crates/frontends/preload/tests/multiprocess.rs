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
