//! The ReplicaSet and ReplicationController controllers: keep `spec.replicas` pods of the
//! template running, owned through a controller reference, and report their counts in status.
//!
//! # Guarantees
//! - Acts only once the pod cache is synced and holds every pod this controller created or
//!   deleted before ([`Expectations`]), so a slow watch never causes double creation. It
//!   reads its pods from the process's index by controller (its own and the namespace's
//!   orphans, [`PodIndex`]), fed before any pod event reaches a controller.
//! - Creates in slow-start batches (1, 2, 4, …) and stops at the first failing batch; the
//!   failure becomes the `ReplicaFailure` condition and a `FailedCreate` event, and the sync
//!   is retried.
//! - Deletes surplus pods in upstream's order (unscheduled, pending, not ready, ready).
//! - Adopts matching orphans and releases owned pods that stopped matching.
//! - Level-triggered: a restart rebuilds everything from the API.
//! - A sync is followed by a wait of a few times what reading and counting its pods cost
//!   ([`pacing`]): at most a second for a ReplicaSet of tens of thousands of pods,
//!   microseconds for a small one.

pub mod kinds;
pub mod plan;

use crate::backoff::ErrorBackoff;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::{join_all, BoxFuture};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::SelectorExt;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::expectations::Expectations;
use super::pod_index::PodIndex;
use super::ref_manager;
use super::{api_message, claim, pacing, pod_template, pods, Context, EventRecorder, EventType};
use super::{pod_index, SyncError};
use k3rs_apimachinery::informers::{read, Shared as SharedView};
use kinds::Replicated;
use plan::{Manage, ManageError};

/// Errors of one sync; the sync is retried.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("updating status of {key}: {source}")]
    UpdateStatus {
        key: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Claim(#[from] SyncError),
}

/// Starts the ReplicaSet controller.
pub fn start_replicaset(ctx: Context) -> BoxFuture<'static, ()> {
    run::<k8s_openapi::api::apps::v1::ReplicaSet>(ctx).boxed()
}

/// Starts the ReplicationController controller.
pub fn start_replication(ctx: Context) -> BoxFuture<'static, ()> {
    run::<k8s_openapi::api::core::v1::ReplicationController>(ctx).boxed()
}

struct Shared {
    client: kube::Client,
    events: EventRecorder,
    /// The process's pods by controller UID, and the orphans by namespace.
    pods: SharedView<PodIndex>,
    expectations: Mutex<Expectations>,
}

/// Runs the controller for kind `K` until `ctx.stop`.
pub async fn run<K: Replicated>(ctx: Context) {
    let backoff = ErrorBackoff::new(K::CONTROLLER);
    let (pod_index, pod_events) = pod_index::watched(&ctx.informers).await;
    let controller = super::shared_controller::<K>(&ctx.informers).await;
    let owners = controller.store();
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        events: ctx.events.clone(),
        pods: pod_index,
        expectations: Mutex::new(Expectations::default()),
    });
    let after = shared.clone();
    controller
        .watches_shared_stream(pod_events, move |pod| {
            super::claim::owners_of(&owners, &pod, |o: &K| o.view().map(|v| v.selector))
        })
        .graceful_shutdown_on(ctx.stop.cancelled_owned())
        .run(backoff.reconcile(reconcile::<K>), backoff.policy(), shared)
        .for_each(|result| {
            (after.expectations.lock())
                .unwrap_or_else(PoisonError::into_inner)
                .forget_deleted(&result);
            futures::future::ready(())
        })
        .await;
}

