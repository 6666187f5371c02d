//! The roles and bindings the RBAC authorizer decides on, kept in memory by four informers
//! (kube-runtime reflectors) that list and watch them through an in-process client: no
//! datastore read per request.
//!
//! # Guarantees
//! - Until a kind's first list has arrived it reads as empty (requests outside
//!   `system:masters` are denied, as kube-apiserver before its informers sync).
//! - The informers restart with backoff after errors and stop with the stop token.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::resolver::PolicySource;

/// Read side of the informers.
#[derive(Clone)]
pub struct PolicyCache {
    roles: Store<Role>,
    cluster_roles: Store<ClusterRole>,
    role_bindings: Store<RoleBinding>,
    cluster_role_bindings: Store<ClusterRoleBinding>,
}

impl std::fmt::Debug for PolicyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyCache")
            .field("roles", &self.roles.len())
            .field("cluster_roles", &self.cluster_roles.len())
            .field("role_bindings", &self.role_bindings.len())
            .field("cluster_role_bindings", &self.cluster_role_bindings.len())
            .finish()
    }
}

/// Write side: consumed by [`PolicyFeed::run`].
pub struct PolicyFeed {
    roles: reflector::store::Writer<Role>,
    cluster_roles: reflector::store::Writer<ClusterRole>,
    role_bindings: reflector::store::Writer<RoleBinding>,
    cluster_role_bindings: reflector::store::Writer<ClusterRoleBinding>,
}

impl std::fmt::Debug for PolicyFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyFeed")
    }
}

/// An empty cache and the feed that fills it.
pub fn policy_cache() -> (PolicyCache, PolicyFeed) {
    let (roles, roles_w) = reflector::store();
    let (cluster_roles, cluster_roles_w) = reflector::store();
    let (role_bindings, role_bindings_w) = reflector::store();
    let (cluster_role_bindings, cluster_role_bindings_w) = reflector::store();
    (
        PolicyCache {
            roles,
            cluster_roles,
            role_bindings,
            cluster_role_bindings,
        },
        PolicyFeed {
            roles: roles_w,
            cluster_roles: cluster_roles_w,
            role_bindings: role_bindings_w,
            cluster_role_bindings: cluster_role_bindings_w,
        },
    )
}

async fn inform<K>(client: kube::Client, writer: reflector::store::Writer<K>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let stream = watcher(Api::<K>::all(client), watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(reflector::reflector(writer, stream));
    while let Some(ev) = stream.next().await {
        if let Err(e) = ev {
            tracing::debug!(error = %e, kind = %K::kind(&()), "rbac informer");
        }
    }
}

impl PolicyFeed {
    /// Lists and watches the four kinds through `client` until `stop`.
    pub async fn run(self, client: kube::Client, stop: CancellationToken) {
        let all = futures::future::join4(
            inform(client.clone(), self.roles),
            inform(client.clone(), self.cluster_roles),
            inform(client.clone(), self.role_bindings),
            inform(client, self.cluster_role_bindings),
        );
        tokio::select! {
            _ = all => {}
            _ = stop.cancelled() => {}
        }
    }
}

impl PolicyCache {
    /// Waits until every kind has been listed once.
    pub async fn wait_until_ready(&self) {
        let _ = self.roles.wait_until_ready().await;
        let _ = self.cluster_roles.wait_until_ready().await;
        let _ = self.role_bindings.wait_until_ready().await;
        let _ = self.cluster_role_bindings.wait_until_ready().await;
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
        self.cluster_role_bindings.state()
    }
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<RoleBinding>> {
        self.role_bindings
            .state_filter(|b| b.metadata.namespace.as_deref() == Some(namespace))
    }
}
