//! Kubelet Events: core/v1 Events about pods and their containers, reported as component
//! `kubelet` with the node's name as source host (the Node authorizer lets a node create and
//! patch Events). The executor and the probe workers hand events to a [`Recorder`] without
//! waiting; one task writes them, bumping the count of repeats ([`correlate`]). A refused
//! write is logged and dropped, as upstream's recorder does.

pub mod correlate;

use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use correlate::{Correlator, PodEvent, Write};

pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

/// Hands events to the writer task; cheap to clone, never blocks.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    tx: Option<mpsc::UnboundedSender<PodEvent>>,
}

/// The reference to `pod` (and one of its containers, as `fieldPath`).
pub fn regarding(pod: &Pod, field_path: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        field_path,
    }
}

/// A container's `fieldPath` (`spec.containers{name}` or `spec.initContainers{name}`).
pub fn container_path(pod: &Pod, name: &str) -> String {
    let init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.name == name));
    if init {
        format!("spec.initContainers{{{name}}}")
    } else {
        format!("spec.containers{{{name}}}")
    }
}

impl Recorder {
    /// A recorder and the receiving end its events go to.
    pub fn channel() -> (Recorder, mpsc::UnboundedReceiver<PodEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Recorder { tx: Some(tx) }, rx)
    }

    /// An event about the pod.
    pub fn pod(&self, pod: &Pod, type_: &'static str, reason: &str, message: String) {
        self.send(regarding(pod, None), type_, reason, message);
    }

    /// An event about one of the pod's containers.
    pub fn container(
        &self,
        pod: &Pod,
        container: &str,
        type_: &'static str,
        reason: &str,
        message: String,
    ) {
        let path = container_path(pod, container);
        self.send(regarding(pod, Some(path)), type_, reason, message);
    }

    fn send(&self, regarding: ObjectReference, type_: &'static str, reason: &str, message: String) {
        tracing::debug!(reason, %message, "event");
        if let Some(tx) = &self.tx {
            let _ = tx.send(PodEvent {
                regarding,
                type_,
                reason: reason.to_string(),
                message,
            });
        }
    }
}

/// Writes the events of `rx` as node `host` until `stop`.
pub async fn run(
    client: watch::Receiver<kube::Client>,
    mut rx: mpsc::UnboundedReceiver<PodEvent>,
    host: String,
    stop: CancellationToken,
) {
    let mut correlator = Correlator::default();
    loop {
        let ev = tokio::select! {
            _ = stop.cancelled() => return,
            ev = rx.recv() => match ev { Some(ev) => ev, None => return },
        };
        let kube = client.borrow().clone();
        match correlator.observe(&ev, &host, Timestamp::now()) {
            Write::Create(event) => {
                let ns = event.metadata.namespace.clone().unwrap_or_default();
                let api: Api<Event> = Api::namespaced(kube, &ns);
                if let Err(e) = api.create(&PostParams::default(), &event).await {
                    tracing::warn!(reason = %ev.reason, "event not recorded: {e}");
                    correlator.forget(&ev);
                }
            }
            Write::Bump {
                namespace,
                name,
                count,
                last,
            } => {
                let api: Api<Event> = Api::namespaced(kube, &namespace);
                let last = serde_json::to_value(Time(last)).unwrap_or_default();
                let patch = serde_json::json!({"count": count, "lastTimestamp": last});
                let r = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                if let Err(e) = r {
                    tracing::debug!(reason = %ev.reason, "event {name} not bumped: {e}");
                    correlator.forget(&ev);
                    if let Write::Create(event) = correlator.observe(&ev, &host, Timestamp::now()) {
                        let _ = api.create(&PostParams::default(), &event).await;
                    }
                }
            }
        }
    }
}
