//! The roles and bindings the RBAC authorizer decides on, read from four shared informers
//! (`k3rs_apimachinery::informers`) that list and watch them through an in-process client:
//! no datastore read per request.
//!
//! # Guarantees
//! - Until a kind's first list has arrived it reads as empty (requests outside
//!   `system:masters` are denied, as kube-apiserver before its informers sync).
//! - The informers restart with backoff after errors and stop with their factory's stop
//!   token; any number of tasks may wait for them to sync.

use std::sync::Arc;

use k3rs_apimachinery::informers::{Informer, SharedInformerFactory};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::runtime::reflector::ObjectRef;

use super::resolver::PolicySource;

/// The authorizer's view of the four kinds.
#[derive(Clone)]
pub struct PolicyCache {
    roles: Informer<Role>,
    cluster_roles: Informer<ClusterRole>,
    role_bindings: Informer<RoleBinding>,
    cluster_role_bindings: Informer<ClusterRoleBinding>,
}

impl std::fmt::Debug for PolicyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyCache")
            .field("roles", &self.roles.list().len())
            .field("cluster_roles", &self.cluster_roles.list().len())
            .field("role_bindings", &self.role_bindings.list().len())
            .field(
                "cluster_role_bindings",
                &self.cluster_role_bindings.list().len(),
            )
            .finish()
    }
}

impl PolicyCache {
    /// The four kinds' informers of `informers` (which watch once it is started).
    pub fn new(informers: &SharedInformerFactory) -> PolicyCache {
        PolicyCache {
            roles: informers.informer(),
            cluster_roles: informers.informer(),
            role_bindings: informers.informer(),
            cluster_role_bindings: informers.informer(),
        }
    }

    /// Waits until every kind has been listed once.
    pub async fn wait_until_ready(&self) {
        self.roles.wait_synced().await;
        self.cluster_roles.wait_synced().await;
        self.role_bindings.wait_synced().await;
        self.cluster_role_bindings.wait_synced().await;
    }
}

impl PolicySource for PolicyCache {
    fn cluster_role(&self, name: &str) -> Option<Arc<ClusterRole>> {
        self.cluster_roles.get(&ObjectRef::new(name))
    }
    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Role>> {
        self.roles.get(&ObjectRef::new(name).within(namespace))
    }
    fn cluster_role_bindings(&self) -> Vec<Arc<ClusterRoleBinding>> {
        self.cluster_role_bindings.list()
    }
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<RoleBinding>> {
        self.role_bindings
            .list_filter(|b| b.metadata.namespace.as_deref() == Some(namespace))
    }
}
