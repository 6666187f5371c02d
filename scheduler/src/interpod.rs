//! InterPodAffinity: required pod affinity and anti-affinity of the incoming pod, and the
//! required anti-affinity of the pods already placed (upstream's PreFilter counts per
//! topology pair, then a per-node check), plus the preferred terms' score.
//!
//! Namespaces of a term: its `namespaces`, or the owning pod's namespace when empty; an empty
//! `namespaceSelector` (`{}`) selects every namespace. Label-based namespace selectors are not
//! evaluated (the scheduler does not watch namespaces) and select none beyond `namespaces`.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};

use super::filters::{PodInfo, Rejection};
use super::snapshot::{NodeInfo, Snapshot};
use k3rs_apimachinery::scheduling::label_selector_matches;

/// InterPodAffinity's reason for unmet affinity.
pub const ERR_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// InterPodAffinity's reason for unmet anti-affinity.
pub const ERR_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// InterPodAffinity's reason for an existing pod's anti-affinity.
pub const ERR_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

type TopologyPair = (String, String);

/// Whether `term` (written on a pod in `owner_ns`) selects `pod`.
pub fn term_matches(term: &PodAffinityTerm, owner_ns: &str, pod: &Pod) -> bool {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let listed = term.namespaces.as_deref().unwrap_or_default();
    let all_namespaces = term
        .namespace_selector
        .as_ref()
        .is_some_and(|s| s.match_labels.is_none() && s.match_expressions.is_none());
    let ns_ok = all_namespaces
        || if listed.is_empty() && term.namespace_selector.is_none() {
            ns == owner_ns
        } else {
            listed.iter().any(|n| n == ns)
        };
    static EMPTY: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    ns_ok
        && label_selector_matches(
            term.label_selector.as_ref(),
            pod.metadata.labels.as_ref().unwrap_or(&EMPTY),
        )
}

