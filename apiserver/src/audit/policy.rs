//! The audit policy (`audit.k8s.io/v1 Policy`, `--audit-policy-file`) and its evaluation:
//! the first rule matching a request decides its level and the stages left out.
//!
//! # Guarantees
//! - Rules are tried in order; none matching means level `None` (the request is not logged),
//!   as kube-apiserver's policy checker.
//! - The omitted stages are the policy's plus the matching rule's.
//! - Matching follows upstream: `users`, `userGroups`, `verbs` narrow when non-empty;
//!   `namespaces`/`resources` only match resource requests, `nonResourceURLs` only
//!   non-resource ones (`*` suffix wildcard); a rule with neither matches every request.

use serde::Deserialize;

use k3rs_auth::Attributes;

/// How much of a request an audit event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// The stages of a request an event may be emitted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

/// `GroupResources`: resources of one API group, optionally narrowed to names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupResources {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// `PolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub level: Level,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub user_groups: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

/// `audit.k8s.io/v1 Policy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: bool,
}

/// What the policy says about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: Vec<Stage>,
    pub omit_managed_fields: bool,
}

impl Decision {
    /// Whether an event is written at `stage`.
    pub fn logs(&self, stage: Stage) -> bool {
        self.level > Level::None && !self.omit_stages.contains(&stage)
    }
}

/// A policy file that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("failed decoding: {0}")]
    Decode(String),
    #[error("unknown group version {0:?} (want audit.k8s.io/v1)")]
    GroupVersion(String),
    #[error("kind {0:?} is not Policy")]
    Kind(String),
    #[error("rules[{index}].{field}: {message}")]
    Invalid {
        index: usize,
        field: &'static str,
        message: String,
    },
}

impl Policy {
    /// Parses a policy file (YAML or JSON) and validates it as kube-apiserver does.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let p: Policy =
            serde_norway::from_str(text).map_err(|e| PolicyError::Decode(e.to_string()))?;
        if p.api_version != "audit.k8s.io/v1" {
            return Err(PolicyError::GroupVersion(p.api_version));
        }
        if p.kind != "Policy" {
            return Err(PolicyError::Kind(p.kind));
        }
        for (index, r) in p.rules.iter().enumerate() {
            if !r.non_resource_urls.is_empty()
                && (!r.resources.is_empty() || !r.namespaces.is_empty())
            {
                return Err(PolicyError::Invalid {
                    index,
                    field: "nonResourceURLs",
                    message: "rules cannot apply to both regular resources and non-resource URLs"
                        .into(),
                });
            }
            for u in &r.non_resource_urls {
                if u != "*" && !u.starts_with('/') {
                    return Err(PolicyError::Invalid {
                        index,
                        field: "nonResourceURLs",
                        message: format!("{u:?}: non-resource URL rules must begin with a '/'"),
                    });
                }
                if u.trim_end_matches('*').contains('*') {
                    return Err(PolicyError::Invalid {
                        index,
                        field: "nonResourceURLs",
                        message: format!(
                            "{u:?}: non-resource URL wildcards must be at the end of the path"
                        ),
                    });
                }
            }
        }
        Ok(p)
    }

    /// The level and omitted stages for the request `a` (the authenticated user's).
    pub fn evaluate(&self, a: &Attributes) -> Decision {
        match self.rules.iter().find(|r| rule_matches(r, a)) {
            Some(r) => {
                let mut omit = self.omit_stages.clone();
                for s in &r.omit_stages {
                    if !omit.contains(s) {
                        omit.push(*s);
                    }
                }
                Decision {
                    level: r.level,
                    omit_stages: omit,
                    omit_managed_fields: r.omit_managed_fields.unwrap_or(self.omit_managed_fields),
                }
            }
            None => Decision {
                level: Level::None,
                omit_stages: self.omit_stages.clone(),
                omit_managed_fields: self.omit_managed_fields,
            },
        }
    }
}

fn rule_matches(r: &Rule, a: &Attributes) -> bool {
    if !r.users.is_empty() && !r.users.contains(&a.user.username) {
        return false;
    }
    if !r.user_groups.is_empty() && !r.user_groups.iter().any(|g| a.user.in_group(g)) {
        return false;
    }
    if !r.verbs.is_empty() && !r.verbs.contains(&a.verb) {
        return false;
    }
    if !r.namespaces.is_empty() || !r.resources.is_empty() {
        return resource_matches(r, a);
    }
    if !r.non_resource_urls.is_empty() {
        return non_resource_matches(r, a);
    }
    true
}

fn non_resource_matches(r: &Rule, a: &Attributes) -> bool {
    if a.resource_request {
        return false;
    }
    r.non_resource_urls.iter().any(|spec| {
        spec == "*"
            || *spec == a.path
            || spec
                .strip_suffix('*')
                .is_some_and(|prefix| a.path.starts_with(prefix))
    })
}

