//! The `remap` engine (ACCFS): files live in a home directory on XFS (reflink=1) or Btrfs,
//! with the journal and the snapshot; the pool file records the store id and the home.

use crate::{Engine, OptionKind, OptionSpec, OptionUse, Options};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::{Error, Result, Store};

pub struct RemapEngine;
pub static REMAP: RemapEngine = RemapEngine;

const CHECKPOINTS: &[&str] = &["remap", "copy"];

const REMAP_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "home",
        kind: OptionKind::Path,
        when: OptionUse::Create,
        default: "",
        help: "directory on XFS (reflink=1) or Btrfs that holds the files, the journal and the snapshot (required; recorded in the pool file)",
    },
    OptionSpec {
        key: "checkpoint",
        kind: OptionKind::Choice(CHECKPOINTS),
        when: OptionUse::Create,
        default: "remap",
        help: "how checkpoints move data home: remap (FICLONERANGE: XFS reflink=1, Btrfs) or copy (copy-checkpoint, for a home without reflink such as ext4 or tmpfs: correct but slower)",
    },
    OptionSpec {
        key: "size",
        kind: OptionKind::Size,
        when: OptionUse::Runtime,
        default: "64M",
        help: "journal bytes that trigger a checkpoint (remap home, reclaim the journal)",
    },
];

impl RemapEngine {
    pub fn config(&self, options: &Options) -> Result<remap::RemapConfig> {
        let copy_checkpoint = match options.get("checkpoint") {
            None | Some("remap") => false,
            Some("copy") => true,
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "option checkpoint: {other:?} is not remap or copy"
                )))
            }
        };
        let defaults = remap::RemapConfig::default();
        let checkpoint_journal_len = match options.size("size")? {
            Some(size) => size.max(64 << 10),
            None => defaults.checkpoint_journal_len,
        };
        Ok(remap::RemapConfig {
            copy_checkpoint,
            checkpoint_journal_len,
            ..defaults
        })
    }
}

impl Engine for RemapEngine {
    fn name(&self) -> &'static str {
        "remap"
    }
    fn description(&self) -> &'static str {
        "ACCFS: data written once into a journal, checkpointed by remapping (reflink) into home files"
    }
    fn options(&self) -> &'static [OptionSpec] {
        REMAP_OPTIONS
    }
    fn probe(&self, head: &[u8]) -> bool {
        head.starts_with(remap::format::POOL_MAGIC)
    }
    fn home_for_create(&self, options: &Options) -> Result<Option<PathBuf>> {
        let home = options.path("home").ok_or_else(|| {
            Error::InvalidArgument(
                "engine remap needs a home directory for its files (--home DIR, or option home=DIR)"
                    .into(),
            )
        })?;
        let canonical = home.canonicalize().map_err(|e| Error::Io {
            path: home.display().to_string(),
            op: "open home directory",
            source: e,
        })?;
        if !canonical.is_dir() {
            return Err(Error::NotDir(format!("home directory {}", home.display())));
        }
        Ok(Some(canonical))
    }
    fn recorded_home(&self, pool: &Path) -> Result<Option<PathBuf>> {
        remap::recorded_home(pool).map(|(_, home)| Some(home))
    }
    fn create(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let home = self
            .home_for_create(options)?
            .ok_or_else(|| Error::InvalidArgument("engine remap needs a home directory".into()))?;
        let config = self.config(options)?;
        Ok(Arc::new(remap::HostRemapStore::create(
            path, &home, &config,
        )?))
    }
    fn open(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let config = self.config(options)?;
        Ok(Arc::new(remap::HostRemapStore::open(path, &config)?))
    }
}
