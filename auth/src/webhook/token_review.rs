//! Webhook token authentication (`--authentication-token-webhook-config-file`): a bearer
//! token no earlier authenticator recognised is sent to the webhook in a `TokenReview`, and
//! its `status.user` becomes the request's user.
//!
//! # Guarantees
//! - The review carries `spec.token` and the API server's audiences (`spec.audiences`); an
//!   answer naming audiences authenticates only if one of them is the API server's.
//! - Answers (authenticated or not) are cached per token and audiences for the cache TTL;
//!   failures (transport, non-2xx, unparsable answers) are not cached and are 401.
//! - A token the webhook does not authenticate is left to the chain (upstream: no user, no
//!   error), so it ends as 401, never anonymous.

use super::ReviewError;
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::cache::TtlCache;
use super::client::WebhookClient;
use super::{TokenWebhookOptions, Version};
use crate::authn::{Authenticator, AuthnRequest, Outcome};
use crate::UserInfo;

/// The authenticator.
#[derive(Debug)]
pub struct TokenWebhook {
    client: WebhookClient,
    version: Version,
    ttl: std::time::Duration,
    audiences: Vec<String>,
    /// By SHA-256 of the token (never the token itself): the user, or `None` (not
    /// authenticated).
    cache: TtlCache<[u8; 32], Option<UserInfo>>,
}

impl TokenWebhook {
    /// The webhook `opts` configure (its config file must be set), for an API server whose
    /// audiences are `audiences`.
    pub fn load(
        opts: &TokenWebhookOptions,
        audiences: Vec<String>,
    ) -> Result<TokenWebhook, super::client::ConfigError> {
        let path = opts
            .config_file
            .as_deref()
            .unwrap_or(std::path::Path::new(""));
        Ok(TokenWebhook {
            client: WebhookClient::load(path)?,
            version: opts.version,
            ttl: opts.cache_ttl,
            audiences,
            cache: TtlCache::default(),
        })
    }

    async fn review(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cache.get(&key, Instant::now()) {
            return Ok(hit);
        }
        let body = review_body(self.version, token, &self.audiences);
        let answer = self.client.post(body.to_string().as_bytes()).await?;
        let answer: Value =
            serde_json::from_slice(&answer).map_err(|source| ReviewError::Decode {
                kind: "TokenReview",
                source,
            })?;
        let user = user_of(&answer, &self.audiences)?;
        self.cache
            .insert(key, user.clone(), self.ttl, Instant::now());
        Ok(user)
    }
}

impl Authenticator for TokenWebhook {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let Some(token) = req.bearer_token() else {
                return Outcome::NotApplicable;
            };
            match self.review(token).await {
                Ok(Some(u)) => Outcome::Authenticated(u),
                Ok(None) => Outcome::NotApplicable,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook token authentication failed");
                    Outcome::Rejected(e.to_string())
                }
            }
        })
    }
}

/// The `TokenReview` POSTed for `token`.
pub fn review_body(version: Version, token: &str, audiences: &[String]) -> Value {
    let mut spec = json!({ "token": token });
    if !audiences.is_empty() {
        spec["audiences"] = json!(audiences);
    }
    json!({
        "apiVersion": version.api_version("authentication.k8s.io"),
        "kind": "TokenReview",
        "metadata": { "creationTimestamp": null },
        "spec": spec,
        "status": { "user": {} },
    })
}

/// The user a `TokenReview` answer authenticates: `Ok(None)` when `status.authenticated` is
/// not true, `Err` for an answer reporting an error or naming none of `audiences`.
pub fn user_of(answer: &Value, audiences: &[String]) -> Result<Option<UserInfo>, ReviewError> {
    let status = &answer["status"];
    if status["authenticated"] != json!(true) {
        return match status["error"].as_str().filter(|e| !e.is_empty()) {
            Some(e) => Err(ReviewError::Reported(e.to_string())),
            None => Ok(None),
        };
    }
    if let Some(got) = status["audiences"].as_array().filter(|a| !a.is_empty()) {
        let ok = got
            .iter()
            .filter_map(Value::as_str)
            .any(|a| audiences.iter().any(|w| w == a));
        if !ok && !audiences.is_empty() {
            return Err(ReviewError::OtherAudiences);
        }
    }
    let u = &status["user"];
    let strings = crate::access_review::strings;
    let extra = u["extra"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
        .unwrap_or_default();
    Ok(Some(UserInfo {
        username: u["username"].as_str().unwrap_or_default().to_string(),
        uid: u["uid"].as_str().unwrap_or_default().to_string(),
        groups: strings(&u["groups"]),
        extra,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auds() -> Vec<String> {
        vec![
            "https://kubernetes.default.svc.cluster.local".into(),
            "k3s".into(),
        ]
    }

    #[test]
    fn the_review_sent() {
        assert_eq!(
            review_body(Version::V1, "tok", &auds()),
            json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "metadata": {"creationTimestamp": null},
                "spec": {"token": "tok", "audiences": ["https://kubernetes.default.svc.cluster.local", "k3s"]},
                "status": {"user": {}},
            })
        );
        assert_eq!(
            review_body(Version::V1beta1, "t", &[])["apiVersion"],
            "authentication.k8s.io/v1beta1"
        );
        assert_eq!(
            review_body(Version::V1beta1, "t", &[])["spec"],
            json!({"token": "t"})
        );
    }

    #[test]
    fn answers_to_users() {
        let answer = json!({"status": {"authenticated": true, "user": {
            "username": "jane", "uid": "42", "groups": ["dev", "ops"],
            "extra": {"scopes": ["a", "b"]}}}});
        let u = user_of(&answer, &auds()).unwrap().unwrap();
        assert_eq!(u.username, "jane");
        assert_eq!(u.uid, "42");
        assert_eq!(u.groups, ["dev", "ops"]);
        assert_eq!(u.extra["scopes"], ["a", "b"]);
        assert!(matches!(
            user_of(&json!({"status": {"authenticated": false}}), &auds()),
            Ok(None)
        ));
        assert!(matches!(user_of(&json!({}), &auds()), Ok(None)));
        assert_eq!(
            user_of(
                &json!({"status": {"authenticated": false, "error": "db down"}}),
                &auds()
            )
            .map_err(|e| e.to_string()),
            Err("the webhook: db down".into())
        );
    }

    #[test]
    fn answered_audiences_must_meet_ours() {
        let with = |a: Value| json!({"status": {"authenticated": true, "audiences": a, "user": {"username": "x"}}});
        assert!(user_of(&with(json!(["k3s"])), &auds()).unwrap().is_some());
        assert!(user_of(&with(json!([])), &auds()).unwrap().is_some());
        assert_eq!(
            user_of(&with(json!(["other"])), &auds()).map_err(|e| e.to_string()),
            Err("the webhook authenticated the token for other audiences".into())
        );
    }
}
