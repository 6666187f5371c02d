//! The one event recorder of every k3rs component (the controllers, the scheduler, the
//! kubelet): client-go's legacy `record.EventRecorder` with its broadcaster and
//! `EventCorrelator`, writing core/v1 Events that `kubectl describe` lists under the object
//! they regard.
//!
//! # Guarantees
//! - [`EventRecorder::publish`] never blocks and never fails: the Event goes on a queue of
//!   [`QUEUE`] Events (upstream's `maxQueuedEvents`) and is dropped with a log line when the
//!   queue is full.
//! - One writer task per recorder ([`write`]) correlates the Events ([`correlate`]: repeats
//!   bump the `count` of one Event, similar Events are combined, a spam filter per object and Event)
//!   and creates or patches them; a write the API server refuses is logged and dropped, one
//!   that could not reach it is tried again (12 tries, 10 s apart), as upstream's recorder does.
//! - A new Event is named `<object>.<nanoseconds hex>` in the object's namespace (`default`
//!   for cluster-scoped objects), with `source` and `reporting*` the recorder's component and
//!   host.

pub mod correlate;
mod write;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use correlate::{Correlator, Write};
pub use write::write;

/// How many Events wait for the writer before new ones are dropped.
pub const QUEUE: usize = 1000;

/// `type` of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// An informational event.
    Normal,
    /// A warning event.
    Warning,
}

impl EventType {
    /// The Event `type` value.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records Events as one component on one host; cheap to clone. The default recorder drops
/// everything (for tests and components that record nothing).
#[derive(Clone, Debug, Default)]
pub struct EventRecorder {
    tx: Option<mpsc::Sender<Event>>,
    component: Arc<str>,
    host: Arc<str>,
}

impl EventRecorder {
    /// A recorder reporting as `component` (e.g. `replicaset-controller`) on `host`, with its
    /// writer task writing through `client`. The task ends once every clone of the recorder
    /// is dropped and the queue is written out. Must be called within a Tokio runtime.
    pub fn new(client: kube::Client, component: &str, host: &str) -> EventRecorder {
        let (recorder, rx) = EventRecorder::channel(component, host);
        let (_, client) = watch::channel(client);
        tokio::spawn(write(client, rx, CancellationToken::new()));
        recorder
    }

    /// A recorder and the queue its Events go to, for [`write`] (or a test) to consume.
    pub fn channel(component: &str, host: &str) -> (EventRecorder, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let recorder = EventRecorder {
            tx: Some(tx),
            component: component.into(),
            host: host.into(),
        };
        (recorder, rx)
    }

    /// Records `reason`/`message` about `regarding`.
    pub fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        tracing::debug!(reason, message, component = %self.component, "event");
        let Some(tx) = &self.tx else { return };
        let event = build(
            regarding,
            type_,
            reason,
            message,
            &self.component,
            &self.host,
            Timestamp::now(),
        );
        if let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(event) {
            tracing::warn!(reason, message, "event queue full: event dropped");
        }
    }
}

/// The name and namespace of a new Event about `regarding` at `now`.
fn event_meta(regarding: &ObjectReference, now: Timestamp) -> ObjectMeta {
    let namespace = regarding
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let object = regarding.name.as_deref().unwrap_or_default();
    ObjectMeta {
        name: Some(format!("{object}.{:x}", now.as_nanosecond())),
        namespace: Some(namespace),
        ..ObjectMeta::default()
    }
}

/// The Event that first recording `reason`/`message` at `now` creates.
pub fn build(
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
    component: &str,
    host: &str,
    now: Timestamp,
) -> Event {
    Event {
        metadata: event_meta(regarding, now),
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

    #[tokio::test]
    async fn publishing_queues_the_built_event_and_never_blocks() {
        let (recorder, mut rx) = EventRecorder::channel("kubelet", "node-1");
        let pod = ObjectReference {
            kind: Some("Pod".into()),
            name: Some("web".into()),
            namespace: Some("prod".into()),
            ..ObjectReference::default()
        };
        for _ in 0..QUEUE + 5 {
            recorder.publish(&pod, EventType::Normal, "Pulled", "pulled");
        }
        let first = rx.recv().await.unwrap();
        assert_eq!(first.reason.as_deref(), Some("Pulled"));
        assert_eq!(
            first.source.unwrap().host.as_deref(),
            Some("node-1"),
            "the recorder's host"
        );
        let mut queued = 1;
        while rx.try_recv().is_ok() {
            queued += 1;
        }
        assert_eq!(queued, QUEUE, "past the queue, Events are dropped");
        EventRecorder::default().publish(&pod, EventType::Normal, "R", "dropped silently");
    }
}
