//! `meta.k8s.io` Tables for `kubectl get`: when the Accept header asks for
//! `application/json;as=Table;v=v1;g=meta.k8s.io` (or `v1beta1`) before plain JSON, GET and
//! LIST answer a Table with kube's columns for the kind ([`printers`]), and watches send one
//! Table per event (column definitions in the first event only, as kube-apiserver does).
//!
//! # Guarantees
//! - Rows carry `includeObject`: `Metadata` (default, a `PartialObjectMetadata`), `Object` (the
//!   full object: kubectl asks for it with `--sort-by`) or `None`.
//! - A request that does not ask for a Table first gets the object or list unchanged.

pub mod admission;
pub mod age;
pub mod apiregistration;
pub mod autoscaling;
pub mod batch;
pub mod cluster;
pub mod core;
pub mod metrics;
pub mod pod;
pub mod printers;
pub mod storage_net;
pub mod workloads;

use axum::body::Bytes;
use axum::http::{header, HeaderMap};
use serde_json::{json, Value};

use crate::http::request::ResourcePath;
use k3rs_apimachinery::request_info::QueryParams;
use k3rs_apimachinery::status::{ApiError, ApiResult};

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
    /// The (group, kind) printed: the resource's, or its `status`/`scale` subresource's.
    pub kind: (&'static str, &'static str),
    /// The custom resource printed (its version's printer columns), if it is one.
    pub custom: Option<&'static k3rs_apimachinery::catalog::Resource>,
}

/// The (group, kind) a request at `rp` answers with, when it can be printed as a Table.
fn printed_kind(rp: &ResourcePath) -> Option<(&'static str, &'static str)> {
    let r = rp.resource;
    match rp.subresource.as_deref() {
        None => Some((r.group, r.kind)),
        Some(name @ ("status" | "scale")) => r
            .subresources
            .iter()
            .find(|s| s.name == name)
            .map(|s| (s.group, s.kind)),
        Some(_) => None,
    }
}

