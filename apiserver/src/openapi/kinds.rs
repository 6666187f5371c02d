//! Which k8s-openapi type gives the schema of each served kind: the one place that ties the
//! catalog's (group, version, kind) to a Rust type for OpenAPI.

use k8s_openapi::api::{
    admissionregistration, apps, authentication, authorization, autoscaling, batch, certificates,
    coordination, core, discovery, events, networking, policy, rbac, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
use k8s_openapi::schemars::{JsonSchema, Schema, SchemaGenerator};

/// Adds the schema of one type (and everything it references) to a generator; returns the
/// `$ref` to it.
pub type AddSchema = fn(&mut SchemaGenerator) -> Schema;

fn add<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// The schema of a served kind, by (group, version, kind); `None` for kinds without a
/// k8s-openapi type (their paths are still served, without a schema).
pub fn schema_of(group: &str, version: &str, kind: &str) -> Option<AddSchema> {
    let f: AddSchema = match (group, version, kind) {
        ("", "v1", "Namespace") => add::<core::v1::Namespace>,
        ("", "v1", "Pod") => add::<core::v1::Pod>,
        ("", "v1", "Service") => add::<core::v1::Service>,
        ("", "v1", "ConfigMap") => add::<core::v1::ConfigMap>,
        ("", "v1", "Secret") => add::<core::v1::Secret>,
        ("", "v1", "ServiceAccount") => add::<core::v1::ServiceAccount>,
        ("", "v1", "Event") => add::<core::v1::Event>,
        ("", "v1", "Node") => add::<core::v1::Node>,
        ("", "v1", "Endpoints") => add::<core::v1::Endpoints>,
        ("", "v1", "PersistentVolume") => add::<core::v1::PersistentVolume>,
        ("", "v1", "PersistentVolumeClaim") => add::<core::v1::PersistentVolumeClaim>,
        ("", "v1", "ResourceQuota") => add::<core::v1::ResourceQuota>,
        ("", "v1", "LimitRange") => add::<core::v1::LimitRange>,
        ("", "v1", "ReplicationController") => add::<core::v1::ReplicationController>,
        ("", "v1", "PodTemplate") => add::<core::v1::PodTemplate>,
        ("", "v1", "Binding") => add::<core::v1::Binding>,
        ("apps", "v1", "Deployment") => add::<apps::v1::Deployment>,
        ("apps", "v1", "ReplicaSet") => add::<apps::v1::ReplicaSet>,
        ("apps", "v1", "StatefulSet") => add::<apps::v1::StatefulSet>,
        ("apps", "v1", "DaemonSet") => add::<apps::v1::DaemonSet>,
        ("apps", "v1", "ControllerRevision") => add::<apps::v1::ControllerRevision>,
        ("autoscaling", "v1", "Scale") => add::<autoscaling::v1::Scale>,
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => {
            add::<autoscaling::v1::HorizontalPodAutoscaler>
        }
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => {
            add::<autoscaling::v2::HorizontalPodAutoscaler>
        }
        ("batch", "v1", "Job") => add::<batch::v1::Job>,
        ("batch", "v1", "CronJob") => add::<batch::v1::CronJob>,
        ("coordination.k8s.io", "v1", "Lease") => add::<coordination::v1::Lease>,
        ("discovery.k8s.io", "v1", "EndpointSlice") => add::<discovery::v1::EndpointSlice>,
        ("events.k8s.io", "v1", "Event") => add::<events::v1::Event>,
        ("policy", "v1", "PodDisruptionBudget") => add::<policy::v1::PodDisruptionBudget>,
        ("policy", "v1", "Eviction") => add::<policy::v1::Eviction>,
        ("networking.k8s.io", "v1", "Ingress") => add::<networking::v1::Ingress>,
        ("networking.k8s.io", "v1", "IngressClass") => add::<networking::v1::IngressClass>,
        ("networking.k8s.io", "v1", "NetworkPolicy") => add::<networking::v1::NetworkPolicy>,
        ("storage.k8s.io", "v1", "StorageClass") => add::<storage::v1::StorageClass>,
        ("storage.k8s.io", "v1", "CSIDriver") => add::<storage::v1::CSIDriver>,
        ("scheduling.k8s.io", "v1", "PriorityClass") => add::<scheduling::v1::PriorityClass>,
        ("rbac.authorization.k8s.io", "v1", "Role") => add::<rbac::v1::Role>,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => add::<rbac::v1::ClusterRole>,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => add::<rbac::v1::RoleBinding>,
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => {
            add::<rbac::v1::ClusterRoleBinding>
        }
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => {
            add::<authorization::v1::SelfSubjectAccessReview>
        }
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview") => {
            add::<authorization::v1::SelfSubjectRulesReview>
        }
        ("authorization.k8s.io", "v1", "SubjectAccessReview") => {
            add::<authorization::v1::SubjectAccessReview>
        }
        ("authorization.k8s.io", "v1", "LocalSubjectAccessReview") => {
            add::<authorization::v1::LocalSubjectAccessReview>
        }
        ("authentication.k8s.io", "v1", "TokenRequest") => add::<authentication::v1::TokenRequest>,
        ("authentication.k8s.io", "v1", "TokenReview") => add::<authentication::v1::TokenReview>,
        ("authentication.k8s.io", "v1", "SelfSubjectReview") => {
            add::<authentication::v1::SelfSubjectReview>
        }
        ("certificates.k8s.io", "v1", "CertificateSigningRequest") => {
            add::<certificates::v1::CertificateSigningRequest>
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy") => {
            add::<admissionregistration::v1::ValidatingAdmissionPolicy>
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding") => {
            add::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") => {
            add::<admissionregistration::v1::ValidatingWebhookConfiguration>
        }
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration") => {
            add::<admissionregistration::v1::MutatingWebhookConfiguration>
        }
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => {
            add::<apiextensions::v1::CustomResourceDefinition>
        }
        ("apiregistration.k8s.io", "v1", "APIService") => add::<apiregistration::v1::APIService>,
        ("metrics.k8s.io", "v1beta1", "NodeMetrics") => {
            add::<crate::resource_metrics::openapi::NodeMetrics>
        }
        ("metrics.k8s.io", "v1beta1", "PodMetrics") => {
            add::<crate::resource_metrics::openapi::PodMetrics>
        }
        _ => return None,
    };
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::catalog::{CATALOG, METRICS_API};

    #[test]
    fn every_catalog_kind_has_a_schema() {
        for r in CATALOG.iter().chain(METRICS_API) {
            assert!(
                schema_of(r.group, r.version, r.kind).is_some(),
                "{}/{} {}",
                r.group,
                r.version,
                r.kind
            );
            // status and scale bodies are objects; connect subresources (exec, log, …) are
            // described by their query parameters.
            for s in r
                .subresources
                .iter()
                .filter(|s| matches!(s.name, "status" | "scale"))
            {
                assert!(
                    schema_of(s.group, s.version, s.kind).is_some(),
                    "{}",
                    s.kind
                );
            }
        }
    }
}
