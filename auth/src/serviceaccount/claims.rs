//! Service-account token claims: what is minted, and the pure checks of a verified token's
//! claims (issuer, time, audience, shape). What needs the cluster's objects (the account,
//! the Secret or bound object still existing with the same uid) is decided afterwards by
//! [`super::authenticator`] on the [`Verified`] this returns.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::UserInfo;

/// The issuer of bound tokens (k3s's default `--service-account-issuer`).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The issuer of legacy Secret tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// The API server's audiences (k3s's `--api-audiences`): a token must name one of them.
pub const API_AUDIENCES: &[&str] = &[ISSUER, "k3s"];
/// Group of every service account.
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// Prefix of service-account user names.
pub const USER_PREFIX: &str = "system:serviceaccount:";
/// Allowed clock skew for `nbf`/`iat` in the future (kube-apiserver's leeway).
pub const LEEWAY_SECONDS: i64 = 60;
/// How long a bound pod may have been terminating before its tokens stop working.
pub const POD_DELETION_GRACE_SECONDS: i64 = 60;

/// `extra` keys of pod- and node-bound tokens, and the credential id.
pub(crate) const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
pub(crate) const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
pub(crate) const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
pub(crate) const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";
pub(crate) const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

const LEGACY_NS: &str = "kubernetes.io/serviceaccount/namespace";
const LEGACY_SECRET: &str = "kubernetes.io/serviceaccount/secret.name";
const LEGACY_SA_NAME: &str = "kubernetes.io/serviceaccount/service-account.name";
const LEGACY_SA_UID: &str = "kubernetes.io/serviceaccount/service-account.uid";

/// A named object with its uid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectRef {
    /// The object's name.
    pub name: String,
    /// The object's `metadata.uid` (the token stops working if the object is recreated).
    pub uid: String,
}

/// The object a bound token is tied to (it stops working when the object is gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// Bound to a Pod (TokenRequest's `boundObjectRef`); the token adds the pod's name and uid to `user.extra`.
    Pod(ObjectRef),
    /// Bound to a Secret.
    Secret(ObjectRef),
    /// Bound to a Node; the token adds the node's name and uid to `user.extra`.
    Node(ObjectRef),
}

/// A bound token to mint (TokenRequest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundToken {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account the token authenticates as.
    pub service_account: ObjectRef,
    /// The token's `aud`.
    pub audiences: Vec<String>,
    /// Unix seconds.
    pub issued_at: i64,
    /// Lifetime in seconds from `issued_at` (`exp = issued_at + expiration_seconds`).
    pub expiration_seconds: i64,
    /// The object the token is bound to, if any.
    pub binding: Option<Binding>,
    /// The node the bound pod runs on, when known (upstream adds it to pod-bound tokens).
    pub pod_node: Option<ObjectRef>,
    /// The token's id (`jti`), reported as `authentication.kubernetes.io/credential-id`.
    pub jti: String,
}

/// The claims of a bound token (`kubernetes.io` claim as kube-apiserver writes it).
pub fn bound_claims(t: &BoundToken) -> Map<String, Value> {
    let r = |o: &ObjectRef| json!({"name": o.name, "uid": o.uid});
    let mut k = json!({
        "namespace": t.namespace,
        "serviceaccount": r(&t.service_account),
    });
    match &t.binding {
        Some(Binding::Pod(p)) => k["pod"] = r(p),
        Some(Binding::Secret(s)) => k["secret"] = r(s),
        Some(Binding::Node(n)) => k["node"] = r(n),
        None => {}
    }
    if let Some(n) = &t.pod_node {
        k["node"] = r(n);
    }
    let claims = json!({
        "aud": t.audiences,
        "exp": t.issued_at + t.expiration_seconds,
        "iat": t.issued_at,
        "iss": ISSUER,
        "jti": t.jti,
        "kubernetes.io": k,
        "nbf": t.issued_at,
        "sub": username(&t.namespace, &t.service_account.name),
    });
    claims.as_object().cloned().unwrap_or_default()
}

