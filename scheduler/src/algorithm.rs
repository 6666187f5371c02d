//! One scheduling decision: filter every node, score the feasible ones, pick the best —
//! or explain, in upstream's `FitError` words, why no node fits.

use std::collections::BTreeMap;

use super::filters::{self, PodInfo, Rejection};
use super::interpod;
use super::scores;
use super::snapshot::{NodeInfo, Snapshot};
use super::topology_spread;

/// The event message when the cluster has no node at all.
pub const NO_NODES: &str = "no nodes available to schedule pods";

/// Why the pod fits on no node: each node's rejection, and what preemption said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitError {
    /// How many nodes were considered.
    pub num_nodes: usize,
    /// (node, rejection) for every node, in snapshot order.
    pub rejections: Vec<(String, Rejection)>,
    /// A PreFilter's rejection of every node (then `rejections` is not counted).
    pub pre_filter: Option<String>,
    /// Preemption's explanation, without the `preemption: ` prefix.
    pub post_filter: Option<String>,
}

impl FitError {
    /// Upstream's message: `0/N nodes are available: <count> <reason>, ….` with the
    /// "<count> <reason>" strings sorted, then ` preemption: <msg>.` when preemption ran.
    pub fn message(&self) -> String {
        if self.num_nodes == 0 && self.post_filter.is_none() {
            return NO_NODES.to_string();
        }
        let reasons = match &self.pre_filter {
            Some(p) => format!(" {p}."),
            None => histogram(self.rejections.iter().map(|(_, r)| r)),
        };
        let mut msg = format!("0/{} nodes are available:{reasons}", self.num_nodes);
        if let Some(p) = &self.post_filter {
            msg.push_str(&format!(" preemption: {p}."));
        }
        msg
    }
}

/// ` 2 Insufficient cpu, 1 node(s) ….` (sorted as strings, as upstream), or empty.
pub fn histogram<'a>(rejections: impl Iterator<Item = &'a Rejection>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rejections {
        for reason in &r.reasons {
            *counts.entry(reason).or_default() += 1;
        }
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" {}.", parts.join(", "))
    }
}

/// Whether any filter rejects the pod on `node` (with `inter_pod` and `spread` computed on
/// the snapshot `node` belongs to).
pub fn check(
    pod: &PodInfo,
    node: &NodeInfo,
    spread: &topology_spread::PreFilter,
    inter_pod: &interpod::PreFilter,
) -> Result<(), Rejection> {
    filters::run(pod, node)?;
    spread.filter(node)?;
    inter_pod.filter(pod, node)
}

/// How many feasible nodes a decision looks for before it stops filtering (upstream's
/// adaptive `percentageOfNodesToScore`): all below 100 nodes, else `50 - nodes/125` percent
/// (at least 5 %), at least 100.
pub fn feasible_to_find(num_nodes: usize) -> usize {
    if num_nodes < 100 {
        return num_nodes;
    }
    let percent = (50 - num_nodes as i64 / 125).max(5);
    ((num_nodes as i64 * percent / 100) as usize).max(100)
}

/// The node for `pod`: the feasible node with the highest weighted score (the first among
/// equals), or every node's rejection. Equivalent to [`schedule_from`] at node 0.
pub fn schedule(pod: &PodInfo, snapshot: &Snapshot) -> Result<String, FitError> {
    schedule_from(pod, snapshot, 0).0
}

