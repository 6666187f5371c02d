//! The disruption controller (upstream's `disruption`): keeps every PodDisruptionBudget's
//! status — expectedPods, desiredHealthy (from minAvailable or maxUnavailable, scaled by the
//! owning controllers' replicas), currentHealthy, disruptionsAllowed, disruptedPods,
//! observedGeneration and the `DisruptionAllowed` condition — which the eviction
//! subresource (`pods/<name>/eviction`, `kubectl drain`) spends.
//!
//! # Guarantees
//! - A budget whose status cannot be computed (a pod's controller not found) allows no
//!   disruption (`SyncFailed`), as upstream's fail-safe.
//! - A recorded disruption stops counting once the pod is gone or after two minutes; the
//!   budget is looked at again then.

pub mod plan;

use crate::backoff::ErrorBackoff;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::{api_err, ref_manager, Context, EventRecorder, EventType, SyncError as Error};
use plan::Scale;

/// Upstream's service account (and event source) name for the controller.
pub const NAME: &str = "disruption-controller";

struct Shared {
    client: kube::Client,
    events: EventRecorder,
    pods: Store<Pod>,
    replica_sets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    stateful_sets: Store<StatefulSet>,
    replication_controllers: Store<ReplicationController>,
}

/// Starts the disruption controller.
pub fn start(ctx: Context) -> BoxFuture<'static, ()> {
    run(ctx).boxed()
}

async fn run(ctx: Context) {
    let backoff = ErrorBackoff::new("disruption");
    let c = &ctx.client;
    let informers = &ctx.informers;
    let (pod_store, pod_events) = super::watched::<Pod>(informers).await;
    let replica_sets = super::informer::<ReplicaSet>(informers).await;
    let deployments = super::informer::<Deployment>(informers).await;
    let stateful_sets = super::informer::<StatefulSet>(informers).await;
    let replication_controllers = super::informer::<ReplicationController>(informers).await;
    let controller = super::shared_controller::<PodDisruptionBudget>(informers).await;
    let budgets = controller.store();
    let shared = Arc::new(Shared {
        client: c.clone(),
        events: ctx.events.clone(),
        pods: pod_store,
        replica_sets,
        deployments,
        stateful_sets,
        replication_controllers,
    });
    backoff
        .drive(
            controller.watches_shared_stream(pod_events, move |pod| budgets_of(&budgets, &pod)),
            reconcile,
            shared,
            ctx.stop,
        )
        .await;
}

/// The budget's selector (`None`, or unparsable: it selects nothing; empty: everything).
fn selector(pdb: &PodDisruptionBudget) -> Option<Selector> {
    let s = pdb.spec.as_ref()?.selector.clone()?;
    Selector::try_from(s).ok()
}

/// The budgets of the pod's namespace that select it.
fn budgets_of(
    budgets: &Store<PodDisruptionBudget>,
    pod: &Pod,
) -> Vec<ObjectRef<PodDisruptionBudget>> {
    let ns = pod.namespace();
    budgets
        .state()
        .iter()
        .filter(|b| b.namespace() == ns)
        .filter(|b| selector(b).is_some_and(|s| s.matches(pod.labels())))
        .map(|b| ObjectRef::from_obj(b.as_ref()))
        .collect()
}

/// A cached object of `store` named by `r` in `ns`, if it is the one `r` refers to.
fn referred<K>(store: &Store<K>, r: &OwnerReference, ns: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .get(&ObjectRef::new(&r.name).within(ns))
        .filter(|o| o.meta().uid.as_deref() == Some(r.uid.as_str()))
}