/// The claims of a legacy token stored in a `kubernetes.io/service-account-token` Secret.
pub fn legacy_claims(namespace: &str, sa: &ObjectRef, secret_name: &str) -> Map<String, Value> {
    let claims = json!({
        "iss": LEGACY_ISSUER,
        LEGACY_NS: namespace,
        LEGACY_SECRET: secret_name,
        LEGACY_SA_NAME: sa.name,
        LEGACY_SA_UID: sa.uid,
        "sub": username(namespace, &sa.name),
    });
    claims.as_object().cloned().unwrap_or_default()
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn username(namespace: &str, name: &str) -> String {
    format!("{USER_PREFIX}{namespace}:{name}")
}

/// Whether `claims` were issued by this cluster's service-account signer (bound or legacy):
/// only then is the token this authenticator's kind.
pub fn is_ours(claims: &Map<String, Value>) -> bool {
    matches!(
        claims.get("iss").and_then(Value::as_str),
        Some(ISSUER | LEGACY_ISSUER)
    )
}

/// What a verified token claims, still to be checked against the cluster's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account the token claims to be.
    pub service_account: ObjectRef,
    /// A legacy token: the Secret that must still hold exactly this token.
    pub legacy_secret: Option<String>,
    /// The bound object the token names, if any (it must still exist with that uid).
    pub binding: Option<Binding>,
    /// The user, should the objects check out.
    pub user: UserInfo,
    /// The requested audiences the token is valid for.
    pub audiences: Vec<String>,
}

