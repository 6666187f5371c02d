//! `--kube-apiserver-arg KEY=VALUE` (k3s's way to pass kube-apiserver flags): the flags the
//! API server understands (see [`SUPPORTED`]).

use std::sync::Arc;

use crate::admission::default_toleration_seconds::DefaultTolerationSeconds;
use k3rs_auth::authz::{self, Authorizer, Chain};
use k3rs_auth::webhook::client::WebhookClient;
use k3rs_auth::webhook::{AuthorizerWebhookOptions, TokenWebhookOptions, Version};

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Node,
    Rbac,
    AlwaysAllow,
    AlwaysDeny,
    Abac,
    Webhook,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "Node" => Mode::Node,
            "RBAC" => Mode::Rbac,
            "AlwaysAllow" => Mode::AlwaysAllow,
            "AlwaysDeny" => Mode::AlwaysDeny,
            "ABAC" => Mode::Abac,
            "Webhook" => Mode::Webhook,
            _ => return None,
        })
    }
}

/// The API server's settings from `--kube-apiserver-arg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `authorization-mode`: the authorizers after `system:masters`, in order (k3s's
    /// `Node,RBAC` by default).
    pub authorization_modes: Vec<Mode>,
    /// `default-not-ready-toleration-seconds` / `default-unreachable-toleration-seconds`
    /// (300 each).
    pub default_tolerations: DefaultTolerationSeconds,
    /// `audit-policy-file`, `audit-log-path`, `audit-log-maxage/-maxbackup/-maxsize`.
    pub audit: crate::audit::Options,
    /// `authorization-policy-file`: the ABAC policies (JSON lines).
    pub authorization_policy_file: Option<std::path::PathBuf>,
    /// `requestheader-client-ca-file`: enables the authenticating proxy.
    pub requestheader_client_ca_file: Option<std::path::PathBuf>,
    /// `requestheader-allowed-names` (empty: any CN the CA signed).
    pub requestheader_allowed_names: Vec<String>,
    /// `requestheader-username-headers`, `-uid-headers`, `-group-headers`,
    /// `-extra-headers-prefix` (k3s's `X-Remote-User`, none, `X-Remote-Group`,
    /// `X-Remote-Extra-` by default).
    pub requestheader_headers: k3rs_auth::request_header::Headers,
    /// `token-auth-file`: static bearer tokens (CSV).
    pub token_auth_file: Option<std::path::PathBuf>,
    /// `authentication-token-webhook-*`.
    pub token_webhook: TokenWebhookOptions,
    /// `authorization-webhook-*` (mode `Webhook`).
    pub authorization_webhook: AuthorizerWebhookOptions,
    /// `admission-control-config-file`'s PodSecurity configuration (k3s's
    /// `--pod-security-admission-config-file`); upstream's defaults without one.
    pub pod_security: std::sync::Arc<crate::admission::pod_security::config::Config>,
    /// `oidc-*`: the OpenID Connect token authenticator (off without an issuer).
    pub oidc: k3rs_auth::oidc::Options,
    /// `authentication-config`: the structured authentication configuration (JWT issuers).
    pub authentication_config: Option<std::path::PathBuf>,
    /// `max-requests-inflight` / `max-mutating-requests-inflight` (400 / 200; 0: no limit).
    pub inflight: crate::http::inflight::InflightLimits,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            authorization_modes: vec![Mode::Node, Mode::Rbac],
            default_tolerations: DefaultTolerationSeconds::default(),
            audit: crate::audit::Options::default(),
            token_auth_file: None,
            authorization_policy_file: None,
            requestheader_client_ca_file: None,
            requestheader_allowed_names: Vec::new(),
            requestheader_headers: Default::default(),
            token_webhook: TokenWebhookOptions::default(),
            authorization_webhook: AuthorizerWebhookOptions::default(),
            pod_security: Default::default(),
            oidc: Default::default(),
            authentication_config: None,
            inflight: Default::default(),
        }
    }
}

