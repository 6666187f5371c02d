//! The scheduler's view of the cluster, fed by watches: nodes with their assigned pods (kept
//! as [`NodeInfo`]s, updated incrementally), pods assumed on a node until the binding shows
//! up in the watch (or fails and is forgotten), and the pending pods to schedule.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::snapshot::{NodeInfo, Snapshot};

/// A pod's `namespace/name`.
pub fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The node a pod is bound to, if any.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// What a pod event meant for scheduling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodChange {
    /// A pod this scheduler should place appeared or changed (`spec_changed`: more than its
    /// status).
    Pending {
        /// Whether more than its status changed.
        spec_changed: bool,
    },
    /// A pod is (now) bound to a node: seen bound for the first time, or its assumed binding
    /// confirmed.
    Assigned,
    /// An assigned pod left (freeing its node's resources).
    AssignedGone,
    /// A pending pod left or is no longer ours.
    PendingGone,
    /// Nothing the scheduler tracks.
    Ignored,
}

/// The scheduler's view of nodes and pods: bound pods count on their nodes, assumed bindings until confirmed, pending pods to place.
#[derive(Debug, Default)]
pub struct Cache {
    /// The nodes by name, kept up to date in place (no copy per decision).
    snapshot: Snapshot,
    /// Node name → index in `snapshot.nodes`.
    index: HashMap<String, usize>,
    /// Assigned (and assumed) pods by key.
    assigned: HashMap<String, Arc<Pod>>,
    assumed: HashSet<String>,
    /// Pods waiting for this scheduler, by key.
    pending: HashMap<String, Arc<Pod>>,
}

/// Whether this scheduler (`default-scheduler`) places `pod`.
fn ours(pod: &Pod) -> bool {
    let name = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
    name.is_none_or(|n| n.is_empty() || n == super::SCHEDULER_NAME)
}

impl Cache {
    fn node_mut(&mut self, name: &str) -> Option<&mut NodeInfo> {
        let i = *self.index.get(name)?;
        self.snapshot.nodes.get_mut(i)
    }

