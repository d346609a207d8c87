//! What each call of the rest of the POSIX file API costs on a store directory (wall µs per
//! call, median of `rounds` rounds of `ops` calls), outside a transaction and inside one
//! (the transaction's begin and commit included): symlink + unlink, mkfifo + unlink, a hard
//! link + unlink, setxattr (4 KiB value), an exchange, a 64 KiB punch of a 64 KiB-written
//! range, tmpfile + link + unlink. Each is what the engine adds to the host's own call: the
//! syncs that make it durable and, in a transaction, the intent record (and the saved old
//! value of an attribute).
//!
//! Run: `cargo run --release -p atomfs-mmio --example posix_cost -- [ops] [rounds] [dir]`
//! (defaults: 200, 5, /dev/shm).

use mmio::{MmioConfig, MmioStore};
use std::path::PathBuf;
use std::time::Instant;
use store::{Fallocate, FileKind, OpenFlags, RenameMode, Store, TxId, XattrSet, ROOT_INO};

type S = mmio::HostMmioStore;

fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    }
}

/// Median µs per call of `op` (given the call number and the transaction, if any).
fn measure(
    s: &S,
    ops: usize,
    rounds: usize,
    in_tx: bool,
    op: &dyn Fn(&S, usize, Option<TxId>),
) -> f64 {
    let mut per_call: Vec<f64> = (0..rounds)
        .map(|r| {
            let t0 = Instant::now();
            for i in 0..ops {
                let n = r * ops + i;
                if in_tx {
                    let tx = s.tx_begin(&[]).expect("begin");
                    op(s, n, Some(tx));
                    s.tx_commit(tx).expect("commit");
                } else {
                    op(s, n, None);
                }
            }
            t0.elapsed().as_secs_f64() * 1e6 / ops as f64
        })
        .collect();
    per_call.sort_by(|a, b| a.total_cmp(b));
    per_call[rounds / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ops: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    let base = PathBuf::from(args.get(3).map_or("/dev/shm", String::as_str));
    let dir = base.join(format!("atomfs-mmio-posix-cost-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("files")).expect("scratch directory");
    let s = MmioStore::create(
        &dir.join("files"),
        &dir.join("log.pool"),
        &MmioConfig::default(),
    )
    .expect("create store");
    let f = s.create(ROOT_INO, b"f", 0o644, None).expect("create f");
    let g = s.create(ROOT_INO, b"g", 0o644, None).expect("create g");
    let fh = s.open(f.ino, rw()).expect("open f");
    let value = vec![7u8; 4096];
    let chunk = vec![1u8; 64 << 10];
    type Op = Box<dyn Fn(&S, usize, Option<TxId>)>;
    let cases: Vec<(&str, Op)> = vec![
        (
            "symlink+unlink",
            Box::new(|s, n, tx| {
                let name = format!("l{n}");
                s.symlink(ROOT_INO, name.as_bytes(), b"target", tx)
                    .expect("symlink");
                s.unlink(ROOT_INO, name.as_bytes(), tx).expect("unlink");
            }),
        ),
        (
            "mkfifo+unlink",
            Box::new(|s, n, tx| {
                let name = format!("p{n}");
                s.mknod(ROOT_INO, name.as_bytes(), FileKind::Fifo, 0o644, 0, tx)
                    .expect("mknod");
                s.unlink(ROOT_INO, name.as_bytes(), tx).expect("unlink");
            }),
        ),
        (
            "link+unlink",
            Box::new(move |s, n, tx| {
                let name = format!("h{n}");
                s.link(f.ino, ROOT_INO, name.as_bytes(), tx).expect("link");
                s.unlink(ROOT_INO, name.as_bytes(), tx).expect("unlink");
            }),
        ),
        (
            "setxattr 4 KiB",
            Box::new(move |s, n, tx| {
                let name = format!("user.a{}", n % 8);
                s.setxattr(g.ino, name.as_bytes(), &value, XattrSet::Either, tx)
                    .expect("setxattr");
            }),
        ),
        (
            "exchange",
            Box::new(|s, _, tx| {
                s.rename_with(ROOT_INO, b"f", ROOT_INO, b"g", RenameMode::Exchange, tx)
                    .expect("exchange");
            }),
        ),
        (
            "write 64 KiB+punch",
            Box::new(move |s, _, tx| {
                if let Some(tx) = tx {
                    s.tx_add(tx, fh).expect("tx_add");
                }
                s.write(fh, 0, &chunk).expect("write");
                s.fallocate(fh, Fallocate::PunchHole, 0, 64 << 10)
                    .expect("punch");
            }),
        ),
        (
            "tmpfile+link+unlink",
            Box::new(|s, n, tx| {
                let (m, t) = s.tmpfile(ROOT_INO, 0o600, rw(), tx).expect("tmpfile");
                let name = format!("t{n}");
                s.link(m.ino, ROOT_INO, name.as_bytes(), tx).expect("link");
                s.unlink(ROOT_INO, name.as_bytes(), tx).expect("unlink");
                s.release(t).expect("release");
            }),
        ),
    ];
    println!(
        "µs per call (median of {rounds} rounds of {ops}), store directory {}",
        base.display()
    );
    println!("{:<22} {:>12} {:>16}", "call", "alone", "in a transaction");
    for (name, op) in &cases {
        let alone = measure(&s, ops, rounds, false, op.as_ref());
        let in_tx = measure(&s, ops, rounds, true, op.as_ref());
        println!("{name:<22} {alone:>12.1} {in_tx:>16.1}");
    }
    s.release(fh).expect("release");
    s.unmount().expect("unmount");
    let _ = std::fs::remove_dir_all(&dir);
}
