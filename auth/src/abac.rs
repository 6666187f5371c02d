//! `--authorization-mode=ABAC` with `--authorization-policy-file`: one
//! `abac.authorization.kubernetes.io/v1beta1 Policy` JSON object per line; a request is
//! allowed when any policy matches it (kube-apiserver's ABAC authorizer).
//!
//! # Guarantees
//! - Blank lines and lines starting with `#` are skipped; any other line that is not a
//!   v1beta1 Policy refuses the file.
//! - `user: "*"` or `group: "*"` means every authenticated user (v1beta1's conversion).
//! - A policy matches when its subject matches (`user` and `group` each narrow when set; a
//!   policy with neither matches nobody), the verb is read-only (`get list watch`) or the
//!   policy is not `readonly`, and either the resource request's namespace, resource and
//!   apiGroup match (`*` wildcards) or the non-resource path matches (`*`, exact, or a
//!   trailing-`*` prefix).
//! - No match: no opinion ("No policy matched.").

use futures::future::BoxFuture;
use serde::Deserialize;

use super::authz::{Authorizer, Decision};
use super::user::ALL_AUTHENTICATED;
use super::Attributes;

/// One policy line's `spec` (v1beta1 `PolicySpec`): whom it grants what.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Spec {
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub api_group: String,
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub non_resource_path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyLine {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    spec: Spec,
}

/// The policy file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyFileError {
    /// The file could not be read.
    #[error("reading the authorization policy file {path}: {message}")]
    Read {
        /// The policy file's path.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// Line `line` (1-based) is not a v1beta1 Policy.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The policy file's path.
        path: String,
        /// The offending line, 1-based.
        line: usize,
        /// Why the line is not a Policy.
        message: String,
    },
}

/// The ABAC authorizer: the file's policies in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Abac {
    policies: Vec<Spec>,
}

impl Abac {
    /// Reads and parses the policy file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Abac, PolicyFileError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyFileError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Abac::parse(&text, &path.display().to_string())
    }

    /// Parses the file's JSON lines (`path` only names it in errors).
    pub fn parse(text: &str, path: &str) -> Result<Abac, PolicyFileError> {
        let mut policies = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: String| PolicyFileError::Line {
                path: path.to_string(),
                line: i + 1,
                message,
            };
            let p: PolicyLine = serde_json::from_str(line).map_err(|e| err(e.to_string()))?;
            if p.api_version != "abac.authorization.kubernetes.io/v1beta1" || p.kind != "Policy" {
                return Err(err(format!(
                    "unsupported policy {}/{} (want abac.authorization.kubernetes.io/v1beta1 Policy)",
                    p.api_version, p.kind
                )));
            }
            let mut spec = p.spec;
            if spec.user == "*" || spec.group == "*" {
                spec.group = ALL_AUTHENTICATED.to_string();
                spec.user.clear();
            }
            policies.push(spec);
        }
        Ok(Abac { policies })
    }

    /// Whether some policy allows `a`.
    pub fn allows(&self, a: &Attributes) -> bool {
        self.policies.iter().any(|p| matches(p, a))
    }
}

fn matches(p: &Spec, a: &Attributes) -> bool {
    subject_matches(p, a)
        && verb_matches(p, a)
        && (resource_matches(p, a) || non_resource_matches(p, a))
}

fn subject_matches(p: &Spec, a: &Attributes) -> bool {
    let mut matched = false;
    if !p.user.is_empty() {
        if p.user != a.user.username {
            return false;
        }
        matched = true;
    }
    if !p.group.is_empty() {
        if !a.user.in_group(&p.group) {
            return false;
        }
        matched = true;
    }
    matched
}

fn verb_matches(p: &Spec, a: &Attributes) -> bool {
    matches!(a.verb.as_str(), "get" | "list" | "watch") || !p.readonly
}

fn resource_matches(p: &Spec, a: &Attributes) -> bool {
    a.resource_request
        && (p.namespace == "*" || p.namespace == a.namespace)
        && (p.resource == "*" || p.resource == a.resource)
        && (p.api_group == "*" || p.api_group == a.api_group)
}

