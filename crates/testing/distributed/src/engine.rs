//! The host-file engines, each made with its home directory given (on the GlusterFS mount)
//! and its persistent-memory part in a pool file given (in /dev/shm), in three sizes.

use cache::{CacheConfig, HostCacheStore};
use journal::{HostJournalStore, JournalConfig, StoreConfig};
use mmio::{HostMmioStore, MmioConfig, MmioStore, PolicyMode};
use remap::{HostRemapStore, RemapConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;
use store::{Result, Store};

/// Every engine that keeps its user files in a host directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostEngine {
    /// Libnvmmio: host files mapped, per-block logs in the PM pool.
    Mmio,
    /// NJS: home files, journal in PM.
    Journal,
    /// First Responder: PM cache in front of the home files.
    Cache,
    /// ACCFS with copy-checkpoint (GlusterFS has no reflink).
    RemapCopy,
}

/// How big a store is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// The conformance suite's store (a 64 MiB file, a few thousand files).
    Conformance,
    /// The conformance suite's small store (fills in a few MiB).
    Small,
    /// The crash targets' small configurations (checkpoints and log wrap-around in every
    /// kill-torture round).
    Torture,
}

impl Profile {
    /// The tag of the profile in file names.
    pub fn tag(self) -> &'static str {
        match self {
            Profile::Conformance => "c",
            Profile::Small => "s",
            Profile::Torture => "t",
        }
    }
    /// The profile of a tag.
    pub fn from_tag(tag: &str) -> Option<Profile> {
        [Profile::Conformance, Profile::Small, Profile::Torture]
            .into_iter()
            .find(|p| p.tag() == tag)
    }
}

impl HostEngine {
    /// Every host-file engine.
    pub const ALL: [HostEngine; 4] = [
        HostEngine::Mmio,
        HostEngine::Journal,
        HostEngine::Cache,
        HostEngine::RemapCopy,
    ];

    /// The engine's name (as `atomfs crashtest --engine` spells it).
    pub fn name(self) -> &'static str {
        match self {
            HostEngine::Mmio => "mmio",
            HostEngine::Journal => "journal",
            HostEngine::Cache => "cache",
            HostEngine::RemapCopy => "remap-copy",
        }
    }

    /// The engine called `name`.
    pub fn by_name(name: &str) -> Option<HostEngine> {
        HostEngine::ALL.into_iter().find(|e| e.name() == name)
    }

    /// A new store: user files in `home` (an existing empty directory), the PM part at `pm`.
    pub fn create(self, home: &Path, pm: &Path, profile: Profile) -> Result<Box<dyn Store>> {
        Ok(match self {
            HostEngine::Mmio => Box::new(MmioStore::create(home, pm, &mmio_config(profile))?),
            HostEngine::Journal => Box::new(HostJournalStore::create(
                home,
                pm,
                &journal_config(profile),
            )?),
            HostEngine::Cache => {
                let (len, config) = cache_config(profile);
                Box::new(HostCacheStore::create(home, pm, len, &config)?)
            }
            HostEngine::RemapCopy => {
                Box::new(HostRemapStore::create(pm, home, &remap_config(profile))?)
            }
        })
    }

    /// Open (and recover) the store made by [`HostEngine::create`] with the same arguments.
    pub fn open(self, home: &Path, pm: &Path, profile: Profile) -> Result<Box<dyn Store>> {
        Ok(match self {
            HostEngine::Mmio => Box::new(MmioStore::open(home, pm, &mmio_config(profile))?),
            HostEngine::Journal => {
                Box::new(HostJournalStore::open(home, pm, &journal_config(profile))?)
            }
            HostEngine::Cache => {
                Box::new(HostCacheStore::open(home, pm, &cache_config(profile).1)?)
            }
            HostEngine::RemapCopy => Box::new(HostRemapStore::open(pm, &remap_config(profile))?),
        })
    }

    /// The path that names `store` in [`crate::Layout`]: its PM file, or for remap its home
    /// directory (its PM file records nothing the store hands back).
    pub fn identity(self, store: &dyn Store) -> PathBuf {
        let any = store.as_any();
        let path = match self {
            HostEngine::Mmio => any
                .downcast_ref::<HostMmioStore>()
                .map(|s| s.log_pool().path().to_path_buf()),
            HostEngine::Journal => any
                .downcast_ref::<HostJournalStore>()
                .map(|s| s.journal().region().path().to_path_buf()),
            HostEngine::Cache => any
                .downcast_ref::<HostCacheStore>()
                .map(|s| s.cache().region().path().to_path_buf()),
            HostEngine::RemapCopy => any
                .downcast_ref::<HostRemapStore>()
                .map(|s| s.home().to_path_buf()),
        };
        path.unwrap_or_else(|| {
            panic!(
                "a {} store given to the {} harness",
                store.engine_name(),
                self.name()
            )
        })
    }
}

fn mmio_config(profile: Profile) -> MmioConfig {
    let conformance = MmioConfig {
        log_pool_len: 96 << 20,
        checkpoint_period: Some(Duration::from_micros(100)),
        ..MmioConfig::default()
    };
    match profile {
        Profile::Conformance => conformance,
        Profile::Small => MmioConfig {
            log_pool_len: 4 << 20,
            log_entry_max: 64 << 10,
            index_entries_max: 4096,
            epoch_bytes_max: 8 << 20,
            ..conformance
        },
        Profile::Torture => mmio::crash_target::MmioTarget::new(PolicyMode::Hybrid).config,
    }
}

fn journal_config(profile: Profile) -> StoreConfig {
    let conformance = StoreConfig {
        journal: JournalConfig {
            journal_blocks: 40 * 1024,
            checkpoint_period: Some(Duration::from_millis(50)),
            ..JournalConfig::default()
        },
        ..StoreConfig::default()
    };
    match profile {
        Profile::Conformance => conformance,
        Profile::Small => StoreConfig {
            journal: JournalConfig {
                journal_blocks: 1024,
                ..conformance.journal
            },
            capacity_bytes: 4 << 20,
            ..conformance
        },
        Profile::Torture => {
            let target = journal::crash_target::JournalTarget::by_name("journal");
            target.map_or(conformance, |t| t.config)
        }
    }
}

fn cache_config(profile: Profile) -> (u64, CacheConfig) {
    let conformance = CacheConfig {
        flush_period: Some(Duration::from_millis(10)),
        files_max: 120_000,
        ..CacheConfig::default()
    };
    match profile {
        Profile::Conformance => (160 << 20, conformance),
        Profile::Small => (
            4 << 20,
            CacheConfig {
                files_max: 4096,
                ..conformance
            },
        ),
        Profile::Torture => {
            // The lazy flusher with a period, so flushes to the home files run in every round.
            let target = cache::crash_target::CacheTarget::new(
                "cache",
                Some(Duration::from_millis(10)),
                None,
            );
            (8 << 20, target.config)
        }
    }
}

fn remap_config(profile: Profile) -> RemapConfig {
    match profile {
        Profile::Conformance | Profile::Small => RemapConfig {
            copy_checkpoint: true,
            checkpoint_journal_len: 4 << 20,
            ..RemapConfig::default()
        },
        Profile::Torture => RemapConfig {
            copy_checkpoint: true,
            checkpoint_journal_len: 48 << 10,
            ..RemapConfig::default()
        },
    }
}
