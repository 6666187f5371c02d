//! PodTopologySpread: `DoNotSchedule` constraints as a filter (skew = matching pods in the
//! node's domain + the pod itself − the global minimum ≤ maxSkew; `minDomains`), and
//! `ScheduleAnyway` constraints as a score (fewer matching pods in the domain scores higher,
//! weighted by log(domains + 2)). Counted: pods in the pod's namespace matching the
//! constraint's selector (plus `matchLabelKeys`), not terminating, on nodes that have every
//! constraint's key and — by the default policies — match the pod's node affinity/selector
//! (`nodeAffinityPolicy: Honor`) whatever their taints (`nodeTaintsPolicy: Ignore`).
//!
//! Upstream's cluster-level default constraints (derived from the pod's Services and
//! controllers) are not applied: pods without constraints are not spread by this plugin.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};

use super::filters::{self, PodInfo, Rejection};
use super::scores::MAX_NODE_SCORE;
use super::snapshot::{NodeInfo, Snapshot};
use k3rs_apimachinery::scheduling::label_selector_matches;

/// PodTopologySpread's reason for a node without the topology label.
pub const ERR_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
/// PodTopologySpread's reason for a skew too large.
pub const ERR_CONSTRAINTS: &str = "node(s) didn't match pod topology spread constraints";

const HOSTNAME: &str = "kubernetes.io/hostname";

fn constraints<'a>(pod: &'a Pod, when: &str) -> Vec<&'a TopologySpreadConstraint> {
    pod.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|c| c.when_unsatisfiable == when)
        .collect()
}

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

/// Whether `other` counts for `c` of `pod`: same namespace, selector (with `matchLabelKeys`
/// taken from `pod`'s labels), not terminating.
fn counts(c: &TopologySpreadConstraint, pod: &Pod, other: &Pod) -> bool {
    if other.metadata.deletion_timestamp.is_some()
        || other.metadata.namespace != pod.metadata.namespace
    {
        return false;
    }
    let labels = other.metadata.labels.as_ref().unwrap_or(&EMPTY);
    let mine = pod.metadata.labels.as_ref().unwrap_or(&EMPTY);
    let keys_ok = c
        .match_label_keys
        .iter()
        .flatten()
        .all(|k| mine.get(k).is_none_or(|v| labels.get(k) == Some(v)));
    keys_ok && label_selector_matches(c.label_selector.as_ref(), labels)
}

/// Whether a node's pods count for `c` (policy defaults: honor node affinity, ignore taints).
fn eligible(c: &TopologySpreadConstraint, pod: &PodInfo, node: &NodeInfo) -> bool {
    let affinity_ok = c.node_affinity_policy.as_deref() == Some("Ignore")
        || filters::node_affinity(pod, node).is_ok();
    let taints_ok = c.node_taints_policy.as_deref() != Some("Honor")
        || filters::taint_toleration(pod, node).is_ok();
    affinity_ok && taints_ok
}

fn has_keys(cs: &[&TopologySpreadConstraint], node: &NodeInfo) -> bool {
    cs.iter()
        .all(|c| node.labels().contains_key(&c.topology_key))
}

/// The `DoNotSchedule` counts, computed once per pod.
#[derive(Debug, Default)]
pub struct PreFilter {
    /// Per constraint: its maxSkew, the global minimum, the counts per domain, and whether
    /// the pod itself matches.
    constraints: Vec<(TopologySpreadConstraint, i64, HashMap<String, i64>, i64)>,
}

