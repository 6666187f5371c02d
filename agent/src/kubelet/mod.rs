//! The real kubelet: runs the pods bound to this node on a container runtime.

pub(crate) mod credentials;
pub(crate) mod events;
pub(crate) mod eviction;
pub(crate) mod image_gc;
pub(crate) mod log_rotation;
pub mod node_status;
pub(crate) mod plan;
pub(crate) mod pods;
pub(crate) mod prober;
pub(crate) mod server;
pub(crate) mod static_pods;
pub(crate) mod stats;
