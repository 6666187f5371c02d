//! Defaults and validation of Validating/MutatingWebhookConfigurations (kube's
//! `SetDefaults_ValidatingWebhook`/`MutatingWebhook` and `ValidateValidatingWebhookConfiguration`).
//!
//! # Guarantees
//! - Defaults: `failurePolicy: Fail`, `matchPolicy: Equivalent`, empty selectors,
//!   `timeoutSeconds: 10`, rule `scope: "*"`, service `port: 443`, and for mutating webhooks
//!   `reinvocationPolicy: Never`.
//! - Each webhook needs a unique name, exactly one of `clientConfig.url` (https, no query,
//!   fragment or user) and `clientConfig.service` (name and namespace), `sideEffects` `None`
//!   or `NoneOnDryRun`, `admissionReviewVersions` naming `v1`, a timeout of 1–30 s, valid
//!   rules and selectors, and match conditions that compile.

use serde_json::{json, Value};

use crate::admission::validating_policy::definition::{
    expression_causes, not_supported, rule_causes, selector_causes,
};
use crate::resources::strategy::default_field;
use k3rs_apimachinery::status::Cause;

/// The defaults of every webhook of `obj`.
pub fn defaults(obj: &mut Value, mutating: bool) {
    for w in obj["webhooks"].as_array_mut().into_iter().flatten() {
        default_field(w, "failurePolicy", json!("Fail"));
        default_field(w, "matchPolicy", json!("Equivalent"));
        default_field(w, "namespaceSelector", json!({}));
        default_field(w, "objectSelector", json!({}));
        default_field(w, "timeoutSeconds", json!(10));
        if mutating {
            default_field(w, "reinvocationPolicy", json!("Never"));
        }
        for r in w["rules"].as_array_mut().into_iter().flatten() {
            default_field(r, "scope", json!("*"));
        }
        if let Some(svc) = w["clientConfig"]
            .get_mut("service")
            .filter(|s| s.is_object())
        {
            default_field(svc, "port", json!(443));
        }
    }
}

fn client_config_causes(cc: &Value, at: &str, out: &mut Vec<Cause>) {
    match (cc["url"].as_str(), cc["service"].is_object()) {
        (Some(_), true) | (None, false) => out.push(Cause::required(
            at,
            "exactly one of url or service is required",
        )),
        (Some(url), false) => {
            let why = if !url.starts_with("https://") {
                Some("'https' is the only allowed URL scheme")
            } else if url.contains('?') {
                Some("query parameters are not allowed")
            } else if url.contains('#') {
                Some("fragments are not allowed")
            } else if url["https://".len()..]
                .split('/')
                .next()
                .is_some_and(|h| h.contains('@'))
            {
                Some("user information is not allowed")
            } else if url.len() <= "https://".len() {
                Some("host must be specified")
            } else {
                None
            };
            if let Some(why) = why {
                out.push(Cause::invalid(format!("{at}.url"), url, why));
            }
        }
        (None, true) => {
            let svc = &cc["service"];
            for key in ["name", "namespace"] {
                if svc[key].as_str().unwrap_or("").is_empty() {
                    out.push(Cause::required(format!("{at}.service.{key}"), ""));
                }
            }
            if let Some(p) = svc["port"].as_i64() {
                if !(1..=65535).contains(&p) {
                    out.push(Cause::invalid(
                        format!("{at}.service.port"),
                        &p.to_string(),
                        "port is not valid: must be between 1 and 65535, inclusive",
                    ));
                }
            }
            if let Some(path) = svc["path"].as_str() {
                if !path.starts_with('/') {
                    out.push(Cause::invalid(
                        format!("{at}.service.path"),
                        path,
                        "must start with a '/'",
                    ));
                }
            }
        }
    }
}

