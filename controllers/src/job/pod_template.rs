//! The pod a Job creates from its template, as upstream's job controller builds it.

use k3rs_apimachinery::generated_names;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::plan::{COMPLETION_INDEX, TRACKING_FINALIZER};

/// The pod for `job` (with completion `index` for Indexed Jobs): the template's labels,
/// annotations and spec, `generateName` `<job>-` (`<job>-<index>-` when indexed), the Job as
/// controlling owner, and the tracking finalizer. Indexed pods also get the index label and
/// annotation, the hostname `<job>-<index>` (unless the template sets one) and
/// `JOB_COMPLETION_INDEX` from the annotation in every container.
pub fn pod_for(job: &Job, index: Option<i32>) -> Pod {
    let name = job.metadata.name.clone().unwrap_or_default();
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let mut spec: PodSpec = template.spec.unwrap_or_default();
    let generate_name = match index {
        Some(i) => {
            labels.insert(COMPLETION_INDEX.into(), i.to_string());
            annotations.insert(COMPLETION_INDEX.into(), i.to_string());
            if spec.hostname.is_none() {
                spec.hostname = Some(format!("{name}-{i}"));
            }
            let env = EnvVar {
                name: "JOB_COMPLETION_INDEX".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                    }),
                    ..EnvVarSource::default()
                }),
            };
            let containers = spec.containers.iter_mut();
            for c in containers.chain(spec.init_containers.iter_mut().flatten()) {
                let vars = c.env.get_or_insert_with(Vec::new);
                if !vars.iter().any(|v| v.name == env.name) {
                    vars.push(env.clone());
                }
            }
            generated_names::indexed_pod_prefix(&name, i64::from(i))
        }
        None => generated_names::pods_prefix(&name),
    };
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: job.metadata.namespace.clone(),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            finalizers: Some(vec![TRACKING_FINALIZER.into()]),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name,
                uid: job.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(mode: &str) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "pi", "namespace": "ns", "uid": "ju"},
            "spec": {"completionMode": mode, "template": {
                "metadata": {"labels": {"job-name": "pi"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]},
            }},
        }))
        .unwrap()
    }

    #[test]
    fn non_indexed_pods_are_owned_and_tracked() {
        let pod = serde_json::to_value(pod_for(&job("NonIndexed"), None)).unwrap();
        assert_eq!(
            pod["metadata"],
            json!({
                "generateName": "pi-",
                "namespace": "ns",
                "labels": {"job-name": "pi"},
                "finalizers": [TRACKING_FINALIZER],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi",
                    "uid": "ju", "controller": true, "blockOwnerDeletion": true}],
            })
        );
        assert_eq!(pod["spec"]["containers"][0].get("env"), None);
    }

    #[test]
    fn indexed_pods_carry_their_index() {
        let pod = serde_json::to_value(pod_for(&job("Indexed"), Some(3))).unwrap();
        assert_eq!(pod["metadata"]["generateName"], json!("pi-3-"));
        assert_eq!(pod["metadata"]["labels"][COMPLETION_INDEX], json!("3"));
        assert_eq!(pod["metadata"]["annotations"][COMPLETION_INDEX], json!("3"));
        assert_eq!(pod["spec"]["hostname"], json!("pi-3"));
        assert_eq!(
            pod["spec"]["containers"][0]["env"],
            json!([{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}])
        );
    }
}
