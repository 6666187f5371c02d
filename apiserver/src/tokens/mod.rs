//! Bootstrap tokens as `k3rs token` manages them: generating `<id>.<secret>`, the Secret that
//! defines one, the `K10<ca hash>::<id>.<secret>` form agents join with, `kubeadm token list`'s
//! table, and the default agent token every server keeps in `<data-dir>/server/agent-token`.
//!
//! # Guarantees
//! - Generated ids and secrets are `[a-z0-9]` of lengths 6 and 16 from the OS RNG, so the
//!   bootstrap token authenticator ([`k3rs_auth::bootstrap_token`]) accepts their shape.
//! - A spec is validated (usages, extra groups) before anything is written.

pub(crate) mod agent;
pub mod client;
pub(crate) mod table;

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};

use k3rs_auth::bootstrap_token::{self as bt, keys};

/// Usages a token may have (`usage-bootstrap-<usage>: "true"`).
pub const USAGES: &[&str] = &["authentication", "signing"];
/// The extra group of tokens made without `--groups` (k3s: `system:bootstrappers:k3s:…`).
pub const DEFAULT_GROUP: &str = "system:bootstrappers:k3rs:default-node-token";

/// What a new token is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// `None`: never expires.
    pub ttl: Option<Duration>,
    /// The Secret's `description` (free text `kubeadm token list` shows).
    pub description: String,
    /// Of [`USAGES`].
    pub usages: Vec<String>,
    /// Extra groups the token's user is in (each `system:bootstrappers:…`).
    pub groups: Vec<String>,
}

impl Default for TokenSpec {
    /// What `k3rs token create` makes without flags: 24 hours, signing and authentication,
    /// the default node token group.
    fn default() -> TokenSpec {
        TokenSpec {
            ttl: Some(Duration::from_secs(24 * 3600)),
            description: String::new(),
            usages: USAGES.iter().map(|u| u.to_string()).collect(),
            groups: vec![DEFAULT_GROUP.to_string()],
        }
    }
}

/// A spec that cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A usage not in [`USAGES`].
    #[error("invalid bootstrap token usage {0:?} (valid: authentication, signing)")]
    Usage(String),
    /// An extra group outside `system:bootstrappers:`.
    #[error(
        "invalid extra group {0:?}: must match system:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9]"
    )]
    Group(String),
    /// Not a token (`<id>.<secret>` or `K10<hash>::<id>.<secret>`).
    #[error("invalid token {0:?}: must be of the form [a-z0-9]{{6}}.[a-z0-9]{{16}}")]
    Token(String),
}

/// A bootstrap token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The public part (the Secret is `bootstrap-token-<id>`).
    pub id: String,
    /// The private part.
    pub secret: String,
}

impl Token {
    /// A new random token.
    pub fn generate() -> Token {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut rng = rand::rng();
        let mut pick = |n: usize| {
            (0..n)
                .map(|_| CHARS[rand::Rng::random_range(&mut rng, 0..CHARS.len())] as char)
                .collect::<String>()
        };
        Token {
            id: pick(6),
            secret: pick(16),
        }
    }

    /// Parses `<id>.<secret>` or the full `K10<hash>::<id>.<secret>`.
    pub fn parse(s: &str) -> Result<Token, SpecError> {
        let s = s.trim();
        let creds = s
            .strip_prefix("K10")
            .and_then(|rest| rest.split_once("::"))
            .map_or(s, |(_, creds)| creds);
        let (id, secret) = bt::parse(creds).ok_or_else(|| SpecError::Token(s.to_string()))?;
        Ok(Token {
            id: id.to_string(),
            secret: secret.to_string(),
        })
    }

