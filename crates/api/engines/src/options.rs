//! Typed, documented `key=value` options of an engine.
//!
//! Front ends hand options over as text (`atomfs mkfs -o mode=nc,inodes=4096`, the shim's
//! `ATOMFS_OPTIONS`, SQLite URI parameters, the C API's option string); every engine declares
//! the keys it takes as [`OptionSpec`]s, and [`Options::validate`] checks a set against them
//! before anything is created or opened, with an error that names the bad key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use store::{Error, Result};

/// What values an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionKind {
    /// Bytes, with an optional binary suffix and fraction: `512M`, `1.5G`, `65536`.
    Size,
    /// A non-negative integer.
    Count,
    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    Bool,
    /// A duration: `100us`, `10ms`, `5s`, or a plain number of milliseconds.
    Duration,
    /// A path on the host.
    Path,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
}

impl OptionKind {
    fn describe(self) -> String {
        match self {
            OptionKind::Size => "a size such as 512M or 1.5G".into(),
            OptionKind::Count => "a non-negative integer".into(),
            OptionKind::Bool => "true or false".into(),
            OptionKind::Duration => "a duration such as 100us, 10ms or 5s".into(),
            OptionKind::Path => "a path".into(),
            OptionKind::Choice(words) => format!("one of {}", words.join(", ")),
        }
    }
}

/// When an option has an effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionUse {
    /// Fixed when the store is created (geometry, home directory); ignored at open.
    Create,
    /// A runtime setting, taken at create and at every open.
    Runtime,
}

/// One option an engine takes.
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    pub key: &'static str,
    pub kind: OptionKind,
    pub when: OptionUse,
    /// The default, as text (empty: required at create, or computed from other options).
    pub default: &'static str,
    pub help: &'static str,
}

/// A set of `key=value` options, as text. Keys are unique; the last one given wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    values: BTreeMap<String, String>,
}

impl Options {
    pub fn new() -> Self {
        Options::default()
    }

    /// Parse `key=value` pairs separated by commas (`mode=nc,inodes=4096`). Whitespace around
    /// pairs is ignored; an empty string is no option.
    pub fn parse(text: &str) -> Result<Options> {
        let mut options = Options::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            options.push_pair(pair)?;
        }
        Ok(options)
    }

    /// Add one `key=value` pair.
    pub fn push_pair(&mut self, pair: &str) -> Result<()> {
        let (key, value) = pair.split_once('=').ok_or_else(|| {
            Error::InvalidArgument(format!("option {pair:?}: expected key=value"))
        })?;
        let key = key.trim();
        if key.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "option {pair:?}: empty key"
            )));
        }
        self.values
            .insert(key.to_string(), value.trim().to_string());
        Ok(())
    }

    /// Set `key` to `value`.
    pub fn set(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.values.insert(key.to_string(), value.into());
        self
    }

    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.set(key, value);
        self
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Check every key against `specs` and every value against its kind. `engine` names the
    /// engine in the error.
    pub fn validate(&self, engine: &str, specs: &[OptionSpec]) -> Result<()> {
        for (key, value) in &self.values {
            let Some(spec) = specs.iter().find(|s| s.key == key) else {
                let known: Vec<&str> = specs.iter().map(|s| s.key).collect();
                return Err(Error::InvalidArgument(format!(
                    "unknown option {key:?} for engine {engine} (it takes: {})",
                    known.join(", ")
                )));
            };
            check_value(spec, value)?;
        }
        Ok(())
    }

    /// The value of `key` as a size, if given.
    pub fn size(&self, key: &str) -> Result<Option<u64>> {
        self.get(key)
            .map(|v| parse_size(v).map_err(|e| bad(key, &e)))
            .transpose()
    }

    /// The value of `key` as a count, if given.
    pub fn count(&self, key: &str) -> Result<Option<u64>> {
        self.get(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| bad(key, "expected a non-negative integer"))
            })
            .transpose()
    }

    /// The value of `key` as a boolean, if given.
    pub fn flag(&self, key: &str) -> Result<Option<bool>> {
        self.get(key)
            .map(|v| parse_bool(v).ok_or_else(|| bad(key, "expected true or false")))
            .transpose()
    }

    /// The value of `key` as a duration, if given.
    pub fn duration(&self, key: &str) -> Result<Option<Duration>> {
        self.get(key)
            .map(|v| parse_duration(v).map_err(|e| bad(key, &e)))
            .transpose()
    }

    /// The value of `key` as a path, if given.
    pub fn path(&self, key: &str) -> Option<PathBuf> {
        self.get(key).map(PathBuf::from)
    }
}

