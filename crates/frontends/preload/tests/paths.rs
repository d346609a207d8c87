//! The shim's confinement, as a table of hostile path forms checked against the kernel.
//!
//! A scratch directory holds a real directory at the prefix's place, filled with the same
//! tree the store gets (files saying `disk:<path>` there, `pool:<path>` in the store), a
//! directory and a look-alike beside it with files saying `outside:...`, and a symbolic
//! link to the prefix's parent. The probe program (tests/c/paths.c) runs the same list of
//! operations twice: without the shim, where the kernel walks the real directories, and
//! under the shim. Whatever the kernel found under the prefix must come from the store
//! under the shim, everything else must be exactly what the kernel found: same file, same
//! error. Three runs: the prefix spelled plainly; spelled through the symbolic link (the
//! shim must also serve its resolved spelling, which is what `getcwd` and `/proc/self/fd`
//! give); and a path that reaches the prefix through a link the prefix does not name,
//! which the shim leaves to the kernel.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;
use test_support::cc::{have_cc, lib_dir};

fn probe_binary(dir: &Path) -> Option<PathBuf> {
    if !have_cc() {
        return None;
    }
    let exe = dir.join("paths-probe");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/paths.c");
    let args = [
        "-std=c99".as_ref(),
        "-Wall".as_ref(),
        "-Werror".as_ref(),
        "-o".as_ref(),
        exe.as_os_str(),
        src.as_os_str(),
    ];
    test_support::cc::cc(&args);
    Some(exe)
}

/// The scratch layout of one run.
struct Layout {
    /// Removed when the layout goes (kept when the test fails).
    _scratch: test_support::Scratch,
    root: PathBuf,
    /// The prefix's real place: `root/real/store`.
    store: PathBuf,
}

impl Layout {
    fn new(name: &str) -> Layout {
        let scratch = test_support::scratch(&format!("preload-{name}"));
        let root = scratch.to_path_buf();
        let store = root.join("real/store");
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/x"), "outside:x\n").unwrap();
        std::fs::write(root.join("outside/file"), "outside:file\n").unwrap();
        std::fs::create_dir_all(root.join("real/storex")).unwrap();
        std::fs::write(root.join("real/storex/f"), "outside:storex\n").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("plink")).unwrap();
        Layout {
            _scratch: scratch,
            root,
            store,
        }
    }

    /// The tree every run puts under the prefix (as probe operations), with `tag` in it.
    fn tree(prefix: &str, tag: &str) -> Vec<String> {
        vec![
            format!("mkdir:{prefix}"),
            format!("mkdir:{prefix}/d"),
            format!("mkdir:{prefix}/d/e"),
            format!("put:{prefix}/f={tag}:/f\n"),
            format!("put:{prefix}/d/g={tag}:/d/g\n"),
            format!("put:{prefix}/d/e/h={tag}:/d/e/h\n"),
        ]
    }

    fn run(&self, probe: &Path, shim_prefix: Option<&str>, ops: &[String]) -> String {
        let mut cmd = Command::new(probe);
        cmd.args(ops).current_dir(&self.root);
        if let Some(prefix) = shim_prefix {
            cmd.env("LD_PRELOAD", lib_dir().join("libatomfs_preload.so"))
                .env("ATOMFS_POOL", self.root.join("pool"))
                .env("ATOMFS_PREFIX", prefix)
                .env("ATOMFS_CREATE_SIZE", "0");
        }
        let out = cmd.output().expect("run probe");
        assert!(
            out.status.success(),
            "probe failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("probe output is text")
    }
}

/// The table: every form of path an attacker (or a careless program) may hand the shim.
/// `p` is the prefix as the paths spell it, `r` the scratch root.
fn table(p: &str, r: &str) -> Vec<String> {
    let long_name = "n".repeat(256);
    let deep = format!("{p}/{}f", "a/".repeat(2100));
    let mut ops: Vec<String> = [
        // Absolute forms that stay inside.
        "open:{p}/f",
        "open:{p}//f",
        "open:{p}/./f",
        "open:{p}/d/../f",
        "open:{p}/d/./g",
        "open:{p}/d/e/h",
        "open:{p}/d/e/../../f",
        "open:/{p}/d/g",
        "open:{p}",
        "open:{p}/",
        "open:{p}/.",
        "open:{p}/d/",
        "open:{p}/d/..",
        // Trailing slashes and `..` after a file: the kernel says ENOTDIR.
        "open:{p}/f/",
        "open:{p}/f/.",
        "open:{p}/f/..",
        "open:{p}/f/../g",
        "stat:{p}/f/",
        "open:{p}/missing",
        "open:{p}/missing/../f",
        // Leaving the prefix, and coming back.
        "open:{p}/..",
        "open:{p}/../../outside/x",
        "open:{p}/d/../../../outside/x",
        "open:{p}/d/e/../../../../outside/x",
        "open:{p}/../../outside/file/../x",
        "open:{p}/../store/f",
        "open:{p}/d/e/../../../store/d/g",
        "stat:{p}/../../outside/x",
        "stat:{p}/..",
        // Look-alikes of the prefix.
        "open:{r}/real/storex/f",
        "open:{r}/real/stor",
        "open:{p}x/f",
        // Names and paths too long.
        "open:{p}/{long}",
        "open:{deep}",
        // Creation.
        "create:{p}/new",
        "create:{p}/new",
        "create:{p}/newdir/",
        "create:{p}/../../outside/new",
        "stat:{p}/new",
        "stat:{r}/outside/new",
        // Relative paths from a working directory beside, inside and below the prefix.
        "cd:{r}/real",
        "open:store/f",
        "open:./store/d/../f",
        "open:../real/store/d/g",
        "open:store/../../outside/x",
        "open:storex/f",
        "open:store/f/..",
        "cd:{p}",
        "open:f",
        "open:../store/d/g",
        "open:../../outside/x",
        "open:d/e/h",
        "open:.",
        "stat:..",
        "cd:{p}/d",
        "open:../f",
        "open:e/../g",
        "open:../../storex/f",
        "cd:{r}/outside",
        "open:../real/store/f",
        "open:x",
        // *at calls from a directory of the store.
        "dirfd:{p}/d",
        "at:g",
        "at:../f",
        "at:e/../g",
        "at:../../../outside/x",
        "at:../../../outside/file/../x",
        "at:{p}/f",
        "at:{r}/outside/x",
        "statat:../f",
        "statat:../../storex",
        "dirfd:{p}",
        "at:d/e/h",
        "at:./f",
        "at:..",
        // *at calls from a kernel directory outside that lead into the prefix.
        "realdir:{r}/real",
        "at:store/f",
        "at:store/../store/d/g",
        "at:storex/f",
        "statat:store/d",
        "realdir:{r}/outside",
        "at:../real/store/f",
        "at:x",
    ]
    .iter()
    .map(|op| {
        op.replace("{p}", p)
            .replace("{r}", r)
            .replace("{long}", &long_name)
            .replace("{deep}", &deep)
    })
    .collect();
    ops.push(format!("cd:{r}"));
    ops
}

