//! From a verified ID token's claims to the user, as kube-apiserver's JWT authenticator maps
//! them ([`JwtAuthenticator`]: from the `--oidc-*` flags or `--authentication-config`).
//!
//! # Guarantees
//! - A user is returned only when `iss` is the issuer, `aud` (string or list) holds one of
//!   the audiences, `exp` is present and not past, `nbf` (if any) is at most
//!   [`NOT_BEFORE_LEEWAY_SECONDS`] ahead, every claim rule passes, the username is a
//!   non-empty string (with `email_verified`, when present, `true` for the `email` claim),
//!   and every user rule passes.
//! - Groups and extra values come from a string or a list of strings; anything else is an
//!   error, never an empty list. Empty values (`""`, `[]`, `null`) of expressions count as
//!   absent.

use serde_json::{Map, Value};

use super::model::{ClaimRule, Expression, JwtAuthenticator, Mapping};
use crate::UserInfo;

/// How far in the future `nbf` may be (go-oidc's allowed clock skew).
pub const NOT_BEFORE_LEEWAY_SECONDS: f64 = 300.0;

/// Why verified claims do not make a user (logged, never sent to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// `iss` is not the configured issuer URL.
    #[error("oidc: id token issued by a different provider, expected {expected:?} got {got:?}")]
    Issuer {
        /// The configured issuer URL.
        expected: String,
        /// The token's `iss`.
        got: String,
    },
    /// None of the configured audiences (listed) is in `aud`.
    #[error("oidc: expected audience in {0:?} not in the token's audiences")]
    Audience(Vec<String>),
    /// `exp` is in the past.
    #[error("oidc: token is expired")]
    Expired,
    /// `exp` is missing or not a number.
    #[error("oidc: token has no valid \"exp\" claim")]
    NoExpiry,
    /// `nbf` is more than [`NOT_BEFORE_LEEWAY_SECONDS`] in the future.
    #[error("oidc: current time before the nbf (not before) time")]
    NotYetValid,
    /// A `claimValidationRules` claim (named) is absent.
    #[error("oidc: required claim {0} not present in ID token")]
    RequiredMissing(String),
    /// A `claimValidationRules` claim has another value than required.
    #[error("oidc: required claim {claim} value does not match. Got = {got}, want = {want}")]
    RequiredMismatch {
        /// The required claim's name.
        claim: String,
        /// The token's value of it.
        got: String,
        /// The value `claimValidationRules` require.
        want: String,
    },
    /// The username claim (named) is missing, empty or not a string.
    #[error("oidc: parse username claims {0:?}: not a non-empty string")]
    Username(String),
    /// The username claim is `email` and `email_verified` is false.
    #[error("oidc: email not verified")]
    EmailNotVerified,
    /// `email_verified` is present but not a boolean.
    #[error("oidc: parse 'email_verified' claim: not a boolean")]
    EmailVerified,
    /// The groups claim (named) is neither a string nor a list of strings.
    #[error("oidc: parse groups claim {0:?}: not a string or a list of strings")]
    Groups(String),
    /// The uid claim (named) is not a string.
    #[error("oidc: parse uid claim {0:?}: not a string")]
    Uid(String),
    /// A CEL expression could not be evaluated on the claims.
    #[error("oidc: error evaluating {what} expression {expression:?}: {reason}")]
    Evaluation {
        /// Which mapping's expression failed (`username`, `groups`, `uid`, `extra`, …).
        what: &'static str,
        /// The CEL expression's source.
        expression: String,
        /// Why evaluation failed.
        reason: String,
    },
    /// A CEL `claimValidationRules` or `userValidationRules` rule rejected the token (its message).
    #[error("oidc: {0}")]
    Rule(String),
}

