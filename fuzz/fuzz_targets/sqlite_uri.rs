//! Fuzz target `sqlite_uri`: what the SQLite VFS takes from a database URI and its name.
//!
//! Input: up to three NUL-separated fields — the database name, `engine=`, `options=` (the
//! pool path is not fuzzed: opening it touches files). The name goes through the VFS's own C
//! rule (crates/frontends/sqlite/atomfs_sqlite_names.h, compiled by build.rs) and is checked
//! against a reference model of it and against the store's path rules: a name is refused or
//! becomes an absolute path inside the pool with no `..` component (a path leaving the store
//! is refused). The engine and options go through what `atomfs_create` does with them
//! (`engines::by_name`, `Options::parse`, the engine's validation and typed configuration),
//! with the round-trip oracles of option_text.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ffi::{c_char, c_int, CString};

mod option_text;

extern "C" {
    fn fuzz_sqlite_full_name(name: *const c_char, n_out: c_int, out: *mut c_char) -> c_int;
}

/// SQLite's mxPathname of the VFS + 1, as SQLite passes it.
const OUT_LEN: usize = 512;

/// The VFS's rule, in Rust: refused with a `..` component or when it does not fit; else "/"
/// + the name, leading "./" dropped.
fn model(name: &[u8]) -> Option<Vec<u8>> {
    if name.split(|&b| b == b'/').any(|c| c == b"..") {
        return None;
    }
    let mut rest = name;
    while rest.starts_with(b"./") {
        rest = &rest[2..];
    }
    let mut out = if rest.first() == Some(&b'/') {
        vec![]
    } else {
        vec![b'/']
    };
    out.extend_from_slice(rest);
    (out.len() < OUT_LEN).then_some(out)
}

fn full_name(name: &CString) -> Option<Vec<u8>> {
    let mut out = vec![0xAAu8; OUT_LEN];
    // SAFETY: `name` is NUL-terminated; `out` holds OUT_LEN bytes, the length passed.
    let rc =
        unsafe { fuzz_sqlite_full_name(name.as_ptr(), OUT_LEN as c_int, out.as_mut_ptr().cast()) };
    if rc != 0 {
        return None;
    }
    let end = out
        .iter()
        .position(|&b| b == 0)
        .expect("the output is NUL-terminated");
    out.truncate(end);
    Some(out)
}

fn check_name(name: &[u8]) {
    let c = CString::new(name).expect("fields hold no NUL");
    let got = full_name(&c);
    assert_eq!(got, model(name), "name {:?}", String::from_utf8_lossy(name));
    let Some(path) = got else { return };
    assert!(path.starts_with(b"/") && path.len() < OUT_LEN);
    if let Ok(parts) = store::path::split_path(&path) {
        assert!(
            !parts.iter().any(|p| *p == b".."),
            "{:?} climbs",
            String::from_utf8_lossy(&path)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut fields = data.splitn(3, |&b| b == 0);
    let name = fields.next().unwrap_or_default();
    let engine = fields.next().unwrap_or_default();
    let options = fields.next().unwrap_or_default();
    check_name(name);
    // atomfs_create: non-UTF-8 text is EINVAL; an empty engine is "pool".
    let (Ok(engine), Ok(options)) = (std::str::from_utf8(engine), std::str::from_utf8(options))
    else {
        return;
    };
    let engine = if engine.is_empty() { "pool" } else { engine };
    option_text::check_options(options);
    if let (Ok(e), Ok(parsed)) = (engines::by_name(engine), engines::Options::parse(options)) {
        if parsed.validate(e.name(), e.options()).is_ok() {
            option_text::typed_config(e.name(), &parsed);
        }
    }
});
