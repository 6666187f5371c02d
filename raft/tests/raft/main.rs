//! Raft nodes through their public API: one node's writes, leases and crash durability, and
//! clusters of nodes with membership changes and failover (one test binary; each file is a
//! module).

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod cluster;
mod node;
