//! Who may open a store, how its path is resolved, and the mode new stores get.
//!
//! A store is a file (and for a host-file engine a directory) on a shared machine, and its
//! image may come from anyone. The registry therefore treats the path with suspicion, the way
//! ssh treats key files: a store owned by another user is refused unless the caller allows it,
//! a symbolic link at the pool path is not followed unless asked, and new pool files are
//! created readable and writable by their owner only (0600; home directories 0700).
//!
//! Every front end gets the same rules from the environment ([`Access::from_env`]), so that
//! the CLI's flags reach the programs it starts and the shim, the C API and the SQLite VFS
//! behave alike: `ATOMFS_ALLOW_FOREIGN_OWNER=1`, `ATOMFS_FOLLOW_SYMLINKS=1`, and
//! `ATOMFS_MODE=0640` (the mode of new pool files; directories get the matching x bits).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use store::{Error, Result};

/// The access rules of one create or open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Open a store whose pool file (or home directory) another user owns.
    pub allow_foreign_owner: bool,
    /// Follow a symbolic link at the pool path.
    pub follow_symlink: bool,
    /// Permission bits of a new pool file (a new home directory gets them with x added
    /// wherever r is set).
    pub mode: u32,
}

/// Mode of a new pool file unless asked otherwise.
pub const MODE_DEFAULT: u32 = 0o600;

impl Default for Access {
    fn default() -> Self {
        Access {
            allow_foreign_owner: false,
            follow_symlink: false,
            mode: MODE_DEFAULT,
        }
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.as_str(), "1" | "true" | "yes"))
}

impl Access {
    /// The rules the environment sets (see the module documentation); the defaults where it
    /// sets none or a mode that is not octal permission bits.
    pub fn from_env() -> Access {
        let mode = std::env::var("ATOMFS_MODE")
            .ok()
            .and_then(|m| u32::from_str_radix(m.trim_start_matches("0o"), 8).ok())
            .filter(|m| *m <= 0o777)
            .unwrap_or(MODE_DEFAULT);
        Access {
            allow_foreign_owner: env_flag("ATOMFS_ALLOW_FOREIGN_OWNER"),
            follow_symlink: env_flag("ATOMFS_FOLLOW_SYMLINKS"),
            mode,
        }
    }

    /// The mode of a new home directory: the file mode with x wherever r is set.
    pub fn dir_mode(&self) -> u32 {
        self.mode | ((self.mode & 0o444) >> 2)
    }

    /// Refuse a symbolic link at `path` unless following is allowed.
    pub fn check_link(&self, path: &Path) -> Result<()> {
        if self.follow_symlink {
            return Ok(());
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Err(Error::PermissionDenied(format!(
                "{} is a symbolic link; atomfs does not follow it unless asked \
                 (--follow-symlinks, ATOMFS_FOLLOW_SYMLINKS=1)",
                path.display()
            ))),
            _ => Ok(()),
        }
    }

    /// Refuse a file or directory another user owns unless that is allowed.
    pub fn check_owner(&self, path: &Path, meta: &std::fs::Metadata) -> Result<()> {
        // SAFETY: geteuid has no arguments and cannot fail.
        let me = unsafe { libc::geteuid() };
        if self.allow_foreign_owner || meta.uid() == me {
            return Ok(());
        }
        Err(Error::PermissionDenied(format!(
            "{} is owned by uid {}, not by you (uid {me}); a store image from another user is \
             not opened unless asked (--allow-foreign-owner, ATOMFS_ALLOW_FOREIGN_OWNER=1)",
            path.display(),
            meta.uid()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_modes_add_x_where_r_is() {
        let a = |mode| Access {
            mode,
            ..Access::default()
        };
        assert_eq!(a(0o600).dir_mode(), 0o700);
        assert_eq!(a(0o640).dir_mode(), 0o750);
        assert_eq!(a(0o644).dir_mode(), 0o755);
        assert_eq!(a(0o200).dir_mode(), 0o200);
    }
}