fn bad(key: &str, why: &str) -> Error {
    Error::InvalidArgument(format!("option {key}: {why}"))
}

fn check_value(spec: &OptionSpec, value: &str) -> Result<()> {
    let ok = match spec.kind {
        OptionKind::Size => parse_size(value).is_ok(),
        OptionKind::Count => value.parse::<u64>().is_ok(),
        OptionKind::Bool => parse_bool(value).is_some(),
        OptionKind::Duration => parse_duration(value).is_ok(),
        OptionKind::Path => !value.is_empty() && !value.contains('\0'),
        OptionKind::Choice(words) => words.contains(&value),
    };
    if ok {
        Ok(())
    } else {
        Err(bad(
            spec.key,
            &format!("{value:?} is not {}", spec.kind.describe()),
        ))
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Parse a size: a number (with an optional fraction) and an optional binary suffix K, M, G
/// or T (`B` or `iB` may follow): `65536`, `512M`, `1.5G`, `4GiB`. A fraction is rounded down
/// to whole bytes.
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let upper = text.trim().to_ascii_uppercase();
    let stripped = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (number, shift) = match stripped.char_indices().last() {
        Some((i, 'K')) => (&stripped[..i], 10),
        Some((i, 'M')) => (&stripped[..i], 20),
        Some((i, 'G')) => (&stripped[..i], 30),
        Some((i, 'T')) => (&stripped[..i], 40),
        _ => (stripped, 0),
    };
    let bad = || {
        format!(
            "invalid size {text:?}: expected a number with an optional suffix K, M, G or T (e.g. 512M, 1.5G)"
        )
    };
    let number = number.trim();
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return Err(bad());
    }
    let too_large = || format!("size {text:?} is too large");
    let whole: u64 = whole.parse().map_err(|_| too_large())?;
    let mut bytes = whole.checked_mul(1u64 << shift).ok_or_else(too_large)?;
    // The fraction (at most 18 digits are read): fraction * unit / 10^digits, in integers.
    let fraction = &fraction[..fraction.len().min(18)];
    if !fraction.is_empty() {
        let numerator: u128 = fraction.parse().map_err(|_| bad())?;
        let denominator = 10u128.pow(fraction.len() as u32);
        let part = numerator * (1u128 << shift) / denominator;
        bytes = bytes
            .checked_add(u64::try_from(part).map_err(|_| too_large())?)
            .ok_or_else(too_large)?;
    }
    Ok(bytes)
}

/// Parse a duration: `100us`, `10ms`, `5s`, `2m`, or a plain number of milliseconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected e.g. 100us, 10ms or 5s"))?;
    match unit.trim() {
        "" | "ms" => Ok(Duration::from_millis(n)),
        "us" => Ok(Duration::from_micros(n)),
        "ns" => Ok(Duration::from_nanos(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" | "min" => Ok(Duration::from_secs(n.saturating_mul(60))),
        other => Err(format!(
            "invalid duration {text:?}: unknown unit {other:?} (ns, us, ms, s, m)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_suffixes_and_fractions() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("0.25k"), Ok(256));
        assert_eq!(parse_size("1.1K"), Ok(1126));
        for bad in ["", "G", "1.5.5G", "-1M", "1,5G", "12X", "."] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert!(parse_duration("5 fortnights").is_err());
        assert!(parse_duration("ms").is_err());
    }

    const SPECS: &[OptionSpec] = &[
        OptionSpec {
            key: "size",
            kind: OptionKind::Size,
            when: OptionUse::Create,
            default: "256M",
            help: "",
        },
        OptionSpec {
            key: "mode",
            kind: OptionKind::Choice(&["fcfs", "nc"]),
            when: OptionUse::Runtime,
            default: "fcfs",
            help: "",
        },
    ];

    #[test]
    fn validation_names_the_bad_key() {
        let ok = Options::parse("size=1.5G, mode=nc").unwrap_or_default();
        assert!(ok.validate("pool", SPECS).is_ok());
        assert_eq!(ok.size("size").ok().flatten(), Some(3 << 29));
        let unknown = Options::parse("colour=red").unwrap_or_default();
        let e = unknown.validate("pool", SPECS).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("\"colour\"") && e.contains("size, mode")),
            "{e:?}"
        );
        let bad = Options::parse("mode=fast").unwrap_or_default();
        let e = bad.validate("pool", SPECS).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("mode") && e.contains("one of fcfs, nc")),
            "{e:?}"
        );
        assert!(Options::parse("novalue").is_err());
        assert!(Options::parse("=x").is_err());
    }
}
