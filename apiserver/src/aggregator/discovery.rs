//! Discovery of the aggregated groups: which group/versions the available extension servers
//! serve (ordered by `versionPriority`, highest first), and their `APIResourceList`s in the
//! aggregated (`apidiscovery.k8s.io/v2`) shape.

use serde_json::{json, Value};

use super::Backends;

/// The groups of the available backends with their versions, in group order, each group's
/// versions by descending `versionPriority`.
pub fn available_groups(backends: &Backends) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<(i64, String)>)> = Vec::new();
    for ((group, version), b) in backends.iter().filter(|(_, b)| b.available) {
        let v = (b.api_service.version_priority, version.clone());
        match out.iter_mut().find(|(g, _)| g == group) {
            Some((_, vs)) => vs.push(v),
            None => out.push((group.clone(), vec![v])),
        }
    }
    out.into_iter()
        .map(|(g, mut vs)| {
            vs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            (g, vs.into_iter().map(|(_, v)| v).collect())
        })
        .collect()
}

/// The aggregated-discovery resources of an `APIResourceList` (`plural/sub` entries become
/// their parent's subresources).
pub fn v2_resources(list: &Value, group: &str, version: &str) -> Vec<Value> {
    let entries = list["resources"].as_array().cloned().unwrap_or_default();
    let kind_of = |e: &Value| {
        json!({
            "group": e["group"].as_str().unwrap_or(group),
            "version": e["version"].as_str().unwrap_or(version),
            "kind": e["kind"],
        })
    };
    let mut out: Vec<Value> = Vec::new();
    for e in entries
        .iter()
        .filter(|e| !e["name"].as_str().unwrap_or("/").contains('/'))
    {
        let mut r = json!({
            "resource": e["name"],
            "responseKind": kind_of(e),
            "scope": if e["namespaced"].as_bool().unwrap_or(false) { "Namespaced" } else { "Cluster" },
            "singularResource": e["singularName"],
            "verbs": e["verbs"],
        });
        for key in ["shortNames", "categories"] {
            if e[key].as_array().is_some_and(|a| !a.is_empty()) {
                r[key] = e[key].clone();
            }
        }
        let prefix = format!("{}/", e["name"].as_str().unwrap_or(""));
        let subresources: Vec<Value> = entries
            .iter()
            .filter_map(|s| {
                let sub = s["name"].as_str()?.strip_prefix(&prefix)?;
                Some(json!({"subresource": sub, "responseKind": kind_of(s), "verbs": s["verbs"]}))
            })
            .collect();
        if !subresources.is_empty() {
            r["subresources"] = Value::Array(subresources);
        }
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregator::backend::{ApiService, Backend, ServiceRef};

    fn backend(group: &str, version: &str, priority: i64, available: bool) -> Backend {
        let service = ServiceRef {
            namespace: "n".into(),
            name: "s".into(),
            port: 443,
        };
        Backend {
            api_service: ApiService {
                name: format!("{version}.{group}"),
                group: group.into(),
                version: version.into(),
                service: Some(service.clone()),
                ca_bundle: Vec::new(),
                insecure_skip_tls_verify: false,
                group_priority_minimum: 1000,
                version_priority: priority,
            },
            service,
            available,
            resources: None,
        }
    }

    #[test]
    fn only_available_versions_by_priority() {
        let mut b = Backends::new();
        for (g, v, p, up) in [
            ("wardle.example.com", "v1alpha1", 15, true),
            ("wardle.example.com", "v1beta1", 20, true),
            ("down.example.com", "v1", 15, false),
        ] {
            b.insert((g.into(), v.into()), backend(g, v, p, up));
        }
        assert_eq!(
            available_groups(&b),
            [(
                "wardle.example.com".to_string(),
                vec!["v1beta1".to_string(), "v1alpha1".to_string()]
            )]
        );
    }

    #[test]
    fn resource_lists_become_v2_resources() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "wardle.example.com/v1alpha1",
            "resources": [
                {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder",
                 "verbs": ["get", "list"], "shortNames": ["fl"]},
                {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder",
                 "verbs": ["get"]}]});
        assert_eq!(
            v2_resources(&list, "wardle.example.com", "v1alpha1"),
            [json!({"resource": "flunders",
                "responseKind": {"group": "wardle.example.com", "version": "v1alpha1", "kind": "Flunder"},
                "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get", "list"],
                "shortNames": ["fl"],
                "subresources": [{"subresource": "status",
                    "responseKind": {"group": "wardle.example.com", "version": "v1alpha1", "kind": "Flunder"},
                    "verbs": ["get"]}]})]
        );
    }
}
