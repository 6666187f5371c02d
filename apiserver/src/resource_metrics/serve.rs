//! `GET /apis/metrics.k8s.io/v1beta1/…`: NodeMetrics and PodMetrics (objects, lists, Tables)
//! of the nodes and pods that exist and have usage in the [`Store`].
//!
//! # Guarantees
//! - Label and field selectors, namespaces and names select nodes and pods exactly as on
//!   `/api/v1/nodes` and `/api/v1/pods`; the metrics carry the object's labels.
//! - An object without usage is left out of lists; a GET of one is a 404 naming it as
//!   metrics-server does (`pods.metrics.k8s.io "ns/name" not found`).
//! - Only `get` and `list` are served: any other method or a watch is a 405.

use axum::http::{Method, StatusCode};
use axum::response::Response;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Map, Value};

use super::store::Store;
use super::usage::{byte_quantity, go_duration, nano_quantity, Usage};
use crate::http::handlers::json_response;
use crate::http::request::ResourcePath;
use crate::registry::{ListOptions, Target};
use crate::table::{self, TableRequest};
use crate::ApiState;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::request_info::QueryParams;
use k3rs_apimachinery::selector::{FieldSelector, LabelSelector};
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};

const API_VERSION: &str = "metrics.k8s.io/v1beta1";

/// Answers a request for `rp` (a `metrics.k8s.io` resource).
pub async fn answer(
    st: &ApiState,
    rp: &ResourcePath,
    method: &Method,
    query: &QueryParams,
    watch: bool,
    table: Option<TableRequest>,
) -> ApiResult<Response> {
    if method != Method::GET || watch {
        let verb = if watch { "WATCH" } else { method.as_str() };
        return Err(ApiError::method_not_allowed(verb));
    }
    let store = st
        .resource_metrics
        .as_ref()
        .ok_or_else(|| ApiError::unavailable("the metrics API is not served"))?;
    // NodeMetrics are read from nodes, PodMetrics from pods: the same plurals.
    let source =
        catalog::lookup("", "v1", rp.resource.plural).ok_or_else(ApiError::path_not_found)?;
    let mut target = Target {
        resource: source,
        namespace: rp.namespace.clone(),
        name: rp.name.clone(),
        subresource: None,
    };
    let now = Timestamp::now();
    if let Some(name) = &rp.name {
        let shown = match &rp.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.clone(),
        };
        let not_found = || {
            ApiError::not_found(Subject {
                group: rp.resource.group,
                kind: rp.resource.plural,
                name: &shown,
            })
        };
        let obj = st.registry.get(&target).await.map_err(|e| match e.code {
            404 => not_found(),
            _ => e,
        })?;
        let metrics = metrics_of(rp.resource.kind, &obj, store, now).ok_or_else(not_found)?;
        return Ok(json_response(
            StatusCode::OK,
            &table::object_or_table(table, metrics),
        ));
    }
    let opts = ListOptions {
        labels: LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?,
        fields: FieldSelector::parse(query.get("fieldSelector").unwrap_or_default(), source)?,
        ..ListOptions::default()
    };
    target.name = None;
    let objects = st.registry.list(&target, opts).await?;
    let items: Vec<Value> = objects["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| metrics_of(rp.resource.kind, o, store, now))
        .collect();
    let list = json!({
        "kind": format!("{}List", rp.resource.kind),
        "apiVersion": API_VERSION,
        "metadata": {},
        "items": items,
    });
    Ok(json_response(
        StatusCode::OK,
        &table::list_or_table(table, list),
    ))
}

fn usage_json(u: &Usage) -> Value {
    json!({"cpu": nano_quantity(u.nano_cores), "memory": byte_quantity(u.memory_bytes)})
}

/// The NodeMetrics or PodMetrics (`kind`) of `obj` (a Node or Pod), if it has usage.
pub fn metrics_of(kind: &str, obj: &Value, store: &Store, now: Timestamp) -> Option<Value> {
    let name = obj["metadata"]["name"].as_str()?;
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    let namespace = obj["metadata"]["namespace"].as_str();
    if let Some(ns) = namespace {
        metadata.insert("namespace".into(), json!(ns));
    }
    metadata.insert("creationTimestamp".into(), json!(format!("{now:.0}")));
    if let Some(labels) = obj["metadata"]["labels"].as_object() {
        metadata.insert("labels".into(), Value::Object(labels.clone()));
    }
    let mut out = json!({"kind": kind, "apiVersion": API_VERSION, "metadata": metadata});
    match kind {
        "NodeMetrics" => {
            let u = store.node(name)?;
            out["timestamp"] = json!(format!("{:.0}", u.timestamp));
            out["window"] = json!(go_duration(u.window));
            out["usage"] = usage_json(&u);
        }
        _ => {
            let p = store.pod(namespace?, name)?;
            out["timestamp"] = json!(format!("{:.0}", p.timestamp));
            out["window"] = json!(go_duration(p.window));
            out["containers"] = p
                .containers
                .iter()
                .map(|(c, u)| json!({"name": c, "usage": usage_json(u)}))
                .collect();
        }
    }
    Some(out)
}
