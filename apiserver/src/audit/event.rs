//! `audit.k8s.io/v1 Event`: what one audit log line says about a request at one stage.
//! Pure: the HTTP layer supplies what it saw, this shapes it as kube-apiserver does.

use std::collections::BTreeMap;
use std::net::IpAddr;

use axum::http::HeaderMap;
use serde::Serialize;
use serde_json::Value;

use super::policy::{Level, Stage};
use k3rs_auth::{Attributes, UserInfo};

/// `ObjectReference` of an audit event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

impl ObjectRef {
    /// The object of a resource request; `None` for non-resource requests.
    pub fn of(a: &Attributes) -> Option<ObjectRef> {
        a.resource_request.then(|| ObjectRef {
            resource: a.resource.clone(),
            namespace: a.namespace.clone(),
            name: a.name.clone(),
            api_group: a.api_group.clone(),
            api_version: a.api_version.clone(),
            subresource: a.subresource.clone(),
        })
    }
}

/// One audit event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub level: &'static str,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: &'static str,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    #[serde(rename = "sourceIPs")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    pub request_received_timestamp: String,
    pub stage_timestamp: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// The event of a request as received (stage `RequestReceived`; the caller sets the
    /// others). `user` is the authenticated user (before impersonation).
    pub fn received(
        level: Level,
        audit_id: String,
        request_uri: String,
        attrs: &Attributes,
        source_ips: Vec<String>,
        user_agent: String,
        now: &str,
    ) -> Event {
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: level.as_str(),
            audit_id,
            stage: Stage::RequestReceived.as_str(),
            request_uri,
            verb: attrs.verb.clone(),
            user: (*attrs.user).clone(),
            impersonated_user: None,
            source_ips,
            user_agent,
            object_ref: ObjectRef::of(attrs),
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: now.to_string(),
            stage_timestamp: now.to_string(),
            annotations: BTreeMap::new(),
        }
    }

    /// This event at `stage`, at `now`.
    pub fn at(&self, stage: Stage, now: &str) -> Event {
        Event {
            stage: stage.as_str(),
            stage_timestamp: now.to_string(),
            ..self.clone()
        }
    }
}

/// `responseStatus`: the `Status` the server answered with when it is one (failures),
/// otherwise `{metadata: {}, code}`.
pub fn response_status(code: u16, body: Option<&Value>) -> Value {
    match body {
        Some(b) if b.get("kind").and_then(Value::as_str) == Some("Status") => {
            let mut s = serde_json::Map::new();
            s.insert("metadata".into(), serde_json::json!({}));
            for key in ["status", "message", "reason", "details"] {
                if let Some(v) = b.get(key) {
                    s.insert(key.into(), v.clone());
                }
            }
            s.insert("code".into(), code.into());
            Value::Object(s)
        }
        _ => serde_json::json!({"metadata": {}, "code": code}),
    }
}

/// The client's addresses as kube-apiserver lists them: `X-Forwarded-For`, then
/// `X-Real-Ip`, then the connection's peer, without repeats.
pub fn source_ips(headers: &HeaderMap, peer: Option<IpAddr>) -> Vec<String> {
    let mut ips: Vec<IpAddr> = Vec::new();
    let mut push = |ip: IpAddr| {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    };
    if let Some(v) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        v.split(',')
            .filter_map(|p| p.trim().parse().ok())
            .for_each(&mut push);
    }
    if let Some(ip) = headers
        .get("x-real-ip")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
    {
        push(ip);
    }
    if let Some(ip) = peer {
        push(ip);
    }
    ips.iter().map(IpAddr::to_string).collect()
}

/// `obj` without `metadata.managedFields` (its items' too, for lists).
pub fn without_managed_fields(mut obj: Value) -> Value {
    fn strip(o: &mut Value) {
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
    }
    strip(&mut obj);
    if let Some(items) = obj.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(strip);
    }
    obj
}

