//! Which changes of an API pod wake its worker (upstream's `podsDifferSemantically` and the
//! reconcile cases of `checkAndUpdatePod`).
//!
//! A pod's resourceVersion also moves on every status write, most of them the kubelet's own:
//! waking the worker on those would sync each pod again right after each of its writes (an
//! `ErrImagePull` turned `ImagePullBackOff` within a second, and a burst of pods did twice
//! the runtime calls it needs). Upstream wakes a worker only when the spec, labels,
//! annotations or deletion changed, and reconciles on a status change only where the status
//! decides something the kubelet does: a terminal phase another writer set (the eviction
//! manager fails a pod, its worker then stops it) and the conditions of the pod's readiness
//! gates (they are part of its Ready condition).
//!
//! [`fingerprint`] is pure: two versions of a pod with equal fingerprints need no sync.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use serde::Serialize;

use crate::kubelet::plan::spec::api_phase_is_terminal;

/// What of a pod its worker acts on; serialized, then hashed.
#[derive(Serialize)]
struct Semantic<'a> {
    spec: &'a Option<k8s_openapi::api::core::v1::PodSpec>,
    labels: &'a Option<std::collections::BTreeMap<String, String>>,
    annotations: &'a Option<std::collections::BTreeMap<String, String>>,
    deletion_timestamp: &'a Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    deletion_grace_period_seconds: Option<i64>,
    terminal: bool,
    readiness_gates: Vec<(&'a str, Option<&'a str>)>,
}

/// The status of each of the pod's readiness gates' conditions, in the gates' order.
fn readiness_gates(pod: &Pod) -> Vec<(&str, Option<&str>)> {
    let conditions: &[PodCondition] = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.readiness_gates.iter().flatten())
        .map(|g| {
            let status = conditions
                .iter()
                .find(|c| c.type_ == g.condition_type)
                .map(|c| c.status.as_str());
            (g.condition_type.as_str(), status)
        })
        .collect()
}

/// A fingerprint of what of `pod` its worker acts on: equal for two versions that differ only
/// in the status (other than a terminal phase and readiness-gate conditions), the
/// resourceVersion, managedFields or other metadata the kubelet does not read.
///
/// Stable within one process (not across processes: it is never stored).
pub fn fingerprint(pod: &Pod) -> u64 {
    let m = &pod.metadata;
    let semantic = Semantic {
        spec: &pod.spec,
        labels: &m.labels,
        annotations: &m.annotations,
        deletion_timestamp: &m.deletion_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        terminal: api_phase_is_terminal(pod),
        readiness_gates: readiness_gates(pod),
    };
    let mut h = DefaultHasher::new();
    // Serializing these types cannot fail (string keys, no non-finite floats); an error
    // would hash as an empty document, which only means one missed wake before the resync.
    serde_json::to_vec(&semantic)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn base() -> serde_json::Value {
        json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1",
                "resourceVersion": "10", "labels": {"app": "a"},
                "annotations": {"note": "x"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"}]},
        })
    }

    fn changed(edit: impl FnOnce(&mut serde_json::Value)) -> bool {
        let mut v = base();
        edit(&mut v);
        fingerprint(&pod(base())) != fingerprint(&pod(v))
    }

    #[test]
    fn the_same_pod_has_the_same_fingerprint() {
        assert_eq!(fingerprint(&pod(base())), fingerprint(&pod(base())));
    }

    #[test]
    fn status_writes_and_bookkeeping_do_not_wake() {
        assert!(!changed(|v| {
            v["metadata"]["resourceVersion"] = json!("11");
            v["metadata"]["managedFields"] = json!([{"manager": "k3rs-agent",
                "operation": "Update", "subresource": "status"}]);
            v["status"] = json!({"phase": "Pending", "podIP": "10.42.0.5",
                "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "",
                    "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ErrImagePull"}}}]});
        }));
        assert!(!changed(|v| v["status"]["phase"] = json!("Running")));
        // Conditions of other writers matter only for readiness gates.
        assert!(!changed(|v| {
            v["status"]["conditions"] = json!([{"type": "example.com/x", "status": "False"}]);
        }));
    }

    #[test]
    fn spec_labels_annotations_and_deletion_wake() {
        assert!(changed(
            |v| v["spec"]["containers"][0]["image"] = json!("nginx")
        ));
        assert!(changed(|v| v["spec"]["activeDeadlineSeconds"] = json!(5)));
        assert!(changed(|v| v["metadata"]["labels"]["tier"] = json!("web")));
        assert!(changed(
            |v| v["metadata"]["annotations"]["note"] = json!("y")
        ));
        assert!(changed(|v| {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }));
        assert!(changed(
            |v| v["metadata"]["deletionGracePeriodSeconds"] = json!(0)
        ));
    }

    #[test]
    fn a_terminal_phase_set_by_another_writer_wakes() {
        assert!(changed(|v| v["status"]["phase"] = json!("Failed")));
        assert!(changed(|v| v["status"]["phase"] = json!("Succeeded")));
    }

    #[test]
    fn readiness_gate_conditions_wake() {
        let gated = |v: &mut serde_json::Value| {
            v["spec"]["readinessGates"] = json!([{"conditionType": "example.com/x"}]);
        };
        let with = |status: Option<&str>| {
            let mut v = base();
            gated(&mut v);
            if let Some(s) = status {
                v["status"]["conditions"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"type": "example.com/x", "status": s}));
            }
            fingerprint(&pod(v))
        };
        assert_ne!(with(None), with(Some("False")));
        assert_ne!(with(Some("False")), with(Some("True")));
        // The gate's condition's message or time is no change.
        let mut v = base();
        gated(&mut v);
        v["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "example.com/x", "status": "True", "message": "ok"}));
        assert_eq!(with(Some("True")), fingerprint(&pod(v)));
    }
}
