//! kube-apiserver's structured authentication configuration (`--authentication-config`):
//! an `AuthenticationConfiguration` (`apiserver.config.k8s.io/v1alpha1`, `v1beta1` or `v1`)
//! whose `jwt` entries each become a [`JwtAuthenticator`].
//!
//! # Guarantees
//! - The file is decoded strictly (unknown fields are errors) and validated as upstream
//!   does (issuer URLs https and unique, audiences and their match policy, claim xor
//!   expression, prefixes required with claims, extra keys, every expression compiles);
//!   errors name the field (`jwt[0].claimMappings.username.prefix: …`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::model::{ClaimRule, Expression, JwtAuthenticator, Mapping, UserRule, ALL_ALGORITHMS};

const API_VERSIONS: &[&str] = &[
    "apiserver.config.k8s.io/v1alpha1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1",
];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    jwt: Vec<Jwt>,
    /// `anonymous` (v1beta1+): accepted only when it does not change anything.
    #[serde(default)]
    anonymous: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Jwt {
    issuer: Issuer,
    #[serde(default)]
    claim_validation_rules: Vec<ClaimValidationRule>,
    claim_mappings: ClaimMappings,
    #[serde(default)]
    user_validation_rules: Vec<UserValidationRule>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Issuer {
    #[serde(default)]
    url: String,
    #[serde(default, rename = "discoveryURL")]
    discovery_url: Option<String>,
    #[serde(default)]
    certificate_authority: String,
    #[serde(default)]
    audiences: Vec<String>,
    #[serde(default)]
    audience_match_policy: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimValidationRule {
    #[serde(default)]
    claim: String,
    #[serde(default)]
    required_value: String,
    #[serde(default)]
    expression: String,
    #[serde(default)]
    message: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimMappings {
    username: PrefixedClaimOrExpression,
    #[serde(default)]
    groups: Option<PrefixedClaimOrExpression>,
    #[serde(default)]
    uid: Option<PrefixedClaimOrExpression>,
    #[serde(default)]
    extra: Vec<ExtraMapping>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrefixedClaimOrExpression {
    #[serde(default)]
    claim: String,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    expression: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExtraMapping {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value_expression: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UserValidationRule {
    #[serde(default)]
    expression: String,
    #[serde(default)]
    message: String,
}

/// A field of the configuration that fails validation: upstream's field error text
/// (`jwt[0].issuer.url: Required value: URL is required`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldError(pub String);

/// Why a configuration is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading the authentication config {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The file's content is refused.
    #[error("the authentication config {}: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<ConfigError>,
    },
    /// Not YAML or JSON of the expected shape.
    #[error("{0}")]
    Parse(#[source] serde_norway::Error),
    /// Another kind or API version.
    #[error("expected kind AuthenticationConfiguration of {}, got {kind:?} of {api_version:?}", API_VERSIONS.join(", "))]
    Kind {
        /// The document's kind.
        kind: String,
        /// The document's apiVersion.
        api_version: String,
    },
    /// An `anonymous` section.
    #[error("anonymous: not supported by this server (anonymous access is fixed: only the health, version and CA endpoints)")]
    Anonymous,
    /// A field fails validation.
    #[error(transparent)]
    Field(#[from] FieldError),
}

/// Reads and validates the configuration file at `path`.
pub fn load(path: &Path) -> Result<Vec<JwtAuthenticator>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|e| ConfigError::Invalid {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

/// The authenticators a configuration (YAML or JSON) describes.
pub fn parse(text: &str) -> Result<Vec<JwtAuthenticator>, ConfigError> {
    let file: File = serde_norway::from_str(text).map_err(ConfigError::Parse)?;
    if !API_VERSIONS.contains(&file.api_version.as_str())
        || file.kind != "AuthenticationConfiguration"
    {
        return Err(ConfigError::Kind {
            kind: file.kind.clone(),
            api_version: file.api_version.clone(),
        });
    }
    if file.anonymous.is_some() {
        return Err(ConfigError::Anonymous);
    }
    let mut issuers = HashSet::new();
    let mut discovery = HashSet::new();
    file.jwt
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let at = format!("jwt[{i}]");
            if !issuers.insert(j.issuer.url.clone()) {
                return Err(FieldError(format!(
                    "{at}.issuer.url: Duplicate value: {:?}",
                    j.issuer.url
                ))
                .into());
            }
            if let Some(d) = &j.issuer.discovery_url {
                if !discovery.insert(d.clone()) {
                    return Err(FieldError(format!(
                        "{at}.issuer.discoveryURL: Duplicate value: {d:?}"
                    ))
                    .into());
                }
            }
            Ok(authenticator(j, &at)?)
        })
        .collect()
}

fn authenticator(j: &Jwt, at: &str) -> Result<JwtAuthenticator, FieldError> {
    let issuer = &j.issuer;
    check_https(&issuer.url, &format!("{at}.issuer.url"))?;
    if let Some(d) = &issuer.discovery_url {
        check_https(d, &format!("{at}.issuer.discoveryURL"))?;
        if d.trim_end_matches('/') == issuer.url.trim_end_matches('/') {
            return Err(FieldError(format!(
                "{at}.issuer.discoveryURL: Invalid value: {d:?}: discoveryURL must be different from URL"
            )));
        }
    }
    if issuer.audiences.is_empty() {
        return Err(FieldError(format!(
            "{at}.issuer.audiences: Required value: at least one issuer.audiences is required"
        )));
    }
    let mut seen = HashSet::new();
    for (k, a) in issuer.audiences.iter().enumerate() {
        if a.is_empty() {
            return Err(FieldError(format!(
                "{at}.issuer.audiences[{k}]: Required value: audience can't be empty"
            )));
        }
        if !seen.insert(a) {
            return Err(FieldError(format!(
                "{at}.issuer.audiences[{k}]: Duplicate value: {a:?}"
            )));
        }
    }
    match (issuer.audiences.len(), issuer.audience_match_policy.as_str()) {
        (_, "MatchAny") | (1, "") => {}
        (_, "") => {
            return Err(FieldError(format!(
                "{at}.issuer.audienceMatchPolicy: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences"
            )))
        }
        (_, other) => {
            return Err(FieldError(format!(
                "{at}.issuer.audienceMatchPolicy: Unsupported value: {other:?}: supported values: \"MatchAny\""
            )))
        }
    }
    let certificate_authority = if issuer.certificate_authority.is_empty() {
        None
    } else {
        let pem = issuer.certificate_authority.as_bytes().to_vec();
        crate::webhook::client::tls_config(crate::webhook::client::Roots::Pem(&pem), None)
            .map_err(|e| {
                FieldError(format!(
                    "{at}.issuer.certificateAuthority: Invalid value: {e}"
                ))
            })?;
        Some(pem)
    };
    let mut claim_rules = Vec::new();
    let mut required = HashSet::new();
    for (k, r) in j.claim_validation_rules.iter().enumerate() {
        let here = format!("{at}.claimValidationRules[{k}]");
        match (r.claim.is_empty(), r.expression.is_empty()) {
            (false, true) => {
                if !r.message.is_empty() {
                    return Err(FieldError(format!(
                        "{here}.message: Invalid value: message can't be set when claim is set"
                    )));
                }
                if !required.insert(&r.claim) {
                    return Err(FieldError(format!(
                        "{here}.claim: Duplicate value: {:?}",
                        r.claim
                    )));
                }
                claim_rules.push(ClaimRule::Required {
                    claim: r.claim.clone(),
                    value: r.required_value.clone(),
                });
            }
            (true, false) => {
                if !r.required_value.is_empty() {
                    return Err(FieldError(format!("{here}.requiredValue: Invalid value: requiredValue can't be set when expression is set")));
                }
                claim_rules.push(ClaimRule::Expression {
                    expression: compile(&r.expression, "claims", &format!("{here}.expression"))?,
                    message: r.message.clone(),
                });
            }
            (false, false) => {
                return Err(FieldError(format!(
                    "{here}: Invalid value: claim and expression can't both be set"
                )))
            }
            (true, true) => {
                return Err(FieldError(format!(
                    "{here}: Required value: claim or expression is required"
                )))
            }
        }
    }
    let mappings = &j.claim_mappings;
    let here = format!("{at}.claimMappings");
    let username =
        mapping(&mappings.username, &format!("{here}.username"), true)?.ok_or_else(|| {
            FieldError(format!(
                "{here}.username: Required value: claim or expression is required"
            ))
        })?;
    let groups = match &mappings.groups {
        Some(g) => mapping(g, &format!("{here}.groups"), true)?,
        None => None,
    };
    let uid = match &mappings.uid {
        Some(u) => mapping(u, &format!("{here}.uid"), false)?,
        None => None,
    };
    let mut extra = Vec::new();
    let mut keys = HashSet::new();
    for (k, e) in mappings.extra.iter().enumerate() {
        let field = format!("{here}.extra[{k}]");
        check_extra_key(&e.key, &format!("{field}.key"))?;
        if !keys.insert(&e.key) {
            return Err(FieldError(format!(
                "{field}.key: Duplicate value: {:?}",
                e.key
            )));
        }
        if e.value_expression.is_empty() {
            return Err(FieldError(format!(
                "{field}.valueExpression: Required value: valueExpression is required"
            )));
        }
        extra.push((
            e.key.clone(),
            compile(
                &e.value_expression,
                "claims",
                &format!("{field}.valueExpression"),
            )?,
        ));
    }
    let user_rules = j
        .user_validation_rules
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let field = format!("{at}.userValidationRules[{k}].expression");
            if r.expression.is_empty() {
                return Err(FieldError(format!(
                    "{field}: Required value: expression is required"
                )));
            }
            Ok(UserRule {
                expression: compile(&r.expression, "user", &field)?,
                message: r.message.clone(),
            })
        })
        .collect::<Result<_, FieldError>>()?;
    Ok(JwtAuthenticator {
        issuer_url: issuer.url.clone(),
        discovery_url: issuer.discovery_url.clone(),
        certificate_authority,
        audiences: issuer.audiences.clone(),
        signing_algs: ALL_ALGORITHMS.to_vec(),
        claim_rules,
        username,
        groups,
        uid,
        extra,
        user_rules,
    })
}

/// A claim (with a prefix, which `prefixed` mappings require) or an expression; `None` when
/// neither is set.
fn mapping(
    m: &PrefixedClaimOrExpression,
    at: &str,
    prefixed: bool,
) -> Result<Option<Mapping>, FieldError> {
    match (m.claim.is_empty(), m.expression.is_empty()) {
        (true, true) => {
            if m.prefix.is_some() {
                return Err(FieldError(format!("{at}.prefix: Invalid value: prefix can't be set when claim is not set")));
            }
            Ok(None)
        }
        (false, false) => Err(FieldError(format!("{at}: Invalid value: claim and expression can't both be set"))),
        (false, true) => match (&m.prefix, prefixed) {
            (None, true) => Err(FieldError(format!(
                "{at}.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
            ))),
            (Some(_), false) => Err(FieldError(format!("{at}.prefix: Forbidden: may not be specified"))),
            (prefix, _) => Ok(Some(Mapping::Claim {
                claim: m.claim.clone(),
                prefix: prefix.clone().unwrap_or_default(),
            })),
        },
        (true, false) => {
            if m.prefix.is_some() {
                return Err(FieldError(format!("{at}.prefix: Invalid value: prefix can't be set when expression is set")));
            }
            Ok(Some(Mapping::Expression(compile(&m.expression, "claims", &format!("{at}.expression"))?)))
        }
    }
}

fn compile(source: &str, variable: &str, at: &str) -> Result<Expression, FieldError> {
    Expression::compile(source, variable).map_err(|e| {
        FieldError(format!(
            "{at}: Invalid value: {source:?}: compilation failed: {e}"
        ))
    })
}

fn check_https(url: &str, at: &str) -> Result<(), FieldError> {
    if url.is_empty() {
        return Err(FieldError(format!("{at}: Required value: URL is required")));
    }
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(FieldError(format!(
            "{at}: Invalid value: {url:?}: URL scheme must be https"
        )));
    };
    if rest.is_empty() || rest.starts_with('/') || rest.contains(['?', '#', '@']) {
        return Err(FieldError(format!(
            "{at}: Invalid value: {url:?}: URL must have a host and no user, query or fragment"
        )));
    }
    Ok(())
}

/// `example.org/foo`: lowercase, a DNS subdomain, `/`, a non-empty path.
fn check_extra_key(key: &str, at: &str) -> Result<(), FieldError> {
    if key.is_empty() {
        return Err(FieldError(format!("{at}: Required value: key is required")));
    }
    if key != key.to_lowercase() {
        return Err(FieldError(format!(
            "{at}: Invalid value: {key:?}: key must be lowercase"
        )));
    }
    let ok = key.split_once('/').is_some_and(|(domain, path)| {
        !path.is_empty()
            && !path.contains(char::is_whitespace)
            && !domain.is_empty()
            && domain.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    if !ok {
        return Err(FieldError(format!("{at}: Invalid value: {key:?}: must be a domain-prefixed path (such as \"acme.io/foo\")")));
    }
    for reserved in ["kubernetes.io", "k8s.io"] {
        let domain = key.split('/').next().unwrap_or_default();
        if domain == reserved || domain.ends_with(&format!(".{reserved}")) {
            return Err(FieldError(format!("{at}: Invalid value: {key:?}: k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const GOOD: &str = r#"
apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://issuer.example
    audiences: [k3rs, other]
    audienceMatchPolicy: MatchAny
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  - expression: "claims.tier == 'gold'"
    message: only gold
  claimMappings:
    username:
      expression: "'user:' + claims.sub"
    groups:
      claim: roles
      prefix: "r:"
    uid:
      claim: sid
    extra:
    - key: example.com/tier
      valueExpression: claims.tier
  userValidationRules:
  - expression: "!user.username.contains('system:')"
    message: no system users
- issuer:
    url: https://second.example
    discoveryURL: https://internal.example/.well-known/openid-configuration
    audiences: [k3rs]
  claimMappings:
    username: {claim: email, prefix: ""}
"#;

    fn claims(v: Value) -> serde_json::Map<String, Value> {
        let mut base = json!({"iss": "https://issuer.example", "aud": ["other"], "exp": 2000,
            "sub": "alice", "hd": "example.com", "tier": "gold", "roles": ["dev", "ops"], "sid": "u-7"});
        for (k, v) in v.as_object().unwrap() {
            base[k] = v.clone();
        }
        base.as_object().unwrap().clone()
    }

    #[test]
    fn a_full_configuration_maps_claims_with_rules_and_expressions() {
        let jwts = parse(GOOD).unwrap();
        assert_eq!(jwts.len(), 2);
        assert_eq!(
            jwts[1].discovery_url.as_deref(),
            Some("https://internal.example/.well-known/openid-configuration")
        );
        let u = super::super::claims::user(&jwts[0], &claims(json!({})), 1000.0).unwrap();
        assert_eq!(u.username, "user:alice");
        assert_eq!(u.uid, "u-7");
        assert_eq!(u.groups, ["r:dev", "r:ops", "system:authenticated"]);
        assert_eq!(u.extra["example.com/tier"], ["gold"]);
        let err = |c| {
            super::super::claims::user(&jwts[0], &claims(c), 1000.0)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err(json!({"tier": "silver"})), "oidc: only gold");
        assert_eq!(
            err(json!({"sub": "system:x"})).as_str(),
            "oidc: no system users"
        );
        assert!(err(json!({"hd": "evil.com"})).contains("required claim hd value does not match"));
        assert!(err(json!({"sid": 5})).contains("uid claim"));
        assert!(err(json!({"aud": "k3rs2"})).contains("expected audience"));
        // An expression that fails to evaluate (no such key) rejects the token.
        let mut no_tier = claims(json!({}));
        no_tier.remove("tier");
        let e = super::super::claims::user(&jwts[0], &no_tier, 1000.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("error evaluating claim validation expression"),
            "{e}"
        );
        // The `email` claim with an empty prefix, and email_verified honoured.
        let mut c = claims(json!({"iss": "https://second.example", "aud": "k3rs", "email": "a@b"}));
        assert_eq!(
            super::super::claims::user(&jwts[1], &c, 1000.0)
                .unwrap()
                .username,
            "a@b"
        );
        c.insert("email_verified".into(), json!(false));
        assert!(super::super::claims::user(&jwts[1], &c, 1000.0).is_err());
    }

    #[test]
    fn invalid_configurations_name_the_field() {
        let err =
            |from: &str, to: &str| parse(&GOOD.replacen(from, to, 1)).unwrap_err().to_string();
        assert!(err("v1beta1", "v2").starts_with("expected kind AuthenticationConfiguration"));
        assert_eq!(
            err("    groups:\n      claim: roles\n      prefix: \"r:\"\n", "    groups:\n      claim: roles\n"),
            "jwt[0].claimMappings.groups.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
        );
        assert!(err("'user:' + claims.sub", "'user:' + claimz.sub")
            .starts_with("jwt[0].claimMappings.username.expression: Invalid value"));
        assert!(err("url: https://issuer.example", "url: http://issuer.example")
            .starts_with("jwt[0].issuer.url: Invalid value: \"http://issuer.example\": URL scheme must be https"));
        assert!(
            err("url: https://second.example", "url: https://issuer.example")
                .starts_with("jwt[1].issuer.url: Duplicate value")
        );
        assert!(err("    audienceMatchPolicy: MatchAny\n", "")
            .starts_with("jwt[0].issuer.audienceMatchPolicy: Invalid value"));
        assert!(
            err("key: example.com/tier", "key: Example.com/tier").contains("key must be lowercase")
        );
        assert!(err("key: example.com/tier", "key: kubernetes.io/tier").contains("reserved"));
        assert!(err("key: example.com/tier", "key: tier").contains("domain-prefixed path"));
        assert!(
            err("  - claim: hd\n", "  - claim: hd\n    expression: 'true'\n")
                .contains("claim and expression can't both be set")
        );
        assert!(
            err("audiences: [k3rs, other]", "audiences: []").contains("audiences: Required value")
        );
        assert!(err(
            "    message: no system users\n",
            "    message: no system users\n    extra: 1\n"
        )
        .contains("unknown field"));
        assert!(
            err("!user.username", "!claims.username").contains("userValidationRules[0].expression")
        );
    }
}