    /// `<id>.<secret>`.
    pub fn bearer(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// `K10<ca hash>::<id>.<secret>`: what agents join with (the hash pins the server CA).
    pub fn full(&self, ca_cert_file: &[u8]) -> String {
        format!(
            "K10{}::{}",
            k3rs_pki::token::ca_hash(ca_cert_file),
            self.bearer()
        )
    }

    /// The Secret's name.
    pub fn secret_name(&self) -> String {
        format!("{}{}", bt::SECRET_PREFIX, self.id)
    }
}

/// Whether `id` is a token id (`[a-z0-9]{6}`).
pub fn valid_id(id: &str) -> bool {
    id.len() == 6
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Checks usages and groups.
pub fn validate(spec: &TokenSpec) -> Result<(), SpecError> {
    if let Some(u) = spec.usages.iter().find(|u| !USAGES.contains(&u.as_str())) {
        return Err(SpecError::Usage(u.clone()));
    }
    if let Some(g) = spec.groups.iter().find(|g| !bt::valid_extra_group(g)) {
        return Err(SpecError::Group(g.clone()));
    }
    Ok(())
}

/// The Secret defining `token` (kubeadm's layout), `expiration` = `now + ttl`.
pub fn secret_object(token: &Token, spec: &TokenSpec, now: std::time::SystemTime) -> Value {
    let b64 = |s: &str| Value::String(base64::engine::general_purpose::STANDARD.encode(s));
    let mut data = Map::new();
    data.insert(keys::TOKEN_ID.into(), b64(&token.id));
    data.insert(keys::TOKEN_SECRET.into(), b64(&token.secret));
    if !spec.description.is_empty() {
        data.insert(keys::DESCRIPTION.into(), b64(&spec.description));
    }
    if let Some(ttl) = spec.ttl {
        let exp = k3rs_apimachinery::meta::rfc3339(now + ttl);
        data.insert(keys::EXPIRATION.into(), b64(&exp));
    }
    for u in &spec.usages {
        data.insert(format!("{}{u}", keys::USAGE_PREFIX), b64("true"));
    }
    if !spec.groups.is_empty() {
        data.insert(keys::EXTRA_GROUPS.into(), b64(&spec.groups.join(",")));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token.secret_name(), "namespace": bt::NAMESPACE},
        "type": bt::SECRET_TYPE,
        "data": data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_have_the_bootstrap_shape() {
        let t = Token::generate();
        assert_eq!(
            bt::parse(&t.bearer()),
            Some((t.id.as_str(), t.secret.as_str()))
        );
        assert_ne!(Token::generate(), t);
        assert_eq!(t.secret_name(), format!("bootstrap-token-{}", t.id));
    }

    #[test]
    fn parse_short_and_full_forms() {
        let want = Token {
            id: "abcdef".into(),
            secret: "0123456789abcdef".into(),
        };
        assert_eq!(Token::parse("abcdef.0123456789abcdef").unwrap(), want);
        let full = want.full(b"CA");
        assert!(full.starts_with("K10") && full.ends_with("::abcdef.0123456789abcdef"));
        assert_eq!(full.len(), 3 + 64 + 2 + 23);
        assert_eq!(Token::parse(&full).unwrap(), want);
        assert!(Token::parse("server:secret").is_err());
    }

    #[test]
    fn secret_object_layout() {
        let t = Token {
            id: "abcdef".into(),
            secret: "0123456789abcdef".into(),
        };
        let spec = TokenSpec {
            description: "for n1".into(),
            ..TokenSpec::default()
        };
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let s = secret_object(&t, &spec, now);
        assert_eq!(s["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(s["type"], "bootstrap.kubernetes.io/token");
        let d = |k: &str| bt::data_string(&s, k);
        assert_eq!(d("token-id"), "abcdef");
        assert_eq!(d("token-secret"), "0123456789abcdef");
        assert_eq!(d("expiration"), "2027-01-16T08:00:00Z");
        assert_eq!(d("description"), "for n1");
        assert_eq!(d("usage-bootstrap-authentication"), "true");
        assert_eq!(d("usage-bootstrap-signing"), "true");
        assert_eq!(d("auth-extra-groups"), DEFAULT_GROUP);
        let forever = secret_object(&t, &TokenSpec { ttl: None, ..spec }, now);
        assert!(forever["data"].get("expiration").is_none());
        // The authenticator accepts what we write.
        let user = bt::user_of(
            "abcdef",
            "0123456789abcdef",
            &s,
            "2027-01-16T07:00:00Z".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(user.username, "system:bootstrap:abcdef");
    }

    #[test]
    fn validation() {
        let bad_usage = TokenSpec {
            usages: vec!["authentication".into(), "everything".into()],
            ..TokenSpec::default()
        };
        assert_eq!(
            validate(&bad_usage),
            Err(SpecError::Usage("everything".into()))
        );
        let bad_group = TokenSpec {
            groups: vec!["system:masters".into()],
            ..TokenSpec::default()
        };
        assert_eq!(
            validate(&bad_group),
            Err(SpecError::Group("system:masters".into()))
        );
        assert_eq!(validate(&TokenSpec::default()), Ok(()));
    }
}
