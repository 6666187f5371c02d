//! The DaemonSet rolling update, without I/O (upstream's `rollingUpdate`,
//! `updatedDesiredNodeCounts`, `findUpdatedPodsOnNode`). Without surge it deletes old pods
//! while fewer than `maxUnavailable` nodes lack an available up-to-date pod, and the manage
//! pass creates the replacements; with surge it creates new pods beside old ones on at most
//! `maxSurge` nodes and deletes an old pod once the new one on its node is available.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::eligibility::is_updated;
use super::plan::NodeFit;
use crate::deployment::rolling::scaled_value;
use crate::pods;

/// How far a rolling update may go for `desired` nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub desired: i32,
}

fn rolling_value(strategy: &DaemonSetUpdateStrategy, surge: bool, total: i32) -> i32 {
    if strategy.type_.as_deref().unwrap_or("RollingUpdate") != "RollingUpdate" {
        return 0;
    }
    let ru = strategy.rolling_update.as_ref();
    let v = if surge {
        ru.and_then(|r| r.max_surge.clone())
            .unwrap_or(IntOrString::Int(0))
    } else {
        ru.and_then(|r| r.max_unavailable.clone())
            .unwrap_or(IntOrString::Int(1))
    };
    scaled_value(&v, total, true).unwrap_or(0)
}

/// Whether the strategy surges (upstream's `AllowsSurge`: maxSurge of one node is not 0).
pub fn allows_surge(strategy: &DaemonSetUpdateStrategy) -> bool {
    rolling_value(strategy, true, 1) != 0
}

/// maxSurge and maxUnavailable scaled to the nodes that should run a pod (percentages round
/// up); both zero means maxUnavailable 1.
pub fn budget(strategy: &DaemonSetUpdateStrategy, nodes: &[NodeFit]) -> Budget {
    let desired = nodes.iter().filter(|n| n.fit.should_run).count() as i32;
    let max_surge = rolling_value(strategy, true, desired);
    let mut max_unavailable = rolling_value(strategy, false, desired);
    if desired > 0 && max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }
    Budget {
        max_surge,
        max_unavailable,
        desired,
    }
}

/// What the rolling update decides.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rolling {
    pub delete: Vec<String>,
    pub create: Vec<String>,
}

/// What the rolling update reads besides nodes, pods and budget.
pub struct RollingInput {
    pub hash: String,
    pub template_generation: Option<i64>,
    pub min_ready_seconds: i32,
    pub now: Timestamp,
}

