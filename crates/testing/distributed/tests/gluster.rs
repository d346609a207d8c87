//! Every host-file engine on GlusterFS: the home directory of each store on the single-brick
//! volume of `scripts/gluster.sh` (mounted with `mount -t glusterfs`), its PM part in
//! /dev/shm. The whole conformance suite for mmio, journal, cache and remap (copy-checkpoint),
//! a kill torture of each (a child commits, the parent SIGKILLs it at random, recovers and
//! checks that every acknowledged transaction is there whole), and what the hostfs capability
//! probe reports for the mount (remap's reflink checkpoints refused with its message).
//!
//! The cluster is brought up once for this process and torn down at its end (kept when it was
//! already up, or with `ATOMFS_GLUSTER_KEEP=1`). Without root, FUSE or the packages, every test
//! prints why and passes; under `ATOMFS_REQUIRE_ALL=1` it fails instead.
//! Longer torture: `ATOMFS_GLUSTER_LONG=1` (or `ATOMFS_TORTURE_ROUNDS=N`).

use distributed::{harness, HostEngine};

/// The harness of `$engine`, or return from the test (the reason printed) without GlusterFS.
macro_rules! harness_or_skip {
    ($engine:expr) => {{
        let Some(h) = harness($engine) else {
            return;
        };
        h
    }};
}

mod mmio {
    use super::*;
    conformance::conformance_tests!(harness_or_skip!(HostEngine::Mmio));
}

mod journal {
    use super::*;
    conformance::conformance_tests!(harness_or_skip!(HostEngine::Journal));
}

mod cache {
    use super::*;
    conformance::conformance_tests!(harness_or_skip!(HostEngine::Cache));
}

mod remap_copy {
    use super::*;
    conformance::conformance_tests!(harness_or_skip!(HostEngine::RemapCopy));
}

mod probe {
    use distributed::{cluster, single_layout, HostEngine, Volume};
    use hostfs::{Capability, FsType, HostFs, RealHostFs};

    /// statfs magic of FUSE file systems (GlusterFS's client is one).
    const FUSE_SUPER_MAGIC: u64 = 0x6573_5546;

    /// What the capability probe reports for the mount: a FUSE file system without reflink,
    /// exchange-range, RWF_ATOMIC or DAX.
    #[test]
    fn capabilities_of_the_glusterfs_mount() {
        let Some(c) = cluster("the capability probe on GlusterFS") else {
            return;
        };
        for volume in [Volume::Single, Volume::Replica] {
            let mount = c.mount(volume);
            let fs = RealHostFs::open(&mount)
                .unwrap_or_else(|e| panic!("open {}: {e}", mount.display()));
            let caps = fs.capabilities();
            println!("{} ({}): {caps:?}", mount.display(), volume.name());
            assert_eq!(caps.fs_type, FsType::Other(FUSE_SUPER_MAGIC));
            assert!(
                !caps.reflink && !caps.exchange_range && !caps.dax,
                "{caps:?}"
            );
            assert_eq!(caps.atomic_write_unit, None);
            let refused = match fs.require(Capability::Reflink) {
                Ok(()) => panic!("{} offers reflink", mount.display()),
                Err(e) => e.to_string(),
            };
            assert!(refused.contains("reflink (FICLONERANGE)"), "{refused}");
        }
    }

    /// remap without copy-checkpoint is refused on the mount with the capability message, and
    /// leaves no store behind; the copy-checkpoint store is what the suite above runs.
    #[test]
    fn remap_reflink_checkpoints_are_refused_on_glusterfs() {
        let Some(layout) = single_layout("remap's capability check on GlusterFS") else {
            return;
        };
        let d = layout.fresh(HostEngine::RemapCopy, distributed::Profile::Conformance);
        let config = remap::RemapConfig {
            copy_checkpoint: false,
            ..Default::default()
        };
        let err = match remap::HostRemapStore::create(&d.pm, &d.home, &config) {
            Ok(_) => panic!("remap with reflink checkpoints was created on GlusterFS"),
            Err(e) => e,
        };
        let msg = err.to_string();
        println!("{msg}");
        assert!(matches!(err, store::Error::Unsupported(_)), "{err:?}");
        assert!(
            msg.contains("needs reflink (FICLONERANGE)") && msg.contains("copy-checkpoint"),
            "{msg}"
        );
        assert_eq!(std::fs::read_dir(&d.home).map(|d| d.count()).ok(), Some(0));
    }
}

mod torture {
    use distributed::{torture, torture_rounds, HostEngine};

    /// The torture victim: runs only when a torture parent started this binary for it.
    #[test]
    fn child() {
        distributed::torture_child();
    }

    fn child_path() -> String {
        crash::suite::test_path(module_path!(), "child")
    }

    #[test]
    fn mmio_kill_torture() {
        torture(HostEngine::Mmio, torture_rounds(12), 11, &child_path());
    }

    #[test]
    fn journal_kill_torture() {
        torture(HostEngine::Journal, torture_rounds(12), 21, &child_path());
    }

    #[test]
    fn cache_kill_torture() {
        torture(HostEngine::Cache, torture_rounds(12), 31, &child_path());
    }

    #[test]
    fn remap_copy_kill_torture() {
        torture(HostEngine::RemapCopy, torture_rounds(12), 41, &child_path());
    }
}
