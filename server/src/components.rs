//! The components that run inside `k3rs server` next to the API server and use it like any
//! client, through [`in_process`](crate::apiserver::in_process) clients: the scheduler and the
//! controllers. Each runs until `stop`.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Starts every in-process component; the handles are aborted when the API server stops.
pub fn spawn(app: &axum::Router, stop: &CancellationToken) -> Vec<JoinHandle<()>> {
    let _ = (app, stop);
    Vec::new()
}
