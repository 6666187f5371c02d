//! Pod workers (upstream's `podWorkers` and PLEG): one task per pod UID, so a pod's syncs never
//! overlap, woken when the pod changed in the API in what the kubelet acts on
//! ([`super::update::fingerprint`]: not on status writes, the kubelet's own included), when its containers changed in the runtime
//! (a relist every second compares fingerprints), when a back-off may have ended, and
//! periodically (resync). A UID the runtime has but the API does not gets a worker too, which
//! tears its sandboxes and containers down and ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::observe::{relist, Fingerprints};
use super::sync::{Executor, PodState};
use super::update::fingerprint;

/// How often the runtime is relisted.
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// How often a pod is synced when nothing happens.
pub const RESYNC_PERIOD: Duration = Duration::from_secs(10);
/// How soon a pod whose containers wait (back-off, failed pull or mount) is synced again.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Looks a pod up by UID in the API's view (the informer store).
pub type PodLookup = Arc<dyn Fn(&str) -> Option<Arc<Pod>> + Send + Sync>;

struct Worker {
    wake: Arc<Notify>,
    task: JoinHandle<()>,
}

/// What wakes workers: each UID's resourceVersion with its API fingerprint, and its runtime
/// fingerprint, as last seen.
#[derive(Default)]
struct Seen {
    versions: HashMap<String, (String, u64)>,
    runtime: Fingerprints,
}

async fn wait(wake: &Notify, d: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = wake.notified() => true,
        _ = tokio::time::sleep(d) => true,
    }
}

async fn work(
    exec: Arc<Executor>,
    uid: String,
    lookup: PodLookup,
    wake: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut state = PodState::default();
    loop {
        let next = match lookup(&uid) {
            Some(pod) => match exec.sync_pod(&pod, &mut state).await {
                Ok(s) if s.deleted => {
                    // Wait for the informer to drop the pod, so no second worker deletes it.
                    while lookup(&uid).is_some() {
                        if !wait(&wake, RELIST_PERIOD, &stop).await {
                            return;
                        }
                    }
                    continue;
                }
                Ok(s) if s.waiting => RETRY_PERIOD,
                Ok(_) => RESYNC_PERIOD,
                Err(e) => {
                    tracing::warn!(pod = %uid, "sync failed: {e}");
                    RETRY_PERIOD
                }
            },
            None => match exec.clean_up(&uid).await {
                Ok(true) => return,
                Ok(false) => RELIST_PERIOD,
                Err(e) => {
                    tracing::warn!(pod = %uid, "cleaning up: {e}");
                    RETRY_PERIOD
                }
            },
        };
        if !wait(&wake, next, &stop).await {
            return;
        }
    }
}

/// Runs the workers until `stop`: `pods` lists the API's pods of this node (once the informer
/// has synced), `changed` fires when they change.
pub async fn run(
    exec: Arc<Executor>,
    pods: Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>,
    changed: Arc<Notify>,
    stop: CancellationToken,
) {
    let lookup: PodLookup = {
        let pods = pods.clone();
        Arc::new(move |uid: &str| {
            pods()
                .into_iter()
                .find(|p| p.metadata.uid.as_deref() == Some(uid))
        })
    };
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut seen = Seen::default();
    let mut relisted: Option<tokio::time::Instant> = None;
    loop {
        let current: HashMap<String, (String, u64)> = pods()
            .iter()
            .filter_map(|p| {
                let uid = p.metadata.uid.clone()?;
                let version = p.metadata.resource_version.clone().unwrap_or_default();
                // The fingerprint of a version already seen is not computed again.
                let print = match seen.versions.get(&uid) {
                    Some((v, print)) if *v == version => *print,
                    _ => fingerprint(p),
                };
                Some((uid, (version, print)))
            })
            .collect();
        // The runtime is relisted once per period, not on every API event (a burst of pods
        // brings several events per pod and second).
        let runtime = if relisted.is_none_or(|t| t.elapsed() >= RELIST_PERIOD) {
            relisted = Some(tokio::time::Instant::now());
            match relist(&*exec.runtime).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!("relisting the container runtime: {e}");
                    seen.runtime.clone()
                }
            }
        } else {
            seen.runtime.clone()
        };
        workers.retain(|_, w| !w.task.is_finished());
        // A probe result changed: that pod syncs now.
        for uid in exec.probes.take_woken() {
            if let Some(w) = workers.get(&uid) {
                w.wake.notify_one();
            }
        }
        let uids: std::collections::BTreeSet<&String> =
            current.keys().chain(runtime.keys()).collect();
        for uid in uids {
            let print = |m: &HashMap<String, (String, u64)>| m.get(uid).map(|(_, p)| *p);
            let changed_here = print(&current) != print(&seen.versions)
                || runtime.get(uid) != seen.runtime.get(uid);
            match workers.get(uid) {
                Some(w) if changed_here => w.wake.notify_one(),
                Some(_) => {}
                None => {
                    let wake = Arc::new(Notify::new());
                    let task = tokio::spawn(work(
                        exec.clone(),
                        uid.clone(),
                        lookup.clone(),
                        wake.clone(),
                        stop.child_token(),
                    ));
                    workers.insert(uid.clone(), Worker { wake, task });
                }
            }
        }
        seen = Seen {
            versions: current,
            runtime,
        };
        let next_relist = relisted.map_or_else(tokio::time::Instant::now, |t| t + RELIST_PERIOD);
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = changed.notified() => {}
            _ = tokio::time::sleep_until(next_relist) => {}
        }
    }
    for (_, w) in workers {
        let _ = w.task.await;
    }
}
