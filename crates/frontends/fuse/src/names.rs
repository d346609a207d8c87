//! The handlers that give the kernel entries (lookup, create, mkdir, symlink, link,
//! readdirplus) or take names away (unlink, rmdir, rename): each holds the node table's lock
//! across its store call, so that the table learns of a freed inode number before the store
//! can hand it out again ([`crate::nodes`]).
//!
//! The reply goes out after the lock is dropped. Two replies naming one inode number can
//! then reach the kernel in another order than the table saw them, but not two that matter:
//! an entry of a file and the removal of that file's last name are ordered by the kernel
//! itself, which holds the directory (or the file) locked from the request to the reply; the
//! one lookup it sends unlocked, the revalidation of a cached name, only compares the node id
//! and generation with the inode it has. The lookup count is added before the reply is sent,
//! so a `forget` never finds fewer lookups than the kernel holds.

use crate::fs::{errno, AtomFuse};
use crate::nodes::Nodes;
use crate::txns::Touched;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, ReplyCreate,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, Request,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use store::{Error, FileKind, Ino, Metadata, TxId};

/// How a new file gets its inode: the store call of mkdir, mknod, symlink, create.
pub(crate) type Make<'a> = &'a dyn Fn() -> Result<Metadata, Error>;

/// Where a new file is made: its directory, its name, and the caller's transaction.
pub(crate) type Place<'a> = (Ino, &'a [u8], Option<TxId>);