/// The flags [`Args::parse`] knows.
const SUPPORTED: &str = "authorization-mode, default-not-ready-toleration-seconds, default-unreachable-toleration-seconds, audit-log-path, audit-policy-file, audit-log-maxage, audit-log-maxbackup, audit-log-maxsize, audit-log-format=json, admission-control-config-file, token-auth-file, authorization-policy-file, requestheader-client-ca-file, requestheader-allowed-names, requestheader-username-headers, requestheader-uid-headers, requestheader-group-headers, requestheader-extra-headers-prefix, authentication-token-webhook-config-file, authentication-token-webhook-cache-ttl, authentication-token-webhook-version, authorization-webhook-config-file, authorization-webhook-cache-authorized-ttl, authorization-webhook-cache-unauthorized-ttl, authorization-webhook-version, oidc-issuer-url, oidc-client-id, oidc-username-claim, oidc-username-prefix, oidc-groups-claim, oidc-groups-prefix, oidc-required-claim, oidc-signing-algs, oidc-ca-file, authentication-config, max-requests-inflight, max-mutating-requests-inflight";

/// A `--kube-apiserver-arg` that cannot be used (kube-apiserver's words where it has them).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgError {
    #[error("--kube-apiserver-arg {0:?}: expected KEY=VALUE")]
    NotKeyValue(String),
    #[error(
        "--kube-apiserver-arg: unsupported kube-apiserver flag {0:?} (supported: {SUPPORTED})"
    )]
    Unsupported(String),
    #[error(
        "invalid argument {value:?} for \"--{flag}\" flag: expected a whole number of seconds"
    )]
    Seconds { flag: String, value: String },
    #[error("invalid argument {value:?} for \"--{flag}\" flag: expected a non-negative integer")]
    Count { flag: String, value: String },
    #[error("{0}")]
    File(String),
    #[error("authorization-mode ABAC's authorization policy file not passed")]
    AbacWithoutFile,
    #[error("cannot specify --authorization-policy-file without mode ABAC")]
    FileWithoutAbac,
    #[error("at least one authorization-mode must be passed")]
    NoModes,
    #[error("authorization-mode {0:?} is not a valid mode")]
    UnknownMode(String),
    #[error("authorization-mode Webhook's authorization config file not passed")]
    WebhookWithoutFile,
    #[error("cannot specify --authorization-webhook-config-file without mode Webhook")]
    WebhookFileWithoutMode,
    #[error("invalid argument {value:?} for \"--{flag}\" flag: expected a duration such as 30s, 5m or 1h30m")]
    Duration { flag: String, value: String },
    #[error("invalid argument {value:?} for \"--{flag}\" flag: must be v1 or v1beta1")]
    Version { flag: String, value: String },
    #[error("authorization-mode {0:?} has mode specified more than once")]
    Duplicate(String),
    #[error(transparent)]
    Oidc(#[from] k3rs_auth::oidc::OptionsError),
    #[error("authentication-config file and oidc-* flags are mutually exclusive")]
    AuthenticationConfigWithOidc,
}

