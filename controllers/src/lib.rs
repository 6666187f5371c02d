//! kube-controller-manager inside `k3rs server`: the controllers, each started with its own
//! in-process client under upstream's identity for it
//! (`system:serviceaccount:kube-system:<name>`, see
//! [`controller_identity`](crate::apiserver::in_process::controller_identity)) and an
//! [`EventRecorder`] reporting as `<name>`, and the process's [`SharedInformerFactory`] for
//! the caches they read (one watch per resource type, shared with the scheduler). They run
//! while this server holds the `kube-system/kube-controller-manager` Lease (see
//! [`crate::components`]).

pub mod args;
pub(crate) mod backoff;
pub mod certificates;
pub(crate) mod claim;
pub(crate) mod cluster_dns;
pub(crate) mod clusterrole_aggregation;
pub(crate) mod cronjob;
pub(crate) mod daemonset;
pub mod deploy;
pub(crate) mod deployment;
pub(crate) mod disruption;
pub(crate) mod endpoints;
pub(crate) mod endpointslice;
pub(crate) mod expectations;
pub(crate) mod garbage_collector;
pub(crate) mod history;
pub(crate) mod hpa;
pub(crate) mod ingress;
pub(crate) mod job;
pub(crate) mod namespace;
pub(crate) mod node_ipam;
pub(crate) mod node_lifecycle;
pub(crate) mod pacing;
pub(crate) mod pod_gc;
pub(crate) mod pod_index;
pub(crate) mod pod_template;
pub(crate) mod pods;
pub(crate) mod ref_manager;
pub(crate) mod replicaset;
pub(crate) mod resource_quota;
pub(crate) mod root_ca;
pub mod selection;
pub(crate) mod service_account;
pub(crate) mod servicelb;
pub(crate) mod statefulset;
pub(crate) mod taint_eviction;
pub(crate) mod ttl_after_finished;
pub(crate) mod volume;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use kube::runtime::reflector::Store;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

pub use args::Args;
pub use k3rs_apimachinery::events::{EventRecorder, EventType};
pub use k3rs_apimachinery::informers::SharedInformerFactory;
pub use selection::Selection;

use k3rs_apimachinery::clients::ClientBuilder;
use k3rs_apimachinery::informers::Cached;
use k3rs_apimachinery::tasks;

/// What a controller is started with.
#[derive(Clone)]
pub struct Context {
    /// A client acting as the controller's own identity.
    pub client: kube::Client,
    /// Events reported as the controller.
    pub events: EventRecorder,
    /// The caches shared by every controller (and the scheduler) of the process.
    pub informers: SharedInformerFactory,
    /// Cancelled when the controller must stop (leadership lost or server stopping).
    pub stop: CancellationToken,
    /// The controller manager's settings.
    pub args: Arc<Args>,
}

/// A controller the manager starts: its name in `--controllers`, upstream's service account
/// name for it and its entry point, which runs until `Context::stop` is cancelled.
pub struct Descriptor {
    /// The name `--controllers` selects it by (e.g. `replicaset`, `nodeipam`).
    pub controller: &'static str,
    /// Upstream's service account for it in `kube-system` (e.g. `replicaset-controller`):
    /// its client's identity, its events' reporting component and its RBAC role.
    pub name: &'static str,
    /// Runs the controller until `Context::stop` is cancelled.
    pub start: fn(Context) -> BoxFuture<'static, ()>,
}

