//! Opening over home files changed behind the cache (cache/home_state.rs): the store
//! refuses, naming them and the two choices, or resolves them as the configuration says; a
//! gone home file whose PM copy wins is written anew. And the files in the trash, which the
//! cache removes itself, get their home stamps unsettled first.

use crate::cache::home_state::CHOICES;
use crate::cache::{Cache, HomeChange, HomeConflict, HomeConflictPolicy, Prefer};
use crate::home::{host_err, HomeFiles};
use hostfs::{FileKind, HostFs, OpenOptions};
use pmem::Region;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use store::{Error, Result};

/// Home files changed behind the cache while PM holds dirty chunks of them: refuse to open
/// (naming them and the two choices), or resolve them as `policy` says. Returns whether a
/// file was written anew (a gone home file whose PM copy wins: `atomfs-recovered-INODE`).
pub(super) fn settle_conflicts<R: Region, H: HostFs>(
    cache: &Cache<R, HomeFiles<H>>,
    host: &H,
    policy: HomeConflictPolicy,
) -> Result<bool> {
    let conflicts = cache.home_conflicts()?;
    if conflicts.is_empty() {
        return Ok(false);
    }
    let prefer = match policy {
        HomeConflictPolicy::Resolve(prefer) => prefer,
        HomeConflictPolicy::Refuse => {
            let lines: Vec<String> = conflicts
                .iter()
                .map(|c| c.describe(cache.backing().path_of(c.id).as_deref()))
                .collect();
            return Err(Error::NotPermitted(format!(
                "{}; {CHOICES}",
                lines.join("; ")
            )));
        }
    };
    let mut recreated = false;
    for c in &conflicts {
        if (prefer, c.change) == (Prefer::Pm, HomeChange::Gone) {
            recreate(cache, host, c)?;
            recreated = true;
        } else {
            cache.resolve(c, prefer)?;
        }
    }
    Ok(recreated)
}

/// A gone home file whose PM copy wins: written as `atomfs-recovered-INODE` in the home
/// directory (the chunks the cache holds, holes elsewhere), then its record dropped (the
/// walk adopts the new file).
fn recreate<R: Region, H: HostFs>(
    cache: &Cache<R, HomeFiles<H>>,
    host: &H,
    c: &HomeConflict,
) -> Result<()> {
    let name = PathBuf::from(format!("atomfs-recovered-{}", c.id));
    let f = host.open(&name, &OpenOptions::create()).map_err(host_err)?;
    let len = cache.len(c.key)?;
    cache.pm_image(c.key, &mut |off, data| {
        host.write_all_at(&f, off, data).map_err(host_err)
    })?;
    host.set_len(&f, len).map_err(host_err)?;
    // persist: the recovered file's data and its name are durable before the cache drops
    // its chunks.
    host.sync_all(&f).map_err(host_err)?;
    host.sync_dir(Path::new("")).map_err(host_err)?;
    cache.delete_file(c.key)?;
    cache.backing().forget(c.id);
    Ok(())
}

/// Unsettle the home stamps of the files in the trash (the cache removes them itself).
pub(super) fn unsettle_trash<R: Region, H: HostFs>(
    cache: &Cache<R, HomeFiles<H>>,
    host: &H,
    dir: &Path,
) -> Result<()> {
    let Ok(entries) = host.read_dir(dir) else {
        return Ok(());
    };
    for e in entries {
        match e.kind {
            FileKind::Dir => unsettle_trash(cache, host, &dir.join(OsStr::from_bytes(&e.name)))?,
            _ => {
                if let Some(key) = cache.key_of(e.ino) {
                    cache.unsettle_key(key)?;
                }
            }
        }
    }
    Ok(())
}
