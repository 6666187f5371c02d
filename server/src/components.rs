//! The components that run inside `k3rs server` next to the API server and use it like any
//! client, through [`in_process`](crate::apiserver::in_process) clients: the scheduler and the
//! controllers. Each runs until `stop`.
//!
//! The controller manager runs only while this server holds the
//! `kube-system/kube-controller-manager` Lease, the scheduler only while it holds
//! `kube-system/kube-scheduler`, so one server of an HA cluster runs each.

use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::apiserver::in_process;
use crate::controllers::Args as ControllerArgs;
use crate::leader_election::{holder_identity, LeaderElector, Timing};
use k3rs_auth::{user, UserInfo};

/// Lease the controller manager holds while it runs (kube-controller-manager's).
pub const CONTROLLER_MANAGER_LEASE: &str = "kube-controller-manager";
/// Lease the scheduler holds while it runs (kube-scheduler's).
pub const SCHEDULER_LEASE: &str = "kube-scheduler";

/// Which in-process components run (k3s's `--disable-controller-manager`,
/// `--disable-scheduler`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enabled {
    pub controller_manager: bool,
    /// `--kube-controller-manager-arg`s.
    pub controller_args: ControllerArgs,
    pub scheduler: bool,
    /// The manifests dir the controller-manager leader applies ([`crate::deploy`]).
    pub manifests_dir: Option<std::path::PathBuf>,
}

impl Default for Enabled {
    fn default() -> Enabled {
        Enabled {
            controller_manager: true,
            controller_args: ControllerArgs::default(),
            scheduler: true,
            manifests_dir: None,
        }
    }
}

/// Starts the `enabled` in-process components; the handles are aborted when the API server
/// stops.
pub fn spawn(
    app: &axum::Router,
    enabled: Enabled,
    stop: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if enabled.controller_manager {
        let args = std::sync::Arc::new(enabled.controller_args);
        let controllers = app.clone();
        let manifests = enabled.manifests_dir.clone();
        tasks.push(tokio::spawn(lead_while_holding(
            app.clone(),
            user::CONTROLLER_MANAGER,
            CONTROLLER_MANAGER_LEASE,
            stop.clone(),
            move |leading| {
                let deploy = manifests
                    .clone()
                    .map(|dir| crate::deploy::run(controllers.clone(), dir, leading.clone()));
                let run = crate::controllers::run(
                    controllers.clone(),
                    crate::controllers::CONTROLLERS,
                    args.clone(),
                    leading,
                );
                async move {
                    match deploy {
                        Some(deploy) => {
                            futures::join!(run, deploy);
                        }
                        None => run.await,
                    }
                }
            },
        )));
    }
    if enabled.scheduler {
        let scheduler = app.clone();
        tasks.push(tokio::spawn(lead_while_holding(
            app.clone(),
            user::SCHEDULER,
            SCHEDULER_LEASE,
            stop.clone(),
            move |leading| crate::scheduler::run(scheduler.clone(), leading),
        )));
    }
    tasks
}

/// Competes, as `username`, for the `kube-system/<lease>` Lease and runs `lead` while holding
/// it.
async fn lead_while_holding<F, Fut>(
    app: axum::Router,
    username: &str,
    lease: &str,
    stop: CancellationToken,
    lead: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let client = in_process::client(
        app,
        UserInfo::authenticated(username, Vec::new()),
        "kube-system",
    );
    let elector = LeaderElector::new(
        client,
        "kube-system",
        lease,
        holder_identity(&crate::identity::hostname()),
        Timing::default(),
    );
    elector.run(stop, lead).await;
}

/// The tokens controller (legacy service-account token Secrets), as the controller manager.
pub fn spawn_tokens_controller(
    app: &axum::Router,
    sa: &k3rs_auth::serviceaccount::ServiceAccounts,
    ca_pem: &str,
) -> JoinHandle<()> {
    let client = crate::apiserver::in_process::client(
        app.clone(),
        k3rs_auth::UserInfo::authenticated(k3rs_auth::user::CONTROLLER_MANAGER, vec![]),
        "default",
    );
    tokio::spawn(k3rs_auth::serviceaccount::tokens_controller::run(
        client,
        sa.key.clone(),
        ca_pem.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    /// Every controller the manager starts has its upstream role.
    #[test]
    fn every_controller_has_a_role() {
        let roles = k3rs_auth::rbac::bootstrap::controllers::CONTROLLERS;
        for name in crate::controllers::CONTROLLERS.iter().map(|c| c.name) {
            assert!(roles.contains(&name), "{name}");
        }
    }
}
