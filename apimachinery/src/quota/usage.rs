//! What one object counts against a ResourceQuota (kube's quota evaluators): object counts
//! (`count/<resource>.<group>` and the legacy names `pods`, `services`, …), a pod's compute
//! requests and limits, a service's node ports and load balancers, a claim's storage.

use std::collections::BTreeMap;

use serde_json::Value;

use super::amount::Amount;
use crate::catalog::Resource;

/// Resource name → amount.
pub type Usage = BTreeMap<String, Amount>;

/// The compute resources a quota on which makes every container state them.
pub const COMPUTE_VALIDATED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// `count/<plural>` for the core group, `count/<plural>.<group>` otherwise.
pub fn count_name(r: &Resource) -> String {
    if r.group.is_empty() {
        format!("count/{}", r.plural)
    } else {
        format!("count/{}.{}", r.plural, r.group)
    }
}

/// The legacy object-count name of a core resource, if it has one.
fn legacy_count_name(r: &Resource) -> Option<&'static str> {
    if !r.group.is_empty() {
        return None;
    }
    match r.plural {
        "pods" => Some("pods"),
        "services" => Some("services"),
        "secrets" => Some("secrets"),
        "configmaps" => Some("configmaps"),
        "persistentvolumeclaims" => Some("persistentvolumeclaims"),
        "replicationcontrollers" => Some("replicationcontrollers"),
        "resourcequotas" => Some("resourcequotas"),
        _ => None,
    }
}

/// Whether a pod no longer uses resources (it ended).
pub fn pod_is_terminal(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// What `obj` (of `r`) uses.
pub fn usage(r: &Resource, obj: &Value) -> Usage {
    let mut u = Usage::new();
    let is_pod = r.group.is_empty() && r.plural == "pods";
    if is_pod && pod_is_terminal(obj) {
        return u;
    }
    u.insert(count_name(r), Amount::count(1));
    if let Some(n) = legacy_count_name(r) {
        u.insert(n.into(), Amount::count(1));
    }
    if r.group.is_empty() {
        match r.plural {
            "pods" => add_all(&mut u, pod_compute(obj)),
            "services" => add_all(&mut u, service_usage(obj)),
            "persistentvolumeclaims" => add_all(&mut u, claim_usage(obj)),
            _ => {}
        }
    }
    u
}

fn add_all(u: &mut Usage, more: Usage) {
    for (k, v) in more {
        let sum = u.get(&k).copied().unwrap_or_default().plus(v);
        u.insert(k, sum);
    }
}

/// `requests.<r>`/`limits.<r>` (and bare `cpu`/`memory`/… for requests) of one container.
pub fn container_compute(c: &Value) -> Usage {
    let mut u = Usage::new();
    let res = &c["resources"];
    for (k, v) in res["requests"].as_object().into_iter().flatten() {
        if let Some(a) = Amount::of(v) {
            if matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage") {
                u.insert(k.clone(), a);
            }
            u.insert(format!("requests.{k}"), a);
        }
    }
    for (k, v) in res["limits"].as_object().into_iter().flatten() {
        if let Some(a) = Amount::of(v) {
            u.insert(format!("limits.{k}"), a);
        }
    }
    u
}

/// A pod's compute: the larger of the containers' sum and each init container, plus overhead.
fn pod_compute(pod: &Value) -> Usage {
    let mut sum = Usage::new();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        add_all(&mut sum, container_compute(c));
    }
    for c in pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for (k, v) in container_compute(c) {
            if sum.get(&k).is_none_or(|s| v.milli > s.milli) {
                sum.insert(k, v);
            }
        }
    }
    for (k, v) in pod["spec"]["overhead"].as_object().into_iter().flatten() {
        if let Some(a) = Amount::of(v) {
            let mut o = Usage::from([(format!("requests.{k}"), a), (format!("limits.{k}"), a)]);
            if matches!(k.as_str(), "cpu" | "memory") {
                o.insert(k.clone(), a);
            }
            o.retain(|name, _| sum.contains_key(name));
            add_all(&mut sum, o);
        }
    }
    sum
}

fn service_usage(svc: &Value) -> Usage {
    let ty = svc["spec"]["type"].as_str().unwrap_or("ClusterIP");
    let mut u = Usage::new();
    let ports = svc["spec"]["ports"].as_array().map_or(0, Vec::len) as i64;
    match ty {
        "NodePort" => {
            u.insert("services.nodeports".into(), Amount::count(ports));
        }
        "LoadBalancer" => {
            u.insert("services.loadbalancers".into(), Amount::count(1));
            u.insert("services.nodeports".into(), Amount::count(ports));
        }
        _ => {}
    }
    u
}

