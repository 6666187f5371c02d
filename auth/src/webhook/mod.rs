//! kube-apiserver's webhooks: the token-review authenticator
//! (`--authentication-token-webhook-*`) and the `Webhook` authorization mode
//! (`--authorization-webhook-*`). Both POST a review object to a remote service described by
//! a kubeconfig file ([`client`]) and cache its answers ([`cache`]).

pub mod cache;
pub mod client;
pub mod subject_access_review;
pub mod token_review;

use std::path::PathBuf;
use std::time::Duration;

/// Why a review could not be had from the webhook.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The call failed.
    #[error(transparent)]
    Call(#[from] client::CallError),
    /// The answer is not a review object (`kind` names which).
    #[error("decoding the webhook's {kind}: {source}")]
    Decode {
        /// `TokenReview` or `SubjectAccessReview`.
        kind: &'static str,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The answer reports an error (`status.error`).
    #[error("the webhook: {0}")]
    Reported(String),
    /// A token authenticated for none of the requested audiences.
    #[error("the webhook authenticated the token for other audiences")]
    OtherAudiences,
}

/// Which review API version the webhook speaks (`--*-webhook-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Version {
    /// `authentication.k8s.io/v1` / `authorization.k8s.io/v1` reviews (the default).
    #[default]
    V1,
    /// The `v1beta1` reviews.
    V1beta1,
}

impl Version {
    /// `v1` or `v1beta1`.
    pub fn parse(s: &str) -> Option<Version> {
        match s {
            "v1" => Some(Version::V1),
            "v1beta1" => Some(Version::V1beta1),
            _ => None,
        }
    }

    /// The `apiVersion` of a review in `group`.
    pub fn api_version(self, group: &str) -> String {
        match self {
            Version::V1 => format!("{group}/v1"),
            Version::V1beta1 => format!("{group}/v1beta1"),
        }
    }
}

/// `--authentication-token-webhook-config-file`, `-cache-ttl` (2m), `-version` (v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenWebhookOptions {
    /// `--authentication-token-webhook-config-file`: the kubeconfig naming the webhook; `None` disables it.
    pub config_file: Option<PathBuf>,
    /// `--authentication-token-webhook-cache-ttl`: how long a review's answer is reused for the same token.
    pub cache_ttl: Duration,
    /// `--authentication-token-webhook-version`: the TokenReview version sent.
    pub version: Version,
}

impl Default for TokenWebhookOptions {
    fn default() -> TokenWebhookOptions {
        TokenWebhookOptions {
            config_file: None,
            cache_ttl: Duration::from_secs(120),
            version: Version::V1,
        }
    }
}

/// `--authorization-webhook-config-file`, `-cache-authorized-ttl` (5m),
/// `-cache-unauthorized-ttl` (30s), `-version` (v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizerWebhookOptions {
    /// `--authorization-webhook-config-file`: the kubeconfig naming the webhook; `None` disables it.
    pub config_file: Option<PathBuf>,
    /// `--authorization-webhook-cache-authorized-ttl`: how long an allow is reused for the same attributes.
    pub authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`: how long a deny or no-opinion is reused.
    pub unauthorized_ttl: Duration,
    /// `--authorization-webhook-version`: the SubjectAccessReview version sent.
    pub version: Version,
}

impl Default for AuthorizerWebhookOptions {
    fn default() -> AuthorizerWebhookOptions {
        AuthorizerWebhookOptions {
            config_file: None,
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30),
            version: Version::V1,
        }
    }
}
