//! Writing a fresh bbolt file from sorted keys, bucket by bucket, bottom-up: leaves are
//! written as they fill, then the branch levels above them, then the root bucket, the
//! freelist and the two meta pages.
//!
//! # Layout of the file written
//! Pages 0 and 1 are the metas (identical but for their transaction ids), page 2 the (empty)
//! freelist, then every bucket's pages in order. Leaves are filled up to a page (bbolt's fill
//! percent 1.0); a value larger than a page gets a leaf of its own with overflow pages. A
//! bucket whose one leaf fits in a quarter page is stored inline in its parent, as bbolt
//! does. Every page below the high-water mark is used, so bbolt's `tx.Check` (which
//! `etcdctl snapshot status` runs) finds nothing free and nothing unreachable.

use std::io::{Seek, SeekFrom, Write};

use crate::page::{
    Meta, PageHeader, BRANCH_ELEMENT_SIZE, BRANCH_PAGE, BUCKET_HEADER_SIZE, BUCKET_LEAF_FLAG,
    FREELIST_PAGE, LEAF_ELEMENT_SIZE, LEAF_PAGE, META_PAGE, PAGE_HEADER_SIZE,
};
use crate::{Error, Result};

/// The first page after the metas and the freelist.
const FIRST_DATA_PAGE: u64 = 3;
/// The freelist's page.
const FREELIST_PGID: u64 = 2;

/// Writes a new database to `out` (positioned at its start).
///
/// Add buckets with [`Writer::bucket`] in strictly increasing name order, each with its keys
/// in strictly increasing order, then call [`Writer::finish`]; a writer dropped before
/// `finish` leaves an invalid file (no meta pages).
#[derive(Debug)]
pub struct Writer<W: Write + Seek> {
    out: W,
    page_size: usize,
    next_pgid: u64,
    root: Tree,
    last_bucket: Option<Vec<u8>>,
}

/// The keys of one bucket being written; [`BucketWriter::finish`] adds it to the database.
#[derive(Debug)]
pub struct BucketWriter<'w, W: Write + Seek> {
    writer: &'w mut Writer<W>,
    name: Vec<u8>,
    tree: Tree,
}

/// A B+tree being built from sorted entries.
#[derive(Debug, Default)]
struct Tree {
    /// Entries of the leaf being filled: (flags, key, value).
    pending: Vec<(u32, Vec<u8>, Vec<u8>)>,
    pending_size: usize,
    /// Leaves written so far: (first key, page).
    leaves: Vec<(Vec<u8>, u64)>,
    last_key: Option<Vec<u8>>,
}

impl<W: Write + Seek> Writer<W> {
    /// A writer with etcd's 4 KiB pages.
    pub fn new(out: W) -> Result<Writer<W>> {
        Writer::with_page_size(out, crate::page::DEFAULT_PAGE_SIZE)
    }

    /// A writer with pages of `page_size` bytes (a power of two, at least 1 KiB).
    pub fn with_page_size(mut out: W, page_size: u32) -> Result<Writer<W>> {
        if page_size < 1024 || !page_size.is_power_of_two() {
            return Err(Error::InvalidPageSize(page_size));
        }
        let page_size = page_size as usize;
        // Room for the metas and the freelist, written last.
        out.write_all(&vec![0u8; page_size * FIRST_DATA_PAGE as usize])
            .map_err(Error::Write)?;
        Ok(Writer {
            out,
            page_size,
            next_pgid: FIRST_DATA_PAGE,
            root: Tree::default(),
            last_bucket: None,
        })
    }

