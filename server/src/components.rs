//! The components that run inside `k3rs server` next to the API server and use it like any
//! client, each through its own in-process client ([`ClientBuilder`]): the controller
//! manager (controllers, the service-account tokens controller, the CSR approver and signers,
//! the manifests deployer) and the scheduler. Each runs until `stop`.
//!
//! The controllers and the scheduler read through the API server's [`SharedInformerFactory`]
//! ([`k3rs_apiserver::Started::informers`]): one watch and one cache per resource type for
//! the whole process, shared with the API server's RBAC authorizer and admission plugins,
//! listed and watched through the API server's loopback client. A type's watch starts when a
//! reader first asks for it and runs until `stop`, leading or not.
//!
//! The controller manager runs only while this server holds the
//! `kube-system/kube-controller-manager` Lease, the scheduler only while it holds
//! `kube-system/kube-scheduler`, so one server of an HA cluster runs each
//! (`--kube-scheduler-arg leader-elect=false` runs the scheduler without its Lease).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use futures::FutureExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::leader_election::{LeaderElector, Timing};
use k3rs_apimachinery::clients::ClientBuilder;
use k3rs_apimachinery::informers::SharedInformerFactory;
use k3rs_apimachinery::tasks;
use k3rs_apimachinery::users;
use k3rs_auth::serviceaccount::ServiceAccounts;
use k3rs_controllers::Args as ControllerArgs;

/// Lease the controller manager holds while it runs (kube-controller-manager's).
pub const CONTROLLER_MANAGER_LEASE: &str = "kube-controller-manager";
/// Lease the scheduler holds while it runs (kube-scheduler's).
pub const SCHEDULER_LEASE: &str = "kube-scheduler";

/// Which in-process components run (k3s's `--disable-controller-manager`,
/// `--disable-scheduler`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enabled {
    /// Run the controllers (off with `--disable-controller-manager`).
    pub controller_manager: bool,
    /// `--kube-controller-manager-arg`s.
    pub controller_args: ControllerArgs,
    /// Run the scheduler (off with `--disable-scheduler`).
    pub scheduler: bool,
    /// `--kube-scheduler-arg`s (`leader-elect=false`: it runs without the Lease).
    pub scheduler_args: k3rs_scheduler::args::Args,
    /// The manifests dir the controller-manager leader applies ([`k3rs_controllers::deploy`]).
    pub manifests_dir: Option<PathBuf>,
    /// This server's holder identity in the leader elections
    /// ([`crate::leader_election::holder_identity`]).
    pub holder: String,
}

/// What the controller manager needs besides its clients.
#[derive(Debug, Clone)]
pub struct ControllerManager {
    /// Signs legacy service-account token Secrets (the tokens controller).
    pub service_accounts: Option<Arc<ServiceAccounts>>,
    /// The server CA, put into those Secrets.
    pub server_ca_pem: String,
    /// Where the signers' CAs are (`<data-dir>/server/tls`).
    pub tls_dir: PathBuf,
}

