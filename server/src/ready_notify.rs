//! Tells the service manager when `k3rs server` is ready (systemd's `Type=notify`, through
//! [`k3rs_apimachinery::sd_notify`]): `READY=1` once the API server answers `/readyz` with 200 and,
//! when the server runs its own node (the embedded agent), once that Node reports the `Ready`
//! condition `True` — so `systemctl start k3rs` returns with a cluster that can run pods.

use std::time::Duration;

use k3rs_apimachinery::clients::ClientBuilder;
use k3rs_apimachinery::users;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often `/readyz` (and then the node) is asked until it answers as wanted.
const POLL: Duration = Duration::from_millis(250);

/// How long the node may stay not Ready before the status names why, and how often then.
const SLOW_NODE: Duration = Duration::from_secs(30);

/// Sends a `STATUS=` line (progress while starting, as `systemctl status` shows it) when
/// supervised; a failure is only logged.
pub fn progress(status: &str) {
    tracing::debug!(status, "start progress");
    if let Err(e) = k3rs_apimachinery::sd_notify::status(status) {
        tracing::debug!(error = %e, "notifying the service manager (NOTIFY_SOCKET)");
    }
}

/// Polls `/readyz` through an in-process client until it answers 200, then (with `node`) the
/// Node until it is Ready, then sends `READY=1` (when `NOTIFY_SOCKET` is set). Ends at `stop`
/// without notifying. While waiting, `STATUS=` says for what (and, for a slow node, why).
pub fn spawn(
    clients: &dyn ClientBuilder,
    node: Option<String>,
    stop: &CancellationToken,
) -> JoinHandle<()> {
    let client = clients.user("system:apiserver", &[users::SYSTEM_MASTERS], "default");
    let stop = stop.clone();
    // The embedded node runs in this process: its heartbeats use this clock.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    tokio::spawn(async move {
        progress("waiting for the Kubernetes API to be ready");
        if !poll(&stop, || api_ready(&client)).await {
            return;
        }
        let what = match &node {
            Some(node) => {
                tracing::info!(
                    node,
                    "API server ready; waiting for this server's node to be Ready"
                );
                progress(&format!(
                    "API server ready; waiting for node {node} to be Ready"
                ));
                if !wait_node(&stop, &client, node, since).await {
                    return;
                }
                "API server and node ready"
            }
            None => "API server ready",
        };
        match k3rs_apimachinery::sd_notify::ready(what) {
            Ok(true) => tracing::info!("notified the service manager: READY=1"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "notifying the service manager (NOTIFY_SOCKET)"),
        }
    })
}

