//! Tells the service manager when `k3rs server` is ready (systemd's `Type=notify`, through
//! [`k3rs_common::sd_notify`]): `READY=1` once the API server answers `/readyz` with 200, as
//! k3s does once its API server is healthy.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often `/readyz` is asked until it answers 200.
const POLL: Duration = Duration::from_millis(250);

/// Polls `/readyz` through the in-process client on `app` until it answers 200, then sends
/// `READY=1` (when `NOTIFY_SOCKET` is set). Ends at `stop` without notifying.
pub fn spawn(app: &axum::Router, stop: &CancellationToken) -> JoinHandle<()> {
    let client = crate::apiserver::in_process::client(
        app.clone(),
        crate::apiserver::in_process::apiserver_identity(),
        "default",
    );
    let stop = stop.clone();
    tokio::spawn(async move {
        loop {
            let req = axum::http::Request::get("/readyz").body(Vec::new());
            let ready = match req {
                Ok(req) => client.request_text(req).await.is_ok(),
                Err(_) => false,
            };
            if ready {
                break;
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
        }
        match k3rs_common::sd_notify::ready("API server ready") {
            Ok(true) => tracing::info!("notified the service manager: READY=1"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "notifying the service manager (NOTIFY_SOCKET)"),
        }
    })
}
