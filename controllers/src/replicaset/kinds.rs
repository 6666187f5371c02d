//! The two kinds the ReplicaSet controller manages with one core (upstream runs the
//! ReplicationManager as a ReplicaSet controller over converted objects): apps/v1 ReplicaSet and
//! core/v1 ReplicationController, seen through [`Replicated`].

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{PodTemplateSpec, ReplicationController};
use k8s_openapi::NamespaceResourceScope;
use kube::core::Selector;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The spec fields the controller acts on.
#[derive(Debug, Clone)]
pub struct View {
    pub replicas: i32,
    pub selector: Selector,
    pub template: PodTemplateSpec,
    pub min_ready_seconds: i32,
}

/// A kind of replica-count controller.
pub trait Replicated:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + k8s_openapi::Resource
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// Upstream's controller (and service account) name, the events' reporting component.
    const CONTROLLER: &'static str;
    /// The spec, `None` when it cannot be acted on (no template, invalid selector).
    fn view(&self) -> Option<View>;
    /// The status in ReplicaSet form (a ReplicationController's has the same fields).
    fn rs_status(&self) -> ReplicaSetStatus;
    /// Sets the status from ReplicaSet form.
    fn set_rs_status(&mut self, status: ReplicaSetStatus);
}

impl Replicated for ReplicaSet {
    const CONTROLLER: &'static str = "replicaset-controller";

    fn view(&self) -> Option<View> {
        let spec = self.spec.as_ref()?;
        Some(View {
            replicas: spec.replicas.unwrap_or(1),
            selector: Selector::try_from(spec.selector.clone()).ok()?,
            template: spec.template.clone()?,
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
        })
    }

    fn rs_status(&self) -> ReplicaSetStatus {
        self.status.clone().unwrap_or_default()
    }

    fn set_rs_status(&mut self, status: ReplicaSetStatus) {
        self.status = Some(status);
    }
}

impl Replicated for ReplicationController {
    const CONTROLLER: &'static str = "replication-controller";

    fn view(&self) -> Option<View> {
        let spec = self.spec.as_ref()?;
        let template = spec.template.clone()?;
        // The API server defaults the selector to the template's labels.
        let selector = spec
            .selector
            .clone()
            .or_else(|| template.metadata.as_ref()?.labels.clone())
            .filter(|s| !s.is_empty())?;
        Some(View {
            replicas: spec.replicas.unwrap_or(1),
            selector: selector.into_iter().collect(),
            template,
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
        })
    }

    fn rs_status(&self) -> ReplicaSetStatus {
        convert(&self.status).unwrap_or_default()
    }

    fn set_rs_status(&mut self, status: ReplicaSetStatus) {
        self.status = convert(&Some(status));
    }
}

/// Between the two status types, which share their JSON form.
fn convert<A: Serialize, B: DeserializeOwned>(a: &Option<A>) -> Option<B> {
    serde_json::to_value(a.as_ref()?)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::SelectorExt;

    #[test]
    fn replication_controller_reads_and_writes_like_a_replica_set() {
        let rc: ReplicationController = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rc"},
            "spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": []}}},
            "status": {"replicas": 2, "readyReplicas": 1, "conditions": [
                {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"}]}
        }))
        .unwrap();
        let v = rc.view().unwrap();
        assert_eq!(v.replicas, 1);
        assert!(v
            .selector
            .matches(&[("app".to_string(), "a".to_string())].into()));
        assert!(!v.selector.matches(&Default::default()));
        let s = rc.rs_status();
        assert_eq!((s.replicas, s.ready_replicas), (2, Some(1)));
        assert_eq!(
            s.conditions.as_ref().unwrap()[0].reason.as_deref(),
            Some("FailedCreate")
        );
        let mut rc2 = rc.clone();
        rc2.set_rs_status(s);
        assert_eq!(rc2.status, rc.status);
    }

    #[test]
    fn replica_set_without_template_is_not_acted_on() {
        let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"a": "b"}}}
        }))
        .unwrap();
        assert!(rs.view().is_none());
    }
}