async fn reconcile<K: Replicated>(obj: Arc<K>, ctx: Arc<Shared>) -> Result<Action, Error> {
    let Some(view) = obj.view() else {
        return Ok(Action::await_change());
    };
    let ns = obj.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", obj.name_any());
    let uid = obj.uid().unwrap_or_default();
    let deleting = obj.meta().deletion_timestamp.is_some();
    let now = Timestamp::now();

    // Claim the active pods of the namespace: its own and the orphans (from the index, not
    // every pod of the cluster).
    let owner_ref = ref_manager::controller_ref(&K::api_version(&()), &K::kind(&()), obj.meta());
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // What this sync costs in reading and counting pods (not in waiting for the API).
    let scan_started = Instant::now();
    let mut candidates = read(&ctx.pods, |ix| ix.candidates(&uid, &ns));
    candidates.retain(|p| pods::is_active(p));
    let owned = claim::claim_pods(&pod_api, candidates, &owner_ref, deleting, |pod| {
        view.selector.matches(pod.labels())
    })
    .await?;

    let mut cost = scan_started.elapsed();
    let satisfied = ctx
        .expectations
        .lock()
        .expect("expectations lock")
        .satisfied(&key, Instant::now(), |uid| {
            read(&ctx.pods, |ix| ix.seen(uid))
        });
    let mut error = None;
    if satisfied && !deleting {
        let active: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();
        let diff = plan::manage(view.replicas, &active, &active, now);
        error = apply(&ctx, obj.as_ref(), &key, &view, &owner_ref, diff)
            .await
            .map(|message| ManageError {
                reason: plan::failure_reason(active.len(), view.replicas),
                message,
            });
    }

    let count_started = Instant::now();
    let old = obj.rs_status();
    let owned_refs: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();
    let template_labels = view
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let status = plan::status(
        &plan::StatusInput {
            old: &old,
            generation: obj.meta().generation,
            min_ready_seconds: view.min_ready_seconds,
            template_labels: &template_labels,
            pods: &owned_refs,
            error: error.as_ref(),
        },
        now,
    );
    cost += count_started.elapsed();
    if status != old {
        let mut updated = (*obj).clone();
        updated.set_rs_status(status.clone());
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
        api.replace_status(&obj.name_any(), &PostParams::default(), &updated)
            .await
            .map_err(|source| Error::UpdateStatus {
                key: key.clone(),
                source,
            })?;
    }
    // Events that arrive meanwhile are handled by one next sync (see `pacing`).
    tokio::time::sleep(pacing::wait_after(cost)).await;
    if error.is_some() {
        return Ok(Action::requeue(Duration::from_secs(10)));
    }
    // Pods that are ready but not yet available become so after minReadySeconds.
    let wait = owned_refs
        .iter()
        .map(|p| pods::seconds_until_available(p, view.min_ready_seconds, now))
        .max()
        .unwrap_or(0);
    if wait > 0 {
        return Ok(Action::requeue(Duration::from_secs(wait as u64)));
    }
    Ok(Action::await_change())
}

/// Carries out `diff`; the message of the first failure, if any.
async fn apply<K: Replicated>(
    ctx: &Shared,
    obj: &K,
    key: &str,
    view: &kinds::View,
    owner_ref: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    diff: Manage,
) -> Option<String> {
    let ns = obj.namespace().unwrap_or_default();
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let regarding = obj.object_ref(&());
    match diff {
        Manage::Nothing => None,
        Manage::Create(n) => {
            let pod = pod_template::pod_from_template(
                &view.template,
                &ns,
                &pod_template::pods_prefix(&obj.name_any()),
                owner_ref.clone(),
            );
            let pp = PostParams::default();
            for batch in plan::slow_start_batches(n) {
                let results = join_all((0..batch).map(|_| pod_api.create(&pp, &pod))).await;
                let mut failure = None;
                for r in results {
                    match r {
                        Ok(created) => {
                            ctx.expectations.lock().expect("expectations lock").created(
                                key,
                                created.uid().unwrap_or_default(),
                                Instant::now(),
                            );
                            let msg = format!("Created pod: {}", created.name_any());
                            ctx.events.publish(
                                &regarding,
                                EventType::Normal,
                                "SuccessfulCreate",
                                &msg,
                            );
                        }
                        Err(e) => {
                            let msg = api_message(&e);
                            ctx.events.publish(
                                &regarding,
                                EventType::Warning,
                                "FailedCreate",
                                &format!("Error creating: {msg}"),
                            );
                            failure.get_or_insert(msg);
                        }
                    }
                }
                if failure.is_some() {
                    return failure;
                }
            }
            None
        }
        Manage::Delete(names) => {
            let uids: Vec<Option<String>> = read(&ctx.pods, |ix| {
                names.iter().map(|n| ix.uid_of(&ns, n)).collect()
            });
            let dp = DeleteParams::default();
            let results = join_all(names.iter().map(|n| pod_api.delete(n, &dp))).await;
            let mut failure = None;
            for ((name, uid), r) in names.iter().zip(uids).zip(results) {
                match r {
                    Ok(_) => {
                        if let Some(uid) = uid {
                            ctx.expectations.lock().expect("expectations lock").deleted(
                                key,
                                uid,
                                Instant::now(),
                            );
                        }
                        let msg = format!("Deleted pod: {name}");
                        ctx.events
                            .publish(&regarding, EventType::Normal, "SuccessfulDelete", &msg);
                    }
                    Err(e) if gone(&e) => {}
                    Err(e) => {
                        let msg = api_message(&e);
                        ctx.events.publish(
                            &regarding,
                            EventType::Warning,
                            "FailedDelete",
                            &format!("Error deleting: {msg}"),
                        );
                        failure.get_or_insert(msg);
                    }
                }
            }
            failure
        }
    }
}

/// 404: deleted meanwhile.
fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
