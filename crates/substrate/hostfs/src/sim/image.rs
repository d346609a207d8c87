//! Crash images of a store directory: the tree of paths with their file contents.

use crate::{FileKind, HostFs, HostFsResult};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// One node of an image.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ImageNode {
    Dir,
    /// A file: its identity (hard links share it) and content.
    File {
        ino: u64,
        data: Vec<u8>,
    },
    /// A symbolic link and its target.
    Symlink {
        ino: u64,
        target: Vec<u8>,
    },
    /// A FIFO, socket or device node: its `S_IFMT` bits and device number.
    Special {
        ino: u64,
        mode_type: u32,
        rdev: u64,
    },
}

/// A store directory as a crash leaves it: every path (components joined by `/`) with its
/// node. Open it as a file system with [`SimHostFs::from_image`](super::SimHostFs::from_image).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostImage {
    pub nodes: BTreeMap<Vec<u8>, ImageNode>,
    /// Extended attributes by path (paths without any are left out).
    pub xattrs: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Permission bits by path (not compared by [`same_tree`](Self::same_tree): a real
    /// file system applies its umask to what it creates).
    pub perms: BTreeMap<Vec<u8>, u32>,
}

impl HostImage {
    /// The content of the file at `path`, if there is one.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        match self.nodes.get(path.as_bytes()) {
            Some(ImageNode::File { data, .. }) => Some(data),
            _ => None,
        }
    }

    /// True when both images have the same paths, kinds and contents (file identities are
    /// not compared: a real file system numbers its inodes its own way).
    pub fn same_tree(&self, other: &HostImage) -> bool {
        self.xattrs == other.xattrs
            && self.nodes.len() == other.nodes.len()
            && self
                .nodes
                .iter()
                .zip(&other.nodes)
                .all(|((pa, a), (pb, b))| {
                    pa == pb
                        && match (a, b) {
                            (ImageNode::Dir, ImageNode::Dir) => true,
                            (
                                ImageNode::File { data: da, .. },
                                ImageNode::File { data: db, .. },
                            ) => da == db,
                            (
                                ImageNode::Symlink { target: ta, .. },
                                ImageNode::Symlink { target: tb, .. },
                            ) => ta == tb,
                            (
                                ImageNode::Special {
                                    mode_type: ma,
                                    rdev: ra,
                                    ..
                                },
                                ImageNode::Special {
                                    mode_type: mb,
                                    rdev: rb,
                                    ..
                                },
                            ) => (ma, ra) == (mb, rb),
                            _ => false,
                        }
                })
    }

    /// Read the tree of any [`HostFs`] (files and directories; other kinds are skipped).
    pub fn read<F: HostFs>(fs: &F) -> HostFsResult<HostImage> {
        let mut image = HostImage::default();
        read_xattrs(fs, b"", &mut image)?;
        let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
        while let Some(dir) = stack.pop() {
            for entry in fs.read_dir(Path::new(OsStr::from_bytes(&dir)))? {
                let mut path = dir.clone();
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(&entry.name);
                match entry.kind {
                    FileKind::Dir => {
                        image.nodes.insert(path.clone(), ImageNode::Dir);
                        stack.push(path.clone());
                    }
                    FileKind::File => {
                        let data = read_file(fs, &path)?;
                        let ino = entry.ino;
                        image
                            .nodes
                            .insert(path.clone(), ImageNode::File { ino, data });
                    }
                    FileKind::Symlink => {
                        let target = fs.readlink(Path::new(OsStr::from_bytes(&path)))?;
                        let ino = entry.ino;
                        image
                            .nodes
                            .insert(path.clone(), ImageNode::Symlink { ino, target });
                    }
                    FileKind::Other => {
                        let st = fs.stat(Path::new(OsStr::from_bytes(&path)))?;
                        let node = ImageNode::Special {
                            ino: entry.ino,
                            mode_type: st.mode_type,
                            rdev: st.rdev,
                        };
                        image.nodes.insert(path.clone(), node);
                    }
                }
                read_xattrs(fs, &path, &mut image)?;
                if entry.kind != FileKind::Symlink {
                    let st = fs.stat(Path::new(OsStr::from_bytes(&path)))?;
                    image.perms.insert(path.clone(), st.perm);
                }
            }
        }
        Ok(image)
    }

    /// The extended attributes of the node at `path`.
    pub fn xattrs_of(&self, path: &str) -> Option<&BTreeMap<Vec<u8>, Vec<u8>>> {
        self.xattrs.get(path.as_bytes())
    }

    /// A short listing (path, length, first bytes), for failure messages.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for (path, node) in &self.nodes {
            let path = String::from_utf8_lossy(path);
            match node {
                ImageNode::Dir => out.push_str(&format!("{path}/ ")),
                ImageNode::File { data, .. } => {
                    let head: Vec<u8> = data.iter().take(8).copied().collect();
                    out.push_str(&format!("{path}[{}]{head:02x?} ", data.len()))
                }
                ImageNode::Symlink { target, .. } => {
                    out.push_str(&format!("{path}->{} ", String::from_utf8_lossy(target)))
                }
                ImageNode::Special {
                    mode_type, rdev, ..
                } => out.push_str(&format!("{path}({mode_type:o},{rdev}) ")),
            }
        }
        out
    }
}

fn read_file<F: HostFs>(fs: &F, path: &[u8]) -> HostFsResult<Vec<u8>> {
    let file = fs.open(
        Path::new(OsStr::from_bytes(path)),
        &crate::OpenOptions::read_only(),
    )?;
    let len = fs.file_stat(&file)?.len;
    let mut data = vec![0u8; len as usize];
    let n = fs.read_full_at(&file, 0, &mut data)?;
    data.truncate(n);
    Ok(data)
}

/// Add the extended attributes of `path` to `image` (none where the file system has none).
fn read_xattrs<F: HostFs>(fs: &F, path: &[u8], image: &mut HostImage) -> HostFsResult<()> {
    let p = Path::new(OsStr::from_bytes(path));
    let names = match fs.list_xattr(p) {
        Ok(names) => names,
        Err(e) if e.errno() == libc::EOPNOTSUPP => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut attrs = BTreeMap::new();
    for name in names {
        attrs.insert(name.clone(), fs.get_xattr(p, &name)?);
    }
    if !attrs.is_empty() {
        image.xattrs.insert(path.to_vec(), attrs);
    }
    Ok(())
}
