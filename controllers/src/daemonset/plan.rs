//! The DaemonSet controller's per-node decisions, without I/O (upstream's `manage`,
//! `podsShouldBeOnNode`, `getUnscheduledPodsWithoutNode` and `updateDaemonSetStatus`): which
//! nodes need a daemon pod, which pods go (on nodes that no longer qualify, failed or
//! finished ones, surplus ones — the oldest stays), and the status counts.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSetStatus;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::eligibility::{is_updated, target_node, Eligibility, REVISION_LABEL};
use crate::pods;

/// A node as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFit {
    pub name: String,
    pub fit: Eligibility,
}

/// The daemon pods by the node they are for (upstream's `getNodesToDaemonPods`): pods that
/// are both finished and being deleted no longer count; pods with no target node are left out.
pub fn pods_by_node<'a>(pods: &[&'a Pod]) -> BTreeMap<String, Vec<&'a Pod>> {
    let mut by_node: BTreeMap<String, Vec<&'a Pod>> = BTreeMap::new();
    for pod in pods {
        if is_terminal(pod) && pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(node) = target_node(pod) {
            by_node.entry(node).or_default().push(pod);
        }
    }
    by_node
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

fn bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// Upstream's `podByCreationTimestampAndPhase`: bound pods first, then oldest, then by name.
pub fn oldest_first(a: &Pod, b: &Pod) -> Ordering {
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    bound(b)
        .cmp(&bound(a))
        .then_with(|| created(a).cmp(&created(b)))
        .then_with(|| name(a).cmp(name(b)))
}

/// A finished daemon pod the controller deletes (and reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub pod: String,
    pub node: String,
    /// Succeeded rather than Failed.
    pub succeeded: bool,
}

/// What one pass over the nodes decides.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Manage {
    /// Nodes that need a daemon pod.
    pub create: Vec<String>,
    /// Pods to delete (including the `finished` ones).
    pub delete: Vec<String>,
    /// Finished pods among `delete`.
    pub finished: Vec<Finished>,
    /// Nodes whose failed pod waits for the failed-pod backoff.
    pub backing_off: Vec<String>,
}

/// What `manage` reads besides the nodes and pods.
pub struct ManageInput<'a> {
    pub hash: &'a str,
    /// The rolling update may surge (maxSurge > 0): two pods on a node are allowed.
    pub surge: bool,
    pub min_ready_seconds: i32,
    pub now: Timestamp,
    /// Whether deleting a failed pod on this node is held back by the backoff.
    pub in_backoff: &'a dyn Fn(&str) -> bool,
}

/// Upstream's `manage` decision over every node (`nodes`) and the daemon pods by node.
pub fn manage(
    nodes: &[NodeFit],
    by_node: &BTreeMap<String, Vec<&Pod>>,
    input: &ManageInput,
) -> Manage {
    let mut m = Manage::default();
    for node in nodes {
        pods_should_be_on_node(node, by_node.get(&node.name), input, &mut m);
    }
    // Pods for nodes that do not exist and were never bound: nothing will ever run them.
    for (node, pods) in by_node {
        if nodes.iter().any(|n| &n.name == node) {
            continue;
        }
        m.delete.extend(
            pods.iter()
                .filter(|p| !bound(p))
                .map(|p| name(p).to_string()),
        );
    }
    m
}

fn pods_should_be_on_node(
    node: &NodeFit,
    pods: Option<&Vec<&Pod>>,
    input: &ManageInput,
    m: &mut Manage,
) {
    let fit = node.fit;
    match pods {
        None if fit.should_run => m.create.push(node.name.clone()),
        Some(pods) if fit.should_continue_running => {
            let mut running: Vec<&Pod> = Vec::new();
            for pod in pods {
                if pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                match phase(pod) {
                    "Failed" if (input.in_backoff)(&node.name) => {
                        m.backing_off.push(node.name.clone());
                    }
                    p @ ("Failed" | "Succeeded") => {
                        m.finished.push(Finished {
                            pod: name(pod).to_string(),
                            node: node.name.clone(),
                            succeeded: p == "Succeeded",
                        });
                        m.delete.push(name(pod).to_string());
                    }
                    _ => running.push(pod),
                }
            }
            if running.len() <= 1 {
                return;
            }
            running.sort_by(|a, b| oldest_first(a, b));
            if !input.surge {
                m.delete
                    .extend(running[1..].iter().map(|p| name(p).to_string()));
                return;
            }
            // Surging: one old and one new pod may coexist while the new one is not yet
            // available and the old one still ready; everything else goes.
            let (mut oldest_new, mut oldest_old) = (None, None);
            for pod in &running {
                let current = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(REVISION_LABEL))
                    .is_some_and(|h| h == input.hash);
                let slot = if current {
                    &mut oldest_new
                } else {
                    &mut oldest_old
                };
                if slot.is_none() {
                    *slot = Some(*pod);
                } else {
                    m.delete.push(name(pod).to_string());
                }
            }
            if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
                if !pods::is_ready(old)
                    || pods::is_available(new, input.min_ready_seconds, input.now)
                {
                    m.delete.push(name(old).to_string());
                }
            }
        }
        Some(pods) if !fit.should_continue_running => m.delete.extend(
            pods.iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| name(p).to_string()),
        ),
        _ => {}
    }
}