/// Starts the `enabled` in-process components, reading through `informers` (the process's
/// started factory); each stops at `stop`.
pub fn spawn(
    clients: Arc<dyn ClientBuilder>,
    informers: SharedInformerFactory,
    enabled: Enabled,
    manager: ControllerManager,
    stop: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let mut running = Vec::new();
    if enabled.controller_manager {
        let informers = informers.clone();
        let args = Arc::new(enabled.controller_args);
        let controllers = clients.clone();
        let manifests = enabled.manifests_dir.clone();
        let elect = lead_while_holding(
            clients.user(users::CONTROLLER_MANAGER, &[], "kube-system"),
            CONTROLLER_MANAGER_LEASE,
            enabled.holder.clone(),
            stop.clone(),
            move |leading| {
                controller_manager(
                    controllers.clone(),
                    informers.clone(),
                    args.clone(),
                    manifests.clone(),
                    &manager,
                    leading,
                )
            },
        );
        running.push(tasks::spawn("controller-manager", elect));
    }
    if enabled.scheduler && !enabled.scheduler_args.leader_elect {
        // kube-scheduler's --leader-elect=false: this server schedules whoever else does.
        let scheduler = clients.user(users::SCHEDULER, &[], "default");
        let informers = informers.clone();
        running.push(tasks::spawn(
            "scheduler",
            tasks::supervise("scheduler", stop.clone(), move |stop| {
                k3rs_scheduler::run(scheduler.clone(), informers.clone(), stop)
            }),
        ));
    } else if enabled.scheduler {
        let scheduler = clients.user(users::SCHEDULER, &[], "default");
        let elect = lead_while_holding(
            clients.user(users::SCHEDULER, &[], "kube-system"),
            SCHEDULER_LEASE,
            enabled.holder.clone(),
            stop.clone(),
            move |leading| {
                let (scheduler, informers) = (scheduler.clone(), informers.clone());
                tasks::supervise("scheduler", leading, move |stop| {
                    k3rs_scheduler::run(scheduler.clone(), informers.clone(), stop)
                })
            },
        );
        running.push(tasks::spawn("scheduler/leader-election", elect));
    }
    running
}

/// Everything the controller manager runs while it leads, until `leading` ends.
fn controller_manager(
    clients: Arc<dyn ClientBuilder>,
    informers: SharedInformerFactory,
    args: Arc<ControllerArgs>,
    manifests: Option<PathBuf>,
    manager: &ControllerManager,
    leading: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    let deploy = manifests.map(|dir| {
        let clients = clients.clone();
        tasks::supervise("controller/deploy", leading.clone(), move |stop| {
            k3rs_controllers::deploy::run(clients.clone(), dir.clone(), stop)
        })
    });
    let run = k3rs_controllers::run(
        clients.clone(),
        informers.clone(),
        k3rs_controllers::CONTROLLERS,
        args,
        leading.clone(),
    );
    let tokens = manager.service_accounts.as_ref().map(|sa| {
        let client = clients.user(users::CONTROLLER_MANAGER, &[], "default");
        let (key, ca) = (sa.key.clone(), manager.server_ca_pem.clone());
        tasks::supervise(
            "controller/serviceaccount-tokens",
            leading.clone(),
            move |stop| {
                let run = k3rs_auth::serviceaccount::tokens_controller::run(
                    client.clone(),
                    key.clone(),
                    ca.clone(),
                );
                async move {
                    tokio::select! {
                        _ = run => {}
                        _ = stop.cancelled() => {}
                    }
                }
            },
        )
    });
    let certificates = match k3rs_controllers::certificates::Signers::load(&manager.tls_dir) {
        Ok(signers) => {
            k3rs_controllers::certificates::spawn(clients.as_ref(), &informers, signers, &leading)
        }
        Err(e) => {
            tracing::error!(error = %e, "loading the CSR signers' CAs; certificates are not signed");
            Vec::new()
        }
    };
    async move {
        let tokens = async move {
            if let Some(tokens) = tokens {
                tokens.await
            }
        };
        let certificates = futures::future::join_all(certificates).map(drop);
        let deploy = async move {
            if let Some(deploy) = deploy {
                deploy.await
            }
        };
        futures::join!(run, deploy, tokens, certificates);
    }
}

/// Competes, with `client`, for the `kube-system/<lease>` Lease as `holder` and runs `lead`
/// while holding it.
async fn lead_while_holding<F, Fut>(
    client: kube::Client,
    lease: &str,
    holder: String,
    stop: CancellationToken,
    lead: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let elector = LeaderElector::new(client, "kube-system", lease, holder, Timing::default());
    elector.run(stop, lead).await;
}

#[cfg(test)]
mod tests {
    /// Every controller the manager starts has its upstream role.
    #[test]
    fn every_controller_has_a_role() {
        let roles = k3rs_auth::rbac::bootstrap::controllers::CONTROLLERS;
        for name in k3rs_controllers::CONTROLLERS.iter().map(|c| c.name) {
            assert!(roles.contains(&name), "{name}");
        }
    }
}