impl Shared {
    /// Upstream's finders: a ReplicaSet's Deployment (the ReplicaSet itself when it has
    /// none), a ReplicationController, a StatefulSet — with their replicas (default 1).
    fn scale_of(&self, r: &OwnerReference, ns: &str) -> Option<Scale> {
        let replicas = |r: Option<i32>| r.unwrap_or(1);
        match r.kind.as_str() {
            "ReplicaSet" => {
                let rs = referred(&self.replica_sets, r, ns)?;
                match ref_manager::controller_of(&rs.metadata).filter(|o| o.kind == "Deployment") {
                    Some(d) => {
                        let d = referred(&self.deployments, d, ns)?;
                        let replicas = replicas(d.spec.as_ref().and_then(|s| s.replicas));
                        Some((d.uid()?, replicas))
                    }
                    None => Some((rs.uid()?, replicas(rs.spec.as_ref()?.replicas))),
                }
            }
            "ReplicationController" => {
                let rc = referred(&self.replication_controllers, r, ns)?;
                Some((rc.uid()?, replicas(rc.spec.as_ref()?.replicas)))
            }
            "StatefulSet" => {
                let s = referred(&self.stateful_sets, r, ns)?;
                Some((s.uid()?, replicas(s.spec.as_ref()?.replicas)))
            }
            _ => None,
        }
    }

    async fn event(&self, pdb: &PodDisruptionBudget, type_: EventType, reason: &str, msg: &str) {
        self.events
            .publish(&pdb.object_ref(&()), type_, reason, msg);
    }

    async fn write_status(
        &self,
        pdb: &PodDisruptionBudget,
        st: PodDisruptionBudgetStatus,
    ) -> Result<(), Error> {
        let ns = pdb.namespace().unwrap_or_default();
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &ns);
        super::update_fresh(&api, &pdb.name_any(), true, |b| b.status = Some(st))
            .await
            .map_err(api_err(format!(
                "updating status of pdb {}",
                pdb.name_any()
            )))?;
        Ok(())
    }
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, ctx: Arc<Shared>) -> Result<Action, Error> {
    for ready in [
        ctx.replica_sets.wait_until_ready().boxed(),
        ctx.deployments.wait_until_ready().boxed(),
        ctx.stateful_sets.wait_until_ready().boxed(),
        ctx.replication_controllers.wait_until_ready().boxed(),
        ctx.pods.wait_until_ready().boxed(),
    ] {
        ready.await.map_err(|_| Error::CacheNotReady)?;
    }
    let ns = pdb.namespace().unwrap_or_default();
    let sel = selector(&pdb);
    let pods: Vec<Arc<Pod>> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| p.namespace().as_deref() == Some(ns.as_str()))
        .filter(|p| sel.as_ref().is_some_and(|s| s.matches(p.labels())))
        .collect();
    let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    if refs.is_empty() {
        ctx.event(&pdb, EventType::Normal, "NoPods", "No matching pods found")
            .await;
    }
    let now = Timestamp::now();
    let expected = match plan::expected(&pdb, &refs, &|r| ctx.scale_of(r, &ns)) {
        Ok(e) => e,
        Err(message) => {
            let msg = format!("Failed to calculate the number of expected pods: {message}");
            ctx.event(
                &pdb,
                EventType::Warning,
                "CalculateExpectedPodCountFailed",
                &msg,
            )
            .await;
            ctx.write_status(&pdb, plan::fail_safe(&pdb, &message.to_string(), now))
                .await?;
            return Ok(Action::requeue(super::RETRY));
        }
    };
    if !expected.unmanaged.is_empty() {
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| Selector::try_from(s.clone()).ok())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let msg = format!(
            "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
        ctx.event(&pdb, EventType::Warning, "UnmanagedPods", &msg)
            .await;
    }
    let (disrupted, recheck, not_deleted) = plan::disrupted_pods(&pdb, &refs, now);
    for name in not_deleted {
        if let Some(pod) = pods.iter().find(|p| p.name_any() == name) {
            // Upstream's message repeats the namespace where the name belongs.
            let msg = format!("Pod was expected by PDB {ns}/{ns} to be deleted but it wasn't");
            ctx.events
                .publish(&pod.object_ref(&()), EventType::Warning, "NotDeleted", &msg);
        }
    }
    let counts = plan::Counts {
        current_healthy: plan::count_healthy(&refs, &disrupted, now),
        desired_healthy: expected.desired_healthy,
        expected_pods: expected.expected_pods,
        disrupted,
    };
    if let Some(st) = plan::status(&pdb, counts, now) {
        ctx.write_status(&pdb, st).await?;
    }
    Ok(match recheck {
        Some(at) => {
            let wait = at.duration_since(now).as_secs().max(1) as u64;
            Action::requeue(Duration::from_secs(wait))
        }
        None => Action::await_change(),
    })
}
