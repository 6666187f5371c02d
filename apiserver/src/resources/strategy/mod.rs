//! Per-kind strategies: defaulting and validation beyond the generic metadata rules, and
//! what a create resets. Pure functions over the JSON object; unit-tested with exact values.

mod apiservice;
mod apps;
mod autoscaling;
mod batch;
mod ephemeral;
mod namespace;
mod pod;
mod pod_update;
mod policy;
mod quota;
mod replication;
mod secret;
mod service;
// Part B.
pub mod csr;
mod endpointslice;
mod event;
mod generation;
mod networking;
mod rbac;
pub mod scheduling;
mod sets;
mod storage;
mod volume;
mod workload;

use serde_json::Value;

use super::event_convert::to_core;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::Cause;

pub use generation::{bumps_generation, prepare_for_status_update};
pub use pod::{default_pod_spec, mirror_service_account, requests_from_limits};

/// Applies the kind's defaults (kube-apiserver's `SetDefaults_*`).
pub fn apply_defaults(r: &Resource, obj: &mut Value) {
    match (r.group, r.kind) {
        ("", "Pod") => pod::defaults(obj),
        ("", "Service") => service::defaults(obj),
        ("", "Secret") => secret::defaults(obj),
        ("", "Namespace") => namespace::defaults(obj),
        ("apps", "Deployment") => apps::deployment_defaults(obj),
        ("apps", "ReplicaSet") => apps::replicaset_defaults(obj),
        ("", "PersistentVolume") => volume::pv_defaults(obj),
        ("", "PersistentVolumeClaim") => volume::claim_defaults(obj),
        ("", "LimitRange") => quota::limitrange_defaults(obj),
        ("", "ReplicationController") => replication::rc_defaults(obj),
        ("", "PodTemplate") => replication::podtemplate_defaults(obj),
        ("apps", "StatefulSet") => sets::statefulset_defaults(obj),
        ("apps", "DaemonSet") => sets::daemonset_defaults(obj),
        ("batch", "Job") => batch::job_defaults(obj),
        ("batch", "CronJob") => batch::cronjob_defaults(obj),
        ("autoscaling", "HorizontalPodAutoscaler") if r.version == "v1" => {
            autoscaling::hpa_v1_defaults(obj)
        }
        ("autoscaling", "HorizontalPodAutoscaler") => autoscaling::hpa_defaults(obj),
        // Part B.
        ("discovery.k8s.io", "EndpointSlice") => endpointslice::defaults(obj),
        ("apiregistration.k8s.io", "APIService") => apiservice::defaults(obj),
        ("networking.k8s.io", "IngressClass") => networking::ingressclass_defaults(obj),
        ("networking.k8s.io", "NetworkPolicy") => networking::networkpolicy_defaults(obj),
        ("storage.k8s.io", "StorageClass") => storage::storageclass_defaults(obj),
        ("storage.k8s.io", "CSIDriver") => storage::csidriver_defaults(obj),
        ("scheduling.k8s.io", "PriorityClass") => scheduling::defaults(obj),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            rbac::binding_defaults(obj)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crate::crd::definition::defaults(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            crate::admission::validating_policy::definition::policy_defaults(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            crate::admission::validating_policy::definition::binding_defaults(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            crate::admission::webhook::definition::defaults(obj, false)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            crate::admission::webhook::definition::defaults(obj, true)
        }
        _ => {
            if let Some(s) = super::custom::version_of(r).and_then(|cv| cv.schema.clone()) {
                crate::crd::schema::default::apply(&s, obj);
            }
        }
    }
}

/// What a create resets: status of resources with a status subresource (to the kind's
/// initial status).
pub fn prepare_for_create(r: &Resource, obj: &mut Value) {
    if r.has_status {
        if let Some(o) = obj.as_object_mut() {
            o.remove("status");
        }
    }
    match (r.group, r.kind) {
        ("", "Pod") => obj["status"] = serde_json::json!({ "phase": "Pending" }),
        ("", "Namespace") => obj["status"] = serde_json::json!({ "phase": "Active" }),
        ("", "Service") => {
            obj["status"] = serde_json::json!({ "loadBalancer": {} });
        }
        ("", "PersistentVolume") => {
            obj["status"] = serde_json::json!({
                "phase": "Pending",
                "lastPhaseTransitionTime": k3rs_apimachinery::meta::now_rfc3339(),
            });
        }
        ("", "ReplicationController") | ("apps", "StatefulSet") => {
            obj["status"] = serde_json::json!({ "replicas": 0 });
            if r.kind == "StatefulSet" {
                obj["status"]["availableReplicas"] = serde_json::json!(0);
            }
        }
        ("apps", "DaemonSet") => {
            obj["status"] = serde_json::json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                "desiredNumberScheduled": 0, "numberReady": 0});
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            obj["status"] = serde_json::json!({ "desiredReplicas": 0 });
        }
        ("policy", "PodDisruptionBudget") => obj["status"] = policy::initial_status(),
        ("batch", "Job") => batch::generate_selector(obj),
        // Part B.
        ("networking.k8s.io", "Ingress") => obj["status"] = networking::ingress_initial_status(),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            csr::prepare_for_create(obj, &csr::Requester::admin())
        }
        _ => {}
    }
}

