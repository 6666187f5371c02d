//! The pod garbage collector's decisions, without I/O (upstream's `podgc`): terminated pods
//! beyond `--terminated-pod-gc-threshold` (oldest first), pods bound to nodes that do not
//! exist, and terminating pods that were never scheduled.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

/// Upstream's `--terminated-pod-gc-threshold`.
pub const DEFAULT_THRESHOLD: usize = 12500;

/// Why a pod is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Succeeded/Failed, and more of those than the threshold exist.
    Terminated,
    /// Bound to a node that does not exist (the shell confirms the node is gone first).
    Orphaned,
    /// Being deleted but never bound: no kubelet will finish the deletion.
    UnscheduledTerminating,
}

/// One pod to force-delete: namespace, name, uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collect {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub reason: Reason,
}

fn collect(pod: &Pod, reason: Reason) -> Collect {
    Collect {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        reason,
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The pods to delete. `nodes` are the names of the nodes that exist; a pod appears at most
/// once (the first reason in the order terminated, orphaned, unscheduled-terminating).
pub fn plan(pods: &[&Pod], nodes: &BTreeSet<String>, threshold: usize) -> Vec<Collect> {
    let mut out: Vec<Collect> = Vec::new();
    let mut terminated: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| matches!(phase(p), "Succeeded" | "Failed"))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if terminated.len() > threshold {
        terminated.sort_by(|a, b| {
            let key = |p: &Pod| {
                (
                    p.metadata.creation_timestamp.clone().map(|t| t.0),
                    p.metadata.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        let excess = terminated.len() - threshold;
        out.extend(
            terminated[..excess]
                .iter()
                .map(|p| collect(p, Reason::Terminated)),
        );
    }
    for pod in pods {
        if out
            .iter()
            .any(|c| Some(&c.uid) == pod.metadata.uid.as_ref())
        {
            continue;
        }
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        if !node.is_empty() && !nodes.contains(node) {
            out.push(collect(pod, Reason::Orphaned));
        } else if node.is_empty() && pod.metadata.deletion_timestamp.is_some() {
            out.push(collect(pod, Reason::UnscheduledTerminating));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str, phase: &str, created: &str, deleting: bool) -> Pod {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"),
                         "creationTimestamp": created},
            "spec": {"containers": []},
            "status": {"phase": phase},
        });
        if !node.is_empty() {
            v["spec"]["nodeName"] = json!(node);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(v).unwrap()
    }

    fn names(c: &[Collect]) -> Vec<(&str, Reason)> {
        c.iter().map(|c| (c.name.as_str(), c.reason)).collect()
    }

    #[test]
    fn oldest_terminated_pods_over_the_threshold() {
        let pods = [
            pod("new", "n1", "Succeeded", "2026-01-01T00:03:00Z", false),
            pod("old", "n1", "Failed", "2026-01-01T00:01:00Z", false),
            pod("mid", "n1", "Succeeded", "2026-01-01T00:02:00Z", false),
            pod("running", "n1", "Running", "2026-01-01T00:00:00Z", false),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let nodes: BTreeSet<String> = ["n1".to_string()].into();
        assert_eq!(
            names(&plan(&refs, &nodes, 1)),
            vec![("old", Reason::Terminated), ("mid", Reason::Terminated)]
        );
        assert_eq!(plan(&refs, &nodes, 3), vec![]);
    }

    #[test]
    fn orphaned_and_unscheduled_terminating() {
        let pods = [
            pod("gone-node", "n2", "Running", "2026-01-01T00:00:00Z", false),
            pod("pending", "", "Pending", "2026-01-01T00:00:00Z", false),
            pod(
                "pending-deleted",
                "",
                "Pending",
                "2026-01-01T00:00:00Z",
                true,
            ),
            pod(
                "bound-deleted",
                "n1",
                "Running",
                "2026-01-01T00:00:00Z",
                true,
            ),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let nodes: BTreeSet<String> = ["n1".to_string()].into();
        assert_eq!(
            names(&plan(&refs, &nodes, 10)),
            vec![
                ("gone-node", Reason::Orphaned),
                ("pending-deleted", Reason::UnscheduledTerminating)
            ]
        );
    }
}
