//! The controllers of `k3rs server` against its API, with hollow nodes where pods must run:
//! workloads, jobs, daemonsets, garbage collection, namespaces, the scheduler, disruption
//! budgets, endpoints and persistent volumes; their Events (repeats counted on one Event);
//! their supervision (a panicking controller is restarted and reported); and a small scale run
//! as a regression guard.
//!
//! One test binary for the area: each file here is a module, reaching the shared helpers as
//! `crate::common`.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod apps_controllers;
mod daemonset_controller;
mod disruption_controller;
mod endpoints;
mod events;
mod garbage_collector;
mod hollow_nodes;
mod job_controller;
mod leader_restart;
mod long_names;
mod namespace_controller;
mod persistent_volumes;
mod scale_guard;
mod scheduler;
mod shared_watches;
mod supervision;
