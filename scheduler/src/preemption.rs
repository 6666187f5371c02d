//! Preemption by priority (upstream's DefaultPreemption, without PodDisruptionBudgets): when
//! the pod fits nowhere, find the node where evicting the fewest, least important
//! lower-priority pods makes it fit.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::algorithm::{check, histogram, FitError};
use super::filters::{PodInfo, Rejection};
use super::interpod;
use super::snapshot::{NodeInfo, Snapshot};
use super::topology_spread;

/// Why a pod with `preemptionPolicy: Never` does not preempt.
pub const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never";
/// Why a pod waits for a victim that is terminating.
pub const NOT_ELIGIBLE_TERMINATING: &str =
    "not eligible due to a terminating pod on the nominated node";
/// A node where preemption cannot help.
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// A node where no set of victims makes room.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// Why preemption found no plan: the message upstream puts after `preemption: ` (without the
/// final period).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreemptionError {
    /// The pod may not preempt at all ([`NOT_ELIGIBLE_NEVER`], [`NOT_ELIGIBLE_TERMINATING`]).
    #[error("{0}")]
    NotEligible(&'static str),
    /// No node has victims whose eviction lets the pod fit; `histogram` is the per-reason
    /// node count (` 2 No preemption victims found for incoming pod`).
    #[error("0/{nodes} nodes are available:{histogram}")]
    NoCandidate {
        /// The number of nodes in the snapshot.
        nodes: usize,
        /// The reasons with their node counts, each after a space.
        histogram: String,
    },
}

/// What preemption decided: evict `victims` from `node`, then nominate it.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The node to nominate.
    pub node: String,
    /// The pods to evict from it.
    pub victims: Vec<Arc<Pod>>,
}

/// A pod's priority (`spec.priority`, 0 when unset).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

fn start_time(pod: &Pod) -> Option<&k8s_openapi::jiff::Timestamp> {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| &t.0)
        .or(pod.metadata.creation_timestamp.as_ref().map(|t| &t.0))
}

/// Upstream's `MoreImportantPod`: higher priority, then the earlier start.
fn more_important_first(a: &Arc<Pod>, b: &Arc<Pod>) -> std::cmp::Ordering {
    priority(b)
        .cmp(&priority(a))
        .then_with(|| start_time(a).cmp(&start_time(b)))
}

/// Whether the pod may preempt at all; the reason when not.
fn eligible(pod: &PodInfo, snapshot: &Snapshot) -> Result<(), &'static str> {
    let spec = pod.pod.spec.as_ref();
    if spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
        return Err(NOT_ELIGIBLE_NEVER);
    }
    let nominated = pod
        .pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref());
    if let Some(node) = nominated.and_then(|n| snapshot.nodes.iter().find(|x| x.name() == n)) {
        let mine = priority(&pod.pod);
        if node
            .pods
            .iter()
            .any(|p| p.metadata.deletion_timestamp.is_some() && priority(p) < mine)
        {
            return Err(NOT_ELIGIBLE_TERMINATING);
        }
    }
    Ok(())
}

/// Whether `pod` fits on `node` standing in for `scratch.nodes[index]` (left there; the
/// caller puts the original back).
fn fits(pod: &PodInfo, scratch: &mut Snapshot, index: usize, node: &NodeInfo) -> bool {
    scratch.nodes[index] = node.clone();
    let spread = topology_spread::PreFilter::new(pod, scratch);
    let inter_pod = interpod::PreFilter::new(pod, scratch);
    check(pod, node, &spread, &inter_pod).is_ok()
}

/// The fewest victims on one node (upstream `SelectVictimsOnNode`): remove every
/// lower-priority pod; if the pod then fits, give back the most important ones while it
/// still fits. `scratch` is a copy of the decision's snapshot, as it was on return.
fn victims_on(pod: &PodInfo, scratch: &mut Snapshot, index: usize) -> Option<Vec<Arc<Pod>>> {
    let original = scratch.nodes[index].clone();
    let victims = victims_on_copy(pod, scratch, index, &original);
    scratch.nodes[index] = original;
    victims
}

fn victims_on_copy(
    pod: &PodInfo,
    scratch: &mut Snapshot,
    index: usize,
    original: &NodeInfo,
) -> Option<Vec<Arc<Pod>>> {
    let mine = priority(&pod.pod);
    let mut node = original.clone();
    let mut candidates: Vec<Arc<Pod>> = node
        .pods
        .iter()
        .filter(|p| priority(p) < mine)
        .cloned()
        .collect();
    if candidates.is_empty() {
        return None;
    }
    for p in &candidates {
        node.remove_pod(p.metadata.uid.as_deref().unwrap_or(""));
    }
    if !fits(pod, scratch, index, &node) {
        return None;
    }
    candidates.sort_by(more_important_first);
    let mut victims = Vec::new();
    for p in candidates {
        node.add_pod(p.clone());
        if !fits(pod, scratch, index, &node) {
            node.remove_pod(p.metadata.uid.as_deref().unwrap_or(""));
            victims.push(p);
        }
    }
    Some(victims)
}

