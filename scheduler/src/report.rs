//! The scheduler's writes: bindings, Events on pods (`Scheduled`, `FailedScheduling`,
//! `Preempted`), the `PodScheduled=False` condition with `status.nominatedNodeName`, and the
//! deletion of preemption victims.

use k3rs_apimachinery::events::{EventRecorder, EventType};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

fn now() -> String {
    k3rs_apimachinery::meta::now_rfc3339()
}

fn pods(client: &kube::Client, pod: &Pod) -> Api<Pod> {
    Api::namespaced(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    )
}

/// POST `pods/<name>/binding` to `node`.
pub async fn bind(client: &kube::Client, pod: &Pod, node: &str) -> kube::Result<()> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": pod.metadata.namespace, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    pods(client, pod)
        .create_subresource::<_, serde_json::Value>(
            "binding",
            name,
            &PostParams::default(),
            &binding,
        )
        .await
        .map(|_| ())
}

/// VolumeBinding's PreBind: annotates each `(namespace, name)` claim with
/// `volume.kubernetes.io/selected-node: <node>` (a merge patch), for the binder and the
/// provisioner.
pub async fn select_node(
    client: &kube::Client,
    claims: &[(String, String)],
    node: &str,
) -> kube::Result<()> {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let key = k3rs_apimachinery::volume::ANN_SELECTED_NODE;
    for (ns, name) in claims {
        let api: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(client.clone(), ns);
        let patch = json!({"metadata": {"annotations": {key: node}}});
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(())
}

/// Records an Event on `pod` (through the scheduler's recorder, as `default-scheduler`).
pub fn event(events: &EventRecorder, pod: &Pod, type_: EventType, reason: &str, message: &str) {
    let regarding = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        field_path: None,
    };
    events.publish(&regarding, type_, reason, message);
}

/// Sets `PodScheduled=False` (reason `Unschedulable`, `message`) and, when given,
/// `status.nominatedNodeName`, unless the pod already shows exactly that.
pub async fn unschedulable(
    client: &kube::Client,
    pod: &Pod,
    message: &str,
    nominated: Option<&str>,
) -> kube::Result<()> {
    let status = pod.status.as_ref();
    let current = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
    let same_condition = current.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
            && c.message.as_deref() == Some(message)
    });
    let same_nomination =
        nominated.is_none_or(|n| status.and_then(|s| s.nominated_node_name.as_deref()) == Some(n));
    if same_condition && same_nomination {
        return Ok(());
    }
    let mut patch = json!({"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": message, "lastProbeTime": null, "lastTransitionTime": now(),
    }]}});
    if let Some(n) = nominated {
        patch["status"]["nominatedNodeName"] = json!(n);
    }
    let name = pod.metadata.name.as_deref().unwrap_or("");
    pods(client, pod)
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map(|_| ())
}

/// Deletes a preemption victim (with its own grace period) after an Event saying why.
pub async fn preempt(
    client: &kube::Client,
    events: &EventRecorder,
    victim: &Pod,
    preemptor: &Pod,
    node: &str,
) -> kube::Result<()> {
    let uid = preemptor.metadata.uid.as_deref().unwrap_or("");
    let msg = format!("Preempted by pod {uid} on node {node}");
    event(events, victim, EventType::Normal, "Preempted", &msg);
    let name = victim.metadata.name.as_deref().unwrap_or("");
    let dp = DeleteParams {
        preconditions: victim
            .metadata
            .uid
            .clone()
            .map(|uid| kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
        ..DeleteParams::default()
    };
    match pods(client, victim).delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
