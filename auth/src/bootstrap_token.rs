//! Bootstrap tokens (kube-apiserver's `--enable-bootstrap-token-auth`): a bearer token
//! `<id>.<secret>` (`[a-z0-9]{6}.[a-z0-9]{16}`) names the Secret `bootstrap-token-<id>` of type
//! `bootstrap.kubernetes.io/token` in `kube-system`, which says whether, until when and as which
//! groups it authenticates.
//!
//! # Guarantees
//! - The user is `system:bootstrap:<id>` in `system:bootstrappers` plus the Secret's
//!   `auth-extra-groups` (each must start with `system:bootstrappers:`), sorted and without
//!   duplicates, as upstream's authenticator returns them.
//! - A token authenticates only if its Secret exists, is not being deleted, has the right type,
//!   `token-id`, `token-secret` (compared in constant time), `usage-bootstrap-authentication:
//!   "true"` and no past (or unparseable) `expiration`. Otherwise the authenticator has no
//!   opinion, as upstream's: a bearer token nobody recognises is 401.
//! - A token not of the bootstrap shape is left to the next authenticator.
//!
//! The Secret is read through the registry: one read of one key, and only for bearer tokens
//! of this shape (joining nodes), never for certificate or service-account requests.

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine;
use futures::future::BoxFuture;
use serde_json::Value;

use super::authn::{Authenticator, AuthnRequest, Outcome};
use super::user::UserInfo;

/// Namespace of the token Secrets.
pub const NAMESPACE: &str = "kube-system";
/// Prefix of a token Secret's name (`bootstrap-token-<id>`).
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// Type of a token Secret.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// Prefix of the user a token authenticates as.
pub const USER_PREFIX: &str = "system:bootstrap:";
/// Group of every bootstrap token user.
pub const GROUP: &str = "system:bootstrappers";
/// Extra groups must start with this.
pub const EXTRA_GROUP_PREFIX: &str = "system:bootstrappers:";

/// Keys of a token Secret's `data`.
pub mod keys {
    /// The token's 6-character public id (the `<id>` of `<id>.<secret>`).
    pub const TOKEN_ID: &str = "token-id";
    /// The token's 16-character secret.
    pub const TOKEN_SECRET: &str = "token-secret";
    /// RFC 3339 time after which the token is refused; absent: never expires; unparsable:
    /// expired.
    pub const EXPIRATION: &str = "expiration";
    /// Human-readable note on what the token is for.
    pub const DESCRIPTION: &str = "description";
    /// Comma-separated extra groups (each `system:bootstrappers:…`) the token's user gets.
    pub const EXTRA_GROUPS: &str = "auth-extra-groups";
    /// Prefix of the `usage-bootstrap-<usage>` keys.
    pub const USAGE_PREFIX: &str = "usage-bootstrap-";
    /// `"true"` when the token may authenticate to the API server.
    pub(crate) const USAGE_AUTHENTICATION: &str = "usage-bootstrap-authentication";
}

/// `(id, secret)` of a token of the shape `[a-z0-9]{6}.[a-z0-9]{16}`.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// Whether `g` is a valid extra group (`system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`).
pub fn valid_extra_group(g: &str) -> bool {
    let Some(rest) = g.strip_prefix(EXTRA_GROUP_PREFIX) else {
        return false;
    };
    let tail_ok = rest
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    tail_ok
        && rest.len() <= 256
        && rest
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
}

/// The decoded value of `data[key]` of a Secret object (empty when absent or not base64).
pub fn data_string(secret: &Value, key: &str) -> String {
    secret["data"][key]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Whether the Secret's `expiration` is before `now` (unparseable counts as expired, as
/// upstream). Without one the token does not expire.
pub fn expired(secret: &Value, now: k8s_openapi::jiff::Timestamp) -> bool {
    let exp = data_string(secret, keys::EXPIRATION);
    if exp.is_empty() {
        return false;
    }
    match exp.parse::<k8s_openapi::jiff::Timestamp>() {
        Ok(t) => t < now,
        Err(_) => true,
    }
}

/// Byte equality in time independent of where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a bootstrap token's Secret does not authenticate it; `secret` is the Secret's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    /// The Secret is being deleted.
    #[error("secret {secret} is being deleted")]
    Deleting {
        /// The Secret's name.
        secret: String,
    },
    /// The Secret is not a bootstrap token.
    #[error("secret {secret} is not of type {SECRET_TYPE}")]
    WrongType {
        /// The Secret's name.
        secret: String,
    },
    /// The token's secret part differs.
    #[error("secret {secret}: token-secret does not match")]
    SecretMismatch {
        /// The Secret's name.
        secret: String,
    },
    /// The Secret's token-id differs from its name's.
    #[error("secret {secret}: token-id does not match")]
    IdMismatch {
        /// The Secret's name.
        secret: String,
    },
    /// Past `expiration`.
    #[error("secret {secret} has expired")]
    Expired {
        /// The Secret's name.
        secret: String,
    },
    /// `usage-bootstrap-authentication` is not `true`.
    #[error("secret {secret} is not marked for authentication")]
    NotForAuthentication {
        /// The Secret's name.
        secret: String,
    },
    /// An extra group outside `system:bootstrappers:`.
    #[error("secret {secret}: invalid extra group {group:?}")]
    InvalidGroup {
        /// The Secret's name.
        secret: String,
        /// The group.
        group: String,
    },
}

