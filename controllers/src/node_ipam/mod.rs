//! The node IPAM controller (upstream's `RangeAllocator`, identity `node-controller`): every Node
//! without `spec.podCIDR` gets the next free `/24` (IPv4; `/64` for IPv6) of
//! `--cluster-cidr` as `spec.podCIDR` and `spec.podCIDRs`. Which ranges are taken is read
//! from the Nodes, so allocations survive restarts and a deleted Node's range is free again.
//! When the cluster CIDR is exhausted the Node gets a `CIDRNotAvailable` event and is retried.

pub mod cidr_set;
pub mod ranges;

use crate::backoff::ErrorBackoff;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::{EventRecorder, EventType, SharedInformerFactory};
use ipnet::IpNet;
use k3rs_apimachinery::informers::{read, Shared};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Client, Resource};
use serde_json::json;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "node-controller";
/// How soon a node that found no free range is tried again.
const EXHAUSTED_RETRY: Duration = Duration::from_secs(30);

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("setting the pod CIDR of node {0}: {1}")]
    Patch(String, #[source] kube::Error),
}

struct Ctx {
    client: Client,
    /// The ranges the nodes hold, as far as the node events seen so far show.
    ranges: Shared<ranges::Ranges>,
    cluster: IpNet,
    mask: u8,
    recorder: EventRecorder,
    /// Ranges given out that the node cache may not show yet (node name → CIDR); one
    /// allocation at a time.
    assigned: Mutex<BTreeMap<String, IpNet>>,
}

/// Runs the controller for `cluster_cidr` until `stop`.
pub async fn run(
    client: Client,
    informers: SharedInformerFactory,
    cluster_cidr: IpNet,
    stop: CancellationToken,
) {
    let backoff = ErrorBackoff::new("node_ipam");
    let informer = informers.informer::<Node>();
    let touched = informer.touched();
    let ranges = informer.index::<ranges::Ranges>().await;
    let controller = Controller::for_shared_stream(touched, informer.synced_store().await);
    let recorder = EventRecorder::new(
        client.clone(),
        "cidrAllocator",
        &k3rs_apimachinery::net::hostname(),
    );
    let ctx = Arc::new(Ctx {
        client,
        ranges,
        cluster: cluster_cidr.trunc(),
        mask: cidr_set::default_mask(cluster_cidr),
        recorder,
        assigned: Mutex::default(),
    });
    backoff.drive(controller, reconcile, ctx, stop).await;
}

async fn reconcile(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if !ranges::of(&node).is_empty() || node.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut assigned = ctx.assigned.lock().await;
    // The ranges as the node events seen so far show them (those that triggered this sync
    // included): no pass over every node per allocation (O(nodes²) for a cluster's first
    // nodes, minutes of CPU at 5,000 nodes).
    let mut used = read(&ctx.ranges, |r| {
        // Forget what the view now shows (or what a deleted node held).
        assigned.retain(|n, _| r.without_range(n));
        r.used()
    });
    used.extend(assigned.values().copied());
    // A range given out before but not seen yet is set again.
    let cidr = match assigned.get(&name).copied() {
        Some(c) => c,
        None => match cidr_set::next_free(ctx.cluster, ctx.mask, &used) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "node IPAM: no pod CIDR");
                ctx.recorder.publish(
                    &node.object_ref(&()),
                    EventType::Normal,
                    "CIDRNotAvailable",
                    &format!("Node {name} status is now: CIDRNotAvailable"),
                );
                return Ok(Action::requeue(EXHAUSTED_RETRY));
            }
        },
    };
    let patch = json!({"spec": {"podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()]}});
    Api::<Node>::all(ctx.client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::Patch(name.clone(), e))?;
    assigned.insert(name, cidr);
    Ok(Action::await_change())
}
