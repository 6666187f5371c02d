//! The ReplicaSet controller's decisions, without I/O (upstream's `manageReplicas` and
//! `calculateStatus`): how many pods to create or which to delete, in which batches, and the
//! status the owned pods add up to.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::pods;

/// At most this many pods are created or deleted in one sync (upstream's `BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// Condition type set while creating or deleting pods fails.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// What one sync does to the pod count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manage {
    Nothing,
    /// Create this many pods.
    Create(usize),
    /// Delete these pods (names), in this order.
    Delete(Vec<String>),
}

/// Compares the `active` owned pods with `replicas`: create the missing ones, or pick the
/// surplus by [`pods::pods_to_delete`] (`related` rank co-located pods); at most
/// [`BURST_REPLICAS`] either way.
pub fn manage(replicas: i32, active: &[&Pod], related: &[&Pod], now: Timestamp) -> Manage {
    let want = usize::try_from(replicas.max(0)).unwrap_or(0);
    if active.len() < want {
        Manage::Create((want - active.len()).min(BURST_REPLICAS))
    } else if active.len() > want {
        let n = (active.len() - want).min(BURST_REPLICAS);
        Manage::Delete(
            pods::pods_to_delete(active, related, n, now)
                .into_iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect(),
        )
    } else {
        Manage::Nothing
    }
}

/// Upstream's slow start: batches of 1, 2, 4, … adding up to `n`; the caller stops at the
/// first batch with a failure, so a failing create (quota) is tried once, not `n` times.
pub fn slow_start_batches(n: usize) -> Vec<usize> {
    let mut batches = Vec::new();
    let (mut size, mut left) = (1, n);
    while left > 0 {
        let b = size.min(left);
        batches.push(b);
        left -= b;
        size *= 2;
    }
    batches
}

/// Why managing replicas failed (becomes the `ReplicaFailure` condition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManageError {
    /// `FailedCreate` or `FailedDelete`.
    pub reason: &'static str,
    pub message: String,
}

/// What the status is computed from.
pub struct StatusInput<'a> {
    pub old: &'a ReplicaSetStatus,
    pub generation: Option<i64>,
    pub min_ready_seconds: i32,
    pub template_labels: &'a BTreeMap<String, String>,
    /// The active pods the controller owns.
    pub pods: &'a [&'a Pod],
    pub error: Option<&'a ManageError>,
}

/// Upstream's `calculateStatus`: counts of the owned pods, `observedGeneration`, and the
/// `ReplicaFailure` condition set on a failure (kept until a sync succeeds). Zero counts are
/// omitted as upstream's `omitempty` does.
pub fn status(input: &StatusInput, now: Timestamp) -> ReplicaSetStatus {
    let labeled = |p: &Pod| {
        let labels = p.metadata.labels.as_ref();
        input
            .template_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    };
    // One pass, each pod's Ready condition looked up once (this runs over every owned pod
    // on every sync).
    let (mut fully_labeled, mut ready, mut available) = (0_usize, 0_usize, 0_usize);
    for p in input.pods {
        fully_labeled += usize::from(labeled(p));
        if let Some(since) = pods::ready_since(p) {
            ready += 1;
            available += usize::from(pods::available_at(since, input.min_ready_seconds, now));
        }
    }
    let count = |n: usize| (n > 0).then(|| i32::try_from(n).unwrap_or(i32::MAX));
    let mut conditions = input.old.conditions.clone().unwrap_or_default();
    let has_failure = conditions.iter().any(|c| c.type_ == REPLICA_FAILURE);
    match input.error {
        Some(e) if !has_failure => conditions.push(ReplicaSetCondition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: Some(e.reason.into()),
            message: Some(e.message.clone()),
            last_transition_time: Some(Time(now)),
        }),
        None => conditions.retain(|c| c.type_ != REPLICA_FAILURE),
        Some(_) => {}
    }
    ReplicaSetStatus {
        replicas: i32::try_from(input.pods.len()).unwrap_or(i32::MAX),
        fully_labeled_replicas: count(fully_labeled),
        ready_replicas: count(ready),
        available_replicas: count(available),
        observed_generation: input.generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        terminating_replicas: input.old.terminating_replicas,
    }
}

