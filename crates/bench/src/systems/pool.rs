//! `fcfs`, `nc`, `fg-wal`, `scsp`, `soc`, `sync`: the pool engine (crates/engines/pool) in
//! each of its protocol modes, driven through the `Store` API exactly as an application
//! would: the files are created and opened once, then each update is `tx_begin(&[a, b])`,
//! `write` in each file, `tx_commit`.
//!
//! The pool lives in a file in /dev/shm mapped with `pmem::MappedRegion` (the tmpfs page
//! cache is the emulated NVMM), optionally behind `pmem::Emulated` (extra write latency per
//! flushed line, Fig. 10), behind [`ThreadSplit`], which tells the lines written back by the
//! engine's background checkpoint threads apart from the rest.
//!
//! Bytes written: every cache line written back to the region (flushed or non-temporal),
//! × 64, from the region's own counters (`RegionStats::lines_flushed`), as the pool's
//! `micro` example counts them. The checkpoint share is what the background threads wrote,
//! plus the checkpoint of everything still pending that the runner asks for after each run
//! (`run_end`, untimed: a run ends as an unmount would). In SYNC mode the checkpoint runs
//! inside the commit, so it is foreground by design.

use crate::error::{BenchError, Result};
use crate::system::TwoFileUpdate;
use crate::workload::Write;
use pmem::{Emulated, EmulatorConfig, MappedRegion, Region, RegionStats};
use pool::{Mode, PoolConfig, PoolStore};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Fh, OpenFlags, Store, ROOT_INO};

/// Name prefix of the pool engine's background checkpoint threads (`pool-ckpt-N`). If the
/// engine renamed them, their lines would count as foreground and the split would show no
/// background checkpointing at all (the total stays right).
const CHECKPOINT_THREAD_PREFIX: &str = "pool-ckpt";

thread_local! {
    static ON_CHECKPOINT_THREAD: bool = std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with(CHECKPOINT_THREAD_PREFIX));
}

/// A region wrapper counting the cache lines written back by the engine's checkpoint threads
/// (everything else is forwarded untouched; the cost is one thread-local read per flush).
pub struct ThreadSplit<R> {
    inner: R,
    background_lines: AtomicU64,
}

impl<R: Region> ThreadSplit<R> {
    pub fn new(inner: R) -> Self {
        ThreadSplit {
            inner,
            background_lines: AtomicU64::new(0),
        }
    }

    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// Lines written back (flush or non-temporal store) by checkpoint threads so far.
    pub fn background_lines(&self) -> u64 {
        self.background_lines.load(Ordering::Relaxed)
    }

    fn count(&self, off: u64, len: u64) {
        if ON_CHECKPOINT_THREAD.with(|b| *b) {
            self.background_lines
                .fetch_add(pmem::lines_in(off, len), Ordering::Relaxed);
        }
    }
}

impl<R: Region> Region for ThreadSplit<R> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) {
        self.inner.read(off, buf)
    }
    fn write(&self, off: u64, data: &[u8]) {
        self.inner.write(off, data)
    }
    fn fill(&self, off: u64, len: u64, byte: u8) {
        self.inner.fill(off, len, byte)
    }
    fn write_nt(&self, off: u64, data: &[u8]) {
        self.count(off, data.len() as u64);
        self.inner.write_nt(off, data)
    }
    fn write_line_nt(&self, off: u64, line: &[u8; 64]) {
        self.count(off, 64);
        self.inner.write_line_nt(off, line)
    }
    fn copy_nt_within(&self, src: u64, dst: u64, len: u64) {
        self.count(dst, len);
        self.inner.copy_nt_within(src, dst, len)
    }
    fn load_u64(&self, off: u64) -> u64 {
        self.inner.load_u64(off)
    }
    fn store_u64(&self, off: u64, value: u64) {
        self.inner.store_u64(off, value)
    }
    fn store_u64_nt(&self, off: u64, value: u64) {
        self.count(off, 8);
        self.inner.store_u64_nt(off, value)
    }
    fn flush(&self, off: u64, len: u64) {
        self.count(off, len);
        self.inner.flush(off, len)
    }
    fn fence(&self) {
        self.inner.fence()
    }
    fn stats(&self) -> RegionStats {
        self.inner.stats()
    }
    fn define_area(&self, name: &'static str, off: u64, len: u64) {
        self.inner.define_area(name, off, len)
    }
    fn prefetch(&self, off: u64) {
        self.inner.prefetch(off)
    }
}

/// The region type every benchmarked pool runs on.
pub type BenchRegion = ThreadSplit<Emulated<MappedRegion>>;
/// A benchmarked pool.
pub type BenchPool = PoolStore<BenchRegion>;

/// The benchmark's name of a mode (the same as `Mode::name`: fcfs, nc, fg-wal, ...).
pub fn system_name(mode: Mode) -> &'static str {
    mode.name()
}