impl Args {
    /// Parses [`k3rs_apimachinery::component_args`] items; later items override earlier ones.
    pub fn parse(items: &[String]) -> Result<Args, ArgError> {
        let mut args = Args::default();
        for item in items {
            let (key, value) = k3rs_apimachinery::component_args::key_value(item)
                .ok_or_else(|| ArgError::NotKeyValue(item.clone()))?;
            match key {
                "authorization-mode" => args.authorization_modes = parse_modes(value)?,
                flag @ "default-not-ready-toleration-seconds" => {
                    args.default_tolerations.not_ready = seconds(flag, value)?
                }
                flag @ "default-unreachable-toleration-seconds" => {
                    args.default_tolerations.unreachable = seconds(flag, value)?
                }
                "audit-log-path" => args.audit.log_path = Some(value.to_string()),
                "audit-policy-file" => args.audit.policy_file = Some(value.into()),
                flag @ "audit-log-maxage" => args.audit.limits.max_age_days = count(flag, value)?,
                flag @ "audit-log-maxbackup" => {
                    args.audit.limits.max_backup = count(flag, value)? as usize
                }
                flag @ "audit-log-maxsize" => args.audit.limits.max_size_mb = count(flag, value)?,
                "audit-log-format" if value == "json" => {}
                "token-auth-file" => args.token_auth_file = Some(value.into()),
                "admission-control-config-file" => {
                    let config =
                        crate::admission::pod_security::config::load(std::path::Path::new(value))
                            .map_err(|e| ArgError::File(e.to_string()))?;
                    args.pod_security = std::sync::Arc::new(config);
                }
                "requestheader-client-ca-file" => {
                    args.requestheader_client_ca_file = Some(value.into())
                }
                "requestheader-allowed-names" => args.requestheader_allowed_names = list(value),
                "requestheader-username-headers" => {
                    args.requestheader_headers.username = list(value)
                }
                "requestheader-uid-headers" => args.requestheader_headers.uid = list(value),
                "requestheader-group-headers" => args.requestheader_headers.group = list(value),
                "requestheader-extra-headers-prefix" => {
                    args.requestheader_headers.extra_prefix = list(value)
                }
                "authorization-policy-file" => args.authorization_policy_file = Some(value.into()),
                "authentication-token-webhook-config-file" => {
                    args.token_webhook.config_file = Some(value.into())
                }
                flag @ "authentication-token-webhook-cache-ttl" => {
                    args.token_webhook.cache_ttl = duration(flag, value)?
                }
                flag @ "authentication-token-webhook-version" => {
                    args.token_webhook.version = version(flag, value)?
                }
                "authorization-webhook-config-file" => {
                    args.authorization_webhook.config_file = Some(value.into())
                }
                flag @ "authorization-webhook-cache-authorized-ttl" => {
                    args.authorization_webhook.authorized_ttl = duration(flag, value)?
                }
                flag @ "authorization-webhook-cache-unauthorized-ttl" => {
                    args.authorization_webhook.unauthorized_ttl = duration(flag, value)?
                }
                flag @ "authorization-webhook-version" => {
                    args.authorization_webhook.version = version(flag, value)?
                }
                "oidc-issuer-url" => args.oidc.issuer_url = value.to_string(),
                "oidc-client-id" => args.oidc.client_id = value.to_string(),
                "oidc-username-claim" => args.oidc.username_claim = value.to_string(),
                "oidc-username-prefix" => args.oidc.username_prefix = Some(value.to_string()),
                "oidc-groups-claim" => {
                    args.oidc.groups_claim = Some(value.to_string()).filter(|c| !c.is_empty())
                }
                "oidc-groups-prefix" => args.oidc.groups_prefix = value.to_string(),
                "oidc-required-claim" => args.oidc.add_required_claims(value)?,
                "oidc-signing-algs" => {
                    args.oidc.signing_algs = k3rs_auth::oidc::Options::parse_algorithms(value)?
                }
                "oidc-ca-file" => args.oidc.ca_file = Some(value.into()),
                "authentication-config" => args.authentication_config = Some(value.into()),
                flag @ "max-requests-inflight" => args.inflight.readonly = slots(flag, value)?,
                flag @ "max-mutating-requests-inflight" => {
                    args.inflight.mutating = slots(flag, value)?
                }
                other => return Err(ArgError::Unsupported(other.to_string())),
            }
        }
        args.oidc.validate()?;
        if args.authentication_config.is_some() && args.oidc != Default::default() {
            return Err(ArgError::AuthenticationConfigWithOidc);
        }
        for jwt in args.jwt_authenticators()? {
            jwt.tls().map_err(|e| ArgError::File(e.to_string()))?;
        }
        // The files named are read again at start; a broken one is refused now.
        if let Some(p) = &args.audit.policy_file {
            crate::audit::load_policy(p).map_err(|e| ArgError::File(e.to_string()))?;
        }
        match (
            args.authorization_modes.contains(&Mode::Abac),
            &args.authorization_policy_file,
        ) {
            (true, None) => return Err(ArgError::AbacWithoutFile),
            (false, Some(_)) => return Err(ArgError::FileWithoutAbac),
            (true, Some(p)) => {
                k3rs_auth::abac::Abac::load(p).map_err(|e| ArgError::File(e.to_string()))?;
            }
            (false, None) => {}
        }
        match (
            args.authorization_modes.contains(&Mode::Webhook),
            &args.authorization_webhook.config_file,
        ) {
            (true, None) => return Err(ArgError::WebhookWithoutFile),
            (false, Some(_)) => return Err(ArgError::WebhookFileWithoutMode),
            (true, Some(p)) => {
                WebhookClient::load(p).map_err(|e| ArgError::File(e.to_string()))?;
            }
            (false, None) => {}
        }
        if let Some(p) = &args.token_webhook.config_file {
            WebhookClient::load(p).map_err(|e| ArgError::File(e.to_string()))?;
        }
        if let Some(p) = &args.token_auth_file {
            k3rs_auth::token_file::TokenFile::load(p).map_err(|e| ArgError::File(e.to_string()))?;
        }
        Ok(args)
    }
}

