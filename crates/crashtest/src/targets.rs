//! The engines' crash targets by name: one line per engine. Each engine implements the
//! harness's targets in its own crate (`crash_target`, feature `crash-target`); this table is
//! the only place that lists them.

use crash::Target;
use std::sync::Arc;

/// One engine's crash targets: the names it takes (for messages) and its lookup.
struct Entry {
    names: &'static str,
    by_name: fn(&str) -> Option<Arc<dyn Target>>,
}

const ENTRIES: &[Entry] = &[
    Entry {
        names: pool::crash_target::NAMES,
        by_name: |name| {
            pool::crash_target::PoolTarget::by_name(name).map(|t| Arc::new(t) as Arc<dyn Target>)
        },
    },
    Entry {
        names: mmio::crash_target::NAMES,
        by_name: |name| {
            mmio::crash_target::MmioTarget::by_name(name).map(|t| Arc::new(t) as Arc<dyn Target>)
        },
    },
];

/// The target called `name` (an engine, with its mode or policy).
pub fn by_name(name: &str) -> Option<Arc<dyn Target>> {
    ENTRIES.iter().find_map(|e| (e.by_name)(name))
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
        ] {
            let t = by_name(name).unwrap_or_else(|| panic!("known engine {name}"));
            assert_eq!(crash::CrashTarget::name(t.as_ref()), name);
            assert_eq!(crash::torture::KillTarget::name(t.as_ref()), name);
        }
        let name = |n: &str| by_name(n).map(|t| crash::CrashTarget::name(t.as_ref()));
        assert_eq!(name("pool").as_deref(), Some("pool-fcfs"));
        assert_eq!(name("mmio").as_deref(), Some("mmio-hybrid"));
        assert!(by_name("pool-bogus").is_none());
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
