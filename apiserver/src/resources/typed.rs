//! Structural checks: a body must decode into the k8s-openapi type of its kind, which catches
//! type errors (a string where a number belongs, a map where a list does) as 400s, like
//! kube-apiserver's decoder does.

use k8s_openapi::api::{
    admissionregistration, apps, autoscaling, batch, certificates, coordination, core, discovery,
    events, networking, policy, rbac, scheduling, storage,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use k3rs_apimachinery::catalog::Resource;

/// A body that does not decode into its kind's type (kube-apiserver's decoder message).
#[derive(Debug, thiserror::Error)]
#[error("{kind} in version {version:?} cannot be handled as a {kind}: {source}")]
pub struct StructureError {
    /// The kind.
    pub kind: &'static str,
    /// The API version.
    pub version: &'static str,
    /// The decoder's error.
    #[source]
    pub source: serde_json::Error,
}

/// Decodes `obj` as `T` straight from the tree (`&Value` is a deserializer), not from a copy.
fn check<T: DeserializeOwned>(obj: &Value) -> Result<(), serde_json::Error> {
    T::deserialize(obj).map(drop)
}

/// Ok if `obj` has the structure of `r`'s type; the decoder's message otherwise.
pub fn check_structure(r: &Resource, obj: &Value) -> Result<(), StructureError> {
    let checked = match (r.group, r.kind) {
        ("", "Namespace") => check::<core::v1::Namespace>(obj),
        ("", "Pod") => check::<core::v1::Pod>(obj),
        ("", "Service") => check::<core::v1::Service>(obj),
        ("", "ConfigMap") => check::<core::v1::ConfigMap>(obj),
        ("", "Secret") => check::<core::v1::Secret>(obj),
        ("", "ServiceAccount") => check::<core::v1::ServiceAccount>(obj),
        ("", "Event") => check::<core::v1::Event>(obj),
        ("", "Node") => check::<core::v1::Node>(obj),
        ("", "Endpoints") => check::<core::v1::Endpoints>(obj),
        ("", "PersistentVolume") => check::<core::v1::PersistentVolume>(obj),
        ("", "PersistentVolumeClaim") => check::<core::v1::PersistentVolumeClaim>(obj),
        ("", "ResourceQuota") => check::<core::v1::ResourceQuota>(obj),
        ("", "LimitRange") => check::<core::v1::LimitRange>(obj),
        ("", "ReplicationController") => check::<core::v1::ReplicationController>(obj),
        ("", "PodTemplate") => check::<core::v1::PodTemplate>(obj),
        ("apps", "Deployment") => check::<apps::v1::Deployment>(obj),
        ("apps", "ReplicaSet") => check::<apps::v1::ReplicaSet>(obj),
        ("apps", "StatefulSet") => check::<apps::v1::StatefulSet>(obj),
        ("apps", "DaemonSet") => check::<apps::v1::DaemonSet>(obj),
        ("apps", "ControllerRevision") => check::<apps::v1::ControllerRevision>(obj),
        ("batch", "Job") => check::<batch::v1::Job>(obj),
        ("batch", "CronJob") => check::<batch::v1::CronJob>(obj),
        ("autoscaling", "HorizontalPodAutoscaler") if r.version == "v1" => {
            check::<autoscaling::v1::HorizontalPodAutoscaler>(obj)
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            check::<autoscaling::v2::HorizontalPodAutoscaler>(obj)
        }
        ("policy", "PodDisruptionBudget") => check::<policy::v1::PodDisruptionBudget>(obj),
        ("coordination.k8s.io", "Lease") => check::<coordination::v1::Lease>(obj),
        // Part B.
        ("discovery.k8s.io", "EndpointSlice") => check::<discovery::v1::EndpointSlice>(obj),
        ("events.k8s.io", "Event") => check::<events::v1::Event>(obj),
        ("networking.k8s.io", "Ingress") => check::<networking::v1::Ingress>(obj),
        ("networking.k8s.io", "IngressClass") => check::<networking::v1::IngressClass>(obj),
        ("networking.k8s.io", "NetworkPolicy") => check::<networking::v1::NetworkPolicy>(obj),
        ("storage.k8s.io", "StorageClass") => check::<storage::v1::StorageClass>(obj),
        ("storage.k8s.io", "CSIDriver") => check::<storage::v1::CSIDriver>(obj),
        ("scheduling.k8s.io", "PriorityClass") => check::<scheduling::v1::PriorityClass>(obj),
        ("rbac.authorization.k8s.io", "Role") => check::<rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => check::<rbac::v1::RoleBinding>(obj),
        ("rbac.authorization.k8s.io", "ClusterRole") => check::<rbac::v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            check::<rbac::v1::ClusterRoleBinding>(obj)
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            check::<certificates::v1::CertificateSigningRequest>(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            check::<admissionregistration::v1::ValidatingAdmissionPolicy>(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            check::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            check::<admissionregistration::v1::ValidatingWebhookConfiguration>(obj)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            check::<admissionregistration::v1::MutatingWebhookConfiguration>(obj)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => check::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(obj),
        ("apiregistration.k8s.io", "APIService") => check::<
            k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        >(obj),
        _ => Ok(()),
    };
    checked.map_err(|source| StructureError {
        kind: r.kind,
        version: r.version,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::catalog::lookup;
    use serde_json::json;

    #[test]
    fn type_errors_are_reported() {
        let cm = lookup("", "v1", "configmaps").unwrap();
        assert!(
            check_structure(cm, &json!({"metadata": {"name": "x"}, "data": {"a": "b"}})).is_ok()
        );
        let e = check_structure(cm, &json!({"metadata": {"name": "x"}, "data": {"a": 1}}))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap"),
            "{e}"
        );
        let d = lookup("apps", "v1", "deployments").unwrap();
        assert!(check_structure(d, &json!({"spec": {"replicas": "three"}})).is_err());
    }
}
