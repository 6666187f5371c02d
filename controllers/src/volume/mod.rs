//! Persistent volumes: the binder (`persistentvolume-binder`), the PVC and PV protection
//! controllers, and k3s's built-in local-path provisioner. Each has a pure decision core
//! ([`binder`], [`protection`], [`local_path`]; matching claims to volumes is shared with
//! the scheduler in [`k3rs_apimachinery::volume`]) and a thin async shell: per-key queues
//! fed by the shared informers, [`triggers`] saying which keys a change concerns.

pub mod binder;
pub mod binder_shell;
pub mod edits;
pub mod local_path;
pub mod local_path_shell;
pub mod protection;
pub mod triggers;
