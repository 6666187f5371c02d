//! The node IPAM controller (upstream's `RangeAllocator`, identity `node-controller`): every Node
//! without `spec.podCIDR` gets the next free `/24` (IPv4; `/64` for IPv6) of
//! `--cluster-cidr` as `spec.podCIDR` and `spec.podCIDRs`. Which ranges are taken is read
//! from the Nodes, so allocations survive restarts and a deleted Node's range is free again.
//! When the cluster CIDR is exhausted the Node gets a `CIDRNotAvailable` event and is retried.

pub mod cidr_set;
pub mod ranges;

use crate::backoff::ErrorBackoff;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::{EventRecorder, EventType, SharedInformerFactory};
use ipnet::IpNet;
use k3rs_apimachinery::informers::{read, Shared};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::{Client, Resource};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "node-controller";
/// How soon a node that found no free range is tried again.
const EXHAUSTED_RETRY: Duration = Duration::from_secs(30);
/// How many nodes' ranges are set at once (upstream's `cidrUpdateWorkers`).
const UPDATE_WORKERS: u16 = 30;

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
    /// choice at a time ([`choose`]), the API calls concurrently.
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
    // Woken only when a node needs a range (first sight, or a change in that), not by each
    // status write of every node.
    let needing = informer.changed(|n: &Node| needs_range(n));
    let ranges = informer.index::<ranges::Ranges>().await;
    // Bounded, as upstream's CIDR update workers: thousands of nodes joining at once are
    // thousands of reconciles, and kube-runtime's runner polls every one in flight on each
    // wake-up (O(n²) CPU at 5,000 nodes).
    let controller = Controller::for_shared_stream(needing, informer.synced_store().await)
        .with_config(controller::Config::default().concurrency(UPDATE_WORKERS));
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

/// Whether `node` is to be given a range: it holds none and is not being deleted.
fn needs_range(node: &Node) -> bool {
    ranges::of(node).is_empty() && node.metadata.deletion_timestamp.is_none()
}

async fn reconcile(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if !needs_range(&node) {
        return Ok(Action::await_change());
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let cidr = match choose(&ctx, &name) {
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
    };
    // The range stays given to this node while the patch is under way (and after a failed
    // one, for the retry), so other nodes' allocations go on meanwhile.
    let patch = json!({"spec": {"podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()]}});
    Api::<Node>::all(ctx.client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::Patch(name.clone(), e))?;
    Ok(Action::await_change())
}

/// The range for node `name` (see [`choose_in`]). Only this choice is serialized, not the
/// API call that sets it (which one at a time held every other node's allocation behind a
/// round trip: minutes for 5,000 joining nodes, with thousands of reconciles waiting).
fn choose(ctx: &Ctx, name: &str) -> Result<IpNet, cidr_set::Error> {
    let mut assigned = ctx.assigned.lock().unwrap_or_else(PoisonError::into_inner);
    read(&ctx.ranges, |view| {
        choose_in(&mut assigned, view, ctx.cluster, ctx.mask, name)
    })
}

/// The range for node `name`, recorded in `assigned` (ranges given out that `view` may not
/// show yet) before it is returned: the one it was given before, else the lowest free
/// `/mask` of `cluster` that neither `view` nor `assigned` holds. Entries `view` has caught
/// up with (the node shows a range, or is gone) are forgotten first.
///
/// `view` is the nodes' ranges as the events seen so far show them (those that triggered
/// this sync included): no pass over every node per allocation (O(nodes²) for a cluster's
/// first nodes, minutes of CPU at 5,000 nodes).
fn choose_in(
    assigned: &mut BTreeMap<String, IpNet>,
    view: &ranges::Ranges,
    cluster: IpNet,
    mask: u8,
    name: &str,
) -> Result<IpNet, cidr_set::Error> {
    assigned.retain(|n, _| view.without_range(n));
    if let Some(c) = assigned.get(name) {
        return Ok(*c);
    }
    let mut used = view.used();
    used.extend(assigned.values().copied());
    let cidr = cidr_set::next_free(cluster, mask, &used)?;
    assigned.insert(name.to_string(), cidr);
    Ok(cidr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::informers::Indexer;
    use kube::runtime::watcher::Event;

    fn node(name: &str, cidrs: &[&str]) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"podCIDRs": cidrs},
            }))
            .unwrap(),
        )
    }

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    /// The view after a complete list of `nodes` (name, ranges).
    fn listed(nodes: &[(&str, &[&str])]) -> ranges::Ranges {
        let mut view = ranges::Ranges::default();
        view.apply(Event::Init);
        for (name, cidrs) in nodes {
            view.apply(Event::InitApply(node(name, cidrs)));
        }
        view.apply(Event::InitDone);
        view
    }

    #[test]
    fn ranges_in_flight_are_never_given_twice() {
        let cluster = net("10.42.0.0/16");
        let mut view = listed(&[("a", &["10.42.0.0/24"]), ("b", &[]), ("c", &[])]);
        let mut assigned = BTreeMap::new();
        // b and c are chosen for before either patch is seen: different ranges, free ones.
        let b = choose_in(&mut assigned, &view, cluster, 24, "b").unwrap();
        let c = choose_in(&mut assigned, &view, cluster, 24, "c").unwrap();
        assert_eq!((b, c), (net("10.42.1.0/24"), net("10.42.2.0/24")));
        // A retry of b (its patch failed, or is not seen yet) sets the same range again.
        assert_eq!(choose_in(&mut assigned, &view, cluster, 24, "b"), Ok(b));
        // Once the view shows b's range, the entry is forgotten; the range stays taken.
        view.apply(Event::Apply(node("b", &["10.42.1.0/24"])));
        view.apply(Event::Apply(node("d", &[])));
        let d = choose_in(&mut assigned, &view, cluster, 24, "d").unwrap();
        assert_eq!(d, net("10.42.3.0/24"));
        assert_eq!(assigned.keys().collect::<Vec<_>>(), ["c", "d"]);
        // A deleted node's pending range is free again.
        view.apply(Event::Delete(node("c", &[])));
        view.apply(Event::Apply(node("e", &[])));
        let e = choose_in(&mut assigned, &view, cluster, 24, "e").unwrap();
        assert_eq!(e, net("10.42.2.0/24"));
    }

    #[test]
    fn an_exhausted_cluster_records_nothing() {
        let cluster = net("10.42.0.0/24");
        let view = listed(&[("a", &["10.42.0.0/24"]), ("b", &[])]);
        let mut assigned = BTreeMap::new();
        assert!(choose_in(&mut assigned, &view, cluster, 24, "b").is_err());
        assert!(assigned.is_empty());
    }

    #[test]
    fn only_nodes_without_a_range_and_not_deleting_need_one() {
        assert!(needs_range(&node("a", &[])));
        assert!(!needs_range(&node("a", &["10.42.0.0/24"])));
        let mut deleting = (*node("a", &[])).clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!needs_range(&deleting));
    }
}