    fn reindex(&mut self) {
        self.index = self
            .snapshot
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name().to_string(), i))
            .collect();
    }

    fn place(&mut self, pod: &Arc<Pod>) {
        if let Some(info) = node_of(pod).and_then(|n| self.node_mut(n)) {
            info.add_pod(pod.clone());
        }
    }

    fn unplace(&mut self, pod: &Pod) {
        if let Some(info) = node_of(pod).and_then(|n| self.node_mut(n)) {
            info.remove_pod(pod.metadata.uid.as_deref().unwrap_or(""));
        }
    }

    /// A pod was added or modified.
    pub fn apply_pod(&mut self, pod: impl Into<Arc<Pod>>) -> PodChange {
        let pod: Arc<Pod> = pod.into();
        let key = key(&pod);
        if node_of(&pod).is_some() {
            self.pending.remove(&key);
            let was_assumed = self.assumed.remove(&key);
            let first = match self.assigned.insert(key, pod.clone()) {
                Some(old) => {
                    self.unplace(&old);
                    was_assumed
                }
                None => true,
            };
            self.place(&pod);
            return if first {
                PodChange::Assigned
            } else {
                PodChange::Ignored
            };
        }
        if self.assumed.contains(&key) {
            // The binding has not shown up yet; keep the assumption.
            return PodChange::Ignored;
        }
        // An unbound pod under the key of a bound one is another pod of that name (deleted
        // and created again while the watch was away): the bound one no longer counts.
        if let Some(old) = self.assigned.remove(&key) {
            self.unplace(&old);
        }
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded") | Some("Failed")
        );
        if !ours(&pod) || pod.metadata.deletion_timestamp.is_some() || finished {
            return match self.pending.remove(&key) {
                Some(_) => PodChange::PendingGone,
                None => PodChange::Ignored,
            };
        }
        let spec_changed = match self.pending.get(&key) {
            Some(old) => old.spec != pod.spec || old.metadata.labels != pod.metadata.labels,
            None => true,
        };
        self.pending.insert(key, pod);
        PodChange::Pending { spec_changed }
    }

    /// A pod was deleted.
    pub fn delete_pod(&mut self, pod: &Pod) -> PodChange {
        let key = key(pod);
        self.assumed.remove(&key);
        if let Some(old) = self.assigned.remove(&key) {
            self.unplace(&old);
            return PodChange::AssignedGone;
        }
        match self.pending.remove(&key) {
            Some(_) => PodChange::PendingGone,
            None => PodChange::Ignored,
        }
    }

    /// Every pod key the cache holds (to find what a relist no longer has).
    pub fn pod_keys(&self) -> Vec<String> {
        self.assigned
            .keys()
            .chain(self.pending.keys())
            .filter(|k| !self.assumed.contains(*k))
            .cloned()
            .collect()
    }

    /// The pod behind `key`, assigned or pending.
    pub fn pod(&self, key: &str) -> Option<&Arc<Pod>> {
        self.pending.get(key).or_else(|| self.assigned.get(key))
    }

    /// The pending pod behind `key`.
    pub fn pending(&self, key: &str) -> Option<&Arc<Pod>> {
        self.pending.get(key)
    }

    /// Counts `pod` on `node` before the binding is confirmed.
    pub fn assume(&mut self, key: &str, node: &str) {
        let Some(pod) = self.pending.remove(key) else {
            return;
        };
        let mut bound = (*pod).clone();
        bound.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
        let bound = Arc::new(bound);
        self.assumed.insert(key.to_string());
        if let Some(old) = self.assigned.insert(key.to_string(), bound.clone()) {
            self.unplace(&old);
        }
        self.place(&bound);
    }

    /// The binding failed: the pod is pending again (if still assumed).
    pub fn forget(&mut self, key: &str) {
        if !self.assumed.remove(key) {
            return;
        }
        if let Some(bound) = self.assigned.remove(key) {
            self.unplace(&bound);
            let mut pod = (*bound).clone();
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = None;
            }
            self.pending.insert(key.to_string(), Arc::new(pod));
        }
    }

    /// A node was added or modified; whether the change can make pods fit (new, or changed
    /// labels, taints, cordon or allocatable).
    pub fn apply_node(&mut self, node: impl Into<Arc<Node>>) -> bool {
        let node: Arc<Node> = node.into();
        let name = node.metadata.name.clone().unwrap_or_default();
        let relevant = |old: &Node, new: &Node| {
            old.metadata.labels != new.metadata.labels
                || old.spec != new.spec
                || old.status.as_ref().and_then(|s| s.allocatable.as_ref())
                    != new.status.as_ref().and_then(|s| s.allocatable.as_ref())
        };
        match self.node_mut(&name) {
            Some(info) => {
                let changed = relevant(&info.node, &node);
                let pods = std::mem::take(&mut info.pods);
                *info = NodeInfo::new(node);
                for p in pods {
                    info.add_pod(p);
                }
                changed
            }
            None => {
                let mut info = NodeInfo::new(node);
                for p in self.assigned.values() {
                    if node_of(p) == Some(name.as_str()) {
                        info.add_pod(p.clone());
                    }
                }
                let at = self
                    .snapshot
                    .nodes
                    .partition_point(|n| n.name() < name.as_str());
                self.snapshot.nodes.insert(at, info);
                self.reindex();
                true
            }
        }
    }

    /// A node was deleted.
    pub fn delete_node(&mut self, name: &str) {
        if let Some(i) = self.index.get(name) {
            self.snapshot.nodes.remove(*i);
            self.reindex();
        }
    }

    /// Names of every node the cache holds.
    pub fn node_names(&self) -> Vec<String> {
        self.index.keys().cloned().collect()
    }

    /// The nodes (by name) and their pods as of now.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"}}}))
        .unwrap()
    }
    fn pod(name: &str, node: Option<&str>) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": node, "schedulerName": "default-scheduler", "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}),
        )
        .unwrap()
    }
    fn used(c: &Cache, node: &str) -> i64 {
        let s = c.snapshot();
        s.nodes
            .iter()
            .find(|n| n.name() == node)
            .unwrap()
            .requested
            .milli_cpu
    }

    #[test]
    fn assume_confirm_and_forget() {
        let mut c = Cache::default();
        assert!(c.apply_node(node("a")));
        assert_eq!(
            c.apply_pod(pod("p", None)),
            PodChange::Pending { spec_changed: true }
        );
        assert_eq!(
            c.apply_pod(pod("p", None)),
            PodChange::Pending {
                spec_changed: false
            }
        );
        c.assume("ns/p", "a");
        assert_eq!(used(&c, "a"), 500);
        // A stale unbound update does not undo the assumption.
        assert_eq!(c.apply_pod(pod("p", None)), PodChange::Ignored);
        c.forget("ns/p");
        assert_eq!(used(&c, "a"), 0);
        assert!(c.pending("ns/p").is_some());
        c.assume("ns/p", "a");
        // The watch confirms the binding: counted once.
        assert_eq!(c.apply_pod(pod("p", Some("a"))), PodChange::Assigned);
        assert_eq!(used(&c, "a"), 500);
        c.forget("ns/p");
        assert_eq!(used(&c, "a"), 500);
        assert_eq!(c.delete_pod(&pod("p", Some("a"))), PodChange::AssignedGone);
        assert_eq!(used(&c, "a"), 0);
    }

    #[test]
    fn nodes_pick_up_pods_bound_before_they_appeared() {
        let mut c = Cache::default();
        c.apply_pod(pod("p", Some("late")));
        c.apply_node(node("late"));
        assert_eq!(used(&c, "late"), 500);
        // A heartbeat-like update without relevant change.
        assert!(!c.apply_node(node("late")));
        assert_eq!(used(&c, "late"), 500);
    }

    #[test]
    fn cordons_and_taints_follow_node_updates() {
        let mut c = Cache::default();
        c.apply_pod(pod("p", Some("a")));
        c.apply_node(node("a"));
        let info = |c: &Cache| c.snapshot().nodes[0].clone();
        assert!(!info(&c).unschedulable && info(&c).taints.is_empty());
        let mut cordoned = node("a");
        cordoned.spec = Some(
            serde_json::from_value(json!({"unschedulable": true,
            "taints": [{"key": "k", "effect": "NoSchedule"}]}))
            .unwrap(),
        );
        assert!(c.apply_node(cordoned));
        assert!(info(&c).unschedulable);
        assert_eq!(info(&c).taints[0].key, "k");
        assert_eq!(used(&c, "a"), 500, "its pods stay counted");
        let free = crate::filters::PodInfo::new(Arc::new(pod("q", None)));
        assert!(crate::filters::node_unschedulable(&free, &info(&c)).is_err());
        assert!(crate::filters::taint_toleration(&free, &info(&c)).is_err());
        assert!(c.apply_node(node("a")));
        assert!(!info(&c).unschedulable && info(&c).taints.is_empty());
        assert!(crate::filters::node_unschedulable(&free, &info(&c)).is_ok());
        assert!(crate::filters::taint_toleration(&free, &info(&c)).is_ok());
    }

    #[test]
    fn other_schedulers_pods_are_ignored() {
        let mut c = Cache::default();
        let mut p = pod("p", None);
        p.spec.as_mut().unwrap().scheduler_name = Some("other".into());
        assert_eq!(c.apply_pod(p), PodChange::Ignored);
    }

    /// What a decision reads of one node, in a comparable form.
    fn summary(n: &NodeInfo) -> impl PartialEq + std::fmt::Debug {
        let uids = |pods: &[Arc<Pod>]| {
            let mut v: Vec<String> = pods.iter().map(|p| cache_uid(p)).collect();
            v.sort();
            v
        };
        (
            n.name().to_string(),
            n.node.metadata.labels.clone(),
            (n.unschedulable, n.taints.clone()),
            uids(&n.pods),
            uids(&n.with_affinity),
            uids(&n.with_required_anti_affinity),
            n.allocatable.clone(),
            n.requested.clone(),
            n.non_zero_requested.clone(),
            n.used_ports.clone(),
        )
    }
    fn cache_uid(p: &Pod) -> String {
        p.metadata.uid.clone().unwrap_or_default()
    }

    #[test]
    fn incremental_snapshot_equals_a_full_rebuild() {
        // A generated sequence (fixed linear congruential numbers) of node adds, updates and
        // deletes, pod adds, bindings, assumptions, forgets and deletes; after every step the
        // NodeInfos kept up to date in place equal a snapshot rebuilt from the nodes and the
        // cache's assigned pods.
        let mut c = Cache::default();
        let mut nodes: std::collections::BTreeMap<String, Node> = Default::default();
        let mut x: u64 = 11;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for step in 0..3_000 {
            let n = format!("n{}", next(8));
            let p = format!("p{}", next(40));
            match next(10) {
                0 => {
                    let mut v = node(&n);
                    v.metadata.labels = Some([("zone".to_string(), next(3).to_string())].into());
                    nodes.insert(n.clone(), v.clone());
                    c.apply_node(v);
                }
                1 => {
                    nodes.remove(&n);
                    c.delete_node(&n);
                }
                2 | 3 => {
                    let mut v = pod(&p, None);
                    let spec = v.spec.as_mut().unwrap();
                    if next(3) == 0 {
                        spec.containers[0].ports = Some(vec![serde_json::from_value(
                            json!({"containerPort": 80, "hostPort": 8000 + next(2)}),
                        )
                        .unwrap()]);
                    }
                    if next(4) == 0 {
                        spec.affinity = Some(
                            serde_json::from_value(json!({"podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {"topologyKey": "zone", "labelSelector": {}}]}}))
                            .unwrap(),
                        );
                    }
                    c.apply_pod(v);
                }
                4 => {
                    let bound_to = c
                        .pod(&format!("ns/{p}"))
                        .and_then(|v| node_of(v).map(str::to_string));
                    let mut v = (*c
                        .pod(&format!("ns/{p}"))
                        .cloned()
                        .unwrap_or_else(|| Arc::new(pod(&p, None))))
                    .clone();
                    v.spec.as_mut().unwrap().node_name = Some(bound_to.unwrap_or(n));
                    c.apply_pod(v);
                }
                5 => c.assume(&format!("ns/{p}"), &n),
                6 => c.forget(&format!("ns/{p}")),
                7 => {
                    if let Some(v) = c.pod(&format!("ns/{p}")).cloned() {
                        c.delete_pod(&v);
                    }
                }
                _ => {
                    // A status-only update of a node (a heartbeat).
                    if let Some(v) = nodes.get(&n) {
                        c.apply_node(v.clone());
                    }
                }
            }
            let rebuilt = Snapshot::new(nodes.values().cloned().map(Arc::new), c.assigned.values());
            let got: Vec<_> = c.snapshot().nodes.iter().map(summary).collect();
            let want: Vec<_> = rebuilt.nodes.iter().map(summary).collect();
            assert_eq!(got, want, "after step {step}");
            assert_eq!(c.node_names().len(), nodes.len());
        }
    }
}
