//! The seed's Figure 1: two files updated atomically.
//!
//! A transfer moves an amount from one account file to another. Without a transaction a crash
//! between the two writes loses (or creates) money; with `fs.begin` both writes become durable
//! together at `commit`, or neither does.
//!
//!     cargo run -p atomfs --example two_files [POOL]
//!
//! POOL defaults to a pool in /dev/shm (created when missing, removed at the end).

use atomfs::{Config, Fs};
use std::io::{Seek, SeekFrom, Write};

fn balance(fs: &Fs, path: &str) -> Result<i64, Box<dyn std::error::Error>> {
    Ok(fs.read_to_string(path)?.trim().parse()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = std::env::args().nth(1);
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm".into()
    } else {
        std::env::temp_dir()
    };
    let path = arg
        .clone()
        .map(Into::into)
        .unwrap_or_else(|| dir.join(format!("two_files-{}.pool", std::process::id())));
    let fs = if path.exists() {
        Fs::open(&path, Config::default())?
    } else {
        Fs::create(&path, Config::pool(64 << 20))?
    };
    if !fs.exists("/alice")? {
        fs.write("/alice", "100")?;
        fs.write("/bob", "0")?;
    }
    let (a, b) = (balance(&fs, "/alice")?, balance(&fs, "/bob")?);
    println!("before: alice {a}, bob {b}");

    // Figure 1: begin a transaction over both files, write both, commit.
    let mut alice = fs.options().write(true).open("/alice")?;
    let mut bob = fs.options().write(true).open("/bob")?;
    let tx = fs.begin(&[&alice, &bob])?;
    for (file, value) in [(&mut alice, a - 30), (&mut bob, b + 30)] {
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        write!(file, "{value}")?;
    }
    tx.commit()?; // both balances change together, durably, or (on a crash before this) neither
    drop((alice, bob));

    let (a2, b2) = (balance(&fs, "/alice")?, balance(&fs, "/bob")?);
    println!(
        "after:  alice {a2}, bob {b2} (total {} = {})",
        a2 + b2,
        a + b
    );
    assert_eq!(a2 + b2, a + b);
    fs.unmount()?;
    drop(fs);
    if arg.is_none() {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
