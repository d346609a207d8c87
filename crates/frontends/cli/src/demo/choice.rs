//! Which engine the demo runs, from `--engine`: a registry engine, optionally with `-VARIANT`,
//! a value of one of the engine's choice options (the pool's `mode`, mmio's `policy`), and
//! what it is compared against. Everything goes through the registry (`atomfs::Config`).

use crate::Failure;
use atomfs::engines::{self, Engine, OptionKind};
use atomfs::Config;
use std::path::Path;

/// The value of a choice option that turns consistency off (the pool's NC mode).
const NO_CONSISTENCY: &str = "nc";

/// An engine with its mode or policy.
pub struct EngineChoice {
    engine: &'static dyn Engine,
    /// The choice option set by the name's `-VARIANT` (key, value), or its default.
    variant: Option<(&'static str, String)>,
}

/// What the timed run of the engine is compared against.
#[derive(Debug, PartialEq, Eq)]
pub enum Baseline {
    /// The same engine with consistency off (`key=nc`).
    NoConsistency(&'static str),
    /// Plain files written in place and fsynced, on the home directory's file system (for an
    /// engine that has no mode without consistency).
    PlainFiles,
}

/// The choice option of `engine` that has `value` among its words.
fn choice_with(engine: &dyn Engine, value: &str) -> Option<&'static str> {
    engine.options().iter().find_map(|o| match o.kind {
        OptionKind::Choice(words) if words.contains(&value) => Some(o.key),
        _ => None,
    })
}

impl EngineChoice {
    /// `pool`, `pool-scsp`, `mmio`, `mmio-undo`, ...
    pub fn parse(name: &str) -> Result<Self, Failure> {
        let (base, variant) = match name.split_once('-') {
            Some((base, variant)) => (base, Some(variant)),
            None => (name, None),
        };
        let engine = engines::by_name(base)?;
        let variant = match variant {
            None => engine.options().iter().find_map(|o| match o.kind {
                OptionKind::Choice(_) => Some((o.key, o.default.to_string())),
                _ => None,
            }),
            Some(v) => Some(
                choice_with(engine, v)
                    .map(|key| (key, v.to_string()))
                    .ok_or_else(|| {
                        Failure::new(format!("unknown engine {name:?}: {base} has no mode {v:?}"))
                    })?,
            ),
        };
        Ok(EngineChoice { engine, variant })
    }

    /// `pool-fcfs`, `mmio-hybrid`, ...
    pub fn label(&self) -> String {
        match &self.variant {
            Some((_, v)) => format!("{}-{v}", self.engine.name()),
            None => self.engine.name().to_string(),
        }
    }

    /// Whether the engine keeps its files in a home directory on a host file system.
    pub fn needs_home(&self) -> bool {
        self.engine.options().iter().any(|o| o.key == "home")
    }

    pub fn baseline(&self) -> Baseline {
        match choice_with(self.engine, NO_CONSISTENCY) {
            Some(key) => Baseline::NoConsistency(key),
            None => Baseline::PlainFiles,
        }
    }

    /// The configuration that opens the store (runtime options only).
    pub fn open_config(&self) -> Config {
        let config = Config::engine(self.engine.name());
        match &self.variant {
            Some((key, value)) => config.option(key, value.clone()),
            None => config,
        }
    }

    /// The configuration that creates the store: `size` bytes of pool, files in `home`.
    pub fn create_config(&self, size: u64, home: Option<&Path>) -> Config {
        let config = self.open_config().option("size", size.to_string());
        match home {
            Some(home) => config.option("home", home.display().to_string()),
            None => config,
        }
    }

    /// The configuration of the no-consistency baseline (`Baseline::NoConsistency`).
    pub fn no_consistency_config(&self, key: &str, size: u64) -> Config {
        Config::engine(self.engine.name())
            .option("size", size.to_string())
            .option(key, NO_CONSISTENCY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_baselines() {
        let pool = EngineChoice::parse("pool").unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(pool.label(), "pool-fcfs");
        assert!(!pool.needs_home());
        assert_eq!(pool.baseline(), Baseline::NoConsistency("mode"));
        let scsp = EngineChoice::parse("pool-scsp").unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(scsp.label(), "pool-scsp");
        let mmio = EngineChoice::parse("mmio-undo").unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(mmio.label(), "mmio-undo");
        assert!(mmio.needs_home());
        assert_eq!(mmio.baseline(), Baseline::PlainFiles);
        let hybrid = EngineChoice::parse("mmio").unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(hybrid.label(), "mmio-hybrid");
        for bad in ["pool-bogus", "bogus", "mmio-nc", "pool-"] {
            assert!(EngineChoice::parse(bad).is_err(), "{bad}");
        }
    }
}