fn claim_usage(pvc: &Value) -> Usage {
    let mut u = Usage::new();
    let storage = Amount::of(&pvc["spec"]["resources"]["requests"]["storage"]);
    if let Some(s) = storage {
        u.insert("requests.storage".into(), s);
    }
    if let Some(class) = pvc["spec"]["storageClassName"]
        .as_str()
        .filter(|c| !c.is_empty())
    {
        let prefix = format!("{class}.storageclass.storage.k8s.io/");
        u.insert(format!("{prefix}persistentvolumeclaims"), Amount::count(1));
        if let Some(s) = storage {
            u.insert(format!("{prefix}requests.storage"), s);
        }
    }
    u
}

/// A pod that does not state a compute resource its quota limits (kube's `Constraints`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must specify {}", .missing.iter().map(|(r, names)| format!("{r} for: {}", names.join(","))).collect::<Vec<_>>().join("; "))]
pub struct MissingCompute {
    /// Each quota'd resource with the sorted names of the containers that do not state it.
    pub missing: Vec<(String, Vec<String>)>,
}

/// kube's pod `Constraints`: with `cpu`/`memory` quota'd, every container must state the
/// request or limit; the error reads `must specify <resource> for: <containers>; …`.
pub fn pod_constraints(pod: &Value, quota_resources: &[String]) -> Result<(), MissingCompute> {
    let required: Vec<&str> = quota_resources
        .iter()
        .map(String::as_str)
        .filter(|r| COMPUTE_VALIDATED.contains(r))
        .collect();
    let mut missing: BTreeMap<&str, std::collections::BTreeSet<String>> = BTreeMap::new();
    for list in ["containers", "initContainers"] {
        for c in pod["spec"][list].as_array().into_iter().flatten() {
            let has = container_compute(c);
            for r in &required {
                if !has.contains_key(*r) {
                    let name = c["name"].as_str().unwrap_or("").to_string();
                    missing.entry(r).or_default().insert(name);
                }
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(MissingCompute {
        missing: missing
            .into_iter()
            .map(|(r, names)| (r.to_string(), names.into_iter().collect()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use serde_json::json;

    fn rendered(u: &Usage) -> BTreeMap<String, String> {
        u.iter().map(|(k, v)| (k.clone(), v.render())).collect()
    }

    fn s(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn pod_counts_and_compute() {
        let pods = catalog::lookup("", "v1", "pods").unwrap();
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}]}});
        assert_eq!(
            rendered(&usage(pods, &pod)),
            s(&[
                ("count/pods", "1"),
                ("cpu", "2"),
                ("limits.cpu", "500m"),
                ("memory", "128Mi"),
                ("pods", "1"),
                ("requests.cpu", "2"),
                ("requests.memory", "128Mi"),
            ])
        );
        let done =
            json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Succeeded"}});
        assert!(usage(pods, &done).is_empty());
    }

    #[test]
    fn services_claims_and_generic_counts() {
        let svc = catalog::lookup("", "v1", "services").unwrap();
        let lb = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}});
        assert_eq!(
            rendered(&usage(svc, &lb)),
            s(&[
                ("count/services", "1"),
                ("services", "1"),
                ("services.loadbalancers", "1"),
                ("services.nodeports", "2"),
            ])
        );
        let pvcs = catalog::lookup("", "v1", "persistentvolumeclaims").unwrap();
        let pvc = json!({"spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            rendered(&usage(pvcs, &pvc)),
            s(&[
                ("count/persistentvolumeclaims", "1"),
                (
                    "fast.storageclass.storage.k8s.io/persistentvolumeclaims",
                    "1"
                ),
                ("fast.storageclass.storage.k8s.io/requests.storage", "1Gi"),
                ("persistentvolumeclaims", "1"),
                ("requests.storage", "1Gi"),
            ])
        );
        let deploys = catalog::lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(
            rendered(&usage(deploys, &json!({}))),
            s(&[("count/deployments.apps", "1")])
        );
    }

    #[test]
    fn compute_quota_needs_every_container_to_state_it() {
        let pod = json!({"spec": {"containers": [
            {"name": "web", "resources": {"requests": {"cpu": "1"}}},
            {"name": "side"}]}});
        let q = vec![
            "requests.cpu".to_string(),
            "limits.memory".into(),
            "pods".into(),
        ];
        assert_eq!(
            pod_constraints(&pod, &q).map_err(|e| e.to_string()),
            Err("must specify limits.memory for: side,web; requests.cpu for: side".into())
        );
        assert_eq!(pod_constraints(&pod, &["pods".to_string()]), Ok(()));
    }
}
