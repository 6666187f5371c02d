//! The TokenRequest API (`POST …/serviceaccounts/<name>/token`, `authentication.k8s.io/v1`):
//! mints a bound token for an existing service account, optionally tied to a Pod, Secret or
//! Node of the account's namespace.
//!
//! # Guarantees
//! - `spec.expirationSeconds` defaults to 3600 and must be within [600, 2^32] (422 as
//!   kube-apiserver); `spec.audiences` default to the API server's.
//! - A bound object must exist (404), have the given uid if one is given (409), and a pod
//!   must run as this service account (400); other kinds are 400.
//! - A node (`system:node:<name>`) gets a token only bound to a pod bound to it, by uid, that
//!   runs as the account (403 otherwise, NodeRestriction's rule), and for at most
//!   [`MAX_NODE_EXPIRATION_SECONDS`] (longer requests are shortened, as kube-apiserver's
//!   `--service-account-max-token-expiration` does; the kubelet refreshes within 24 h anyway).

use serde_json::{json, Value};

use super::authenticator::Kind;
use super::claims::{self, Binding, BoundToken, ObjectRef};
use super::ServiceAccounts;
use crate::{node_restriction, UserInfo};
use k3rs_apimachinery::meta::rfc3339;
use k3rs_apimachinery::status::{ApiError, ApiResult, Cause, Subject};

/// Default token lifetime.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// Shortest lifetime accepted.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Longest lifetime accepted.
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// Longest lifetime a node gets.
pub const MAX_NODE_EXPIRATION_SECONDS: i64 = 24 * 3600;

/// A validated and defaulted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// `spec.audiences`; the API server's audiences ([`claims::API_AUDIENCES`]) when empty.
    pub audiences: Vec<String>,
    /// `spec.expirationSeconds` (an hour when absent); a value outside
    /// [`MIN_EXPIRATION_SECONDS`, `MAX_EXPIRATION_SECONDS`] refuses the request.
    pub expiration_seconds: i64,
    /// (kind, name, uid: empty when not given).
    pub bound: Option<(Kind, String, String)>,
}

fn subject(name: &str) -> Subject<'_> {
    Subject {
        group: "authentication.k8s.io",
        kind: "TokenRequest",
        name,
    }
}

/// Validates and defaults the body's `spec` (pure).
pub fn spec_of(body: &Value, sa_name: &str) -> ApiResult<Spec> {
    let spec = &body["spec"];
    let audiences: Vec<String> = match spec["audiences"].as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect(),
        _ => claims::API_AUDIENCES
            .iter()
            .map(|a| a.to_string())
            .collect(),
    };
    let expiration_seconds = match &spec["expirationSeconds"] {
        Value::Null => DEFAULT_EXPIRATION_SECONDS,
        // Beyond i64 is beyond the maximum too; never wraps.
        v if v.as_u64().is_some_and(|n| n > i64::MAX as u64) => i64::MAX,
        v => v.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "TokenRequest.spec.expirationSeconds: expected an integer, got {v}"
            ))
        })?,
    };
    let field = "spec.expirationSeconds";
    if expiration_seconds < MIN_EXPIRATION_SECONDS {
        return Err(ApiError::invalid(
            subject(sa_name),
            vec![Cause::invalid_value(
                field,
                expiration_seconds,
                "may not specify a duration less than 10 minutes",
            )],
        ));
    }
    if expiration_seconds > MAX_EXPIRATION_SECONDS {
        return Err(ApiError::invalid(
            subject(sa_name),
            vec![Cause::invalid_value(
                field,
                expiration_seconds,
                "may not specify a duration larger than 2^32 seconds",
            )],
        ));
    }
    let r = &spec["boundObjectRef"];
    let bound = if r.is_object() {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        let (api_version, kind) = (s("apiVersion"), s("kind"));
        let kind = match (api_version.as_str(), kind.as_str()) {
            ("v1" | "", "Pod") => Kind::Pod,
            ("v1" | "", "Secret") => Kind::Secret,
            ("v1" | "", "Node") => Kind::Node,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to object of type {}, Kind={kind}",
                    if api_version.is_empty() {
                        "/"
                    } else {
                        &api_version
                    }
                )))
            }
        };
        Some((kind, s("name"), s("uid")))
    } else {
        None
    };
    Ok(Spec {
        audiences,
        expiration_seconds,
        bound,
    })
}