/// Kind-specific validation; field paths are kube-apiserver's.
pub fn validate(r: &Resource, obj: &Value) -> Vec<Cause> {
    let mut causes = workload::validate_template_metadata(r.group, r.kind, obj);
    causes.extend(validate_kind(r, obj));
    causes
}

/// The kind-specific part of [`validate`].
fn validate_kind(r: &Resource, obj: &Value) -> Vec<Cause> {
    match (r.group, r.kind) {
        ("", "Pod") => pod::validate_spec(&obj["spec"], "spec"),
        ("", "Service") => service::validate(obj),
        ("", "ConfigMap") => config_keys(obj, &["data", "binaryData"]),
        ("", "Secret") => config_keys(obj, &["data", "stringData"]),
        ("apps", "Deployment") | ("apps", "ReplicaSet") => apps::validate(obj),
        // Part B.
        ("discovery.k8s.io", "EndpointSlice") => endpointslice::validate(obj),
        ("apiregistration.k8s.io", "APIService") => apiservice::validate(obj),
        ("", "Event") => event::validate(obj, false),
        ("events.k8s.io", "Event") => event::validate(&to_core(obj), true),
        ("networking.k8s.io", "Ingress") => networking::ingress_validate(obj),
        ("networking.k8s.io", "IngressClass") => networking::ingressclass_validate(obj),
        ("networking.k8s.io", "NetworkPolicy") => networking::networkpolicy_validate(obj),
        ("storage.k8s.io", "StorageClass") => storage::storageclass_validate(obj),
        ("storage.k8s.io", "CSIDriver") => storage::csidriver_validate(obj),
        ("scheduling.k8s.io", "PriorityClass") => scheduling::validate(obj),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            crate::admission::validating_policy::definition::validate_policy(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            crate::admission::validating_policy::definition::validate_binding(obj)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            crate::admission::webhook::definition::validate(obj, false)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            crate::admission::webhook::definition::validate(obj, true)
        }
        ("rbac.authorization.k8s.io", "Role") => rbac::role_validate(obj),
        ("rbac.authorization.k8s.io", "ClusterRole") => rbac::clusterrole_validate(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => rbac::binding_validate(obj, true),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => rbac::binding_validate(obj, false),
        // Part A.
        ("", "PersistentVolume") => volume::validate_pv(obj),
        ("", "PersistentVolumeClaim") => volume::validate_pvc(obj),
        ("", "ResourceQuota") => quota::validate_quota(obj),
        ("", "LimitRange") => quota::validate_limitrange(obj),
        ("", "ReplicationController") => replication::validate_rc(obj),
        ("", "PodTemplate") => replication::validate_podtemplate(obj),
        ("apps", "StatefulSet") => sets::validate_statefulset(obj),
        ("apps", "DaemonSet") => sets::validate_daemonset(obj),
        ("apps", "ControllerRevision") => sets::validate_controllerrevision(obj),
        ("batch", "Job") => batch::validate_job(obj),
        ("batch", "CronJob") => batch::validate_cronjob(obj),
        ("autoscaling", "HorizontalPodAutoscaler") if r.version == "v1" => {
            autoscaling::validate_hpa(&super::hpa_convert::to_v2(obj))
        }
        ("autoscaling", "HorizontalPodAutoscaler") => autoscaling::validate_hpa(obj),
        ("policy", "PodDisruptionBudget") => policy::validate_pdb(obj),
        ("certificates.k8s.io", "CertificateSigningRequest") => csr::validate(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crate::crd::definition::validate(obj)
        }
        _ => match super::custom::version_of(r).and_then(|cv| cv.schema.clone()) {
            Some(s) => {
                use crate::crd::schema::{list_type, validate};
                let mut causes = validate::validate(&s, obj);
                causes.extend(list_type::validate(&s, obj));
                causes
            }
            None => Vec::new(),
        },
    }
}

/// A custom resource's `x-kubernetes-validations` (`old` on updates), unless the schema
/// validation already found `causes` that make the object unfit for them (wrong types,
/// unsupported values), as kube-apiserver's `hasBlockingErr` decides.
pub fn validate_custom_rules(
    r: &Resource,
    obj: &Value,
    old: Option<&Value>,
    causes: &[Cause],
) -> Vec<Cause> {
    let Some(s) = super::custom::version_of(r).and_then(|cv| cv.schema.clone()) else {
        return Vec::new();
    };
    if !crate::crd::schema::rules::has_rules(&s) {
        return Vec::new();
    }
    let blocking = causes
        .iter()
        .any(|c| matches!(c.reason, "FieldValueTypeInvalid" | "FieldValueNotSupported"));
    if blocking {
        return vec![Cause::invalid_value(
            "",
            "\"null\"",
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        )];
    }
    crate::crd::schema::rules::validate(&s, obj, old)
}

/// The `ephemeralcontainers` subresource's rules: containers may be added, not changed.
pub fn validate_ephemeral_update(old: &Value, new: &Value) -> Vec<Cause> {
    ephemeral::validate_update(old, new)
}

/// What an update may not change (kube's `ValidateXUpdate`), on top of [`validate`].
pub fn validate_update(r: &Resource, new: &Value, old: &Value) -> Vec<Cause> {
    match (r.group, r.kind) {
        // Part B.
        ("discovery.k8s.io", "EndpointSlice") => endpointslice::validate_update(new, old),
        ("", "Event") => event::validate_update(new, old, false),
        ("events.k8s.io", "Event") => event::validate_update(&to_core(new), &to_core(old), true),
        ("networking.k8s.io", "IngressClass") => networking::ingressclass_validate_update(new, old),
        ("storage.k8s.io", "StorageClass") => storage::storageclass_validate_update(new, old),
        ("storage.k8s.io", "CSIDriver") => storage::csidriver_validate_update(new, old),
        ("scheduling.k8s.io", "PriorityClass") => scheduling::validate_update(new, old),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            rbac::binding_validate_update(new, old)
        }
        // Part A.
        ("", "Pod") => pod_update::validate_update(new, old),
        ("", "PersistentVolumeClaim") => volume::validate_pvc_update(old, new),
        ("apps", "StatefulSet") => sets::validate_statefulset_update(old, new),
        ("apps", "DaemonSet") => immutable(new, old, "spec.selector"),
        ("batch", "Job") => batch::validate_job_update(old, new),
        ("certificates.k8s.io", "CertificateSigningRequest") => csr::validate_update(new, old),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crate::crd::definition::validate_update(old, new)
        }
        _ => Vec::new(),
    }
}

