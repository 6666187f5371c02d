//! The real kubelet: runs the pods bound to this node on a container runtime.

pub mod credentials;
pub mod events;
pub mod eviction;
pub mod image_gc;
pub mod log_rotation;
pub mod node_status;
pub mod plan;
pub mod pods;
pub mod prober;
pub mod server;
pub mod static_pods;
pub mod stats;
