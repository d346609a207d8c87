//! Writes inside a client's transaction are batched in the client and sent with the commit
//! (docs/serve.md, crates/api/remote/src/batch.rs). What the Store API promises stays:
//! reads in the transaction see its writes; a write the server refuses fails the commit
//! with nothing applied; a client killed with a batch pending loses its transaction and
//! nothing else.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use conformance::ModelStore;
use remote::RemoteStore;
use store::{Error, Fh, OpenFlags, Store, ROOT_INO};

const RW: OpenFlags = OpenFlags {
    read: true,
    write: true,
    append: false,
    atomic: false,
};

fn socket(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("atomfs-batch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("s.sock")
}

/// A file named `name` holding `data`, open read-write in `s`.
fn file(s: &dyn Store, name: &str, data: &[u8]) -> Fh {
    let meta = s.create(ROOT_INO, name.as_bytes(), 0o644, None).unwrap();
    let fh = s.open(meta.ino, RW).unwrap();
    s.write(fh, 0, data).unwrap();
    fh
}

/// The whole contents of `name`, read by the owner itself.
fn contents(model: &ModelStore, name: &str) -> Vec<u8> {
    let ino = model.lookup(ROOT_INO, name.as_bytes()).unwrap().ino;
    let fh = model.open(ino, RW).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let n = model.read(fh, 0, &mut buf).unwrap();
    model.release(fh).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn reads_in_a_transaction_see_its_batched_writes() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("ryw");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let c = RemoteStore::connect(&sock).unwrap();
    let (fa, fb) = (file(&c, "a", b"aaaaaaaa"), file(&c, "b", b""));
    let tx = c.tx_begin(&[fa, fb]).unwrap();
    assert_eq!(c.write(fa, 2, b"XY").unwrap(), 2);
    assert_eq!(c.write(fb, 10, b"tail").unwrap(), 4);
    // Batched: not at the server yet.
    assert_eq!(contents(&model, "a"), b"aaaaaaaa");
    // A read through the client sends the batch first and sees every write, in order.
    let mut buf = [0u8; 16];
    let n = c.read(fa, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"aaXYaaaa");
    assert_eq!(c.fstat(fb).unwrap().size, 14);
    // Later writes overwrite earlier ones in the application's order.
    c.write(fa, 0, b"1").unwrap();
    c.write(fa, 0, b"2").unwrap();
    let n = c.read(fa, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"2aXYaaaa");
    c.write(fa, 7, b"Z").unwrap();
    c.tx_commit(tx).unwrap();
    assert_eq!(contents(&model, "a"), b"2aXYaaaZ");
    assert_eq!(contents(&model, "b"), b"\0\0\0\0\0\0\0\0\0\0tail");
    // After the commit the handles are unbound: a write is its own transaction again,
    // visible at once.
    c.write(fa, 0, b"now").unwrap();
    assert_eq!(contents(&model, "a"), b"nowYaaaZ");
    c.unmount().unwrap();
    server.stop();
}

#[test]
fn a_refused_write_fails_the_commit_with_nothing_applied() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("refused");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let (c, other) = (
        RemoteStore::connect(&sock).unwrap(),
        RemoteStore::connect(&sock).unwrap(),
    );
    let (fa, fb) = (file(&c, "a", b"before-a"), file(&c, "b", b"before-b"));
    let tx = c.tx_begin(&[fa, fb]).unwrap();
    c.write(fa, 0, b"AFTER-A").unwrap();
    c.create(ROOT_INO, b"made-in-tx", 0o644, Some(tx)).unwrap();
    // Past the largest file: the engine refuses it, but only when the batch reaches it.
    assert_eq!(c.write(fb, u64::MAX - 1, b"xx").unwrap(), 2);
    c.write(fb, 0, b"AFTER-B").unwrap();
    match c.tx_commit(tx) {
        Err(Error::FileTooLarge(_)) => {}
        other => panic!("commit of a transaction with a refused write: {other:?}"),
    }
    assert_eq!(contents(&model, "a"), b"before-a");
    assert_eq!(contents(&model, "b"), b"before-b");
    assert!(matches!(
        model.lookup(ROOT_INO, b"made-in-tx"),
        Err(Error::NotFound(_))
    ));
    // The transaction is gone and its files free: another client binds them.
    assert!(matches!(c.tx_commit(tx), Err(Error::NoSuchTransaction(_))));
    let ino = model.lookup(ROOT_INO, b"a").unwrap().ino;
    let fo = other.open(ino, RW).unwrap();
    let t2 = other.tx_begin(&[fo]).unwrap();
    other.tx_abort(t2).unwrap();
    // And the client's handles are unbound: a write outside a transaction applies at once.
    c.write(fa, 0, b"direct").unwrap();
    assert_eq!(contents(&model, "a"), b"direct-a");
    c.unmount().unwrap();
    other.unmount().unwrap();
    server.stop();
}