/// The user `claims` (of a token whose signature verified) stand for at unix time `now`.
pub fn user(
    jwt: &JwtAuthenticator,
    claims: &Map<String, Value>,
    now: f64,
) -> Result<UserInfo, ClaimError> {
    let iss = claims
        .get("iss")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if iss != jwt.issuer_url {
        return Err(ClaimError::Issuer {
            expected: jwt.issuer_url.clone(),
            got: iss.chars().take(256).collect(),
        });
    }
    let has_audience = |a: &Value| {
        a.as_str()
            .is_some_and(|a| jwt.audiences.iter().any(|x| x == a))
    };
    let audience_ok = match claims.get("aud") {
        Some(a @ Value::String(_)) => has_audience(a),
        Some(Value::Array(list)) => list.iter().any(has_audience),
        _ => false,
    };
    if !audience_ok {
        return Err(ClaimError::Audience(jwt.audiences.clone()));
    }
    match claims.get("exp").and_then(Value::as_f64) {
        None => return Err(ClaimError::NoExpiry),
        Some(exp) if exp < now => return Err(ClaimError::Expired),
        Some(_) => {}
    }
    if let Some(nbf) = claims.get("nbf").and_then(Value::as_f64) {
        if now + NOT_BEFORE_LEEWAY_SECONDS < nbf {
            return Err(ClaimError::NotYetValid);
        }
    }
    let cel_claims = std::cell::OnceCell::new();
    let claims_var = || {
        cel_claims
            .get_or_init(|| k3rs_cel::value::to_cel(&Value::Object(claims.clone()), None))
            .clone()
    };
    for rule in &jwt.claim_rules {
        check_claim_rule(rule, claims, &claims_var)?;
    }
    let username = match &jwt.username {
        Mapping::Claim { claim, prefix } => {
            let name = match claims.get(claim) {
                Some(Value::String(u)) if !u.is_empty() => u,
                _ => return Err(ClaimError::Username(claim.clone())),
            };
            if claim == "email" {
                match claims.get("email_verified") {
                    None | Some(Value::Bool(true)) => {}
                    Some(Value::Bool(false)) => return Err(ClaimError::EmailNotVerified),
                    Some(_) => return Err(ClaimError::EmailVerified),
                }
            }
            format!("{prefix}{name}")
        }
        Mapping::Expression(e) => match run(e, "claims", claims_var(), "username")? {
            Value::String(u) if !u.is_empty() => u,
            Value::String(_) => {
                return Err(ClaimError::Rule(
                    "empty username via CEL expression is not allowed".into(),
                ))
            }
            other => return Err(wrong_type(e, "username", &other, "string")),
        },
    };
    let groups = match &jwt.groups {
        None => Vec::new(),
        Some(Mapping::Claim { claim, prefix }) => strings(claims.get(claim))
            .ok_or_else(|| ClaimError::Groups(claim.clone()))?
            .into_iter()
            .map(|g| format!("{prefix}{g}"))
            .collect(),
        Some(Mapping::Expression(e)) => {
            let v = run(e, "claims", claims_var(), "groups")?;
            strings(Some(&v))
                .ok_or_else(|| wrong_type(e, "groups", &v, "string or list of strings"))?
        }
    };
    let uid = match &jwt.uid {
        None => String::new(),
        Some(Mapping::Claim { claim, .. }) => match claims.get(claim) {
            Some(Value::String(u)) => u.clone(),
            _ => return Err(ClaimError::Uid(claim.clone())),
        },
        Some(Mapping::Expression(e)) => match run(e, "claims", claims_var(), "uid")? {
            Value::String(u) => u,
            other => return Err(wrong_type(e, "uid", &other, "string")),
        },
    };
    let mut user = UserInfo::authenticated(username, groups);
    user.uid = uid;
    for (key, e) in &jwt.extra {
        let v = run(e, "claims", claims_var(), "extra")?;
        let values: Vec<String> = strings(Some(&v))
            .ok_or_else(|| wrong_type(e, "extra", &v, "string or list of strings"))?
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        if !values.is_empty() {
            user.extra.insert(key.clone(), values);
        }
    }
    if !jwt.user_rules.is_empty() {
        let user_var = k3rs_cel::value::to_cel(
            &serde_json::json!({"username": user.username, "uid": user.uid,
                "groups": user.groups, "extra": user.extra}),
            None,
        );
        for rule in &jwt.user_rules {
            match run(
                &rule.expression,
                "user",
                user_var.clone(),
                "user validation",
            )? {
                Value::Bool(true) => {}
                _ => {
                    return Err(ClaimError::Rule(rule_message(
                        &rule.message,
                        &rule.expression,
                        "user validation",
                    )))
                }
            }
        }
    }
    Ok(user)
}

