//! The audit filter's I/O: decides a request's audit level once it is authenticated, writes
//! its events at the policy's stages, captures request/response bodies for the `Request` and
//! `RequestResponse` levels. The decisions are in [`crate::audit`].

use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

use crate::audit::event::{self, micro_time};
use crate::audit::{Auditor, Decision, Event, Level, Stage};
use k3rs_apimachinery::tls::PeerAddr;
use k3rs_auth::{Attributes, UserInfo};

/// Bodies larger than this are not copied into events.
const MAX_CAPTURED_BODY: usize = 16 * 1024 * 1024;

/// Subresources served as long-running requests (kube-apiserver's).
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "proxy", "log", "portforward"];

/// One request being audited.
#[derive(Debug)]
pub struct Audit {
    auditor: Arc<Auditor>,
    decision: Decision,
    event: Event,
    long_running: bool,
}

fn now() -> String {
    micro_time(SystemTime::now())
}

fn received(auditor: &Arc<Auditor>, req: &Request, user: Arc<UserInfo>) -> Option<Audit> {
    let path = req.uri().path();
    let attrs = Attributes::of(user, &super::request::info_of(req));
    let decision = auditor.policy.evaluate(&attrs);
    if decision.level == Level::None {
        return None;
    }
    let headers = req.headers();
    let audit_id = headers
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let peer = req.extensions().get::<PeerAddr>().map(|p| p.0.ip());
    let user_agent = headers
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let uri = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| path.to_string());
    let event = Event::received(
        decision.level,
        audit_id,
        uri,
        &attrs,
        event::source_ips(headers, peer),
        user_agent,
        &now(),
    );
    let long_running = attrs.verb == "watch"
        || attrs.verb == "proxy"
        || (attrs.resource_request
            && LONG_RUNNING_SUBRESOURCES.contains(&attrs.subresource.as_str()));
    Some(Audit {
        auditor: auditor.clone(),
        decision,
        event,
        long_running,
    })
}

/// Starts auditing a request of `user` (the authenticated one): `None` when the policy does
/// not log it. Writes the `RequestReceived` event.
pub fn begin(auditor: &Arc<Auditor>, req: &Request, user: Arc<UserInfo>) -> Option<Audit> {
    let a = received(auditor, req, user)?;
    if a.decision.logs(Stage::RequestReceived) {
        a.auditor.emit(&a.event);
    }
    Some(a)
}

/// The event of a request whose credentials were refused (kube-apiserver logs it at
/// `ResponseStarted` with the 401, for a policy that selects requests without a user).
pub fn unauthenticated(auditor: &Arc<Auditor>, req: &Request, resp: &Response) {
    let Some(a) = received(auditor, req, Arc::new(UserInfo::default())) else {
        return;
    };
    if a.decision.logs(Stage::ResponseStarted) {
        let mut e = a.event.at(Stage::ResponseStarted, &now());
        e.response_status = Some(serde_json::json!({
            "metadata": {}, "status": "Failure", "message": "Unauthorized",
            "reason": "Unauthorized", "code": resp.status().as_u16()
        }));
        a.auditor.emit(&e);
    }
}

impl Audit {
    /// Records who the request acts as after impersonation.
    pub fn impersonated(&mut self, user: &UserInfo) {
        self.event.impersonated_user = Some(user.clone());
    }

    /// Adds an annotation (e.g. the authorization decision).
    pub fn annotate(&mut self, key: &str, value: impl Into<String>) {
        self.event.annotations.insert(key.to_string(), value.into());
    }

    /// For `Request` and up: reads the body into the event (JSON bodies only) and gives the
    /// request back with the same body. At `Metadata`, a body is read only to complete an
    /// objectRef without a name (a create), as upstream's `LogRequestObject` does.
    pub async fn capture_request(&mut self, req: Request) -> Request {
        let wants_body = self.decision.level >= Level::Request;
        let unnamed = self
            .event
            .object_ref
            .as_ref()
            .is_some_and(|r| r.name.is_empty());
        if self.long_running || !(wants_body || unnamed) || req.method() == axum::http::Method::GET
        {
            return req;
        }
        let (parts, body) = req.into_parts();
        match axum::body::to_bytes(body, MAX_CAPTURED_BODY).await {
            Ok(bytes) => {
                if let Some(v) = decode(&parts.headers, &bytes) {
                    // A create names its object in the body (upstream completes the
                    // objectRef from it).
                    if let Some(r) = self.event.object_ref.as_mut() {
                        let meta = |k: &str| {
                            v.pointer(&format!("/metadata/{k}"))
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string()
                        };
                        if r.name.is_empty() {
                            r.name = meta("name");
                        }
                        if r.namespace.is_empty() {
                            r.namespace = meta("namespace");
                        }
                    }
                    if wants_body {
                        self.event.request_object = Some(self.trimmed(v));
                    }
                }
                Request::from_parts(parts, Body::from(bytes))
            }
            // Too large: the handler answers 413 on its own reading anyway.
            Err(_) => Request::from_parts(parts, Body::empty()),
        }
    }

    fn trimmed(&self, v: Value) -> Value {
        if self.decision.omit_managed_fields {
            event::without_managed_fields(v)
        } else {
            v
        }
    }

    /// Writes the response's events (`ResponseStarted` for long-running requests, then
    /// `ResponseComplete` when the body ends) and sets the `Audit-Id` header.
    pub async fn finish(mut self, resp: Response) -> Response {
        let (mut parts, body) = resp.into_parts();
        if let Ok(v) = HeaderValue::from_str(&self.event.audit_id) {
            parts.headers.insert("audit-id", v);
        }
        let code = parts.status.as_u16();
        if self.long_running {
            self.event.response_status = Some(event::response_status(code, None));
            if self.decision.logs(Stage::ResponseStarted) {
                self.auditor
                    .emit(&self.event.at(Stage::ResponseStarted, &now()));
            }
            let done = Completion(Some(self));
            let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
                let _ = &done;
                chunk
            }));
            return Response::from_parts(parts, body);
        }
        let capture = code >= 400 || self.decision.level == Level::RequestResponse;
        let body = if capture {
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            let parsed = decode(&parts.headers, &bytes);
            self.event.response_status = Some(event::response_status(code, parsed.as_ref()));
            if self.decision.level == Level::RequestResponse {
                self.event.response_object = parsed.map(|v| self.trimmed(v));
            }
            Body::from(bytes)
        } else {
            self.event.response_status = Some(event::response_status(code, None));
            body
        };
        if self.decision.logs(Stage::ResponseComplete) {
            self.auditor
                .emit(&self.event.at(Stage::ResponseComplete, &now()));
        }
        Response::from_parts(parts, body)
    }
}

/// A body as JSON: JSON, YAML or protobuf objects, JSON patches.
fn decode(headers: &axum::http::HeaderMap, bytes: &[u8]) -> Option<Value> {
    super::body::parse(&super::body::content_type(headers), bytes)
        .ok()
        .or_else(|| serde_json::from_slice(bytes).ok())
}

/// Writes a long-running request's `ResponseComplete` when its body is dropped (finished or
/// abandoned by the client).
struct Completion(Option<Audit>);

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            if a.decision.logs(Stage::ResponseComplete) {
                a.auditor.emit(&a.event.at(Stage::ResponseComplete, &now()));
            }
        }
    }
}