fn resource_matches(r: &Rule, a: &Attributes) -> bool {
    if !a.resource_request {
        return false;
    }
    if !r.namespaces.is_empty() && !r.namespaces.contains(&a.namespace) {
        return false;
    }
    if r.resources.is_empty() {
        return true;
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    r.resources
        .iter()
        .filter(|gr| gr.group == a.api_group)
        .any(|gr| {
            if gr.resources.is_empty() {
                return true;
            }
            if !gr.resource_names.is_empty() && !gr.resource_names.contains(&a.name) {
                return false;
            }
            gr.resources.iter().any(|res| {
                *res == combined
                    || res == "*"
                    || (!a.subresource.is_empty()
                        && res.strip_prefix("*/") == Some(a.subresource.as_str()))
                    || res.strip_suffix("/*") == Some(a.resource.as_str())
            })
        })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use k3rs_auth::UserInfo;

    fn attrs(user: &str, groups: &[&str], method: &str, path: &str) -> Attributes {
        Attributes::of_request(
            Arc::new(UserInfo::authenticated(
                user,
                groups.iter().map(|g| g.to_string()).collect(),
            )),
            method,
            path,
            None,
        )
    }

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
- level: None
  userGroups: ["system:nodes"]
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/log", "configmaps"]
    resourceNames: ["cm1"]
- level: Request
  verbs: ["create"]
  namespaces: ["team-a"]
  omitStages: ["ResponseStarted"]
- level: Metadata
  resources:
  - group: "apps"
  - group: ""
    resources: ["*/status", "secrets/*"]
- level: Metadata
  nonResourceURLs: ["/api*"]
"#;

    fn level(a: &Attributes) -> Level {
        Policy::parse(POLICY).unwrap().evaluate(a).level
    }

    #[test]
    fn first_matching_rule_decides() {
        let p = Policy::parse(POLICY).unwrap();
        let d = p.evaluate(&attrs(
            "alice",
            &[],
            "POST",
            "/api/v1/namespaces/team-a/configmaps",
        ));
        assert_eq!(
            d,
            Decision {
                level: Level::Request,
                omit_stages: vec![Stage::RequestReceived, Stage::ResponseStarted],
                omit_managed_fields: false,
            }
        );
        assert!(d.logs(Stage::ResponseComplete));
        assert!(!d.logs(Stage::RequestReceived));
        // No rule: None, nothing logged.
        let none = p.evaluate(&attrs("alice", &[], "GET", "/api/v1/namespaces/x/pods"));
        assert_eq!(none.level, Level::None);
        assert!(!none.logs(Stage::ResponseComplete));
    }

    #[test]
    fn users_groups_and_verbs_narrow() {
        let proxy_watch = Attributes::of_request(
            Arc::new(UserInfo::authenticated("system:kube-proxy", vec![])),
            "GET",
            "/apis/apps/v1/deployments",
            Some("watch=true"),
        );
        assert_eq!(level(&proxy_watch), Level::None);
        assert_eq!(
            level(&attrs(
                "system:kube-proxy",
                &[],
                "GET",
                "/apis/apps/v1/deployments"
            )),
            Level::Metadata
        );
        assert_eq!(
            level(&attrs("n", &["system:nodes"], "GET", "/healthz/etcd")),
            Level::None
        );
        assert_eq!(level(&attrs("n", &[], "GET", "/healthz")), Level::None);
        assert_eq!(
            level(&attrs("n", &["system:nodes"], "GET", "/apis")),
            Level::Metadata
        );
    }

    #[test]
    fn resources_subresources_and_names() {
        assert_eq!(
            level(&attrs(
                "u",
                &[],
                "GET",
                "/api/v1/namespaces/d/configmaps/cm1"
            )),
            Level::RequestResponse
        );
        assert_eq!(
            level(&attrs(
                "u",
                &[],
                "GET",
                "/api/v1/namespaces/d/configmaps/cm2"
            )),
            Level::None
        );
        assert_eq!(
            level(&attrs(
                "u",
                &[],
                "GET",
                "/api/v1/namespaces/d/pods/p/status"
            )),
            Level::Metadata,
            "*/status"
        );
        assert_eq!(
            level(&attrs("u", &[], "GET", "/api/v1/namespaces/d/secrets/s")),
            Level::Metadata,
            "secrets/* covers the resource itself"
        );
        assert_eq!(
            level(&attrs("u", &[], "GET", "/api/v1/namespaces/d/pods/p/log")),
            Level::None,
            "pods/log is narrowed to cm1 by resourceNames"
        );
        assert_eq!(
            level(&attrs(
                "u",
                &[],
                "DELETE",
                "/apis/apps/v1/namespaces/d/deployments/x"
            )),
            Level::Metadata,
            "a group without resources matches all of it"
        );
        assert_eq!(
            level(&attrs(
                "u",
                &[],
                "POST",
                "/api/v1/namespaces/team-b/configmaps"
            )),
            Level::None
        );
        assert_eq!(
            level(&attrs("u", &[], "GET", "/api")),
            Level::Metadata,
            "non-resource prefix"
        );
    }

    #[test]
    fn empty_rule_matches_everything_and_managed_fields_flag() {
        let p = Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitManagedFields: true\nrules:\n- level: Metadata\n  omitManagedFields: false\n- level: Request\n",
        )
        .unwrap();
        let d = p.evaluate(&attrs("u", &[], "GET", "/metrics"));
        assert_eq!((d.level, d.omit_managed_fields), (Level::Metadata, false));
    }

    #[test]
    fn invalid_policies() {
        assert_eq!(
            Policy::parse("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\n").unwrap_err(),
            PolicyError::GroupVersion("audit.k8s.io/v1beta1".into())
        );
        assert_eq!(
            Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Event\n").unwrap_err(),
            PolicyError::Kind("Event".into())
        );
        assert!(matches!(
            Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n"),
            Err(PolicyError::Decode(_))
        ));
        assert_eq!(
            Policy::parse(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [\"/a\"]\n  namespaces: [\"x\"]\n"
            )
            .unwrap_err()
            .to_string(),
            "rules[0].nonResourceURLs: rules cannot apply to both regular resources and non-resource URLs"
        );
        assert!(Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [\"a*\"]\n"
        )
        .is_err());
    }
}
