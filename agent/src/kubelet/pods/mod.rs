//! The pod executor: runs the pods bound to this node on the container runtime. A thin async
//! shell around the planner ([`crate::kubelet::plan`]):
//!
//! - the pod source: an informer on the pods with `spec.nodeName=<node>` (the Node authorizer
//!   lets a node list and watch those), and one on Services (for the service environment);
//! - [`workers`]: one worker per pod, the runtime relist (PLEG) and the periodic resync;
//! - [`sync`]: one pod's sync — observe ([`observe`]), plan, carry out through CRI
//!   ([`cri_config`]), set up volumes ([`volumes`]), write the status ([`api`]).
//!
//! - probes ([`crate::kubelet::prober`]) and Events ([`crate::kubelet::events`], [`record`]).
//!
//! - with a [`NodeProtection`], the image garbage collector ([`crate::kubelet::image_gc`]) and
//!   the eviction manager ([`crate::kubelet::eviction`]) over the same pods.
//!
//! Not done here: the kubelet API and pod admission (resources, host ports).

pub mod api;
pub mod cgroups;
pub mod cri_config;
pub mod hooks;
pub mod observe;
mod pull;
mod record;
mod start;
pub mod sync;
pub mod update;
pub mod volumes;
pub mod workers;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::cri::{ImageService, RuntimeService};
use crate::kubelet::eviction::{self, NodeProtection};
use crate::kubelet::image_gc::ImageGc;
use crate::kubelet::static_pods;
pub use sync::{Executor, NodeContext};

/// Drives an informer until `stop`, waking `changed` on every event.
async fn drive<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    changed: Arc<Notify>,
    stop: CancellationToken,
) where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let stream = reflector(writer, watcher(api, config).default_backoff());
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            item = stream.next() => match item {
                Some(Ok(_)) => changed.notify_one(),
                Some(Err(e)) => tracing::debug!("informer: {e}"),
                None => return,
            },
        }
    }
}

/// Runs the executor for node `node_name` until `stop`: the API's pods of the node (mirror
/// pods excepted) and the static pods of `manifests` (see [`crate::kubelet::static_pods`]).
pub async fn run(
    client: watch::Receiver<kube::Client>,
    runtime: Arc<dyn RuntimeService>,
    images: Arc<dyn ImageService>,
    node_name: String,
    node: NodeContext,
    manifests: Option<std::path::PathBuf>,
    protection: Option<NodeProtection>,
    stop: CancellationToken,
) {
    let kube = client.borrow().clone();
    // Presence is read before every start decision: asked once per image, not per pod.
    let images: Arc<dyn ImageService> =
        Arc::new(crate::cri::image_presence::ImagePresence::new(images));
    let changed = Arc::new(Notify::new());
    let (events, event_rx) = crate::kubelet::events::Recorder::channel(&node_name);
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(k3rs_apimachinery::events::write(
        client.clone(),
        event_rx,
        stop.clone(),
    ));
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (services, service_writer) = reflector::store::<Service>();
    let fields = format!("spec.nodeName={node_name}");
    tasks.spawn(drive(
        Api::<Pod>::all(kube.clone()),
        watcher::Config::default().fields(&fields),
        pod_writer,
        changed.clone(),
        stop.clone(),
    ));
    tasks.spawn(drive(
        Api::<Service>::all(kube),
        watcher::Config::default(),
        service_writer,
        Arc::new(Notify::new()),
        stop.clone(),
    ));
    let ready = pods.clone();
    tokio::select! {
        _ = stop.cancelled() => return,
        r = ready.wait_until_ready() => if r.is_err() { return },
    }
    tracing::info!(node = %node_name, "pod executor started");
    let probes =
        crate::kubelet::prober::Manager::new(runtime.clone(), events.clone(), changed.clone());
    let exec = Arc::new(Executor {
        probes: Arc::new(probes),
        events: events.clone(),
        runtime: runtime.clone(),
        images: images.clone(),
        api: Arc::new(api::KubeApi {
            client: client.clone(),
        }),
        node,
        backoffs: Default::default(),
        starts: tokio::sync::Semaphore::new(sync::start_concurrency(
            std::thread::available_parallelism().map_or(1, usize::from),
        )),
        services: Box::new(move || services.state().iter().map(|s| (**s).clone()).collect()),
    });
    let statics = static_pods::Source::default();
    if let Some(dir) = manifests {
        tasks.spawn(static_pods::run_source(
            dir,
            node_name.clone(),
            statics.clone(),
            changed.clone(),
            stop.clone(),
        ));
        let api_pods = pods.clone();
        tasks.spawn(static_pods::run_mirrors(
            client.clone(),
            node_name.clone(),
            statics.clone(),
            Arc::new(move || api_pods.state()),
            stop.clone(),
        ));
    }
    let list = Arc::new(move || {
        let api = pods.state();
        let mirrors: Vec<Pod> = api
            .iter()
            .filter(|p| static_pods::is_mirror(p))
            .map(|p| (**p).clone())
            .collect();
        let mut all: Vec<Arc<Pod>> = api
            .into_iter()
            .filter(|p| !static_pods::is_mirror(p))
            .collect();
        all.extend(
            statics
                .pods()
                .iter()
                .map(|s| Arc::new(static_pods::with_mirror_status(s, &mirrors))),
        );
        all
    });
    if let Some(p) = protection {
        let image_gc = Arc::new(ImageGc::new(
            runtime.clone(),
            images.clone(),
            p.image_gc,
            p.image_dir.clone().unwrap_or_else(|| p.node_dir.clone()),
            p.sandbox_image.clone(),
        ));
        tasks.spawn(image_gc.clone().run(stop.clone()));
        let manager = eviction::Manager {
            config: p.eviction,
            runtime: runtime.clone(),
            api: exec.api.clone(),
            events,
            image_gc,
            node_dir: p.node_dir,
            image_dir: p.image_dir,
            pods_dir: exec.node.pods_dir.clone(),
            pod_logs_dir: exec.node.pod_logs_dir.clone(),
            cgroup_root: p.cgroup_root,
            allocatable_memory: p.allocatable_memory,
            pressure: p.pressure,
        };
        tasks.spawn(manager.run(list.clone(), stop.clone()));
    }
    workers::run(exec, list, changed, stop).await;
    while tasks.join_next().await.is_some() {}
}