/// The Table the client asked for, if the first media type of its Accept header that this
/// server can produce is a Table (and the request at `rp` reads something printable).
pub fn negotiate(
    headers: &HeaderMap,
    query: &QueryParams,
    rp: &ResourcePath,
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
    let (Some(api_version), Some(kind)) = (api_version, printed_kind(rp)) else {
        return Ok(None);
    };
    let include = match query.get("includeObject") {
        None | Some("") | Some("Metadata") => IncludeObject::Metadata,
        Some("Object") => IncludeObject::Object,
        Some("None") => IncludeObject::None,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "includeObject {other:?} is invalid: use None, Metadata or Object"
            )))
        }
    };
    let custom = match rp.subresource.as_deref() {
        None | Some("status") => {
            crate::resources::custom::version_of(rp.resource).map(|_| rp.resource)
        }
        _ => None,
    };
    Ok(Some(TableRequest {
        api_version,
        include,
        kind,
        custom,
    }))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn row(obj: &Value, req: &TableRequest, now: i64) -> Value {
    let cells = match req.custom.and_then(crate::resources::custom::version_of) {
        Some(cv) => crate::crd::printer::cells(&cv, obj, now),
        None => (printers::printer_for(req.kind.0, req.kind.1).cells)(obj, now),
    };
    let mut row = json!({ "cells": cells });
    if req.kind == ("", "Pod") {
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

fn table(items: &[Value], metadata: Value, req: &TableRequest, headers: bool, now: i64) -> Value {
    let rows = items.iter().map(|o| row(o, req, now)).collect();
    table_of_rows(rows, metadata, req, headers)
}

fn table_of_rows(rows: Vec<Value>, metadata: Value, req: &TableRequest, headers: bool) -> Value {
    let mut t = json!({
        "kind": "Table",
        "apiVersion": req.api_version,
        "metadata": metadata,
        "rows": rows,
    });
    if headers {
        t["columnDefinitions"] = match req.custom.and_then(crate::resources::custom::version_of) {
            Some(cv) => crate::crd::printer::columns(&cv).into(),
            None => {
                let columns = printers::printer_for(req.kind.0, req.kind.1).columns;
                columns
                    .iter()
                    .copied()
                    .map(printers::Column::to_json)
                    .collect()
            }
        };
    } else {
        t["columnDefinitions"] = Value::Null;
    }
    t
}

/// The Table of one object (GET).
pub fn of_object(obj: &Value, req: &TableRequest) -> Value {
    let meta = json!({ "resourceVersion": obj["metadata"]["resourceVersion"] });
    table(std::slice::from_ref(obj), meta, req, true, now())
}

/// The Table of a list (LIST): the list's metadata (resourceVersion, continue) is kept.
pub fn of_list(list: &Value, req: &TableRequest) -> Value {
    let items = list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    table(items, list["metadata"].clone(), req, true, now())
}

/// The Table of a list read item by item: each object becomes its row as it comes, so only
/// the rows are held (with `includeObject=Metadata`, kubectl's default, a fraction of the
/// objects), never the whole list of objects.
#[derive(Debug)]
pub struct ListTable {
    req: TableRequest,
    now: i64,
    rows: Vec<Value>,
}

impl ListTable {
    pub fn new(req: TableRequest) -> ListTable {
        ListTable {
            req,
            now: now(),
            rows: Vec::new(),
        }
    }

    /// Adds the row of the list's next object.
    pub fn push(&mut self, obj: &Value) {
        self.rows.push(row(obj, &self.req, self.now));
    }

    /// The Table, with the list's `metadata` (resourceVersion, continue).
    pub fn finish(self, metadata: Value) -> Value {
        table_of_rows(self.rows, metadata, &self.req, true)
    }
}

/// The answer to a GET: `obj`, or its Table when one was asked for.
pub fn object_or_table(req: Option<TableRequest>, obj: Value) -> Value {
    match req {
        Some(t) => of_object(&obj, &t),
        None => obj,
    }
}

/// The answer to a LIST: `list`, or its Table when one was asked for.
pub fn list_or_table(req: Option<TableRequest>, list: Value) -> Value {
    match req {
        Some(t) => of_list(&list, &t),
        None => list,
    }
}

/// Rewrites watch events (JSON lines) so their objects are Tables.
#[derive(Debug)]
pub struct WatchTables {
    req: TableRequest,
    first: bool,
}

impl WatchTables {
    pub fn new(req: TableRequest) -> WatchTables {
        WatchTables { req, first: true }
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
    use crate::http::request::{parse, ApiPath};
    use axum::http::HeaderValue;

    const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        h
    }

    fn q(pairs: &[(&str, &str)]) -> QueryParams {
        QueryParams::from_pairs(pairs.iter().copied())
    }

    fn rp(path: &str) -> ResourcePath {
        match parse(path).unwrap() {
            ApiPath::Resource(rp) => rp,
            other => panic!("{other:?}"),
        }
    }

    fn cms() -> ResourcePath {
        rp("/api/v1/namespaces/default/configmaps")
    }

    fn negotiated(accept: &str, query: &[(&str, &str)]) -> Option<TableRequest> {
        negotiate(&headers(accept), &q(query), &cms()).unwrap()
    }

    #[test]
    fn negotiation() {
        assert_eq!(
            negotiated(KUBECTL_ACCEPT, &[]),
            Some(TableRequest {
                api_version: "meta.k8s.io/v1",
                include: IncludeObject::Metadata,
                kind: ("", "ConfigMap"),
                custom: None,
            })
        );
        let beta = "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json";
        assert_eq!(
            negotiated(beta, &[]).unwrap().api_version,
            "meta.k8s.io/v1beta1"
        );
        assert_eq!(negotiated("application/json", &[]), None);
        assert_eq!(negotiate(&HeaderMap::new(), &q(&[]), &cms()).unwrap(), None);
        let json_first = "application/json, application/json;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(negotiated(json_first, &[]), None);
        let o = negotiated(KUBECTL_ACCEPT, &[("includeObject", "Object")]).unwrap();
        assert_eq!(o.include, IncludeObject::Object);
        assert!(negotiate(
            &headers(KUBECTL_ACCEPT),
            &q(&[("includeObject", "All")]),
            &cms()
        )
        .is_err());
    }

    #[test]
    fn subresources_print_their_kind() {
        let kind = |path: &str| {
            negotiate(&headers(KUBECTL_ACCEPT), &q(&[]), &rp(path))
                .unwrap()
                .map(|t| t.kind)
        };
        let scale = kind("/apis/apps/v1/namespaces/d/deployments/web/scale");
        assert_eq!(scale, Some(("autoscaling", "Scale")));
        let status = kind("/apis/apps/v1/namespaces/d/deployments/web/status");
        assert_eq!(status, Some(("apps", "Deployment")));
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "resourceVersion": "7", "labels": {"a": "b"},
                            "creationTimestamp": "2024-01-01T00:00:00Z"},
               "data": {"k": "v"}})
    }

    fn req(include: IncludeObject) -> TableRequest {
        TableRequest {
            api_version: "meta.k8s.io/v1",
            include,
            kind: ("", "ConfigMap"),
            custom: None,
        }
    }

    #[test]
    fn list_tables_keep_list_metadata_and_partial_objects() {
        let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": "9", "continue": "c"}, "items": [cm("a"), cm("b")]});
        let t = of_list(&list, &req(IncludeObject::Metadata));
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
        assert_eq!(t["rows"][1]["cells"][0], "b");
        assert_eq!(t["rows"][1]["cells"][1], 1);
        assert_eq!(
            t["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": cm("a")["metadata"]})
        );
        let full = of_object(&cm("a"), &req(IncludeObject::Object));
        assert_eq!(full["rows"][0]["object"], cm("a"));
        assert_eq!(full["metadata"]["resourceVersion"], "7");
        let none = of_object(&cm("a"), &req(IncludeObject::None));
        assert!(none["rows"][0].get("object").is_none());
    }

    #[test]
    fn a_table_built_row_by_row_is_the_table_of_the_whole_list() {
        let metadata = json!({"resourceVersion": "9", "continue": "c", "remainingItemCount": 4});
        for include in [
            IncludeObject::None,
            IncludeObject::Metadata,
            IncludeObject::Object,
        ] {
            for n in [0, 1, 3] {
                let items: Vec<Value> = (0..n).map(|i| cm(&format!("cm-{i}"))).collect();
                let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                                  "metadata": metadata, "items": items});
                let mut rows = ListTable::new(req(include));
                for item in &items {
                    rows.push(item);
                }
                let mut streamed = rows.finish(metadata.clone());
                let mut whole = of_list(&list, &req(include));
                // Ages are computed from "now" when each is built: equal unless the clock
                // ticked between the two; the cells are compared without it.
                for t in [&mut streamed, &mut whole] {
                    for row in t["rows"].as_array_mut().unwrap() {
                        row["cells"].as_array_mut().unwrap().pop();
                    }
                }
                assert_eq!(streamed, whole, "{include:?} {n}");
            }
        }
    }

    #[test]
    fn watch_events_become_tables_with_headers_once() {
        let mut w = WatchTables::new(req(IncludeObject::Metadata));
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
