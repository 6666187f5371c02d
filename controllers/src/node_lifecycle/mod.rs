//! The node lifecycle controller (identity `node-controller`, as upstream): every monitor period it checks
//! each Node's heartbeat — its Lease in `kube-node-lease` or its Ready condition's
//! `lastHeartbeatTime` — as observed on this server's clock. A Node silent for longer than
//! `--node-monitor-grace-period` gets all kubelet conditions `Unknown` ([`health`]); the
//! `not-ready`/`unreachable` taints follow its Ready condition and the `memory-pressure`/
//! `disk-pressure`/`pid-pressure` ones its pressure conditions; the pods on a Node that is not
//! Ready get `Ready=False`. Evicting pods from tainted nodes is the
//! [taint eviction controller](super::taint_eviction)'s.
//!
//! A node first seen (or seen again after a restart of this controller) gets a full grace
//! period, as upstream.
//!
//! The taints also follow every change of a Node as it happens (upstream's
//! `doNoScheduleTaintingPass`, run from the node informer's events), not only at the next
//! monitor period: a node that turns Ready is schedulable at once, not up to 5 s later.

pub mod health;

use std::collections::{HashMap, HashSet};
use std::pin::pin;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{informer, SharedInformerFactory};

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "node-controller";
/// Upstream's `--node-monitor-period`.
const MONITOR_PERIOD: Duration = Duration::from_secs(5);

/// The last heartbeat seen per node and when this server saw it change.
#[derive(Default)]
struct Probes(HashMap<String, (Option<String>, Instant)>);

impl Probes {
    /// Records `heartbeat` for `node`; the time it last changed.
    fn observe(&mut self, node: &str, heartbeat: Option<String>, now: Instant) -> Instant {
        let entry = self
            .0
            .entry(node.to_string())
            .or_insert_with(|| (heartbeat.clone(), now));
        if entry.0 != heartbeat {
            *entry = (heartbeat, now);
        }
        entry.1
    }
}

/// The node's heartbeat: its Lease's renewTime, else its Ready condition's heartbeat time.
fn heartbeat(node: &Node, leases: &Store<Lease>) -> Option<String> {
    let name = node.metadata.name.as_deref()?;
    let lease =
        leases.get(&kube::runtime::reflector::ObjectRef::new(name).within("kube-node-lease"));
    let renew = lease
        .and_then(|l| l.spec.clone())
        .and_then(|s| s.renew_time)
        .map(|t| t.0.to_string());
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0.to_string());
    match (renew, ready) {
        (None, None) => None,
        (a, b) => Some(format!(
            "{}|{}",
            a.unwrap_or_default(),
            b.unwrap_or_default()
        )),
    }
}

/// Runs the controller until `stop`, with `grace` as the node monitor grace period and
/// `period` as the monitor period (unset: [`MONITOR_PERIOD`], or a quarter of `grace` when
/// that is shorter).
pub async fn run(
    client: Client,
    informers: SharedInformerFactory,
    grace: Duration,
    period: Option<Duration>,
    stop: CancellationToken,
) {
    let node_informer = informers.informer::<Node>();
    let mut node_changes = pin!(node_informer.changed(taint_inputs));
    let nodes = node_informer.synced_store().await;
    let leases = informer::<Lease>(&informers).await;
    let pods = informer::<Pod>(&informers).await;
    let period = period
        .unwrap_or_else(|| MONITOR_PERIOD.min(grace / 4))
        .max(Duration::from_millis(200));
    let mut probes = Probes::default();
    loop {
        let now = Instant::now();
        let mut not_ready = HashSet::new();
        for node in nodes.state() {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let changed = probes.observe(name, heartbeat(&node, &leases), now);
            let silent = now.duration_since(changed) > grace;
            match monitor(&client, &node, silent).await {
                Ok(true) => {
                    not_ready.insert(name.to_string());
                }
                Ok(false) => {}
                Err(error) => log_failure(&error, &node),
            }
        }
        if !not_ready.is_empty() {
            mark_pods_not_ready(&client, &not_ready, &pods).await;
        }
        let next_pass = now + period;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep_until(next_pass) => break,
                Some(touched) = node_changes.next() => {
                    // The cache's copy: the newest, and absent for a deleted node.
                    let name = touched.metadata.name.as_deref().unwrap_or_default();
                    let Some(node) = nodes.get(&ObjectRef::new(name)) else {
                        continue;
                    };
                    let conditions = conditions_of(&node);
                    if let Err(error) = sync_taints(&client, &node, &conditions).await {
                        log_failure(&error, &node);
                    }
                }
            }
        }
    }
}