/// Mints the token for `namespace/sa_name` and answers the TokenRequest (status filled in).
/// `user` is who asks (`None`: the server itself).
pub async fn create(
    sa: &ServiceAccounts,
    user: Option<&UserInfo>,
    namespace: &str,
    sa_name: &str,
    mut body: Value,
    now: i64,
) -> ApiResult<Value> {
    let mut spec = spec_of(&body, sa_name)?;
    let lookup = |kind: Kind, name: String| async move {
        sa.tokens
            .lookup()
            .object(kind, namespace, &name)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))
    };
    if let Some(node) = user.and_then(node_restriction::requesting_node) {
        let forbidden = |why: &str| {
            ApiError::forbidden(
                Subject {
                    group: "",
                    kind: "serviceaccounts",
                    name: sa_name,
                },
                why,
            )
        };
        let node = node.map_err(|why| forbidden(&why.to_string()))?;
        let bound = spec
            .bound
            .as_ref()
            .map(|(k, n, u)| (kind_name(*k), n.as_str(), u.as_str()));
        let pod = match bound {
            Some(("Pod", name, _)) if !name.is_empty() => {
                Some(lookup(Kind::Pod, name.to_string()).await?.ok_or_else(|| {
                    ApiError::not_found(Subject {
                        group: "",
                        kind: "pods",
                        name,
                    })
                })?)
            }
            _ => None,
        };
        node_restriction::admit_token_request(node, sa_name, bound, pod.as_ref())
            .map_err(|why| forbidden(&why.to_string()))?;
        spec.expiration_seconds = spec.expiration_seconds.min(MAX_NODE_EXPIRATION_SECONDS);
    }
    let account = lookup(Kind::ServiceAccount, sa_name.to_string())
        .await?
        .ok_or_else(|| {
            ApiError::not_found(Subject {
                group: "",
                kind: "serviceaccounts",
                name: sa_name,
            })
        })?;
    let mut binding = None;
    let mut pod_node = None;
    if let Some((kind, name, uid)) = &spec.bound {
        let plural = match kind {
            Kind::Pod => "pods",
            Kind::Secret => "secrets",
            _ => "nodes",
        };
        let obj = lookup(*kind, name.clone()).await?.ok_or_else(|| {
            ApiError::not_found(Subject {
                group: "",
                kind: plural,
                name,
            })
        })?;
        let actual = uid_of(&obj);
        if !uid.is_empty() && *uid != actual {
            return Err(ApiError::conflict_because(
                Subject {
                    group: "",
                    kind: kind_name(*kind),
                    name,
                },
                &format!("the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"),
            ));
        }
        let r = ObjectRef {
            name: name.clone(),
            uid: actual,
        };
        binding = Some(match kind {
            Kind::Pod => {
                if obj["spec"]["serviceAccountName"]
                    .as_str()
                    .unwrap_or_default()
                    != sa_name
                {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token for serviceaccount {sa_name:?} to pod running with different serviceaccount name."
                    )));
                }
                if let Some(node) = obj["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                    if let Some(n) = lookup(Kind::Node, node.to_string()).await? {
                        pod_node = Some(ObjectRef {
                            name: node.to_string(),
                            uid: uid_of(&n),
                        });
                    }
                }
                Binding::Pod(r)
            }
            Kind::Secret => Binding::Secret(r),
            _ => Binding::Node(r),
        });
    }
    let token = BoundToken {
        namespace: namespace.to_string(),
        service_account: ObjectRef {
            name: sa_name.to_string(),
            uid: uid_of(&account),
        },
        audiences: spec.audiences.clone(),
        issued_at: now,
        expiration_seconds: spec.expiration_seconds,
        binding,
        pod_node,
        jti: uuid::Uuid::new_v4().to_string(),
    };
    let jwt = sa
        .key
        .sign(&claims::bound_claims(&token))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let expires = std::time::UNIX_EPOCH
        + std::time::Duration::from_secs((now + spec.expiration_seconds).max(0) as u64);
    body["metadata"]["name"] = json!(sa_name);
    body["metadata"]["namespace"] = json!(namespace);
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["spec"]["audiences"] = json!(spec.audiences);
    body["spec"]["expirationSeconds"] = json!(spec.expiration_seconds);
    if spec.bound.is_none() {
        body["spec"]["boundObjectRef"] = Value::Null;
    }
    body["status"] = json!({"token": jwt, "expirationTimestamp": rfc3339(expires)});
    Ok(body)
}

fn uid_of(obj: &Value) -> String {
    obj["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Pod => "Pod",
        Kind::Secret => "Secret",
        Kind::Node => "Node",
        Kind::ServiceAccount => "ServiceAccount",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let s = spec_of(&json!({"spec": {}}), "default").unwrap();
        assert_eq!(
            s,
            Spec {
                audiences: vec![claims::ISSUER.to_string(), "k3s".into()],
                expiration_seconds: 3600,
                bound: None,
            }
        );
    }

    #[test]
    fn expiration_bounds_are_422() {
        let e = spec_of(&json!({"spec": {"expirationSeconds": 10}}), "sa").unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "TokenRequest.authentication.k8s.io \"sa\" is invalid: spec.expirationSeconds: Invalid value: 10: may not specify a duration less than 10 minutes"
        );
        let e = spec_of(&json!({"spec": {"expirationSeconds": 1i64 << 33}}), "sa").unwrap_err();
        assert_eq!(e.code, 422);
        let e = spec_of(&json!({"spec": {"expirationSeconds": u64::MAX}}), "sa").unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("larger than 2^32 seconds"),
            "{}",
            e.message
        );
        let e = spec_of(&json!({"spec": {"expirationSeconds": 1e300}}), "sa").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(spec_of(&json!({"spec": {"expirationSeconds": 600}}), "sa").is_ok());
    }

    #[test]
    fn bound_object_kinds() {
        let s = spec_of(
            &json!({"spec": {"audiences": ["a"], "boundObjectRef":
                {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "u"}}}),
            "sa",
        )
        .unwrap();
        assert_eq!(s.audiences, vec!["a"]);
        assert_eq!(s.bound, Some((Kind::Pod, "p".into(), "u".into())));
        let e = spec_of(
            &json!({"spec": {"boundObjectRef": {"kind": "Deployment", "apiVersion": "apps/v1", "name": "d"}}}),
            "sa",
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "cannot bind token to object of type apps/v1, Kind=Deployment"
        );
    }
}
