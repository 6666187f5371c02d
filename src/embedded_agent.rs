//! `k3rs server`'s embedded agent (unless `--disable-agent`), as k3s runs one: the server's own
//! node joins this server over loopback with the cluster's agent token and then runs like
//! `k3rs agent` (kubelet on the supervised containerd, proxy), so one command gives a working
//! single-node cluster.
//!
//! The token comes from `<data-dir>/server/agent-token`, which the server writes while it
//! starts; joining is retried every second until the API server answers. The node's
//! control-plane role labels, which NodeRestriction does not let a node set on itself, are set
//! by the server with its admin credentials once the node is registered (as k3s does).

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use k3rs_agent::node_agent::AgentConfig;

use crate::node_flags::{Join, NodeFlags};

const RETRY: Duration = Duration::from_secs(1);
/// The longest pause between attempts to label the node.
const LABEL_RETRY_MAX: Duration = Duration::from_secs(30);

/// Starts the agent of this server's node; it ends when `stop` is cancelled.
pub fn spawn(flags: NodeFlags, join: Join, stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        tokio::select! {
            _ = run(flags, join, stop.clone()) => {}
            _ = stop.cancelled() => {}
        }
    })
}

async fn run(flags: NodeFlags, mut join: Join, stop: CancellationToken) {
    let token_file = join.data_dir.join("server/agent-token");
    join.token = loop {
        match std::fs::read_to_string(&token_file) {
            Ok(text) => match k3rs_agent::join::token::parse(&text) {
                Ok(token) => break Some(token),
                Err(e) => tracing::warn!("embedded agent: {}: {e}", token_file.display()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("embedded agent: {}: {e}", token_file.display()),
        }
        tokio::time::sleep(RETRY).await;
    };
    let data_dir = join.data_dir.clone();
    let cfg = match flags.agent_config(join) {
        // The server says READY=1 itself, once this node is Ready (`ready_notify`).
        Ok(cfg) => AgentConfig {
            notify_ready: false,
            ..cfg
        },
        Err(e) => {
            tracing::error!("embedded agent: {e}; the server runs without its node");
            return;
        }
    };
    let labels = label_control_plane(data_dir, cfg.node.name.clone());
    let until = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = labels => {}
            _ = until.cancelled() => {}
        }
    });
    loop {
        match k3rs_agent::node_agent::run(cfg.clone(), stop.clone()).await {
            Ok(()) => return,
            Err(e) => tracing::info!("embedded agent: joining this server: {e}; retrying"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Sets the control-plane (and, as k3s, master) role labels on this server's node once it is
/// registered, retrying with a doubling pause (1 s up to 30 s) until that succeeds.
async fn label_control_plane(data_dir: std::path::PathBuf, node: String) {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, Patch, PatchParams};
    let labels = serde_json::json!({"metadata": {"labels": {
        "node-role.kubernetes.io/control-plane": "true",
        "node-role.kubernetes.io/master": "true",
    }}});
    let kubeconfig = k3rs_apiserver::tokens::client::admin_kubeconfig(&data_dir);
    let mut delay = RETRY;
    loop {
        let result = match k3rs_apiserver::tokens::client::connect(&kubeconfig).await {
            Ok(client) => {
                let nodes: Api<Node> = Api::all(client);
                let patch = Patch::Merge(&labels);
                nodes
                    .patch(&node, &PatchParams::default(), &patch)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok(()) => return,
            // The node registers a few seconds after the API serves: quiet at first, then loud.
            Err(e) if delay < LABEL_RETRY_MAX => {
                tracing::debug!(node, "labelling the server's node: {e}")
            }
            Err(e) => tracing::warn!(node, "labelling the server's node: {e}; retrying"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(LABEL_RETRY_MAX);
    }
}
