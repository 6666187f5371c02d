//! The resource handler: one entry point for every `/api` and `/apis` path, dispatching on
//! the parsed path and the method to discovery or the registry.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use super::body;
use super::request::{self, ApiPath, ResourcePath};
use crate::discovery;
use crate::metrics::RequestLabels;
use crate::registry::{
    managed_fields, DeleteOptions, ListOptions, RvMatch, Target, WatchOptions, WriteOptions,
};
use crate::{crd, openapi, table, ApiState};
use k3rs_apimachinery::request_info::QueryParams;
use k3rs_apimachinery::selector::{FieldSelector, LabelSelector};
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_auth::UserInfo;

/// Default watch length when the client sets no `timeoutSeconds` (kube: 30–60 min).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

pub fn json_response(code: StatusCode, v: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// Every `/api…` and `/apis…` request.
pub async fn api(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    if let Some((node, kubelet_path)) = super::connect::node_proxy_path(&path) {
        let mut resp = super::connect::node(&st, &node, &kubelet_path, req)
            .await
            .unwrap_or_else(|e| e.into_response());
        resp.extensions_mut().insert(RequestLabels {
            verb: "CONNECT",
            resource: "nodes",
        });
        return resp;
    }
    if let Some((agg, backend)) = st
        .aggregator
        .as_ref()
        .and_then(|a| Some((a, a.backend_for(&path)?)))
    {
        let user = req
            .extensions()
            .get::<Arc<UserInfo>>()
            .map(|u| (**u).clone())
            .unwrap_or_else(UserInfo::anonymous);
        return crate::aggregator::proxy::serve(agg, &st.registry, &backend, &user, req).await;
    }
    if let Some(resp) = discovery::aggregated_group(&st, &path) {
        return resp;
    }
    let parsed = match request::parse(&path) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    match parsed {
        ApiPath::Root { legacy } => discovery::root(&st, legacy, req.headers()),
        ApiPath::Group { group } => discovery::group(&st, &group),
        ApiPath::GroupVersion { group, version } => discovery::resource_list(&group, &version),
        ApiPath::Resource(rp) => {
            let verb = verb_of(req.method(), &rp, &request::info_of(&req).query);
            let resource = rp.resource.plural;
            let protobuf = super::protobuf::preferred(req.headers());
            // Custom resources have no protobuf form: their watches stay JSON (client-go
            // reads the stream's Content-Type).
            let builtin = crate::resources::custom::version_of(rp.resource).is_none();
            let mut resp = match resource_request(&st, rp, req).await {
                Ok(r) => r,
                Err(e) => e.into_response(),
            };
            if protobuf && verb == "WATCH" && builtin {
                resp = super::protobuf::watch::respond(resp).await;
            } else if protobuf && verb != "WATCH" {
                resp = super::protobuf::respond(resp).await;
            }
            resp.extensions_mut()
                .insert(RequestLabels { verb, resource });
            resp
        }
    }
}

/// kube-apiserver's verb names for metrics.
fn verb_of(method: &Method, rp: &ResourcePath, query: &QueryParams) -> &'static str {
    let watch = rp.legacy_watch || query.flag("watch");
    match (method.as_str(), rp.name.is_some()) {
        ("GET", _) if watch => "WATCH",
        ("GET", true) => "GET",
        ("GET", false) => "LIST",
        ("POST", _) => "POST",
        ("PUT", _) => "PUT",
        ("PATCH", _) => "PATCH",
        ("DELETE", true) => "DELETE",
        ("DELETE", false) => "DELETECOLLECTION",
        _ => "OTHER",
    }
}

fn write_options(q: &QueryParams, user: &User) -> ApiResult<WriteOptions> {
    let dry_run = match q.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dryRun value {other:?}: supported values: \"All\""
            )))
        }
    };
    Ok(WriteOptions {
        dry_run,
        field_manager: None,
        user: user.clone(),
    })
}

/// [`write_options`] of a create, update or patch, which records its field manager.
fn managed_write_options(q: &QueryParams, req: &Request, user: &User) -> ApiResult<WriteOptions> {
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    Ok(WriteOptions {
        field_manager: Some(managed_fields::manager_of(
            q.get("fieldManager"),
            user_agent,
        )),
        ..write_options(q, user)?
    })
}