fn pod_ns(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn affinity_terms(pod: &Pod) -> &[PodAffinityTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// The required anti-affinity terms of `pod`.
pub fn anti_affinity_terms(pod: &Pod) -> &[PodAffinityTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

fn preferred(pod: &Pod) -> (&[WeightedPodAffinityTerm], &[WeightedPodAffinityTerm]) {
    let a = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let aff = a.and_then(|a| a.pod_affinity.as_ref()).and_then(|a| {
        a.preferred_during_scheduling_ignored_during_execution
            .as_deref()
    });
    let anti = a.and_then(|a| a.pod_anti_affinity.as_ref()).and_then(|a| {
        a.preferred_during_scheduling_ignored_during_execution
            .as_deref()
    });
    (aff.unwrap_or_default(), anti.unwrap_or_default())
}

fn pair(node: &NodeInfo, key: &str) -> Option<TopologyPair> {
    node.labels().get(key).map(|v| (key.to_string(), v.clone()))
}

/// The counts the required checks need, computed once per pod over the whole cluster.
#[derive(Debug, Default)]
pub struct PreFilter {
    /// Pairs where a placed pod's anti-affinity term selects the incoming pod.
    existing_anti: HashMap<TopologyPair, i64>,
    /// Pairs where the incoming pod's anti-affinity terms select a placed pod.
    anti: HashMap<TopologyPair, i64>,
    /// Pairs where a placed pod matches all the incoming pod's affinity terms.
    affinity: HashMap<TopologyPair, i64>,
}

impl PreFilter {
    /// The pod's affinity terms and the existing pods' counts per topology pair.
    pub fn new(pod: &PodInfo, snapshot: &Snapshot) -> PreFilter {
        let me = &pod.pod;
        let (aff, anti) = (affinity_terms(me), anti_affinity_terms(me));
        let mut s = PreFilter::default();
        for (node, other) in snapshot.pods_with_required_anti_affinity() {
            for t in anti_affinity_terms(other) {
                if term_matches(t, pod_ns(other), me) {
                    if let Some(p) = pair(node, &t.topology_key) {
                        *s.existing_anti.entry(p).or_default() += 1;
                    }
                }
            }
        }
        if aff.is_empty() && anti.is_empty() {
            return s;
        }
        for (node, other) in snapshot.pods() {
            for t in anti {
                if term_matches(t, pod.namespace(), other) {
                    if let Some(p) = pair(node, &t.topology_key) {
                        *s.anti.entry(p).or_default() += 1;
                    }
                }
            }
            if !aff.is_empty() && aff.iter().all(|t| term_matches(t, pod.namespace(), other)) {
                for t in aff {
                    if let Some(p) = pair(node, &t.topology_key) {
                        *s.affinity.entry(p).or_default() += 1;
                    }
                }
            }
        }
        s
    }

    /// The per-node check, in upstream's order: the pod's affinity (unresolvable by
    /// preemption), the pod's anti-affinity, then the placed pods' anti-affinity.
    pub fn filter(&self, pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection> {
        let me = &pod.pod;
        let aff = affinity_terms(me);
        let mut pods_exist = true;
        for t in aff {
            match pair(node, &t.topology_key) {
                None => return Err(Rejection::unresolvable(ERR_AFFINITY)),
                Some(p) => {
                    if self.affinity.get(&p).copied().unwrap_or(0) <= 0 {
                        pods_exist = false;
                    }
                }
            }
        }
        if !pods_exist {
            // The first pod of a group with affinity to itself may go anywhere with the keys.
            let self_match = aff.iter().all(|t| term_matches(t, pod.namespace(), me));
            if !(self.affinity.is_empty() && self_match) {
                return Err(Rejection::unresolvable(ERR_AFFINITY));
            }
        }
        for t in anti_affinity_terms(me) {
            if pair(node, &t.topology_key)
                .is_some_and(|p| self.anti.get(&p).is_some_and(|c| *c > 0))
            {
                return Err(Rejection::unschedulable(ERR_ANTI_AFFINITY));
            }
        }
        let hit = |m: &HashMap<TopologyPair, i64>| {
            node.labels()
                .iter()
                .any(|(k, v)| m.get(&(k.clone(), v.clone())).is_some_and(|c| *c > 0))
        };
        if !self.existing_anti.is_empty() && hit(&self.existing_anti) {
            return Err(Rejection::unschedulable(ERR_EXISTING_ANTI_AFFINITY));
        }
        Ok(())
    }
}

/// Preferred inter-pod affinity, before normalization: for each placed pod, the weights of the
/// incoming pod's preferred terms selecting it (anti-affinity subtracts), plus the weights of
/// the placed pod's preferred terms selecting the incoming pod, counted on every node sharing
/// the term's topology pair (upstream adds the placed pods' *required* affinity terms with
/// `hardPodAffinityWeight` 1 too). Returns one raw score per node of the snapshot.
pub fn preferred_scores(pod: &PodInfo, snapshot: &Snapshot) -> Vec<i64> {
    let me = &pod.pod;
    let (aff, anti) = preferred(me);
    let mut by_pair: HashMap<TopologyPair, i64> = HashMap::new();
    // Without preferred terms of its own, only the placed pods with terms can score.
    let every_pod = !aff.is_empty() || !anti.is_empty();
    let others: Box<dyn Iterator<Item = (&NodeInfo, &Arc<Pod>)>> = if every_pod {
        Box::new(snapshot.pods())
    } else {
        Box::new(snapshot.pods_with_affinity())
    };
    for (node, other) in others {
        let mut add = |key: &str, w: i64| {
            if let Some(p) = pair(node, key) {
                *by_pair.entry(p).or_default() += w;
            }
        };
        for t in aff {
            if term_matches(&t.pod_affinity_term, pod.namespace(), other) {
                add(&t.pod_affinity_term.topology_key, i64::from(t.weight));
            }
        }
        for t in anti {
            if term_matches(&t.pod_affinity_term, pod.namespace(), other) {
                add(&t.pod_affinity_term.topology_key, -i64::from(t.weight));
            }
        }
        for t in affinity_terms(other) {
            if term_matches(t, pod_ns(other), me) {
                add(&t.topology_key, 1);
            }
        }
        let (their_aff, their_anti) = preferred(other);
        for t in their_aff {
            if term_matches(&t.pod_affinity_term, pod_ns(other), me) {
                add(&t.pod_affinity_term.topology_key, i64::from(t.weight));
            }
        }
        for t in their_anti {
            if term_matches(&t.pod_affinity_term, pod_ns(other), me) {
                add(&t.pod_affinity_term.topology_key, -i64::from(t.weight));
            }
        }
    }
    snapshot
        .nodes
        .iter()
        .map(|n| {
            n.labels()
                .iter()
                .filter_map(|(k, v)| by_pair.get(&(k.clone(), v.clone())))
                .sum()
        })
        .collect()
}

/// Upstream's normalization of the preferred score: `100 * (s - min) / (max - min)` over
/// the scored nodes, 0 when all are equal.
pub fn normalize(scores: &mut [i64]) {
    let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
        return;
    };
    let diff = max - min;
    for s in scores.iter_mut() {
        *s = if diff > 0 { 100 * (*s - min) / diff } else { 0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::sync::Arc;

    fn node(name: &str, zone: &str) -> Arc<k8s_openapi::api::core::v1::Node> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name,
                "labels": {"kubernetes.io/hostname": name, "zone": zone}}}))
            .unwrap(),
        )
    }
    fn pod(name: &str, node: &str, labels: Value, affinity: Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                "labels": labels}, "spec": {"nodeName": node, "containers": [], "affinity": affinity}}))
            .unwrap(),
        )
    }
    fn term(key: &str, app: &str) -> Value {
        json!({"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}})
    }
    fn snapshot(pods: &[Arc<Pod>]) -> Snapshot {
        Snapshot::new(
            vec![node("a", "z1"), node("b", "z1"), node("c", "z2")],
            pods.iter(),
        )
    }
    fn results(p: &PodInfo, s: &Snapshot) -> Vec<Result<(), Rejection>> {
        let pre = PreFilter::new(p, s);
        s.nodes.iter().map(|n| pre.filter(p, n)).collect()
    }

    #[test]
    fn anti_affinity_by_hostname_and_zone() {
        let s = snapshot(&[pod("web-1", "a", json!({"app": "web"}), json!({}))]);
        let by_host = PodInfo::new(pod(
            "web-2",
            "",
            json!({"app": "web"}),
            json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term("kubernetes.io/hostname", "web")]}}),
        ));
        let err = Err(Rejection::unschedulable(ERR_ANTI_AFFINITY));
        assert_eq!(results(&by_host, &s), vec![err.clone(), Ok(()), Ok(())]);
        let by_zone = PodInfo::new(pod(
            "web-2",
            "",
            json!({"app": "web"}),
            json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term("zone", "web")]}}),
        ));
        assert_eq!(results(&by_zone, &s), vec![err.clone(), err, Ok(())]);
    }

    #[test]
    fn existing_pods_anti_affinity_keeps_others_away() {
        let s = snapshot(&[pod(
            "db",
            "c",
            json!({"app": "db"}),
            json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term("zone", "web")]}}),
        )]);
        let web = PodInfo::new(pod("web", "", json!({"app": "web"}), json!({})));
        assert_eq!(
            results(&web, &s),
            vec![
                Ok(()),
                Ok(()),
                Err(Rejection::unschedulable(ERR_EXISTING_ANTI_AFFINITY))
            ]
        );
    }

    #[test]
    fn the_pods_own_anti_affinity_is_reported_before_the_placed_pods() {
        // Both sides' terms reject node a: upstream checks the incoming pod's terms first.
        let anti = json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term("kubernetes.io/hostname", "web")]}});
        let s = snapshot(&[pod("web-1", "a", json!({"app": "web"}), anti.clone())]);
        let web = PodInfo::new(pod("web-2", "", json!({"app": "web"}), anti));
        assert_eq!(
            results(&web, &s),
            vec![
                Err(Rejection::unschedulable(ERR_ANTI_AFFINITY)),
                Ok(()),
                Ok(())
            ]
        );
    }

    #[test]
    fn affinity_follows_matching_pods_or_lets_the_first_self_matching_pod_anywhere() {
        let aff = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("zone", "cache")]}});
        let p = PodInfo::new(pod("web", "", json!({"app": "web"}), aff.clone()));
        let s = snapshot(&[pod("cache", "c", json!({"app": "cache"}), json!({}))]);
        let err = Err(Rejection::unresolvable(ERR_AFFINITY));
        assert_eq!(results(&p, &s), vec![err.clone(), err.clone(), Ok(())]);
        // No cache pod anywhere and the pod does not match its own term: nowhere.
        assert_eq!(
            results(&p, &snapshot(&[])),
            vec![err.clone(), err.clone(), err]
        );
        let first = PodInfo::new(pod("cache-1", "", json!({"app": "cache"}), aff));
        assert_eq!(
            results(&first, &snapshot(&[])),
            vec![Ok(()), Ok(()), Ok(())]
        );
    }

    #[test]
    fn preferred_scores_and_normalization() {
        let s = snapshot(&[
            pod("cache", "c", json!({"app": "cache"}), json!({})),
            pod("web-1", "a", json!({"app": "web"}), json!({})),
        ]);
        let p = PodInfo::new(pod(
            "web-2",
            "",
            json!({"app": "web"}),
            json!({
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term("zone", "cache")}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "podAffinityTerm": term("kubernetes.io/hostname", "web")}]}}),
        ));
        // a: web-1 on a (hostname a): -5; b: 0; c: cache in zone z2: +10.
        let mut raw = preferred_scores(&p, &s);
        assert_eq!(raw, vec![-5, 0, 10]);
        normalize(&mut raw);
        // 100*(s+5)/15: 0, 33, 100.
        assert_eq!(raw, vec![0, 33, 100]);
    }
}
