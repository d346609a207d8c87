//! Builds the C programs of this crate with the system C compiler against the freshly built
//! `libatomfs.so` / `libatomfs.a` and runs them: the header alone with -Wall -Werror
//! -std=c99 -pedantic, the seed's Figure 1, `api_test.c` (every call and its error paths) and
//! `umask_test.c` (the umask applied to created files and directories).
//! Skips with a message when no C compiler is installed (a failure under `ATOMFS_REQUIRE_ALL=1`).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;
use test_support::cc::{cc, have_cc, lib_dir};
use test_support::unavailable;

fn scratch(name: &str) -> test_support::Scratch {
    test_support::scratch(&format!("capi-{name}"))
}

/// Print why a test cannot run here; with `ATOMFS_REQUIRE_ALL=1` that is a failure instead.
fn skip(why: &str) {
    unavailable("C API", why);
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compile `src` into `out` against the freshly built libatomfs.so (C99, warnings as errors).
fn build_against_lib(src: &Path, out: &Path) {
    let lib = format!("-L{}", lib_dir().display());
    cc(&[
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        &include(),
        src.to_str().unwrap(),
        &lib,
        "-latomfs",
        "-o",
        out.to_str().unwrap(),
    ]);
}

fn run(exe: &Path, args: &[&str]) -> String {
    let out = Command::new(exe)
        .args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run program");
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\nstdout: {}\nstderr: {}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn include() -> String {
    format!("-I{}", crate_dir().join("include").display())
}

#[test]
fn header_is_c99_clean() {
    if !have_cc() {
        return;
    }
    let dir = scratch("header");
    let src = dir.join("h.c");
    std::fs::write(
        &src,
        "#include \"atomfs.h\"\nint main(void) { return ATOMFS_O_ATOMIC == 0; }\n",
    )
    .unwrap();
    let obj = dir.join("h.o");
    for std in ["-std=c99", "-std=c11"] {
        cc(&[
            std,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            &include(),
            "-c",
            src.to_str().unwrap(),
            "-o",
            obj.to_str().unwrap(),
        ]);
    }
}

#[test]
fn figure1_updates_two_files_atomically() {
    if !have_cc() {
        return;
    }
    let dir = scratch("figure1");
    let exe = dir.join("figure1");
    build_against_lib(&crate_dir().join("examples/figure1.c"), &exe);
    let src = crate_dir().join("examples/figure1.c");
    let pool = dir.join("fig.pool");
    assert_eq!(
        run(&exe, &[pool.to_str().unwrap()]),
        "file1=data1 file2=data2\n"
    );
    // Again on the existing pool, from a fresh process: the data is there and the update repeats.
    assert_eq!(
        run(&exe, &[pool.to_str().unwrap()]),
        "file1=data1 file2=data2\n"
    );

    // The static library works the same.
    let static_exe = dir.join("figure1-static");
    let archive = lib_dir().join("libatomfs.a");
    cc(&[
        "-std=c99",
        &include(),
        src.to_str().unwrap(),
        archive.to_str().unwrap(),
        "-lpthread",
        "-ldl",
        "-lm",
        "-o",
        static_exe.to_str().unwrap(),
    ]);
    let pool2 = dir.join("fig2.pool");
    assert_eq!(
        run(&static_exe, &[pool2.to_str().unwrap()]),
        "file1=data1 file2=data2\n"
    );
}

#[test]
fn api_test_exercises_every_call_and_error_path() {
    if !have_cc() {
        return;
    }
    let dir = scratch("api");
    let exe = dir.join("api_test");
    let src = crate_dir().join("tests/c/api_test.c");
    build_against_lib(&src, &exe);
    let out = run(&exe, &[dir.to_str().unwrap()]);
    let checks: u32 = out
        .strip_prefix("api_test: ")
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output {out:?}"));
    assert!(checks > 300, "only {checks} checks ran");
}

/// `posix_test POOL AWAITED`: the rest of the POSIX file API, its parts listed in AWAITED
/// checked to answer EOPNOTSUPP. Returns the number of checks.
fn posix_test(pool: &Path, awaited: &[conformance::cases::Feature]) -> u32 {
    let dir = scratch("posix-exe");
    let exe = dir.join("posix_test");
    build_against_lib(&crate_dir().join("tests/c/posix_test.c"), &exe);
    let list: Vec<String> = awaited.iter().map(|f| format!("{f:?}")).collect();
    let out = run(&exe, &[pool.to_str().unwrap(), &list.join(",")]);
    eprint!("{out}");
    out.lines()
        .filter(|l| l.contains(" checks ok"))
        .find_map(|l| l.strip_prefix("posix_test: "))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output {out:?}"))
}

/// Over a pool: what the pool offers is checked in full, the rest answers EOPNOTSUPP (the
/// list comes from conformance::cases::awaited, so this tightens as the pool catches up).
#[test]
fn posix_calls_on_a_pool() {
    if !have_cc() {
        return skip("no C compiler");
    }
    let dir = scratch("posix-pool");
    let pool = dir.join("p.pool");
    let opts = engines::Options::new().with("size", (64u64 << 20).to_string());
    let opened = engines::create(&pool, "pool", &opts).expect("create pool");
    opened.store.unmount().expect("unmount");
    drop(opened);
    let checks = posix_test(&pool, conformance::cases::awaited("pool"));
    assert!(checks >= 12, "only {checks} checks ran");
}

/// Over mmio (host files beside a log pool), a real engine that offers what its
/// `awaited` list does not name.
#[test]
fn posix_calls_on_mmio() {
    if !have_cc() {
        return skip("no C compiler");
    }
    let dir = scratch("posix-mmio");
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    let pool = dir.join("log.pool");
    let opts = engines::Options::new()
        .with("home", home.display().to_string())
        .with("size", (32u64 << 20).to_string());
    let opened = engines::create(&pool, "mmio", &opts).expect("create mmio");
    opened.store.unmount().expect("unmount");
    drop(opened);
    let awaited = conformance::cases::awaited("mmio");
    let checks = posix_test(&pool, awaited);
    assert!(checks > 12, "only {checks} checks ran");
}

/// Over the reference model, which offers every call: the C program opens a pool file whose
/// lock this test holds, so its open becomes a client of the server this test runs on the
/// pool's socket — a server of a ModelStore (docs/serve.md).
#[test]
fn posix_calls_on_the_reference_model() {
    if !have_cc() {
        return skip("no C compiler");
    }
    let dir = scratch("posix-model");
    let pool = dir.join("m.pool");
    let opts = engines::Options::new().with("size", (16u64 << 20).to_string());
    let opened = engines::create(&pool, "pool", &opts).expect("create pool");
    opened.store.unmount().expect("unmount");
    drop(opened);
    let _lock = engines::StoreLock::acquire(&pool).expect("lock the pool file");
    let model = std::sync::Arc::new(conformance::ModelStore::new());
    let server = remote::serve(model.clone(), &remote::socket_for(&pool)).expect("serve");
    let checks = posix_test(&pool, &[]);
    assert!(checks > 100, "only {checks} checks ran");
    // What the program left is in the model: the published unnamed file, the swapped names.
    let read = |p: &str| store::path::read_file(&*model, p).expect(p);
    assert_eq!(read("/pub"), b"published");
    assert_eq!(read("/y"), b"y");
    assert_eq!(read("/d/made"), b"through");
    server.stop();
}

#[test]
fn created_files_and_directories_get_the_process_umask() {
    if !have_cc() {
        return;
    }
    let dir = scratch("umask");
    let exe = dir.join("umask_test");
    let src = crate_dir().join("tests/c/umask_test.c");
    build_against_lib(&src, &exe);
    let pool = dir.join("umask.pool");
    // mask, then file 0666, directory 0777, file 0640, directory 0750 after the mask.
    assert_eq!(
        run(&exe, &[pool.to_str().unwrap()]),
        "022 644 755 640 750\n077 600 700 600 700\n027 640 750 640 750\n000 666 777 640 750\n"
    );
}

#[test]
fn install_script_and_pkg_config() {
    if !have_cc() {
        return;
    }
    if !lib_dir().join("libatomfs_preload.so").exists() {
        skip(&format!(
            "libatomfs_preload.so not built in {} (cargo build -p atomfs-preload)",
            lib_dir().display()
        ));
        return;
    }
    let have_pkg_config = Command::new("pkg-config")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_pkg_config {
        skip("pkg-config missing (scripts/install-deps.sh)");
        return;
    }
    let dir = scratch("install");
    let prefix = dir.join("prefix");
    let script = crate_dir().join("../../../scripts/install-c.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&prefix)
        .env("ATOMFS_LIB_DIR", lib_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "install-c.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "include/atomfs.h",
        "lib/libatomfs.so",
        "lib/libatomfs.a",
        "lib/libatomfs_preload.so",
        "lib/pkgconfig/atomfs.pc",
    ] {
        assert!(prefix.join(f).exists(), "{f} not installed");
    }
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "atomfs"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .unwrap();
    assert!(pc.status.success());
    let flags = String::from_utf8_lossy(&pc.stdout).into_owned();
    let exe = dir.join("figure1");
    let src = crate_dir().join("examples/figure1.c");
    let mut args = vec![
        "-std=c99",
        "-Wall",
        "-Werror",
        src.to_str().unwrap(),
        "-o",
        exe.to_str().unwrap(),
    ];
    args.extend(flags.split_whitespace());
    cc(&args);
    // Runs from the installed library (rpath from the .pc file), not from target/.
    let out = Command::new(&exe)
        .arg(dir.join("p.pool"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "file1=data1 file2=data2\n"
    );
    sqlite_extension_loads_from(&prefix.join("lib"), &dir);
}

/// The installed SQLite extension (when libsqlite3-dev made one installable) loads from the
/// prefix alone, finding the installed libatomfs.so, and serves a database.
fn sqlite_extension_loads_from(libdir: &Path, dir: &Path) {
    let ext = libdir.join("libatomfs_sqlite.so");
    if !ext.exists() {
        skip("libatomfs_sqlite.so not installed (no sqlite3ext.h)");
        return;
    }
    let script = format!(
        ".load {}\n.open file:/t.db?vfs=atomfs&pool={}\nCREATE TABLE t(x);\nINSERT INTO t VALUES (7);\nSELECT x FROM t;\n",
        ext.with_extension("").display(),
        dir.join("sqlite.pool").display()
    );
    let child = Command::new("sqlite3")
        .arg("-batch")
        .env_remove("LD_LIBRARY_PATH")
        .env("ATOMFS_CREATE_SIZE", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        skip("no sqlite3 shell");
        return;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "7\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const MAKE_STORE_C: &str = r#"
#include <atomfs.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    atomfs_pool *p = atomfs_create(argv[1], argv[2], argv[3]);
    if (!p) { fprintf(stderr, "atomfs_create: %s\n", strerror(errno)); return 1; }
    return atomfs_pool_close(p) == 0 ? 0 : 1;
}
"#;

#[test]
fn figure1_runs_on_an_mmio_store_made_by_atomfs_create() {
    if !have_cc() {
        return;
    }
    let dir = scratch("figure1-mmio");
    let make = dir.join("make_store");
    let make_src = dir.join("make_store.c");
    std::fs::write(&make_src, MAKE_STORE_C).unwrap();
    build_against_lib(&make_src, &make);
    let exe = dir.join("figure1");
    build_against_lib(&crate_dir().join("examples/figure1.c"), &exe);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let pool = dir.join("m.pool");
    let options = format!("home={},size=32M", home.display());
    run(&make, &[pool.to_str().unwrap(), "mmio", &options]);
    // Bad engine or option: EINVAL, nothing created.
    let bad = dir.join("bad.pool");
    for (engine, opts) in [("nosuch", ""), ("pool", "colour=red"), ("mmio", "")] {
        let out = std::process::Command::new(&make)
            .args([bad.to_str().unwrap(), engine, opts])
            .env("LD_LIBRARY_PATH", lib_dir())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{engine} {opts} accepted");
        assert!(!bad.exists(), "{engine} {opts} left a file");
    }
    // figure1 opens the store by its path alone and updates both files atomically; the
    // files are plain files in the home directory.
    assert_eq!(
        run(&exe, &[pool.to_str().unwrap()]),
        "file1=data1 file2=data2\n"
    );
    let names: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".atomfs"))
        .collect();
    assert!(!names.is_empty(), "no file in the home directory");
    assert_eq!(
        run(&exe, &[pool.to_str().unwrap()]),
        "file1=data1 file2=data2\n"
    );
}
