//! `meta.k8s.io` Tables for `kubectl get`: when the Accept header asks for
//! `application/json;as=Table;v=v1;g=meta.k8s.io` (or `v1beta1`) before plain JSON, GET and
//! LIST answer a Table with kube's columns for the kind ([`printers`]), and watches send one
//! Table per event (column definitions in the first event only, as kube-apiserver does).
//!
//! # Guarantees
//! - Rows carry `includeObject`: `Metadata` (default, a `PartialObjectMetadata`), `Object` (the
//!   full object: kubectl asks for it with `--sort-by`) or `None`.
//! - A request that does not ask for a Table first gets the object or list unchanged.

pub mod age;
pub mod batch;
pub mod cluster;
pub mod core;
pub mod pod;
pub mod printers;
pub mod storage_net;
pub mod workloads;

use std::collections::HashMap;

use axum::body::Bytes;
use axum::http::{header, HeaderMap};
use serde_json::{json, Value};

use crate::apiserver::resources::catalog::Resource;
use crate::apiserver::status::{ApiError, ApiResult};

/// What each row carries besides its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

/// A request for Table output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableRequest {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as asked.
    pub api_version: &'static str,
    pub include: IncludeObject,
}

/// The Table the client asked for, if the first media type of its Accept header that this
/// server can produce is a Table.
pub fn negotiate(
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> ApiResult<Option<TableRequest>> {
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|m| m.replace(' ', ""));
    let mut api_version = None;
    for media in accept {
        let mut parts = media.split(';');
        let base = parts.next().unwrap_or("");
        let params: Vec<&str> = parts.collect();
        let is_table = params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io");
        if is_table && (base == "application/json" || base == "*/*") {
            if params.contains(&"v=v1") {
                api_version = Some("meta.k8s.io/v1");
                break;
            }
            if params.contains(&"v=v1beta1") {
                api_version = Some("meta.k8s.io/v1beta1");
                break;
            }
            continue;
        }
        if !params.iter().any(|p| p.starts_with("as=")) {
            // Plain JSON (or YAML, protobuf, */*) comes first: no Table.
            break;
        }
    }
    let Some(api_version) = api_version else {
        return Ok(None);
    };
    let include = match query.get("includeObject").map(String::as_str) {
        None | Some("") | Some("Metadata") => IncludeObject::Metadata,
        Some("Object") => IncludeObject::Object,
        Some("None") => IncludeObject::None,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "includeObject {other:?} is invalid: use None, Metadata or Object"
            )))
        }
    };
    Ok(Some(TableRequest {
        api_version,
        include,
    }))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn row(r: &Resource, obj: &Value, req: &TableRequest, now: i64) -> Value {
    let printer = printers::printer_for(r.group, r.kind);
    let mut row = json!({ "cells": (printer.cells)(obj, now) });
    if r.group.is_empty() && r.kind == "Pod" {
        if let Some(c) = pod::row_conditions(obj) {
            row["conditions"] = c;
        }
    }
    match req.include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": req.api_version,
                "metadata": obj["metadata"],
            });
        }
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    row
}

fn table(
    r: &Resource,
    items: &[Value],
    metadata: Value,
    req: &TableRequest,
    headers: bool,
    now: i64,
) -> Value {
    let mut t = json!({
        "kind": "Table",
        "apiVersion": req.api_version,
        "metadata": metadata,
        "rows": items.iter().map(|o| row(r, o, req, now)).collect::<Vec<_>>(),
    });
    if headers {
        let columns = printers::printer_for(r.group, r.kind).columns;
        t["columnDefinitions"] = columns.iter().map(printers::Column::to_json).collect();
    } else {
        t["columnDefinitions"] = Value::Null;
    }
    t
}

/// The Table of one object (GET).
pub fn of_object(r: &Resource, obj: &Value, req: &TableRequest) -> Value {
    let meta = json!({ "resourceVersion": obj["metadata"]["resourceVersion"] });
    table(r, std::slice::from_ref(obj), meta, req, true, now())
}

/// The Table of a list (LIST): the list's metadata (resourceVersion, continue) is kept.
pub fn of_list(r: &Resource, list: &Value, req: &TableRequest) -> Value {
    let items = list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    table(r, items, list["metadata"].clone(), req, true, now())
}

/// The answer to a GET: `obj`, or its Table when one was asked for.
pub fn object_or_table(req: Option<TableRequest>, r: &Resource, obj: Value) -> Value {
    match req {
        Some(t) => of_object(r, &obj, &t),
        None => obj,
    }
}

/// The answer to a LIST: `list`, or its Table when one was asked for.
pub fn list_or_table(req: Option<TableRequest>, r: &Resource, list: Value) -> Value {
    match req {
        Some(t) => of_list(r, &list, &t),
        None => list,
    }
}

/// Rewrites watch events (JSON lines) so their objects are Tables.
#[derive(Debug)]
pub struct WatchTables {
    resource: &'static Resource,
    req: TableRequest,
    first: bool,
}

