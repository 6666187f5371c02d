//! kube-controller-manager inside `k3rs server`: the controllers, each started with its own
//! in-process client under upstream's identity for it
//! (`system:serviceaccount:kube-system:<name>`, see
//! [`controller_identity`](crate::apiserver::in_process::controller_identity)) and an
//! [`EventRecorder`] reporting as `<name>`. They run while this server holds the
//! `kube-system/kube-controller-manager` Lease (see [`crate::components`]).

pub mod events;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use events::{EventRecorder, EventType};

use crate::apiserver::in_process;

/// What a controller is started with.
#[derive(Clone)]
pub struct Context {
    /// A client acting as the controller's own identity.
    pub client: kube::Client,
    /// Events reported as the controller.
    pub events: EventRecorder,
    /// Cancelled when the controller must stop (leadership lost or server stopping).
    pub stop: CancellationToken,
}

/// A controller the manager starts: upstream's service account name for it and its entry
/// point, which runs until `Context::stop` is cancelled.
pub struct Descriptor {
    pub name: &'static str,
    pub start: fn(Context) -> BoxFuture<'static, ()>,
}

/// Every controller the manager runs (the workload controllers come next).
pub const CONTROLLERS: &[Descriptor] = &[];

/// The context controller `name` starts with: a client through `app` as its identity.
pub fn context(app: &axum::Router, name: &str, host: &str, stop: CancellationToken) -> Context {
    let client = in_process::client(
        app.clone(),
        in_process::controller_identity(name),
        "default",
    );
    Context {
        events: EventRecorder::new(client.clone(), name, host),
        client,
        stop,
    }
}

/// Runs `controllers` until `stop`, then waits for all of them to return.
pub async fn run(app: axum::Router, controllers: &[Descriptor], stop: CancellationToken) {
    let host = crate::identity::hostname();
    let tasks: Vec<_> = controllers
        .iter()
        .map(|c| {
            tracing::info!(controller = c.name, "starting controller");
            tokio::spawn((c.start)(context(&app, c.name, &host, stop.clone())))
        })
        .collect();
    stop.cancelled().await;
    for t in tasks {
        let _ = t.await;
    }
}
