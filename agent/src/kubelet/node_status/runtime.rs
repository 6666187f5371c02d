//! What the node status needs to know of the container runtime: whether it answers, whether it
//! and its network are ready, and its version (upstream kubelet asks CRI `Status` and
//! `Version`). The CRI client implements [`RuntimeHealth`]
//! ([`super::cri_health::CriHealth`]).

use futures::future::BoxFuture;

/// The runtime as last observed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeStatus {
    /// The runtime answered at all (upstream: the last runtime sync succeeded).
    pub reachable: bool,
    /// CRI `RuntimeReady`, with the condition's reason and message when false.
    pub runtime_ready: bool,
    pub runtime_reason: String,
    pub runtime_message: String,
    /// CRI `NetworkReady`, with the condition's reason and message when false.
    pub network_ready: bool,
    pub network_reason: String,
    pub network_message: String,
    /// `<runtime name>://<version>`, e.g. `containerd://2.0.5`; empty when unknown.
    pub version: String,
}

/// A source of [`RuntimeStatus`]; asked before every status report.
pub trait RuntimeHealth: Send + Sync {
    fn status(&self) -> BoxFuture<'_, RuntimeStatus>;
}
