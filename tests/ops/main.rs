//! Operating k3rs: `install.sh`, the config file, host commands, systemd readiness, the
//! server's lifecycle and the auto-deploy manifests.
//!
//! One test binary for the area: each file here is a module, reaching the shared helpers as
//! `crate::common`.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod auto_deploy;
mod config_file;
mod host_commands;
mod idle_memory;
mod install_sh;
mod k3s_flags;
mod release_install;
mod sd_notify;
mod server_lifecycle;
