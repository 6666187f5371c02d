//! Reading a bbolt file held in memory: the newest valid meta page, buckets (page-rooted or
//! inline), their keys in order, and a consistency check like bbolt's `tx.Check`.

use std::collections::BTreeSet;

use crate::page::{
    self, u32_at, u64_at, Meta, PageHeader, BRANCH_ELEMENT_SIZE, BRANCH_PAGE, BUCKET_HEADER_SIZE,
    BUCKET_LEAF_FLAG, FREELIST_COUNT_OVERFLOW, FREELIST_PAGE, LEAF_ELEMENT_SIZE, LEAF_PAGE,
    NO_FREELIST, PAGE_HEADER_SIZE,
};
use crate::{Error, Result};

/// Pages deeper than this are refused (a cycle of branch pages would recurse forever).
const MAX_DEPTH: usize = 64;

/// A bbolt database file.
///
/// # Guarantees
/// Every access is bounds-checked: a damaged file yields [`Error::Corrupt`], never a panic.
/// Bytes past the high-water mark (such as etcd's sha256 snapshot trailer) are ignored.
#[derive(Debug, Clone)]
pub struct Database {
    data: Vec<u8>,
    meta: Meta,
}

/// One entry of a bucket, borrowed from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value (for a bucket, its bucket header and inline page).
    pub value: &'a [u8],
    /// The value is a nested bucket (open it with [`Bucket::bucket`]).
    pub is_bucket: bool,
}

/// A bucket: its root page, or its inline leaf page.
#[derive(Debug, Clone, Copy)]
pub struct Bucket<'a> {
    db: &'a Database,
    root: Root<'a>,
    /// The bucket's sequence (bbolt's `NextSequence`).
    pub sequence: u64,
}

#[derive(Debug, Clone, Copy)]
enum Root<'a> {
    Page(u64),
    Inline(&'a [u8]),
}

impl Database {
    /// Parses `data` (a whole file). The meta with the highest transaction id among the valid
    /// ones is used, as bbolt does; the page size comes from the meta page.
    pub fn parse(data: Vec<u8>) -> Result<Database> {
        let first = Meta::decode(data.get(PAGE_HEADER_SIZE..).unwrap_or_default());
        // Meta page 1 is at the page size meta 0 says, or, if meta 0 is damaged, the default.
        let size = match &first {
            Ok(m) => m.page_size as usize,
            Err(_) => page::DEFAULT_PAGE_SIZE as usize,
        };
        let second = data
            .get(size + PAGE_HEADER_SIZE..)
            .ok_or_else(|| Error::InvalidMeta("file shorter than two pages".into()))
            .and_then(Meta::decode);
        let meta = match (first, second) {
            (Ok(a), Ok(b)) => {
                if b.txid > a.txid {
                    b
                } else {
                    a
                }
            }
            (Ok(m), Err(_)) | (Err(_), Ok(m)) => m,
            (Err(e), Err(_)) => return Err(e),
        };
        if !(512..=(1 << 20)).contains(&meta.page_size) || !meta.page_size.is_power_of_two() {
            return Err(Error::InvalidMeta(format!("page size {}", meta.page_size)));
        }
        let need = meta
            .pgid
            .checked_mul(u64::from(meta.page_size))
            .ok_or_else(|| Error::InvalidMeta(format!("high-water mark {}", meta.pgid)))?;
        if (data.len() as u64) < need {
            return Err(Error::Corrupt(format!(
                "file of {} bytes is shorter than its {} pages",
                data.len(),
                meta.pgid
            )));
        }
        Ok(Database { data, meta })
    }

    /// Reads and parses the file at `path`.
    pub fn open(path: &std::path::Path) -> Result<Database> {
        let data = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Database::parse(data)
    }