/// [`schedule`] filtering nodes round-robin from index `start` and stopping after
/// [`feasible_to_find`] feasible ones; also how many nodes it examined (the next decision
/// starts that much further on, as upstream's `nextStartNodeIndex`).
pub fn schedule_from(
    pod: &PodInfo,
    snapshot: &Snapshot,
    start: usize,
) -> (Result<String, FitError>, usize) {
    let n = snapshot.nodes.len();
    let spread = topology_spread::PreFilter::new(pod, snapshot);
    let inter_pod = interpod::PreFilter::new(pod, snapshot);
    let want = feasible_to_find(n);
    let mut feasible = Vec::new();
    let mut rejections = Vec::new();
    let mut processed = 0;
    for k in 0..n {
        let i = (start + k) % n;
        processed += 1;
        match check(pod, &snapshot.nodes[i], &spread, &inter_pod) {
            Ok(()) => {
                feasible.push(i);
                if feasible.len() >= want {
                    break;
                }
            }
            Err(r) => rejections.push((snapshot.nodes[i].name().to_string(), r)),
        }
    }
    if feasible.is_empty() {
        let err = FitError {
            num_nodes: n,
            rejections,
            pre_filter: None,
            post_filter: None,
        };
        return (Err(err), processed);
    }
    if feasible.len() == 1 {
        return (
            Ok(snapshot.nodes[feasible[0]].name().to_string()),
            processed,
        );
    }
    let totals = scores::total(pod, snapshot, &feasible);
    let mut best = 0;
    for (i, score) in totals.iter().enumerate() {
        if *score > totals[best] {
            best = i;
        }
    }
    (
        Ok(snapshot.nodes[feasible[best]].name().to_string()),
        processed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::sync::Arc;

    fn node(name: &str, cpu: &str, spec: Value) -> Arc<k8s_openapi::api::core::v1::Node> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": spec, "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "110"}}}))
            .unwrap(),
        )
    }
    fn pod(cpu: &str) -> PodInfo {
        PodInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}))
            .unwrap(),
        ))
    }

    #[test]
    fn picks_the_least_allocated_feasible_node() {
        let s = Snapshot::new(
            vec![
                node("a", "1", json!({})),
                node("b", "4", json!({})),
                node("c", "2", json!({})),
            ],
            [].iter(),
        );
        assert_eq!(schedule(&pod("500m"), &s), Ok("b".to_string()));
    }

    #[test]
    fn fit_error_message_counts_sorted_reasons() {
        let s = Snapshot::new(
            vec![
                node("a", "1", json!({})),
                node("b", "1", json!({})),
                node(
                    "c",
                    "8",
                    json!({"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}),
                ),
            ],
            [].iter(),
        );
        let err = schedule(&pod("2"), &s).unwrap_err();
        assert_eq!(
            err.message(),
            "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu."
        );
        let with_preemption = FitError {
            post_filter: Some(
                "0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.".into(),
            ),
            ..err
        };
        assert_eq!(
            with_preemption.message(),
            "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu. \
             preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, \
             2 No preemption victims found for incoming pod.."
        );
    }

    #[test]
    fn adaptive_share_of_nodes_to_find() {
        // < 100: all; 1,000: 42 %; 5,000: 10 %; 6,000: 5 % floor (50 - 48 = 2); 150: 49 % → 100.
        assert_eq!(feasible_to_find(99), 99);
        assert_eq!(feasible_to_find(1000), 420);
        assert_eq!(feasible_to_find(5000), 500);
        assert_eq!(feasible_to_find(6000), 300);
        assert_eq!(feasible_to_find(150), 100);
    }

    #[test]
    fn round_robin_start_and_early_stop() {
        let nodes: Vec<_> = (0..200)
            .map(|i| node(&format!("n{i:03}"), "1", json!({})))
            .collect();
        let s = Snapshot::new(nodes, [].iter());
        // 200 nodes: 49 % = 98 → 100 feasible wanted; all fit; all score equal, so the first
        // examined wins.
        let (got, processed) = schedule_from(&pod("100m"), &s, 150);
        assert_eq!((got, processed), (Ok("n150".to_string()), 100));
    }

    #[test]
    fn pre_filter_rejection_replaces_the_node_counts() {
        let err = FitError {
            num_nodes: 2,
            rejections: Vec::new(),
            pre_filter: Some("persistentvolumeclaim \"data\" not found".into()),
            post_filter: Some(
                "0/2 nodes are available: 2 Preemption is not helpful for scheduling".into(),
            ),
        };
        assert_eq!(
            err.message(),
            "0/2 nodes are available: persistentvolumeclaim \"data\" not found. preemption: \
             0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn no_nodes() {
        let err = schedule(&pod("1"), &Snapshot::default()).unwrap_err();
        assert_eq!(err.message(), NO_NODES);
    }
}
