//! File commands that work on a pool without mounting it: ls, cat, cp, put, get, rm, mkdir.
//! Each opens the pool (recovering it when needed), does its work, and unmounts (checkpoint).

use crate::engine::open;
use crate::{CmdResult, Failure};
use atomfs::{FileKind, Fs};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Run `work` on the open pool, then unmount it even when the work failed.
fn with_pool(pool: &Path, work: impl FnOnce(&Fs) -> Result<(), Failure>) -> CmdResult {
    let fs = open(pool)?;
    let result = work(&fs);
    let closed = fs.unmount();
    result?;
    closed?;
    Ok(ExitCode::SUCCESS)
}

fn kind_char(kind: FileKind) -> char {
    match kind {
        FileKind::File => '-',
        FileKind::Dir => 'd',
        FileKind::Symlink => 'l',
        FileKind::Fifo => 'p',
        FileKind::Socket => 's',
        FileKind::CharDevice => 'c',
        FileKind::BlockDevice => 'b',
    }
}

pub fn ls(pool: &Path, path: &str, long: bool) -> CmdResult {
    with_pool(pool, |fs| {
        let meta = fs.metadata(path)?;
        let mut entries = if meta.is_dir() {
            fs.read_dir(path)?
        } else {
            vec![atomfs::DirEntry {
                name: path.as_bytes().to_vec(),
                ino: meta.ino,
                kind: meta.kind,
            }]
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out = std::io::stdout().lock();
        for e in entries {
            let name = String::from_utf8_lossy(&e.name);
            if long {
                let m = fs.store().getattr(e.ino)?;
                writeln!(
                    out,
                    "{}{:04o} {:>3} {:>12} {}",
                    kind_char(m.kind),
                    m.perm,
                    m.nlink,
                    m.size,
                    name
                )?;
            } else {
                writeln!(
                    out,
                    "{name}{}",
                    if e.kind == FileKind::Dir { "/" } else { "" }
                )?;
            }
        }
        Ok(())
    })
}

pub fn cat(pool: &Path, path: &str) -> CmdResult {
    with_pool(pool, |fs| {
        let data = fs.read(path)?;
        std::io::stdout().lock().write_all(&data)?;
        Ok(())
    })
}

pub fn cp(pool: &Path, src: &str, dst: &str) -> CmdResult {
    with_pool(pool, |fs| {
        let data = fs.read(src)?;
        fs.write(dst, &data)?;
        Ok(())
    })
}

/// Chunk size of `put`; files larger than one chunk get a progress bar.
const PUT_CHUNK: usize = 16 << 20;

pub fn put(pool: &Path, host_file: &Path, path: &str) -> CmdResult {
    let host_err = |e: std::io::Error| Failure::new(format!("{}: {e}", host_file.display()));
    let mut src = std::fs::File::open(host_file).map_err(host_err)?;
    let len = src.metadata().map_err(host_err)?.len();
    with_pool(pool, |fs| {
        // One transaction: after a crash the target is the old file or the whole new one.
        let tx = fs.begin(&[])?;
        let dst = fs
            .options()
            .write(true)
            .create(true)
            .truncate(true)
            .open_in(&tx, path)?;
        let bar = (len > PUT_CHUNK as u64).then(|| {
            let pb = indicatif::ProgressBar::new(len);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:40.cyan/blue} {bytes}/{total_bytes} {bytes_per_sec}",
            ) {
                pb.set_style(style);
            }
            pb
        });
        let mut buf = vec![0u8; PUT_CHUNK.min(len as usize).max(1)];
        let mut off = 0u64;
        loop {
            let n = std::io::Read::read(&mut src, &mut buf).map_err(host_err)?;
            if n == 0 {
                break;
            }
            dst.write_at(&buf[..n], off)?;
            off += n as u64;
            if let Some(pb) = &bar {
                pb.set_position(off);
            }
        }
        drop(dst);
        tx.commit()?;
        if let Some(pb) = bar {
            pb.finish_and_clear();
        }
        println!("{} -> {path}: {off} bytes", host_file.display());
        Ok(())
    })
}

pub fn get(pool: &Path, path: &str, host_file: &Path) -> CmdResult {
    with_pool(pool, |fs| {
        let data = fs.read(path)?;
        std::fs::write(host_file, &data)
            .map_err(|e| Failure::new(format!("{}: {e}", host_file.display())))?;
        Ok(())
    })
}

fn remove_tree(fs: &Fs, path: &str) -> Result<(), Failure> {
    let meta = fs.metadata(path)?;
    if !meta.is_dir() {
        fs.remove_file(path)?;
        return Ok(());
    }
    for e in fs.read_dir(path)? {
        let child = format!(
            "{}/{}",
            path.trim_end_matches('/'),
            String::from_utf8_lossy(&e.name)
        );
        remove_tree(fs, &child)?;
    }
    fs.remove_dir(path)?;
    Ok(())
}

pub fn rm(pool: &Path, path: &str, recursive: bool) -> CmdResult {
    with_pool(pool, |fs| {
        if recursive {
            remove_tree(fs, path)
        } else if fs.metadata(path)?.is_dir() {
            Err(Failure::new(format!(
                "{path} is a directory (use -r to remove it with its contents)"
            )))
        } else {
            fs.remove_file(path).map_err(Into::into)
        }
    })
}

pub fn mkdir(pool: &Path, path: &str, parents: bool) -> CmdResult {
    with_pool(pool, |fs| {
        if parents {
            fs.create_dir_all(path)?;
        } else {
            fs.create_dir(path)?;
        }
        Ok(())
    })
}