/// The pool configuration the benchmark uses for `files` files: the engine's defaults (one
/// background checkpoint thread, checkpoint at < 10 % free blocks or a pending list longer
/// than 5), with enough inodes. With `ATOMFS_BENCH_DATA_CHECKSUMS=1` the pools are
/// formatted with per-block data checksums (to measure their cost, docs/bench.md).
pub fn bench_config(mode: Mode, files: u32) -> PoolConfig {
    let checksums = std::env::var("ATOMFS_BENCH_DATA_CHECKSUMS").is_ok_and(|v| v == "1");
    PoolConfig {
        inode_count: (files as u64 + 64).max(1024),
        ..PoolConfig::default()
    }
    .with_mode(mode)
    .with_data_checksums(checksums)
}

/// Pool file size for `files` × `file_size` bytes of data: as in the seed (6 GB of NVMM for
/// 1,000 × 4 MB files), half as much again for pending blocks (checkpointing starts at
/// 10 % free), plus room for the logs and inodes.
pub fn pool_bytes(files: u32, file_size: u64) -> u64 {
    let data = files as u64 * file_size;
    (data + data / 2 + (48 << 20)).next_multiple_of(1 << 20)
}

fn store_err(what: &str, mode: Mode, e: store::Error) -> BenchError {
    BenchError::System {
        system: mode.name().into(),
        message: format!("{what}: {e}"),
    }
}

pub struct PoolSystem {
    mode: Mode,
    cfg: PoolConfig,
    emulator: EmulatorConfig,
    path: PathBuf,
    store: Option<Arc<BenchPool>>,
    fhs: Vec<Fh>,
    /// Lines written by the end-of-run checkpoints (foreground thread, untimed).
    drain_lines: u64,
    /// Spin (instead of sleeping) for idle periods shorter than this.
    spin_below: Duration,
}

impl PoolSystem {
    /// A pool in `mode` with the engine's default configuration, no NVMM emulation.
    pub fn new(mode: Mode) -> Self {
        Self::with(mode, EmulatorConfig::default(), None)
    }

    /// A pool in `mode` behind the NVMM emulator, optionally with its own configuration
    /// (the inode count is always raised to fit the files).
    pub fn with(mode: Mode, emulator: EmulatorConfig, cfg: Option<PoolConfig>) -> Self {
        PoolSystem {
            mode,
            cfg: cfg.unwrap_or_else(|| bench_config(mode, 0)).with_mode(mode),
            emulator,
            path: crate::scratch_path(&format!("pool-{}.pool", mode.name())),
            store: None,
            fhs: Vec::new(),
            drain_lines: 0,
            spin_below: Duration::from_millis(2),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The open pool and the handles of its files (for the multi-threaded runner).
    pub fn shared(&self) -> Result<(Arc<BenchPool>, Vec<Fh>)> {
        let s = self.store.as_ref().ok_or_else(|| self.no_setup())?;
        Ok((s.clone(), self.fhs.clone()))
    }

    fn no_setup(&self) -> BenchError {
        BenchError::Invalid(format!("{}: no setup", self.mode.name()))
    }

    fn fh(&self, file: u32) -> Result<Fh> {
        self.fhs
            .get(file as usize)
            .copied()
            .ok_or_else(|| BenchError::Invalid(format!("{}: no file {file}", self.mode.name())))
    }

    /// Checkpoint every committed version now (untimed); counts its lines as checkpoint.
    pub fn drain(&mut self) -> Result<()> {
        let s = self.store.as_ref().ok_or_else(|| self.no_setup())?;
        let region = s.region();
        let (total0, bg0) = (region.stats().lines_flushed, region.background_lines());
        s.checkpoint_all()
            .map_err(|e| store_err("checkpoint", self.mode, e))?;
        let (total1, bg1) = (region.stats().lines_flushed, region.background_lines());
        // Lines the background threads wrote meanwhile are counted by ThreadSplit already.
        self.drain_lines += (total1 - total0).saturating_sub(bg1 - bg0);
        Ok(())
    }
}

/// One two-file atomic update on a shared pool: `tx_begin` with both files, one `write`
/// in each, `tx_commit` (aborted if a write fails).
pub fn pool_tx(s: &BenchPool, fa: Fh, fb: Fh, a: &Write<'_>, b: &Write<'_>) -> store::Result<()> {
    let tx = s.tx_begin(&[fa, fb])?;
    let written = write_all(s, fa, a.off, a.data).and_then(|_| write_all(s, fb, b.off, b.data));
    if let Err(e) = written {
        let _ = s.tx_abort(tx);
        return Err(e);
    }
    s.tx_commit(tx)
}

fn write_all(s: &BenchPool, fh: Fh, mut off: u64, mut data: &[u8]) -> store::Result<()> {
    loop {
        let n = s.write(fh, off, data)?;
        if n >= data.len() {
            return Ok(());
        }
        if n == 0 {
            return Err(store::Error::Io {
                path: "bench file".into(),
                op: "write",
                source: std::io::Error::from(std::io::ErrorKind::WriteZero),
            });
        }
        off += n as u64;
        data = &data[n..];
    }
}

/// Create the region, format the pool, touch every block page, create and fill the files.
fn build(
    mode: Mode,
    cfg: &PoolConfig,
    emulator: EmulatorConfig,
    path: &std::path::Path,
    files: u32,
    file_size: u64,
) -> store::Result<(Arc<BenchPool>, Vec<Fh>)> {
    let size = pool_bytes(files, file_size);
    let mapped = MappedRegion::create(path, size).map_err(|e| store::Error::Io {
        path: path.display().to_string(),
        op: "create pool",
        source: std::io::Error::other(e.to_string()),
    })?;
    let region = ThreadSplit::new(Emulated::new(mapped, emulator));
    let mut cfg = cfg.clone().with_mode(mode);
    cfg.inode_count = cfg.inode_count.max(files as u64 + 64);
    let s = Arc::new(PoolStore::format(Arc::new(region), &cfg)?);
    // No mode pays tmpfs page faults for the blocks and log slots it first uses in the timed
    // runs. Through the inner mapping: not an NVMM write of the benchmark.
    pool::prefault(s.region().inner().inner(), &s.superblock().geometry);
    let chunk = vec![0x5Au8; (1 << 20).min(file_size as usize).max(1)];
    let rw = OpenFlags {
        read: true,
        write: true,
        ..Default::default()
    };
    let mut fhs = Vec::with_capacity(files as usize);
    for i in 0..files {
        let meta = s.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, None)?;
        let fh = s.open(meta.ino, rw)?;
        let mut off = 0;
        while off < file_size {
            let n = chunk.len().min((file_size - off) as usize);
            write_all(&s, fh, off, &chunk[..n])?;
            off += n as u64;
        }
        fhs.push(fh);
    }
    s.checkpoint_all()?;
    Ok((s, fhs))
}

impl TwoFileUpdate for PoolSystem {
    fn name(&self) -> String {
        system_name(self.mode).into()
    }