    /// The meta page in use.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The bucket of top-level buckets.
    pub fn root(&self) -> Bucket<'_> {
        Bucket {
            db: self,
            root: Root::Page(self.meta.root),
            sequence: self.meta.root_sequence,
        }
    }

    /// The top-level bucket `name`, if it exists.
    pub fn bucket(&self, name: &[u8]) -> Result<Option<Bucket<'_>>> {
        self.root().bucket(name)
    }

    /// Names of the top-level buckets, in order.
    pub fn bucket_names(&self) -> Result<Vec<Vec<u8>>> {
        let mut names = Vec::new();
        self.root().for_each(&mut |e| {
            if e.is_bucket {
                names.push(e.key.to_vec());
            }
            Ok(())
        })?;
        Ok(names)
    }

    /// The free pages the freelist page records (empty without a freelist page).
    pub fn freelist(&self) -> Result<Vec<u64>> {
        if self.meta.freelist == NO_FREELIST {
            return Ok(Vec::new());
        }
        let (h, body) = self.page(self.meta.freelist)?;
        if h.flags & FREELIST_PAGE == 0 {
            return Err(Error::Corrupt(format!(
                "page {} is not a freelist page (flags {:#x})",
                h.id, h.flags
            )));
        }
        let (count, skip) = if h.count == FREELIST_COUNT_OVERFLOW {
            (u64_at(checked(body, 0, 8)?, 0), 1)
        } else {
            (u64::from(h.count), 0)
        };
        let count = usize::try_from(count).map_err(|_| Error::Corrupt("freelist count".into()))?;
        let ids = checked(body, skip * 8, count.saturating_mul(8))?;
        Ok(ids.chunks_exact(8).map(|c| u64_at(c, 0)).collect())
    }

    /// bbolt's `tx.Check`: every page below the high-water mark is used exactly once (meta,
    /// freelist or a bucket's tree) or free, and keys are in order on every page.
    pub fn check(&self) -> Result<()> {
        let mut seen = BTreeSet::new();
        let mut mark = |id: u64, overflow: u32| -> Result<()> {
            for p in id..=id + u64::from(overflow) {
                if p >= self.meta.pgid {
                    return Err(Error::Corrupt(format!("page {p}: out of bounds")));
                }
                if !seen.insert(p) {
                    return Err(Error::Corrupt(format!("page {p}: multiple references")));
                }
            }
            Ok(())
        };
        mark(0, 0)?;
        mark(1, 0)?;
        let free = self.freelist()?;
        if self.meta.freelist != NO_FREELIST {
            let (h, _) = self.page(self.meta.freelist)?;
            mark(h.id, h.overflow)?;
        }
        for &p in &free {
            mark(p, 0)?;
        }
        self.root().visit_pages(&mut mark)?;
        // Without a freelist page (etcd's `NoFreelistSync`), bbolt rebuilds the freelist from
        // the pages nothing reaches: those are free, not lost.
        if self.meta.freelist == NO_FREELIST {
            return Ok(());
        }
        if let Some(missing) = (0..self.meta.pgid).find(|p| !seen.contains(p)) {
            return Err(Error::Corrupt(format!(
                "page {missing}: unreachable unfreed"
            )));
        }
        Ok(())
    }

    /// Page `id` with its overflow pages: the header and the bytes after it.
    fn page(&self, id: u64) -> Result<(PageHeader, &[u8])> {
        if id >= self.meta.pgid {
            return Err(Error::Corrupt(format!(
                "page {id} beyond the high-water mark {}",
                self.meta.pgid
            )));
        }
        let size = self.meta.page_size as usize;
        let start = id as usize * size;
        let h = PageHeader::decode(&self.data[start..])?;
        if h.id != id {
            return Err(Error::Corrupt(format!(
                "page {id} says it is page {}",
                h.id
            )));
        }
        let pages = 1 + u64::from(h.overflow);
        if id + pages > self.meta.pgid {
            return Err(Error::Corrupt(format!(
                "page {id} overflows past the high-water mark"
            )));
        }
        let end = start + pages as usize * size;
        Ok((h, &self.data[start + PAGE_HEADER_SIZE..end]))
    }
}

