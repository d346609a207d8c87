//! The engines' crash targets by name: one line per engine. Each engine implements the
//! harness's targets in its own crate (`crash_target`, feature `crash-target`); this table is
//! the only place that lists them.

use crash::Target;
use std::sync::Arc;

/// One engine's crash targets: the names it takes (for messages) and its lookup.
struct Entry {
    /// The engine's name alone, which runs every mode of `modes`.
    family: &'static str,
    modes: &'static [&'static str],
    names: &'static str,
    by_name: fn(&str) -> Option<Arc<dyn Target>>,
}

const ENTRIES: &[Entry] = &[
    Entry {
        family: "pool",
        modes: pool::crash_target::MODES,
        names: pool::crash_target::NAMES,
        by_name: |name| {
            pool::crash_target::PoolTarget::by_name(name).map(|t| Arc::new(t) as Arc<dyn Target>)
        },
    },
    Entry {
        family: "mmio",
        modes: mmio::crash_target::MODES,
        names: mmio::crash_target::NAMES,
        by_name: |name| {
            mmio::crash_target::MmioTarget::by_name(name).map(|t| Arc::new(t) as Arc<dyn Target>)
        },
    },
    Entry {
        family: "journal",
        modes: journal::crash_target::MODES,
        names: journal::crash_target::NAMES,
        by_name: |name| {
            journal::crash_target::JournalTarget::by_name(name)
                .map(|t| Arc::new(t) as Arc<dyn Target>)
        },
    },
    Entry {
        family: "cache",
        modes: cache::crash_target::MODES,
        names: cache::crash_target::NAMES,
        by_name: |name| {
            cache::crash_target::CacheTarget::by_name(name).map(|t| Arc::new(t) as Arc<dyn Target>)
        },
    },
    Entry {
        family: "remap",
        modes: remap::crash_target::MODES,
        names: remap::crash_target::NAMES,
        by_name: |name| {
            remap::crash_target::RemapTarget::by_name(name).map(|t| Arc::new(t) as Arc<dyn Target>)
        },
    },
];

/// The target called `name` (an engine, with its mode or policy).
pub fn by_name(name: &str) -> Option<Arc<dyn Target>> {
    ENTRIES.iter().find_map(|e| (e.by_name)(name))
}

/// The modes a run of `name` covers: every mode of an engine named alone, else the one
/// target `name` names; `None` for an unknown name.
pub fn modes(name: &str) -> Option<Vec<String>> {
    if let Some(e) = ENTRIES.iter().find(|e| e.family == name) {
        return Some(e.modes.iter().map(|m| m.to_string()).collect());
    }
    by_name(name).map(|t| vec![crash::CrashTarget::name(t.as_ref())])
}

/// Every name [`by_name`] takes, comma-separated.
pub fn names() -> String {
    ENTRIES
        .iter()
        .map(|e| e.names)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_round_trip() {
        for name in [
            "pool-fcfs",
            "pool-nc",
            "pool-fgwal",
            "pool-scsp",
            "pool-soc",
            "pool-sync",
            "mmio-hybrid",
            "mmio-undo",
            "mmio-redo",
            "journal-njs",
            "journal-no-delta",
            "journal-no-gc",
            "journal-all-journal",
            "journal-no-wear",
            "remap-reflink",
            "remap-copy",
        ] {
            let t = by_name(name).unwrap_or_else(|| panic!("known engine {name}"));
            assert_eq!(crash::CrashTarget::name(t.as_ref()), name);
            assert_eq!(crash::torture::KillTarget::name(t.as_ref()), name);
        }
        let name = |n: &str| by_name(n).map(|t| crash::CrashTarget::name(t.as_ref()));
        assert_eq!(name("pool").as_deref(), Some("pool-fcfs"));
        assert_eq!(name("mmio").as_deref(), Some("mmio-hybrid"));
        assert_eq!(name("journal").as_deref(), Some("journal-njs"));
        assert!(by_name("pool-bogus").is_none());
    }

    /// An engine named alone runs every mode (pool's consistent modes, mmio's three
    /// policies); a mode runs alone.
    #[test]
    fn an_engine_alone_covers_every_mode() {
        let pool = modes("pool").unwrap_or_default();
        assert_eq!(
            pool,
            [
                "pool-fcfs",
                "pool-fgwal",
                "pool-scsp",
                "pool-soc",
                "pool-sync"
            ]
        );
        let mmio = modes("mmio").unwrap_or_default();
        assert_eq!(mmio, ["mmio-hybrid", "mmio-undo", "mmio-redo"]);
        for mode in pool.iter().chain(&mmio) {
            assert!(by_name(mode).is_some(), "{mode}");
            assert_eq!(modes(mode), Some(vec![mode.clone()]));
        }
        assert_eq!(modes("pool-nc"), Some(vec!["pool-nc".to_string()]));
        assert_eq!(modes("bogus"), None);
    }

    /// Every engine of the registry (what the front ends can open) has crash targets here,
    /// and the help text names exactly the names the targets take.
    #[test]
    fn every_registered_engine_is_crash_tested() {
        for engine in engines::ENGINES {
            assert!(
                by_name(engine.name()).is_some(),
                "engine {} has no crash target in atomfs-crashtest",
                engine.name()
            );
        }
        assert_eq!(names(), crate::args::ENGINE_NAMES);
    }
}