/// Why a signed service-account token's claims are refused (for the log, not the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimsError {
    /// A bound token without `aud`.
    #[error("token has no audience")]
    NoAudience,
    /// Neither the bound nor the legacy issuer.
    #[error("token has an unknown issuer")]
    UnknownIssuer,
    /// None of the token's audiences is accepted here.
    #[error("token audiences {token:?} are invalid for the target audiences {accepted:?}")]
    Audience {
        /// The token's audiences.
        token: Vec<String>,
        /// The audiences this server accepts.
        accepted: Vec<String>,
    },
    /// A legacy token without its Secret's name.
    #[error("legacy token without a secret name")]
    LegacyWithoutSecret,
    /// `exp` is not after now.
    #[error("token has expired")]
    Expired,
    /// `exp` is missing or not an integer.
    #[error("token without a valid exp")]
    InvalidExp,
    /// `nbf` or `iat` (named) is in the future or not an integer.
    #[error("token {0} is in the future or invalid")]
    NotYetValid(&'static str),
    /// A bound token without the `kubernetes.io` claim.
    #[error("token without the kubernetes.io claim")]
    NoKubernetesClaim,
    /// A reference (named) without a name or uid.
    #[error("token {0} claim without a name or uid")]
    IncompleteRef(&'static str),
    /// A bound token without a service account.
    #[error("token without a service account")]
    NoServiceAccount,
    /// A token bound to both a pod and a secret.
    #[error("token bound to a pod and a secret")]
    DoubleBinding,
    /// A token without its identity claims.
    #[error("token without a namespace, service account name or uid")]
    NoIdentity,
}

/// Checks the claims of a token whose signature verified: issuer, expiry (`exp` strictly
/// after `now`), `nbf`/`iat` not beyond the leeway in the future, an audience among
/// `audiences` (legacy tokens carry none and count as the API server's), and the identity
/// claims present and non-empty. `Err` says why (for the log, not the client).
pub fn check(
    claims: &Map<String, Value>,
    now: i64,
    audiences: &[String],
) -> Result<Verified, ClaimsError> {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let token_auds: Vec<String> = match claims.get("iss").and_then(Value::as_str) {
        Some(LEGACY_ISSUER) => API_AUDIENCES.iter().map(|a| a.to_string()).collect(),
        Some(ISSUER) => match claims.get("aud") {
            Some(Value::String(a)) => vec![a.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => return Err(ClaimsError::NoAudience),
        },
        _ => return Err(ClaimsError::UnknownIssuer),
    };
    let valid_for: Vec<String> = audiences
        .iter()
        .filter(|a| token_auds.contains(a))
        .cloned()
        .collect();
    if valid_for.is_empty() {
        return Err(ClaimsError::Audience {
            token: token_auds,
            accepted: audiences.to_vec(),
        });
    }
    let (namespace, sa, legacy_secret, binding, node);
    if claims.get("iss").and_then(Value::as_str) == Some(LEGACY_ISSUER) {
        namespace = s(claims.get(LEGACY_NS));
        sa = ObjectRef {
            name: s(claims.get(LEGACY_SA_NAME)),
            uid: s(claims.get(LEGACY_SA_UID)),
        };
        let secret = s(claims.get(LEGACY_SECRET));
        if secret.is_empty() {
            return Err(ClaimsError::LegacyWithoutSecret);
        }
        legacy_secret = Some(secret);
        binding = None;
        node = None;
        if let Some(exp) = claims.get("exp") {
            check_exp(exp, now)?;
        }
    } else {
        check_exp(claims.get("exp").unwrap_or(&Value::Null), now)?;
        for t in ["nbf", "iat"] {
            match claims.get(t).map(Value::as_i64) {
                None => {}
                Some(Some(v)) if v <= now + LEEWAY_SECONDS => {}
                Some(_) => return Err(ClaimsError::NotYetValid(t)),
            }
        }
        let k = claims
            .get("kubernetes.io")
            .and_then(Value::as_object)
            .ok_or(ClaimsError::NoKubernetesClaim)?;
        let r = |key: &'static str| -> Result<Option<ObjectRef>, ClaimsError> {
            match k.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => {
                    let o = ObjectRef {
                        name: s(v.get("name")),
                        uid: s(v.get("uid")),
                    };
                    if o.name.is_empty() || o.uid.is_empty() {
                        return Err(ClaimsError::IncompleteRef(key));
                    }
                    Ok(Some(o))
                }
            }
        };
        namespace = s(k.get("namespace"));
        sa = r("serviceaccount")?.ok_or(ClaimsError::NoServiceAccount)?;
        legacy_secret = None;
        let (pod, secret, n) = (r("pod")?, r("secret")?, r("node")?);
        binding = match (pod, secret) {
            (Some(p), None) => Some(Binding::Pod(p)),
            (None, Some(s)) => Some(Binding::Secret(s)),
            (Some(_), Some(_)) => return Err(ClaimsError::DoubleBinding),
            (None, None) => n.clone().map(Binding::Node),
        };
        node = n;
    }
    if namespace.is_empty() || sa.name.is_empty() || sa.uid.is_empty() {
        return Err(ClaimsError::NoIdentity);
    }
    let mut user = UserInfo::authenticated(
        username(&namespace, &sa.name),
        vec![
            ALL_SERVICE_ACCOUNTS.to_string(),
            format!("{ALL_SERVICE_ACCOUNTS}:{namespace}"),
        ],
    );
    user.uid = sa.uid.clone();
    user.extra = extra(claims, binding.as_ref(), node.as_ref());
    Ok(Verified {
        namespace,
        service_account: sa,
        legacy_secret,
        binding,
        user,
        audiences: valid_for,
    })
}

fn check_exp(exp: &Value, now: i64) -> Result<(), ClaimsError> {
    match exp.as_i64() {
        Some(e) if e > now => Ok(()),
        Some(_) => Err(ClaimsError::Expired),
        None => Err(ClaimsError::InvalidExp),
    }
}

