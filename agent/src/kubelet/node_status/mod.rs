//! The kubelet's node object: registers the Node, renews its Lease in `kube-node-lease` every
//! `lease_renew_interval` (10 s) and reports its status, computed every
//! `status_update_frequency` (10 s), when it changed or `status_report_frequency` (5 min,
//! upstream's `nodeStatusReportFrequency`) has passed since the last report. Until the node is
//! first reported Ready, the status is computed every [`FAST_STATUS`] (for at most
//! [`READY_GRACE`] after registration), so a starting node turns Ready as soon as its runtime
//! and network are, not at the next 10 s tick (upstream's `fastNodeStatusUpdate`).
//!
//! Every request is one the Node authorizer and NodeRestriction allow a kubelet for its own
//! node: `create`/`get` of its Node, `patch` of `nodes/status`, `get`/`create`/`patch` of its
//! Lease.
//!
//! # Guarantees
//! - A restart keeps the Node: an existing Node (409 on create) gets its status patched, its
//!   labels and taints are left as they are (flags apply at registration, as in k3s).
//! - Condition transition times are kept while a condition's status does not change.
//! - Stopping ends the heartbeats; the Node and Lease stay, so the node lifecycle controller
//!   sees the node go silent.

pub(crate) mod conditions;
pub(crate) mod cri_health;
pub(crate) mod lease;
pub mod machine;
pub mod node;
pub(crate) mod runtime;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use machine::Machine;
pub use node::NodeConfig;
pub(crate) use runtime::RuntimeHealth;

/// How the node object is kept.
#[derive(Debug, Clone)]
pub(crate) struct NodeStatusConfig {
    pub node: NodeConfig,
    /// The filesystem of this directory is the node's ephemeral storage.
    pub data_dir: PathBuf,
    /// The Lease's `leaseDurationSeconds` (upstream: 40 s).
    pub lease_duration: Duration,
    /// How often the Lease is renewed (upstream: a quarter of the duration).
    pub lease_renew_interval: Duration,
    /// How often the status is computed and, if changed, reported (upstream: 10 s).
    pub status_update_frequency: Duration,
    /// How often the status is reported when nothing changed (upstream: 5 min).
    pub status_report_frequency: Duration,
    /// The pressure the eviction manager reports; `None`: the default thresholds applied to
    /// the machine as observed.
    pub pressure: Option<watch::Receiver<conditions::Pressure>>,
    /// Whether a registration sends `READY=1` to the service manager (`NOTIFY_SOCKET`).
    pub notify_ready: bool,
}

impl NodeStatusConfig {
    /// Upstream's intervals for `node`.
    pub fn new(node: NodeConfig, data_dir: PathBuf) -> NodeStatusConfig {
        NodeStatusConfig {
            node,
            data_dir,
            lease_duration: Duration::from_secs(40),
            lease_renew_interval: Duration::from_secs(10),
            status_update_frequency: Duration::from_secs(10),
            status_report_frequency: Duration::from_secs(300),
            pressure: None,
            notify_ready: true,
        }
    }
}

/// How often the status is computed while the node has not yet been reported Ready
/// (upstream's 100 ms `fastNodeStatusUpdate` tick).
pub const FAST_STATUS: Duration = Duration::from_millis(100);
/// How long after registration the fast status ticks go on at most (upstream's
/// `nodeReadyGracePeriod`).
pub const READY_GRACE: Duration = Duration::from_secs(120);

/// The time until the next status computation: [`FAST_STATUS`] while the node was never
/// reported Ready and `since_registration` is within [`READY_GRACE`], else `every`.
pub fn status_period(ever_ready: bool, since_registration: Duration, every: Duration) -> Duration {
    if ever_ready || since_registration >= READY_GRACE {
        every
    } else {
        FAST_STATUS.min(every)
    }
}

