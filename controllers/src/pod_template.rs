//! The pod a workload controller creates from its template (upstream's `GetPodFromTemplate`):
//! the template's labels, annotations, finalizers and spec, a `generateName` of
//! `<controller name>-`, and the controller reference.

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The pod to create in `namespace` from `template`, owned by `owner`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    generate_name: &str,
    owner: OwnerReference,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// `<name>-`, the generateName prefix of a controller's pods (upstream's `getPodsPrefix`).
pub use k3rs_apimachinery::generated_names::pods_prefix;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_copies_the_template_and_carries_the_controller_ref() {
        let template: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"a": "1"}, "name": "ignored"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        }))
        .unwrap();
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-1".into(),
            uid: "u".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let pod = pod_from_template(&template, "prod", &pods_prefix("web-1"), owner);
        assert_eq!(
            serde_json::to_value(&pod).unwrap(),
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"generateName": "web-1-", "namespace": "prod",
                    "labels": {"app": "web"}, "annotations": {"a": "1"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "web-1", "uid": "u", "controller": true,
                        "blockOwnerDeletion": true}]},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            })
        );
    }
}
