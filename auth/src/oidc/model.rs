//! One JWT authenticator's settings, compiled (upstream's `JWTAuthenticator`): the issuer,
//! its audiences, the claim validation rules, how claims map to the user, and the rules the
//! user must pass. Both the `--oidc-*` flags ([`JwtAuthenticator::from_flags`]) and the
//! structured `--authentication-config` file ([`super::config`]) end up here.
//!
//! # Guarantees
//! - Every CEL expression held compiled and only refers to its declared variable (`claims`,
//!   or `user` for user validation rules); the configuration's author is trusted, so the
//!   expressions run on the request's thread, bounded only by the environment's nesting
//!   limit.

use std::sync::Arc;

use super::jws::Algorithm;
use super::{Options, OptionsError};

/// A compiled CEL expression with its source (for messages).
#[derive(Debug, Clone)]
pub struct Expression {
    /// The expression as configured (quoted in errors).
    pub source: String,
    /// The compiled program.
    pub program: Arc<cel::Program>,
}

impl Expression {
    /// Compiles `source`, which may refer to `variable` only.
    pub fn compile(source: &str, variable: &str) -> Result<Expression, k3rs_cel::CompileError> {
        let compiled = k3rs_cel::compile(source, &[variable])?;
        Ok(Expression {
            source: source.to_string(),
            program: Arc::new(compiled.program),
        })
    }
}

/// Where a user attribute comes from.
#[derive(Debug, Clone)]
pub enum Mapping {
    /// A claim's value, after `prefix`.
    Claim {
        /// The claim's name.
        claim: String,
        /// Prepended to the claim's value.
        prefix: String,
    },
    /// A CEL expression over `claims` giving the value.
    Expression(Expression),
}

/// A rule the claims must pass.
#[derive(Debug, Clone)]
pub enum ClaimRule {
    /// The claim must be a string equal to `value`.
    Required {
        /// The claim's name.
        claim: String,
        /// The value it must have.
        value: String,
    },
    /// The expression must be `true`; `message` explains a failure.
    Expression {
        /// A CEL expression over `claims`.
        expression: Expression,
        /// Why the token is refused when the expression is `false`.
        message: String,
    },
}

/// A rule the mapped user must pass.
#[derive(Debug, Clone)]
pub struct UserRule {
    /// A CEL expression over `user` that must be `true`.
    pub expression: Expression,
    /// Why the user is refused when it is not (`userValidationRules[].message`).
    pub message: String,
}

/// The issuer's TLS client configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[error("oidc issuer {issuer}: {source}")]
pub struct IssuerTlsError {
    /// The issuer URL.
    pub issuer: String,
    /// Why.
    #[source]
    pub source: crate::webhook::client::TlsConfigError,
}

/// One issuer's authenticator.
#[derive(Debug, Clone)]
pub struct JwtAuthenticator {
    /// Must equal the tokens' `iss` and the discovery document's `issuer`.
    pub issuer_url: String,
    /// Where the discovery document is (`<issuer>/.well-known/openid-configuration` if not).
    pub discovery_url: Option<String>,
    /// PEM CA certificates of the issuer's TLS (the system's roots if not).
    pub certificate_authority: Option<Vec<u8>>,
    /// Tokens must be issued for one of these (`aud`).
    pub audiences: Vec<String>,
    /// Algorithms a token's signature may use (`--oidc-signing-algs`; every supported one for structured configuration).
    pub signing_algs: Vec<Algorithm>,
    /// Rules the claims must pass (`--oidc-required-claim`, `claimValidationRules`).
    pub claim_rules: Vec<ClaimRule>,
    /// Where the username comes from (`--oidc-username-claim`/`-prefix`, `claimMappings.username`).
    pub username: Mapping,
    /// Where the groups come from, if anywhere (`--oidc-groups-claim`/`-prefix`, `claimMappings.groups`).
    pub groups: Option<Mapping>,
    /// Where the uid comes from, if anywhere (`claimMappings.uid`).
    pub uid: Option<Mapping>,
    /// `user.extra` keys and the expressions of their values.
    pub extra: Vec<(String, Expression)>,
    /// Rules the mapped user must pass (`userValidationRules`).
    pub user_rules: Vec<UserRule>,
}

/// Every algorithm this server verifies (the structured configuration has no list).
pub const ALL_ALGORITHMS: &[Algorithm] = &[
    Algorithm::Rs256,
    Algorithm::Rs384,
    Algorithm::Rs512,
    Algorithm::Ps256,
    Algorithm::Ps384,
    Algorithm::Ps512,
    Algorithm::Es256,
    Algorithm::Es384,
];

impl JwtAuthenticator {
    /// The authenticator the `--oidc-*` flags describe (validated), its CA file read.
    pub fn from_flags(opts: &Options) -> Result<JwtAuthenticator, OptionsError> {
        let certificate_authority = match &opts.ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                OptionsError::CaFile(format!("oidc-ca-file {}: {e}", path.display()))
            })?),
            None => None,
        };
        Ok(JwtAuthenticator {
            issuer_url: opts.issuer_url.clone(),
            discovery_url: None,
            certificate_authority,
            audiences: vec![opts.client_id.clone()],
            signing_algs: opts.signing_algs.clone(),
            claim_rules: opts
                .required_claims
                .iter()
                .map(|(claim, value)| ClaimRule::Required {
                    claim: claim.clone(),
                    value: value.clone(),
                })
                .collect(),
            username: Mapping::Claim {
                claim: opts.username_claim.clone(),
                prefix: opts.username_prefix(),
            },
            groups: opts.groups_claim.clone().map(|claim| Mapping::Claim {
                claim,
                prefix: opts.groups_prefix.clone(),
            }),
            uid: None,
            extra: Vec::new(),
            user_rules: Vec::new(),
        })
    }

    /// A TLS client configuration trusting the issuer's CA (or the system's roots).
    pub fn tls(&self) -> Result<Arc<rustls::ClientConfig>, IssuerTlsError> {
        use crate::webhook::client::{tls_config, Roots};
        let roots = match &self.certificate_authority {
            Some(pem) => Roots::Pem(pem),
            None => Roots::System,
        };
        tls_config(roots, None)
            .map(Arc::new)
            .map_err(|source| IssuerTlsError {
                issuer: self.issuer_url.clone(),
                source,
            })
    }
}