fn extra(
    claims: &Map<String, Value>,
    binding: Option<&Binding>,
    node: Option<&ObjectRef>,
) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    if let Some(Binding::Pod(p)) = binding {
        out.insert(EXTRA_POD_NAME.to_string(), vec![p.name.clone()]);
        out.insert(EXTRA_POD_UID.to_string(), vec![p.uid.clone()]);
    }
    if let Some(n) = node {
        out.insert(EXTRA_NODE_NAME.to_string(), vec![n.name.clone()]);
        out.insert(EXTRA_NODE_UID.to_string(), vec![n.uid.clone()]);
    }
    if let Some(jti) = claims
        .get("jti")
        .and_then(Value::as_str)
        .filter(|j| !j.is_empty())
    {
        out.insert(EXTRA_CREDENTIAL_ID.to_string(), vec![format!("JTI={jti}")]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oref(name: &str, uid: &str) -> ObjectRef {
        ObjectRef {
            name: name.into(),
            uid: uid.into(),
        }
    }

    fn bound(binding: Option<Binding>) -> BoundToken {
        BoundToken {
            namespace: "ns".into(),
            service_account: oref("default", "sa-uid"),
            audiences: vec!["k3s".into()],
            issued_at: 1000,
            expiration_seconds: 3600,
            binding,
            pod_node: None,
            jti: "j1".into(),
        }
    }

    fn apis() -> Vec<String> {
        API_AUDIENCES.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn bound_claims_are_upstreams_shape() {
        let c = bound_claims(&bound(Some(Binding::Pod(oref("p", "pod-uid")))));
        assert_eq!(
            Value::Object(c),
            json!({
                "aud": ["k3s"], "exp": 4600, "iat": 1000, "nbf": 1000, "iss": ISSUER,
                "jti": "j1", "sub": "system:serviceaccount:ns:default",
                "kubernetes.io": {"namespace": "ns",
                    "serviceaccount": {"name": "default", "uid": "sa-uid"},
                    "pod": {"name": "p", "uid": "pod-uid"}},
            })
        );
    }

    #[test]
    fn a_pod_bound_token_checks_out_with_its_user() {
        let c = bound_claims(&bound(Some(Binding::Pod(oref("p", "pod-uid")))));
        let v = check(&c, 1001, &apis()).unwrap();
        assert_eq!(v.user.username, "system:serviceaccount:ns:default");
        assert_eq!(v.user.uid, "sa-uid");
        assert_eq!(
            v.user.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        let extra: Vec<(&str, &str)> = v
            .user
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v[0].as_str()))
            .collect();
        assert_eq!(
            extra,
            vec![
                (EXTRA_CREDENTIAL_ID, "JTI=j1"),
                (EXTRA_POD_NAME, "p"),
                (EXTRA_POD_UID, "pod-uid")
            ]
        );
        assert_eq!(v.binding, Some(Binding::Pod(oref("p", "pod-uid"))));
        assert_eq!(v.audiences, vec!["k3s"]);
        assert_eq!(v.legacy_secret, None);
    }

    #[test]
    fn expiry_audience_and_future_tokens() {
        let c = bound_claims(&bound(None));
        assert_eq!(
            check(&c, 4599, &apis()).map(|v| v.audiences),
            Ok(vec!["k3s".to_string()])
        );
        assert_eq!(
            check(&c, 4600, &apis()).map_err(|e| e.to_string()),
            Err("token has expired".into())
        );
        assert!(check(&c, 2000, &["other".to_string()])
            .unwrap_err()
            .to_string()
            .contains("invalid for the target audiences"));
        assert_eq!(
            check(&c, 1000 - LEEWAY_SECONDS - 1, &apis()).map_err(|e| e.to_string()),
            Err("token nbf is in the future or invalid".into())
        );
        let mut no_ns = c.clone();
        no_ns["kubernetes.io"]["namespace"] = json!("");
        assert!(check(&no_ns, 2000, &apis()).is_err());
        let mut other_issuer = c;
        other_issuer["iss"] = json!("https://elsewhere");
        assert_eq!(
            check(&other_issuer, 2000, &apis()).map_err(|e| e.to_string()),
            Err("token has an unknown issuer".into())
        );
    }

    #[test]
    fn legacy_tokens() {
        let c = legacy_claims("ns", &oref("builder", "u1"), "builder-token");
        assert!(is_ours(&c));
        let v = check(&c, i64::MAX - 1, &apis()).unwrap();
        assert_eq!(v.legacy_secret.as_deref(), Some("builder-token"));
        assert_eq!(v.user.username, "system:serviceaccount:ns:builder");
        assert!(v.user.extra.is_empty());
        assert_eq!(v.audiences, apis());
        let mut no_secret = c;
        no_secret.remove(LEGACY_SECRET);
        assert!(check(&no_secret, 0, &apis()).is_err());
    }
}
