//! Per-kind strategies: defaulting and validation beyond the generic metadata rules, and
//! what a create resets. Pure functions over the JSON object; unit-tested with exact values.

mod apps;
mod namespace;
mod pod;
mod service;

use serde_json::Value;

use super::catalog::Resource;
use crate::apiserver::status::Cause;

pub use pod::default_pod_spec;

/// Applies the kind's defaults (kube-apiserver's `SetDefaults_*`).
pub fn apply_defaults(r: &Resource, obj: &mut Value) {
    match (r.group, r.kind) {
        ("", "Pod") => pod::defaults(obj),
        ("", "Service") => service::defaults(obj),
        ("", "Namespace") => namespace::defaults(obj),
        ("apps", "Deployment") => apps::deployment_defaults(obj),
        ("apps", "ReplicaSet") => apps::replicaset_defaults(obj),
        _ => {}
    }
}

/// What a create resets: status of resources with a status subresource (to the kind's
/// initial status).
pub fn prepare_for_create(r: &Resource, obj: &mut Value) {
    if r.has_status {
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    }
    match (r.group, r.kind) {
        ("", "Pod") => obj["status"] = serde_json::json!({ "phase": "Pending" }),
        ("", "Namespace") => obj["status"] = serde_json::json!({ "phase": "Active" }),
        ("", "Service") => {
            obj["status"] = serde_json::json!({ "loadBalancer": {} });
        }
        _ => {}
    }
}

/// Kind-specific validation; field paths are kube-apiserver's.
pub fn validate(r: &Resource, obj: &Value) -> Vec<Cause> {
    match (r.group, r.kind) {
        ("", "Pod") => pod::validate_spec(&obj["spec"], "spec"),
        ("", "Service") => service::validate(obj),
        ("", "ConfigMap") => config_keys(obj, &["data", "binaryData"]),
        ("", "Secret") => config_keys(obj, &["data", "stringData"]),
        ("apps", "Deployment") | ("apps", "ReplicaSet") => apps::validate(obj),
        _ => Vec::new(),
    }
}

/// ConfigMap/Secret keys: `[-._a-zA-Z0-9]+`, at most 253 characters.
fn config_keys(obj: &Value, fields: &[&str]) -> Vec<Cause> {
    let mut causes = Vec::new();
    for f in fields {
        if let Some(m) = obj.get(*f).and_then(Value::as_object) {
            for k in m.keys() {
                let ok = !k.is_empty()
                    && k.len() <= 253
                    && k != "."
                    && k != ".."
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
                if !ok {
                    causes.push(Cause::invalid(
                        *f,
                        k,
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
            }
        }
    }
    causes
}

/// Sets `obj[key]` to `value` unless present (and not null).
pub(crate) fn default_field(obj: &mut Value, key: &str, value: Value) {
    if let Some(o) = obj.as_object_mut() {
        let slot = o.entry(key.to_string()).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}
