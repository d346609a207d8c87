//! Little-endian encoding helpers with bounds-checked decoding: a short or corrupt buffer
//! gives a clear [`store::Error::Corrupt`], never a panic.

use store::{Error, Result};

/// Appends little-endian fixed-width integers and byte strings.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer::default()
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads what [`Writer`] wrote; every read checks the remaining length.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf` in its file, for error messages.
    base: u64,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Reader { buf, pos: 0, base }
    }
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(Error::Corrupt {
                what: format!("remap record truncated (wanted {n} bytes)"),
                offset: self.offset(),
            });
        };
        let s = self.buf.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

/// The little-endian u32 at `off` of `buf`, or 0 past its end.
pub fn le_u32(buf: &[u8], off: usize) -> u32 {
    buf.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0)
}

/// The little-endian u64 at `off` of `buf`, or 0 past its end.
pub fn le_u64(buf: &[u8], off: usize) -> u64 {
    buf.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}
