//! The taint eviction controller (`taint-eviction-controller`, upstream's NoExecute taint
//! manager): a pod bound to a node with `NoExecute` taints is deleted at once when it does not
//! tolerate one of them, or when the smallest `tolerationSeconds` of the tolerations it uses
//! has passed ([`tolerations::eviction`]). Each eviction is recorded as a
//! `TaintManagerEviction` event on the pod.

pub mod tolerations;

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::{Client, Resource};
use tokio_util::sync::CancellationToken;

use super::{informer, EventRecorder, EventType, SharedInformerFactory};
use tolerations::Eviction;

/// The service account (in kube-system) the controller runs as: upstream's taint eviction
/// controller uses the node controller's identity and role (its events still report as
/// `taint-eviction-controller`).
pub const NAME: &str = "node-controller";
/// How often due evictions are looked for.
const PERIOD: Duration = Duration::from_millis(500);

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let nodes = informer::<Node>(&informers).await;
    let pods = informer::<Pod>(&informers).await;
    let recorder = EventRecorder::new(
        client.clone(),
        "taint-eviction-controller",
        &k3rs_apimachinery::net::hostname(),
    );
    loop {
        // Only nodes with a NoExecute taint can evict; with none (the usual case) no pod is
        // looked at (a pass over every pod twice a second, cloning each one's tolerations,
        // was 4 % of the server's CPU at 30,000 pods).
        let taints: HashMap<String, Vec<Taint>> = nodes
            .state()
            .iter()
            .filter_map(|n| {
                let t = n.spec.as_ref()?.taints.as_ref()?;
                t.iter()
                    .any(|t| t.effect == "NoExecute")
                    .then(|| (n.metadata.name.clone().unwrap_or_default(), t.clone()))
            })
            .collect();
        let now = Timestamp::now();
        let candidates = if taints.is_empty() {
            Vec::new()
        } else {
            pods.state()
        };
        for pod in candidates {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            let Some(node_taints) = taints.get(node) else {
                continue;
            };
            let tolerations = (pod.spec.as_ref()).and_then(|s| s.tolerations.as_deref());
            match tolerations::eviction(tolerations.unwrap_or_default(), node_taints, now) {
                Eviction::At(at) if at <= now => evict(&client, &recorder, &pod).await,
                _ => {}
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(PERIOD) => {}
        }
    }
}

async fn evict(client: &Client, recorder: &EventRecorder, pod: &Pod) {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    tracing::info!(pod = %format!("{ns}/{name}"), "taint eviction: deleting the pod");
    recorder.publish(
        &pod.object_ref(&()),
        EventType::Normal,
        "TaintManagerEviction",
        &format!("Marking for deletion Pod {ns}/{name}"),
    );
    if let Err(error) = Api::<Pod>::namespaced(client.clone(), &ns)
        .delete(&name, &params)
        .await
    {
        tracing::info!(%error, "taint eviction: deleting {ns}/{name}");
    }
}