    fn guarantee(&self) -> &'static str {
        match self.mode {
            Mode::Nc => "none (no consistency: in-place writes, no log)",
            _ => "atomic",
        }
    }

    fn medium(&self) -> String {
        let emu = if self.emulator.is_off() {
            String::new()
        } else {
            format!(
                ", emulated NVMM +{} ns per line, {} MB/s cap",
                self.emulator.write_latency_ns,
                self.emulator.write_bandwidth_max / 1_000_000
            )
        };
        format!(
            "atomfs pool engine, mode {}, pool {} (tmpfs page cache as NVMM){emu}, {} checkpoint thread(s)",
            self.mode.name(),
            self.path.display(),
            match self.mode {
                Mode::Fcfs => self.cfg.checkpoint_threads,
                Mode::Soc => self.cfg.checkpoint_threads.min(1),
                _ => 0,
            }
        )
    }

    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        let _ = std::fs::remove_file(&self.path);
        let built = build(
            self.mode,
            &self.cfg,
            self.emulator,
            &self.path,
            files,
            file_size,
        );
        let (s, fhs) = built.map_err(|e| store_err("setup", self.mode, e))?;
        self.store = Some(s);
        self.fhs = fhs;
        Ok(())
    }

    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        let (fa, fb) = (self.fh(a.file)?, self.fh(b.file)?);
        let s = self.store.as_ref().ok_or_else(|| self.no_setup())?;
        pool_tx(s, fa, fb, &a, &b).map_err(|e| store_err("tx", self.mode, e))
    }

    fn bytes_written(&self) -> Option<u64> {
        self.store
            .as_ref()
            .map(|s| s.region().stats().lines_flushed * pmem::CACHE_LINE)
    }

    fn ckpt_bytes_written(&self) -> Option<u64> {
        self.store
            .as_ref()
            .map(|s| (s.region().background_lines() + self.drain_lines) * pmem::CACHE_LINE)
    }

    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        let fh = self.fh(file)?;
        let s = self.store.as_ref().ok_or_else(|| self.no_setup())?;
        let n = s
            .read(fh, off, buf)
            .map_err(|e| store_err("read", self.mode, e))?;
        if n != buf.len() {
            return Err(BenchError::Invalid(format!(
                "{}: short read {n} of {} at {file}:{off}",
                self.mode.name(),
                buf.len()
            )));
        }
        Ok(())
    }

    fn run_end(&mut self) {
        // The runner has no error path here; a failed checkpoint shows up as an error of
        // the next transaction (the engine reports it there too).
        let _ = self.drain();
    }

    fn idle(&mut self, dur: Duration) {
        // thread::sleep cannot sleep for a few microseconds (it takes ~60 µs at least), so
        // short idle periods are spun; the checkpoint thread has the other core meanwhile.
        if dur >= self.spin_below {
            std::thread::sleep(dur);
        } else {
            let end = Instant::now() + dur;
            while Instant::now() < end {
                std::hint::spin_loop();
            }
        }
    }
}

impl Drop for PoolSystem {
    fn drop(&mut self) {
        self.fhs.clear();
        if let Some(s) = self.store.take() {
            let _ = s.unmount();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