fn list_options(q: &QueryParams, rp: &ResourcePath) -> ApiResult<ListOptions> {
    let mut fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or_default(), rp.resource)?;
    if let (true, Some(name)) = (rp.legacy_watch, &rp.name) {
        fields
            .requirements
            .push(k3rs_apimachinery::selector::field::FieldRequirement {
                field: "metadata.name".into(),
                path: "metadata.name".into(),
                value: name.clone(),
                equal: true,
            });
    }
    let limit = match q.get("limit") {
        None | Some("") => 0,
        Some(l) => l
            .parse::<i64>()
            .ok()
            .filter(|l| *l >= 0)
            .ok_or_else(|| ApiError::bad_request(format!("invalid limit {l:?}")))?,
    };
    let rv_match = match q.get("resourceVersionMatch") {
        None | Some("") => RvMatch::Unset,
        Some("NotOlderThan") => RvMatch::NotOlderThan,
        Some("Exact") => RvMatch::Exact,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch {other:?} is not supported: use NotOlderThan or Exact"
            )))
        }
    };
    Ok(ListOptions {
        labels: LabelSelector::parse(q.get("labelSelector").unwrap_or_default())?,
        fields,
        limit,
        continue_token: q.get("continue").map(str::to_string),
        resource_version: q.get("resourceVersion").map(str::to_string),
        rv_match,
    })
}

async fn read_object(req: Request, rp: &ResourcePath) -> ApiResult<Value> {
    let media = body::content_type(req.headers());
    if media.contains("patch") {
        return Err(ApiError::unsupported_media_type(&media));
    }
    let bytes = body::read(req.into_body()).await?;
    let mut obj = body::parse(&media, &bytes)?;
    let (gv, kind) = body::expected_kind(rp.resource, rp.subresource.as_deref());
    body::check_kind(&mut obj, &gv, &kind)?;
    Ok(obj)
}

fn delete_options(q: &QueryParams, body: Option<&Value>, user: &User) -> ApiResult<DeleteOptions> {
    let mut o = DeleteOptions {
        write: write_options(q, user)?,
        ..Default::default()
    };
    if let Some(b) = body {
        o.grace_period_seconds = b["gracePeriodSeconds"].as_i64();
        o.propagation_policy = b["propagationPolicy"].as_str().map(str::to_string);
        o.precondition_uid = b["preconditions"]["uid"].as_str().map(str::to_string);
        o.precondition_resource_version = b["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
        if b["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"))
        {
            o.write.dry_run = true;
        }
        if b["orphanDependents"] == Value::Bool(true) && o.propagation_policy.is_none() {
            o.propagation_policy = Some("Orphan".into());
        }
    }
    if let Some(g) = q.get("gracePeriodSeconds") {
        o.grace_period_seconds = Some(
            g.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?,
        );
    }
    if let Some(p) = q.get("propagationPolicy") {
        o.propagation_policy = Some(p.to_string());
    }
    Ok(o)
}

/// The authenticated user (absent only in unit tests that call handlers directly).
type User = Option<Arc<UserInfo>>;

