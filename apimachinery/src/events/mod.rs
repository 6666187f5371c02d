//! The event recorder controllers report what they did with (client-go's legacy
//! `record.EventRecorder`, which kube-controller-manager's workload controllers use): core/v1
//! Events that `kubectl describe` lists under the object they regard.
//!
//! # Guarantees
//! - One Event per call, named `<object>.<nanoseconds hex>` in the object's namespace
//!   (`default` for cluster-scoped objects), `source.component` and `reportingComponent` the
//!   controller's name, `count` 1 (upstream's aggregation and spam filter are not done).
//! - Publishing never fails the caller: a rejected Event is logged and dropped, as upstream's
//!   recorder does.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

/// `type` of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records Events as one controller.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    component: String,
    host: String,
}

impl EventRecorder {
    /// A recorder reporting as `component` (e.g. `replicaset-controller`) on `host`.
    pub fn new(client: kube::Client, component: &str, host: &str) -> EventRecorder {
        EventRecorder {
            client,
            component: component.to_string(),
            host: host.to_string(),
        }
    }

    /// Records `reason`/`message` about `regarding`; logs and drops it if the API refuses.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let ev = build(
            regarding,
            type_,
            reason,
            message,
            &self.component,
            &self.host,
            Timestamp::now(),
        );
        let ns = ev.metadata.namespace.clone().unwrap_or_default();
        let events: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        if let Err(e) = events.create(&PostParams::default(), &ev).await {
            tracing::warn!(error = %e, reason, message, "event not recorded");
        }
    }
}

/// The Event `publish` creates at `now`.
pub fn build(
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
    component: &str,
    host: &str,
    now: Timestamp,
) -> Event {
    let namespace = regarding
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let object = regarding.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{object}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        involved_object: regarding.clone(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        type_: Some(type_.as_str().to_string()),
        source: Some(EventSource {
            component: Some(component.to_string()),
            host: Some(host.to_string()),
        }),
        reporting_component: Some(component.to_string()),
        reporting_instance: Some(host.to_string()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_regards_the_object_in_its_namespace() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let rs = ObjectReference {
            api_version: Some("apps/v1".into()),
            kind: Some("ReplicaSet".into()),
            name: Some("web-5d4f8b9c7".into()),
            namespace: Some("prod".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        let ev = build(
            &rs,
            EventType::Normal,
            "SuccessfulCreate",
            "Created pod: web-5d4f8b9c7-abcde",
            "replicaset-controller",
            "host1",
            now,
        );
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "web-5d4f8b9c7.17979cfe362a0000", "namespace": "prod"},
                "involvedObject": {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-5d4f8b9c7", "namespace": "prod", "uid": "u1"},
                "reason": "SuccessfulCreate",
                "message": "Created pod: web-5d4f8b9c7-abcde",
                "type": "Normal",
                "source": {"component": "replicaset-controller", "host": "host1"},
                "reportingComponent": "replicaset-controller",
                "reportingInstance": "host1",
                "count": 1,
                "firstTimestamp": "2023-11-14T22:13:20Z",
                "lastTimestamp": "2023-11-14T22:13:20Z"
            })
        );
    }

    #[test]
    fn cluster_scoped_objects_get_events_in_default() {
        let node = ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..ObjectReference::default()
        };
        let ev = build(
            &node,
            EventType::Warning,
            "R",
            "m",
            "c",
            "h",
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(ev.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(ev.metadata.name.as_deref(), Some("n1.0"));
        assert_eq!(ev.type_.as_deref(), Some("Warning"));
    }
}
