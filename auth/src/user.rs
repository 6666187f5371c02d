//! `user.Info`: the authenticated identity every authorizer and admission plugin sees.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

pub use k3rs_apimachinery::users::*;

/// An authenticated identity (Kubernetes `user.Info`; `UserInfo` in review objects).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct UserInfo {
    /// The user's name (e.g. `system:serviceaccount:default:app`, a certificate's CN).
    pub username: String,
    /// A unique, stable id of the user; empty when the authenticator has none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups the user is in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Authenticator-specific attributes (e.g. a bound token's pod name), passed on to authorizers and webhooks.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with `groups`, plus `system:authenticated` (kube-apiserver adds it to every
    /// authenticated user that does not already carry it).
    pub fn authenticated(username: impl Into<String>, groups: Vec<String>) -> UserInfo {
        let mut u = UserInfo {
            username: username.into(),
            groups,
            ..UserInfo::default()
        };
        u.add_group(ALL_AUTHENTICATED);
        u
    }

    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            username: ANONYMOUS.into(),
            groups: vec![ALL_UNAUTHENTICATED.into()],
            ..UserInfo::default()
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Adds `group` unless present.
    pub fn add_group(&mut self, group: &str) {
        if !self.in_group(group) {
            self.groups.push(group.to_string());
        }
    }

    /// The node name of a kubelet identity (`system:node:<name>` in `system:nodes`).
    pub fn node_name(&self) -> Option<&str> {
        if !self.in_group(NODES_GROUP) {
            return None;
        }
        self.username
            .strip_prefix(NODE_USER_PREFIX)
            .filter(|n| !n.is_empty())
    }
}

/// The identity of a request built inside the server (controllers, scheduler) and sent
/// through the router as a tower service. hyper never puts this extension on a request it
/// parsed from the network, so its presence is trustworthy.
#[derive(Debug, Clone)]
pub struct InProcessUser(pub Arc<UserInfo>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authenticated_adds_the_group_once() {
        let u = UserInfo::authenticated("bob", vec![ALL_AUTHENTICATED.into(), "dev".into()]);
        assert_eq!(u.groups, vec![ALL_AUTHENTICATED.to_string(), "dev".into()]);
        let u = UserInfo::authenticated("bob", vec!["dev".into()]);
        assert_eq!(u.groups, vec!["dev".to_string(), ALL_AUTHENTICATED.into()]);
    }

    #[test]
    fn node_name_needs_the_group() {
        let n = UserInfo::authenticated("system:node:n1", vec![NODES_GROUP.into()]);
        assert_eq!(n.node_name(), Some("n1"));
        let not = UserInfo::authenticated("system:node:n1", vec![]);
        assert_eq!(not.node_name(), None);
        let empty = UserInfo::authenticated("system:node:", vec![NODES_GROUP.into()]);
        assert_eq!(empty.node_name(), None);
    }
}
