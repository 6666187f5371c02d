//! What the node status needs to know of the container runtime: whether it answers, whether it
//! and its network are ready, and its version (upstream kubelet asks CRI `Status` and
//! `Version`). The CRI client implements [`RuntimeHealth`]; until one is configured,
//! [`SocketProbe`] only checks that something accepts connections on the runtime endpoint, so a
//! node without a runtime is honestly NotReady.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

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

/// Reports the runtime down unless something accepts connections on its unix socket; when it
/// does, the runtime is reachable but, not being asked through CRI, not known to be ready.
#[derive(Debug, Clone)]
pub struct SocketProbe {
    pub socket: PathBuf,
}

impl SocketProbe {
    /// The probe for an endpoint `unix:///path` (or a bare path).
    pub fn new(endpoint: &str) -> SocketProbe {
        SocketProbe {
            socket: PathBuf::from(endpoint.strip_prefix("unix://").unwrap_or(endpoint)),
        }
    }
}

impl RuntimeHealth for SocketProbe {
    fn status(&self) -> BoxFuture<'_, RuntimeStatus> {
        Box::pin(async move {
            let connect = tokio::net::UnixStream::connect(&self.socket);
            match tokio::time::timeout(std::time::Duration::from_secs(2), connect).await {
                Ok(Ok(_)) => RuntimeStatus {
                    reachable: true,
                    runtime_reason: "CRIStatusUnknown".into(),
                    runtime_message: "k3rs has no CRI client to ask the runtime yet".into(),
                    network_reason: "CRIStatusUnknown".into(),
                    network_message: "k3rs has no CRI client to ask the runtime yet".into(),
                    ..RuntimeStatus::default()
                },
                _ => RuntimeStatus::default(),
            }
        })
    }
}

/// A runtime whose status the test sets (read through a lock a panicking test poisoned).
#[derive(Debug, Clone, Default)]
pub struct FakeRuntime(pub Arc<Mutex<RuntimeStatus>>);

impl FakeRuntime {
    pub fn new(status: RuntimeStatus) -> FakeRuntime {
        FakeRuntime(Arc::new(Mutex::new(status)))
    }
    pub fn set(&self, status: RuntimeStatus) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = status;
    }
}

impl RuntimeHealth for FakeRuntime {
    fn status(&self) -> BoxFuture<'_, RuntimeStatus> {
        let s = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Box::pin(async move { s })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_socket_nobody_listens_on_is_a_runtime_down() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("containerd.sock");
        let probe = SocketProbe::new(&format!("unix://{}", path.display()));
        assert_eq!(probe.socket, path);
        assert_eq!(probe.status().await, RuntimeStatus::default());
        let _listener = tokio::net::UnixListener::bind(&path).unwrap();
        let s = probe.status().await;
        assert!(s.reachable && !s.runtime_ready && !s.network_ready, "{s:?}");
    }
}