impl<'a> Bucket<'a> {
    /// The nested bucket `name`, if it exists.
    pub fn bucket(&self, name: &[u8]) -> Result<Option<Bucket<'a>>> {
        let mut found = None;
        self.for_each(&mut |e| {
            if e.key == name && e.is_bucket {
                found = Some(e.value);
            }
            Ok(())
        })?;
        found.map(|v| self.open(v)).transpose()
    }

    /// Calls `each` for every entry in key order.
    pub fn for_each(&self, each: &mut dyn FnMut(Entry<'a>) -> Result<()>) -> Result<()> {
        match self.root {
            Root::Inline(page) => {
                let h = PageHeader::decode(page)?;
                leaf_entries(h, &page[PAGE_HEADER_SIZE..], each)
            }
            Root::Page(id) => self.walk(id, 0, each),
        }
    }

    /// Every entry, copied, in key order.
    pub fn entries(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.for_each(&mut |e| {
            out.push((e.key.to_vec(), e.value.to_vec()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Whether the bucket is stored inline in its parent's leaf.
    pub fn is_inline(&self) -> bool {
        matches!(self.root, Root::Inline(_))
    }

    fn open(&self, value: &'a [u8]) -> Result<Bucket<'a>> {
        let header = checked(value, 0, BUCKET_HEADER_SIZE)?;
        let root = u64_at(header, 0);
        let sequence = u64_at(header, 8);
        let root = if root == 0 {
            Root::Inline(&value[BUCKET_HEADER_SIZE..])
        } else {
            Root::Page(root)
        };
        Ok(Bucket {
            db: self.db,
            root,
            sequence,
        })
    }

    fn walk(
        &self,
        id: u64,
        depth: usize,
        each: &mut dyn FnMut(Entry<'a>) -> Result<()>,
    ) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::Corrupt(format!(
                "tree deeper than {MAX_DEPTH} at page {id}"
            )));
        }
        let (h, body) = self.db.page(id)?;
        if h.flags & LEAF_PAGE != 0 {
            return leaf_entries(h, body, each);
        }
        if h.flags & BRANCH_PAGE == 0 {
            return Err(Error::Corrupt(format!(
                "page {id}: invalid type {:#x} in a bucket",
                h.flags
            )));
        }
        for child in branch_children(h, body)? {
            self.walk(child.1, depth + 1, each)?;
        }
        Ok(())
    }

    /// Marks every page of this bucket's tree and of its nested buckets; checks key order.
    fn visit_pages(&self, mark: &mut dyn FnMut(u64, u32) -> Result<()>) -> Result<()> {
        let mut nested = Vec::new();
        let mut last: Option<&[u8]> = None;
        let mut ordered = |e: Entry<'a>| -> Result<()> {
            if last.is_some_and(|l| l >= e.key) {
                return Err(Error::Corrupt(format!("keys out of order at {:?}", e.key)));
            }
            last = Some(e.key);
            if e.is_bucket {
                nested.push(e.value);
            }
            Ok(())
        };
        match self.root {
            Root::Inline(_) => self.for_each(&mut ordered)?,
            Root::Page(id) => {
                self.mark_tree(id, 0, mark)?;
                self.for_each(&mut ordered)?;
            }
        }
        for v in nested {
            self.open(v)?.visit_pages(mark)?;
        }
        Ok(())
    }

    fn mark_tree(
        &self,
        id: u64,
        depth: usize,
        mark: &mut dyn FnMut(u64, u32) -> Result<()>,
    ) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::Corrupt(format!(
                "tree deeper than {MAX_DEPTH} at page {id}"
            )));
        }
        let (h, body) = self.db.page(id)?;
        mark(id, h.overflow)?;
        if h.flags & BRANCH_PAGE != 0 {
            for (key, child) in branch_children(h, body)? {
                // A branch key is its child's first key.
                let first = self.first_key(child, depth + 1)?;
                if first != Some(key) {
                    return Err(Error::Corrupt(format!(
                        "page {id}: branch key {key:?} is not the first key of page {child}"
                    )));
                }
                self.mark_tree(child, depth + 1, mark)?;
            }
        } else if h.flags & LEAF_PAGE == 0 {
            return Err(Error::Corrupt(format!(
                "page {id}: invalid type {:#x} in a bucket",
                h.flags
            )));
        }
        Ok(())
    }

    fn first_key(&self, id: u64, depth: usize) -> Result<Option<&'a [u8]>> {
        if depth > MAX_DEPTH {
            return Err(Error::Corrupt(format!(
                "tree deeper than {MAX_DEPTH} at page {id}"
            )));
        }
        let (h, body) = self.db.page(id)?;
        if h.flags & BRANCH_PAGE != 0 {
            return match branch_children(h, body)?.first() {
                Some(&(_, child)) => self.first_key(child, depth + 1),
                None => Ok(None),
            };
        }
        let mut first = None;
        leaf_entries(h, body, &mut |e| {
            if first.is_none() {
                first = Some(e.key);
            }
            Ok(())
        })?;
        Ok(first)
    }
}

/// The entries of a leaf page (`body` is the page after its header).
fn leaf_entries<'a>(
    h: PageHeader,
    body: &'a [u8],
    each: &mut dyn FnMut(Entry<'a>) -> Result<()>,
) -> Result<()> {
    if h.flags & LEAF_PAGE == 0 {
        return Err(Error::Corrupt(format!(
            "page {}: expected a leaf, flags {:#x}",
            h.id, h.flags
        )));
    }
    for i in 0..usize::from(h.count) {
        let at = i * LEAF_ELEMENT_SIZE;
        let el = checked(body, at, LEAF_ELEMENT_SIZE)?;
        let flags = u32_at(el, 0);
        let pos = u32_at(el, 4) as usize;
        let ksize = u32_at(el, 8) as usize;
        let vsize = u32_at(el, 12) as usize;
        let key = checked(body, at.saturating_add(pos), ksize)?;
        let value = checked(body, at.saturating_add(pos).saturating_add(ksize), vsize)?;
        each(Entry {
            key,
            value,
            is_bucket: flags & BUCKET_LEAF_FLAG != 0,
        })?;
    }
    Ok(())
}

/// The (key, child page) pairs of a branch page.
fn branch_children(h: PageHeader, body: &[u8]) -> Result<Vec<(&[u8], u64)>> {
    (0..usize::from(h.count))
        .map(|i| {
            let at = i * BRANCH_ELEMENT_SIZE;
            let el = checked(body, at, BRANCH_ELEMENT_SIZE)?;
            let pos = u32_at(el, 0) as usize;
            let ksize = u32_at(el, 4) as usize;
            let child = u64_at(el, 8);
            Ok((checked(body, at.saturating_add(pos), ksize)?, child))
        })
        .collect()
}

/// `b[at..at + len]`, or a corruption error.
fn checked(b: &[u8], at: usize, len: usize) -> Result<&[u8]> {
    at.checked_add(len)
        .and_then(|end| b.get(at..end))
        .ok_or_else(|| Error::Corrupt(format!("{len} bytes at {at} overrun a page of {}", b.len())))
}
