//! Real, unmodified programs on a mounted store: git, sqlite3, tar, cp -a with diff -r, fio
//! with verification (the workloads of `test_support::programs`). A program that is not
//! installed, or a mount that cannot be made here, skips with a message — a failure under
//! `ATOMFS_REQUIRE_ALL=1` (the packages are in scripts/install-deps.sh).
//!
//! These run over the in-memory reference model; crates/frontends/cli/tests runs the same
//! workloads on real stores through `atomfs mount`.

mod support;

use conformance::ModelStore;
use std::sync::Arc;
use support::mounted;
use test_support::programs::{
    cp_round_trip, fio_verify, git_round_trip, make_tree, sqlite_round_trip, tar_round_trip,
};
use test_support::scratch;

fn store() -> Arc<ModelStore> {
    Arc::new(ModelStore::new())
}

#[test]
fn git_init_add_commit_log() {
    let Some(m) = mounted("git", store()) else {
        return;
    };
    let repo = m.dir().join("repo");
    make_tree(&repo, true);
    git_round_trip(&repo);
    m.finish();
}

#[test]
fn sqlite3_database_passes_integrity_check() {
    let Some(m) = mounted("sqlite", store()) else {
        return;
    };
    sqlite_round_trip(&m.dir(), 5000);
    m.finish();
}

#[test]
fn tar_extract_and_compare() {
    let src = scratch("fuse-tar-src");
    make_tree(&src.join("tree"), true);
    let Some(m) = mounted("tar", store()) else {
        return;
    };
    tar_round_trip(&src, &m.dir().join("untar"));
    m.finish();
}

#[test]
fn cp_a_then_diff_r() {
    let src = scratch("fuse-cp-src");
    make_tree(&src.join("tree"), true);
    let Some(m) = mounted("cp", store()) else {
        return;
    };
    cp_round_trip(&src.join("tree"), &m.dir().join("copy"));
    m.finish();
}

#[test]
fn fio_random_writes_verify() {
    let Some(m) = mounted("fio", store()) else {
        return;
    };
    fio_verify(&m.dir());
    m.finish();
}