fn check_claim_rule(
    rule: &ClaimRule,
    claims: &Map<String, Value>,
    claims_var: &dyn Fn() -> cel::Value,
) -> Result<(), ClaimError> {
    match rule {
        ClaimRule::Required { claim, value } => match claims.get(claim) {
            None => Err(ClaimError::RequiredMissing(claim.clone())),
            Some(Value::String(got)) if got == value => Ok(()),
            Some(got) => Err(ClaimError::RequiredMismatch {
                claim: claim.clone(),
                got: got.as_str().map_or_else(|| got.to_string(), str::to_string),
                want: value.clone(),
            }),
        },
        ClaimRule::Expression {
            expression,
            message,
        } => match run(expression, "claims", claims_var(), "claim validation")? {
            Value::Bool(true) => Ok(()),
            _ => Err(ClaimError::Rule(rule_message(
                message,
                expression,
                "claim validation",
            ))),
        },
    }
}

fn rule_message(message: &str, e: &Expression, what: &str) -> String {
    if message.is_empty() {
        format!("{what} rule failed: {}", e.source)
    } else {
        message.to_string()
    }
}

/// Evaluates `e` with `variable` bound; the result as JSON.
fn run(
    e: &Expression,
    variable: &'static str,
    value: cel::Value,
    what: &'static str,
) -> Result<Value, ClaimError> {
    let vars = vec![(variable, k3rs_cel::Var::Plain(value))];
    let fail = |reason: String| ClaimError::Evaluation {
        what,
        expression: e.source.clone(),
        reason,
    };
    let out = k3rs_cel::evaluate(&e.program, &vars).map_err(|err| fail(err.0))?;
    k3rs_cel::value::to_json(&out).ok_or_else(|| fail("the result is not a JSON value".into()))
}

fn wrong_type(e: &Expression, what: &'static str, got: &Value, want: &str) -> ClaimError {
    ClaimError::Evaluation {
        what,
        expression: e.source.clone(),
        reason: format!("got {got}, want a {want}"),
    }
}