impl PreFilter {
    /// The pod's constraints with the matching pods' counts per topology domain.
    pub fn new(pod: &PodInfo, snapshot: &Snapshot) -> PreFilter {
        let cs = constraints(&pod.pod, "DoNotSchedule");
        if cs.is_empty() {
            return PreFilter::default();
        }
        let mut out = Vec::new();
        for c in &cs {
            let mut domains: HashMap<String, i64> = HashMap::new();
            for node in &snapshot.nodes {
                if !has_keys(&cs, node) || !eligible(c, pod, node) {
                    continue;
                }
                let n = node.pods.iter().filter(|p| counts(c, &pod.pod, p)).count() as i64;
                *domains
                    .entry(node.labels()[&c.topology_key].clone())
                    .or_default() += n;
            }
            let mut min = domains.values().copied().min().unwrap_or(0);
            if (domains.len() as i32) < c.min_domains.unwrap_or(1) {
                min = 0;
            }
            let labels = pod.pod.metadata.labels.as_ref().unwrap_or(&EMPTY);
            let self_match = i64::from(label_selector_matches(c.label_selector.as_ref(), labels));
            out.push(((*c).clone(), min, domains, self_match));
        }
        PreFilter { constraints: out }
    }

    /// Whether placing the pod on `node` keeps every `DoNotSchedule` constraint's skew.
    pub fn filter(&self, node: &NodeInfo) -> Result<(), Rejection> {
        for (c, _, _, _) in &self.constraints {
            if !node.labels().contains_key(&c.topology_key) {
                return Err(Rejection::unresolvable(ERR_MISSING_LABEL));
            }
        }
        for (c, min, domains, self_match) in &self.constraints {
            let value = &node.labels()[&c.topology_key];
            let matching = domains.get(value).copied().unwrap_or(0);
            if matching + self_match - min > i64::from(c.max_skew) {
                return Err(Rejection::unschedulable(ERR_CONSTRAINTS));
            }
        }
        Ok(())
    }
}