#[test]
fn a_batch_sent_because_it_is_full_returns_its_transactions_error() {
    let model = Arc::new(ModelStore::new());
    let sock = socket("full");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let c = RemoteStore::connect(&sock).unwrap();
    let fa = file(&c, "a", b"kept");
    let tx = c.tx_begin(&[fa]).unwrap();
    c.write(fa, u64::MAX - 1, b"xx").unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut err = None;
    for i in 0..(remote::SHM_LEN / chunk.len() + 2) {
        if let Err(e) = c.write(fa, (i * chunk.len()) as u64, &chunk) {
            err = Some(e);
            break;
        }
    }
    match err {
        Some(Error::FileTooLarge(_)) => {}
        other => panic!("writes past a full batch of a doomed transaction: {other:?}"),
    }
    // The transaction's later writes go one by one; its commit still fails, nothing applied.
    assert!(c.tx_commit(tx).is_err());
    assert_eq!(contents(&model, "a"), b"kept");
    c.unmount().unwrap();
    server.stop();
}

/// The child process of the kill test: a client that begins a transaction, sends part of
/// it (a read in the transaction flushes the batch), batches more, says "ready" and waits
/// to be killed.
fn killed_child(sock: &Path) {
    let c = RemoteStore::connect(sock).unwrap();
    let ino = c.lookup(ROOT_INO, b"victim").unwrap().ino;
    let fh = c.open(ino, RW).unwrap();
    let tx = c.tx_begin(&[fh]).unwrap();
    c.write(fh, 0, b"SENT").unwrap();
    c.fstat(fh).unwrap();
    c.write(fh, 4, b"PENDING").unwrap();
    c.create(ROOT_INO, b"child-made", 0o644, Some(tx)).unwrap();
    c.write(fh, 11, b"PENDING-TOO").unwrap();
    // (The test harness may print on the same line first.)
    println!("\nchild ready");
    std::thread::sleep(Duration::from_secs(60));
    std::process::exit(1);
}

const CHILD_ENV: &str = "ATOMFS_REMOTE_BATCH_CHILD";

#[test]
fn a_client_killed_with_a_batch_pending_loses_only_its_transaction() {
    if let Some(sock) = std::env::var_os(CHILD_ENV) {
        return killed_child(Path::new(&sock));
    }
    let rounds: usize = std::env::var("ATOMFS_BATCH_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let model = Arc::new(ModelStore::new());
    let sock = socket("kill");
    let server = remote::serve(model.clone(), &sock).unwrap();
    let b = RemoteStore::connect(&sock).unwrap();
    let victim = file(&b, "victim", b"intact");
    let fo = file(&b, "other", b"");
    b.release(victim).unwrap();
    for round in 0..rounds {
        // Another client's transaction, batched too, runs across the kill.
        let t = b.tx_begin(&[fo]).unwrap();
        b.write(fo, 0, format!("round {round:04}").as_bytes())
            .unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_client_killed_with_a_batch_pending_loses_only_its_transaction",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &sock)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let ready = out
            .lines()
            .map_while(Result::ok)
            .any(|l| l == "child ready");
        // SAFETY: kill(2) of the child started above, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        assert!(ready, "round {round}: the child never got ready");
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.clients() > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(
            server.clients(),
            1,
            "round {round}: the child's connection ended"
        );
        assert_eq!(contents(&model, "victim"), b"intact", "round {round}");
        assert!(
            matches!(
                model.lookup(ROOT_INO, b"child-made"),
                Err(Error::NotFound(_))
            ),
            "round {round}: the child's create was aborted"
        );
        // The victim is free: this client binds it.
        let ino = b.lookup(ROOT_INO, b"victim").unwrap().ino;
        let fv = b.open(ino, RW).unwrap();
        let tv = b.tx_begin(&[fv]).unwrap();
        b.tx_abort(tv).unwrap();
        b.release(fv).unwrap();
        // The other client's transaction was untouched by the kill.
        b.tx_commit(t).unwrap();
        assert_eq!(
            contents(&model, "other"),
            format!("round {round:04}").as_bytes()
        );
    }
    b.unmount().unwrap();
    server.stop();
}