fn webhook_causes(w: &Value, at: &str, out: &mut Vec<Cause>) {
    let name = w["name"].as_str().unwrap_or("");
    if name.is_empty() {
        out.push(Cause::required(format!("{at}.name"), ""));
    } else if name.split('.').count() < 3 {
        out.push(Cause::invalid(
            format!("{at}.name"),
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
    client_config_causes(&w["clientConfig"], &format!("{at}.clientConfig"), out);
    for (i, r) in w["rules"].as_array().into_iter().flatten().enumerate() {
        rule_causes(r, &format!("{at}.rules[{i}]"), out);
    }
    not_supported(
        &w["failurePolicy"],
        format!("{at}.failurePolicy"),
        &["Fail", "Ignore"],
        out,
    );
    not_supported(
        &w["matchPolicy"],
        format!("{at}.matchPolicy"),
        &["Equivalent", "Exact"],
        out,
    );
    not_supported(
        &w["sideEffects"],
        format!("{at}.sideEffects"),
        &["None", "NoneOnDryRun"],
        out,
    );
    selector_causes(
        &w["namespaceSelector"],
        format!("{at}.namespaceSelector"),
        out,
    );
    selector_causes(&w["objectSelector"], format!("{at}.objectSelector"), out);
    let versions: Vec<&str> = w["admissionReviewVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if versions.is_empty() {
        out.push(Cause::required(
            format!("{at}.admissionReviewVersions"),
            "must specify one of v1, v1beta1",
        ));
    } else if !versions.contains(&"v1") {
        out.push(Cause::invalid(
            format!("{at}.admissionReviewVersions"),
            &format!("[{}]", versions.join(" ")),
            "must include at least one of v1 (the version this server sends)",
        ));
    }
    if let Some(t) = w["timeoutSeconds"].as_i64() {
        if !(1..=30).contains(&t) {
            out.push(Cause::invalid(
                format!("{at}.timeoutSeconds"),
                &t.to_string(),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
    }
    for (i, c) in w["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{at}.matchConditions[{i}]");
        if c["name"].as_str().unwrap_or("").is_empty() {
            out.push(Cause::required(format!("{at}.name"), ""));
        }
        expression_causes(&c["expression"], format!("{at}.expression"), false, out);
    }
}

/// The validation causes of a configuration.
pub fn validate(obj: &Value, mutating: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, w) in obj["webhooks"].as_array().into_iter().flatten().enumerate() {
        let at = format!("webhooks[{i}]");
        webhook_causes(w, &at, &mut out);
        if mutating {
            if let Some(p) = w.get("reinvocationPolicy") {
                not_supported(
                    p,
                    format!("{at}.reinvocationPolicy"),
                    &["IfNeeded", "Never"],
                    &mut out,
                );
            }
        }
        let name = w["name"].as_str().unwrap_or("");
        if !name.is_empty() && names.contains(&name) {
            out.push(Cause::duplicate(format!("{at}.name"), name));
        }
        names.push(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::strategy::fields;

    fn config(webhook: Value) -> Value {
        let mut c = json!({"metadata": {"name": "c"}, "webhooks": [webhook]});
        defaults(&mut c, true);
        c
    }

    #[test]
    fn defaults_are_upstreams_and_a_good_webhook_passes() {
        let c = config(json!({"name": "a.example.com",
            "clientConfig": {"service": {"namespace": "n", "name": "s"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}));
        let w = &c["webhooks"][0];
        assert_eq!(w["failurePolicy"], "Fail");
        assert_eq!(w["matchPolicy"], "Equivalent");
        assert_eq!(w["timeoutSeconds"], 10);
        assert_eq!(w["reinvocationPolicy"], "Never");
        assert_eq!(w["rules"][0]["scope"], "*");
        assert_eq!(w["clientConfig"]["service"]["port"], 443);
        assert!(validate(&c, true).is_empty(), "{:?}", validate(&c, true));
    }

    #[test]
    fn bad_webhooks_name_their_fields() {
        let c = config(json!({"name": "short",
            "clientConfig": {"url": "http://example.com/x?y=1"},
            "sideEffects": "Some", "admissionReviewVersions": ["v1beta1"],
            "timeoutSeconds": 31,
            "matchConditions": [{"name": "c", "expression": "object.x =="}]}));
        assert_eq!(
            fields(validate(&c, true)),
            vec![
                "webhooks[0].name",
                "webhooks[0].clientConfig.url",
                "webhooks[0].sideEffects",
                "webhooks[0].admissionReviewVersions",
                "webhooks[0].timeoutSeconds",
                "webhooks[0].matchConditions[0].expression",
            ]
        );
        let c = config(json!({"name": "a.example.com", "clientConfig": {},
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}));
        assert_eq!(
            fields(validate(&c, false)),
            vec!["webhooks[0].clientConfig"]
        );
    }
}