    /// Starts the top-level bucket `name` (names in strictly increasing order).
    pub fn bucket(&mut self, name: &[u8]) -> Result<BucketWriter<'_, W>> {
        if name.is_empty() {
            return Err(Error::EmptyKey);
        }
        if self.last_bucket.as_deref().is_some_and(|l| l >= name) {
            return Err(Error::Unsorted(name.to_vec()));
        }
        self.last_bucket = Some(name.to_vec());
        Ok(BucketWriter {
            writer: self,
            name: name.to_vec(),
            tree: Tree::default(),
        })
    }

    /// Writes the root bucket, the freelist and the metas; returns the output.
    pub fn finish(mut self) -> Result<W> {
        let root_tree = std::mem::take(&mut self.root);
        let root = root_tree.finish(&mut self, false)?.page;
        let pgid = self.next_pgid;
        let page_size = self.page_size;
        let mut head = Vec::with_capacity(page_size * FIRST_DATA_PAGE as usize);
        for (id, txid) in [(0u64, 2u64), (1, 1)] {
            let start = head.len();
            PageHeader {
                id,
                flags: META_PAGE,
                count: 0,
                overflow: 0,
            }
            .encode(&mut head);
            let meta = Meta {
                page_size: page_size as u32,
                flags: 0,
                root,
                root_sequence: 0,
                freelist: FREELIST_PGID,
                pgid,
                txid,
            };
            head.extend_from_slice(&meta.encode());
            head.resize(start + page_size, 0);
        }
        let start = head.len();
        PageHeader {
            id: FREELIST_PGID,
            flags: FREELIST_PAGE,
            count: 0,
            overflow: 0,
        }
        .encode(&mut head);
        head.resize(start + page_size, 0);
        self.out.seek(SeekFrom::Start(0)).map_err(Error::Write)?;
        self.out.write_all(&head).map_err(Error::Write)?;
        self.out
            .seek(SeekFrom::Start(pgid * page_size as u64))
            .map_err(Error::Write)?;
        self.out.flush().map_err(Error::Write)?;
        Ok(self.out)
    }

    /// Writes one node (its header's id and overflow are filled in here); returns its page.
    fn write_node(&mut self, mut node: Vec<u8>) -> Result<u64> {
        let id = self.next_pgid;
        let pages = node.len().div_ceil(self.page_size);
        node[0..8].copy_from_slice(&id.to_le_bytes());
        let overflow = u32::try_from(pages - 1).map_err(|_| Error::TooLarge(node.len()))?;
        node[12..16].copy_from_slice(&overflow.to_le_bytes());
        node.resize(pages * self.page_size, 0);
        self.out.write_all(&node).map_err(Error::Write)?;
        self.next_pgid += pages as u64;
        Ok(id)
    }
}

impl<W: Write + Seek> BucketWriter<'_, W> {
    /// Adds `key` = `value` (keys in strictly increasing order, not empty).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.tree.put(self.writer, 0, key, value)
    }

    /// Writes what is left of the bucket and adds it to the database.
    pub fn finish(self) -> Result<()> {
        let BucketWriter { writer, name, tree } = self;
        let done = tree.finish(writer, true)?;
        let mut value = Vec::with_capacity(BUCKET_HEADER_SIZE + done.inline.len());
        value.extend_from_slice(&done.page.to_le_bytes());
        value.extend_from_slice(&0u64.to_le_bytes());
        value.extend_from_slice(&done.inline);
        let mut root = std::mem::take(&mut writer.root);
        let added = root.put(writer, BUCKET_LEAF_FLAG, &name, &value);
        writer.root = root;
        added
    }
}

/// A finished tree: its root page, or (page 0) the inline leaf page.
struct Done {
    page: u64,
    inline: Vec<u8>,
}

impl Tree {
    fn put<W: Write + Seek>(
        &mut self,
        w: &mut Writer<W>,
        flags: u32,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        if key.is_empty() {
            return Err(Error::EmptyKey);
        }
        if self.last_key.as_deref().is_some_and(|l| l >= key) {
            return Err(Error::Unsorted(key.to_vec()));
        }
        u32::try_from(key.len().max(value.len()))
            .map_err(|_| Error::TooLarge(key.len() + value.len()))?;
        self.last_key = Some(key.to_vec());
        let size = LEAF_ELEMENT_SIZE + key.len() + value.len();
        if !self.pending.is_empty()
            && (self.pending_size + size > w.page_size || self.pending.len() == u16::MAX as usize)
        {
            self.flush_leaf(w)?;
        }
        if self.pending.is_empty() {
            self.pending_size = PAGE_HEADER_SIZE;
        }
        self.pending_size += size;
        self.pending.push((flags, key.to_vec(), value.to_vec()));
        Ok(())
    }

    fn flush_leaf<W: Write + Seek>(&mut self, w: &mut Writer<W>) -> Result<()> {
        let first = self
            .pending
            .first()
            .map(|e| e.1.clone())
            .unwrap_or_default();
        let node = leaf_node(&self.pending);
        self.pending.clear();
        let page = w.write_node(node)?;
        self.leaves.push((first, page));
        Ok(())
    }