/// A string (one), a list of strings, or nothing (`null`, `""`, `[]`, absent); `None` for
/// anything else.
fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    match v {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::String(s)) if s.is_empty() => Some(Vec::new()),
        Some(Value::String(s)) => Some(vec![s.clone()]),
        Some(Value::Array(list)) => list
            .iter()
            .map(|g| g.as_str().map(str::to_string))
            .collect(),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Options;
    use super::*;
    use serde_json::json;

    const ISSUER: &str = "https://issuer.example";

    fn opts() -> Options {
        Options {
            issuer_url: ISSUER.into(),
            client_id: "k3rs".into(),
            ..Options::default()
        }
    }

    fn claims(v: Value) -> Map<String, Value> {
        let mut base = json!({"iss": ISSUER, "aud": "k3rs", "exp": 2000, "sub": "alice"});
        for (k, v) in v.as_object().unwrap() {
            base[k] = v.clone();
        }
        base.as_object().unwrap().clone()
    }

    fn name_and_groups(o: &Options, c: Value) -> Result<(String, Vec<String>), ClaimError> {
        let jwt = JwtAuthenticator::from_flags(o).unwrap();
        user(&jwt, &claims(c), 1000.0).map(|u| (u.username, u.groups))
    }

    #[test]
    fn username_prefix_rules() {
        let mut o = opts();
        assert_eq!(
            name_and_groups(&o, json!({})).unwrap().0,
            "https://issuer.example#alice"
        );
        o.username_prefix = Some("-".into());
        assert_eq!(name_and_groups(&o, json!({})).unwrap().0, "alice");
        o.username_prefix = Some("oidc:".into());
        assert_eq!(name_and_groups(&o, json!({})).unwrap().0, "oidc:alice");
        // The email claim gets no prefix unless one is given.
        o.username_prefix = None;
        o.username_claim = "email".into();
        let c = json!({"email": "a@example.com"});
        assert_eq!(name_and_groups(&o, c.clone()).unwrap().0, "a@example.com");
        o.username_prefix = Some(String::new());
        assert_eq!(name_and_groups(&o, c).unwrap().0, "a@example.com");
    }

    #[test]
    fn groups_from_a_string_or_a_list_with_the_prefix() {
        let mut o = opts();
        o.groups_claim = Some("groups".into());
        o.groups_prefix = "oidc:".into();
        let groups = |c| name_and_groups(&o, c).map(|u| u.1);
        assert_eq!(
            groups(json!({"groups": ["dev", "ops"]})).unwrap(),
            ["oidc:dev", "oidc:ops", "system:authenticated"]
        );
        assert_eq!(
            groups(json!({"groups": "dev"})).unwrap(),
            ["oidc:dev", "system:authenticated"]
        );
        assert_eq!(groups(json!({})).unwrap(), ["system:authenticated"]);
        assert_eq!(
            groups(json!({"groups": ["dev", 1]})),
            Err(ClaimError::Groups("groups".into()))
        );
        assert_eq!(
            groups(json!({"groups": {"a": 1}})),
            Err(ClaimError::Groups("groups".into()))
        );
    }

    #[test]
    fn audience_issuer_and_time_checks() {
        let o = opts();
        let check = |c| name_and_groups(&o, c).map(|_| ());
        assert_eq!(check(json!({"aud": ["x", "k3rs"]})), Ok(()));
        assert_eq!(
            check(json!({"aud": ["x"]})),
            Err(ClaimError::Audience(vec!["k3rs".into()]))
        );
        assert_eq!(
            check(json!({"aud": "other"})),
            Err(ClaimError::Audience(vec!["k3rs".into()]))
        );
        assert!(matches!(
            check(json!({"iss": "https://issuer.example/"})),
            Err(ClaimError::Issuer { .. })
        ));
        assert_eq!(check(json!({"exp": 999})), Err(ClaimError::Expired));
        assert_eq!(check(json!({"exp": 1000})), Ok(()));
        assert_eq!(check(json!({"exp": "2000"})), Err(ClaimError::NoExpiry));
        let mut no_exp = claims(json!({}));
        no_exp.remove("exp");
        let jwt = JwtAuthenticator::from_flags(&o).unwrap();
        assert_eq!(user(&jwt, &no_exp, 1000.0), Err(ClaimError::NoExpiry));
        assert_eq!(check(json!({"nbf": 1300})), Ok(()));
        assert_eq!(check(json!({"nbf": 1301})), Err(ClaimError::NotYetValid));
    }

    #[test]
    fn required_claims_username_and_email_verified() {
        let mut o = opts();
        o.required_claims.insert("hd".into(), "example.com".into());
        let check = |o: &Options, c| name_and_groups(o, c).map(|_| ());
        assert_eq!(check(&o, json!({"hd": "example.com"})), Ok(()));
        assert_eq!(
            check(&o, json!({})),
            Err(ClaimError::RequiredMissing("hd".into()))
        );
        assert_eq!(
            check(&o, json!({"hd": "evil.com"})),
            Err(ClaimError::RequiredMismatch {
                claim: "hd".into(),
                got: "evil.com".into(),
                want: "example.com".into()
            })
        );
        let o = opts();
        for bad in [json!(""), json!(7), Value::Null] {
            assert_eq!(
                check(&o, json!({"sub": bad})),
                Err(ClaimError::Username("sub".into()))
            );
        }
        let mut o = opts();
        o.username_claim = "email".into();
        let email = |v: Value| check(&o, json!({"email": "a@b", "email_verified": v}));
        assert_eq!(email(json!(true)), Ok(()));
        assert_eq!(email(json!(false)), Err(ClaimError::EmailNotVerified));
        assert_eq!(email(json!("true")), Err(ClaimError::EmailVerified));
        assert_eq!(check(&o, json!({"email": "a@b"})), Ok(()));
    }
}