/// The reason for a failure while the pod count is `active` and `replicas` is wanted.
pub fn failure_reason(active: usize, replicas: i32) -> &'static str {
    if (active as i64) < i64::from(replicas) {
        "FailedCreate"
    } else {
        "FailedDelete"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(name: &str, labels: serde_json::Value, ready_at: Option<i64>) -> Pod {
        let conditions: Vec<serde_json::Value> = ready_at
            .map(|at| {
                serde_json::json!({"type": "Ready", "status": "True",
                    "lastTransitionTime": t(at).to_string()})
            })
            .into_iter()
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running", "conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn slow_start_doubles() {
        assert_eq!(slow_start_batches(0), Vec::<usize>::new());
        assert_eq!(slow_start_batches(1), [1]);
        assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
        assert_eq!(slow_start_batches(15), [1, 2, 4, 8]);
    }

    #[test]
    fn manage_creates_the_missing_and_deletes_the_not_ready_first() {
        let app = serde_json::json!({"app": "web"});
        let ready = pod("ready", app.clone(), Some(0));
        let not_ready = pod("not-ready", app.clone(), None);
        assert_eq!(
            manage(5, &[&ready, &not_ready], &[], t(100)),
            Manage::Create(3)
        );
        assert_eq!(
            manage(2, &[&ready, &not_ready], &[], t(100)),
            Manage::Nothing
        );
        assert_eq!(
            manage(1, &[&ready, &not_ready], &[], t(100)),
            Manage::Delete(vec!["not-ready".into()])
        );
        assert_eq!(manage(1000, &[], &[], t(100)), Manage::Create(500));
        assert_eq!(
            manage(0, &[&ready, &not_ready], &[], t(100)),
            Manage::Delete(vec!["not-ready".into(), "ready".into()])
        );
    }

    #[test]
    fn status_counts_labeled_ready_and_available_pods() {
        let template: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            ("tier".into(), "fe".into()),
        ]
        .into();
        let full = pod(
            "a",
            serde_json::json!({"app": "web", "tier": "fe"}),
            Some(0),
        );
        let partial = pod("b", serde_json::json!({"app": "web"}), Some(95));
        let pending = pod("c", serde_json::json!({"app": "web", "tier": "fe"}), None);
        let pods = [&full, &partial, &pending];
        let old = ReplicaSetStatus::default();
        let s = status(
            &StatusInput {
                old: &old,
                generation: Some(3),
                min_ready_seconds: 10,
                template_labels: &template,
                pods: &pods,
                error: None,
            },
            t(100),
        );
        assert_eq!(
            s,
            ReplicaSetStatus {
                replicas: 3,
                fully_labeled_replicas: Some(2),
                ready_replicas: Some(2),
                available_replicas: Some(1),
                observed_generation: Some(3),
                conditions: None,
                terminating_replicas: None,
            }
        );
    }

    #[test]
    fn replica_failure_is_set_once_and_cleared_on_success() {
        let template = BTreeMap::new();
        let err = ManageError {
            reason: failure_reason(0, 2),
            message: "pods \"web-x\" is forbidden: exceeded quota: q".into(),
        };
        let input = |old, error| StatusInput {
            old,
            generation: Some(1),
            min_ready_seconds: 0,
            template_labels: &template,
            pods: &[],
            error,
        };
        let empty = ReplicaSetStatus::default();
        let failed = status(&input(&empty, Some(&err)), t(5));
        let cond = &failed.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                cond.type_.as_str(),
                cond.status.as_str(),
                cond.reason.as_deref()
            ),
            ("ReplicaFailure", "True", Some("FailedCreate"))
        );
        assert_eq!(cond.message.as_deref(), Some(err.message.as_str()));
        // A second failure keeps the first transition time.
        let again = status(&input(&failed, Some(&err)), t(50));
        assert_eq!(again.conditions, failed.conditions);
        assert_eq!(status(&input(&failed, None), t(60)).conditions, None);
        assert_eq!(failed.replicas, 0);
        assert_eq!(failed.ready_replicas, None);
    }
}
