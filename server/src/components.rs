//! The components that run inside `k3rs server` next to the API server and use it like any
//! client, through [`in_process`](crate::apiserver::in_process) clients: the scheduler and the
//! controllers. Each runs until `stop`.
//!
//! The controller manager runs only while this server holds the
//! `kube-system/kube-controller-manager` Lease, so one server of an HA cluster runs it.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::apiserver::in_process;
use crate::auth::{user, UserInfo};
use crate::controllers::Args as ControllerArgs;
use crate::leader_election::{holder_identity, LeaderElector, Timing};

/// Lease the controller manager holds while it runs (kube-controller-manager's).
pub const CONTROLLER_MANAGER_LEASE: &str = "kube-controller-manager";

/// Which in-process components run (k3s's `--disable-controller-manager`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enabled {
    pub controller_manager: bool,
    /// `--kube-controller-manager-arg`s.
    pub controller_args: ControllerArgs,
}

impl Default for Enabled {
    fn default() -> Enabled {
        Enabled {
            controller_manager: true,
            controller_args: ControllerArgs::default(),
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
        tasks.push(tokio::spawn(controller_manager(
            app.clone(),
            enabled.controller_args,
            stop.clone(),
        )));
    }
    tasks
}

/// Competes for the controller manager's Lease and runs the controllers while holding it.
async fn controller_manager(app: axum::Router, args: ControllerArgs, stop: CancellationToken) {
    let args = std::sync::Arc::new(args);
    let client = in_process::client(
        app.clone(),
        UserInfo::authenticated(user::CONTROLLER_MANAGER, Vec::new()),
        "kube-system",
    );
    let elector = LeaderElector::new(
        client,
        "kube-system",
        CONTROLLER_MANAGER_LEASE,
        holder_identity(&crate::identity::hostname()),
        Timing::default(),
    );
    elector
        .run(stop, move |leading| {
            crate::controllers::run(
                app.clone(),
                crate::controllers::CONTROLLERS,
                args.clone(),
                leading,
            )
        })
        .await;
}
