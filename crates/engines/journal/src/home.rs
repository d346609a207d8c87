//! Home files: the journal's file ids mapped to files of the home directory.

use hostfs::{HostFs, HostFsResult, OpenOptions};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

/// Names the home file of a file id (relative to the home directory).
pub type HomeNamer = Arc<dyn Fn(u32) -> PathBuf + Send + Sync>;

/// Open home files, by file id, at most `open_max` at once (first opened, first closed;
/// a caller still holding a closed one keeps its handle until it drops it).
pub struct HomeFiles<H: HostFs> {
    host: H,
    namer: HomeNamer,
    open: parking_lot::Mutex<OpenFiles<H::File>>,
    /// Files written since the journal was opened.
    written: parking_lot::Mutex<HashSet<u32>>,
}

struct OpenFiles<F> {
    by_id: HashMap<u32, Arc<F>>,
    order: VecDeque<u32>,
    max: usize,
}

impl<F> OpenFiles<F> {
    fn insert(&mut self, id: u32, f: Arc<F>) {
        while self.by_id.len() >= self.max {
            match self.order.pop_front() {
                Some(old) => {
                    self.by_id.remove(&old);
                }
                None => break,
            }
        }
        self.by_id.insert(id, f);
        self.order.push_back(id);
        assert_eq!(
            self.by_id.len(),
            self.order.len(),
            "open home files out of step"
        );
    }
}

impl<H: HostFs> HomeFiles<H> {
    pub fn new(host: H, namer: HomeNamer, open_max: usize) -> Self {
        HomeFiles {
            host,
            namer,
            open: parking_lot::Mutex::new(OpenFiles {
                by_id: HashMap::new(),
                order: VecDeque::new(),
                max: open_max.max(1),
            }),
            written: parking_lot::Mutex::new(HashSet::new()),
        }
    }

    /// Home files open now.
    pub fn open_count(&self) -> usize {
        self.open.lock().by_id.len()
    }

    pub fn host(&self) -> &H {
        &self.host
    }

    /// The home file of `file`, created when missing.
    pub fn file(&self, file: u32) -> HostFsResult<Arc<H::File>> {
        let mut open = self.open.lock();
        if let Some(f) = open.by_id.get(&file) {
            return Ok(f.clone());
        }
        let path = (self.namer)(file);
        let f = match self.host.open(&path, &OpenOptions::read_write()) {
            Ok(f) => f,
            Err(_) => {
                let f = self.host.open(&path, &OpenOptions::create())?;
                let dir = path.parent().unwrap_or(std::path::Path::new(""));
                // persist: the new home file's directory entry, before any data of it is
                // counted on (an append's sync_data does not make the name durable).
                self.host.sync_dir(dir)?;
                f
            }
        };
        let f = Arc::new(f);
        open.insert(file, f.clone());
        Ok(f)
    }

    /// Read a home block into `buf` (zeros past the end of the file).
    pub fn read_block(&self, file: u32, block: u32, buf: &mut [u8]) -> HostFsResult<()> {
        let f = self.file(file)?;
        let n = self
            .host
            .read_full_at(&f, block as u64 * crate::BLOCK_LEN, buf)?;
        buf[n..].fill(0);
        Ok(())
    }

    /// Write `data` at `off` of a home file (not durable until [`HomeFiles::sync`]).
    pub fn write_at(&self, file: u32, off: u64, data: &[u8]) -> HostFsResult<()> {
        let f = self.file(file)?;
        self.written.lock().insert(file);
        self.host.write_all_at(&f, off, data)
    }

    /// Whether `file` was written since the journal was opened.
    pub fn was_written(&self, file: u32) -> bool {
        self.written.lock().contains(&file)
    }

    /// Make a home file's data, length and times durable.
    pub fn sync_all(&self, file: u32) -> HostFsResult<()> {
        let f = self.file(file)?;
        self.host.sync_all(&f)
    }

    /// The host's stat of a home file, `None` when it does not exist (never creates it).
    pub fn stat(&self, file: u32) -> HostFsResult<Option<hostfs::Stat>> {
        match self.host.stat(&(self.namer)(file)) {
            Ok(st) => Ok(Some(st)),
            Err(e) if e.errno() == libc::ENOENT => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The host's stat of an open (or created) home file.
    pub fn stat_open(&self, file: u32) -> HostFsResult<hostfs::Stat> {
        let f = self.file(file)?;
        self.host.file_stat(&f)
    }

    /// The path of a home file, relative to the home directory.
    pub fn path(&self, file: u32) -> PathBuf {
        (self.namer)(file)
    }

    /// Length of a home file (0 when it does not exist yet).
    pub fn len(&self, file: u32) -> HostFsResult<u64> {
        let f = self.file(file)?;
        Ok(self.host.file_stat(&f)?.len)
    }

    /// Make a home file's data durable.
    pub fn sync(&self, file: u32) -> HostFsResult<()> {
        let f = self.file(file)?;
        self.host.sync_data(&f)
    }
}
