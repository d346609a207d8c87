//! The old value of an extended attribute changed inside a transaction, kept in a file of
//! the trash directory (an intent record has room for two paths, not for a 64 KiB value).
//! The file is written and synced before the `Xattr` intent naming it is persisted, so
//! recovery finds it whenever it finds the intent; an undo puts the value back and deletes
//! the file, a commit deletes it.
//!
//! ```text
//! 0  u32 magic "ACXS"       4 u8 version (1)     5 u8 present (0: the attribute was absent)
//! 6  u16 name length        8 u32 value length   12 u32 crc32c of the file, bytes 12..16 zero
//! 16 name (the home file system's attribute name) ++ value
//! ```

use pmem::crc::crc32c;

const MAGIC: &[u8; 4] = b"ACXS";
const VERSION: u8 = 1;
const HEADER_LEN: usize = 16;

/// The attribute `name` had `value` (`None`: it was absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedXattr {
    pub name: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

fn checksum(b: &[u8]) -> u32 {
    let mut copy = b.to_vec();
    copy[12..16].fill(0);
    crc32c(&copy)
}

impl SavedXattr {
    pub fn encode(&self) -> Vec<u8> {
        let value = self.value.as_deref().unwrap_or(&[]);
        assert!(
            self.name.len() <= usize::from(u16::MAX) && value.len() <= u32::MAX as usize,
            "cache: saved attribute too large"
        );
        let mut b = vec![0u8; HEADER_LEN];
        b[..4].copy_from_slice(MAGIC);
        b[4] = VERSION;
        b[5] = u8::from(self.value.is_some());
        b[6..8].copy_from_slice(&(self.name.len() as u16).to_le_bytes());
        b[8..12].copy_from_slice(&(value.len() as u32).to_le_bytes());
        b.extend_from_slice(&self.name);
        b.extend_from_slice(value);
        let crc = checksum(&b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Self::decode(&b).as_ref(),
            Ok(self),
            "cache: saved attribute does not decode back"
        );
        b
    }

    pub fn decode(b: &[u8]) -> Result<SavedXattr, &'static str> {
        if b.len() < HEADER_LEN || &b[..4] != MAGIC {
            return Err("saved attribute has no header");
        }
        if b[4] != VERSION {
            return Err("saved attribute of an unknown version");
        }
        let name_len = usize::from(u16::from_le_bytes([b[6], b[7]]));
        let value_len = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize;
        if b.len() != HEADER_LEN + name_len + value_len || b[5] > 1 {
            return Err("saved attribute lengths do not match the file");
        }
        if u32::from_le_bytes([b[12], b[13], b[14], b[15]]) != checksum(b) {
            return Err("saved attribute checksum mismatch");
        }
        let (name, value) = b[HEADER_LEN..].split_at(name_len);
        Ok(SavedXattr {
            name: name.to_vec(),
            value: (b[5] == 1).then(|| value.to_vec()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_value_decodes_to_itself_and_damage_is_refused() {
        for value in [None, Some(vec![]), Some(vec![7u8; 65536])] {
            let s = SavedXattr {
                name: b"user.a".to_vec(),
                value,
            };
            let b = s.encode();
            assert_eq!(SavedXattr::decode(&b), Ok(s));
            for at in [0, 4, 5, 7, 13, HEADER_LEN, b.len() - 1] {
                let mut bad = b.clone();
                bad[at] ^= 1;
                assert!(SavedXattr::decode(&bad).is_err(), "byte {at}");
            }
            assert!(SavedXattr::decode(&b[..b.len() - 1]).is_err());
        }
    }
}
