//! The system C compiler, for the tests of the C front ends: compile against the headers in a
//! crate and the libraries cargo built in `target/<profile>`.

use crate::env::unavailable;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`, where cargo puts the cdylibs and static libraries (libatomfs.so,
/// libatomfs_preload.so, libatomfs_sqlite.so): the parent of the test executable's `deps/`.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// Whether `cc` runs; when it does not, says so through [`unavailable`].
pub fn have_cc() -> bool {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        unavailable(
            "C compiler",
            "no `cc` (install build-essential: scripts/install-deps.sh)",
        );
    }
    ok
}

/// Run `cc ARGS`, failing the test with the compiler's messages unless it succeeds.
pub fn cc<S: AsRef<std::ffi::OsStr>>(args: &[S]) {
    let out = Command::new("cc").args(args).output().expect("run cc");
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    assert!(
        out.status.success(),
        "cc {shown:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compile the C file `src` into the program `out` with warnings as errors, `-I include`,
/// and `flags` (standard, libraries) after the source.
pub fn compile(src: &Path, out: &Path, include: &Path, flags: &[&str]) {
    let mut args = vec![
        "-Wall".to_string(),
        "-Werror".to_string(),
        format!("-I{}", include.display()),
        src.display().to_string(),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    args.push("-o".into());
    args.push(out.display().to_string());
    cc(&args);
}
