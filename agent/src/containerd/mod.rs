//! containerd as the agent runs it: a generated config ([`config`]) and a supervisor
//! ([`supervisor`]) that starts the system `containerd` with it and keeps it running.
//!
//! With `--container-runtime-endpoint` the agent supervises nothing and only connects (the CRI
//! client in [`crate::cri`] takes any socket).

pub mod backoff;
pub mod config;
pub mod host;
pub mod supervisor;

pub use config::{Config, Layout};
pub use supervisor::{Supervisor, SupervisorOptions};
