//! The kubelet serving certificate (`serving-kubelet.crt`/`.key`): requested with the node's
//! own identity for the signer `kubernetes.io/kubelet-serving`, SANs = node name and
//! addresses. The server approves it once the node's Node object has those names and
//! addresses (as k3s issues serving certificates to its agents; an administrator may still
//! approve by hand, `kubectl certificate approve`), and it is renewed past its rotation
//! deadline. The kubelet API ([`crate::kubelet::server`]) serves with it.
//!
//! # Guarantees
//! - The pair is written only once issued, key first; a stored pair that is still valid and
//!   before its deadline is kept (no request).
//! - [`run`] retries a request that was not issued in time with a fresh one, until `stop`.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{csr, files, renew, Error, JoinConfig, Layout, Validity};

/// The stored serving pair's validity, if usable.
pub fn stored_validity(layout: &Layout) -> Option<Validity> {
    let cert = files::read_optional(&layout.serving_cert()).ok()??;
    let key = files::read_optional(&layout.serving_key()).ok()??;
    csr::validity_of_pair(&cert, &key).ok()
}

/// Requests a serving certificate with `client` (the node) and stores it.
pub async fn request(
    cfg: &JoinConfig,
    client: &kube::Client,
    timeout: Duration,
) -> Result<Validity, Error> {
    let layout = Layout::new(&cfg.data_dir);
    let req = csr::generate(csr::Kind::Serving, &cfg.node_name, &cfg.node_ips)?;
    let (name, cert) =
        super::submit_and_wait(client, csr::Kind::Serving, &req.request_pem, None, timeout).await?;
    let validity = csr::validity_of_pair(&cert, req.key_pem.as_bytes())
        .map_err(|source| Error::Issued { name, source })?;
    files::write_pair(
        &layout.serving_cert(),
        &cert,
        &layout.serving_key(),
        req.key_pem.as_bytes(),
    )?;
    tracing::info!(node = %cfg.node_name, "kubelet serving certificate issued and stored");
    Ok(validity)
}

/// Keeps a serving certificate in place until `stop`: requests one when none is usable, each
/// request waiting `wait` before it is made again, and renews past the rotation deadline.
pub async fn run(
    cfg: JoinConfig,
    client: tokio::sync::watch::Receiver<kube::Client>,
    wait: Duration,
    stop: CancellationToken,
) {
    let layout = Layout::new(&cfg.data_dir);
    let jitter = super::jitter();
    loop {
        let now = super::unix_now();
        let pause = match renew::decide(stored_validity(&layout), now, jitter) {
            renew::Decision::Use { renew_at } => {
                Duration::from_secs((renew_at - now).max(1) as u64)
            }
            renew::Decision::Renew | renew::Decision::Bootstrap => {
                let c = client.borrow().clone();
                let r = tokio::select! {
                    _ = stop.cancelled() => return,
                    r = request(&cfg, &c, wait) => r,
                };
                match r {
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "kubelet serving certificate");
                        Duration::from_secs(5)
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
