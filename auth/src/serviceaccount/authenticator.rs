//! The service-account token authenticator: a bearer JWT issued by this cluster's signer
//! (bound or legacy) whose signature and claims verify and whose account — and Secret or
//! bound object — still exist with the uids the token names.
//!
//! # Guarantees
//! - A token that is not a JWT of one of this signer's issuers is [`Outcome::NotApplicable`]
//!   (another authenticator may know it); one that claims this issuer but fails any check
//!   is [`Outcome::Rejected`]; nothing else authenticates.
//! - Legacy tokens work only while their Secret holds exactly this token; bound tokens only
//!   until `exp`, and while a bound pod exists with the token's uid (terminating for at most
//!   [`POD_DELETION_GRACE_SECONDS`]), a bound Secret or Node exists with its uid.

use std::sync::Arc;

use base64::Engine;
use futures::future::BoxFuture;
use serde_json::Value;

use super::claims::{self, Binding, Verified, POD_DELETION_GRACE_SECONDS};
use super::jwt::{self, SigningKey};
use crate::authn::{Authenticator, AuthnRequest, Outcome};
use crate::UserInfo;

/// The kinds of objects tokens refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A ServiceAccount.
    ServiceAccount,
    /// A Secret (legacy tokens and secret-bound tokens).
    Secret,
    /// A Pod (pod-bound tokens).
    Pod,
    /// A Node (node-bound tokens and the node of a pod-bound token).
    Node,
}

/// The store could not be read; the store error's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LookupError(pub String);

/// Why a token of this signer does not authenticate (for the log, not the client).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The signature does not verify.
    #[error(transparent)]
    Signature(#[from] jwt::JwtError),
    /// The claims do not check out.
    #[error(transparent)]
    Claims(#[from] claims::ClaimsError),
    /// An object could not be read.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// An object the token names does not exist.
    #[error("{kind:?} {namespace}/{name} not found")]
    NotFound {
        /// Its kind.
        kind: Kind,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The service account was recreated.
    #[error("service account {namespace}/{name} has another uid")]
    AccountUid {
        /// The account's namespace.
        namespace: String,
        /// The account's name.
        name: String,
    },
    /// A legacy token's Secret is being deleted.
    #[error("secret {namespace}/{name} is being deleted")]
    SecretDeleting {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
    },
    /// A legacy token's Secret holds another token.
    #[error("secret {namespace}/{name} holds another token")]
    SecretToken {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
    },
    /// The bound object was recreated.
    #[error("bound {kind:?} {name} has another uid")]
    BoundUid {
        /// Its kind.
        kind: Kind,
        /// Its name.
        name: String,
    },
    /// The bound object is being deleted (a pod: for longer than the grace period).
    #[error("bound {kind:?} {name} is being deleted")]
    BoundDeleting {
        /// Its kind.
        kind: Kind,
        /// Its name.
        name: String,
    },
}

/// Reads the objects a token refers to (the registry in the server, a map in unit tests).
pub trait Lookup: Send + Sync + std::fmt::Debug {
    /// The object, `None` when it does not exist (`namespace` is ignored for nodes).
    fn object<'a>(
        &'a self,
        kind: Kind,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, LookupError>>;
}

/// A user with the audiences the token is valid for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The service account user (with the bound object's extras).
    pub user: UserInfo,
    /// The requested audiences the token is valid for.
    pub audiences: Vec<String>,
}

/// Service-account JWTs, verified with the signing key.
#[derive(Debug, Clone)]
pub struct ServiceAccountTokens {
    key: Arc<SigningKey>,
    lookup: Arc<dyn Lookup>,
}

impl ServiceAccountTokens {
    /// The authenticator verifying with `key` and checking bound objects through `lookup`.
    pub fn new(key: Arc<SigningKey>, lookup: Arc<dyn Lookup>) -> ServiceAccountTokens {
        ServiceAccountTokens { key, lookup }
    }

    /// Where the objects tokens refer to are read.
    pub fn lookup(&self) -> &Arc<dyn Lookup> {
        &self.lookup
    }

    /// Authenticates `token` for any of `audiences` at unix time `now`: `Ok(None)` when it is
    /// not a token of this signer, `Err` with the reason when it is but does not check out.
    pub async fn authenticate_token(
        &self,
        token: &str,
        audiences: &[String],
        now: i64,
    ) -> Result<Option<Authenticated>, TokenError> {
        match jwt::unverified_claims(token) {
            Ok(c) if claims::is_ours(&c) => {}
            _ => return Ok(None),
        }
        let verified_claims = self.key.verify(token)?;
        let v = claims::check(&verified_claims, now, audiences)?;
        self.check_objects(&v, token, now).await?;
        Ok(Some(Authenticated {
            user: v.user,
            audiences: v.audiences,
        }))
    }

    async fn check_objects(&self, v: &Verified, token: &str, now: i64) -> Result<(), TokenError> {
        let ns = v.namespace.as_str();
        let sa = self
            .existing(Kind::ServiceAccount, ns, &v.service_account.name)
            .await?;
        if uid(&sa) != v.service_account.uid {
            return Err(TokenError::AccountUid {
                namespace: ns.to_string(),
                name: v.service_account.name.clone(),
            });
        }
        if let Some(secret) = &v.legacy_secret {
            let s = self.existing(Kind::Secret, ns, secret).await?;
            if !s["metadata"]["deletionTimestamp"].is_null() {
                return Err(TokenError::SecretDeleting {
                    namespace: ns.to_string(),
                    name: secret.clone(),
                });
            }
            let stored = s["data"]["token"]
                .as_str()
                .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
            if stored.as_deref() != Some(token.as_bytes()) {
                return Err(TokenError::SecretToken {
                    namespace: ns.to_string(),
                    name: secret.clone(),
                });
            }
        }
        let (kind, r) = match &v.binding {
            None => return Ok(()),
            Some(Binding::Pod(r)) => (Kind::Pod, r),
            Some(Binding::Secret(r)) => (Kind::Secret, r),
            Some(Binding::Node(r)) => (Kind::Node, r),
        };
        let obj = self.existing(kind, ns, &r.name).await?;
        if uid(&obj) != r.uid {
            return Err(TokenError::BoundUid {
                kind,
                name: r.name.clone(),
            });
        }
        let deleted = k3rs_apimachinery::meta::parse_time(&obj["metadata"]["deletionTimestamp"]);
        match (kind, deleted) {
            (_, None) => Ok(()),
            (Kind::Pod, Some(t)) if t + POD_DELETION_GRACE_SECONDS > now => Ok(()),
            _ => Err(TokenError::BoundDeleting {
                kind,
                name: r.name.clone(),
            }),
        }
    }

    async fn existing(&self, kind: Kind, ns: &str, name: &str) -> Result<Value, TokenError> {
        self.lookup
            .object(kind, ns, name)
            .await?
            .ok_or_else(|| TokenError::NotFound {
                kind,
                namespace: ns.to_string(),
                name: name.to_string(),
            })
    }
}

fn uid(obj: &Value) -> &str {
    obj["metadata"]["uid"].as_str().unwrap_or_default()
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Authenticator for ServiceAccountTokens {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let Some(token) = req.bearer_token() else {
                return Outcome::NotApplicable;
            };
            let apis: Vec<String> = claims::API_AUDIENCES
                .iter()
                .map(|a| a.to_string())
                .collect();
            match self.authenticate_token(token, &apis, unix_now()).await {
                Ok(Some(a)) => Outcome::Authenticated(a.user),
                Ok(None) => Outcome::NotApplicable,
                Err(why) => Outcome::Rejected(why.to_string()),
            }
        })
    }
}
