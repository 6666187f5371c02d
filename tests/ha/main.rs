//! High availability: several `k3rs server`s joined into one cluster, on loopback and in
//! network namespaces the tests make, with faults injected (kills, partitions).
//!
//! One test binary for the area: each file here is a module, reaching the shared helpers as
//! `crate::common`.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod ha_cluster;
mod ha_corrupt;
mod ha_encoding;
mod ha_faults;
mod ha_netns;
mod ha_snapshot;