    /// Writes the last leaf and the branch levels. With `may_inline`, a tree that is one
    /// leaf of at most a quarter page is returned inline instead.
    fn finish<W: Write + Seek>(mut self, w: &mut Writer<W>, may_inline: bool) -> Result<Done> {
        let fits_inline = self.pending.is_empty() || self.pending_size <= w.page_size / 4;
        if may_inline && self.leaves.is_empty() && fits_inline {
            return Ok(Done {
                page: 0,
                inline: leaf_node(&self.pending),
            });
        }
        if !self.pending.is_empty() || self.leaves.is_empty() {
            self.flush_leaf(w)?;
        }
        let mut level = self.leaves;
        while level.len() > 1 {
            level = branch_level(w, level)?;
        }
        Ok(Done {
            page: level[0].1,
            inline: Vec::new(),
        })
    }
}

/// Packs one level of children into branch pages; returns the level above.
fn branch_level<W: Write + Seek>(
    w: &mut Writer<W>,
    children: Vec<(Vec<u8>, u64)>,
) -> Result<Vec<(Vec<u8>, u64)>> {
    let mut groups: Vec<Vec<(Vec<u8>, u64)>> = vec![Vec::new()];
    let mut size = PAGE_HEADER_SIZE;
    for child in children {
        let add = BRANCH_ELEMENT_SIZE + child.0.len();
        let node = groups.last_mut().expect("a group");
        // At least two children per branch page, so every level shrinks.
        if node.len() >= 2 && (size + add > w.page_size || node.len() == u16::MAX as usize) {
            groups.push(Vec::new());
            size = PAGE_HEADER_SIZE;
        }
        size += add;
        groups.last_mut().expect("a group").push(child);
    }
    // A lone last child joins the page before it (which may then overflow, as bbolt allows):
    // every leaf stays at the same depth.
    if groups.len() > 1 && groups.last().is_some_and(|g| g.len() == 1) {
        let lone = groups.pop().expect("a group");
        groups.last_mut().expect("a group").extend(lone);
    }
    groups
        .into_iter()
        .map(|node| {
            let first = node[0].0.clone();
            Ok((first, w.write_node(branch_node(&node))?))
        })
        .collect()
}

/// A leaf page (id and overflow filled in when written; as is for an inline bucket).
fn leaf_node(entries: &[(u32, Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let data: usize = entries.iter().map(|e| e.1.len() + e.2.len()).sum();
    let mut b = Vec::with_capacity(PAGE_HEADER_SIZE + entries.len() * LEAF_ELEMENT_SIZE + data);
    PageHeader {
        id: 0,
        flags: LEAF_PAGE,
        count: entries.len() as u16,
        overflow: 0,
    }
    .encode(&mut b);
    let mut pos = entries.len() * LEAF_ELEMENT_SIZE;
    for (i, (flags, k, v)) in entries.iter().enumerate() {
        let from_element = pos - i * LEAF_ELEMENT_SIZE;
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&(from_element as u32).to_le_bytes());
        b.extend_from_slice(&(k.len() as u32).to_le_bytes());
        b.extend_from_slice(&(v.len() as u32).to_le_bytes());
        pos += k.len() + v.len();
    }
    for (_, k, v) in entries {
        b.extend_from_slice(k);
        b.extend_from_slice(v);
    }
    b
}

/// A branch page over `children` (first key, page).
fn branch_node(children: &[(Vec<u8>, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    PageHeader {
        id: 0,
        flags: BRANCH_PAGE,
        count: children.len() as u16,
        overflow: 0,
    }
    .encode(&mut b);
    let mut pos = children.len() * BRANCH_ELEMENT_SIZE;
    for (i, (k, page)) in children.iter().enumerate() {
        b.extend_from_slice(&((pos - i * BRANCH_ELEMENT_SIZE) as u32).to_le_bytes());
        b.extend_from_slice(&(k.len() as u32).to_le_bytes());
        b.extend_from_slice(&page.to_le_bytes());
        pos += k.len();
    }
    for (k, _) in children {
        b.extend_from_slice(k);
    }
    b
}

#[cfg(test)]
impl<W: Write + Seek> BucketWriter<'_, W> {
    /// Adds a nested bucket's raw value (tests of the reader's nested buckets).
    pub(crate) fn tree_put_bucket(&mut self, key: &[u8], value: &[u8]) {
        self.tree
            .put(self.writer, BUCKET_LEAF_FLAG, key, value)
            .unwrap();
    }
}
