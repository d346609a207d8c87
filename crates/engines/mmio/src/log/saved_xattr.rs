//! The old value of an extended attribute changed inside a transaction, saved in a trash
//! file before the change (an intent record has room for paths, not for a 64 KiB value).
//! The file is written and made durable before the `Xattr` intent that names it is
//! published, so recovery finds it whenever it finds the intent; undo restores the value
//! from it and deletes it, commit deletes it.
//!
//! ```text
//! saved attribute (a trash file, little-endian)
//!  0 magic "AXV1"   4 present u8 (0: the attribute was absent)   5 pad u8
//!  6 name_len u16   8 value_len u32   12 checksum u32 (crc32c of bytes 0..12 and 16..)
//! 16 name (the host attribute name) ++ value
//! ```

use crate::host::FileMedia;
use crate::io_err;
use std::path::Path;
use store::{Error, Result};

const MAGIC: &[u8; 4] = b"AXV1";
const HEADER_LEN: usize = 16;

/// The attribute `name` had `value` (`None`: it was absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SavedXattr {
    pub(crate) name: Vec<u8>,
    pub(crate) value: Option<Vec<u8>>,
}

fn checksum(b: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&b[..12]), &b[HEADER_LEN..])
}

impl SavedXattr {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let value = self.value.as_deref().unwrap_or(&[]);
        assert!(self.name.len() <= u16::MAX as usize && value.len() <= u32::MAX as usize);
        let mut b = vec![0u8; HEADER_LEN];
        b[..4].copy_from_slice(MAGIC);
        b[4] = u8::from(self.value.is_some());
        b[6..8].copy_from_slice(&(self.name.len() as u16).to_le_bytes());
        b[8..12].copy_from_slice(&(value.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.name);
        b.extend_from_slice(value);
        let crc = checksum(&b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode the file at `path` (for messages); a torn or foreign file is `Corrupt`.
    pub(crate) fn decode(b: &[u8], path: &Path) -> Result<SavedXattr> {
        let bad = |why: &str| {
            Error::corrupt(
                format!("saved extended attribute {}: {why}", path.display()),
                0,
            )
        };
        if b.len() < HEADER_LEN || &b[..4] != MAGIC {
            return Err(bad("no header"));
        }
        let name_len = u16::from_le_bytes([b[6], b[7]]) as usize;
        let value_len = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize;
        if b.len() != HEADER_LEN + name_len + value_len || b[4] > 1 {
            return Err(bad("lengths do not match the file"));
        }
        if u32::from_le_bytes([b[12], b[13], b[14], b[15]]) != checksum(b) {
            return Err(bad("checksum mismatch"));
        }
        let name = b[HEADER_LEN..HEADER_LEN + name_len].to_vec();
        let value = (b[4] == 1).then(|| b[HEADER_LEN + name_len..].to_vec());
        Ok(SavedXattr { name, value })
    }
}

/// Undo an attribute change: put the saved value back on `a` (if `a` is still there), then
/// delete the saved file `b`. Idempotent: a missing `b` means it was done already.
pub(crate) fn restore<M: FileMedia>(media: &M, a: &Path, b: &Path) -> Result<()> {
    let bytes = match media.read_all(b) {
        Ok(bytes) => bytes,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(io_err(b, "read saved attribute", e)),
    };
    let saved = SavedXattr::decode(&bytes, b)?;
    if media.stat(a).is_ok() {
        let value = saved.value.as_deref();
        match media.set_xattr(a, &saved.name, value, hostfs::XattrHow::Either) {
            Err(e) if value.is_none() && e.raw_os_error() == Some(libc::ENODATA) => {}
            r => r.map_err(|e| io_err(a, "undo setxattr", e))?,
        }
    }
    media
        .unlink(b)
        .map_err(|e| io_err(b, "delete saved attribute", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_value_decodes_to_itself_and_a_flipped_byte_is_refused() {
        for value in [None, Some(vec![]), Some(vec![7u8; 65536])] {
            let s = SavedXattr {
                name: b"user.a".to_vec(),
                value,
            };
            let b = s.encode();
            assert_eq!(SavedXattr::decode(&b, Path::new("x")).expect("decode"), s);
            for at in [0, 4, 7, 13, HEADER_LEN, b.len() - 1] {
                let mut bad = b.clone();
                bad[at] ^= 1;
                assert!(
                    SavedXattr::decode(&bad, Path::new("x")).is_err(),
                    "byte {at}"
                );
            }
            assert!(SavedXattr::decode(&b[..b.len() - 1], Path::new("x")).is_err());
        }
    }
}
