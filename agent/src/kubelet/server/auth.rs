//! Who may use the kubelet API (upstream's webhook authentication and authorization): a client
//! certificate chained to the cluster's client CA (CN = user, O = groups) or a bearer token the
//! API server vouches for (TokenReview); then a SubjectAccessReview for the node with the
//! request's verb and the subresource its path falls under.
//!
//! # Guarantees
//! - [`attributes`] is upstream's mapping: `/stats` → `stats`, `/metrics` → `metrics`,
//!   `/logs` → `log`, `/spec` → `spec`, `/checkpoint` → `checkpoint`, anything else →
//!   `proxy`; GET/HEAD → get, POST → create, PUT → update, PATCH → patch, DELETE → delete.
//! - Nothing is served without an identity (401) and an allowed review (403).

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::Api;
use rustls::pki_types::CertificateDer;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What the review asks about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAttributes {
    pub verb: &'static str,
    pub subresource: &'static str,
}

fn under(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|r| r.starts_with('/'))
}

/// The review's attributes for `method` on `path`.
pub fn attributes(method: &str, path: &str) -> NodeAttributes {
    let verb = match method {
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "get",
    };
    let subresource = [
        ("/stats", "stats"),
        ("/metrics", "metrics"),
        ("/logs", "log"),
        ("/spec", "spec"),
        ("/checkpoint", "checkpoint"),
    ]
    .iter()
    .find(|(p, _)| under(path, p))
    .map_or("proxy", |(_, s)| s);
    NodeAttributes { verb, subresource }
}

/// The forbidden message upstream's kubelet gives.
pub fn forbidden_message(user: &User, a: &NodeAttributes) -> String {
    format!(
        "Forbidden (user={}, verb={}, resource=nodes, subresource={})",
        user.name, a.verb, a.subresource
    )
}

/// The user a verified client certificate names (`None`: no common name).
pub fn user_of_certificate(cert: &CertificateDer<'_>) -> Option<User> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let subject = parsed.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(User {
        name,
        groups,
        ..User::default()
    })
}

/// Why the API server could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating a TokenReview: {0}")]
    TokenReview(#[source] kube::Error),
    #[error("creating a SubjectAccessReview: {0}")]
    AccessReview(#[source] kube::Error),
}

/// The user `token` belongs to, `None` when the API server does not know it.
pub async fn review_token(client: &kube::Client, token: &str) -> Result<Option<User>, Error> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let out = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(Error::TokenReview)?;
    let Some(status) = out.status.filter(|s| s.authenticated == Some(true)) else {
        return Ok(None);
    };
    let u = status.user.unwrap_or_default();
    Ok(Some(User {
        name: u.username.unwrap_or_default(),
        uid: u.uid.unwrap_or_default(),
        groups: u.groups.unwrap_or_default(),
        extra: u.extra.unwrap_or_default(),
    }))
}

/// Whether `user` may do `a` on node `node`.
pub async fn review_access(
    client: &kube::Client,
    user: &User,
    node: &str,
    a: &NodeAttributes,
) -> Result<bool, Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(a.verb.to_string()),
                version: Some("v1".into()),
                resource: Some("nodes".into()),
                subresource: Some(a.subresource.to_string()),
                name: Some(node.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let out = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(Error::AccessReview)?;
    Ok(out.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(verb: &'static str, subresource: &'static str) -> NodeAttributes {
        NodeAttributes { verb, subresource }
    }

    #[test]
    fn paths_map_to_upstreams_subresources() {
        assert_eq!(attributes("GET", "/stats/summary"), a("get", "stats"));
        assert_eq!(attributes("GET", "/stats"), a("get", "stats"));
        assert_eq!(attributes("GET", "/statsx"), a("get", "proxy"));
        assert_eq!(attributes("GET", "/metrics/resource"), a("get", "metrics"));
        assert_eq!(attributes("GET", "/logs/syslog"), a("get", "log"));
        assert_eq!(attributes("HEAD", "/spec"), a("get", "spec"));
        assert_eq!(
            attributes("GET", "/containerLogs/default/p/c"),
            a("get", "proxy")
        );
        assert_eq!(
            attributes("POST", "/exec/default/p/c"),
            a("create", "proxy")
        );
        assert_eq!(attributes("GET", "/healthz"), a("get", "proxy"));
        assert_eq!(attributes("PUT", "/x"), a("update", "proxy"));
        assert_eq!(attributes("PATCH", "/x"), a("patch", "proxy"));
        assert_eq!(attributes("DELETE", "/x"), a("delete", "proxy"));
    }

    #[test]
    fn forbidden_names_user_verb_and_subresource() {
        let u = User {
            name: "bob".into(),
            ..User::default()
        };
        assert_eq!(
            forbidden_message(&u, &a("get", "stats")),
            "Forbidden (user=bob, verb=get, resource=nodes, subresource=stats)"
        );
    }

    #[test]
    fn certificates_name_user_and_groups() {
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "system:apiserver");
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let user = user_of_certificate(cert.der()).unwrap();
        assert_eq!(user.name, "system:apiserver");
        assert_eq!(user.groups, vec!["system:masters".to_string()]);
    }
}
