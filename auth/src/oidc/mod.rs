//! OpenID Connect ID tokens as bearer tokens (kube-apiserver's `--oidc-*` flags): the
//! provider's keys are discovered from `<issuer>/.well-known/openid-configuration` and its
//! `jwks_uri` ([`provider`]), tokens verified against them ([`jws`]) and their claims mapped
//! to a user ([`claims`]) by the authenticator ([`authenticator`]).

pub mod authenticator;
pub mod claims;
pub mod config;
pub mod jws;
pub mod model;
pub mod provider;

use std::collections::BTreeMap;
use std::path::PathBuf;

pub use authenticator::Oidc;
use jws::Algorithm;

/// The `--oidc-*` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `oidc-issuer-url`: empty disables the authenticator.
    pub issuer_url: String,
    /// `oidc-client-id`: the audience tokens must be issued for.
    pub client_id: String,
    /// `oidc-username-claim` (`sub`).
    pub username_claim: String,
    /// `oidc-username-prefix` as given (see [`Options::username_prefix`]).
    pub username_prefix: Option<String>,
    /// `oidc-groups-claim` (none).
    pub groups_claim: Option<String>,
    /// `oidc-groups-prefix` (none).
    pub groups_prefix: String,
    /// `oidc-required-claim` (`key=value`, repeatable).
    pub required_claims: BTreeMap<String, String>,
    /// `oidc-signing-algs` (`RS256`).
    pub signing_algs: Vec<Algorithm>,
    /// `oidc-ca-file`: the CA of the issuer's TLS certificate (the system's otherwise).
    pub ca_file: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            issuer_url: String::new(),
            client_id: String::new(),
            username_claim: "sub".into(),
            username_prefix: None,
            groups_claim: None,
            groups_prefix: String::new(),
            required_claims: BTreeMap::new(),
            signing_algs: vec![Algorithm::Rs256],
            ca_file: None,
        }
    }
}

/// Why the flags cannot be used (kube-apiserver's words where it has them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// Only one of `--oidc-issuer-url` and `--oidc-client-id` is set.
    #[error("oidc-issuer-url and oidc-client-id must be specified together")]
    Together,
    /// The issuer URL (given) is not `https://`.
    #[error("oidc-issuer-url ({0:?}) must use the https scheme")]
    NotHttps(String),
    /// Another `--oidc-*` flag is set without `--oidc-issuer-url`.
    #[error("oidc-issuer-url must be set to use the other oidc-* flags")]
    WithoutIssuer,
    /// `--oidc-signing-algs` names an algorithm (given) this server cannot verify.
    #[error("oidc-signing-algs: unsupported algorithm {0:?} (supported: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384)")]
    Algorithm(String),
    /// A `--oidc-required-claim` entry (given) is not `key=value`.
    #[error("oidc-required-claim {0:?}: expected key=value")]
    RequiredClaim(String),
    /// `--oidc-ca-file` cannot be read (the message says why).
    #[error("{0}")]
    CaFile(String),
}

impl Options {
    /// Whether the authenticator is configured.
    pub fn enabled(&self) -> bool {
        !self.issuer_url.is_empty()
    }

    /// The prefix of usernames: as given (`-` for none); by default `<issuer-url>#`, except
    /// for the `email` claim, which gets none.
    pub fn username_prefix(&self) -> String {
        match self.username_prefix.as_deref() {
            Some("-") => String::new(),
            Some(p) if !p.is_empty() => p.to_string(),
            _ if self.username_claim == "email" => String::new(),
            _ => format!("{}#", self.issuer_url),
        }
    }

    /// `oidc-signing-algs`: a comma-separated list of known algorithms.
    pub fn parse_algorithms(value: &str) -> Result<Vec<Algorithm>, OptionsError> {
        value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|a| Algorithm::parse(a).ok_or_else(|| OptionsError::Algorithm(a.to_string())))
            .collect()
    }

    /// Adds `oidc-required-claim`'s `key=value[,key=value]`.
    pub fn add_required_claims(&mut self, value: &str) -> Result<(), OptionsError> {
        for pair in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| OptionsError::RequiredClaim(pair.to_string()))?;
            self.required_claims.insert(k.to_string(), v.to_string());
        }
        Ok(())
    }

    /// The checks kube-apiserver makes of the flags at start.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if !self.enabled() {
            return if *self == (Options::default()) {
                Ok(())
            } else if !self.client_id.is_empty() {
                Err(OptionsError::Together)
            } else {
                Err(OptionsError::WithoutIssuer)
            };
        }
        if self.client_id.is_empty() {
            return Err(OptionsError::Together);
        }
        if !self.issuer_url.starts_with("https://") {
            return Err(OptionsError::NotHttps(self.issuer_url.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert_eq!(Options::default().validate(), Ok(()));
        let o = |issuer: &str, client: &str| Options {
            issuer_url: issuer.into(),
            client_id: client.into(),
            ..Options::default()
        };
        assert_eq!(o("https://i", "c").validate(), Ok(()));
        assert_eq!(o("https://i", "").validate(), Err(OptionsError::Together));
        assert_eq!(o("", "c").validate(), Err(OptionsError::Together));
        assert_eq!(
            o("http://i", "c").validate(),
            Err(OptionsError::NotHttps("http://i".into()))
        );
        let groups_only = Options {
            groups_claim: Some("groups".into()),
            ..Options::default()
        };
        assert_eq!(groups_only.validate(), Err(OptionsError::WithoutIssuer));
    }

    #[test]
    fn algorithms_and_required_claims() {
        assert_eq!(
            Options::parse_algorithms("RS256, ES256"),
            Ok(vec![Algorithm::Rs256, Algorithm::Es256])
        );
        assert_eq!(
            Options::parse_algorithms("ES512"),
            Err(OptionsError::Algorithm("ES512".into()))
        );
        assert_eq!(
            Options::parse_algorithms("HS256"),
            Err(OptionsError::Algorithm("HS256".into()))
        );
        let mut o = Options::default();
        o.add_required_claims("a=1,b=x=y").unwrap();
        o.add_required_claims("c=").unwrap();
        assert_eq!(
            o.required_claims.into_iter().collect::<Vec<_>>(),
            [
                ("a".into(), "1".into()),
                ("b".into(), "x=y".into()),
                ("c".into(), String::new())
            ]
        );
        let mut o = Options::default();
        assert_eq!(
            o.add_required_claims("novalue"),
            Err(OptionsError::RequiredClaim("novalue".into()))
        );
        assert_eq!(
            o.add_required_claims("=v"),
            Err(OptionsError::RequiredClaim("=v".into()))
        );
    }
}
