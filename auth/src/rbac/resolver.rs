//! Which rules apply to a user in a namespace (upstream's `DefaultRuleResolver`): the rules of
//! the ClusterRoles bound cluster-wide, then those of the roles bound in the namespace. Reads a
//! [`PolicySource`] only; decides nothing about requests.

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
};

use super::rules::subject_applies;
use crate::UserInfo;

/// Where the roles and bindings come from (an informer cache, or a list in tests).
pub trait PolicySource: Send + Sync {
    /// The ClusterRole `name`, if it exists.
    fn cluster_role(&self, name: &str) -> Option<Arc<ClusterRole>>;
    /// The Role `namespace/name`, if it exists.
    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Role>>;
    /// Every ClusterRoleBinding.
    fn cluster_role_bindings(&self) -> Vec<Arc<ClusterRoleBinding>>;
    /// Every RoleBinding in `namespace`.
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<RoleBinding>>;
}

/// Why a role reference grants nothing (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleRefError {
    /// The ClusterRole does not exist.
    #[error("clusterrole.rbac.authorization.k8s.io {0:?} not found")]
    ClusterRoleNotFound(String),
    /// The Role does not exist.
    #[error("role.rbac.authorization.k8s.io {0:?} not found")]
    RoleNotFound(String),
    /// Neither `ClusterRole` nor `Role`.
    #[error("unsupported role reference kind: {0:?}")]
    Kind(String),
}

/// The role a reference resolved to, shared with the cache it came from.
#[derive(Debug, Clone)]
pub enum GrantedRole {
    /// A ClusterRole (bound cluster-wide or in a namespace).
    Cluster(Arc<ClusterRole>),
    /// A Role of the binding's namespace.
    Namespaced(Arc<Role>),
}

impl GrantedRole {
    /// The role's rules, read in place.
    pub fn rules(&self) -> &[PolicyRule] {
        let rules = match self {
            GrantedRole::Cluster(r) => &r.rules,
            GrantedRole::Namespaced(r) => &r.rules,
        };
        rules.as_deref().unwrap_or_default()
    }
}

/// The role `role_ref` grants in `namespace`, or upstream's not-found message.
pub fn role_ref_rules(
    src: &dyn PolicySource,
    role_ref: &RoleRef,
    namespace: &str,
) -> Result<GrantedRole, RoleRefError> {
    match role_ref.kind.as_str() {
        "ClusterRole" => src
            .cluster_role(&role_ref.name)
            .map(GrantedRole::Cluster)
            .ok_or_else(|| RoleRefError::ClusterRoleNotFound(role_ref.name.clone())),
        "Role" => src
            .role(namespace, &role_ref.name)
            .map(GrantedRole::Namespaced)
            .ok_or_else(|| RoleRefError::RoleNotFound(role_ref.name.clone())),
        other => Err(RoleRefError::Kind(other.to_string())),
    }
}

/// Visits each rule that applies to `user` in `namespace` ("" for cluster scope: only
/// ClusterRoleBindings), in upstream's order, until `visit` returns `false`. Bindings whose
/// role is missing are reported through `visit(None, Some(error))`.
pub fn visit_rules(
    src: &dyn PolicySource,
    user: &UserInfo,
    namespace: &str,
    visit: &mut dyn FnMut(Option<&PolicyRule>, Option<&str>) -> bool,
) {
    let mut each = |role_ref: &RoleRef, ns: &str| -> bool {
        match role_ref_rules(src, role_ref, ns) {
            Ok(role) => role.rules().iter().all(|r| visit(Some(r), None)),
            Err(e) => visit(None, Some(&e.to_string())),
        }
    };
    for b in src.cluster_role_bindings() {
        let applies = b
            .subjects
            .iter()
            .flatten()
            .any(|s| subject_applies(s, user, ""));
        if applies && !each(&b.role_ref, "") {
            return;
        }
    }
    if namespace.is_empty() {
        return;
    }
    for b in src.role_bindings(namespace) {
        let applies = b
            .subjects
            .iter()
            .flatten()
            .any(|s| subject_applies(s, user, namespace));
        if applies && !each(&b.role_ref, namespace) {
            return;
        }
    }
}

/// Every rule that applies to `user` in `namespace`, and the errors met (missing roles).
pub fn rules_for(
    src: &dyn PolicySource,
    user: &UserInfo,
    namespace: &str,
) -> (Vec<PolicyRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    visit_rules(src, user, namespace, &mut |r, e| {
        if let Some(r) = r {
            rules.push(r.clone());
        }
        if let Some(e) = e {
            errors.push(e.to_string());
        }
        true
    });
    (rules, errors)
}