fn non_resource_matches(p: &Spec, a: &Attributes) -> bool {
    !a.resource_request
        && (p.non_resource_path == "*"
            || p.non_resource_path == a.path
            || (p.non_resource_path.ends_with('*')
                && a.path
                    .starts_with(p.non_resource_path.trim_end_matches('*'))))
}

impl Authorizer for Abac {
    fn authorize<'a>(&'a self, attrs: &'a Attributes) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if self.allows(attrs) {
                Decision::Allow
            } else {
                Decision::NoOpinion("No policy matched.".into())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::UserInfo;

    const FILE: &str = r#"
# alice may do anything in her namespace
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "namespace": "alice", "resource": "*", "apiGroup": "*"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "readers", "readonly": true, "namespace": "*", "resource": "pods", "apiGroup": ""}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "*", "readonly": true, "nonResourcePath": "/api*"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bob", "group": "ops", "namespace": "*", "resource": "deployments", "apiGroup": "apps"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"namespace": "*", "resource": "*", "apiGroup": "*"}}
"#;

    fn allows(user: &str, groups: &[&str], method: &str, path: &str) -> bool {
        let a = Attributes::of_request(
            Arc::new(UserInfo::authenticated(
                user,
                groups.iter().map(|g| g.to_string()).collect(),
            )),
            method,
            path,
            None,
        );
        Abac::parse(FILE, "f").unwrap().allows(&a)
    }

    #[test]
    fn policies_allow_what_they_match() {
        assert!(allows(
            "alice",
            &[],
            "DELETE",
            "/api/v1/namespaces/alice/secrets/s"
        ));
        assert!(!allows(
            "alice",
            &[],
            "GET",
            "/api/v1/namespaces/bob/secrets"
        ));
        assert!(allows(
            "carol",
            &["readers"],
            "GET",
            "/api/v1/namespaces/x/pods"
        ));
        assert!(
            !allows("carol", &["readers"], "POST", "/api/v1/namespaces/x/pods"),
            "readonly"
        );
        assert!(
            !allows(
                "carol",
                &["readers"],
                "GET",
                "/apis/apps/v1/namespaces/x/deployments"
            ),
            "other group"
        );
        assert!(
            allows("anyone", &[], "GET", "/apis/apps"),
            "user * is every authenticated user"
        );
        assert!(!allows("anyone", &[], "POST", "/apis/apps"));
        assert!(!allows("anyone", &[], "GET", "/healthz"));
        assert!(
            !allows("bob", &[], "GET", "/apis/apps/v1/namespaces/x/deployments"),
            "user and group must both match"
        );
        assert!(allows(
            "bob",
            &["ops"],
            "PATCH",
            "/apis/apps/v1/namespaces/x/deployments/d"
        ));
        assert!(
            !allows("nobody", &[], "GET", "/api/v1/namespaces/x/configmaps"),
            "a policy without subject matches nobody"
        );
    }

    #[test]
    fn no_match_is_no_opinion() {
        let abac = Abac::parse(FILE, "f").unwrap();
        let a = Attributes::of_request(
            Arc::new(UserInfo::authenticated("zed", vec![])),
            "GET",
            "/api/v1/nodes",
            None,
        );
        assert_eq!(
            futures::executor::block_on(abac.authorize(&a)),
            Decision::NoOpinion("No policy matched.".into())
        );
    }

    #[test]
    fn bad_lines_refuse_the_file() {
        assert_eq!(
            Abac::parse("\n{\"user\": \"alice\"}\n", "/p.jsonl").unwrap_err(),
            PolicyFileError::Line {
                path: "/p.jsonl".into(),
                line: 2,
                message: "missing field `spec` at line 1 column 17".into()
            }
        );
        assert!(matches!(
            Abac::parse(
                r#"{"apiVersion": "abac.authorization.kubernetes.io/v0", "kind": "Policy", "spec": {}}"#,
                "f"
            ),
            Err(PolicyFileError::Line { line: 1, .. })
        ));
    }
}
