//! containerd as the agent runs it: a generated config ([`config`]) adapted to the host
//! ([`host`]) and to `registries.yaml` ([`registries`]), a supervisor ([`supervisor`]) that starts the system `containerd` with it and
//! keeps it running, and [`runtime`], which brings all of it (and the image import) up.
//!
//! With `--container-runtime-endpoint` the agent supervises nothing and only connects (the CRI
//! client in [`crate::cri`] takes any socket).

pub mod backoff;
pub mod config;
pub mod host;
pub mod registries;
pub mod runtime;
pub mod supervisor;

pub use config::{Config, Layout};
pub use runtime::{Endpoint, Runtime};
pub use supervisor::{Supervisor, SupervisorOptions};
