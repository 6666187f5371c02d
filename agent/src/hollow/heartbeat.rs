//! One hollow node's life: register the Node, then renew its Lease and report its status until
//! stopped. Stopping ends the heartbeats; the Node and Lease stay (as when a kubelet stops), so
//! the node lifecycle controller sees the node go silent.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::node_spec::{self, HollowNode};
use super::Shared;
use crate::kubelet::node_status::lease;

/// Wait before retrying a failed registration or renewal.
const RETRY: Duration = Duration::from_secs(1);

/// Runs node `node` until `stop`.
pub(crate) async fn run(shared: Shared, node: HollowNode, stop: CancellationToken) {
    let since = Timestamp::now();
    let uid = loop {
        match register(&shared, &node, since).await {
            Ok(uid) => break uid,
            Err(e) => tracing::warn!(node = %node.name, error = %e, "registering the node"),
        }
        if sleep_or_stop(RETRY, &stop).await {
            return;
        }
    };
    tracing::debug!(node = %node.name, "node registered");
    // Spread the nodes' renewals over the interval instead of renewing all at once.
    let interval = shared.cfg.lease_renew_interval;
    let offset = interval.mul_f64((node.index % 1000) as f64 / 1000.0);
    let mut last_report = since;
    let mut wait = offset;
    loop {
        if sleep_or_stop(wait, &stop).await {
            return;
        }
        wait = interval;
        if let Err(e) = renew_lease(&shared, &node, &uid).await {
            tracing::warn!(node = %node.name, error = %e, "renewing the node lease");
            wait = RETRY;
        }
        let now = Timestamp::now();
        let stored = shared.nodes.get(&ObjectRef::new(&node.name));
        let every = shared.cfg.status_report_frequency;
        if node_spec::status_due(stored.as_deref(), last_report, now, every) {
            match report_status(&shared, &node, since, now).await {
                Ok(()) => last_report = now,
                Err(e) => {
                    tracing::warn!(node = %node.name, error = %e, "reporting the node status");
                    wait = RETRY;
                }
            }
        }
    }
}

/// Sleeps `d`; true if `stop` was cancelled first.
async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = stop.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Creates the Node (or, if it exists, reports its status); its UID.
async fn register(shared: &Shared, node: &HollowNode, since: Timestamp) -> kube::Result<String> {
    let api: Api<Node> = Api::all(shared.client.clone());
    let obj = node_spec::node_object(node, &shared.cfg.shape, since);
    let _permit = shared.permits.acquire().await;
    let stored = match api.create(&PostParams::default(), &obj).await {
        Ok(n) => n,
        Err(e) if is_status(&e, 409) => {
            let status = node_spec::node_status(node, &shared.cfg.shape, since, since);
            api.patch_status(&node.name, &PatchParams::default(), &Patch::Merge(status))
                .await?
        }
        Err(e) => return Err(e),
    };
    Ok(stored.metadata.uid.unwrap_or_default())
}

/// Renews the node's Lease, creating it if it does not exist.
async fn renew_lease(shared: &Shared, node: &HollowNode, uid: &str) -> kube::Result<()> {
    let _permit = shared.permits.acquire().await;
    let duration = shared.cfg.lease_duration;
    lease::renew(&shared.client, &node.name, uid, duration, Timestamp::now()).await
}

async fn report_status(
    shared: &Shared,
    node: &HollowNode,
    since: Timestamp,
    now: Timestamp,
) -> kube::Result<()> {
    let api: Api<Node> = Api::all(shared.client.clone());
    let status = node_spec::node_status(node, &shared.cfg.shape, since, now);
    let _permit = shared.permits.acquire().await;
    api.patch_status(&node.name, &PatchParams::default(), &Patch::Merge(status))
        .await?;
    Ok(())
}
