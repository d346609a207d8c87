//! Compiles the C the fuzz targets call: the SQLite VFS's database-name rule (csrc/).
fn main() {
    println!("cargo::rerun-if-changed=csrc/sqlite_names.c");
    println!("cargo::rerun-if-changed=../crates/frontends/sqlite/atomfs_sqlite_names.h");
    cc::Build::new()
        .file("csrc/sqlite_names.c")
        .std("c99")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("atomfs_fuzz_sqlite_names");
}
