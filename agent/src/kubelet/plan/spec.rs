//! What the planner reads from a pod: its containers, restart policy, grace periods, and the
//! identity strings upstream's kubelet uses in keys and messages.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

/// The pod's containers.
pub fn containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
}

/// The pod's init containers.
pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
}

/// The pod's `restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

/// The pod's restart policy (`Always` when unset, the API default).
pub fn restart_policy(pod: &Pod) -> RestartPolicy {
    match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
        Some("OnFailure") => RestartPolicy::OnFailure,
        Some("Never") => RestartPolicy::Never,
        _ => RestartPolicy::Always,
    }
}

/// Upstream's `shouldRestartOnFailure`: the policy is not `Never`.
pub fn restarts_on_failure(pod: &Pod) -> bool {
    restart_policy(pod) != RestartPolicy::Never
}

pub fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

pub fn is_deleting(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The phase the API object already has.
pub fn api_phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// The API object is `Succeeded` or `Failed`.
pub fn api_phase_is_terminal(pod: &Pod) -> bool {
    matches!(api_phase(pod), Some("Succeeded" | "Failed"))
}

/// The minimal time a stopping container gets (upstream's `minimumGracePeriodInSeconds`).
pub const MINIMUM_GRACE: Duration = Duration::from_secs(2);

/// The grace period for stopping the containers of a pod being deleted: the smaller of the
/// deletion's `deletionGracePeriodSeconds` and the spec's `terminationGracePeriodSeconds`
/// (default 30 s); never negative.
pub fn deletion_grace(pod: &Pod) -> Duration {
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    let grace = match pod.metadata.deletion_grace_period_seconds {
        Some(d) => d.min(spec),
        None => spec,
    };
    Duration::from_secs(grace.max(0) as u64)
}

/// `name_namespace(uid)`, upstream's `format.Pod`.
pub fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// The hash of the fields of a container spec that force a restart when they change: its name
/// and image (the only mutable container field), as upstream hashes them since 1.31. FNV-1a
/// (32 bit) over the JSON `{"image":…,"name":…}`; the executor stores it on the container.
pub fn container_hash(c: &Container) -> u64 {
    let fields: BTreeMap<&str, &str> = [
        ("name", c.name.as_str()),
        ("image", c.image.as_deref().unwrap_or_default()),
    ]
    .into();
    let json = serde_json::to_string(&fields).unwrap_or_default();
    let mut h: u32 = 0x811c_9dc5;
    for b in json.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    u64::from(h)
}

/// The key of a container's crash-loop back-off (upstream's `getStableKey`):
/// `name_namespace_uid_container_hash` (hash in hex).
pub fn backoff_key(pod: &Pod, c: &Container) -> String {
    format!(
        "{}_{}_{}_{}_{:x}",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        uid(pod),
        c.name,
        container_hash(c)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A pod from JSON merged over a minimal running-pod skeleton (tests of the whole module use it).
    pub(crate) fn pod(extra: Value) -> Pod {
        let mut base = json!({
            "metadata": { "name": "web", "namespace": "default", "uid": "u1" },
            "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "busybox:1.35" }] },
        });
        merge(&mut base, extra);
        serde_json::from_value(base).unwrap()
    }

    pub(crate) fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (slot, v) => *slot = v,
        }
    }

    #[test]
    fn restart_policy_defaults_to_always() {
        assert_eq!(restart_policy(&pod(json!({}))), RestartPolicy::Always);
        let never = pod(json!({"spec": {"restartPolicy": "Never"}}));
        assert_eq!(restart_policy(&never), RestartPolicy::Never);
        assert!(!restarts_on_failure(&never));
        let on_failure = pod(json!({"spec": {"restartPolicy": "OnFailure"}}));
        assert_eq!(restart_policy(&on_failure), RestartPolicy::OnFailure);
        assert!(restarts_on_failure(&on_failure));
    }

    #[test]
    fn deletion_grace_is_the_smaller_of_spec_and_deletion() {
        assert_eq!(deletion_grace(&pod(json!({}))), Duration::from_secs(30));
        let p = pod(json!({"spec": {"terminationGracePeriodSeconds": 10}}));
        assert_eq!(deletion_grace(&p), Duration::from_secs(10));
        let p = pod(json!({"metadata": {"deletionGracePeriodSeconds": 5},
            "spec": {"terminationGracePeriodSeconds": 10}}));
        assert_eq!(deletion_grace(&p), Duration::from_secs(5));
        let p = pod(json!({"metadata": {"deletionGracePeriodSeconds": 60},
            "spec": {"terminationGracePeriodSeconds": 10}}));
        assert_eq!(deletion_grace(&p), Duration::from_secs(10));
        let p = pod(json!({"metadata": {"deletionGracePeriodSeconds": 0}}));
        assert_eq!(deletion_grace(&p), Duration::ZERO);
    }

    #[test]
    fn format_and_keys() {
        let p = pod(json!({}));
        assert_eq!(format_pod(&p), "web_default(u1)");
        let c = &containers(&p)[0];
        // FNV-1a 32 of {"image":"busybox:1.35","name":"c"}
        assert_eq!(container_hash(c), 0xbbbb_7763);
        assert_eq!(backoff_key(&p, c), "web_default_u1_c_bbbb7763");
    }

    #[test]
    fn the_hash_follows_name_and_image_only() {
        let a = pod(json!({}));
        let b = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.35",
            "args": ["sleep", "1"]}]}}),
        );
        let c = pod(json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}));
        let h = |p: &Pod| container_hash(&containers(p)[0]);
        assert_eq!(h(&a), h(&b));
        assert_ne!(h(&a), h(&c));
    }
}
