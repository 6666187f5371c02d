//! The scores of upstream's default profile, each 0–100 after normalization over the
//! feasible nodes, and their weights: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2,
//! InterPodAffinity 2, NodeResourcesFit (LeastAllocated, cpu and memory weight 1) 1,
//! NodeResourcesBalancedAllocation 1, ImageLocality 1.

use super::filters::PodInfo;
use super::interpod;
use super::snapshot::{NodeInfo, Snapshot};
use super::topology_spread;
use k3rs_apimachinery::resources::Resources;
use k3rs_apimachinery::scheduling::node_selector_term_matches;
use k3rs_apimachinery::scheduling::tolerated;

/// The highest score a plugin gives.
pub const MAX_NODE_SCORE: i64 = 100;
/// TaintToleration's weight.
pub const WEIGHT_TAINT_TOLERATION: i64 = 3;
/// NodeAffinity's weight.
pub const WEIGHT_NODE_AFFINITY: i64 = 2;
/// PodTopologySpread's weight.
pub const WEIGHT_POD_TOPOLOGY_SPREAD: i64 = 2;
/// InterPodAffinity's weight.
pub const WEIGHT_INTER_POD_AFFINITY: i64 = 2;
/// NodeResourcesFit's weight.
pub const WEIGHT_RESOURCES_FIT: i64 = 1;
/// NodeResourcesBalancedAllocation's weight.
pub const WEIGHT_BALANCED_ALLOCATION: i64 = 1;
/// ImageLocality's weight.
pub const WEIGHT_IMAGE_LOCALITY: i64 = 1;

const MB: i64 = 1024 * 1024;
const IMAGE_MIN_THRESHOLD: i64 = 23 * MB;
const IMAGE_MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// (requested with the pod, allocatable) for cpu and memory.
fn cpu_memory(on_node: &Resources, pod: &Resources, allocatable: &Resources) -> [(i64, i64); 2] {
    [
        (on_node.milli_cpu + pod.milli_cpu, allocatable.milli_cpu),
        (on_node.memory + pod.memory, allocatable.memory),
    ]
}

/// NodeResourcesFit, LeastAllocated: per resource `(allocatable - requested) * 100 /
/// allocatable` with the non-zero requests of the node's pods plus this pod (0 when over),
/// averaged over cpu and memory (weights 1; resources the node lacks are skipped).
pub fn least_allocated(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let pairs = cpu_memory(
        &node.non_zero_requested,
        &pod.non_zero_requests,
        &node.allocatable,
    );
    let (mut sum, mut weights) = (0, 0);
    for (requested, capacity) in pairs {
        if capacity == 0 {
            continue;
        }
        sum += if requested > capacity {
            0
        } else {
            (capacity - requested) * MAX_NODE_SCORE / capacity
        };
        weights += 1;
    }
    if weights == 0 {
        0
    } else {
        sum / weights
    }
}

/// NodeResourcesBalancedAllocation: `(1 - |cpu fraction - memory fraction| / 2) * 100` with
/// the requests as written (fractions capped at 1; a resource the node lacks is skipped).
pub fn balanced_allocation(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let [(cpu, cpu_alloc), (mem, mem_alloc)] =
        cpu_memory(&node.requested, &pod.requests, &node.allocatable);
    let fraction = |r: i64, a: i64| (r as f64 / a as f64).min(1.0);
    let std = if cpu_alloc != 0 && mem_alloc != 0 {
        ((fraction(cpu, cpu_alloc) - fraction(mem, mem_alloc)) / 2.0).abs()
    } else {
        0.0
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// NodeAffinity, before normalization: the summed weights of the preferred terms the node
/// matches.
pub fn node_affinity(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let preferred = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        });
    preferred
        .unwrap_or_default()
        .iter()
        .filter(|t| node_selector_term_matches(&t.preference, node.labels(), node.name()))
        .map(|t| i64::from(t.weight))
        .sum()
}

/// TaintToleration, before normalization: how many `PreferNoSchedule` taints the pod's
/// `PreferNoSchedule` (or effect-less) tolerations leave untolerated.
pub fn taint_toleration(pod: &PodInfo, node: &NodeInfo) -> i64 {
    // Runs for every node scored: nothing is copied for a node without such taints.
    let taints = &node.taints;
    if !taints.iter().any(|t| t.effect == "PreferNoSchedule") {
        return 0;
    }
    let tolerations: Vec<_> = pod
        .tolerations()
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some("PreferNoSchedule")
            )
        })
        .cloned()
        .collect();
    taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !tolerated(&tolerations, t))
        .count() as i64
}

/// An image name as nodes report it: `:latest` added when there is no tag or digest.
fn normalized_image(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    if name.contains('@') || last.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// ImageLocality: the sizes of the pod's images present on the node, each scaled by the
/// share of nodes that have it, mapped from [23 MB, 1000 MB × containers] onto 0–100.
pub fn image_locality(pod: &PodInfo, node: &NodeInfo, snapshot: &Snapshot) -> i64 {
    ImageLocality::new(pod, snapshot).score(node)
}

/// [`image_locality`] for one pod over many nodes: the pod's images are normalized once, and
/// each image's share of nodes is counted once, when a scored node first has it (upstream
/// keeps that count in its snapshot), instead of per node scored.
pub struct ImageLocality<'a> {
    snapshot: &'a Snapshot,
    /// Each container's image, normalized, with its share of nodes once counted.
    images: Vec<(String, std::cell::Cell<Option<f64>>)>,
}