impl Args {
    /// The JWT authenticators: the `--authentication-config` file's, or the `oidc-*` flags'.
    pub fn jwt_authenticators(
        &self,
    ) -> Result<Vec<k3rs_auth::oidc::model::JwtAuthenticator>, ArgError> {
        use k3rs_auth::oidc::model::JwtAuthenticator;
        match &self.authentication_config {
            Some(path) => {
                k3rs_auth::oidc::config::load(path).map_err(|e| ArgError::File(e.to_string()))
            }
            None if self.oidc.enabled() => Ok(vec![JwtAuthenticator::from_flags(&self.oidc)?]),
            None => Ok(Vec::new()),
        }
    }
}

/// A non-negative number of seconds (kube-apiserver's flags are int64).
fn seconds(flag: &str, value: &str) -> Result<i64, ArgError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|s| *s >= 0)
        .ok_or_else(|| ArgError::Seconds {
            flag: flag.to_string(),
            value: value.to_string(),
        })
}

/// A Go duration (`300ms`, `30s`, `5m`, `1h30m`, `0`), as kube-apiserver's duration flags.
fn duration(flag: &str, value: &str) -> Result<std::time::Duration, ArgError> {
    k3rs_apimachinery::duration::parse(value).ok_or_else(|| ArgError::Duration {
        flag: flag.to_string(),
        value: value.to_string(),
    })
}

/// `v1` or `v1beta1`.
fn version(flag: &str, value: &str) -> Result<Version, ArgError> {
    Version::parse(value).ok_or_else(|| ArgError::Version {
        flag: flag.to_string(),
        value: value.to_string(),
    })
}

/// A comma-separated list flag (empty items dropped).
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A non-negative integer flag.
fn count(flag: &str, value: &str) -> Result<u64, ArgError> {
    value.parse::<u64>().map_err(|_| ArgError::Count {
        flag: flag.to_string(),
        value: value.to_string(),
    })
}

/// A non-negative number of concurrent requests.
fn slots(flag: &str, value: &str) -> Result<usize, ArgError> {
    usize::try_from(count(flag, value)?).map_err(|_| ArgError::Count {
        flag: flag.to_string(),
        value: value.to_string(),
    })
}

/// `Node,RBAC,…`: known modes, each once.
pub fn parse_modes(value: &str) -> Result<Vec<Mode>, ArgError> {
    let mut modes = Vec::new();
    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mode = Mode::parse(name).ok_or_else(|| ArgError::UnknownMode(name.to_string()))?;
        if modes.contains(&mode) {
            return Err(ArgError::Duplicate(name.to_string()));
        }
        modes.push(mode);
    }
    if modes.is_empty() {
        return Err(ArgError::NoModes);
    }
    Ok(modes)
}

