//! Discovery of the aggregated groups: which group/versions the available extension servers
//! serve, every group of `/apis` in kube-aggregator's order ([`super::order`]), and each
//! aggregated group/version's `APIVersionDiscovery`: the extension server's own when it
//! serves aggregated discovery, else converted from its `APIResourceList`.

use serde_json::{json, Value};

use super::backend::Backend;
use super::order::{self, Registered};
use super::Backends;

fn registered(b: &Backend) -> Registered {
    Registered {
        group: b.api_service.group.clone(),
        version: b.api_service.version.clone(),
        group_priority: b.api_service.group_priority_minimum,
        version_priority: b.api_service.version_priority,
    }
}

/// The groups of the available backends with their versions, in discovery order.
pub fn available_groups(backends: &Backends) -> Vec<(String, Vec<String>)> {
    let available: Vec<Registered> = backends
        .values()
        .filter(|b| b.available)
        .map(registered)
        .collect();
    order::sorted(&available)
}

/// A group of `/apis`, served here or by extension servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub versions: Vec<String>,
    /// Served by this server (its versions in the order it serves them).
    pub local: bool,
}

/// Every group of `/apis`: `local` ones (with their priorities from `priorities`) and
/// those of the available backends not served locally, in kube-aggregator's order.
pub fn ordered_groups(
    local: &[(&str, Vec<&str>)],
    priorities: impl Fn(&str, &str) -> (i64, i64),
    backends: &Backends,
) -> Vec<Group> {
    let is_local = |g: &str| local.iter().any(|(l, _)| *l == g);
    let mut all: Vec<Registered> = local
        .iter()
        .flat_map(|(g, versions)| {
            versions.iter().map(|v| {
                let (group_priority, version_priority) = priorities(g, v);
                Registered {
                    group: g.to_string(),
                    version: v.to_string(),
                    group_priority,
                    version_priority,
                }
            })
        })
        .collect();
    all.extend(
        backends
            .values()
            .filter(|b| b.available && !is_local(&b.api_service.group))
            .map(registered),
    );
    order::sorted(&all)
        .into_iter()
        .map(
            |(name, versions)| match local.iter().find(|(l, _)| *l == name) {
                Some((_, served)) => Group {
                    name,
                    versions: served.iter().map(|v| v.to_string()).collect(),
                    local: true,
                },
                None => Group {
                    name,
                    versions,
                    local: false,
                },
            },
        )
        .collect()
}

/// The `APIVersionDiscovery` of an aggregated `group/version`.
pub fn version_discovery(backend: Option<&Backend>, group: &str, version: &str) -> Value {
    if let Some(entry) = backend.and_then(|b| b.documents.discovery.as_ref()) {
        let mut v = entry.value.clone();
        v["version"] = json!(version);
        if v["freshness"].is_null() {
            v["freshness"] = json!("Current");
        }
        return v;
    }
    let resources = backend
        .and_then(|b| b.resources.as_ref())
        .map(|list| v2_resources(list, group, version))
        .unwrap_or_default();
    json!({"version": version, "freshness": "Current", "resources": resources})
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
    use crate::aggregator::backend::test_backend;
    use crate::aggregator::documents::Cached;

    #[test]
    fn only_available_versions_by_priority() {
        let mut b = Backends::new();
        for (g, v, p, up) in [
            ("wardle.example.com", "v1alpha1", 15, true),
            ("wardle.example.com", "v1beta1", 20, true),
            ("down.example.com", "v1", 15, false),
        ] {
            b.insert((g.into(), v.into()), test_backend(g, v, (1000, p), up));
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

    #[test]
    fn groups_in_kube_aggregators_order_local_first_on_a_clash() {
        let mut b = Backends::new();
        for (g, v, prio) in [
            ("wardle.example.com", "v1alpha1", (1000, 15)),
            ("early.example.com", "v1", (17900, 15)),
            ("apps", "v9", (20000, 15)),
        ] {
            b.insert((g.into(), v.into()), test_backend(g, v, prio, true));
        }
        let local = [
            ("apps", vec!["v1"]),
            ("batch", vec!["v1"]),
            ("zz.example.com", vec!["v1"]),
        ];
        let priorities = |g: &str, _: &str| match g {
            "apps" => (17800, 15),
            "batch" => (17400, 15),
            _ => (1000, 100),
        };
        let got: Vec<(String, Vec<String>, bool)> = ordered_groups(&local, priorities, &b)
            .into_iter()
            .map(|g| (g.name, g.versions, g.local))
            .collect();
        let row = |n: &str, v: &str, l| (n.to_string(), vec![v.to_string()], l);
        assert_eq!(
            got,
            [
                row("early.example.com", "v1", false),
                row("apps", "v1", true),
                row("batch", "v1", true),
                row("wardle.example.com", "v1alpha1", false),
                row("zz.example.com", "v1", true),
            ]
        );
    }

    #[test]
    fn the_servers_own_discovery_else_the_converted_list() {
        let mut b = test_backend("wardle.example.com", "v1alpha1", (1000, 15), true);
        b.resources = Some(json!({"resources": [{"name": "flunders", "kind": "Flunder",
            "namespaced": true, "singularName": "flunder", "verbs": ["get"]}]}));
        let converted = version_discovery(Some(&b), "wardle.example.com", "v1alpha1");
        assert_eq!(converted["resources"][0]["resource"], "flunders");
        assert_eq!(converted["freshness"], "Current");
        b.documents.discovery = Some(Cached {
            url: "/apis".into(),
            etag: None,
            value: json!({"version": "v1alpha1", "resources": [{"resource": "flunders",
                "shortNames": ["fl"]}]}),
        });
        assert_eq!(
            version_discovery(Some(&b), "wardle.example.com", "v1alpha1"),
            json!({"version": "v1alpha1", "freshness": "Current",
                "resources": [{"resource": "flunders", "shortNames": ["fl"]}]})
        );
        assert_eq!(
            version_discovery(None, "wardle.example.com", "v1alpha1"),
            json!({"version": "v1alpha1", "freshness": "Current", "resources": []})
        );
    }
}