impl<'a> ImageLocality<'a> {
    /// The scorer of `pod` on the nodes of `snapshot`.
    pub fn new(pod: &PodInfo, snapshot: &'a Snapshot) -> ImageLocality<'a> {
        let images = pod
            .pod
            .spec
            .as_ref()
            .map(|spec| {
                (spec.init_containers.iter().flatten())
                    .chain(&spec.containers)
                    .map(|c| {
                        let image = normalized_image(c.image.as_deref().unwrap_or(""));
                        (image, std::cell::Cell::new(None))
                    })
                    .collect()
            })
            .unwrap_or_default();
        ImageLocality { snapshot, images }
    }

    /// The share of the snapshot's nodes that have `image`.
    fn spread(&self, image: &str) -> f64 {
        let total = self.snapshot.nodes.len() as f64;
        let with = (self.snapshot.nodes.iter())
            .filter(|n| n.images.contains_key(image))
            .count() as f64;
        with / total
    }

    /// [`image_locality`] of the pod on `node` (one of the snapshot's).
    pub fn score(&self, node: &NodeInfo) -> i64 {
        if self.images.is_empty() {
            return 0;
        }
        let mut sum: i64 = 0;
        for (image, spread) in &self.images {
            if let Some(size) = node.images.get(image) {
                let share = spread.get().unwrap_or_else(|| {
                    let s = self.spread(image);
                    spread.set(Some(s));
                    s
                });
                sum += (*size as f64 * share) as i64;
            }
        }
        let max = IMAGE_MAX_CONTAINER_THRESHOLD * self.images.len() as i64;
        if max <= IMAGE_MIN_THRESHOLD {
            return 0;
        }
        let sum = sum.clamp(IMAGE_MIN_THRESHOLD, max);
        MAX_NODE_SCORE * (sum - IMAGE_MIN_THRESHOLD) / (max - IMAGE_MIN_THRESHOLD)
    }
}

/// Upstream's `DefaultNormalizeScore`: scale to `100 * s / max`; `reverse` subtracts from
/// 100. All zero: 0 (or 100 reversed).
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    for s in scores.iter_mut() {
        let v = if max == 0 {
            0
        } else {
            MAX_NODE_SCORE * *s / max
        };
        *s = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

/// The weighted total per feasible node (indices into `snapshot.nodes`), in `feasible`'s
/// order.
pub fn total(pod: &PodInfo, snapshot: &Snapshot, feasible: &[usize]) -> Vec<i64> {
    let nodes: Vec<&NodeInfo> = feasible.iter().map(|i| &snapshot.nodes[*i]).collect();
    let per = |f: &dyn Fn(&NodeInfo) -> i64| nodes.iter().map(|n| f(n)).collect::<Vec<_>>();
    let mut taints = per(&|n| taint_toleration(pod, n));
    default_normalize(&mut taints, true);
    let mut affinity = per(&|n| node_affinity(pod, n));
    default_normalize(&mut affinity, false);
    let has_pod_affinity = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .is_some()
        || snapshot.pods_with_affinity().next().is_some();
    let inter_pod = if has_pod_affinity {
        let all = interpod::preferred_scores(pod, snapshot);
        let mut mine: Vec<i64> = feasible.iter().map(|i| all[*i]).collect();
        interpod::normalize(&mut mine);
        mine
    } else {
        vec![0; nodes.len()]
    };
    let spread = topology_spread::scores(pod, snapshot, feasible);
    let images = ImageLocality::new(pod, snapshot);
    (0..nodes.len())
        .map(|i| {
            let n = nodes[i];
            WEIGHT_TAINT_TOLERATION * taints[i]
                + WEIGHT_NODE_AFFINITY * affinity[i]
                + WEIGHT_POD_TOPOLOGY_SPREAD * spread[i]
                + WEIGHT_INTER_POD_AFFINITY * inter_pod[i]
                + WEIGHT_RESOURCES_FIT * least_allocated(pod, n)
                + WEIGHT_BALANCED_ALLOCATION * balanced_allocation(pod, n)
                + WEIGHT_IMAGE_LOCALITY * images.score(n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::sync::Arc;

    fn node(v: Value) -> NodeInfo {
        NodeInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
    }
    fn pod(v: Value) -> PodInfo {
        PodInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
    }
    fn sized(cpu: &str, mem: &str) -> PodInfo {
        pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}))
    }
    fn four_cpu_8g() -> NodeInfo {
        node(
            json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
        )
    }

    #[test]
    fn least_allocated_by_upstream_formula() {
        let mut n = four_cpu_8g();
        n.add_pod(sized("1", "2Gi").pod);
        // cpu: (4000 - (1000 + 1000)) * 100 / 4000 = 50;
        // memory: (8Gi - (2Gi + 1Gi)) * 100 / 8Gi = 62 (62.5 truncated); (50 + 62) / 2 = 56.
        assert_eq!(least_allocated(&sized("1", "1Gi"), &n), 56);
        // No requests count as 100m and 200Mi: cpu (4000-1100)*100/4000 = 72;
        // memory (8192-2048-200)Mi*100/8192Mi = 72 (72.55); 72.
        let bare = pod(json!({"spec": {"containers": [{"name": "c"}]}}));
        assert_eq!(least_allocated(&bare, &n), 72);
        // More than the node has: 0 for that resource: cpu 0, memory (8-2-1)/8 = 62 → 31.
        assert_eq!(least_allocated(&sized("5", "1Gi"), &n), 31);
    }

    #[test]
    fn balanced_allocation_by_upstream_formula() {
        let mut n = four_cpu_8g();
        n.add_pod(sized("1", "2Gi").pod);
        // cpu (1000+1000)/4000 = 0.5, memory (2+1)/8 = 0.375: (1 - 0.125/2) * 100 = 93.75 → 93.
        assert_eq!(balanced_allocation(&sized("1", "1Gi"), &n), 93);
        // cpu 3000/4000 = 0.75, memory 2Gi/8Gi = 0.25: (1 - 0.25) * 100 = 75.
        assert_eq!(balanced_allocation(&sized("2", "0"), &n), 75);
    }

    #[test]
    fn node_affinity_and_taints_normalized() {
        let p = pod(
            json!({"spec": {"containers": [], "affinity": {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 30, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
                {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}},
            "tolerations": [{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}]}}),
        );
        let a = node(
            json!({"metadata": {"name": "a", "labels": {"disk": "ssd", "zone": "z"}},
            "spec": {"taints": [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}]}}),
        );
        let b = node(json!({"metadata": {"name": "b", "labels": {"zone": "z"}},
            "spec": {"taints": [{"key": "a", "effect": "PreferNoSchedule"}]}}));
        let mut aff = vec![node_affinity(&p, &a), node_affinity(&p, &b)];
        assert_eq!(aff, vec![40, 10]);
        default_normalize(&mut aff, false);
        // 100*40/40, 100*10/40.
        assert_eq!(aff, vec![100, 25]);
        let mut taints = vec![taint_toleration(&p, &a), taint_toleration(&p, &b)];
        assert_eq!(taints, vec![1, 0]);
        default_normalize(&mut taints, true);
        assert_eq!(taints, vec![0, 100]);
        let mut none = vec![0, 0];
        default_normalize(&mut none, true);
        assert_eq!(none, vec![100, 100]);
    }

    #[test]
    fn image_locality_by_upstream_formula() {
        let with_image = |name: &str| {
            node(json!({"metadata": {"name": name}, "status": {"images": [
                {"names": ["docker.io/library/nginx:latest", "nginx:latest"], "sizeBytes": 500 * MB}]}}))
        };
        let snapshot = Snapshot {
            nodes: vec![with_image("a"), node(json!({"metadata": {"name": "b"}}))],
        };
        let p = sized("1", "1");
        // 500 MB on 1 of 2 nodes: 250 MB; 100 * (250 - 23) / (1000 - 23) = 23.
        assert_eq!(image_locality(&p, &snapshot.nodes[0], &snapshot), 23);
        assert_eq!(image_locality(&p, &snapshot.nodes[1], &snapshot), 0);
        // One pod's scorer over several nodes: the share counted once gives every node the
        // score of a fresh count, whichever node comes first.
        let snapshot = Snapshot {
            nodes: vec![
                node(json!({"metadata": {"name": "b"}})),
                with_image("a"),
                with_image("c"),
                node(json!({"metadata": {"name": "d"}})),
            ],
        };
        let scorer = ImageLocality::new(&p, &snapshot);
        // 500 MB on 2 of 4 nodes: the same 23 on each node that has it.
        let scores: Vec<i64> = snapshot.nodes.iter().map(|n| scorer.score(n)).collect();
        assert_eq!(scores, vec![0, 23, 23, 0]);
        for n in &snapshot.nodes {
            assert_eq!(scorer.score(n), image_locality(&p, n, &snapshot));
        }
    }

    #[test]
    fn weighted_total() {
        let mut busy = four_cpu_8g();
        busy.add_pod(sized("3", "6Gi").pod);
        let snapshot = Snapshot {
            nodes: vec![four_cpu_8g(), busy],
        };
        let p = sized("1", "1Gi");
        // Empty node: taints 100*3, affinity 0, inter-pod 0, least (75 + 87) / 2 = 81,
        // balanced |0.25 - 0.125| / 2 = 0.0625 → 93, image 0 (not on any node): 300+81+93.
        // Busy: least (0 + 12) / 2 = 6, balanced |1 - 0.875| / 2 → 93: 300+6+93.
        assert_eq!(total(&p, &snapshot, &[0, 1]), vec![474, 399]);
    }
}