/// The node whose victims hurt least: lowest highest victim priority, then lowest sum of
/// priorities, then fewest victims, then the first.
fn pick(candidates: Vec<(String, Vec<Arc<Pod>>)>) -> Option<Plan> {
    candidates
        .into_iter()
        .min_by_key(|(_, v)| {
            let highest = v.iter().map(|p| priority(p)).max().unwrap_or(i32::MIN);
            let sum: i64 = v
                .iter()
                .map(|p| i64::from(priority(p)) + i64::from(i32::MAX) + 1)
                .sum();
            (highest, sum, v.len())
        })
        .map(|(node, victims)| Plan { node, victims })
}

/// Preemption for a pod that failed with `fit`: a plan, or why there is none.
pub fn preempt(
    pod: &PodInfo,
    snapshot: &Snapshot,
    fit: &FitError,
) -> Result<Plan, PreemptionError> {
    eligible(pod, snapshot).map_err(PreemptionError::NotEligible)?;
    let mut candidates = Vec::new();
    let mut statuses = Vec::new();
    // One copy per attempt (each candidate node stands in it in turn), not one per check.
    let mut scratch: Option<Snapshot> = None;
    let index: HashMap<&str, usize> = snapshot
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name(), i))
        .collect();
    for (node, rejection) in &fit.rejections {
        let Some(&index) = index.get(node.as_str()) else {
            continue;
        };
        if rejection.unresolvable {
            statuses.push(Rejection::unresolvable(NOT_HELPFUL));
            continue;
        }
        let scratch = scratch.get_or_insert_with(|| snapshot.clone());
        match victims_on(pod, scratch, index) {
            Some(v) if !v.is_empty() => candidates.push((node.clone(), v)),
            _ => statuses.push(Rejection::unschedulable(NO_VICTIMS)),
        }
    }
    match pick(candidates) {
        Some(plan) => Ok(plan),
        None => Err(PreemptionError::NoCandidate {
            nodes: snapshot.nodes.len(),
            histogram: histogram(statuses.iter()).trim_end_matches('.').to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::schedule;
    use serde_json::json;

    fn node(name: &str, cpu: &str) -> Arc<k8s_openapi::api::core::v1::Node> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "110"}}}))
            .unwrap(),
        )
    }
    fn pod(name: &str, node: &str, cpu: &str, priority: i32) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name, "namespace": "default", "uid": name,
                "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"nodeName": node, "priority": priority, "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
            )
            .unwrap(),
        )
    }
    fn names(plan: &Plan) -> Vec<&str> {
        plan.victims
            .iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect()
    }

    #[test]
    fn evicts_the_fewest_least_important_pods() {
        let pods = [
            pod("a-low", "a", "1", 1),
            pod("a-mid", "a", "1", 5),
            pod("b-mid1", "b", "1", 5),
            pod("b-mid2", "b", "1", 5),
            pod("c-high", "c", "2", 100),
        ];
        let s = Snapshot::new(
            vec![node("a", "2"), node("b", "2"), node("c", "2")],
            pods.iter(),
        );
        let p = PodInfo::new(pod("new", "", "1", 10));
        let fit = schedule(&p, &s).unwrap_err();
        // a: removing a-low suffices (highest victim priority 1); b needs one mid (5);
        // c: c-high outranks the pod.
        let plan = preempt(&p, &s, &fit).unwrap();
        assert_eq!((plan.node.as_str(), names(&plan)), ("a", vec!["a-low"]));
    }

    #[test]
    fn no_victims_and_never_policy_messages() {
        let pods = [pod("high", "a", "2", 100)];
        let s = Snapshot::new(vec![node("a", "2"), node("b", "1")], pods.iter());
        let p = PodInfo::new(pod("new", "", "2", 10));
        let fit = schedule(&p, &s).unwrap_err();
        let msg = preempt(&p, &s, &fit).unwrap_err().to_string();
        assert_eq!(
            msg,
            "0/2 nodes are available: 2 No preemption victims found for incoming pod"
        );
        let full = FitError {
            post_filter: Some(msg),
            ..fit.clone()
        };
        assert_eq!(
            full.message(),
            "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: \
             2 No preemption victims found for incoming pod."
        );
        let mut never = (*pod("new", "", "2", 1000)).clone();
        never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
        let never = PodInfo::new(Arc::new(never));
        assert_eq!(
            preempt(&never, &s, &fit).unwrap_err().to_string(),
            NOT_ELIGIBLE_NEVER
        );
    }

    #[test]
    fn waits_while_a_victim_on_the_nominated_node_terminates() {
        let mut dying = (*pod("low", "a", "2", 1)).clone();
        dying.metadata.deletion_timestamp = dying.metadata.creation_timestamp.clone();
        let s = Snapshot::new(vec![node("a", "2")], [Arc::new(dying)].iter());
        let mut p = (*pod("new", "", "2", 10)).clone();
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            nominated_node_name: Some("a".into()),
            ..Default::default()
        });
        let p = PodInfo::new(Arc::new(p));
        let fit = schedule(&p, &s).unwrap_err();
        assert_eq!(
            preempt(&p, &s, &fit).unwrap_err().to_string(),
            NOT_ELIGIBLE_TERMINATING
        );
    }
}