/// The user the token `<id>.<secret>` authenticates as, given its Secret; the reason it does
/// not otherwise.
pub fn user_of(
    id: &str,
    secret: &str,
    obj: &Value,
    now: k8s_openapi::jiff::Timestamp,
) -> Result<UserInfo, TokenRefusal> {
    let name = format!("{SECRET_PREFIX}{id}");
    if !obj["metadata"]["deletionTimestamp"].is_null() {
        return Err(TokenRefusal::Deleting { secret: name });
    }
    if obj["type"].as_str() != Some(SECRET_TYPE) {
        return Err(TokenRefusal::WrongType { secret: name });
    }
    if !constant_time_eq(
        data_string(obj, keys::TOKEN_SECRET).as_bytes(),
        secret.as_bytes(),
    ) {
        return Err(TokenRefusal::SecretMismatch { secret: name });
    }
    if data_string(obj, keys::TOKEN_ID) != id {
        return Err(TokenRefusal::IdMismatch { secret: name });
    }
    if expired(obj, now) {
        return Err(TokenRefusal::Expired { secret: name });
    }
    if data_string(obj, keys::USAGE_AUTHENTICATION) != "true" {
        return Err(TokenRefusal::NotForAuthentication { secret: name });
    }
    let mut groups = BTreeSet::from([GROUP.to_string()]);
    let extra = data_string(obj, keys::EXTRA_GROUPS);
    for g in extra.split(',').filter(|g| !g.is_empty()) {
        if !valid_extra_group(g) {
            return Err(TokenRefusal::InvalidGroup {
                secret: name,
                group: g.to_string(),
            });
        }
        groups.insert(g.to_string());
    }
    Ok(UserInfo::authenticated(
        format!("{USER_PREFIX}{id}"),
        groups.into_iter().collect(),
    ))
}

/// Where the authenticator reads token Secrets.
pub trait SecretSource: Send + Sync + std::fmt::Debug {
    /// The Secret `namespace/name` as its JSON object, `None` if it does not exist (or cannot
    /// be read now).
    fn secret<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Option<Value>>;
}

/// The bootstrap token authenticator.
#[derive(Debug, Clone)]
pub struct BootstrapTokens {
    secrets: Arc<dyn SecretSource>,
}

impl BootstrapTokens {
    /// The authenticator, looking tokens up as `bootstrap-token-<id>` Secrets in `kube-system`.
    pub fn new(secrets: Arc<dyn SecretSource>) -> BootstrapTokens {
        BootstrapTokens { secrets }
    }
}

