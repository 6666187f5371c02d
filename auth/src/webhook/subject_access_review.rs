//! The `Webhook` authorization mode (`--authorization-webhook-config-file`): every request's
//! attributes are sent to the webhook in a `SubjectAccessReview`.
//!
//! # Guarantees
//! - `status.allowed` allows; `status.denied` denies and ends the chain; neither is no
//!   opinion (the next mode decides). `status.reason` is the reason either way.
//! - A failed call (transport, non-2xx, unparsable answer) is no opinion, and is not cached.
//! - Answers are cached per review spec: allowed ones for the authorized TTL, the others for
//!   the unauthorized TTL.
//! - The webhook cannot list a user's rules: `SelfSubjectRulesReview` reports it incomplete.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::cache::TtlCache;
use super::client::WebhookClient;
use super::{AuthorizerWebhookOptions, Version};
use crate::authz::{Authorizer, Decision, Rules};
use crate::{Attributes, UserInfo};

/// The authorizer.
#[derive(Debug)]
pub struct WebhookAuthorizer {
    client: WebhookClient,
    version: Version,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    /// By the review spec's JSON.
    cache: TtlCache<String, Decision>,
}

impl WebhookAuthorizer {
    /// The webhook `opts` configure (its config file must be set).
    pub fn load(
        opts: &AuthorizerWebhookOptions,
    ) -> Result<WebhookAuthorizer, super::client::ConfigError> {
        let path = opts
            .config_file
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        Ok(WebhookAuthorizer {
            client: WebhookClient::load(path)?,
            version: opts.version,
            authorized_ttl: opts.authorized_ttl,
            unauthorized_ttl: opts.unauthorized_ttl,
            cache: TtlCache::default(),
        })
    }

    async fn review(&self, attrs: &Attributes) -> Result<Decision, super::ReviewError> {
        let spec = spec_of(attrs);
        let key = spec.to_string();
        if let Some(hit) = self.cache.get(&key, Instant::now()) {
            return Ok(hit);
        }
        let body = json!({
            "apiVersion": self.version.api_version("authorization.k8s.io"),
            "kind": "SubjectAccessReview",
            "metadata": { "creationTimestamp": null },
            "spec": spec,
            "status": { "allowed": false },
        });
        let answer = self.client.post(body.to_string().as_bytes()).await?;
        let answer: Value =
            serde_json::from_slice(&answer).map_err(|source| super::ReviewError::Decode {
                kind: "SubjectAccessReview",
                source,
            })?;
        let decision = decision_of(&answer);
        let ttl = match decision {
            Decision::Allow => self.authorized_ttl,
            _ => self.unauthorized_ttl,
        };
        self.cache
            .insert(key, decision.clone(), ttl, Instant::now());
        Ok(decision)
    }
}

impl Authorizer for WebhookAuthorizer {
    fn authorize<'a>(&'a self, attrs: &'a Attributes) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            self.review(attrs).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "webhook authorization failed");
                Decision::NoOpinion(String::new())
            })
        })
    }

    fn rules_for(&self, _: &UserInfo, _: &str) -> Rules {
        Rules {
            incomplete: true,
            errors: vec!["webhook authorizer does not support user rule resolution".into()],
            ..Rules::default()
        }
    }
}

/// The review's `spec` for `attrs`.
pub fn spec_of(a: &Attributes) -> Value {
    let mut spec = json!({ "user": a.user.username });
    if !a.user.uid.is_empty() {
        spec["uid"] = json!(a.user.uid);
    }
    if !a.user.groups.is_empty() {
        spec["groups"] = json!(a.user.groups);
    }
    if !a.user.extra.is_empty() {
        spec["extra"] = json!(a.user.extra);
    }
    if a.resource_request {
        let mut r = serde_json::Map::new();
        for (k, v) in [
            ("namespace", &a.namespace),
            ("verb", &a.verb),
            ("group", &a.api_group),
            ("version", &a.api_version),
            ("resource", &a.resource),
            ("subresource", &a.subresource),
            ("name", &a.name),
        ] {
            if !v.is_empty() {
                r.insert(k.into(), json!(v));
            }
        }
        spec["resourceAttributes"] = Value::Object(r);
    } else {
        spec["nonResourceAttributes"] = json!({ "path": a.path, "verb": a.verb });
    }
    spec
}

/// The decision of a `SubjectAccessReview` answer.
pub fn decision_of(answer: &Value) -> Decision {
    let status = &answer["status"];
    let reason = status["reason"].as_str().unwrap_or_default().to_string();
    if status["allowed"] == json!(true) {
        Decision::Allow
    } else if status["denied"] == json!(true) {
        Decision::Deny(reason)
    } else {
        Decision::NoOpinion(reason)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn attrs(method: &str, path: &str) -> Attributes {
        let mut u = UserInfo::authenticated("jane", vec!["dev".into()]);
        u.uid = "42".into();
        u.extra.insert("scopes".into(), vec!["s".into()]);
        Attributes::of_request(Arc::new(u), method, path, None)
    }

    #[test]
    fn resource_and_non_resource_specs() {
        assert_eq!(
            spec_of(&attrs(
                "GET",
                "/apis/apps/v1/namespaces/d/deployments/web/scale"
            )),
            json!({
                "user": "jane", "uid": "42", "groups": ["dev", "system:authenticated"],
                "extra": {"scopes": ["s"]},
                "resourceAttributes": {"namespace": "d", "verb": "get", "group": "apps",
                    "version": "v1", "resource": "deployments", "subresource": "scale",
                    "name": "web"},
            })
        );
        let u = Arc::new(UserInfo::authenticated("bob", vec![]));
        assert_eq!(
            spec_of(&Attributes::of_request(u, "GET", "/healthz", None)),
            json!({"user": "bob", "groups": ["system:authenticated"],
                "nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
        );
    }

    #[test]
    fn decisions() {
        let d = |s: Value| decision_of(&json!({ "status": s }));
        assert_eq!(d(json!({"allowed": true, "reason": "ok"})), Decision::Allow);
        assert_eq!(
            d(json!({"allowed": false, "denied": true, "reason": "no way"})),
            Decision::Deny("no way".into())
        );
        assert_eq!(
            d(json!({"allowed": false, "reason": "ask RBAC"})),
            Decision::NoOpinion("ask RBAC".into())
        );
        assert_eq!(decision_of(&json!({})), Decision::NoOpinion(String::new()));
    }
}