/// Every controller the manager runs.
pub const CONTROLLERS: &[Descriptor] = &[
    Descriptor {
        controller: "serviceaccount",
        name: service_account::NAME,
        start: |cx| service_account::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "root-ca-cert-publisher",
        name: root_ca::NAME,
        start: |cx| root_ca::run_published(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "resourcequota",
        name: resource_quota::NAME,
        start: |cx| resource_quota::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "namespace",
        name: namespace::NAME,
        start: |cx| namespace::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "garbagecollector",
        name: garbage_collector::NAME,
        start: |cx| garbage_collector::run(cx.client, cx.stop).boxed(),
    },
    Descriptor {
        controller: "endpoint",
        name: endpoints::NAME,
        start: |cx| endpoints::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "endpointslice",
        name: endpointslice::NAME,
        start: |cx| endpointslice::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: cluster_dns::CONTROLLER,
        name: cluster_dns::NAME,
        start: |cx| cluster_dns::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "nodeipam",
        name: node_ipam::NAME,
        start: |cx| node_ipam::run(cx.client, cx.informers, cx.args.cluster_cidr, cx.stop).boxed(),
    },
    Descriptor {
        controller: "nodelifecycle",
        name: node_lifecycle::NAME,
        start: |cx| {
            let (grace, period) = (
                cx.args.node_monitor_grace_period,
                cx.args.node_monitor_period,
            );
            node_lifecycle::run(cx.client, cx.informers, grace, period, cx.stop).boxed()
        },
    },
    Descriptor {
        controller: "taint-eviction-controller",
        name: taint_eviction::NAME,
        start: |cx| taint_eviction::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "podgc",
        name: pod_gc::NAME,
        start: |cx| pod_gc::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "clusterrole-aggregation",
        name: clusterrole_aggregation::CONTROLLER_NAME,
        start: |cx| clusterrole_aggregation::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "ttl-after-finished",
        name: ttl_after_finished::NAME,
        start: |cx| ttl_after_finished::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "replicaset",
        name: "replicaset-controller",
        start: replicaset::start_replicaset,
    },
    Descriptor {
        controller: "replicationcontroller",
        name: "replication-controller",
        start: replicaset::start_replication,
    },
    Descriptor {
        controller: "deployment",
        name: "deployment-controller",
        start: deployment::start,
    },
    Descriptor {
        controller: "cronjob",
        name: cronjob::NAME,
        start: cronjob::start,
    },
    Descriptor {
        controller: "job",
        name: job::NAME,
        start: |cx| job::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: "statefulset",
        name: "statefulset-controller",
        start: statefulset::start,
    },
    Descriptor {
        controller: "daemonset",
        name: daemonset::NAME,
        start: daemonset::start,
    },
    Descriptor {
        controller: "disruption",
        name: disruption::NAME,
        start: disruption::start,
    },
    Descriptor {
        controller: hpa::CONTROLLER,
        name: hpa::NAME,
        start: hpa::start,
    },
    Descriptor {
        controller: servicelb::CONTROLLER,
        name: servicelb::NAME,
        start: |cx| servicelb::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: ingress::CONTROLLER,
        name: ingress::NAME,
        start: |cx| ingress::run(cx.client, cx.informers, cx.stop).boxed(),
    },
    Descriptor {
        controller: volume::binder_shell::CONTROLLER,
        name: volume::binder_shell::NAME,
        start: |cx| volume::binder_shell::run(cx).boxed(),
    },
    Descriptor {
        controller: volume::protection::PVC_CONTROLLER,
        name: volume::protection::PVC_NAME,
        start: |cx| volume::protection::run_claims(cx).boxed(),
    },
    Descriptor {
        controller: volume::protection::PV_CONTROLLER,
        name: volume::protection::PV_NAME,
        start: |cx| volume::protection::run_volumes(cx).boxed(),
    },
    Descriptor {
        controller: volume::local_path_shell::CONTROLLER,
        name: volume::local_path_shell::NAME,
        start: |cx| {
            async move {
                match cx.args.local_storage.clone() {
                    Some(base) => volume::local_path_shell::run(cx, base).await,
                    None => cx.stop.cancelled().await,
                }
            }
            .boxed()
        },
    },
];

/// The `--controllers` names of [`CONTROLLERS`].
pub fn known() -> Vec<&'static str> {
    CONTROLLERS.iter().map(|c| c.controller).collect()
}

/// The context controller `name` starts with: a client of its own identity.
pub fn context(
    clients: &dyn ClientBuilder,
    informers: &SharedInformerFactory,
    name: &str,
    host: &str,
    args: &Arc<Args>,
    stop: CancellationToken,
) -> Context {
    let client = clients.controller(name);
    Context {
        events: EventRecorder::new(client.clone(), name, host),
        informers: informers.clone(),
        client,
        stop,
        args: args.clone(),
    }
}

