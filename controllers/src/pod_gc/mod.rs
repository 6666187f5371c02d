//! The pod garbage collector (`pod-garbage-collector`): every 20 s (upstream's
//! `gcCheckPeriod`) it force-deletes (grace period 0) what [`plan::plan`] picks — terminated
//! pods over the threshold, pods on nodes that no longer exist (confirmed by a live read), and
//! terminating pods that were never scheduled.

pub mod plan;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Preconditions};
use kube::Client;
use tokio_util::sync::CancellationToken;

use super::{informer, SharedInformerFactory};
use plan::Reason;

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "pod-garbage-collector";
/// Upstream's `gcCheckPeriod`.
const PERIOD: Duration = Duration::from_secs(20);

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let nodes = informer::<Node>(&informers).await;
    let pods = informer::<Pod>(&informers).await;
    let _ = nodes.wait_until_ready().await;
    let _ = pods.wait_until_ready().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(PERIOD) => {}
        }
        let names: BTreeSet<String> = nodes
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let all = pods.state();
        let refs: Vec<&Pod> = all.iter().map(|p| &**p).collect();
        let collect = plan::plan(&refs, &names, plan::DEFAULT_THRESHOLD);
        tracing::debug!(nodes = ?names, pods = all.len(), collect = collect.len(), "pod GC: round");
        for c in collect {
            if c.reason == Reason::Orphaned && !node_gone(&client, &refs, &c.uid).await {
                continue;
            }
            tracing::info!(pod = %format!("{}/{}", c.namespace, c.name), reason = ?c.reason, "pod GC: deleting");
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(c.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            if let Err(error) = Api::<Pod>::namespaced(client.clone(), &c.namespace)
                .delete(&c.name, &params)
                .await
            {
                tracing::info!(%error, "pod GC: deleting {}/{}", c.namespace, c.name);
            }
        }
    }
}

/// Whether the node of the pod with `uid` is confirmed gone (404 on a live read).
async fn node_gone(client: &Client, pods: &[&Pod], uid: &str) -> bool {
    let node = pods
        .iter()
        .find(|p| p.metadata.uid.as_deref() == Some(uid))
        .and_then(|p| p.spec.as_ref()?.node_name.clone());
    let Some(node) = node else { return false };
    matches!(
        Api::<Node>::all(client.clone()).get_opt(&node).await,
        Ok(None)
    )
}
