//! Oracles over option text shared by `sqlite_uri` and `cli_args`: `options=` of a database
//! URI, `ATOMFS_OPTIONS`, `atomfs mkfs -o` and the C API's `atomfs_create` all go through
//! `engines::Options` and an engine's typed configuration.

use engines::{parse_size, OptionKind, Options};

/// Options text parses to a value or a clean error; a parsed value formats to text that
/// parses back to it; for every engine, validation and (when it passes) the typed
/// configuration give a value or a clean error; every size value that parses round-trips.
pub fn check_options(text: &str) {
    let Ok(options) = Options::parse(text) else {
        return;
    };
    let shown = options
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let again = Options::parse(&shown)
        .unwrap_or_else(|e| panic!("{shown:?} (formatted from {text:?}) does not parse: {e}"));
    assert_eq!(again, options, "{text:?} -> {shown:?}");
    for engine in engines::ENGINES {
        if options.validate(engine.name(), engine.options()).is_ok() {
            typed_config(engine.name(), &options);
        }
        for spec in engine.options() {
            if let (OptionKind::Size, Some(v)) = (spec.kind, options.get(spec.key)) {
                check_size(v);
            }
        }
    }
}

/// The engine's typed configuration from validated options: a value or a clean error.
pub fn typed_config(engine: &str, options: &Options) {
    let _ = match engine {
        "pool" => engines::POOL.config(options).map(drop),
        "mmio" => engines::MMIO.config(options).map(drop),
        "journal" => engines::JOURNAL.config(options).map(drop),
        "remap" => engines::REMAP.config(options).map(drop),
        "cache" => engines::CACHE.config(options).map(drop),
        _ => Ok(()),
    };
}

/// A size that parses prints as a number of bytes that parses back to it.
pub fn check_size(text: &str) {
    if let Ok(bytes) = parse_size(text) {
        assert_eq!(parse_size(&bytes.to_string()), Ok(bytes), "{text:?}");
    }
}
