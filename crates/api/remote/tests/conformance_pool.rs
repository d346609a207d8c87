//! The whole conformance suite through a server whose store is a pool (FCFS mode, on the
//! crash-simulator region): every Store call a client makes crosses the protocol to a real
//! engine. The parts of the POSIX file API the pool does not offer yet
//! (`conformance::cases::awaited("pool")`) are checked to answer EOPNOTSUPP through the
//! client, and run in full once the pool offers them. A clean reopen ends the client, stops
//! the server, unmounts the pool and serves its durable image again; an unclean reopen
//! serves the durable image of the pool never unmounted (a crash at a quiescent point).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use conformance::Harness;
use pmem::SimRegion;
use pool::{PoolConfig, PoolStore};
use remote::{RemoteStore, Server};
use store::Store;

type Pool = PoolStore<SimRegion>;

struct Served {
    server: Server,
    pool: Arc<Pool>,
    /// Whether it is the small pool (opened again with the small configuration).
    small: bool,
}

fn served() -> &'static Mutex<HashMap<PathBuf, Served>> {
    static MAP: OnceLock<Mutex<HashMap<PathBuf, Served>>> = OnceLock::new();
    MAP.get_or_init(Default::default)
}

fn socket() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("atomfs-remote-pool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("s{}.sock", N.fetch_add(1, Ordering::Relaxed)))
}

/// Region of the pool: 160 MiB (the 64 MiB file case fits), as the pool's own suite.
const REGION_BYTES: u64 = 160 << 20;
const SMALL_BYTES: u64 = 2 << 20;

fn config() -> PoolConfig {
    PoolConfig {
        inode_count: 20_480,
        ..PoolConfig::default()
    }
}

fn start(pool: Pool, socket: PathBuf, small: bool) -> Box<dyn Store> {
    let pool = Arc::new(pool);
    let server = remote::serve(pool.clone(), &socket).unwrap();
    let client = RemoteStore::connect(&socket).unwrap();
    served().lock().unwrap().insert(
        socket,
        Served {
            server,
            pool,
            small,
        },
    );
    Box::new(client)
}

fn take(store: &dyn Store) -> (PathBuf, Served) {
    let client = store
        .as_any()
        .downcast_ref::<RemoteStore>()
        .expect("a RemoteStore");
    let socket = client.socket().to_path_buf();
    let s = served().lock().unwrap().remove(&socket).unwrap();
    (socket, s)
}

/// The durable image of the served pool, opened (running recovery) as a new pool.
fn reopened(pool: Arc<Pool>, config: &PoolConfig) -> Pool {
    let image = SimRegion::from_image(pool.region().persistent_image());
    drop(pool);
    PoolStore::open(Arc::new(image), config).unwrap()
}

struct ServedPool;

impl Harness for ServedPool {
    fn fresh(&self) -> Box<dyn Store> {
        let region = Arc::new(SimRegion::new(REGION_BYTES));
        start(
            PoolStore::format(region, &config()).unwrap(),
            socket(),
            false,
        )
    }
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        let region = Arc::new(SimRegion::new(SMALL_BYTES));
        let pool = PoolStore::format(region, &PoolConfig::test_min()).unwrap();
        Some(start(pool, socket(), true))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (socket, s) = take(store.as_ref());
        store.unmount().unwrap();
        drop(store);
        s.server.stop();
        s.pool.unmount().unwrap();
        let config = config_of(s.small);
        start(reopened(s.pool, &config), socket, s.small)
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (socket, s) = take(store.as_ref());
        drop(store);
        s.server.stop();
        let config = config_of(s.small);
        start(reopened(s.pool, &config), socket, s.small)
    }
}

/// The configuration a served pool opens with again (the small one for a small region).
fn config_of(small: bool) -> PoolConfig {
    if small {
        PoolConfig::test_min()
    } else {
        config()
    }
}

conformance::conformance_tests!(ServedPool);