/// Whether `status` says Ready=True.
fn is_ready(status: &NodeStatus) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether a status must be reported: nothing was reported yet, it differs from the last
/// report in more than heartbeat times, or `every` has passed since.
pub(crate) fn report_due(
    last: Option<&(Timestamp, NodeStatus)>,
    new: &NodeStatus,
    now: Timestamp,
    every: Duration,
) -> bool {
    let Some((at, old)) = last else {
        return true;
    };
    let elapsed = now.duration_since(*at);
    if elapsed.is_negative() || elapsed.unsigned_abs() >= every {
        return true;
    }
    let conds = |s: &NodeStatus| s.conditions.clone().unwrap_or_default();
    let without_conditions = |s: &NodeStatus| NodeStatus {
        conditions: None,
        ..s.clone()
    };
    conditions::changed(&conds(old), &conds(new))
        || without_conditions(old) != without_conditions(new)
}

/// Observes the machine and the runtime and builds the status at `now`.
async fn observe(
    cfg: &NodeStatusConfig,
    runtime: &dyn RuntimeHealth,
    previous: &[NodeCondition],
    now: Timestamp,
) -> NodeStatus {
    let m = Machine::observe(&cfg.data_dir);
    let r = runtime.status().await;
    let pressure = match &cfg.pressure {
        Some(p) => *p.borrow(),
        None => conditions::pressure(&m),
    };
    let conds = conditions::conditions(&r, pressure, previous, now);
    node::status(&cfg.node, &m, &r.version, conds)
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

async fn patch_status(
    client: &kube::Client,
    name: &str,
    status: &NodeStatus,
) -> kube::Result<Node> {
    Api::<Node>::all(client.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
}

/// Creates the Node, or reports the status of the existing one; the stored Node.
async fn register(
    client: &kube::Client,
    cfg: &NodeStatusConfig,
    runtime: &dyn RuntimeHealth,
) -> kube::Result<(Node, NodeStatus)> {
    let api: Api<Node> = Api::all(client.clone());
    let now = Timestamp::now();
    let status = observe(cfg, runtime, &[], now).await;
    let obj = node::node_object(&cfg.node, status.clone());
    match api.create(&PostParams::default(), &obj).await {
        Ok(n) => {
            tracing::info!(node = %cfg.node.name, "node registered");
            let stored_conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
            if stored_conditions.is_some_and(|c| !c.is_empty()) {
                return Ok((n, status));
            }
            // The server kept no status from the create: report it at once.
            let n = patch_status(client, &cfg.node.name, &status).await?;
            Ok((n, status))
        }
        Err(e) if is_status(&e, 409) => {
            let stored = api.get(&cfg.node.name).await?;
            let previous = stored
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            let status = observe(cfg, runtime, &previous, now).await;
            let n = patch_status(client, &cfg.node.name, &status).await?;
            tracing::info!(node = %cfg.node.name, "node already registered; status reported");
            Ok((n, status))
        }
        Err(e) => Err(e),
    }
}

/// Sleeps `d`; true if `stop` was cancelled first.
async fn sleep_or_stop(d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = stop.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}

/// `READY=1` to the service manager (systemd `Type=notify`) once the node is registered.
fn notify_ready(name: &str) {
    match k3rs_apimachinery::sd_notify::ready(&format!("node {name} registered")) {
        Ok(true) => tracing::info!(node = %name, "notified the service manager: READY=1"),
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "notifying the service manager (NOTIFY_SOCKET)"),
    }
}

/// Keeps the node object until `stop`, using the latest client of `clients` for each round.
pub(crate) async fn run(
    clients: watch::Receiver<kube::Client>,
    cfg: NodeStatusConfig,
    runtime: Arc<dyn RuntimeHealth>,
    stop: CancellationToken,
) {
    const RETRY: Duration = Duration::from_secs(2);
    let name = cfg.node.name.clone();
    let (uid, first) = loop {
        let client = clients.borrow().clone();
        match register(&client, &cfg, runtime.as_ref()).await {
            Ok((n, status)) => {
                if cfg.notify_ready {
                    notify_ready(&name);
                }
                break (n.metadata.uid.unwrap_or_default(), status);
            }
            Err(e) => tracing::warn!(node = %name, error = %e, "registering the node"),
        }
        if sleep_or_stop(RETRY, &stop).await {
            return;
        }
    };
    let registered = tokio::time::Instant::now();
    let mut ever_ready = is_ready(&first);
    let period = |ever_ready: bool, now: tokio::time::Instant| {
        status_period(ever_ready, now - registered, cfg.status_update_frequency)
    };
    let mut last: Option<(Timestamp, NodeStatus)> = Some((Timestamp::now(), first));
    let mut next_lease = registered;
    let mut next_status = registered + period(ever_ready, registered);
    loop {
        let client = clients.borrow().clone();
        let now_i = tokio::time::Instant::now();
        if now_i >= next_lease {
            next_lease = now_i + cfg.lease_renew_interval;
            if let Err(e) =
                lease::renew(&client, &name, &uid, cfg.lease_duration, Timestamp::now()).await
            {
                tracing::warn!(node = %name, error = %e, "renewing the node lease");
                next_lease = now_i + RETRY;
            }
        }
        if now_i >= next_status {
            next_status = now_i + period(ever_ready, now_i);
            let now = Timestamp::now();
            let previous = last
                .as_ref()
                .and_then(|(_, s)| s.conditions.clone())
                .unwrap_or_default();
            let status = observe(&cfg, runtime.as_ref(), &previous, now).await;
            if report_due(last.as_ref(), &status, now, cfg.status_report_frequency) {
                match patch_status(&client, &name, &status).await {
                    Ok(_) => {
                        if !ever_ready && is_ready(&status) {
                            tracing::info!(node = %name, "node Ready");
                            ever_ready = true;
                            next_status = now_i + period(ever_ready, now_i);
                        }
                        last = Some((now, status));
                    }
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "reporting the node status");
                        next_status = now_i + RETRY;
                    }
                }
            }
        }
        let wake = next_lease.min(next_status);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::runtime::RuntimeStatus;
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn status(r: &RuntimeStatus, now: Timestamp, previous: &[NodeCondition]) -> NodeStatus {
        let cfg = NodeConfig::new("n1", vec!["10.0.0.1".parse().unwrap()]);
        let conds = conditions::conditions(r, Default::default(), previous, now);
        node::status(&cfg, &Machine::default(), &r.version, conds)
    }

    #[test]
    fn the_status_is_computed_fast_until_the_node_was_first_ready() {
        let every = Duration::from_secs(10);
        assert_eq!(status_period(false, Duration::ZERO, every), FAST_STATUS);
        assert_eq!(
            status_period(false, Duration::from_secs(119), every),
            FAST_STATUS
        );
        assert_eq!(
            status_period(false, READY_GRACE, every),
            every,
            "grace over"
        );
        assert_eq!(
            status_period(true, Duration::ZERO, every),
            every,
            "once Ready"
        );
        let tiny = Duration::from_millis(20);
        assert_eq!(status_period(false, Duration::ZERO, tiny), tiny);
    }

    #[test]
    fn reports_on_change_or_after_the_report_frequency() {
        let every = Duration::from_secs(300);
        let t0 = at("2026-01-01T00:00:00Z");
        let down = RuntimeStatus::default();
        let s0 = status(&down, t0, &[]);
        assert!(report_due(None, &s0, t0, every));
        let last = (t0, s0.clone());
        let t1 = at("2026-01-01T00:00:10Z");
        let same = status(&down, t1, s0.conditions.as_deref().unwrap());
        assert!(!report_due(Some(&last), &same, t1, every));
        let t5 = at("2026-01-01T00:05:00Z");
        assert!(report_due(Some(&last), &status(&down, t5, &[]), t5, every));
        let up = RuntimeStatus {
            reachable: true,
            runtime_ready: true,
            network_ready: true,
            version: "containerd://2.0.5".into(),
            ..RuntimeStatus::default()
        };
        assert!(report_due(Some(&last), &status(&up, t1, &[]), t1, every));
    }
}