/// A time as `MicroTime` (`2006-01-02T15:04:05.000000Z`, UTC).
pub fn micro_time(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let ts =
        jiff::Timestamp::from_second(d.as_secs() as i64).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    format!(
        "{}.{:06}Z",
        ts.strftime("%Y-%m-%dT%H:%M:%S"),
        d.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn event_json_has_upstream_field_names() {
        let attrs = Attributes::of_request(
            Arc::new(UserInfo::authenticated("alice", vec!["dev".into()])),
            "GET",
            "/apis/apps/v1/namespaces/d/deployments/web",
            None,
        );
        let e = Event::received(
            Level::Metadata,
            "id-1".into(),
            "/apis/apps/v1/namespaces/d/deployments/web?x=1".into(),
            &attrs,
            vec!["127.0.0.1".into()],
            "kubectl/v1.32".into(),
            "2026-01-02T03:04:05.000006Z",
        );
        let mut done = e.at(Stage::ResponseComplete, "2026-01-02T03:04:06.000000Z");
        done.response_status = Some(response_status(200, None));
        assert_eq!(
            serde_json::to_value(&done).unwrap(),
            serde_json::json!({
                "kind": "Event",
                "apiVersion": "audit.k8s.io/v1",
                "level": "Metadata",
                "auditID": "id-1",
                "stage": "ResponseComplete",
                "requestURI": "/apis/apps/v1/namespaces/d/deployments/web?x=1",
                "verb": "get",
                "user": {"username": "alice", "groups": ["dev", "system:authenticated"]},
                "sourceIPs": ["127.0.0.1"],
                "userAgent": "kubectl/v1.32",
                "objectRef": {"resource": "deployments", "namespace": "d", "name": "web",
                              "apiGroup": "apps", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "code": 200},
                "requestReceivedTimestamp": "2026-01-02T03:04:05.000006Z",
                "stageTimestamp": "2026-01-02T03:04:06.000000Z",
            })
        );
        let nr = Attributes::of_request(Arc::new(UserInfo::anonymous()), "GET", "/version", None);
        let e = Event::received(
            Level::Metadata,
            "i".into(),
            "/version".into(),
            &nr,
            vec![],
            String::new(),
            "t",
        );
        assert_eq!(e.object_ref, None);
        assert_eq!(e.verb, "get");
    }

    #[test]
    fn failures_carry_their_status() {
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods \"x\" not found", "reason": "NotFound",
            "details": {"name": "x", "kind": "pods"}, "code": 404
        });
        assert_eq!(
            response_status(404, Some(&body)),
            serde_json::json!({"metadata": {}, "status": "Failure",
                "message": "pods \"x\" not found", "reason": "NotFound",
                "details": {"name": "x", "kind": "pods"}, "code": 404})
        );
        assert_eq!(
            response_status(201, Some(&serde_json::json!({"kind": "Pod"}))),
            serde_json::json!({"metadata": {}, "code": 201})
        );
    }

    #[test]
    fn source_ips_in_upstream_order() {
        let mut h = HeaderMap::new();
        let peer = Some("10.0.0.9".parse().unwrap());
        assert_eq!(source_ips(&h, peer), ["10.0.0.9"]);
        h.insert(
            "x-forwarded-for",
            "1.2.3.4, bogus, 10.0.0.9".parse().unwrap(),
        );
        h.insert("x-real-ip", "5.6.7.8".parse().unwrap());
        assert_eq!(source_ips(&h, peer), ["1.2.3.4", "10.0.0.9", "5.6.7.8"]);
    }

    #[test]
    fn managed_fields_are_dropped_from_objects_and_items() {
        let v = serde_json::json!({"metadata": {"name": "a", "managedFields": [1]},
            "items": [{"metadata": {"managedFields": [2], "name": "b"}}]});
        assert_eq!(
            without_managed_fields(v),
            serde_json::json!({"metadata": {"name": "a"}, "items": [{"metadata": {"name": "b"}}]})
        );
    }

    #[test]
    fn micro_time_format() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_123_456);
        assert_eq!(micro_time(t), "2023-11-14T22:13:20.123456Z");
    }
}
