//! What controllers read off pods (upstream's `pkg/api/v1/pod` and `controller_utils.go`):
//! activity, readiness, availability, and the order in which surplus pods are deleted.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Annotation whose integer value ranks pods for deletion: lower cost goes first.
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Neither finished (Succeeded/Failed) nor being deleted (upstream's `IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    let phase = phase(pod);
    phase != "Succeeded" && phase != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// When the pod's Ready condition last turned True; `None` when not ready.
pub fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    (c.status == "True").then(|| c.last_transition_time.as_ref().map(|t| t.0))
}

/// The Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Ready for at least `min_ready_seconds` at `now` (upstream's `IsPodAvailable`).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    ready_since(pod).is_some_and(|since| available_at(since, min_ready_seconds, now))
}

/// [`is_available`] of a ready pod whose Ready condition turned True at `since`.
pub fn available_at(since: Option<Timestamp>, min_ready_seconds: i32, now: Timestamp) -> bool {
    match since {
        _ if min_ready_seconds <= 0 => true,
        None => false,
        Some(t) => t + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now,
    }
}

/// Seconds until a ready pod becomes available (0 when it is, or is not ready at all).
pub fn seconds_until_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> i64 {
    // Without minReadySeconds every ready pod is available: nothing to read (this runs over
    // every pod of a ReplicaSet on each of its syncs).
    if min_ready_seconds <= 0 {
        return 0;
    }
    match ready_since(pod) {
        Some(Some(t)) => {
            let at = t + SignedDuration::from_secs(i64::from(min_ready_seconds));
            if at < now {
                0
            } else {
                at.duration_since(now).as_secs() + 1
            }
        }
        _ => 0,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().map(|c| c.restart_count).max())
        .unwrap_or(0)
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

fn node(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// `floor(log2(now - t in ns))`, -1 for a time not before `now` (upstream's logarithmic
/// scale-down buckets).
fn log_bucket(t: Option<Timestamp>, now: Timestamp) -> i64 {
    let Some(t) = t else { return -1 };
    let d = now.duration_since(t).as_nanos();
    if d <= 0 {
        -1
    } else {
        i64::from(127 - d.leading_zeros() as i32)
    }
}

/// Upstream's `ActivePodsWithRanks` order: the pod to delete first sorts first. Unscheduled <
/// scheduled; Pending < Unknown < Running; not ready < ready; lower deletion cost; more pods
/// on the same node (`rank`); ready for a shorter time; more restarts; newer (times compared
/// in logarithmic buckets of their age at `now`).
pub fn deletion_order(a: (&Pod, usize), b: (&Pod, usize), now: Timestamp) -> Ordering {
    let ((a, rank_a), (b, rank_b)) = (a, b);
    node(a)
        .is_empty()
        .cmp(&node(b).is_empty())
        .reverse()
        .then_with(|| phase_ordinal(a).cmp(&phase_ordinal(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| rank_b.cmp(&rank_a))
        .then_with(|| match (ready_since(a), ready_since(b)) {
            (Some(ta), Some(tb)) if ta != tb => log_bucket(ta, now).cmp(&log_bucket(tb, now)),
            _ => Ordering::Equal,
        })
        .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            log_bucket(created(a), now).cmp(&log_bucket(created(b), now))
        })
}

/// The `n` pods of `pods` to delete first; `related` are the pods whose co-location on a
/// node ranks a pod earlier (upstream counts the pods of all the controller's siblings).
pub fn pods_to_delete<'a>(
    pods: &[&'a Pod],
    related: &[&Pod],
    n: usize,
    now: Timestamp,
) -> Vec<&'a Pod> {
    let rank = |p: &Pod| {
        let n = node(p);
        if n.is_empty() {
            0
        } else {
            related.iter().filter(|r| node(r) == n).count()
        }
    };
    let mut ranked: Vec<(&Pod, usize)> = pods.iter().map(|p| (*p, rank(p))).collect();
    ranked.sort_by(|a, b| deletion_order(*a, *b, now));
    ranked.into_iter().take(n).map(|(p, _)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(name: &str, node: &str, phase: &str, ready_at: Option<i64>) -> Pod {
        let mut conditions = Vec::new();
        if let Some(at) = ready_at {
            conditions.push(serde_json::json!({"type": "Ready", "status": "True",
                "lastTransitionTime": t(at).to_string()}));
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "creationTimestamp": t(0).to_string()},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase, "conditions": conditions}
        }))
        .unwrap()
    }

    fn names(pods: Vec<&Pod>) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect()
    }

    #[test]
    fn unscheduled_then_pending_then_not_ready_then_ready() {
        let ready = pod("ready", "n1", "Running", Some(10));
        let running = pod("running", "n1", "Running", None);
        let pending = pod("pending", "n1", "Pending", None);
        let unscheduled = pod("unscheduled", "", "Pending", None);
        let all = [&ready, &running, &pending, &unscheduled];
        assert_eq!(
            names(pods_to_delete(&all, &[], 4, t(1000))),
            ["unscheduled", "pending", "running", "ready"]
        );
        assert_eq!(
            names(pods_to_delete(&all, &[], 2, t(1000))),
            ["unscheduled", "pending"]
        );
    }

    #[test]
    fn doubled_up_pods_and_shorter_readiness_go_first() {
        let a = pod("a", "n1", "Running", Some(100));
        let b = pod("b", "n2", "Running", Some(100));
        let c = pod("c", "n2", "Running", Some(100));
        let all = [&a, &b, &c];
        assert_eq!(names(pods_to_delete(&all, &all, 1, t(1000))), ["b"]);
        // Ready for 10 s against 1000 s: the younger goes first (different log2 buckets).
        let old = pod("old", "n1", "Running", Some(0));
        let young = pod("young", "n2", "Running", Some(990));
        assert_eq!(
            names(pods_to_delete(&[&old, &young], &[], 1, t(1000))),
            ["young"]
        );
    }

    #[test]
    fn deletion_cost_overrides_rank() {
        let mut cheap = pod("cheap", "n1", "Running", Some(100));
        cheap.metadata.annotations = Some([(DELETION_COST.to_string(), "-5".to_string())].into());
        let b = pod("b", "n2", "Running", Some(100));
        let c = pod("c", "n2", "Running", Some(100));
        let all = [&b, &c, &cheap];
        assert_eq!(names(pods_to_delete(&all, &all, 1, t(1000))), ["cheap"]);
    }

    #[test]
    fn activity_readiness_availability() {
        let mut p = pod("p", "n1", "Running", Some(100));
        assert!(is_active(&p) && is_ready(&p));
        assert!(is_available(&p, 0, t(100)));
        assert!(!is_available(&p, 10, t(110)));
        assert!(is_available(&p, 10, t(111)));
        assert_eq!(seconds_until_available(&p, 10, t(105)), 6);
        assert_eq!(seconds_until_available(&p, 10, t(120)), 0);
        assert!(!is_available(&pod("q", "n1", "Running", None), 0, t(100)));
        p.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(!is_active(&p));
    }
}
