//! One kubelet's Summary (`/stats/summary`, `stats/v1alpha1`) read as metric points: the
//! node's and each running container's cumulative CPU time and memory working set, as a pure
//! function.
//!
//! # Guarantees
//! - A point exists only when the Summary states its CPU `time`, `usageCoreNanoSeconds` and
//!   memory `workingSetBytes` (metrics-server drops incomplete ones the same way).
//! - Pods are keyed by (namespace, name); a pod with any incomplete container has no entry
//!   (its usage would be understated).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// One sample of something that uses CPU and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// When the CPU counter was read.
    pub timestamp: Timestamp,
    /// Cumulative CPU time, in core-nanoseconds.
    pub cpu_core_nanos: u64,
    /// Memory working set, in bytes.
    pub memory_working_set: u64,
    /// When the container started (`None` for the node).
    pub start: Option<Timestamp>,
}

/// A pod's containers' points, by container name.
pub type PodPoints = BTreeMap<String, Point>;

/// Everything one scrape of one kubelet yields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodePoints {
    /// The node's own usage, if complete.
    pub node: Option<Point>,
    /// The running pods, by (namespace, name).
    pub pods: BTreeMap<(String, String), PodPoints>,
}

fn point(v: &Value, start: Option<Timestamp>) -> Option<Point> {
    Some(Point {
        timestamp: v["cpu"]["time"].as_str()?.parse().ok()?,
        cpu_core_nanos: v["cpu"]["usageCoreNanoSeconds"].as_u64()?,
        memory_working_set: v["memory"]["workingSetBytes"].as_u64()?,
        start,
    })
}

/// The points of a Summary.
pub fn parse(summary: &Value) -> NodePoints {
    let mut out = NodePoints {
        node: point(&summary["node"], None),
        ..NodePoints::default()
    };
    for pod in summary["pods"].as_array().into_iter().flatten() {
        let r = &pod["podRef"];
        let (Some(ns), Some(name)) = (r["namespace"].as_str(), r["name"].as_str()) else {
            continue;
        };
        let containers: Option<PodPoints> = pod["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let start = c["startTime"].as_str().and_then(|t| t.parse().ok());
                Some((c["name"].as_str()?.to_string(), point(c, start)?))
            })
            .collect();
        if let Some(containers) = containers.filter(|c| !c.is_empty()) {
            out.pods
                .insert((ns.to_string(), name.to_string()), containers);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn complete_points_only() {
        let summary = json!({
            "node": {"nodeName": "n1",
                "cpu": {"time": "2026-01-01T00:00:10.5Z", "usageCoreNanoSeconds": 7_000_000_000u64},
                "memory": {"time": "2026-01-01T00:00:10Z", "workingSetBytes": 1024}},
            "pods": [
                {"podRef": {"namespace": "a", "name": "web", "uid": "u1"}, "containers": [
                    {"name": "c1", "startTime": "2026-01-01T00:00:00Z",
                     "cpu": {"time": "2026-01-01T00:00:10Z", "usageCoreNanoSeconds": 5},
                     "memory": {"time": "2026-01-01T00:00:10Z", "workingSetBytes": 4096}}]},
                {"podRef": {"namespace": "a", "name": "half", "uid": "u2"}, "containers": [
                    {"name": "c1", "cpu": {"time": "2026-01-01T00:00:10Z", "usageCoreNanoSeconds": 5},
                     "memory": {"time": "2026-01-01T00:00:10Z", "workingSetBytes": 1}},
                    {"name": "c2", "cpu": {"time": "2026-01-01T00:00:10Z"}}]},
            ],
        });
        let p = parse(&summary);
        assert_eq!(
            p.node,
            Some(Point {
                timestamp: ts("2026-01-01T00:00:10.5Z"),
                cpu_core_nanos: 7_000_000_000,
                memory_working_set: 1024,
                start: None,
            })
        );
        assert_eq!(p.pods.len(), 1);
        let web = &p.pods[&("a".to_string(), "web".to_string())];
        assert_eq!(
            web["c1"],
            Point {
                timestamp: ts("2026-01-01T00:00:10Z"),
                cpu_core_nanos: 5,
                memory_working_set: 4096,
                start: Some(ts("2026-01-01T00:00:00Z")),
            }
        );
    }

    #[test]
    fn a_node_without_memory_has_no_point() {
        let p = parse(
            &json!({"node": {"cpu": {"time": "2026-01-01T00:00:10Z", "usageCoreNanoSeconds": 1}}}),
        );
        assert_eq!(p, NodePoints::default());
    }
}