/// A failed write is retried by the next event or monitor pass; a conflict left after
/// [`sync_taints`]' second try only means a newer version of the node is on its way.
fn log_failure(error: &kube::Error, node: &Node) {
    match error {
        kube::Error::Api(s) if s.code == 409 => {
            tracing::debug!(%error, node = ?node.metadata.name, "node lifecycle: conflict")
        }
        _ => tracing::info!(%error, node = ?node.metadata.name, "node lifecycle: will retry"),
    }
}

/// What the taints are computed from: a heartbeat alone changes nothing.
fn taint_inputs(node: &Node) -> (Option<Vec<Taint>>, Vec<(String, String)>) {
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone());
    let conditions = conditions_of(node).into_iter();
    (taints, conditions.map(|c| (c.type_, c.status)).collect())
}

fn conditions_of(node: &Node) -> Vec<NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// One node: conditions and taints; true when it is not Ready (its pods are to be marked).
async fn monitor(client: &Client, node: &Node, silent: bool) -> kube::Result<bool> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let api = Api::<Node>::all(client.clone());
    let mut node = std::borrow::Cow::Borrowed(node);
    if silent {
        if let Some(unknown) = health::unknown_conditions(&conditions_of(&node), Timestamp::now()) {
            tracing::info!(node = %name, "node lifecycle: kubelet stopped posting node status");
            let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version},
                               "status": {"conditions": unknown}});
            let written = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            node = std::borrow::Cow::Owned(written);
        }
    }
    let conditions = conditions_of(&node);
    // A node whose kubelet never posted a Ready condition is left alone until the grace
    // period makes it Unknown (upstream taints only on an observed Ready condition).
    if !conditions.iter().any(|c| c.type_ == "Ready") {
        return Ok(false);
    }
    sync_taints(client, &node, &conditions).await?;
    Ok(health::ready_status(&conditions) != "True")
}

/// Writes the node's taints for `conditions` when they differ from its own, conditional on
/// the version they were computed from: a taint someone else added meanwhile is not
/// overwritten. On a conflict the taints are computed once more from the node as it is now.
async fn sync_taints(
    client: &Client,
    node: &Node,
    conditions: &[NodeCondition],
) -> kube::Result<()> {
    let api = Api::<Node>::all(client.clone());
    match write_taints(&api, node, conditions).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let fresh = api.get(name).await?;
            write_taints(&api, &fresh, &conditions_of(&fresh)).await
        }
        other => other,
    }
}

async fn write_taints(
    api: &Api<Node>,
    node: &Node,
    conditions: &[NodeCondition],
) -> kube::Result<()> {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let Some(new) = health::taints_update(taints, conditions, Timestamp::now()) else {
        return Ok(());
    };
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version},
                       "spec": {"taints": new}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// `MarkPodsNotReady` for every node of `nodes` in one walk over the pods (one walk per
/// not-Ready node was pods × nodes per pass, with a copy of every pod's conditions). A failed
/// write is logged and retried at the next pass.
async fn mark_pods_not_ready(client: &Client, nodes: &HashSet<String>, pods: &Store<Pod>) {
    let now = Timestamp::now();
    for pod in pods.state() {
        let Some(patch) = not_ready_patch(&pod, nodes, now) else {
            continue;
        };
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let result = Api::<Pod>::namespaced(client.clone(), ns)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await;
        match result {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => {
                tracing::info!(%error, pod = %name, namespace = %ns, "node lifecycle: will retry marking the pod not Ready");
            }
        }
    }
}