/// The attributes of a negative entry: only the node id 0 matters to the kernel.
fn negative_attr() -> FileAttr {
    let epoch = std::time::UNIX_EPOCH;
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: epoch,
        mtime: epoch,
        ctime: epoch,
        crtime: epoch,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

impl AtomFuse {
    /// ESTALE when the kernel asks by a node id whose file the store freed.
    pub(crate) fn check_node(&self, ino: Ino) -> Result<(), Errno> {
        if self.nodes.lock().is_removed(ino) {
            return Err(Errno::from_i32(libc::ESTALE));
        }
        Ok(())
    }

    /// LOOKUP: one more lookup of the file found.
    pub(crate) fn lookup_entry(&self, parent: Ino, name: &OsStr, reply: ReplyEntry) {
        let found = {
            let mut nodes = self.nodes.lock();
            let found = self.store.lookup(parent, name.as_bytes());
            found.map(|m| (nodes.looked_up(m.ino), m))
        };
        match found {
            Ok((generation, m)) => {
                reply.entry(&self.ttl, &self.attr(&m), Generation(generation));
            }
            // A negative entry (node id 0) the kernel may keep for the timeout: the next
            // lookup of the same missing name (a PATH search, a probe for a lock file) needs
            // no request. Names appear only through this mount, which updates the entry.
            Err(Error::NotFound(_)) => reply.entry(&self.ttl, &negative_attr(), Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// MKDIR, MKNOD and SYMLINK: make the file, give it to the caller, reply with a new
    /// generation.
    pub(crate) fn new_entry(
        &self,
        req: &Request,
        (parent, name, tx): Place<'_>,
        make: Make<'_>,
        reply: ReplyEntry,
    ) {
        let made = {
            let mut nodes = self.nodes.lock();
            let made = make().and_then(|m| {
                self.tx_created(tx, parent, name, m.ino);
                self.own(req, m, tx)
            });
            made.map(|m| (nodes.created(m.ino), m))
        };
        match made {
            Ok((generation, m)) => {
                reply.entry(&self.ttl, &self.attr(&m), Generation(generation));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// CREATE: make the file and open it.
    pub(crate) fn create_entry(
        &self,
        req: &Request,
        (parent, name, tx): Place<'_>,
        make: Make<'_>,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let result = {
            let mut nodes = self.nodes.lock();
            let result = make()
                .and_then(|m| {
                    self.tx_created(tx, parent, name, m.ino);
                    self.own(req, m, tx)
                })
                .and_then(|m| {
                    let (fh, _) = self.open_handle(m.ino, flags, tx)?;
                    Ok((m, fh))
                });
            result.map(|(m, fh)| (nodes.created(m.ino), m, fh))
        };
        match result {
            Ok((generation, m, fh)) => {
                reply.created(
                    &self.ttl,
                    &self.attr(&m),
                    Generation(generation),
                    FileHandle(fh),
                    FopenFlags::empty(),
                );
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// LINK: one more name, and one more lookup, of an existing file.
    pub(crate) fn link_entry(
        &self,
        ino: Ino,
        new_parent: Ino,
        name: &OsStr,
        tx: Option<TxId>,
        reply: ReplyEntry,
    ) {
        let linked = {
            let mut nodes = self.nodes.lock();
            if nodes.is_removed(ino) {
                return reply.error(Errno::from_i32(libc::ESTALE));
            }
            let linked = self.store.link(ino, new_parent, name.as_bytes(), tx);
            if linked.is_ok() {
                self.touched(tx, Touched::Entry(new_parent, name.as_bytes().to_vec()));
                self.touched(tx, Touched::Inode(ino));
            }
            linked.map(|m| (nodes.looked_up(m.ino), m))
        };
        match linked {
            Ok((generation, m)) => {
                reply.entry(&self.ttl, &self.attr(&m), Generation(generation));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// UNLINK and RMDIR.
    pub(crate) fn remove_entry(
        &self,
        parent: Ino,
        name: &OsStr,
        kind: FileKind,
        tx: Option<TxId>,
        reply: ReplyEmpty,
    ) {
        let name = name.as_bytes();
        let result = {
            let mut nodes = self.nodes.lock();
            let result = self.store.lookup(parent, name).and_then(|victim| {
                match kind {
                    FileKind::Dir => self.store.rmdir(parent, name, tx)?,
                    _ => self.store.unlink(parent, name, tx)?,
                }
                self.touched(tx, Touched::Entry(parent, name.to_vec()));
                self.touched(tx, Touched::Inode(victim.ino));
                Ok(victim.ino)
            });
            result.map(|ino| self.note_unlinked(&mut nodes, ino))
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// RENAME; `rename` is the store call(s). The file the new name named before, if any,
    /// lost a name.
    pub(crate) fn rename_entry(
        &self,
        new_parent: Ino,
        new_name: &OsStr,
        rename: &dyn Fn() -> Result<(), Error>,
        reply: ReplyEmpty,
    ) {
        let result = {
            let mut nodes = self.nodes.lock();
            let replaced = self.store.lookup(new_parent, new_name.as_bytes()).ok();
            rename().map(|()| {
                if let Some(m) = replaced {
                    self.note_unlinked(&mut nodes, m.ino);
                }
            })
        };
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// A name of `ino` went: record in the table whether the store freed the file (an
    /// unlinked file still open stays until its last release, as do its other names).
    fn note_unlinked(&self, nodes: &mut Nodes, ino: Ino) {
        if !nodes.is_held(ino) {
            return;
        }
        if let Err(Error::NotFound(_)) = self.store.getattr(ino) {
            nodes.removed(ino);
        }
    }

    /// FORGET and BATCH_FORGET.
    pub(crate) fn forget_lookups(&self, forgets: impl Iterator<Item = (Ino, u64)>) {
        let mut nodes = self.nodes.lock();
        for (ino, count) in forgets {
            nodes.forget(ino, count);
        }
    }

    /// READDIRPLUS: each entry of the listing taken at opendir is looked up again, so that a
    /// name removed since is left out and one that names another file now gives that file.
    /// `.` and `..` carry no lookup (the kernel does not count them).
    pub(crate) fn readdirplus_entries(
        &self,
        dir: Ino,
        list: &[(Vec<u8>, Ino, FileKind)],
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let mut nodes = self.nodes.lock();
        for (i, (name, ino, _)) in list.iter().enumerate() {
            let dots = name == b"." || name == b"..";
            let found = if dots {
                self.store.getattr(*ino)
            } else {
                self.store.lookup(dir, name)
            };
            let Ok(meta) = found else {
                continue;
            };
            let generation = if dots { 0 } else { nodes.looked_up(meta.ino) };
            let next = offset + i as u64 + 1;
            let attr = self.attr(&meta);
            let full = reply.add(
                attr.ino,
                next,
                OsStr::from_bytes(name),
                &self.ttl,
                &attr,
                Generation(generation),
            );
            if full {
                // Not sent: the kernel will not count it.
                if !dots {
                    nodes.forget(meta.ino, 1);
                }
                break;
            }
        }
        drop(nodes);
        reply.ok();
    }
}
