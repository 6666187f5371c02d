//! k3rs-bbolt: reading and writing bbolt database files, the format of etcd's backend
//! (`member/snap/db`) and of the snapshots `etcdctl snapshot save` writes.
//!
//! - [`Database`] reads a whole file from memory: the newest valid meta page, buckets
//!   (page-rooted or inline), nested buckets, overflow pages, the freelist, and a consistency
//!   check like bbolt's `tx.Check`.
//! - [`Writer`] writes a fresh file from buckets of sorted keys, bottom-up (see
//!   [`writer`] for the layout it produces).
//!
//! No library in the Rust ecosystem reads or writes this format (jammdb is inspired by bbolt
//! but its files are not bbolt's), hence this crate. The layout is documented in [`page`].
//!
//! # Assumptions
//! Little-endian files (bbolt writes host order; etcd's platforms are little-endian).
//! Only what a fresh file needs is written: no free pages, bucket sequences of 0.

pub mod page;
pub mod reader;
pub mod writer;

#[cfg(test)]
mod tests;

pub use reader::{Bucket, Database, Entry};
pub use writer::{BucketWriter, Writer};

/// Why reading or writing a bbolt file failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        #[source]
        /// Why.
        source: std::io::Error,
    },
    /// Neither meta page is valid (magic, version or checksum).
    #[error("not a valid bbolt meta page: {0}")]
    InvalidMeta(String),
    /// A page or element points outside the file or is malformed.
    #[error("corrupt bbolt file: {0}")]
    Corrupt(String),
    /// The output could not be written.
    #[error("writing the bbolt file: {0}")]
    Write(#[source] std::io::Error),
    /// An unusable page size.
    #[error("page size {0} is not a power of two of at least 1024")]
    InvalidPageSize(u32),
    /// An empty key or bucket name (bbolt refuses them).
    #[error("keys and bucket names must not be empty")]
    EmptyKey,
    /// Keys given to the writer out of order.
    #[error("key {0:?} is not after the previous key")]
    Unsorted(Vec<u8>),
    /// A key or value larger than a page element can describe.
    #[error("an entry of {0} bytes is too large")]
    TooLarge(usize),
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
