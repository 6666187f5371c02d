//! The scheduler (upstream kube-scheduler's default profile), running inside `k3rs server`
//! as user `system:kube-scheduler` while this server holds the `kube-system/kube-scheduler`
//! Lease (see `components` in the server crate; off with `--disable-scheduler`, without the
//! Lease with `--kube-scheduler-arg leader-elect=false`: [`args`]).
//!
//! The decision is pure — [`snapshot`] (nodes with their pods), [`filters`],
//! [`topology_spread`], [`interpod`], [`scores`], [`algorithm`] (filter, score, pick or
//! explain) and [`preemption`] — and the async shell around it ([`queue`], [`cache`],
//! [`shell`]) watches pods and nodes, binds through `pods/binding` and reports with Events and
//! the `PodScheduled` condition.

pub mod algorithm;
pub mod args;
pub mod cache;
pub mod filters;
pub mod interpod;
pub mod preemption;
pub mod queue;
pub mod report;
pub mod scores;
pub mod shell;
pub mod snapshot;
pub mod topology_spread;
pub mod volume_binding;

/// The `spec.schedulerName` this scheduler serves (and the Events' source).
pub const SCHEDULER_NAME: &str = "default-scheduler";
/// Runs the scheduler with `client` (as `system:kube-scheduler`) until `stop`, reading pods,
/// nodes and storage objects from the process's shared `informers`.
pub async fn run(
    client: kube::Client,
    informers: k3rs_apimachinery::informers::SharedInformerFactory,
    stop: tokio_util::sync::CancellationToken,
) {
    shell::run(client, informers, stop).await
}
