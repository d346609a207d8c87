//! Path resolution through symbolic links in the Rust API (and `store::path`, which the C
//! API and the shim share): intermediate links followed, the last one followed by what acts
//! on the target (metadata, open, read, write) and not by what acts on the name
//! (symlink_metadata, remove_file, rename, read_link, O_NOFOLLOW), ELOOP past 40 links, and
//! absolute targets resolved from the store's root.

use atomfs::{Error, FileKind, Fs};
use std::sync::Arc;
use store::path::{resolve_entry, LastLink, SYMLOOP_MAX};

fn fs() -> Fs {
    Fs::from_store(Arc::new(conformance::ModelStore::new()))
}

#[test]
fn links_are_followed_where_posix_follows_them() -> atomfs::Result<()> {
    let fs = fs();
    fs.create_dir_all("/a/b")?;
    fs.write("/a/b/f", b"data")?;
    fs.symlink("b", "/a/lb")?; // relative: from the link's directory
    fs.symlink("/a/b/f", "/abs")?; // absolute: from the store's root
    fs.symlink("lb/f", "/a/chain")?;
    fs.symlink("../lb/../b/f", "/a/b/dots")?;
    assert_eq!(fs.read("/a/lb/f")?, b"data", "an intermediate link");
    assert_eq!(fs.read("/abs")?, b"data", "an absolute target");
    assert_eq!(
        fs.read("/a/chain")?,
        b"data",
        "a link to a path through a link"
    );
    assert_eq!(fs.read("/a/b/dots")?, b"data", ".. after a followed link");
    assert_eq!(fs.metadata("/a/chain")?.kind, FileKind::File);
    assert_eq!(fs.symlink_metadata("/a/chain")?.kind, FileKind::Symlink);
    assert_eq!(fs.metadata("/a/lb")?.kind, FileKind::Dir);
    assert_eq!(
        fs.metadata("/a/lb/")?.kind,
        FileKind::Dir,
        "a trailing / follows"
    );
    assert_eq!(fs.read_link("/a/lb")?, std::path::PathBuf::from("b"));
    assert_eq!(fs.read_dir("/a/lb")?.len(), 2);
    // Writing through a link writes the target; a link to a missing name creates it.
    fs.write("/abs", b"new")?;
    assert_eq!(fs.read("/a/b/f")?, b"new");
    fs.symlink("b/created", "/a/dangling")?;
    assert!(
        !fs.exists("/a/dangling")?,
        "a link to nothing names nothing"
    );
    fs.write("/a/dangling", b"made")?;
    assert_eq!(fs.read("/a/b/created")?, b"made");
    // Calls on the name do not follow.
    fs.rename("/a/chain", "/a/chain2")?;
    assert_eq!(fs.symlink_metadata("/a/chain2")?.kind, FileKind::Symlink);
    fs.remove_file("/a/chain2")?;
    assert_eq!(
        fs.read("/a/b/f")?,
        b"new",
        "removing a link keeps its target"
    );
    let hard = fs.hard_link("/abs", "/abs2")?;
    assert_eq!(
        hard.kind,
        FileKind::Symlink,
        "link(2) links the symlink itself"
    );
    Ok(())
}

#[test]
fn nofollow_and_loops_are_eloop() -> atomfs::Result<()> {
    let fs = fs();
    fs.write("/f", b"x")?;
    fs.symlink("f", "/l")?;
    fs.symlink("self", "/self")?;
    fs.symlink("b", "/a")?;
    fs.symlink("a", "/b")?;
    for p in ["/self", "/a", "/a/x", "/b/"] {
        match fs.metadata(p) {
            Err(e @ Error::SymlinkLoop(_)) => assert_eq!(e.errno(), libc::ELOOP),
            other => panic!("{p}: {other:?}"),
        }
    }
    match fs.read("/self") {
        Err(Error::SymlinkLoop(_)) => {}
        other => panic!("read of a loop: {other:?}"),
    }
    assert_eq!(fs.symlink_metadata("/self")?.kind, FileKind::Symlink);
    let store = fs.store().as_ref();
    let nofollow =
        store::OpenOptions::new()
            .read(true)
            .open_with(store, "/l", None, LastLink::NoFollow);
    assert!(
        matches!(nofollow, Err(Error::SymlinkLoop(_))),
        "{nofollow:?}"
    );
    let excl = store::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(store, "/l", None);
    assert!(
        matches!(excl, Err(Error::Exists(_))),
        "O_EXCL on a link: {excl:?}"
    );
    let entry = resolve_entry(store, b"/l", LastLink::NoFollow)?;
    assert_eq!(entry.meta.map(|m| m.kind), Some(FileKind::Symlink));
    Ok(())
}

#[test]
fn forty_links_resolve_and_forty_one_do_not() -> atomfs::Result<()> {
    let fs = fs();
    fs.write("/target", b"end")?;
    // l0 -> target, l1 -> l0, ..., l40 -> l39: resolving l39 follows 40 links.
    fs.symlink("target", "/l0")?;
    for i in 1..=SYMLOOP_MAX {
        fs.symlink(format!("l{}", i - 1), format!("/l{i}"))?;
    }
    assert_eq!(fs.read(format!("/l{}", SYMLOOP_MAX - 1))?, b"end");
    match fs.read(format!("/l{SYMLOOP_MAX}")) {
        Err(Error::SymlinkLoop(_)) => {}
        other => panic!("41 links: {other:?}"),
    }
    Ok(())
}

#[test]
fn absolute_targets_stay_inside_the_store() -> atomfs::Result<()> {
    let fs = fs();
    fs.create_dir_all("/etc")?;
    fs.write("/etc/passwd", b"the store's own")?;
    fs.symlink("/etc/passwd", "/p")?;
    fs.symlink("../../../../etc/passwd", "/up")?;
    assert_eq!(fs.read("/p")?, b"the store's own");
    assert_eq!(
        fs.read("/up")?,
        b"the store's own",
        ".. stops at the store's root"
    );
    Ok(())
}

#[test]
fn attributes_and_rename_modes_by_path() -> atomfs::Result<()> {
    let fs = fs();
    fs.write("/a", b"a")?;
    fs.write("/b", b"b")?;
    fs.symlink("a", "/la")?;
    fs.set_xattr("/la", "user.k", b"v")?; // on the target: links followed
    assert_eq!(fs.xattr("/a", "user.k")?, b"v");
    assert_eq!(fs.list_xattr("/a")?, vec![b"user.k".to_vec()]);
    fs.remove_xattr("/a", "user.k")?;
    assert!(matches!(
        fs.xattr("/a", "user.k"),
        Err(Error::NoAttribute(_))
    ));
    let refused = fs.rename_with("/a", "/b", store::RenameMode::NoReplace);
    assert!(matches!(refused, Err(Error::Exists(_))), "{refused:?}");
    fs.rename_with("/a", "/b", store::RenameMode::Exchange)?;
    assert_eq!(
        (fs.read("/a")?, fs.read("/b")?),
        (b"b".to_vec(), b"a".to_vec())
    );
    Ok(())
}