/// The status patch that sets `Ready=False` on `pod` when it is bound to one of `nodes` and
/// has a Ready condition that is not `False` already (conditional on its resourceVersion).
fn not_ready_patch(
    pod: &Pod,
    nodes: &HashSet<String>,
    now: Timestamp,
) -> Option<serde_json::Value> {
    let node = pod.spec.as_ref()?.node_name.as_deref()?;
    if !nodes.contains(node) {
        return None;
    }
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    if ready.status == "False" {
        return None;
    }
    let mut conditions = conditions.clone();
    for c in conditions.iter_mut().filter(|c| c.type_ == "Ready") {
        c.status = "False".into();
        c.last_transition_time = Some(Time(now));
    }
    Some(
        json!({"metadata": {"resourceVersion": pod.metadata.resource_version},
                "status": {"conditions": conditions}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: Option<&str>, ready: Option<&str>) -> Pod {
        let conditions: Vec<_> = [("PodScheduled", "True")]
            .into_iter()
            .chain(ready.map(|r| ("Ready", r)))
            .map(|(t, s)| json!({"type": t, "status": s}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "p", "resourceVersion": "9"},
            "spec": {"containers": [], "nodeName": node},
            "status": {"conditions": conditions}}))
        .unwrap()
    }

    #[test]
    fn only_ready_pods_on_the_not_ready_nodes_are_marked() {
        let nodes: HashSet<String> = ["n1".to_string(), "n2".to_string()].into();
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let patch = not_ready_patch(&pod(Some("n2"), Some("True")), &nodes, now).unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "9");
        assert_eq!(
            patch["status"]["conditions"],
            json!([{"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2023-11-14T22:13:20Z"}])
        );
        assert!(not_ready_patch(&pod(Some("n1"), Some("Unknown")), &nodes, now).is_some());
        for (node, ready) in [
            (Some("n1"), Some("False")),
            (Some("n1"), None),
            (Some("n3"), Some("True")),
            (None, Some("True")),
        ] {
            assert!(
                not_ready_patch(&pod(node, ready), &nodes, now).is_none(),
                "{node:?} {ready:?}"
            );
        }
    }

    #[test]
    fn probe_time_moves_only_when_the_heartbeat_changes() {
        let mut p = Probes::default();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(10);
        let t2 = t0 + Duration::from_secs(20);
        assert_eq!(p.observe("n", Some("a".into()), t0), t0);
        assert_eq!(p.observe("n", Some("a".into()), t1), t0);
        assert_eq!(p.observe("n", Some("b".into()), t2), t2);
        assert_eq!(p.observe("m", None, t1), t1);
    }

    #[test]
    fn a_heartbeat_alone_does_not_wake_the_taint_pass() {
        let node = |heartbeat: &str, status: &str| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": "n"},
                "status": {"conditions": [{"type": "Ready", "status": status,
                                           "lastHeartbeatTime": heartbeat}]}
            }))
            .unwrap()
        };
        let before = node("2026-01-01T00:00:00Z", "True");
        let beat = node("2026-01-01T00:00:10Z", "True");
        let down = node("2026-01-01T00:00:10Z", "False");
        assert_eq!(taint_inputs(&before), taint_inputs(&beat));
        assert_ne!(taint_inputs(&before), taint_inputs(&down));
        let mut tainted = before.clone();
        tainted.spec = Some(
            serde_json::from_value(json!({"taints": [
            {"key": "dedicated", "effect": "NoSchedule"}]}))
            .unwrap(),
        );
        assert_ne!(taint_inputs(&before), taint_inputs(&tainted));
    }
}
