//! The webhooks of Validating/MutatingWebhookConfigurations as the plugins use them: parsed
//! from the stored JSON once per object version, match conditions compiled once.
//!
//! # Guarantees
//! - [`parse`] never fails: what cannot be used (a selector, a match condition that no
//!   longer compiles, a bad CA bundle) becomes the webhook's [`Webhook::config_error`],
//!   which the plugins treat as a failed call under the webhook's `failurePolicy`.

use std::time::Duration;

use serde_json::Value;

use crate::admission::validating_policy::model::{Expr, MatchResources};

/// Where a webhook is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook of a configuration.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub name: String,
    pub endpoint: Endpoint,
    /// `clientConfig.caBundle` (PEM); the system roots when empty.
    pub ca_bundle: Vec<u8>,
    pub matching: MatchResources,
    /// `failurePolicy: Ignore` (errors admit) rather than `Fail`.
    pub ignore_failures: bool,
    /// `sideEffects: None | NoneOnDryRun`: may be called for dry-run requests.
    pub dry_run_safe: bool,
    pub timeout: Duration,
    pub match_conditions: Vec<Expr>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub reinvoke_if_needed: bool,
    pub config_error: Option<String>,
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn endpoint(cc: &Value) -> Endpoint {
    let svc = &cc["service"];
    if svc.is_object() {
        Endpoint::Service {
            namespace: str_of(&svc["namespace"]),
            name: str_of(&svc["name"]),
            path: svc["path"].as_str().unwrap_or("/").to_string(),
            port: svc["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        }
    } else {
        Endpoint::Url(str_of(&cc["url"]))
    }
}

/// A `caBundle` that is not base64.
#[derive(Debug, thiserror::Error)]
#[error("clientConfig.caBundle: {0}")]
struct CaBundleError(#[source] base64::DecodeError);

fn ca_bundle(cc: &Value) -> Result<Vec<u8>, CaBundleError> {
    use base64::Engine;
    match cc["caBundle"].as_str() {
        None | Some("") => Ok(Vec::new()),
        Some(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(CaBundleError),
    }
}

/// Parses the webhooks of a stored configuration.
pub fn parse(obj: &Value) -> Vec<Webhook> {
    obj["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(parse_one)
        .collect()
}

fn parse_one(w: &Value) -> Webhook {
    let mut errors = Vec::new();
    let mut selectors = serde_json::Map::new();
    for key in ["namespaceSelector", "objectSelector", "matchPolicy"] {
        selectors.insert(key.into(), w[key].clone());
    }
    selectors.insert("resourceRules".into(), w["rules"].clone());
    let matching = MatchResources::parse(&Value::Object(selectors)).unwrap_or_else(|e| {
        errors.push(e.to_string());
        MatchResources::default()
    });
    let mut match_conditions = Vec::new();
    for (i, c) in w["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let source = c["expression"].as_str().unwrap_or("");
        match crate::admission::validating_policy::model::compile(source, false) {
            Ok(program) => match_conditions.push(Expr {
                name: str_of(&c["name"]),
                source: source.to_string(),
                program,
            }),
            Err(e) => errors.push(format!("matchConditions[{i}].expression: {e}")),
        }
    }
    let ca_bundle = ca_bundle(&w["clientConfig"]).unwrap_or_else(|e| {
        errors.push(e.to_string());
        Vec::new()
    });
    Webhook {
        name: str_of(&w["name"]),
        endpoint: endpoint(&w["clientConfig"]),
        ca_bundle,
        matching,
        ignore_failures: w["failurePolicy"].as_str() == Some("Ignore"),
        dry_run_safe: matches!(w["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")),
        timeout: Duration::from_secs(w["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
        match_conditions,
        reinvoke_if_needed: w["reinvocationPolicy"].as_str() == Some("IfNeeded"),
        config_error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_webhooks() {
        let ws = parse(&json!({"webhooks": [
            {"name": "a.example.com", "clientConfig": {"url": "https://127.0.0.1:9443/v"},
             "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["configmaps"]}],
             "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 3,
             "reinvocationPolicy": "IfNeeded",
             "matchConditions": [{"name": "c", "expression": "object != null"}]},
            {"name": "b.example.com", "clientConfig": {"service": {"namespace": "hooks",
                "name": "svc"}, "caBundle": "!!"}, "sideEffects": "Some",
             "matchConditions": [{"name": "bad", "expression": "1 +"}]}]}));
        let a = &ws[0];
        assert_eq!(a.endpoint, Endpoint::Url("https://127.0.0.1:9443/v".into()));
        assert!(a.ignore_failures && a.dry_run_safe && a.reinvoke_if_needed);
        assert_eq!(a.timeout, Duration::from_secs(3));
        assert_eq!(a.matching.resource_rules[0].resources, ["configmaps"]);
        assert!(a.config_error.is_none());
        let b = &ws[1];
        assert_eq!(
            b.endpoint,
            Endpoint::Service {
                namespace: "hooks".into(),
                name: "svc".into(),
                path: "/".into(),
                port: 443
            }
        );
        assert!(!b.ignore_failures && !b.dry_run_safe && !b.reinvoke_if_needed);
        assert_eq!(b.timeout, Duration::from_secs(10));
        let e = b.config_error.as_deref().unwrap();
        assert!(
            e.contains("matchConditions[0].expression") && e.contains("caBundle"),
            "{e}"
        );
    }
}
