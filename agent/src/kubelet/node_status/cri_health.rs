//! The CRI client as the node's [`RuntimeHealth`]: CRI `Status` gives `RuntimeReady` and
//! `NetworkReady`, `Version` the runtime's name and version (upstream's runtime sync). Until
//! the runtime is up (the agent retries starting or reaching it) the runtime is down.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::watch;

use super::runtime::{RuntimeHealth, RuntimeStatus};
use crate::cri::{pb, RuntimeService};

/// Asks the runtime through CRI, once there is one.
#[derive(Clone)]
pub struct CriHealth(pub watch::Receiver<Option<Arc<dyn RuntimeService>>>);

/// The node's view of a CRI `Status` and `Version` answer.
pub fn runtime_status(status: &pb::StatusResponse, version: &pb::VersionResponse) -> RuntimeStatus {
    let conditions = status
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let find = |kind: &str| conditions.iter().find(|c| c.r#type == kind);
    let (runtime_ready, runtime_reason, runtime_message) = match find("RuntimeReady") {
        Some(c) => (c.status, c.reason.clone(), c.message.clone()),
        None => (false, "RuntimeReadyMissing".into(), String::new()),
    };
    let (network_ready, network_reason, network_message) = match find("NetworkReady") {
        Some(c) => (c.status, c.reason.clone(), c.message.clone()),
        None => (false, "NetworkReadyMissing".into(), String::new()),
    };
    RuntimeStatus {
        reachable: true,
        runtime_ready,
        runtime_reason,
        runtime_message,
        network_ready,
        network_reason,
        network_message,
        version: format!("{}://{}", version.runtime_name, version.runtime_version),
    }
}

impl RuntimeHealth for CriHealth {
    fn status(&self) -> BoxFuture<'_, RuntimeStatus> {
        let runtime = self.0.borrow().clone();
        Box::pin(async move {
            let Some(runtime) = runtime else {
                return RuntimeStatus::default();
            };
            let (status, version) = tokio::join!(runtime.status(false), runtime.version());
            match (status, version) {
                (Ok(s), Ok(v)) => runtime_status(&s, &v),
                _ => RuntimeStatus::default(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, status: bool, reason: &str) -> pb::RuntimeCondition {
        pb::RuntimeCondition {
            r#type: kind.into(),
            status,
            reason: reason.into(),
            message: if status {
                String::new()
            } else {
                "cni config uninitialized".into()
            },
        }
    }

    #[test]
    fn reports_the_conditions_and_version() {
        let status = pb::StatusResponse {
            status: Some(pb::RuntimeStatus {
                conditions: vec![
                    condition("RuntimeReady", true, ""),
                    condition("NetworkReady", false, "NetworkPluginNotReady"),
                ],
            }),
            info: Default::default(),
        };
        let version = pb::VersionResponse {
            runtime_name: "containerd".into(),
            runtime_version: "1.6.20".into(),
            ..Default::default()
        };
        let r = runtime_status(&status, &version);
        assert!(r.reachable && r.runtime_ready && !r.network_ready);
        assert_eq!(r.network_reason, "NetworkPluginNotReady");
        assert_eq!(r.network_message, "cni config uninitialized");
        assert_eq!(r.version, "containerd://1.6.20");
    }

    #[tokio::test]
    async fn down_until_there_is_a_runtime_then_ready() {
        let (tx, rx) = watch::channel(None);
        let h = CriHealth(rx);
        assert_eq!(h.status().await, RuntimeStatus::default());
        let fake: Arc<dyn RuntimeService> = Arc::new(crate::cri::fake::FakeRuntime::new());
        tx.send(Some(fake)).unwrap();
        let r = h.status().await;
        assert!(r.runtime_ready && r.network_ready);
        assert_eq!(r.version, "fake://0.0.0");
    }
}
