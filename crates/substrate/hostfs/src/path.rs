//! Validation of caller-supplied paths.
//!
//! Every path a [`HostFs`](crate::HostFs) receives is relative to the store directory and is
//! checked before any system call: it must be relative, each component must be non-empty, not
//! `.` or `..`, free of NUL bytes and at most [`NAME_LEN_MAX`] bytes, the whole path at most
//! [`PATH_LEN_MAX`] bytes and [`DEPTH_MAX`] components. The empty path names the store
//! directory itself and is accepted only where a directory is meant (`sync_dir`, `read_dir`,
//! `stat`). Paths read back from a log are untrusted input: this check and the kernel-side
//! jail (`RESOLVE_BENEATH`) both stand between them and the rest of the host.

use crate::{HostFsError, HostFsResult};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Longest path component in bytes (Linux `NAME_MAX`).
pub const NAME_LEN_MAX: usize = 255;
/// Longest path in bytes (Linux `PATH_MAX` less the terminating NUL).
pub const PATH_LEN_MAX: usize = 4095;
/// Most components in a path: as many as [`PATH_LEN_MAX`] bytes hold (`a/a/…/a`), so the
/// path's length is the one bound on depth, as in the kernel (and in `store::path`).
pub const DEPTH_MAX: usize = PATH_LEN_MAX / 2 + 1;

/// Why a path is refused for its length or depth: ENAMETOOLONG rather than EINVAL.
pub(crate) const TOO_LONG: &str = "longer than 4095 bytes";
pub(crate) const TOO_DEEP: &str = "more than 2048 components";
const _: () = assert!(DEPTH_MAX == 2048 && PATH_LEN_MAX == 4095);

/// A validated relative path: its components, each a valid file name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath {
    components: Vec<Vec<u8>>,
}

fn refuse(path: &Path, reason: &'static str) -> HostFsError {
    HostFsError::InvalidPath {
        path: format!("{:?}", path.as_os_str()),
        reason,
    }
}

impl RelPath {
    /// Validate a path naming an entry below the store directory (not the directory itself).
    pub fn new(path: &Path) -> HostFsResult<RelPath> {
        let rel = Self::dir(path)?;
        if rel.components.is_empty() {
            return Err(refuse(path, "empty path"));
        }
        Ok(rel)
    }

    /// Validate a path naming a directory; the empty path is the store directory.
    pub fn dir(path: &Path) -> HostFsResult<RelPath> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.len() > PATH_LEN_MAX {
            return Err(refuse(path, TOO_LONG));
        }
        if bytes.contains(&0) {
            return Err(refuse(path, "contains a NUL byte"));
        }
        if bytes.first() == Some(&b'/') {
            return Err(refuse(path, "absolute path"));
        }
        if bytes.is_empty() {
            return Ok(RelPath { components: vec![] });
        }
        let mut components = Vec::new();
        for component in bytes.split(|&b| b == b'/') {
            match component {
                b"" => return Err(refuse(path, "empty component")),
                b"." => return Err(refuse(path, "'.' component")),
                b".." => return Err(refuse(path, "'..' component")),
                c if c.len() > NAME_LEN_MAX => {
                    return Err(refuse(path, "component longer than 255 bytes"))
                }
                c => components.push(c.to_vec()),
            }
        }
        if components.len() > DEPTH_MAX {
            return Err(refuse(path, TOO_DEEP));
        }
        Ok(RelPath { components })
    }

    /// The components, outermost first.
    pub fn components(&self) -> &[Vec<u8>] {
        &self.components
    }

    /// True for the store directory itself.
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The parent directory and the last component (`None` for the store directory).
    pub fn split_last(&self) -> Option<(RelPath, &[u8])> {
        let (last, parent) = self.components.split_last()?;
        Some((
            RelPath {
                components: parent.to_vec(),
            },
            last,
        ))
    }

    /// The path as bytes, components joined by `/` (empty for the store directory).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.components.join(&b'/')
    }

    /// The path as a `PathBuf` (for messages).
    pub fn to_path_buf(&self) -> std::path::PathBuf {
        std::ffi::OsStr::from_bytes(&self.to_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(path: &[u8]) -> &'static str {
        match RelPath::new(Path::new(std::ffi::OsStr::from_bytes(path))) {
            Err(HostFsError::InvalidPath { reason, .. }) => reason,
            other => panic!("{path:?} accepted: {other:?}"),
        }
    }

    #[test]
    fn refuses_every_escape_and_malformed_path() {
        assert_eq!(reason(b"../x"), "'..' component");
        assert_eq!(reason(b"a/../../x"), "'..' component");
        assert_eq!(reason(b"/etc/passwd"), "absolute path");
        assert_eq!(reason(b"a\0b"), "contains a NUL byte");
        assert_eq!(reason(b"a//b"), "empty component");
        assert_eq!(reason(b"a/"), "empty component");
        assert_eq!(reason(b"./a"), "'.' component");
        assert_eq!(reason(b""), "empty path");
        assert_eq!(reason(&[b'n'; 256]), "component longer than 255 bytes");
        let long: Vec<u8> = [b"abcdefg/".as_slice(); 600].concat();
        assert_eq!(reason(&long), "longer than 4095 bytes");
        // 2,048 one-byte components fill 4,095 bytes: the length is the bound on depth.
        let deep: Vec<u8> = [b"a/".as_slice(); DEPTH_MAX].concat();
        assert!(RelPath::new(Path::new(std::ffi::OsStr::from_bytes(
            &deep[..deep.len() - 1]
        )))
        .is_ok());
        assert_eq!(
            reason(&[deep.as_slice(), b"a"].concat()),
            "longer than 4095 bytes"
        );
    }

    #[test]
    fn accepts_plain_relative_paths() {
        let p = RelPath::new(Path::new("dir/sub/file.txt")).expect("valid");
        assert_eq!(p.components().len(), 3);
        assert_eq!(p.to_bytes(), b"dir/sub/file.txt");
        let (parent, last) = p.split_last().expect("not root");
        assert_eq!(last, b"file.txt");
        assert_eq!(parent.to_bytes(), b"dir/sub");
        assert!(RelPath::dir(Path::new("")).expect("root").is_root());
        assert!(RelPath::new(Path::new(&"n".repeat(255))).is_ok());
    }
}
