//! Impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-<key>` headers, what
//! `kubectl --as/--as-group` sends): which `impersonate` permissions the requester needs, and
//! the identity the request then runs as. Pure; the router asks the authorizer.
//!
//! # Guarantees
//! - Every requested attribute is checked (`users`/`serviceaccounts`, `groups`, `uids`,
//!   `userextras/<key>`), each on its own name, before the identity changes.
//! - Groups, uid or extras without a user are a bad request.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue};

use super::user::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS};
use super::{Attributes, UserInfo};

pub(crate) const USER_HEADER: &str = "impersonate-user";
pub(crate) const GROUP_HEADER: &str = "impersonate-group";
pub(crate) const UID_HEADER: &str = "impersonate-uid";
pub(crate) const EXTRA_PREFIX: &str = "impersonate-extra-";

const SA_PREFIX: &str = "system:serviceaccount:";

/// What the headers ask to impersonate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requested {
    pub(crate) user: String,
    pub(crate) uid: String,
    pub(crate) groups: Vec<String>,
    pub(crate) extra: BTreeMap<String, Vec<String>>,
}

/// Impersonation headers without `Impersonate-User`; `asked` lists what they ask for
/// (`groups=["dev"], uid="u"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("requested {asked} without impersonating a user")]
pub struct WithoutUser {
    /// What the headers ask for besides a user.
    pub asked: String,
}

/// The request's impersonation headers: `Ok(None)` when there are none.
pub fn requested(headers: &HeaderMap) -> Result<Option<Requested>, WithoutUser> {
    let text = |v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let mut r = Requested::default();
    let mut any = false;
    for (name, value) in headers {
        let n = name.as_str();
        if n == USER_HEADER {
            r.user = text(value);
        } else if n == GROUP_HEADER {
            r.groups.push(text(value));
        } else if n == UID_HEADER {
            r.uid = text(value);
        } else if let Some(key) = n.strip_prefix(EXTRA_PREFIX) {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_lowercase();
            r.extra.entry(key).or_default().push(text(value));
        } else {
            continue;
        }
        any = true;
    }
    if !any {
        return Ok(None);
    }
    if r.user.is_empty() {
        let mut asked = Vec::new();
        if !r.groups.is_empty() {
            asked.push(format!("groups={:?}", r.groups));
        }
        if !r.uid.is_empty() {
            asked.push(format!("uid={:?}", r.uid));
        }
        if !r.extra.is_empty() {
            asked.push(format!("extra={:?}", r.extra));
        }
        return Err(WithoutUser {
            asked: asked.join(", "),
        });
    }
    Ok(Some(r))
}

fn check(
    requester: &Arc<UserInfo>,
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Attributes {
    Attributes {
        user: requester.clone(),
        verb: "impersonate".into(),
        resource_request: true,
        path: String::new(),
        namespace: namespace.into(),
        api_group: group.into(),
        api_version: String::new(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
    }
}

/// The authorization checks impersonating `r` takes, in upstream's order (user or service
/// account, groups, extras, uid); every one must be allowed.
pub fn checks(requester: &Arc<UserInfo>, r: &Requested) -> Vec<Attributes> {
    let mut out = Vec::new();
    match r
        .user
        .strip_prefix(SA_PREFIX)
        .and_then(|s| s.split_once(':'))
    {
        Some((ns, name)) => out.push(check(requester, "", "serviceaccounts", "", ns, name)),
        None => out.push(check(requester, "", "users", "", "", &r.user)),
    }
    for g in &r.groups {
        out.push(check(requester, "", "groups", "", "", g));
    }
    for (key, values) in &r.extra {
        for v in values {
            out.push(check(
                requester,
                "authentication.k8s.io",
                "userextras",
                key,
                "",
                v,
            ));
        }
    }
    if !r.uid.is_empty() {
        out.push(check(
            requester,
            "authentication.k8s.io",
            "uids",
            "",
            "",
            &r.uid,
        ));
    }
    out
}

/// The identity the request runs as: the requested one, a service account's groups added,
/// and `system:authenticated` (or `system:unauthenticated` for `system:anonymous`).
pub fn impersonated(r: &Requested) -> UserInfo {
    let mut u = UserInfo {
        username: r.user.clone(),
        uid: r.uid.clone(),
        groups: r.groups.clone(),
        extra: r.extra.clone(),
    };
    if let Some((ns, _)) = r
        .user
        .strip_prefix(SA_PREFIX)
        .and_then(|s| s.split_once(':'))
    {
        u.add_group("system:serviceaccounts");
        u.add_group(&format!("system:serviceaccounts:{ns}"));
    }
    if u.username == ANONYMOUS {
        u.add_group(ALL_UNAUTHENTICATED);
    } else {
        u.add_group(ALL_AUTHENTICATED);
    }
    u
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A header map of `pairs` (repeats appended).
    pub(crate) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn headers_parse_and_need_a_user() {
        assert_eq!(requested(&headers(&[("accept", "x")])), Ok(None));
        let r = requested(&headers(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Scopes%2FA", "view"),
            ("Impersonate-Uid", "42"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            r,
            Requested {
                user: "alice".into(),
                uid: "42".into(),
                groups: vec!["dev".into(), "ops".into()],
                extra: BTreeMap::from([("scopes/a".into(), vec!["view".into()])]),
            }
        );
        assert_eq!(
            requested(&headers(&[("Impersonate-Group", "dev")])).map_err(|e| e.to_string()),
            Err(r#"requested groups=["dev"] without impersonating a user"#.into())
        );
    }

    #[test]
    fn checks_and_identity() {
        let me = Arc::new(UserInfo::authenticated("me", vec![]));
        let r = Requested {
            user: "system:serviceaccount:ns1:builder".into(),
            uid: "u1".into(),
            groups: vec!["dev".into()],
            extra: BTreeMap::from([("k".into(), vec!["v".into()])]),
        };
        let got: Vec<(String, String, String, String, String)> = checks(&me, &r)
            .into_iter()
            .map(|a| {
                let resource = a.resource_with_subresource();
                (a.api_group, resource, a.namespace, a.name, a.verb)
            })
            .collect();
        let want = |g: &str, res: &str, ns: &str, n: &str| {
            (
                g.to_string(),
                res.to_string(),
                ns.to_string(),
                n.to_string(),
                "impersonate".to_string(),
            )
        };
        assert_eq!(
            got,
            vec![
                want("", "serviceaccounts", "ns1", "builder"),
                want("", "groups", "", "dev"),
                want("authentication.k8s.io", "userextras/k", "", "v"),
                want("authentication.k8s.io", "uids", "", "u1"),
            ]
        );
        assert_eq!(
            impersonated(&r).groups,
            vec![
                "dev".to_string(),
                "system:serviceaccounts".into(),
                "system:serviceaccounts:ns1".into(),
                ALL_AUTHENTICATED.into(),
            ]
        );
        let anon = Requested {
            user: ANONYMOUS.into(),
            ..Requested::default()
        };
        assert_eq!(
            impersonated(&anon).groups,
            vec![ALL_UNAUTHENTICATED.to_string()]
        );
        let plain = Requested {
            user: "alice".into(),
            ..Requested::default()
        };
        assert_eq!(checks(&me, &plain)[0].resource, "users");
    }
}