/// The normalized `ScheduleAnyway` score per feasible node (indices into `snapshot.nodes`);
/// all 0 without such constraints.
pub fn scores(pod: &PodInfo, snapshot: &Snapshot, feasible: &[usize]) -> Vec<i64> {
    let cs = constraints(&pod.pod, "ScheduleAnyway");
    if cs.is_empty() {
        return vec![0; feasible.len()];
    }
    let nodes: Vec<&NodeInfo> = feasible.iter().map(|i| &snapshot.nodes[*i]).collect();
    let ignored: Vec<bool> = nodes.iter().map(|n| !has_keys(&cs, n)).collect();
    let scored_names: HashSet<&str> = nodes
        .iter()
        .zip(&ignored)
        .filter(|(_, i)| !**i)
        .map(|(n, _)| n.name())
        .collect();
    // Domains among the scored nodes, per constraint: log(count + 2) weights.
    let weights: Vec<f64> = cs
        .iter()
        .map(|c| {
            let domains: HashSet<&String> = nodes
                .iter()
                .zip(&ignored)
                .filter(|(_, i)| !**i)
                .map(|(n, _)| &n.labels()[&c.topology_key])
                .collect();
            ((domains.len() + 2) as f64).ln()
        })
        .collect();
    // Matching pods per (constraint, domain) over every eligible node with the keys (the
    // hostname key only over the scored nodes).
    let mut per_domain: Vec<HashMap<&String, i64>> = vec![HashMap::new(); cs.len()];
    for node in &snapshot.nodes {
        if !has_keys(&cs, node) {
            continue;
        }
        for (i, c) in cs.iter().enumerate() {
            if c.topology_key == HOSTNAME && !scored_names.contains(node.name()) {
                continue;
            }
            if !eligible(c, pod, node) {
                continue;
            }
            let n = node.pods.iter().filter(|p| counts(c, &pod.pod, p)).count() as i64;
            *per_domain[i]
                .entry(&node.labels()[&c.topology_key])
                .or_default() += n;
        }
    }
    let raw: Vec<Option<i64>> = nodes
        .iter()
        .zip(&ignored)
        .map(|(n, ignored)| {
            if *ignored {
                return None;
            }
            let mut score = 0.0;
            for (i, c) in cs.iter().enumerate() {
                let cnt = per_domain[i]
                    .get(&n.labels()[&c.topology_key])
                    .copied()
                    .unwrap_or(0);
                score += cnt as f64 * weights[i] + f64::from(c.max_skew - 1);
            }
            Some(score.round() as i64)
        })
        .collect();
    let valid = raw.iter().flatten();
    let min = valid.clone().copied().min().unwrap_or(0);
    let max = valid.copied().max().unwrap_or(0);
    raw.iter()
        .map(|s| match s {
            None => 0,
            Some(_) if max == 0 => MAX_NODE_SCORE,
            Some(s) => MAX_NODE_SCORE * (max + min - s) / max,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::sync::Arc;

    fn node(name: &str, zone: Option<&str>) -> Arc<k8s_openapi::api::core::v1::Node> {
        let mut labels = json!({"kubernetes.io/hostname": name});
        if let Some(z) = zone {
            labels["zone"] = json!(z);
        }
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap(),
        )
    }
    fn placed(name: &str, node: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                "labels": {"app": "web"}}, "spec": {"nodeName": node, "containers": []}}))
            .unwrap(),
        )
    }
    fn incoming(constraints: Value) -> PodInfo {
        PodInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "new", "namespace": "default",
                "labels": {"app": "web"}}, "spec": {"containers": [], "topologySpreadConstraints": constraints}}))
            .unwrap(),
        ))
    }
    fn constraint(key: &str, when: &str, extra: Value) -> Value {
        let mut c = json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}}});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }
    fn cluster(pods: &[Arc<Pod>]) -> Snapshot {
        Snapshot::new(
            vec![
                node("a", Some("z1")),
                node("b", Some("z1")),
                node("c", Some("z2")),
                node("d", None),
            ],
            pods.iter(),
        )
    }

    #[test]
    fn do_not_schedule_keeps_skew() {
        // z1 has 2 matching pods, z2 has 1: min 1. z1: 2+1-1 = 2 > 1; z2: 1+1-1 = 1.
        let s = cluster(&[placed("w1", "a"), placed("w2", "b"), placed("w3", "c")]);
        let p = incoming(json!([constraint("zone", "DoNotSchedule", json!({}))]));
        let pre = PreFilter::new(&p, &s);
        let got: Vec<_> = s.nodes.iter().map(|n| pre.filter(n)).collect();
        let skew = Err(Rejection::unschedulable(ERR_CONSTRAINTS));
        assert_eq!(
            got,
            vec![
                skew.clone(),
                skew,
                Ok(()),
                Err(Rejection::unresolvable(ERR_MISSING_LABEL))
            ]
        );
    }

    #[test]
    fn min_domains_treats_the_minimum_as_zero() {
        // Two zones exist but minDomains 3: min 0, so z2 (1 pod) gives 1+1-0 = 2 > 1.
        let s = cluster(&[placed("w1", "a"), placed("w3", "c")]);
        let p = incoming(json!([constraint(
            "zone",
            "DoNotSchedule",
            json!({"minDomains": 3})
        )]));
        let pre = PreFilter::new(&p, &s);
        let got: Vec<_> = s.nodes[..3].iter().map(|n| pre.filter(n).is_ok()).collect();
        assert_eq!(got, vec![false, false, false]);
    }

    #[test]
    fn schedule_anyway_prefers_emptier_domains() {
        let s = cluster(&[placed("w1", "a"), placed("w2", "a"), placed("w3", "b")]);
        let p = incoming(json!([constraint(
            "kubernetes.io/hostname",
            "ScheduleAnyway",
            json!({})
        )]));
        // Scored nodes a, b, c, d: 4 domains, weight ln(6) = 1.7918. Raw: a 2*1.79 = 3.58 → 4,
        // b 1.79 → 2, c 0, d 0. Normalized 100*(4+0-s)/4: a 0, b 50, c 100, d 100.
        assert_eq!(scores(&p, &s, &[0, 1, 2, 3]), vec![0, 50, 100, 100]);
        // By zone: d lacks the key (ignored → 0); domains z1, z2: weight ln(4) = 1.386.
        // z1 has 3 pods: 4.16 → 4; z2: 0. a, b: 100*(4-4)/4 = 0; c: 100.
        let z = incoming(json!([constraint("zone", "ScheduleAnyway", json!({}))]));
        assert_eq!(scores(&z, &s, &[0, 1, 2, 3]), vec![0, 0, 100, 0]);
    }
}