/// Calls `check` every [`POLL`] until it is true (`true`) or `stop` is cancelled (`false`).
async fn poll<F, Fut>(stop: &CancellationToken, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if check().await {
            return true;
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// Polls the Node until it is Ready (`true`) or `stop` (`false`); after [`SLOW_NODE`], and
/// every [`SLOW_NODE`] after that, the status and the log say what it is waiting on.
async fn wait_node(
    stop: &CancellationToken,
    client: &kube::Client,
    node: &str,
    since: i64,
) -> bool {
    let started = tokio::time::Instant::now();
    let mut next_report = started + SLOW_NODE;
    loop {
        let state = node_state(client, node, since).await;
        if state == NodeState::Ready {
            return true;
        }
        let now = tokio::time::Instant::now();
        if now >= next_report {
            let status = slow_node_status(node, &state, now - started);
            tracing::warn!("{status}");
            progress(&status);
            next_report = now + SLOW_NODE;
        }
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

async fn api_ready(client: &kube::Client) -> bool {
    match axum::http::Request::get("/readyz").body(Vec::new()) {
        Ok(req) => client.request_text(req).await.is_ok(),
        Err(_) => false,
    }
}

/// Where the embedded node is on its way to Ready.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NodeState {
    /// No Node object (the agent has not registered it) or it could not be read.
    NotRegistered,
    /// Registered; the `Ready` condition's reason and message, if any.
    NotReady(String),
    Ready,
}

async fn node_state(client: &kube::Client, node: &str, since: i64) -> NodeState {
    let Ok(req) = axum::http::Request::get(format!("/api/v1/nodes/{node}")).body(Vec::new()) else {
        return NodeState::NotRegistered;
    };
    match client.request_text(req).await {
        Ok(text) => serde_json::from_str(&text)
            .map(|n| state_of(&n, since))
            .unwrap_or(NodeState::NotRegistered),
        Err(_) => NodeState::NotRegistered,
    }
}

/// The state a Node object shows: its `Ready` condition, counted only when its heartbeat is
/// from this start (in a second after `since`, the start's Unix second: heartbeats have
/// whole seconds, so one in the start's own second may be the previous run's): after a
/// restart the stored Node still shows the previous run's `Ready`, which says nothing about
/// this one.
fn state_of(node: &serde_json::Value, since: i64) -> NodeState {
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    match ready {
        Some(c) if c["status"] == "True" => {
            match k3rs_apimachinery::meta::parse_time(&c["lastHeartbeatTime"]) {
                Some(beat) if beat > since => NodeState::Ready,
                _ => NodeState::NotReady(format!(
                    "Ready only as reported before this start (last heartbeat {})",
                    c["lastHeartbeatTime"].as_str().unwrap_or("unknown")
                )),
            }
        }
        Some(c) => {
            let reason = c["reason"].as_str().unwrap_or_default();
            let message = c["message"].as_str().unwrap_or_default();
            NodeState::NotReady(
                [reason, message]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(": "),
            )
        }
        None => NodeState::NotReady(String::new()),
    }
}

/// The `STATUS=` line for a node that is slow to become Ready.
fn slow_node_status(node: &str, state: &NodeState, waited: Duration) -> String {
    let why = match state {
        NodeState::NotRegistered => "the agent has not registered it yet".to_string(),
        NodeState::NotReady(why) if why.is_empty() => "it reports no Ready condition".to_string(),
        NodeState::NotReady(why) => format!("not Ready: {why}"),
        NodeState::Ready => "Ready".to_string(),
    };
    format!(
        "API server ready; still waiting for node {node} after {}s: {why}",
        waited.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_true_ready_condition_of_this_start_counts() {
        let with = |conditions| json!({"status": {"conditions": conditions}});
        let since = 1_800_000_000; // 2027-01-15T08:00:00Z
        let state_of = |n: &serde_json::Value| super::state_of(n, since);
        assert_eq!(
            state_of(&with(json!([
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2027-01-15T08:00:01Z"},
            ]))),
            NodeState::Ready
        );
        // A heartbeat in the start's own second may be the killed predecessor's last one.
        assert!(matches!(
            state_of(&with(json!([
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2027-01-15T08:00:00Z"},
            ]))),
            NodeState::NotReady(_)
        ));
        // The previous run's Ready, or one without a heartbeat, is not this start's.
        assert_eq!(
            state_of(&with(json!([
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2027-01-15T07:59:59Z"},
            ]))),
            NodeState::NotReady(
                "Ready only as reported before this start (last heartbeat 2027-01-15T07:59:59Z)"
                    .into()
            )
        );
        assert!(matches!(
            state_of(&with(json!([{"type": "Ready", "status": "True"}]))),
            NodeState::NotReady(_)
        ));
        assert_eq!(
            state_of(&with(json!([{"type": "Ready", "status": "False",
                "reason": "KubeletNotReady", "message": "container runtime is down"}]))),
            NodeState::NotReady("KubeletNotReady: container runtime is down".into())
        );
        assert_eq!(
            state_of(&with(json!([{"type": "Ready", "status": "Unknown"}]))),
            NodeState::NotReady(String::new())
        );
        assert_eq!(
            state_of(&with(json!([{"type": "MemoryPressure", "status": "True"}]))),
            NodeState::NotReady(String::new())
        );
        assert_eq!(
            state_of(&json!({"status": {}})),
            NodeState::NotReady(String::new())
        );
        assert_eq!(state_of(&json!({})), NodeState::NotReady(String::new()));
    }

    #[test]
    fn a_slow_node_status_says_why() {
        let wait = Duration::from_secs(61);
        assert_eq!(
            slow_node_status("n1", &NodeState::NotRegistered, wait),
            "API server ready; still waiting for node n1 after 61s: the agent has not registered it yet"
        );
        assert_eq!(
            slow_node_status("n1", &NodeState::NotReady("KubeletNotReady: cni".into()), wait),
            "API server ready; still waiting for node n1 after 61s: not Ready: KubeletNotReady: cni"
        );
        assert!(
            slow_node_status("n1", &NodeState::NotReady(String::new()), wait)
                .ends_with("it reports no Ready condition")
        );
    }
}
