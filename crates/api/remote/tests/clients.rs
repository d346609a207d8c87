//! Several clients of one server: each names only its own handles and transactions, a
//! client that goes away mid-transaction has it aborted (its files free again for others),
//! large reads and writes take the memory-file path, and a server that stops turns every
//! call of its clients into an error, never a hang.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::path::PathBuf;
use std::sync::Arc;

use conformance::ModelStore;
use remote::RemoteStore;
use store::{Error, OpenFlags, Store, ROOT_INO};

fn socket(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("atomfs-remote-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("s.sock")
}

const RW: OpenFlags = OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

#[test]
fn a_client_names_only_its_own_handles_and_transactions() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("own");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let (a, b) = (
        RemoteStore::connect(&sock).unwrap(),
        RemoteStore::connect(&sock).unwrap(),
    );
    let f = a.create(ROOT_INO, b"f", 0o644, None).unwrap();
    let fh = a.open(f.ino, RW).unwrap();
    let tx = a.tx_begin(&[fh]).unwrap();
    assert!(matches!(b.write(fh, 0, b"x"), Err(Error::BadHandle(_))));
    assert!(matches!(b.release(fh), Err(Error::BadHandle(_))));
    assert!(matches!(b.tx_commit(tx), Err(Error::NoSuchTransaction(_))));
    assert!(matches!(b.tx_add(tx, fh), Err(Error::NoSuchTransaction(_))));
    // A namespace call in another client's transaction is refused, with its number.
    match b.create(ROOT_INO, b"g", 0o644, Some(tx)) {
        Err(Error::NoSuchTransaction(n)) => assert_eq!(n, tx.0),
        other => panic!("create in a foreign transaction: {other:?}"),
    }
    assert_eq!(a.write(fh, 0, b"mine").unwrap(), 4);
    a.tx_commit(tx).unwrap();
    let fb = b.open(f.ino, RW).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(b.read(fb, 0, &mut buf).unwrap(), 4);
    assert_eq!(&buf[..4], b"mine");
    assert_eq!(server.clients(), 2);
    a.unmount().unwrap();
    b.unmount().unwrap();
    assert!(matches!(a.getattr(ROOT_INO), Err(Error::Closed)));
    server.stop();
}

#[test]
fn a_client_that_goes_away_has_its_transaction_aborted() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("gone");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let a = RemoteStore::connect(&sock).unwrap();
    let f = a.create(ROOT_INO, b"f", 0o644, None).unwrap();
    let fh = a.open(f.ino, RW).unwrap();
    a.write(fh, 0, b"committed").unwrap();
    a.fsync(fh, false).unwrap();
    let tx = a.tx_begin(&[fh]).unwrap();
    a.write(fh, 0, b"TORN-HALF").unwrap();
    a.create(ROOT_INO, b"new-in-tx", 0o644, Some(tx)).unwrap();
    // The client vanishes (its process exits: the connection closes) before committing.
    drop(a);
    // Another client sees the state before the transaction, and the file is free.
    let b = RemoteStore::connect(&sock).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.clients() > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let fb = b.open(f.ino, RW).unwrap();
    let mut buf = [0u8; 16];
    let n = b.read(fb, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"committed");
    assert!(matches!(
        b.lookup(ROOT_INO, b"new-in-tx"),
        Err(Error::NotFound(_))
    ));
    let tx = b.tx_begin(&[fb]).unwrap();
    b.write(fb, 0, b"second").unwrap();
    b.tx_commit(tx).unwrap();
    b.unmount().unwrap();
    server.stop();
}

#[test]
fn large_writes_and_reads_go_through_memory_files() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("large");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let c = RemoteStore::connect(&sock).unwrap();
    let f = c.create(ROOT_INO, b"big", 0o644, None).unwrap();
    let fh = c.open(f.ino, RW).unwrap();
    let data: Vec<u8> = (0..(remote::SHM_LEN * 2 + 12_345))
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    assert_eq!(c.write(fh, 7, &data).unwrap(), data.len());
    let mut back = vec![0u8; data.len() + 100];
    let n = c.read(fh, 7, &mut back).unwrap();
    assert_eq!(n, data.len());
    assert!(back[..n] == data[..], "large read differs");
    // And through the model directly: the server wrote what the client sent.
    let mut direct = vec![0u8; 16];
    let mfh = model.open(f.ino, RW).unwrap();
    model.read(mfh, 7 + 1000, &mut direct).unwrap();
    assert_eq!(direct[..], data[1000..1016]);
    c.unmount().unwrap();
    server.stop();
}

#[test]
fn a_stopped_server_fails_its_clients_calls() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("stop");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let c = RemoteStore::connect(&sock).unwrap();
    c.getattr(ROOT_INO).unwrap();
    server.stop();
    match c.getattr(ROOT_INO) {
        Err(Error::Io { .. }) | Err(Error::Closed) => {}
        other => panic!("a call after the server stopped: {other:?}"),
    }
    assert!(RemoteStore::connect(&sock).is_err(), "the socket is gone");
}

#[test]
fn a_live_server_is_not_replaced_and_a_stale_socket_is() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("twice");
    let first = remote::serve(model.clone(), &sock).unwrap();
    assert!(matches!(
        remote::serve(model.clone(), &sock),
        Err(Error::Busy(_))
    ));
    // A socket file whose server is gone (bound, then its listener dropped) is replaced.
    first.stop();
    let stale = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    drop(stale);
    let second = remote::serve(model.clone(), &sock).unwrap();
    RemoteStore::connect(&sock).unwrap().unmount().unwrap();
    second.stop();
    // Anything but a socket is refused and left alone.
    std::fs::write(&sock, "not a socket").unwrap();
    assert!(matches!(remote::serve(model, &sock), Err(Error::Exists(_))));
    assert_eq!(std::fs::read_to_string(&sock).unwrap(), "not a socket");
}

#[test]
fn an_unnamed_file_belongs_to_its_client_and_goes_with_it() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("tmpfile");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let (a, b) = (
        RemoteStore::connect(&sock).unwrap(),
        RemoteStore::connect(&sock).unwrap(),
    );
    let (meta, fh) = a.tmpfile(ROOT_INO, 0o600, RW, None).unwrap();
    assert_eq!(meta.nlink, 0);
    assert!(matches!(b.write(fh, 0, b"x"), Err(Error::BadHandle(_))));
    assert!(matches!(
        b.fallocate(fh, store::Fallocate::Allocate { keep_size: false }, 0, 4096),
        Err(Error::BadHandle(_))
    ));
    a.write(fh, 0, b"published").unwrap();
    a.link(meta.ino, ROOT_INO, b"named", None).unwrap();
    assert_eq!(b.lookup(ROOT_INO, b"named").unwrap().ino, meta.ino);
    // A second unnamed file the client never names: gone with the client.
    let (lost, _) = a.tmpfile(ROOT_INO, 0o600, RW, None).unwrap();
    drop(a);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.clients() > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(matches!(b.getattr(lost.ino), Err(Error::NotFound(_))));
    assert!(matches!(
        b.link(lost.ino, ROOT_INO, b"late", None),
        Err(Error::NotFound(_))
    ));
    b.unmount().unwrap();
    server.stop();
}