/// Runs the ones of `controllers` that `args` selects until `stop`, each supervised as task
/// `controller/<its --controllers name>` (e.g. `controller/replicaset`; restarted with backoff when it panics or returns early), then waits
/// for all of them to return.
pub async fn run(
    clients: Arc<dyn ClientBuilder>,
    informers: SharedInformerFactory,
    controllers: &'static [Descriptor],
    args: Arc<Args>,
    stop: CancellationToken,
) {
    let host = k3rs_apimachinery::net::hostname();
    let tasks: Vec<_> = controllers
        .iter()
        .filter(|c| args.controllers.enables(c.controller))
        .map(|c| {
            tracing::info!(controller = c.name, "starting controller");
            let (clients, informers, host, args, stop) = (
                clients.clone(),
                informers.clone(),
                host.clone(),
                args.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                tasks::supervise(&format!("controller/{}", c.controller), stop, move |stop| {
                    let cx = context(clients.as_ref(), &informers, c.name, &host, &args, stop);
                    (c.start)(cx)
                })
                .await
            })
        })
        .collect();
    stop.cancelled().await;
    for t in tasks {
        let _ = t.await;
    }
}

/// How long a failed reconcile waits before it is retried.
pub(crate) const RETRY: Duration = Duration::from_secs(2);

/// A reconcile that could not talk to the API server.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("{op}: {source}")]
    Api {
        op: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// Errors of one sync of a workload controller; the sync is retried.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("cache not ready")]
    CacheNotReady,
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// Wraps a failed request of a sync as [`SyncError::Api`] saying `what` failed.
pub(crate) fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> SyncError {
    let what = what.into();
    move |source| SyncError::Api { what, source }
}

/// The API's message for a failed request: the Status message, as upstream's events and
/// conditions quote it (kube's Display repeats the status around it); otherwise the error
/// itself.
pub(crate) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// The API's status code of a kube error, if it is an API error.
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Whether an error says the namespace is gone or terminating (creates there are pointless).
pub(crate) fn namespace_gone(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            s.code == 404
                || s.details
                    .as_ref()
                    .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
        }
        _ => false,
    }
}

/// Reads `name` afresh, applies `edit` and writes it back with a PUT, to the status
/// subresource for `status`. Upstream's controllers write their objects with update (their
/// RBAC roles grant `update`, not `patch`, on e.g. `deployments` and `statefulsets/status`);
/// a concurrent write makes this fail with 409 Conflict, and the reconcile is retried.
pub(crate) async fn update_fresh<K>(
    api: &Api<K>,
    name: &str,
    status: bool,
    edit: impl FnOnce(&mut K),
) -> kube::Result<K>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + Debug,
{
    let mut obj = api.get(name).await?;
    edit(&mut obj);
    let pp = kube::api::PostParams::default();
    if status {
        api.replace_status(name, &pp, &obj).await
    } else {
        api.replace(name, &pp, &obj).await
    }
}

/// The shared cache of every `K`, once its first list is complete (client-go's
/// `WaitForCacheSync`; see `Informer::synced_store` for why never earlier).
pub(crate) async fn informer<K: Cached>(informers: &SharedInformerFactory) -> Store<K> {
    informers.informer::<K>().synced_store().await
}

/// The shared cache of every `K` once its first list is complete, and the stream of the
/// objects each change touches (deleted ones included), for
/// `Controller::watches_shared_stream`/`owns_shared_stream`.
pub(crate) async fn watched<K: Cached>(
    informers: &SharedInformerFactory,
) -> (
    Store<K>,
    impl futures::Stream<Item = Arc<K>> + Send + 'static,
) {
    let informer = informers.informer::<K>();
    let touched = informer.touched();
    (informer.synced_store().await, touched)
}

/// A controller of every `K` fed by the shared informer of `K` (its synced cache as the
/// controller's store, its changes as the controller's triggers) instead of a watch and a
/// cache of its own, as `Controller::new(Api::all(..), Config::default())` would open: the
/// same objects and the same triggers (every apply, delete and relist), one watch per type
/// for the whole process. Returns once that cache is synced.
pub(crate) async fn shared_controller<K: Cached>(
    informers: &SharedInformerFactory,
) -> kube::runtime::Controller<K> {
    let (store, touched) = watched::<K>(informers).await;
    kube::runtime::Controller::for_shared_stream(touched, store)
}
