//! The scheduler (upstream kube-scheduler's default profile), to run inside `k3rs server` as
//! user `system:kube-scheduler` through [`spawn`] (not yet started by
//! [`components::spawn`](crate::components::spawn): that wiring, with leader election and
//! `--disable-scheduler`, comes with its end-to-end test).
//!
//! The decision is pure — [`snapshot`] (nodes with their pods), [`filters`],
//! [`topology_spread`], [`interpod`], [`scores`], [`algorithm`] (filter, score, pick or
//! explain) and [`preemption`] — and the async shell around it ([`queue`], [`cache`],
//! [`shell`]) watches pods and nodes, binds through `pods/binding` and reports with Events and
//! the `PodScheduled` condition.

pub mod algorithm;
pub mod cache;
pub mod filters;
pub mod interpod;
pub mod preemption;
pub mod queue;
pub mod report;
pub mod resources;
pub mod scores;
pub mod selectors;
pub mod shell;
pub mod snapshot;
pub mod topology_spread;

/// The `spec.schedulerName` this scheduler serves (and the Events' source).
pub const SCHEDULER_NAME: &str = "default-scheduler";
/// The user the scheduler acts as (bound by the bootstrap RBAC policy to
/// `system:kube-scheduler`).
pub const USER: &str = "system:kube-scheduler";

/// Starts the scheduler on `app` (an in-process client as [`USER`]) until `stop`.
pub fn spawn(
    app: &axum::Router,
    stop: &tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let user = crate::auth::UserInfo {
        username: USER.into(),
        ..crate::auth::UserInfo::default()
    };
    let client = crate::apiserver::in_process::client(app.clone(), user, "default");
    tokio::spawn(shell::run(client, stop.clone()))
}
