//! Client certificate rotation while the agent runs: sleeps until the identity's rotation
//! deadline, renews it with the node's current identity, and publishes a client built on the
//! new certificate (consumers take the latest from the `watch` channel before each request
//! batch). A failed renewal is retried every 30 s while the old certificate stays in use.

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{renew, Identity, JoinConfig, Layout};

/// Renews `identity` at its deadlines until `stop`, publishing each new client on `clients`.
pub async fn run(
    cfg: JoinConfig,
    identity: Identity,
    clients: watch::Sender<kube::Client>,
    stop: CancellationToken,
) {
    let layout = Layout::new(&cfg.data_dir);
    let mut validity = identity.validity;
    let jitter = super::jitter();
    loop {
        let now = super::unix_now();
        let pause = match renew::decide(Some(validity), now, jitter) {
            renew::Decision::Use { renew_at } => {
                Duration::from_secs((renew_at - now).max(1) as u64)
            }
            _ => {
                let current = clients.borrow().clone();
                let renewed = async {
                    let v = super::request_client_identity(&cfg, &layout, &current, None).await?;
                    Ok::<_, super::Error>((v, super::node_client(&cfg, &layout).await?))
                };
                match renewed.await {
                    Ok((v, client)) => {
                        tracing::info!(node = %cfg.node_name, "node client certificate renewed");
                        validity = v;
                        let _ = clients.send(client);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "renewing the node client certificate");
                        Duration::from_secs(30)
                    }
                }
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}
