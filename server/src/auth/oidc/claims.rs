//! From a verified ID token's claims to the user, as kube-apiserver's OIDC authenticator
//! maps them with the `--oidc-*` flags.
//!
//! # Guarantees
//! - A user is returned only when `iss` is the issuer, `aud` (string or list) holds the
//!   client id, `exp` is present and not past, `nbf` (if any) is at most
//!   [`NOT_BEFORE_LEEWAY_SECONDS`] ahead, every required claim is present with its value,
//!   and the username claim is a non-empty string (with `email_verified`, when present,
//!   `true` for the `email` claim).
//! - Groups come from a string or a list of strings; anything else is an error, never an
//!   empty group list.

use serde_json::{Map, Value};

use super::Options;
use crate::auth::UserInfo;

/// How far in the future `nbf` may be (go-oidc's allowed clock skew).
pub const NOT_BEFORE_LEEWAY_SECONDS: f64 = 300.0;

/// Why verified claims do not make a user (logged, never sent to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("oidc: id token issued by a different provider, expected {expected:?} got {got:?}")]
    Issuer { expected: String, got: String },
    #[error("oidc: expected audience {0:?} not in the token's audiences")]
    Audience(String),
    #[error("oidc: token is expired")]
    Expired,
    #[error("oidc: token has no valid \"exp\" claim")]
    NoExpiry,
    #[error("oidc: current time before the nbf (not before) time")]
    NotYetValid,
    #[error("oidc: required claim {0} not present in ID token")]
    RequiredMissing(String),
    #[error("oidc: required claim {claim} value does not match. Got = {got}, want = {want}")]
    RequiredMismatch {
        claim: String,
        got: String,
        want: String,
    },
    #[error("oidc: parse username claims {0:?}: not a non-empty string")]
    Username(String),
    #[error("oidc: email not verified")]
    EmailNotVerified,
    #[error("oidc: parse 'email_verified' claim: not a boolean")]
    EmailVerified,
    #[error("oidc: parse groups claim {0:?}: not a string or a list of strings")]
    Groups(String),
}

/// The user `claims` (of a token whose signature verified) stand for at unix time `now`.
pub fn user(opts: &Options, claims: &Map<String, Value>, now: f64) -> Result<UserInfo, ClaimError> {
    let iss = claims
        .get("iss")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if iss != opts.issuer_url {
        return Err(ClaimError::Issuer {
            expected: opts.issuer_url.clone(),
            got: iss.chars().take(256).collect(),
        });
    }
    let audience_ok = match claims.get("aud") {
        Some(Value::String(a)) => *a == opts.client_id,
        Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(&opts.client_id)),
        _ => false,
    };
    if !audience_ok {
        return Err(ClaimError::Audience(opts.client_id.clone()));
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
    for (claim, want) in &opts.required_claims {
        match claims.get(claim) {
            None => return Err(ClaimError::RequiredMissing(claim.clone())),
            Some(Value::String(got)) if got == want => {}
            Some(got) => {
                return Err(ClaimError::RequiredMismatch {
                    claim: claim.clone(),
                    got: got.as_str().map_or_else(|| got.to_string(), str::to_string),
                    want: want.clone(),
                })
            }
        }
    }
    let username = match claims.get(&opts.username_claim) {
        Some(Value::String(u)) if !u.is_empty() => u,
        _ => return Err(ClaimError::Username(opts.username_claim.clone())),
    };
    if opts.username_claim == "email" {
        match claims.get("email_verified") {
            None | Some(Value::Bool(true)) => {}
            Some(Value::Bool(false)) => return Err(ClaimError::EmailNotVerified),
            Some(_) => return Err(ClaimError::EmailVerified),
        }
    }
    let groups = match opts.groups_claim.as_deref().map(|c| (c, claims.get(c))) {
        None | Some((_, None)) => Vec::new(),
        Some((_, Some(Value::String(g)))) => vec![g.clone()],
        Some((c, Some(Value::Array(list)))) => list
            .iter()
            .map(|g| g.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ClaimError::Groups(c.to_string()))?,
        Some((c, Some(_))) => return Err(ClaimError::Groups(c.to_string())),
    };
    let groups = groups
        .into_iter()
        .map(|g| format!("{}{g}", opts.groups_prefix))
        .collect();
    Ok(UserInfo::authenticated(
        format!("{}{username}", opts.username_prefix()),
        groups,
    ))
}

#[cfg(test)]
mod tests {
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
        user(o, &claims(c), 1000.0).map(|u| (u.username, u.groups))
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
            Err(ClaimError::Audience("k3rs".into()))
        );
        assert_eq!(
            check(json!({"aud": "other"})),
            Err(ClaimError::Audience("k3rs".into()))
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
        assert_eq!(user(&o, &no_exp, 1000.0), Err(ClaimError::NoExpiry));
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
