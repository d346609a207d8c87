//! Extended attributes (formats 3 and 4): each inode's attributes live in a chain of attribute
//! blocks (namespace/xattr_record.rs) named by the inode's 8-byte attribute pointer.
//!
//! A change is copy-on-write: the whole new set is written into fresh blocks (unreachable,
//! written and flushed directly, freed by an abort), then the pointer and the ctime change
//! under the undo log, and the old chain is freed after the commit point
//! (`Tx::deferred_blocks`). So a set or remove is atomic and joins its transaction like any
//! metadata change; a crash before the commit point leaves the old pointer (undo), after it
//! the new one. Recovery needs nothing more: the allocator rebuild walks every live inode's
//! chain (`Core::xattr_blocks`).

use crate::core::Core;
use crate::log::transaction::Tx;
use crate::media::layout::*;
use crate::namespace::xattr_record::{self as record, Attr, XATTR_STREAM_MAX};
use pmem::Region;
use store::{Error, Result, XattrSet};

impl<R: Region> Core<R> {
    /// The attribute chain of `ino`: its blocks and attributes (sorted by name).
    pub(crate) fn xattr_chain(&self, ino: u64) -> Result<(Vec<u64>, Vec<Attr>)> {
        let at = self.geo.inode(ino) + I_XATTR;
        let head = self.read_u64(at);
        if head == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        self.geo.check_pbn(head, at)?;
        let mut from = at;
        record::decode_chain(head, |pbn| {
            let pbn = self.geo.check_pbn(pbn, from)?;
            let addr = self.geo.block(pbn);
            let mut block = vec![0u8; BLOCK_SIZE as usize];
            self.region.read(addr, &mut block);
            from = addr + 8;
            Ok((block, addr))
        })
    }

    /// The blocks of `ino`'s attribute chain, for the allocator rebuild and for freeing the
    /// inode (none on a pool without attributes). Tolerant, so that one rotten attribute
    /// block does not keep the pool from opening (its reads fail, fsck names it): every
    /// block named is counted, but the chain is followed past a block only when that block
    /// decodes (its next pointer is then covered by its crc).
    pub(crate) fn xattr_blocks(&self, ino: u64) -> Result<Vec<u64>> {
        let mut blocks = Vec::new();
        if !self.geo.posix_objects {
            return Ok(blocks);
        }
        let mut from = self.geo.inode(ino) + I_XATTR;
        let mut next = self.read_u64(from);
        let mut block = vec![0u8; BLOCK_SIZE as usize];
        while next != 0 && blocks.len() < record::XATTR_CHAIN_MAX && !blocks.contains(&next) {
            let pbn = self.geo.check_pbn(next, from)?;
            blocks.push(pbn);
            from = self.geo.block(pbn);
            self.region.read(from, &mut block);
            next = match record::decode_block(&block, from) {
                Ok((after, _, _)) => after,
                Err(_) => 0,
            };
            from += 8;
        }
        Ok(blocks)
    }

    /// Value of attribute `name` of `ino`.
    pub(crate) fn get_xattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        self.inode_kind(ino)?;
        let (_, attrs) = self.xattr_chain(ino)?;
        attrs
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| Error::NoAttribute(String::from_utf8_lossy(name).into_owned()))
    }

    /// Names of every attribute of `ino`.
    pub(crate) fn list_xattrs(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        self.inode_kind(ino)?;
        Ok(self
            .xattr_chain(ino)?
            .1
            .into_iter()
            .map(|(n, _)| n)
            .collect())
    }

    /// Set (`value` Some) or remove (None) attribute `name` of `ino` inside `tx`.
    pub(crate) fn change_xattr(
        &self,
        tx: &mut Tx,
        ino: u64,
        name: &[u8],
        value: Option<&[u8]>,
        how: XattrSet,
    ) -> Result<()> {
        self.inode_kind(ino)?;
        let (old_blocks, mut attrs) = self.xattr_chain(ino)?;
        let found = attrs.binary_search_by(|(n, _)| n.as_slice().cmp(name));
        let shown = || String::from_utf8_lossy(name).into_owned();
        match (value, found, how) {
            (Some(_), Ok(_), XattrSet::Create) => return Err(Error::Exists(shown())),
            (Some(_), Err(_), XattrSet::Replace) | (None, Err(_), _) => {
                return Err(Error::NoAttribute(shown()))
            }
            _ => {}
        }
        self.creates.check(ino, tx.id)?;
        match (value, found) {
            (Some(v), Ok(i)) => attrs[i].1 = v.to_vec(),
            (Some(v), Err(i)) => attrs.insert(i, (name.to_vec(), v.to_vec())),
            (None, Ok(i)) => {
                attrs.remove(i);
            }
            (None, Err(_)) => {}
        }
        if record::stream_len(&attrs) > XATTR_STREAM_MAX {
            return Err(Error::NoSpace(format!(
                "inode {ino}: attributes past {XATTR_STREAM_MAX} bytes of records"
            )));
        }
        let head = self.store_chain(tx, &attrs)?;
        let off = self.geo.inode(ino);
        let now = self.now().to_le_bytes();
        self.meta_update(
            tx,
            &[(off + I_XATTR, &head.to_le_bytes()), (off + I_CTIME, &now)],
        )?;
        // The old chain is unreachable once the commit point has passed.
        tx.deferred_blocks.extend(old_blocks);
        Ok(())
    }

    /// Write `attrs` into a new chain of fresh blocks of `tx` (flushed, durable at the next
    /// fence); returns its head (0 for no attribute).
    fn store_chain(&self, tx: &mut Tx, attrs: &[Attr]) -> Result<u64> {
        let mut pbns = Vec::with_capacity(record::chain_blocks(attrs));
        for _ in 0..record::chain_blocks(attrs) {
            pbns.push(self.alloc_block(tx)?);
        }
        for (pbn, block) in pbns.iter().zip(record::encode_chain(attrs, &pbns)) {
            let addr = self.geo.block(*pbn);
            self.region.write(addr, &block);
            // persist: flushed now, durable at the fence `meta_update` puts between the
            // pointer's undo entry and its store (or at the commit's first fence when the
            // pointer was logged already): the pointer never names a block that is not
            // durable by the commit point.
            self.region.flush(addr, BLOCK_SIZE);
        }
        Ok(pbns.first().copied().unwrap_or(0))
    }
}