impl Authenticator for BootstrapTokens {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let Some((id, secret)) = req.bearer_token().and_then(parse) else {
                return Outcome::NotApplicable;
            };
            let name = format!("{SECRET_PREFIX}{id}");
            let Some(obj) = self.secrets.secret(NAMESPACE, &name).await else {
                tracing::debug!(token_id = id, "no bootstrap token secret");
                return Outcome::NotApplicable;
            };
            match user_of(id, secret, &obj, k8s_openapi::jiff::Timestamp::now()) {
                Ok(u) => Outcome::Authenticated(u),
                Err(why) => {
                    tracing::debug!(token_id = id, reason = %why, "bootstrap token refused");
                    Outcome::NotApplicable
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn secret(extra: &[(&str, &str)]) -> Value {
        let mut data = serde_json::Map::new();
        for (k, v) in [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-authentication", "true"),
        ]
        .iter()
        .chain(extra)
        {
            data.insert(k.to_string(), json!(b64(v)));
        }
        json!({"metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "type": SECRET_TYPE, "data": data})
    }

    fn now() -> k8s_openapi::jiff::Timestamp {
        "2026-11-21T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn token_shape() {
        assert_eq!(
            parse("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(parse("ABCDEF.0123456789abcdef"), None);
        assert_eq!(parse("abcdef.0123456789abcde"), None);
        assert_eq!(parse("abcde.0123456789abcdefg"), None);
        assert_eq!(parse("abcdef0123456789abcdef"), None);
        assert_eq!(parse("eyJhbGciOiJSUzI1NiJ9.e30.sig"), None);
    }

    #[test]
    fn valid_token_user_and_sorted_groups() {
        let s = secret(&[(
            "auth-extra-groups",
            "system:bootstrappers:worker,system:bootstrappers:k3rs:default-node-token,system:bootstrappers:worker",
        )]);
        let u = user_of("abcdef", "0123456789abcdef", &s, now()).unwrap();
        assert_eq!(u.username, "system:bootstrap:abcdef");
        assert_eq!(
            u.groups,
            vec![
                "system:bootstrappers",
                "system:bootstrappers:k3rs:default-node-token",
                "system:bootstrappers:worker",
                "system:authenticated",
            ]
        );
    }

    #[test]
    fn refusals() {
        let ok = "0123456789abcdef";
        assert_eq!(
            user_of("abcdef", "0123456789abcdee", &secret(&[]), now())
                .unwrap_err()
                .to_string(),
            "secret bootstrap-token-abcdef: token-secret does not match"
        );
        let mut wrong_type = secret(&[]);
        wrong_type["type"] = json!("Opaque");
        assert!(user_of("abcdef", ok, &wrong_type, now()).is_err());
        let mut deleting = secret(&[]);
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-21T11:00:00Z");
        assert!(user_of("abcdef", ok, &deleting, now()).is_err());
        let mut other_id = secret(&[]);
        other_id["data"]["token-id"] = json!(b64("zzzzzz"));
        assert!(user_of("abcdef", ok, &other_id, now()).is_err());
        let mut no_usage = secret(&[]);
        no_usage["data"]["usage-bootstrap-authentication"] = json!(b64("false"));
        assert_eq!(
            user_of("abcdef", ok, &no_usage, now())
                .unwrap_err()
                .to_string(),
            "secret bootstrap-token-abcdef is not marked for authentication"
        );
        let bad_group = secret(&[("auth-extra-groups", "system:masters")]);
        assert_eq!(
            user_of("abcdef", ok, &bad_group, now())
                .unwrap_err()
                .to_string(),
            "secret bootstrap-token-abcdef: invalid extra group \"system:masters\""
        );
    }

    #[test]
    fn expiration_is_honoured() {
        let ok = "0123456789abcdef";
        let past = secret(&[("expiration", "2026-11-21T11:59:59Z")]);
        assert_eq!(
            user_of("abcdef", ok, &past, now()).unwrap_err().to_string(),
            "secret bootstrap-token-abcdef has expired"
        );
        let future = secret(&[("expiration", "2026-11-21T13:00:00+01:00")]);
        assert!(user_of("abcdef", ok, &future, now()).is_ok());
        let garbage = secret(&[("expiration", "tomorrow")]);
        assert!(user_of("abcdef", ok, &garbage, now()).is_err());
    }

    #[test]
    fn extra_group_names() {
        assert!(valid_extra_group("system:bootstrappers:a"));
        assert!(valid_extra_group(
            "system:bootstrappers:kubeadm:default-node-token"
        ));
        assert!(!valid_extra_group("system:bootstrappers:"));
        assert!(!valid_extra_group("system:bootstrappers:a-"));
        assert!(!valid_extra_group("system:bootstrappers:A"));
        assert!(!valid_extra_group("system:nodes"));
    }

    #[derive(Debug)]
    struct Fake(Value);
    impl SecretSource for Fake {
        fn secret<'a>(&'a self, ns: &'a str, name: &'a str) -> BoxFuture<'a, Option<Value>> {
            let found =
                (ns == NAMESPACE && name == "bootstrap-token-abcdef").then(|| self.0.clone());
            Box::pin(async move { found })
        }
    }

    #[test]
    fn authenticator_reads_the_named_secret() {
        let auth = BootstrapTokens::new(Arc::new(Fake(secret(&[]))));
        let run = |token: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert("authorization", format!("Bearer {token}").parse().unwrap());
            let req = AuthnRequest {
                headers: &h,
                peer_certs: &[],
                path: "/api",
            };
            futures::executor::block_on(auth.authenticate(&req))
        };
        let Outcome::Authenticated(u) = run("abcdef.0123456789abcdef") else {
            panic!("not authenticated")
        };
        assert_eq!(u.username, "system:bootstrap:abcdef");
        assert_eq!(run("abcdef.0123456789abcdeX"), Outcome::NotApplicable);
        assert_eq!(run("zzzzzz.0123456789abcdef"), Outcome::NotApplicable);
        assert_eq!(run("abcdef.0123456789abcdee"), Outcome::NotApplicable);
    }
}
