//! Kubelet Events: core/v1 Events about pods and their containers, recorded through the shared
//! [`EventRecorder`] as component `kubelet` with the node's name as source host (the Node
//! authorizer lets a node create and patch Events). The executor and the probe workers hand
//! events over without waiting; the recorder's writer task de-duplicates and writes them.

use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use tokio::sync::mpsc;

use k3rs_apimachinery::events::{EventRecorder, EventType};

/// The component kubelet events are reported as.
pub const COMPONENT: &str = "kubelet";

pub const NORMAL: EventType = EventType::Normal;
pub const WARNING: EventType = EventType::Warning;

/// Records events about pods; cheap to clone, never blocks.
#[derive(Clone, Debug, Default)]
pub struct Recorder(EventRecorder);

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
    /// A recorder for node `host` and the queue its events go to
    /// ([`k3rs_apimachinery::events::write`] writes them).
    pub fn channel(host: &str) -> (Recorder, mpsc::Receiver<Event>) {
        let (recorder, rx) = EventRecorder::channel(COMPONENT, host);
        (Recorder(recorder), rx)
    }

    /// An event about the pod.
    pub fn pod(&self, pod: &Pod, type_: EventType, reason: &str, message: String) {
        self.0
            .publish(&regarding(pod, None), type_, reason, &message);
    }

    /// An event about one of the pod's containers.
    pub fn container(
        &self,
        pod: &Pod,
        container: &str,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let path = container_path(pod, container);
        self.0
            .publish(&regarding(pod, Some(path)), type_, reason, &message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_events_regard_the_container_by_field_path() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "prod", "uid": "u1"},
            "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "c"}]}
        }))
        .unwrap();
        let (recorder, mut rx) = Recorder::channel("node-1");
        recorder.container(&pod, "init", WARNING, "BackOff", "m".into());
        recorder.container(&pod, "c", NORMAL, "Started", "m".into());
        let paths: Vec<_> = [rx.try_recv().unwrap(), rx.try_recv().unwrap()]
            .into_iter()
            .map(|e| {
                let source = e.source.unwrap_or_default();
                (
                    e.involved_object.field_path.unwrap_or_default(),
                    source.component,
                    source.host,
                )
            })
            .collect();
        let source = (Some(COMPONENT.to_string()), Some("node-1".to_string()));
        assert_eq!(
            paths,
            vec![
                (
                    "spec.initContainers{init}".into(),
                    source.0.clone(),
                    source.1.clone()
                ),
                ("spec.containers{c}".into(), source.0, source.1),
            ]
        );
    }
}
