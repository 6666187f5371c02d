//! A StatefulSet pod's stable identity (upstream's `stateful_set_utils.go`): its name
//! `<set>-<ordinal>`, the labels that name it, its hostname and subdomain, and the claims
//! `<template>-<set>-<ordinal>` its volumes bind to.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::pod_template::pod_from_template;
use crate::ref_manager::controller_ref;

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
/// The revision label on pods (and the hash label on ControllerRevisions).
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// `<set>-<ordinal>`.
pub fn pod_name(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// The ordinal of a pod named `<set>-<n>`, if it is one of `set`'s.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    let n = pod.strip_prefix(set)?.strip_prefix('-')?;
    if n.is_empty() || (n.len() > 1 && n.starts_with('0')) {
        return None;
    }
    n.parse().ok()
}

/// `<claim template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

fn set_name(set: &StatefulSet) -> String {
    set.metadata.name.clone().unwrap_or_default()
}

/// The claims pod `ordinal` of `set` uses, one per volumeClaimTemplate (labels: the set's
/// selector's matchLabels, as upstream).
pub fn claims(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let spec = set.spec.clone().unwrap_or_default();
    let selector_labels = spec.selector.match_labels.clone().unwrap_or_default();
    spec.volume_claim_templates
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let tname = t.metadata.name.clone().unwrap_or_default();
            let mut labels = t.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(&tname, &set_name(set), ordinal)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: t.metadata.annotations.clone(),
                    ..ObjectMeta::default()
                },
                spec: t.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// Pod `ordinal` of `set` from `template` at revision `revision`: named, labelled, with
/// hostname/subdomain and its claims mounted in place of same-named volumes.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let name = set_name(set);
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let owner = controller_ref("apps/v1", "StatefulSet", &set.metadata);
    let mut pod = pod_from_template(template, &ns, "", owner);
    let pod_name = pod_name(&name, ordinal);
    pod.metadata.generate_name = None;
    pod.metadata.name = Some(pod_name.clone());
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(pod_name);
    spec.subdomain = set.spec.as_ref().and_then(|s| s.service_name.clone());
    let templates = set
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default();
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    for t in templates {
        let tname = t.metadata.name.clone().unwrap_or_default();
        volumes.retain(|v| v.name != tname);
        volumes.push(Volume {
            name: tname.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&tname, &name, ordinal),
                read_only: None,
            }),
            ..Volume::default()
        });
    }
    if volumes.is_empty() {
        spec.volumes = None;
    }
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> StatefulSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "prod", "uid": "u"},
            "spec": {
                "serviceName": "db-svc",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "c", "image": "pg"}],
                        "volumes": [{"name": "data", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn names_and_ordinals() {
        assert_eq!(pod_name("web", 2), "web-2");
        assert_eq!(ordinal_of("web", "web-2"), Some(2));
        assert_eq!(ordinal_of("web", "web-02"), None);
        assert_eq!(ordinal_of("web", "web-x"), None);
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-"), None);
        assert_eq!(claim_name("data", "web", 0), "data-web-0");
    }

    #[test]
    fn pod_carries_its_identity_and_claims() {
        let s = set();
        let template = s.spec.as_ref().unwrap().template.clone();
        let pod = new_pod(&s, &template, 1, "db-abc");
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(v["metadata"]["name"], "db-1");
        assert_eq!(v["metadata"]["namespace"], "prod");
        assert_eq!(
            v["metadata"]["labels"],
            serde_json::json!({"app": "db", POD_NAME_LABEL: "db-1", POD_INDEX_LABEL: "1",
                REVISION_LABEL: "db-abc"})
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "StatefulSet");
        assert_eq!(v["spec"]["hostname"], "db-1");
        assert_eq!(v["spec"]["subdomain"], "db-svc");
        assert_eq!(
            v["spec"]["volumes"],
            serde_json::json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}])
        );
        let c = claims(&s, 1);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].metadata.name.as_deref(), Some("data-db-1"));
        assert_eq!(c[0].metadata.labels.as_ref().unwrap()["app"], "db");
    }
}
