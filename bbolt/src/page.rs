//! The on-disk layout of bbolt pages (`page.go`, `meta` in `db.go`). Every integer is
//! little-endian (bbolt writes its structs in host order; every platform etcd ships on is
//! little-endian).
//!
//! ```text
//! page header (16 bytes): id u64 | flags u16 | count u16 | overflow u32
//! meta (after the header): magic u32 | version u32 | page size u32 | flags u32
//!                          | root bucket (root pgid u64, sequence u64) | freelist pgid u64
//!                          | high-water pgid u64 | txid u64 | checksum u64
//! branch element (16):     pos u32 | key size u32 | child pgid u64
//! leaf element (16):       flags u32 | pos u32 | key size u32 | value size u32
//! bucket value:            root pgid u64 | sequence u64 [| inline leaf page when root = 0]
//! ```
//! An element's `pos` is the distance from the element itself to its key; the value follows
//! the key. A node larger than a page continues on `overflow` following pages.

use crate::{Error, Result};

/// `page.id`, `flags`, `count`, `overflow`.
pub const PAGE_HEADER_SIZE: usize = 16;
/// `branchPageElement`.
pub const BRANCH_ELEMENT_SIZE: usize = 16;
/// `leafPageElement`.
pub const LEAF_ELEMENT_SIZE: usize = 16;
/// `bucket` (root pgid, sequence) at the start of a bucket's value.
pub const BUCKET_HEADER_SIZE: usize = 16;
/// The meta struct, checksum included.
pub const META_SIZE: usize = 64;
/// Bytes of the meta covered by its checksum (everything before the checksum).
const META_CHECKED: usize = 56;

/// Page flag: a branch page (keys and child page ids).
pub const BRANCH_PAGE: u16 = 0x01;
/// Page flag: a leaf page (keys and values).
pub const LEAF_PAGE: u16 = 0x02;
/// Page flag: one of the two meta pages.
pub const META_PAGE: u16 = 0x04;
/// Page flag: the freelist.
pub const FREELIST_PAGE: u16 = 0x10;
/// Leaf element flag: the value is a bucket.
pub const BUCKET_LEAF_FLAG: u32 = 0x01;

/// `magic` in every meta page.
pub const MAGIC: u32 = 0xED0C_DAED;
/// The data file format version.
pub const VERSION: u32 = 2;
/// The page size etcd's databases have on the platforms it ships on.
pub const DEFAULT_PAGE_SIZE: u32 = 4096;
/// A page `count` of this means the freelist's real count is in its first element.
pub const FREELIST_COUNT_OVERFLOW: u16 = 0xFFFF;
/// `meta.freelist` when the freelist is not written (`NoFreelistSync`).
pub const NO_FREELIST: u64 = u64::MAX;

/// A page header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// The page's id (its offset in pages).
    pub id: u64,
    /// What the page holds ([`BRANCH_PAGE`], [`LEAF_PAGE`], …).
    pub flags: u16,
    /// How many elements it holds.
    pub count: u16,
    /// How many pages after it continue it.
    pub overflow: u32,
}

impl PageHeader {
    /// Appends the header's 16 little-endian bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.overflow.to_le_bytes());
    }

    /// Reads a header from the start of `b`.
    pub fn decode(b: &[u8]) -> Result<PageHeader> {
        if b.len() < PAGE_HEADER_SIZE {
            return Err(Error::Corrupt(format!("page header of {} bytes", b.len())));
        }
        Ok(PageHeader {
            id: u64_at(b, 0),
            flags: u16::from_le_bytes([b[8], b[9]]),
            count: u16::from_le_bytes([b[10], b[11]]),
            overflow: u32_at(b, 12),
        })
    }
}

/// A meta page's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// The database's page size.
    pub page_size: u32,
    /// Meta flags (unused by bbolt; 0).
    pub flags: u32,
    /// Root page of the root bucket (the bucket of top-level buckets).
    pub root: u64,
    /// The root bucket's sequence.
    pub root_sequence: u64,
    /// Page of the freelist ([`NO_FREELIST`] when not written).
    pub freelist: u64,
    /// The high-water mark: pages `0..pgid` exist.
    pub pgid: u64,
    /// The transaction that wrote this meta (the newer valid meta wins).
    pub txid: u64,
}

impl Meta {
    /// The meta as bbolt writes it, checksum included.
    pub fn encode(&self) -> [u8; META_SIZE] {
        let mut b = [0u8; META_SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&self.page_size.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.root.to_le_bytes());
        b[24..32].copy_from_slice(&self.root_sequence.to_le_bytes());
        b[32..40].copy_from_slice(&self.freelist.to_le_bytes());
        b[40..48].copy_from_slice(&self.pgid.to_le_bytes());
        b[48..56].copy_from_slice(&self.txid.to_le_bytes());
        let sum = checksum(&b[..META_CHECKED]);
        b[56..64].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes and validates (magic, version, checksum) the meta at the start of `b`.
    pub fn decode(b: &[u8]) -> Result<Meta> {
        if b.len() < META_SIZE {
            return Err(Error::InvalidMeta("truncated".into()));
        }
        let magic = u32_at(b, 0);
        if magic != MAGIC {
            return Err(Error::InvalidMeta(format!("magic {magic:#x}")));
        }
        let version = u32_at(b, 4);
        if version != VERSION {
            return Err(Error::InvalidMeta(format!("version {version}")));
        }
        let sum = u64_at(b, 56);
        if sum != checksum(&b[..META_CHECKED]) {
            return Err(Error::InvalidMeta("checksum mismatch".into()));
        }
        Ok(Meta {
            page_size: u32_at(b, 8),
            flags: u32_at(b, 12),
            root: u64_at(b, 16),
            root_sequence: u64_at(b, 24),
            freelist: u64_at(b, 32),
            pgid: u64_at(b, 40),
            txid: u64_at(b, 48),
        })
    }
}

/// FNV-1a (64 bit), bbolt's meta checksum.
pub fn checksum(b: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(b);
    h.finish()
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(checksum(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(checksum(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(checksum(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn meta_layout_and_checksum() {
        let m = Meta {
            page_size: 4096,
            flags: 0,
            root: 3,
            root_sequence: 0,
            freelist: 2,
            pgid: 4,
            txid: 1,
        };
        let b = m.encode();
        assert_eq!(&b[0..4], &[0xED, 0xDA, 0x0C, 0xED]);
        assert_eq!(u32_at(&b, 8), 4096);
        assert_eq!(u64_at(&b, 16), 3);
        assert_eq!(u64_at(&b, 32), 2);
        assert_eq!(u64_at(&b, 40), 4);
        assert_eq!(u64_at(&b, 56), checksum(&b[..56]));
        assert_eq!(Meta::decode(&b).unwrap(), m);
        for at in [0, 8, 20, 50, 60] {
            let mut bad = b;
            bad[at] ^= 1;
            assert!(
                matches!(Meta::decode(&bad), Err(Error::InvalidMeta(_))),
                "{at}"
            );
        }
    }

    #[test]
    fn page_header_layout() {
        let h = PageHeader {
            id: 7,
            flags: LEAF_PAGE,
            count: 3,
            overflow: 2,
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        assert_eq!(b, [7, 0, 0, 0, 0, 0, 0, 0, 2, 0, 3, 0, 2, 0, 0, 0]);
        assert_eq!(PageHeader::decode(&b).unwrap(), h);
    }
}
