//! Discovery from the catalog and the available aggregated APIs ([`crate::aggregator`]): legacy (`APIVersions`, `APIGroupList`, `APIGroup`,
//! `APIResourceList`) and aggregated v2 (`APIGroupDiscoveryList`, chosen by the Accept header,
//! with ETag, `Vary: Accept` and 304 on `If-None-Match`).

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sha2::Digest;

use std::sync::Arc;

use super::aggregator::discovery::{available_groups, v2_resources};
use super::aggregator::Backends;
use super::http::handlers::json_response;
use super::ApiState;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::catalog::Resource;

/// The Content-Type that tells kubectl it got aggregated discovery.
pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .take_while(|m| !m.trim().eq_ignore_ascii_case("application/json"))
        .any(|m| {
            let m = m.replace(' ', "");
            m.contains("g=apidiscovery.k8s.io")
                && m.contains("v=v2;")
                && m.contains("as=APIGroupDiscoveryList")
                || m.ends_with("v=v2") && m.contains("as=APIGroupDiscoveryList")
        })
}

/// The service-backed APIServices now (none without an aggregation layer).
fn backends(st: &ApiState) -> Arc<Backends> {
    st.aggregator
        .as_ref()
        .map(|a| a.backends())
        .unwrap_or_default()
}

/// `/api` or `/apis`.
pub fn root(st: &ApiState, legacy: bool, headers: &HeaderMap) -> Response {
    if wants_aggregated(headers) {
        let mut body = aggregated(legacy);
        if !legacy {
            append_aggregated(&mut body, &backends(st));
        }
        return etagged(headers, AGGREGATED_V2, body.to_string());
    }
    let body = if legacy {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": st.advertise_address}],
        })
    } else {
        json!({
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": catalog::groups().iter().map(|(g, vs)| api_group(g, vs))
                .chain(available_groups(&backends(st)).iter().map(|(g, vs)| api_group(g, vs)))
                .collect::<Vec<_>>(),
        })
    };
    etagged(headers, "application/json", body.to_string())
}

fn api_group(group: &str, versions: &[impl AsRef<str>]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| v.as_ref())
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis/<group>`: its built-in or custom versions, else those of its available
/// extension servers.
pub fn group(st: &ApiState, group: &str) -> Response {
    let versions: Vec<String> = match catalog::groups().into_iter().find(|(g, _)| *g == group) {
        Some((_, v)) => v.into_iter().map(str::to_string).collect(),
        None => available_groups(&backends(st))
            .into_iter()
            .find(|(g, _)| g == group)
            .map(|(_, v)| v)
            .unwrap_or_default(),
    };
    let mut body = api_group(group, &versions);
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    json_response(StatusCode::OK, &body)
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resource_list(group: &str, version: &str) -> Response {
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources = Vec::new();
    for r in catalog::in_group_version(group, version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        for s in r.subresources {
            let mut sub = json!({
                "name": format!("{}/{}", r.plural, s.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": s.kind,
                "verbs": s.verbs,
            });
            if s.name != "status" {
                sub["group"] = json!(s.group);
                sub["version"] = json!(s.version);
            }
            resources.push(sub);
        }
    }
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn discovery_resource(r: &Resource) -> Value {
    let mut v = json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    if !r.subresources.is_empty() {
        v["subresources"] = r
            .subresources
            .iter()
            .map(|s| {
                json!({
                    "subresource": s.name,
                    "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                    "verbs": s.verbs,
                })
            })
            .collect();
    }
    v
}

/// The `APIGroupDiscoveryList` for `/api` (core) or `/apis` (every other group).
pub fn aggregated(legacy: bool) -> Value {
    let groups: Vec<(&str, Vec<&str>)> = if legacy {
        vec![("", vec!["v1"])]
    } else {
        catalog::groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    json!({
                        "version": v,
                        "freshness": "Current",
                        "resources": catalog::in_group_version(g, v).map(discovery_resource).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let mut item = json!({"metadata": {"creationTimestamp": null}, "versions": vs});
            if !g.is_empty() {
                item["metadata"]["name"] = json!(g);
            }
            item
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// Appends the groups of the available extension servers (their last discovery) to an
/// `APIGroupDiscoveryList`; a group already served here keeps its entry.
fn append_aggregated(list: &mut Value, backends: &Backends) {
    let Some(items) = list["items"].as_array_mut() else {
        return;
    };
    for (group, versions) in available_groups(backends) {
        if items.iter().any(|i| i["metadata"]["name"] == *group) {
            continue;
        }
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| {
                let resources = backends
                    .get(&(group.clone(), v.clone()))
                    .and_then(|b| b.resources.as_ref())
                    .map(|list| v2_resources(list, &group, v))
                    .unwrap_or_default();
                json!({"version": v, "freshness": "Current", "resources": resources})
            })
            .collect();
        items.push(json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": vs}));
    }
}

fn etagged(headers: &HeaderMap, content_type: &str, body: String) -> Response {
    let etag = format!(
        "\"{}\"",
        hex::encode(&sha2::Sha256::digest(body.as_bytes())[..16])
    );
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let code = if matches {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let body = if matches { String::new() } else { body };
    (
        code,
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::ETAG, etag),
            (header::VARY, "Accept".to_string()),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_accept_header_selects_aggregated() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json".parse().unwrap());
        assert!(wants_aggregated(&h));
        h.insert(header::ACCEPT, "application/json, */*".parse().unwrap());
        assert!(!wants_aggregated(&h));
    }

    #[test]
    fn aggregated_shapes() {
        let core = aggregated(true);
        let res = &core["items"][0]["versions"][0]["resources"];
        let pods = res
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(pods["responseKind"]["kind"], "Pod");
        assert_eq!(pods["scope"], "Namespaced");
        assert!(core["items"][0]["metadata"].get("name").is_none());
        let apps = aggregated(false);
        assert_eq!(apps["items"][0]["metadata"]["name"], "apps");
    }
}
