//! A pod's QoS class (`Guaranteed`, `Burstable`, `BestEffort`) by upstream's rules
//! (`GetPodQOS`): only cpu and memory count; requests and limits above zero are summed over
//! all containers and init containers; `Guaranteed` needs every container to limit both cpu
//! and memory and the summed requests to equal the summed limits; no requests and no limits at
//! all is `BestEffort`; anything else is `Burstable`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::spec::{containers, init_containers};
use k3rs_apimachinery::quantity::Quantity;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

const COMPUTE: [&str; 2] = ["cpu", "memory"];

fn positive(list: Option<&BTreeMap<String, ApiQuantity>>) -> Vec<(&str, Quantity)> {
    list.into_iter()
        .flatten()
        .filter(|(k, _)| COMPUTE.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), Quantity::of(v)))
        .filter(|(_, q)| q.is_positive())
        .collect()
}

/// The QoS class computed from the spec.
pub fn compute_qos(pod: &Pod) -> QosClass {
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    let all: Vec<&Container> = containers(pod).iter().chain(init_containers(pod)).collect();
    for c in all {
        let resources = c.resources.as_ref();
        for (k, q) in positive(resources.and_then(|r| r.requests.as_ref())) {
            *requests.entry(k).or_default() = requests.get(k).copied().unwrap_or_default() + q;
        }
        let found = positive(resources.and_then(|r| r.limits.as_ref()));
        for (k, q) in &found {
            *limits.entry(k).or_default() = limits.get(k).copied().unwrap_or_default() + *q;
        }
        if !COMPUTE.iter().all(|r| found.iter().any(|(k, _)| k == r)) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && requests.iter().all(|(k, r)| limits.get(k) == Some(r))
        && requests.len() == limits.len()
    {
        return QosClass::Guaranteed;
    }
    QosClass::Burstable
}

/// The class in the pod's status when set (it never changes once set), else computed.
pub fn qos_class(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .filter(|q| !q.is_empty())
        .unwrap_or_else(|| compute_qos(pod).as_str().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::{json, Value};

    fn with(containers: Value) -> Pod {
        pod(json!({"spec": {"containers": containers}}))
    }

    fn c(requests: Value, limits: Value) -> Value {
        json!({"name": "c", "image": "i", "resources": {"requests": requests, "limits": limits}})
    }

    #[test]
    fn classes() {
        use QosClass::*;
        let table = [
            (json!([{"name": "c", "image": "i"}]), BestEffort),
            (json!([c(json!({}), json!({}))]), BestEffort),
            // Zero quantities and other resources do not count.
            (
                json!([c(json!({"cpu": "0"}), json!({"nvidia.com/gpu": "1"}))]),
                BestEffort,
            ),
            (json!([c(json!({"cpu": "100m"}), json!({}))]), Burstable),
            (
                json!([c(
                    json!({"cpu": "1", "memory": "1Gi"}),
                    json!({"cpu": "1", "memory": "1Gi"})
                )]),
                Guaranteed,
            ),
            // Equal amounts in other notations.
            (
                json!([c(
                    json!({"cpu": "1000m", "memory": "1024Mi"}),
                    json!({"cpu": "1", "memory": "1Gi"})
                )]),
                Guaranteed,
            ),
            // Limits only (requests defaulted from them by the API server, or not).
            (
                json!([c(json!({}), json!({"cpu": "1", "memory": "1Gi"}))]),
                Burstable,
            ),
            (
                json!([c(
                    json!({"cpu": "500m", "memory": "1Gi"}),
                    json!({"cpu": "1", "memory": "1Gi"})
                )]),
                Burstable,
            ),
            (
                json!([c(json!({"cpu": "1"}), json!({"cpu": "1"}))]),
                Burstable,
            ),
            // Every container must limit both.
            (
                json!([
                    c(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"})),
                    {"name": "d", "image": "i"}
                ]),
                Burstable,
            ),
        ];
        for (i, (containers, want)) in table.into_iter().enumerate() {
            assert_eq!(compute_qos(&with(containers)), want, "row {i}");
        }
    }

    #[test]
    fn init_containers_count() {
        let g = json!({"cpu": "1", "memory": "1Gi"});
        let p = pod(json!({"spec": {
            "containers": [c(g.clone(), g.clone())],
            "initContainers": [{"name": "i", "image": "i"}],
        }}));
        assert_eq!(compute_qos(&p), QosClass::Burstable);
        let p = pod(json!({"spec": {
            "containers": [c(json!({}), json!({}))],
            "initContainers": [c(json!({"memory": "1Mi"}), json!({}))],
        }}));
        assert_eq!(compute_qos(&p), QosClass::Burstable);
    }

    #[test]
    fn the_status_class_wins() {
        let p = pod(json!({"status": {"qosClass": "Guaranteed"}}));
        assert_eq!(qos_class(&p), "Guaranteed");
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
    }
}
