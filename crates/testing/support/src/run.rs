//! Run a program and insist on success.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// Run `prog ARGS` in `cwd`, failing the test with its output unless it succeeds; its stdout.
pub fn run<P: AsRef<OsStr>, A: AsRef<OsStr>>(prog: P, args: &[A], cwd: &Path) -> String {
    let out = Command::new(prog.as_ref())
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", prog.as_ref()));
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    checked(&out, &format!("{:?} {shown:?}", prog.as_ref()))
}

/// The stdout of a finished program, failing the test (naming it `what`) unless it succeeded.
pub fn checked(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
