//! Option text comes from users, URIs (`options=` of the SQLite VFS), environment variables
//! (`ATOMFS_OPTIONS`) and the C API: arbitrary strings must give a value or a clean error,
//! never a panic, for every engine's option table. Nothing here touches a file: only the
//! parsers and `validate` run.

use engines::{parse_duration, parse_size, OptionKind, Options};
use proptest::prelude::*;

/// Text shaped like options: keys of the engines, separators, numbers with units, junk.
fn option_text() -> impl Strategy<Value = String> {
    let keys: Vec<String> = engines::ENGINES
        .iter()
        .flat_map(|e| e.options().iter().map(|s| s.key.to_string()))
        .chain(["", "=", "nonsense", "size ", " home"].map(String::from))
        .collect();
    let values = prop_oneof![
        "[0-9]{0,25}(\\.[0-9]{0,5})?(|b|k|K|m|M|g|G|t|T|p|P|e|E|kb|KiB|MiB|GiB|ms|us|s|m|h)",
        "-[0-9]{1,20}",
        "(on|off|yes|no|true|false|1|0|maybe)",
        "[a-z/.]{0,12}",
        any::<String>(),
    ];
    prop::collection::vec((prop::sample::select(keys), values, prop::bool::ANY), 0..6).prop_map(
        |pairs| {
            pairs
                .into_iter()
                .map(|(k, v, eq)| {
                    if eq {
                        format!("{k}={v}")
                    } else {
                        format!("{k}{v}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_option_text_parses_or_fails_cleanly(text in option_text()) {
        if let Ok(opts) = Options::parse(&text) {
            for engine in engines::ENGINES {
                let valid = opts.validate(engine.name(), engine.options()).is_ok();
                for spec in engine.options() {
                    // Typed reads never panic; of a validated set, the reader of the
                    // option's own kind succeeds.
                    let size = opts.size(spec.key).map(|_| ());
                    let count = opts.count(spec.key).map(|_| ());
                    let flag = opts.flag(spec.key).map(|_| ());
                    let duration = opts.duration(spec.key).map(|_| ());
                    let _ = opts.path(spec.key);
                    if valid {
                        let own = match spec.kind {
                            OptionKind::Size => size,
                            OptionKind::Count => count,
                            OptionKind::Bool => flag,
                            OptionKind::Duration => duration,
                            OptionKind::Path | OptionKind::Choice(_) => Ok(()),
                        };
                        prop_assert!(own.is_ok(), "{}: {} validated but does not read", engine.name(), spec.key);
                    }
                }
            }
        }
    }

    #[test]
    fn any_string_is_a_size_or_a_clean_error(text in any::<String>()) {
        let _ = parse_size(&text);
        let _ = parse_duration(&text);
    }

    #[test]
    fn sizes_round_trip(n in any::<u64>()) {
        prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
    }

    #[test]
    fn sizes_with_units_never_wrap(n in any::<u64>(), unit in "(k|M|G|T|P|E)") {
        let shift = match unit.as_str() { "k" => 10, "M" => 20, "G" => 30, "T" => 40, "P" => 50, _ => 60 };
        match parse_size(&format!("{n}{unit}")) {
            Ok(v) => prop_assert_eq!(Some(v), n.checked_mul(1u64 << shift)),
            Err(_) => prop_assert!(n.checked_mul(1u64 << shift).is_none()),
        }
    }
}