/// The authorizers of the chain: `system:masters` first (as kube-apiserver always does), then
/// `modes` in order. `node` is the Node authorizer, when the server has one; `abac` the
/// loaded ABAC policy file; `webhook` the `Webhook` mode's authorizer.
pub fn chain(
    modes: &[Mode],
    rbac: Arc<dyn Authorizer>,
    node: Option<Arc<dyn Authorizer>>,
    abac: Option<Arc<dyn Authorizer>>,
    webhook: Option<Arc<dyn Authorizer>>,
) -> Chain {
    let mut c = Chain::new(vec![Arc::new(authz::SystemMasters)]);
    for m in modes {
        match m {
            Mode::Node => match &node {
                Some(n) => c.push(n.clone()),
                None => tracing::debug!("authorization-mode Node: no Node authorizer here"),
            },
            Mode::Rbac => c.push(rbac.clone()),
            Mode::AlwaysAllow => c.push(Arc::new(authz::AlwaysAllow)),
            Mode::AlwaysDeny => c.push(Arc::new(authz::AlwaysDeny)),
            Mode::Abac => match &abac {
                Some(a) => c.push(a.clone()),
                None => tracing::warn!("authorization-mode ABAC without a policy file"),
            },
            Mode::Webhook => match &webhook {
                Some(w) => c.push(w.clone()),
                None => tracing::warn!("authorization-mode Webhook without a config file"),
            },
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Args, ArgError> {
        Args::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn modes_in_order() {
        assert_eq!(
            parse(&[]).unwrap().authorization_modes,
            [Mode::Node, Mode::Rbac]
        );
        assert_eq!(
            parse(&["authorization-mode=AlwaysDeny,RBAC"])
                .unwrap()
                .authorization_modes,
            [Mode::AlwaysDeny, Mode::Rbac]
        );
        assert_eq!(
            parse(&[
                "--authorization-mode=Node,RBAC",
                "authorization-mode=AlwaysAllow"
            ])
            .unwrap()
            .authorization_modes,
            [Mode::AlwaysAllow]
        );
    }

    #[test]
    fn webhook_flags_and_go_durations() {
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("webhook.yaml");
        std::fs::write(
            &kc,
            "clusters: [{name: w, cluster: {server: 'http://127.0.0.1:1/'}}]\n",
        )
        .unwrap();
        let file = kc.display();
        let a = parse(&[
            "authorization-mode=Node,Webhook,RBAC",
            &format!("authorization-webhook-config-file={file}"),
            "authorization-webhook-cache-authorized-ttl=1m30s",
            "authorization-webhook-cache-unauthorized-ttl=0",
            &format!("authentication-token-webhook-config-file={file}"),
            "authentication-token-webhook-cache-ttl=500ms",
            "authentication-token-webhook-version=v1beta1",
        ])
        .unwrap();
        assert_eq!(
            a.authorization_modes,
            [Mode::Node, Mode::Webhook, Mode::Rbac]
        );
        assert_eq!(
            a.authorization_webhook,
            AuthorizerWebhookOptions {
                config_file: Some(kc.clone()),
                authorized_ttl: std::time::Duration::from_secs(90),
                unauthorized_ttl: std::time::Duration::ZERO,
                version: Version::V1,
            }
        );
        assert_eq!(
            a.token_webhook,
            TokenWebhookOptions {
                config_file: Some(kc.clone()),
                cache_ttl: std::time::Duration::from_millis(500),
                version: Version::V1beta1,
            }
        );
        let d = parse(&[]).unwrap();
        assert_eq!(d.token_webhook.cache_ttl.as_secs(), 120);
        assert_eq!(d.authorization_webhook.authorized_ttl.as_secs(), 300);
        assert_eq!(d.authorization_webhook.unauthorized_ttl.as_secs(), 30);
    }

    #[test]
    fn toleration_seconds() {
        let a = parse(&[
            "default-not-ready-toleration-seconds=30",
            "--default-unreachable-toleration-seconds=0",
        ])
        .unwrap();
        assert_eq!(
            a.default_tolerations,
            DefaultTolerationSeconds {
                not_ready: 30,
                unreachable: 0
            }
        );
        assert_eq!(parse(&[]).unwrap().default_tolerations.not_ready, 300);
        assert_eq!(
            parse(&["default-not-ready-toleration-seconds=5m"])
                .unwrap_err()
                .to_string(),
            r#"invalid argument "5m" for "--default-not-ready-toleration-seconds" flag: expected a whole number of seconds"#
        );
    }

    #[test]
    fn requestheader_flags() {
        let a = parse(&[
            "requestheader-client-ca-file=/ca.crt",
            "requestheader-allowed-names=front-proxy, aggregator",
            "requestheader-group-headers=X-G1,X-G2",
            "requestheader-uid-headers=X-Remote-Uid",
        ])
        .unwrap();
        assert_eq!(a.requestheader_client_ca_file, Some("/ca.crt".into()));
        assert_eq!(a.requestheader_allowed_names, ["front-proxy", "aggregator"]);
        assert_eq!(a.requestheader_headers.group, ["X-G1", "X-G2"]);
        assert_eq!(a.requestheader_headers.uid, ["X-Remote-Uid"]);
        assert_eq!(a.requestheader_headers.username, ["X-Remote-User"]);
        assert_eq!(a.requestheader_headers.extra_prefix, ["X-Remote-Extra-"]);
    }

    #[test]
    fn audit_flags() {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("audit.yaml");
        std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\n").unwrap();
        let policy_arg = format!("audit-policy-file={}", policy.display());
        let a = parse(&[
            "audit-log-path=/var/log/k3rs-audit.log",
            &policy_arg,
            "audit-log-maxage=30",
            "audit-log-maxbackup=10",
            "audit-log-maxsize=100",
            "audit-log-format=json",
        ])
        .unwrap();
        assert_eq!(
            a.audit,
            crate::audit::Options {
                log_path: Some("/var/log/k3rs-audit.log".into()),
                policy_file: Some(policy.clone()),
                limits: crate::audit::rotation::Limits {
                    max_size_mb: 100,
                    max_backup: 10,
                    max_age_days: 30
                },
            }
        );
        assert_eq!(
            parse(&["audit-log-maxsize=-1"]).unwrap_err().to_string(),
            r#"invalid argument "-1" for "--audit-log-maxsize" flag: expected a non-negative integer"#
        );
        assert!(parse(&["audit-policy-file=/nonexistent/audit.yaml"])
            .unwrap_err()
            .to_string()
            .starts_with("reading the audit policy file /nonexistent/audit.yaml"));
        assert_eq!(
            parse(&["audit-log-format=legacy"]).unwrap_err(),
            ArgError::Unsupported("audit-log-format".into())
        );
    }

    #[test]
    fn inflight_limits() {
        use crate::http::inflight::InflightLimits;
        let limits = |items: &[&str]| parse(items).unwrap().inflight;
        assert_eq!(
            limits(&[]),
            InflightLimits {
                readonly: 400,
                mutating: 200
            }
        );
        assert_eq!(
            limits(&[
                "max-requests-inflight=0",
                "max-mutating-requests-inflight=7"
            ]),
            InflightLimits {
                readonly: 0,
                mutating: 7
            }
        );
        assert_eq!(
            parse(&["max-requests-inflight=-1"])
                .unwrap_err()
                .to_string(),
            r#"invalid argument "-1" for "--max-requests-inflight" flag: expected a non-negative integer"#
        );
    }

    #[test]
    fn bad_values_in_kube_apiserver_words() {
        let err = |items: &[&str]| parse(items).unwrap_err().to_string();
        assert_eq!(
            err(&["authorization-mode=RBAC,Magic"]),
            r#"authorization-mode "Magic" is not a valid mode"#
        );
        assert_eq!(
            err(&["authorization-mode=RBAC,RBAC"]),
            r#"authorization-mode "RBAC" has mode specified more than once"#
        );
        assert_eq!(
            err(&["authorization-mode="]),
            "at least one authorization-mode must be passed"
        );
        assert_eq!(
            err(&["authorization-mode=Webhook"]),
            "authorization-mode Webhook's authorization config file not passed"
        );
        assert_eq!(
            err(&["authorization-webhook-config-file=/x.yaml"]),
            "cannot specify --authorization-webhook-config-file without mode Webhook"
        );
        assert_eq!(
            err(&["authentication-token-webhook-version=v2"]),
            r#"invalid argument "v2" for "--authentication-token-webhook-version" flag: must be v1 or v1beta1"#
        );
        assert_eq!(
            err(&["authorization-webhook-cache-authorized-ttl=5x"]),
            r#"invalid argument "5x" for "--authorization-webhook-cache-authorized-ttl" flag: expected a duration such as 30s, 5m or 1h30m"#
        );
        assert!(
            err(&["authentication-token-webhook-config-file=/nonexistent.yaml"])
                .starts_with("reading the webhook kubeconfig /nonexistent.yaml")
        );
        assert_eq!(
            err(&["authorization-mode=ABAC"]),
            "authorization-mode ABAC's authorization policy file not passed"
        );
        assert_eq!(
            err(&["authorization-policy-file=/x.jsonl"]),
            "cannot specify --authorization-policy-file without mode ABAC"
        );
        assert_eq!(
            parse(&["secure-port=1"]).unwrap_err(),
            ArgError::Unsupported("secure-port".into())
        );
        assert_eq!(
            parse(&["authorization-mode"]).unwrap_err(),
            ArgError::NotKeyValue("authorization-mode".into())
        );
    }

    #[test]
    fn oidc_flags() {
        use k3rs_auth::oidc::{jws::Algorithm, OptionsError};
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(
            &ca,
            rcgen::generate_simple_self_signed(vec!["x".into()])
                .unwrap()
                .cert
                .pem(),
        )
        .unwrap();
        let ca_arg = format!("oidc-ca-file={}", ca.display());
        let a = parse(&[
            "oidc-issuer-url=https://issuer.example",
            "oidc-client-id=k3rs",
            "oidc-username-claim=email",
            "oidc-username-prefix=-",
            "oidc-groups-claim=groups",
            "oidc-groups-prefix=oidc:",
            "oidc-required-claim=hd=example.com",
            "oidc-required-claim=tier=gold",
            "oidc-signing-algs=RS256,ES256",
            &ca_arg,
        ])
        .unwrap();
        let o = &a.oidc;
        assert_eq!(
            (
                o.issuer_url.as_str(),
                o.client_id.as_str(),
                o.username_claim.as_str()
            ),
            ("https://issuer.example", "k3rs", "email")
        );
        assert_eq!(o.username_prefix(), "");
        assert_eq!(
            (o.groups_claim.as_deref(), o.groups_prefix.as_str()),
            (Some("groups"), "oidc:")
        );
        assert_eq!(o.required_claims.len(), 2);
        assert_eq!(o.signing_algs, [Algorithm::Rs256, Algorithm::Es256]);
        assert_eq!(o.ca_file.as_deref(), Some(ca.as_path()));
        assert_eq!(
            parse(&["oidc-issuer-url=https://i"]).unwrap_err(),
            ArgError::Oidc(OptionsError::Together)
        );
        assert_eq!(
            parse(&["oidc-issuer-url=http://i", "oidc-client-id=c"]).unwrap_err(),
            ArgError::Oidc(OptionsError::NotHttps("http://i".into()))
        );
        assert_eq!(
            parse(&["oidc-signing-algs=none"]).unwrap_err(),
            ArgError::Oidc(OptionsError::Algorithm("none".into()))
        );
        assert!(matches!(
            parse(&["oidc-issuer-url=https://i", "oidc-client-id=c", "oidc-ca-file=/nonexistent"]).unwrap_err(),
            ArgError::Oidc(k3rs_auth::oidc::OptionsError::CaFile(m)) if m.contains("/nonexistent")
        ));
        assert_eq!(
            parse(&[
                "oidc-issuer-url=https://i",
                "oidc-client-id=c",
                "authentication-config=/a.yaml"
            ])
            .unwrap_err(),
            ArgError::AuthenticationConfigWithOidc
        );
        assert!(matches!(
            parse(&["authentication-config=/nonexistent.yaml"]).unwrap_err(),
            ArgError::File(m) if m.starts_with("reading the authentication config /nonexistent.yaml")
        ));
    }

    #[test]
    fn chain_puts_masters_first_then_the_modes() {
        use k3rs_auth::authz::Decision;
        use k3rs_auth::{Attributes, UserInfo};
        #[derive(Debug)]
        struct Never;
        impl Authorizer for Never {
            fn authorize<'a>(
                &'a self,
                _: &'a Attributes,
            ) -> futures::future::BoxFuture<'a, Decision> {
                Box::pin(async { Decision::NoOpinion("rbac says no".into()) })
            }
        }
        let at = |groups: Vec<String>| {
            Attributes::of_request(
                Arc::new(UserInfo::authenticated("u", groups)),
                "GET",
                "/api/v1/pods",
                None,
            )
        };
        let decide = |modes: &[Mode], a: &Attributes| {
            futures::executor::block_on(chain(modes, Arc::new(Never), None, None, None).evaluate(a))
        };
        let user = at(vec![]);
        assert_eq!(
            decide(&[Mode::Rbac], &user),
            Decision::NoOpinion("rbac says no".into())
        );
        assert_eq!(
            decide(&[Mode::Rbac, Mode::AlwaysAllow], &user),
            Decision::Allow
        );
        assert_eq!(
            decide(&[Mode::AlwaysDeny, Mode::AlwaysAllow], &user),
            Decision::Allow,
            "AlwaysDeny has no opinion, as upstream's"
        );
        assert_eq!(
            decide(&[Mode::Node, Mode::AlwaysDeny], &user),
            Decision::NoOpinion("Everything is forbidden.".into())
        );
        let master = at(vec!["system:masters".into()]);
        assert_eq!(decide(&[Mode::AlwaysDeny], &master), Decision::Allow);
    }
}