/// A [`PolicySource`] over plain lists (tests, and checks against proposed objects).
#[derive(Debug, Default, Clone)]
pub struct StaticPolicy {
    /// The ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// The Roles, in any namespaces.
    pub roles: Vec<Role>,
    /// The ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// The RoleBindings, in any namespaces.
    pub role_bindings: Vec<RoleBinding>,
}

fn ns_name(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (&str, &str) {
    (
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or(""),
    )
}

impl PolicySource for StaticPolicy {
    fn cluster_role(&self, name: &str) -> Option<Arc<ClusterRole>> {
        self.cluster_roles
            .iter()
            .find(|r| ns_name(&r.metadata).1 == name)
            .map(|r| Arc::new(r.clone()))
    }
    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Role>> {
        self.roles
            .iter()
            .find(|r| ns_name(&r.metadata) == (namespace, name))
            .map(|r| Arc::new(r.clone()))
    }
    fn cluster_role_bindings(&self) -> Vec<Arc<ClusterRoleBinding>> {
        self.cluster_role_bindings
            .iter()
            .map(|b| Arc::new(b.clone()))
            .collect()
    }
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<RoleBinding>> {
        self.role_bindings
            .iter()
            .filter(|b| ns_name(&b.metadata).0 == namespace)
            .map(|b| Arc::new(b.clone()))
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use k8s_openapi::api::rbac::v1::Subject;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    pub fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(str::to_string),
            ..ObjectMeta::default()
        }
    }

    pub fn subject(kind: &str, name: &str) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            api_group: None,
            namespace: None,
        }
    }

    pub fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: meta(None, name),
            rules: Some(rules),
            aggregation_rule: None,
        }
    }

    pub fn role(ns: &str, name: &str, rules: Vec<PolicyRule>) -> Role {
        Role {
            metadata: meta(Some(ns), name),
            rules: Some(rules),
        }
    }

    pub fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    pub fn crb(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
        ClusterRoleBinding {
            metadata: meta(None, name),
            role_ref: role_ref("ClusterRole", role),
            subjects: Some(subjects),
        }
    }

    pub fn rb(ns: &str, name: &str, kind: &str, role: &str, subjects: Vec<Subject>) -> RoleBinding {
        RoleBinding {
            metadata: meta(Some(ns), name),
            role_ref: role_ref(kind, role),
            subjects: Some(subjects),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::rbac::rules::rule;

    #[test]
    fn cluster_then_namespace_rules_and_missing_roles() {
        let src = StaticPolicy {
            cluster_roles: vec![
                cluster_role("reader", vec![rule(&["get"], &[""], &["nodes"])]),
                cluster_role("cm", vec![rule(&["list"], &[""], &["configmaps"])]),
            ],
            roles: vec![role("a", "pods", vec![rule(&["*"], &[""], &["pods"])])],
            cluster_role_bindings: vec![
                crb("r", "reader", vec![subject("Group", "dev")]),
                crb("gone", "missing", vec![subject("User", "alice")]),
                crb("other", "cm", vec![subject("User", "bob")]),
            ],
            role_bindings: vec![
                rb("a", "p", "Role", "pods", vec![subject("User", "alice")]),
                rb(
                    "a",
                    "c",
                    "ClusterRole",
                    "cm",
                    vec![subject("User", "alice")],
                ),
                rb("b", "p", "Role", "pods", vec![subject("User", "alice")]),
            ],
        };
        let alice = UserInfo::authenticated("alice", vec!["dev".into()]);
        let (rules, errors) = rules_for(&src, &alice, "a");
        assert_eq!(
            rules,
            vec![
                rule(&["get"], &[""], &["nodes"]),
                rule(&["*"], &[""], &["pods"]),
                rule(&["list"], &[""], &["configmaps"]),
            ]
        );
        assert_eq!(
            errors,
            vec![r#"clusterrole.rbac.authorization.k8s.io "missing" not found"#.to_string()]
        );
        // Role "pods" does not exist in namespace b.
        let (rules, errors) = rules_for(&src, &alice, "b");
        assert_eq!(rules, vec![rule(&["get"], &[""], &["nodes"])]);
        assert_eq!(errors.len(), 2);
        assert_eq!(
            errors[1],
            r#"role.rbac.authorization.k8s.io "pods" not found"#
        );
        let (rules, _) = rules_for(&src, &alice, "");
        assert_eq!(rules, vec![rule(&["get"], &[""], &["nodes"])]);
    }
}
