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

/// Polls `/readyz` through an in-process client until it answers 200, then (with `node`) the
/// Node until it is Ready, then sends `READY=1` (when `NOTIFY_SOCKET` is set). Ends at `stop`
/// without notifying.
pub fn spawn(
    clients: &dyn ClientBuilder,
    node: Option<String>,
    stop: &CancellationToken,
) -> JoinHandle<()> {
    let client = clients.user("system:apiserver", &[users::SYSTEM_MASTERS], "default");
    let stop = stop.clone();
    tokio::spawn(async move {
        if !poll(&stop, || api_ready(&client)).await {
            return;
        }
        let what = match &node {
            Some(node) => {
                tracing::info!(
                    node,
                    "API server ready; waiting for this server's node to be Ready"
                );
                if !poll(&stop, || node_ready(&client, node)).await {
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

async fn api_ready(client: &kube::Client) -> bool {
    match axum::http::Request::get("/readyz").body(Vec::new()) {
        Ok(req) => client.request_text(req).await.is_ok(),
        Err(_) => false,
    }
}

async fn node_ready(client: &kube::Client, node: &str) -> bool {
    let Ok(req) = axum::http::Request::get(format!("/api/v1/nodes/{node}")).body(Vec::new()) else {
        return false;
    };
    match client.request_text(req).await {
        Ok(text) => serde_json::from_str(&text).is_ok_and(|n| is_ready(&n)),
        Err(_) => false,
    }
}

/// Whether a Node object has the `Ready` condition with status `True`.
fn is_ready(node: &serde_json::Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

#[cfg(test)]
mod tests {
    use super::is_ready;
    use serde_json::json;

    #[test]
    fn only_a_true_ready_condition_counts() {
        let with = |conditions| json!({"status": {"conditions": conditions}});
        assert!(is_ready(&with(json!([
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "True"},
        ]))));
        assert!(!is_ready(&with(
            json!([{"type": "Ready", "status": "False"}])
        )));
        assert!(!is_ready(&with(
            json!([{"type": "Ready", "status": "Unknown"}])
        )));
        assert!(!is_ready(&with(
            json!([{"type": "MemoryPressure", "status": "True"}])
        )));
        assert!(!is_ready(&json!({"status": {}})));
        assert!(!is_ready(&json!({})));
    }
}
