//! `journal`: NJS, a persistent-memory journal in front of files in a home directory.

use crate::{Engine, OptionKind, OptionSpec, OptionUse, Options};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use store::{Error, Result, Store};

/// `journal`: NJS (delta updates, wear-aware allocation, GC and delayed checkpointing).
pub struct JournalEngine;
pub static JOURNAL: JournalEngine = JournalEngine;

const VARIANTS: &[&str] = &["njs", "no-delta", "no-gc", "all-journal", "no-wear"];

const JOURNAL_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        key: "home",
        kind: OptionKind::Path,
        when: OptionUse::Create,
        default: "",
        help: "directory on a host file system that holds the files (required; recorded in the journal file)",
    },
    OptionSpec {
        key: "size",
        kind: OptionKind::Size,
        when: OptionUse::Create,
        default: "128M",
        help: "size of the PM journal file (4 KiB journal blocks and their 16-byte headers)",
    },
    OptionSpec {
        key: "checkpoint_period",
        kind: OptionKind::Duration,
        when: OptionUse::Runtime,
        default: "5s",
        help: "period of the background checkpoint (0: checkpoint only when the journal runs low)",
    },
    OptionSpec {
        key: "free_percent_min",
        kind: OptionKind::Count,
        when: OptionUse::Runtime,
        default: "25",
        help: "GC, then a checkpoint, starts when fewer journal blocks than this percentage are free",
    },
    OptionSpec {
        key: "variant",
        kind: OptionKind::Choice(VARIANTS),
        when: OptionUse::Runtime,
        default: "njs",
        help: "the seed's ablations (bench): njs, no-delta, no-gc, all-journal, no-wear",
    },
];

impl JournalEngine {
    /// The journal configuration `options` describe.
    pub fn config(&self, options: &Options) -> Result<journal::StoreConfig> {
        let mut config = journal::StoreConfig::default();
        if let Some(size) = options.size("size")? {
            let g = journal::layout::Geometry::fitting(size).ok_or_else(|| {
                Error::InvalidArgument(format!("option size: {size} bytes hold no journal"))
            })?;
            config.journal.journal_blocks = g.blocks();
        }
        if let Some(period) = options.duration("checkpoint_period")? {
            config.journal.checkpoint_period = (!period.is_zero()).then_some(period);
        }
        if let Some(p) = options.count("free_percent_min")? {
            config.journal.free_percent_min = u32::try_from(p)
                .ok()
                .filter(|&p| p < 100)
                .ok_or_else(|| Error::InvalidArgument("option free_percent_min: 0..=99".into()))?;
        }
        let v = journal::Variant::NJS;
        config.journal.variant = match options.get("variant") {
            None | Some("njs") => v,
            Some("no-delta") => journal::Variant { delta: false, ..v },
            Some("no-gc") => journal::Variant { gc: false, ..v },
            Some("all-journal") => journal::Variant {
                all_journal: true,
                ..v
            },
            Some("no-wear") => journal::Variant { wear: false, ..v },
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "option variant: unknown variant {other:?}"
                )))
            }
        };
        Ok(config)
    }
}

impl Engine for JournalEngine {
    fn name(&self) -> &'static str {
        "journal"
    }
    fn description(&self) -> &'static str {
        "NJS: files live in a home directory, over-writes and metadata in a PM journal (delta updates, wear-aware)"
    }
    fn options(&self) -> &'static [OptionSpec] {
        JOURNAL_OPTIONS
    }
    fn probe(&self, head: &[u8]) -> bool {
        head.starts_with(b"ATFSNJS1")
    }
    fn home_for_create(&self, options: &Options) -> Result<Option<PathBuf>> {
        let home = options.path("home").ok_or_else(|| {
            Error::InvalidArgument(
                "engine journal needs a home directory for its files (--home DIR, or option home=DIR)"
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
        journal::recorded_home(pool)
    }
    fn create(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let home = self.home_for_create(options)?.ok_or_else(|| {
            Error::InvalidArgument("engine journal needs a home directory".into())
        })?;
        let config = self.config(options)?;
        Ok(Arc::new(journal::HostJournalStore::create(
            &home, path, &config,
        )?))
    }
    fn open(&self, path: &Path, options: &Options) -> Result<Arc<dyn Store>> {
        let config = self.config(options)?;
        Ok(Arc::new(journal::HostJournalStore::open_recorded(
            path, &config,
        )?))
    }
}
