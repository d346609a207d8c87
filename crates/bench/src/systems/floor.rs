//! `floor`: the physical floor of a durable two-range update — memcpy of the same bytes into
//! a /dev/shm mapping, clwb of the written lines, one sfence. No atomicity at all (a crash can
//! leave either range half written); every consistent system pays at least this.

use crate::error::{BenchError, Result};
use crate::flush::{flush, sfence, FlushKind, ShmMap};
use crate::system::TwoFileUpdate;
use crate::workload::Write;

pub struct Floor {
    map: Option<ShmMap>,
    file_size: u64,
    files: u32,
    kind: FlushKind,
    bytes: u64,
}

impl Floor {
    pub fn new() -> Self {
        Floor {
            map: None,
            file_size: 0,
            files: 0,
            kind: FlushKind::detect(),
            bytes: 0,
        }
    }

    fn range(&self, file: u32, off: u64, len: u64) -> Result<std::ops::Range<usize>> {
        if file >= self.files || off.checked_add(len).is_none_or(|e| e > self.file_size) {
            return Err(BenchError::Invalid(format!(
                "floor: range {file}:{off}+{len} outside"
            )));
        }
        let start = (file as u64 * self.file_size + off) as usize;
        Ok(start..start + len as usize)
    }

    fn copy(&mut self, w: &Write<'_>) -> Result<()> {
        let range = self.range(w.file, w.off, w.data.len() as u64)?;
        let kind = self.kind;
        let map = self
            .map
            .as_mut()
            .ok_or_else(|| BenchError::Invalid("floor: no setup".into()))?;
        let dst = &mut map.as_mut_slice()[range];
        dst.copy_from_slice(w.data);
        // SAFETY: `dst` lies inside the live mapping.
        unsafe { flush(kind, dst.as_ptr(), dst.len()) };
        self.bytes += w.data.len() as u64;
        Ok(())
    }
}

impl Default for Floor {
    fn default() -> Self {
        Self::new()
    }
}

impl TwoFileUpdate for Floor {
    fn name(&self) -> String {
        "floor".into()
    }

    fn guarantee(&self) -> &'static str {
        "none (durable copy only)"
    }

    fn medium(&self) -> String {
        format!(
            "{} mapping, memcpy + {} + sfence",
            crate::scratch_base().display(),
            self.kind.as_str()
        )
    }

    fn setup(&mut self, files: u32, file_size: u64) -> Result<()> {
        let len = files as u64 * file_size;
        let path = crate::scratch_path("floor.map");
        let mut map = ShmMap::create(&path, len as usize)?;
        // Touch every page so that page faults are not measured as transaction cost (the
        // files of the other systems exist before the run too).
        map.as_mut_slice()
            .chunks_mut(4096)
            .for_each(|page| page[0] = 0);
        self.map = Some(map);
        self.files = files;
        self.file_size = file_size;
        Ok(())
    }

    fn tx(&mut self, a: Write<'_>, b: Write<'_>) -> Result<()> {
        self.copy(&a)?;
        self.copy(&b)?;
        // persist: both ranges are durable after this fence (no ordering between them).
        sfence();
        Ok(())
    }

    fn bytes_written(&self) -> Option<u64> {
        Some(self.bytes)
    }

    fn read(&mut self, file: u32, off: u64, buf: &mut [u8]) -> Result<()> {
        let range = self.range(file, off, buf.len() as u64)?;
        let map = self
            .map
            .as_ref()
            .ok_or_else(|| BenchError::Invalid("floor: no setup".into()))?;
        buf.copy_from_slice(&map.as_slice()[range]);
        Ok(())
    }
}
