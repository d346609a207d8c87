//! The whole conformance suite through a server: every case runs on a `RemoteStore` client
//! whose server, in this process, serves the reference model. A clean reopen ends the
//! client, stops the server, unmounts the model and serves its durable state again; an
//! unclean reopen drops client and server without unmounting (the server aborts what the
//! client left open, as it does when a client dies) and serves the model's crash state.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use conformance::{Harness, ModelStore, MODEL_SMALL_CAPACITY};
use remote::{RemoteStore, Server};
use store::Store;

struct Served {
    server: Server,
    model: Arc<ModelStore>,
}

fn served() -> &'static Mutex<HashMap<PathBuf, Served>> {
    static MAP: OnceLock<Mutex<HashMap<PathBuf, Served>>> = OnceLock::new();
    MAP.get_or_init(Default::default)
}

fn socket() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("atomfs-remote-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("s{}.sock", N.fetch_add(1, Ordering::Relaxed)))
}

fn start(model: ModelStore, socket: PathBuf) -> Box<dyn Store> {
    let model = Arc::new(model);
    let server = remote::serve(model.clone(), &socket).unwrap();
    let client = RemoteStore::connect(&socket).unwrap();
    served()
        .lock()
        .unwrap()
        .insert(socket, Served { server, model });
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

struct RemoteHarness;

impl Harness for RemoteHarness {
    fn fresh(&self) -> Box<dyn Store> {
        start(ModelStore::new(), socket())
    }
    fn fresh_small(&self) -> Option<Box<dyn Store>> {
        Some(start(
            ModelStore::with_capacity(Some(MODEL_SMALL_CAPACITY)),
            socket(),
        ))
    }
    fn reopen_clean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (socket, s) = take(store.as_ref());
        store.unmount().unwrap();
        drop(store);
        s.server.stop();
        s.model.unmount().unwrap();
        start(s.model.crash(), socket)
    }
    fn reopen_unclean(&self, store: Box<dyn Store>) -> Box<dyn Store> {
        let (socket, s) = take(store.as_ref());
        drop(store);
        s.server.stop();
        start(s.model.crash(), socket)
    }
}

conformance::conformance_tests!(RemoteHarness);