/// What an update of the object or of its `subresource` may change, applied to the merged
/// object `new` given the stored `old` (kube's `PrepareForUpdate`); `now` stamps conditions.
pub fn prepare_for_update(
    r: &Resource,
    subresource: Option<&str>,
    new: &mut Value,
    old: &Value,
    now: &str,
) {
    if let ("certificates.k8s.io", "CertificateSigningRequest") = (r.group, r.kind) {
        csr::prepare_for_update(subresource, new, old, now)
    }
}

/// Why deleting `name` of `r` is forbidden, if it is (system priority classes).
pub fn delete_refusal(r: &Resource, name: &str) -> Option<&'static str> {
    match (r.group, r.kind) {
        ("scheduling.k8s.io", "PriorityClass") => scheduling::delete_refusal(name),
        _ => None,
    }
}

/// The value at a dotted `path` (`spec.attachRequired`).
fn at_path<'a>(obj: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(obj, |v, k| &v[k])
}

/// kube's `ValidateImmutableField`: `Invalid value: <new>: field is immutable`.
pub(crate) fn immutable(new: &Value, old: &Value, path: &str) -> Vec<Cause> {
    let (n, o) = (at_path(new, path), at_path(old, path));
    if n == o {
        return Vec::new();
    }
    let shown = match n {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut cause = Cause::invalid(path, &shown, "field is immutable");
    if !n.is_string() {
        cause.message = format!("Invalid value: {shown}: field is immutable");
    }
    vec![cause]
}

/// `NotSupported` unless the string at the dotted `path`, when set, is one of `supported`.
pub(crate) fn one_of(obj: &Value, path: &str, supported: &[&str]) -> Option<Cause> {
    let v = at_path(obj, path).as_str()?;
    (!supported.contains(&v)).then(|| Cause::not_supported(path, v, supported))
}

/// The field paths of `causes`, for tests.
#[cfg(test)]
pub(crate) fn fields(causes: Vec<Cause>) -> Vec<String> {
    causes.into_iter().map(|c| c.field).collect()
}

/// kube's `ValidateQualifiedName` (`[prefix/]name`) at `field`.
pub(crate) fn qualified_name(value: &str, field: &str) -> Vec<Cause> {
    match k3rs_apimachinery::validation::label_key_error(value) {
        Some(e) => vec![Cause::invalid(field, value, &e)],
        None => Vec::new(),
    }
}

/// ConfigMap/Secret keys: `[-._a-zA-Z0-9]+`, at most 253 characters.
fn config_keys(obj: &Value, fields: &[&str]) -> Vec<Cause> {
    let mut causes = Vec::new();
    for f in fields {
        if let Some(m) = obj.get(*f).and_then(Value::as_object) {
            for k in m.keys() {
                let ok = !k.is_empty()
                    && k.len() <= 253
                    && k != "."
                    && k != ".."
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
                if !ok {
                    causes.push(Cause::invalid(
                        *f,
                        k,
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
            }
        }
    }
    causes
}

/// Sets `obj[key]` to `value` unless present (and not null).
pub(crate) fn default_field(obj: &mut Value, key: &str, value: Value) {
    if let Some(o) = obj.as_object_mut() {
        let slot = o.entry(key.to_string()).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}