async fn resource_request(
    st: &Arc<ApiState>,
    rp: ResourcePath,
    req: Request,
) -> ApiResult<Response> {
    let info = request::info_of(&req);
    let q = &info.query;
    let user: User = req.extensions().get::<Arc<UserInfo>>().cloned();
    let target = Target {
        resource: rp.resource,
        namespace: rp.namespace.clone(),
        name: rp.name.clone(),
        subresource: rp.subresource.clone(),
    };
    let reg = &st.registry;
    let method = req.method().clone();
    let sub = rp.subresource.as_deref();
    let watch = rp.legacy_watch || q.flag("watch");
    let table = table::negotiate(req.headers(), q, &rp)?;
    if rp.resource.group == "metrics.k8s.io" {
        return crate::resource_metrics::serve::answer(st, &rp, &method, q, watch, table).await;
    }
    if let Some(s) = rp
        .subresource
        .as_deref()
        .and_then(|s| rp.resource.subresources.iter().find(|x| x.name == s))
    {
        let verb = match method.as_str() {
            "GET" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "POST" => "create",
            _ => "",
        };
        if !s.verbs.contains(&verb) {
            return Err(ApiError::method_not_allowed(method.as_str()));
        }
    }
    if let Some(s @ ("log" | "exec" | "attach" | "portforward")) = sub {
        return super::connect::pod(st, &target, s, req).await;
    }
    match (method, rp.name.is_some()) {
        (Method::GET, _) if watch => {
            if q.get("sendInitialEvents").is_some_and(|v| !v.is_empty()) {
                return Err(ApiError::invalid(
                    target.kind_subject(""),
                    vec![k3rs_apimachinery::status::Cause::forbidden(
                        "sendInitialEvents",
                        "sendInitialEvents is not supported by this server",
                    )],
                ));
            }
            if rp.name.is_some() && !rp.legacy_watch {
                return Err(ApiError::method_not_allowed("watch of a single object"));
            }
            let timeout =
                match q.get("timeoutSeconds") {
                    Some(t) => Duration::from_secs(t.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid timeoutSeconds {t:?}"))
                    })?),
                    None => DEFAULT_WATCH_TIMEOUT,
                };
            let opts = WatchOptions {
                filter: list_options(q, &rp)?,
                resource_version: q.get("resourceVersion").map(str::to_string),
                timeout,
                bookmarks: q.flag("allowWatchBookmarks"),
            };
            let mut target = target;
            target.name = None;
            let rx = reg.clone().watch(target, opts, st.stop.clone()).await?;
            let mut tables = table.map(table::WatchTables::new);
            let resource = rp.resource;
            let stream = tokio_stream::wrappers::ReceiverStream::new(rx)
                .map(move |ev| crd::read::watch_lines(resource, ev))
                .map(move |ev| match &mut tables {
                    Some(t) => t.transform(ev),
                    None => ev,
                })
                .map(Ok::<_, std::convert::Infallible>);
            Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CACHE_CONTROL, "no-cache, private")
                .body(Body::from_stream(stream))
                .unwrap_or_else(|_| {
                    ApiError::internal("building the watch response").into_response()
                }))
        }
        (Method::GET, true) => {
            let obj = if sub == Some("scale") {
                reg.get_scale(&target).await?
            } else {
                let mut obj = reg.get(&target).await?;
                crd::read::object(rp.resource, &mut obj);
                obj
            };
            let obj = table::object_or_table(table, obj);
            Ok(json_response(StatusCode::OK, &obj))
        }
        (Method::GET, false) => {
            let mut pager = reg.list_pager(&target, list_options(q, &rp)?).await?;
            let Some(wanted) = table else {
                let builtin = crate::resources::custom::version_of(rp.resource).is_none();
                if builtin && super::protobuf::preferred(req.headers()) {
                    return Ok(super::list_body::protobuf_response(pager, rp.resource).await);
                }
                return Ok(super::list_body::response(pager, rp.resource));
            };
            // A Table's metadata precedes its rows, so it is sent whole; it holds the rows,
            // not the objects (kubectl also pages it: `--chunk-size`, 500 by default).
            let mut rows = table::ListTable::new(wanted);
            while let Some(mut obj) = pager.next_item().await? {
                crd::read::object(rp.resource, &mut obj);
                rows.push(&obj);
            }
            Ok(json_response(
                StatusCode::OK,
                &rows.finish(pager.metadata()),
            ))
        }
        (Method::POST, false) if rp.resource.group == "authorization.k8s.io" => {
            if rp.resource.namespaced && rp.namespace.is_none() {
                return Err(ApiError::method_not_allowed("POST"));
            }
            let mut obj = read_object(req, &rp).await?;
            let warnings = openapi::check_body(q, &rp, &mut obj)?;
            let out = k3rs_auth::access_review::create(
                &st.authz,
                rp.resource.kind,
                rp.namespace.as_deref(),
                obj,
                user.as_deref(),
            )
            .await?;
            let resp = json_response(StatusCode::CREATED, &out);
            Ok(openapi::with_warnings(resp, &warnings))
        }
        (Method::POST, false) if rp.resource.group == "authentication.k8s.io" => {
            let mut obj = read_object(req, &rp).await?;
            let warnings = openapi::check_body(q, &rp, &mut obj)?;
            let out = crate::reviews::create(st, rp.resource.kind, obj, user.as_deref()).await?;
            let resp = json_response(StatusCode::CREATED, &out);
            Ok(openapi::with_warnings(resp, &warnings))
        }
        (Method::POST, false) => {
            if rp.resource.namespaced && rp.namespace.is_none() {
                return Err(ApiError::method_not_allowed("POST"));
            }
            let opts = managed_write_options(q, &req, &user)?;
            let mut obj = read_object(req, &rp).await?;
            let warnings = openapi::check_body(q, &rp, &mut obj)?;
            let created = reg.create(&target, obj, opts).await?;
            let resp = json_response(StatusCode::CREATED, &created);
            Ok(openapi::with_warnings(resp, &warnings))
        }
        (Method::POST, true) if sub == Some("binding") => {
            let opts = write_options(q, &user)?;
            let mut obj = read_object(req, &rp).await?;
            let warnings = openapi::check_body(q, &rp, &mut obj)?;
            let status = reg.bind_pod(&target, obj, opts).await?;
            let resp = json_response(StatusCode::CREATED, &status);
            Ok(openapi::with_warnings(resp, &warnings))
        }
        (Method::POST, true) if sub == Some("token") => {
            let sa = st
                .service_accounts
                .as_ref()
                .ok_or_else(|| ApiError::unavailable("service-account tokens are not served"))?;
            let mut obj = read_object(req, &rp).await?;
            let warnings = openapi::check_body(q, &rp, &mut obj)?;
            let out = k3rs_auth::serviceaccount::token_request::create(
                sa,
                user.as_deref(),
                rp.namespace.as_deref().unwrap_or_default(),
                target.name(),
                obj,
                k3rs_auth::serviceaccount::authenticator::unix_now(),
            )
            .await?;
            let resp = json_response(StatusCode::CREATED, &out);
            Ok(openapi::with_warnings(resp, &warnings))
        }
        (Method::POST, true) if sub == Some("eviction") => {
            let mut obj = read_object(req, &rp).await?;
            let warnings = openapi::check_body(q, &rp, &mut obj)?;
            let delete_body = obj.get("deleteOptions").filter(|d| d.is_object());
            let opts = delete_options(q, delete_body, &user)?;
            let status = reg.evict_pod(&target, &obj, opts).await?;
            let resp = json_response(StatusCode::CREATED, &status);
            Ok(openapi::with_warnings(resp, &warnings))
        }
        (Method::PUT, true) => {
            let opts = managed_write_options(q, &req, &user)?;
            let mut obj = read_object(req, &rp).await?;
            let warnings = openapi::check_body(q, &rp, &mut obj)?;
            let updated = if sub == Some("scale") {
                reg.update_scale(&target, obj, opts).await?
            } else {
                reg.update(&target, obj, opts).await?
            };
            let resp = json_response(StatusCode::OK, &updated);
            Ok(openapi::with_warnings(resp, &warnings))
        }
        (Method::DELETE, true) if sub.is_none() => {
            let b = read_delete_body(req).await?;
            let opts = delete_options(q, b.as_ref(), &user)?;
            let deleted = reg.delete(&target, &opts).await?;
            Ok(json_response(
                StatusCode::OK,
                &deleted.answer(target.resource),
            ))
        }
        (Method::DELETE, false) => {
            let list = list_options(q, &rp)?;
            let b = read_delete_body(req).await?;
            let opts = delete_options(q, b.as_ref(), &user)?;
            let out = reg.delete_collection(&target, list, &opts).await?;
            Ok(json_response(StatusCode::OK, &out))
        }
        (Method::PATCH, true) => {
            let media = body::content_type(req.headers());
            let kind = k3rs_patch::PatchType::from_content_type(&media).map_err(|e| ApiError {
                code: 415,
                reason: "UnsupportedMediaType",
                message: e.to_string(),
                details: None,
            })?;
            if kind == k3rs_patch::PatchType::StrategicMerge
                && crate::resources::custom::version_of(rp.resource).is_some()
            {
                return Err(ApiError {
                    code: 415,
                    reason: "UnsupportedMediaType",
                    message: "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
                    details: None,
                });
            }
            let opts = crate::registry::PatchOptions {
                field_manager: q.get("fieldManager").map(str::to_string),
                force: q.flag("force"),
                write: managed_write_options(q, &req, &user)?,
            };
            let bytes = body::read(req.into_body()).await?;
            openapi::check_patch_body(q, &rp, kind, &bytes)?;
            let patched = reg.patch(&target, kind, &bytes, &opts).await?;
            Ok(json_response(StatusCode::OK, &patched))
        }
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

async fn read_delete_body(req: Request) -> ApiResult<Option<Value>> {
    let media = body::content_type(req.headers());
    let bytes = body::read(req.into_body()).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    body::parse(&media, &bytes).map(Some)
}