/// Run the table under the kernel and under the shim and compare line by line.
fn check(
    name: &str,
    shim_prefix_of: impl Fn(&Layout) -> String,
    spelled: impl Fn(&Layout) -> String,
) {
    let layout = Layout::new(name);
    let Some(probe) = probe_binary(&layout.root) else {
        return;
    };
    let r = layout.root.to_str().unwrap().to_string();
    let p = spelled(&layout);
    let shim_prefix = shim_prefix_of(&layout);
    let ops = table(&p, &r);
    assert!(ops.len() >= 80, "the table has {} operations", ops.len());

    // The kernel's view: the real directory at the prefix's place.
    let setup = layout.run(
        &probe,
        None,
        &Layout::tree(layout.store.to_str().unwrap(), "disk"),
    );
    assert_eq!(setup, "", "setting up the real tree");
    let kernel = layout.run(&probe, None, &ops);
    // Undo what the kernel run created outside, so that the shim run starts alike.
    let _ = std::fs::remove_file(layout.root.join("outside/new"));
    let _ = std::fs::remove_file(layout.store.join("new"));

    // The shim's view: the same tree in the store, the real one still there.
    let mut all = Layout::tree(&shim_prefix, "pool");
    all.remove(0); // the store's root exists
    all.extend(ops.iter().cloned());
    let shim = layout.run(&probe, Some(&shim_prefix), &all);

    let expected = kernel.replace("disk:", "pool:");
    let (exp, got): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), shim.lines().collect());
    let mut wrong = Vec::new();
    for (i, (e, g)) in exp.iter().zip(&got).enumerate() {
        if e != g {
            let short = |s: &str| s.chars().take(160).collect::<String>();
            wrong.push(format!(
                "  #{i}: kernel: {}\n       shim:   {}",
                short(e),
                short(g)
            ));
        }
    }
    assert!(
        wrong.is_empty() && exp.len() == got.len(),
        "{name}: {} of {} operations differ from the kernel ({} vs {} lines):\n{}",
        wrong.len(),
        exp.len(),
        exp.len(),
        got.len(),
        wrong.join("\n")
    );
    // The store really served them: the disk copy was never read under the shim.
    assert!(
        !shim.contains("disk:"),
        "{name}: the shim let the real directory through"
    );
    let served = shim.matches("pool:").count();
    assert!(
        served >= 25,
        "{name}: only {served} reads came from the store"
    );
    // And the kernel run really reached the prefix's place.
    assert!(
        kernel.matches("disk:").count() >= 25,
        "{name}: the kernel run saw too little"
    );
}

#[test]
fn hostile_paths_match_the_kernel() {
    check(
        "paths-plain",
        |l| l.store.to_str().unwrap().to_string(),
        |l| l.store.to_str().unwrap().to_string(),
    );
}

#[test]
fn a_prefix_spelled_through_a_symlink_serves_both_spellings() {
    let via_link = |l: &Layout| l.root.join("plink/store").to_str().unwrap().to_string();
    // Paths spelled through the link, as the prefix is.
    check("paths-link", via_link, via_link);
    // Paths spelled with the link resolved (what getcwd and /proc/self/fd return).
    check("paths-link-resolved", via_link, |l| {
        l.store.to_str().unwrap().to_string()
    });
}

/// A path through a symbolic link the prefix does not name is the kernel's: the shim does
/// not resolve the host's links (said in docs/security.md). Under the shim it reaches the
/// real directory, exactly as without it.
#[test]
fn a_link_the_prefix_does_not_name_is_left_to_the_kernel() {
    let layout = Layout::new("paths-unnamed-link");
    let Some(probe) = probe_binary(&layout.root) else {
        return;
    };
    let store = layout.store.to_str().unwrap().to_string();
    layout.run(&probe, None, &Layout::tree(&store, "disk"));
    let link = layout.root.join("plink/store/f");
    let ops = vec![format!("open:{}", link.display())];
    let kernel = layout.run(&probe, None, &ops);
    let shim = layout.run(&probe, Some(&store), &ops);
    assert_eq!(kernel, format!("open:{} => disk:/f\n", link.display()));
    assert_eq!(shim, kernel);
}
