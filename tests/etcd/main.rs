//! The etcd API end to end: `k3rs server` (and the in-process server) against etcdctl,
//! the gRPC clients and a real etcd 3.4: compatibility, datastore conformance, watches,
//! crash durability, a full disk, snapshots and malformed input.
//!
//! One test binary for the area: each file here is a module, reaching the shared helpers as
//! `crate::common`.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod corrupt_check;
mod crash_durability;
mod datastore_conformance;
mod disk_full;
mod etcd_api;
mod etcd_http;
mod etcd_snapshot;
mod etcd_snapshot_interop;
mod etcdctl_compat;
mod watch_consistency;
mod watch_fanout;
