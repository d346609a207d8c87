//! Fuzz target `cli_args`: the argument values of the `atomfs` command that are parsed from
//! text by atomfs's own code (clap splits the command line; its subcommand and flag parsing
//! is covered by crates/frontends/cli/tests/hostile_args.rs).
//!
//! Input: a selector byte, then the text. 0: `--size` (crates/frontends/cli/src/size.rs): a
//! value or a clean error; a value prints back as bytes that parse to it, and its human
//! form is never empty. 1: `--mode` (src/args.rs): a value is at most 0o777 and its octal
//! form, with and without a leading 0 or 0o, parses back to it. 2: `-o` options, as mkfs
//! assembles them (option_text.rs). 3: a path inside the store (`ls`, `cat`, `put`, ...):
//! split into components or refused; no component is empty, `.`, or holds `/` or NUL, and
//! a path of PATH_MAX bytes or more is ENAMETOOLONG. The CLI reads no JSON (it only writes
//! it), so there is no JSON input to fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/frontends/cli/src/args.rs"]
mod args;
mod option_text;
#[allow(dead_code)] // the target uses the parsers, not every helper
#[path = "../../crates/frontends/cli/src/size.rs"]
mod size;

fn check_size(text: &str) {
    if let Ok(bytes) = size::parse_size(text) {
        assert_eq!(size::parse_size(&bytes.to_string()), Ok(bytes), "{text:?}");
        assert!(!size::human(bytes).is_empty());
        if bytes % 1024 == 0 {
            assert_eq!(size::parse_size(&format!("{}K", bytes / 1024)), Ok(bytes));
        }
    }
}

fn check_mode(text: &str) {
    if let Ok(mode) = args::parse_mode(text) {
        assert!(mode <= 0o777, "{text:?} gave {mode:o}");
        for form in [
            format!("{mode:o}"),
            format!("0{mode:o}"),
            format!("0o{mode:o}"),
        ] {
            assert_eq!(args::parse_mode(&form), Ok(mode), "{form:?}");
        }
    }
}

fn check_inner_path(path: &[u8]) {
    match store::path::split_path(path) {
        Ok(parts) => {
            assert!(path.len() < store::path::PATH_MAX);
            for p in parts {
                assert!(!p.is_empty() && p != b"." && !p.contains(&b'/') && !p.contains(&0));
                assert!(p.len() <= store::NAME_MAX);
            }
        }
        Err(e) if path.len() >= store::path::PATH_MAX => {
            assert!(matches!(e, store::Error::NameTooLong { .. }), "{e:?}")
        }
        Err(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match which % 4 {
        0 => check_size(&text),
        1 => check_mode(&text),
        2 => option_text::check_options(&text),
        _ => check_inner_path(rest),
    }
});