/// What the status reads besides the nodes and pods.
pub struct StatusInput<'a> {
    pub old: &'a DaemonSetStatus,
    /// The DaemonSet's `metadata.generation`.
    pub generation: Option<i64>,
    pub hash: &'a str,
    pub template_generation: Option<i64>,
    pub min_ready_seconds: i32,
    pub now: Timestamp,
}

/// Upstream's `updateDaemonSetStatus` counts (the oldest pod of a node stands for it);
/// `collisionCount` and conditions are kept.
pub fn status(
    nodes: &[NodeFit],
    by_node: &BTreeMap<String, Vec<&Pod>>,
    input: &StatusInput,
) -> DaemonSetStatus {
    let StatusInput {
        old,
        generation,
        hash,
        template_generation,
        min_ready_seconds,
        now,
    } = *input;
    let mut s = DaemonSetStatus {
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        observed_generation: generation,
        ..DaemonSetStatus::default()
    };
    let (mut updated, mut available) = (0, 0);
    for node in nodes {
        let pods = by_node.get(&node.name).filter(|p| !p.is_empty());
        if !node.fit.should_run {
            if pods.is_some() {
                s.number_misscheduled += 1;
            }
            continue;
        }
        s.desired_number_scheduled += 1;
        let Some(pods) = pods else { continue };
        s.current_number_scheduled += 1;
        let pod = pods
            .iter()
            .min_by(|a, b| oldest_first(a, b))
            .expect("non-empty");
        if pods::is_ready(pod) {
            s.number_ready += 1;
            if pods::is_available(pod, min_ready_seconds, now) {
                available += 1;
            }
        }
        if is_updated(pod, hash, template_generation) {
            updated += 1;
        }
    }
    s.number_available = Some(available);
    s.number_unavailable = Some(s.desired_number_scheduled - available);
    s.updated_number_scheduled = Some(updated);
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    /// A daemon pod for `node` created at `created`; `phase` "Pending" leaves it unbound.
    pub(crate) fn pod(name: &str, node: &str, hash: &str, phase: &str, ready: bool) -> Pod {
        pod_at(name, node, hash, phase, ready, 0)
    }

    pub(crate) fn pod_at(
        name: &str,
        node: &str,
        hash: &str,
        phase: &str,
        ready: bool,
        created: i64,
    ) -> Pod {
        let node_name = if phase == "Pending" { "" } else { node };
        let conditions = if ready {
            json!([{"type": "Ready", "status": "True", "lastTransitionTime": t(0).to_string()}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {REVISION_LABEL: hash},
                "creationTimestamp": t(created).to_string()},
            "spec": {"containers": [], "nodeName": node_name,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}},
            "status": {"phase": phase, "conditions": conditions}
        }))
        .unwrap()
    }

    pub(crate) fn fit(name: &str, should_run: bool, should_continue_running: bool) -> NodeFit {
        NodeFit {
            name: name.into(),
            fit: Eligibility {
                should_run,
                should_continue_running,
            },
        }
    }

    fn input<'a>(surge: bool, in_backoff: &'a dyn Fn(&str) -> bool) -> ManageInput<'a> {
        ManageInput {
            hash: "new",
            surge,
            min_ready_seconds: 0,
            now: t(100),
            in_backoff,
        }
    }

    fn no_backoff(_: &str) -> bool {
        false
    }

    #[test]
    fn creates_on_eligible_nodes_and_deletes_where_it_may_not_stay() {
        let a = pod("a", "n2", "new", "Running", true);
        let b = pod("b", "n3", "new", "Running", true);
        let c = pod("c", "n4", "new", "Running", true);
        let lost = pod("lost", "gone", "new", "Pending", false);
        let bound_lost = pod("bound-lost", "gone2", "new", "Running", true);
        let all = [&a, &b, &c, &lost, &bound_lost];
        let nodes = [
            fit("n1", true, true),
            fit("n2", true, true),
            // Tainted NoSchedule: no new pod, the old one stays.
            fit("n3", false, true),
            // No longer selected.
            fit("n4", false, false),
            fit("n5", false, false),
        ];
        let m = manage(&nodes, &pods_by_node(&all), &input(false, &no_backoff));
        assert_eq!(
            m,
            Manage {
                create: vec!["n1".into()],
                // Bound pods on deleted nodes are the pod GC's.
                delete: vec!["c".into(), "lost".into()],
                ..Manage::default()
            }
        );
    }

    #[test]
    fn surplus_pods_go_and_the_oldest_stays() {
        let young = pod_at("young", "n1", "new", "Running", true, 50);
        let old = pod_at("old", "n1", "new", "Running", true, 10);
        let unbound = pod_at("unbound", "n1", "new", "Pending", false, 0);
        let all = [&young, &old, &unbound];
        let m = manage(
            &[fit("n1", true, true)],
            &pods_by_node(&all),
            &input(false, &no_backoff),
        );
        assert_eq!(m.delete, ["young", "unbound"]);
        assert!(m.create.is_empty());
    }

    #[test]
    fn failed_pods_are_deleted_unless_backing_off_and_succeeded_ones_too() {
        let failed = pod("failed", "n1", "new", "Failed", false);
        let done = pod("done", "n2", "new", "Succeeded", false);
        let all = [&failed, &done];
        let nodes = [fit("n1", true, true), fit("n2", true, true)];
        let m = manage(&nodes, &pods_by_node(&all), &input(false, &no_backoff));
        assert_eq!(m.delete, ["failed", "done"]);
        assert_eq!(
            m.finished,
            [
                Finished {
                    pod: "failed".into(),
                    node: "n1".into(),
                    succeeded: false
                },
                Finished {
                    pod: "done".into(),
                    node: "n2".into(),
                    succeeded: true
                }
            ]
        );
        let backoff = |n: &str| n == "n1";
        let m = manage(&nodes, &pods_by_node(&all), &input(false, &backoff));
        assert_eq!(m.delete, ["done"]);
        assert_eq!(m.backing_off, ["n1"]);
    }

    #[test]
    fn surging_keeps_a_ready_old_pod_until_the_new_one_is_available() {
        let old = pod_at("old", "n1", "old", "Running", true, 0);
        let new = pod_at("new", "n1", "new", "Running", false, 10);
        let extra = pod_at("extra", "n1", "new", "Running", false, 20);
        let all = [&old, &new, &extra];
        let nodes = [fit("n1", true, true)];
        let m = manage(&nodes, &pods_by_node(&all), &input(true, &no_backoff));
        assert_eq!(m.delete, ["extra"]);
        let ready_new = pod_at("new", "n1", "new", "Running", true, 10);
        let all = [&old, &ready_new];
        let m = manage(&nodes, &pods_by_node(&all), &input(true, &no_backoff));
        assert_eq!(m.delete, ["old"]);
        // Without surge the oldest stays, whatever its revision.
        let m = manage(&nodes, &pods_by_node(&all), &input(false, &no_backoff));
        assert_eq!(m.delete, ["new"]);
    }

    #[test]
    fn status_counts_desired_scheduled_misscheduled_ready_available_updated() {
        let a = pod("a", "n1", "new", "Running", true);
        let b = pod("b", "n2", "old", "Running", true);
        let c = pod("c", "n3", "new", "Running", false);
        let d = pod("d", "n4", "new", "Running", true);
        let all = [&a, &b, &c, &d];
        let nodes = [
            fit("n1", true, true),
            fit("n2", true, true),
            fit("n3", true, true),
            fit("n4", false, true),
            fit("n5", true, true),
        ];
        let old = DaemonSetStatus {
            collision_count: Some(2),
            ..DaemonSetStatus::default()
        };
        let input = |min_ready_seconds| StatusInput {
            old: &old,
            generation: Some(4),
            hash: "new",
            template_generation: None,
            min_ready_seconds,
            now: t(100),
        };
        let s = status(&nodes, &pods_by_node(&all), &input(0));
        assert_eq!(
            s,
            DaemonSetStatus {
                collision_count: Some(2),
                conditions: None,
                current_number_scheduled: 3,
                desired_number_scheduled: 4,
                number_available: Some(2),
                number_misscheduled: 1,
                number_ready: 2,
                number_unavailable: Some(2),
                observed_generation: Some(4),
                updated_number_scheduled: Some(2),
            }
        );
        // minReadySeconds: ready since t(0), not yet available at t(100) with 200 s.
        let s = status(&nodes, &pods_by_node(&all), &input(200));
        assert_eq!(s.number_available, Some(0));
        assert_eq!(s.number_unavailable, Some(4));
    }
}