impl WatchTables {
    pub fn new(resource: &'static Resource, req: TableRequest) -> WatchTables {
        WatchTables {
            resource,
            req,
            first: true,
        }
    }

    /// One serialized event (or several, one per line) in, the same events with Table
    /// objects out. ERROR and BOOKMARK events pass unchanged.
    pub fn transform(&mut self, chunk: Bytes) -> Bytes {
        let mut out = Vec::with_capacity(chunk.len());
        for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<Value>(line) {
                Ok(mut ev)
                    if matches!(ev["type"].as_str(), Some("ADDED" | "MODIFIED" | "DELETED")) =>
                {
                    let obj = ev["object"].take();
                    let meta = json!({ "resourceVersion": obj["metadata"]["resourceVersion"] });
                    ev["object"] = table(
                        self.resource,
                        std::slice::from_ref(&obj),
                        meta,
                        &self.req,
                        self.first,
                        now(),
                    );
                    self.first = false;
                    out.extend_from_slice(ev.to_string().as_bytes());
                }
                _ => out.extend_from_slice(line),
            }
            out.push(b'\n');
        }
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::catalog::lookup;
    use axum::http::HeaderValue;

    const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        h
    }

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn negotiation() {
        let t = negotiate(&headers(KUBECTL_ACCEPT), &q(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(
            t,
            TableRequest {
                api_version: "meta.k8s.io/v1",
                include: IncludeObject::Metadata
            }
        );
        let beta = "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json";
        assert_eq!(
            negotiate(&headers(beta), &q(&[]))
                .unwrap()
                .unwrap()
                .api_version,
            "meta.k8s.io/v1beta1"
        );
        assert_eq!(
            negotiate(&headers("application/json"), &q(&[])).unwrap(),
            None
        );
        assert_eq!(negotiate(&HeaderMap::new(), &q(&[])).unwrap(), None);
        assert_eq!(
            negotiate(
                &headers("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"),
                &q(&[])
            )
            .unwrap(),
            None
        );
        let o = negotiate(&headers(KUBECTL_ACCEPT), &q(&[("includeObject", "Object")]))
            .unwrap()
            .unwrap();
        assert_eq!(o.include, IncludeObject::Object);
        assert!(negotiate(&headers(KUBECTL_ACCEPT), &q(&[("includeObject", "All")])).is_err());
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "resourceVersion": "7", "labels": {"a": "b"},
                            "creationTimestamp": "2024-01-01T00:00:00Z"},
               "data": {"k": "v"}})
    }

    #[test]
    fn list_tables_keep_list_metadata_and_partial_objects() {
        let r = lookup("", "v1", "configmaps").unwrap();
        let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": "9", "continue": "c"}, "items": [cm("a"), cm("b")]});
        let req = TableRequest {
            api_version: "meta.k8s.io/v1",
            include: IncludeObject::Metadata,
        };
        let t = of_list(r, &list, &req);
        assert_eq!(t["kind"], "Table");
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "9", "continue": "c"})
        );
        let names: Vec<_> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].clone())
            .collect();
        assert_eq!(names, [json!("Name"), json!("Data"), json!("Age")]);
        assert_eq!(
            t["rows"][1]["cells"],
            json!(["b", 1, t["rows"][1]["cells"][2]])
        );
        assert_eq!(
            t["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": cm("a")["metadata"]})
        );
        let full = of_object(
            r,
            &cm("a"),
            &TableRequest {
                include: IncludeObject::Object,
                ..req
            },
        );
        assert_eq!(full["rows"][0]["object"], cm("a"));
        assert_eq!(full["metadata"]["resourceVersion"], "7");
        let none = of_object(
            r,
            &cm("a"),
            &TableRequest {
                include: IncludeObject::None,
                ..req
            },
        );
        assert!(none["rows"][0].get("object").is_none());
    }

    #[test]
    fn watch_events_become_tables_with_headers_once() {
        let r = lookup("", "v1", "configmaps").unwrap();
        let req = TableRequest {
            api_version: "meta.k8s.io/v1",
            include: IncludeObject::Metadata,
        };
        let mut w = WatchTables::new(r, req);
        let ev = |t: &str, o: Value| format!("{}\n", json!({"type": t, "object": o}));
        let first = w.transform(Bytes::from(ev("ADDED", cm("a")) + &ev("MODIFIED", cm("a"))));
        let lines: Vec<Value> = first
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["object"]["kind"], "Table");
        assert!(lines[0]["object"]["columnDefinitions"].is_array());
        assert!(lines[1]["object"]["columnDefinitions"].is_null());
        assert_eq!(lines[1]["object"]["rows"][0]["cells"][0], "a");
        let bookmark = ev(
            "BOOKMARK",
            json!({"kind": "ConfigMap", "metadata": {"resourceVersion": "9"}}),
        );
        assert_eq!(
            w.transform(Bytes::from(bookmark.clone())),
            Bytes::from(bookmark)
        );
    }
}