/// The node's one new and one old live pod; `None` when it has more of either (the manage
/// pass sorts that out first).
fn new_and_old<'a>(
    pods: &[&'a Pod],
    input: &RollingInput,
) -> Option<(Option<&'a Pod>, Option<&'a Pod>)> {
    let (mut new, mut old) = (None, None);
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let slot = if is_updated(pod, &input.hash, input.template_generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(*pod);
    }
    Some((new, old))
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Upstream's `rollingUpdate` decision.
pub fn rolling_update(
    nodes: &[NodeFit],
    by_node: &BTreeMap<String, Vec<&Pod>>,
    budget: Budget,
    input: &RollingInput,
) -> Rolling {
    let mut by_node = by_node.clone();
    for n in nodes.iter().filter(|n| n.fit.should_run) {
        by_node.entry(n.name.clone()).or_default();
    }
    let available = |p: &Pod| pods::is_available(p, input.min_ready_seconds, input.now);
    if budget.max_surge == 0 {
        let mut unavailable = 0;
        let mut replace = Vec::new();
        let mut candidates = Vec::new();
        for pods in by_node.values() {
            match new_and_old(pods, input) {
                None | Some((None, None)) | Some((Some(_), Some(_))) => unavailable += 1,
                Some((Some(new), None)) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                Some((None, Some(old))) => {
                    if !available(old) {
                        replace.push(name(old));
                        unavailable += 1;
                    } else if unavailable < budget.max_unavailable {
                        candidates.push(name(old));
                    }
                }
            }
        }
        let room = (budget.max_unavailable - unavailable).clamp(0, candidates.len() as i32);
        replace.extend(candidates.into_iter().take(room as usize));
        return Rolling {
            delete: replace,
            create: Vec::new(),
        };
    }
    let should_run = |node: &str| nodes.iter().any(|n| n.name == node && n.fit.should_run);
    let mut r = Rolling::default();
    let mut should_not_run = Vec::new();
    let mut candidates = Vec::new();
    let (mut surging, mut num_available) = (0, 0);
    for (node, pods) in &by_node {
        let Some((new, old)) = new_and_old(pods, input) else {
            surging += 1;
            continue;
        };
        if old.or(new).is_some_and(available) {
            num_available += 1;
        }
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) if !available(old) => {
                if should_run(node) {
                    r.create.push(node.clone());
                } else {
                    r.delete.push(name(old));
                }
            }
            (None, Some(old)) => {
                if !should_run(node) {
                    should_not_run.push(name(old));
                } else if surging < budget.max_surge {
                    candidates.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(new) {
                    r.delete.push(name(old));
                } else {
                    surging += 1;
                }
            }
        }
    }
    // Pods on nodes that may no longer take new ones go only while enough others are up.
    let deletable = (num_available - budget.desired).clamp(0, should_not_run.len() as i32);
    r.delete
        .extend(should_not_run.into_iter().take(deletable as usize));
    let room = (budget.max_surge - surging).clamp(0, candidates.len() as i32);
    r.create.extend(candidates.into_iter().take(room as usize));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemonset::plan::pods_by_node;
    use crate::daemonset::plan::tests::{fit, pod, pod_at, t};
    use serde_json::json;

    fn strategy(v: serde_json::Value) -> DaemonSetUpdateStrategy {
        serde_json::from_value(v).unwrap()
    }

    fn input() -> RollingInput {
        RollingInput {
            hash: "new".into(),
            template_generation: None,
            min_ready_seconds: 0,
            now: t(100),
        }
    }

    #[test]
    fn budgets_scale_round_up_and_never_stall() {
        let nodes: Vec<NodeFit> = (0..5).map(|i| fit(&format!("n{i}"), i < 4, true)).collect();
        let b = |v| budget(&strategy(v), &nodes);
        assert_eq!(
            b(json!({"type": "RollingUpdate"})),
            Budget {
                max_surge: 0,
                max_unavailable: 1,
                desired: 4
            }
        );
        assert_eq!(
            b(json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "30%"}}))
                .max_unavailable,
            2
        );
        let surge = json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "10%"}});
        assert_eq!(
            b(surge.clone()),
            Budget {
                max_surge: 1,
                max_unavailable: 0,
                desired: 4
            }
        );
        assert!(allows_surge(&strategy(surge)));
        assert!(!allows_surge(&strategy(json!({"type": "RollingUpdate"}))));
        assert_eq!(b(json!({"type": "OnDelete"})).max_unavailable, 1);
        let zero = json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}});
        assert_eq!(b(zero).max_unavailable, 1);
    }

    fn all_ready_old(n: usize) -> Vec<Pod> {
        (0..n)
            .map(|i| pod(&format!("p{i}"), &format!("n{i}"), "old", "Running", true))
            .collect()
    }

    #[test]
    fn without_surge_old_pods_go_within_max_unavailable() {
        let nodes: Vec<NodeFit> = (0..4).map(|i| fit(&format!("n{i}"), true, true)).collect();
        let pods = all_ready_old(4);
        let refs: Vec<&Pod> = pods.iter().collect();
        let b = Budget {
            max_surge: 0,
            max_unavailable: 2,
            desired: 4,
        };
        let r = rolling_update(&nodes, &pods_by_node(&refs), b, &input());
        assert_eq!(r.delete, ["p0", "p1"]);
        assert!(r.create.is_empty());
        // n0 is being replaced (no pod), n1's new pod is not ready: nothing more may go.
        let n1_new = pod("q1", "n1", "new", "Running", false);
        let refs: Vec<&Pod> = vec![&n1_new, &pods[2], &pods[3]];
        let r = rolling_update(&nodes, &pods_by_node(&refs), b, &input());
        assert_eq!(r, Rolling::default());
        // Once it is ready, one more slot frees.
        let n1_ready = pod("q1", "n1", "new", "Running", true);
        let refs: Vec<&Pod> = vec![&n1_ready, &pods[2], &pods[3]];
        let r = rolling_update(&nodes, &pods_by_node(&refs), b, &input());
        assert_eq!(r.delete, ["p2"]);
    }

    #[test]
    fn unavailable_old_pods_are_replaced_regardless() {
        let nodes: Vec<NodeFit> = (0..3).map(|i| fit(&format!("n{i}"), true, true)).collect();
        let sick = pod("sick", "n2", "old", "Running", false);
        let pods = all_ready_old(2);
        let refs: Vec<&Pod> = vec![&pods[0], &pods[1], &sick];
        let b = Budget {
            max_surge: 0,
            max_unavailable: 1,
            desired: 3,
        };
        let r = rolling_update(&nodes, &pods_by_node(&refs), b, &input());
        assert_eq!(r.delete, ["sick"]);
    }

    #[test]
    fn surge_creates_beside_old_pods_then_deletes_them() {
        let nodes: Vec<NodeFit> = (0..3).map(|i| fit(&format!("n{i}"), true, true)).collect();
        let pods = all_ready_old(3);
        let b = Budget {
            max_surge: 1,
            max_unavailable: 0,
            desired: 3,
        };
        let refs: Vec<&Pod> = pods.iter().collect();
        let r = rolling_update(&nodes, &pods_by_node(&refs), b, &input());
        assert_eq!(
            r,
            Rolling {
                delete: vec![],
                create: vec!["n0".into()]
            }
        );
        // The surge pod is not available yet: no further surge.
        let new0 = pod_at("new0", "n0", "new", "Running", false, 50);
        let refs: Vec<&Pod> = vec![&pods[0], &new0, &pods[1], &pods[2]];
        let r = rolling_update(&nodes, &pods_by_node(&refs), b, &input());
        assert_eq!(r, Rolling::default());
        // Available: its old pod goes and the next node surges.
        let new0 = pod_at("new0", "n0", "new", "Running", true, 50);
        let refs: Vec<&Pod> = vec![&pods[0], &new0, &pods[1], &pods[2]];
        let r = rolling_update(&nodes, &pods_by_node(&refs), b, &input());
        assert_eq!(
            r,
            Rolling {
                delete: vec!["p0".into()],
                create: vec!["n1".into()]
            }
        );
    }
}
