//! The DaemonSet controller: one pod per eligible node ([`eligibility`]), created with its
//! node pinned through required node affinity and bound by the scheduler; pods on nodes that
//! no longer qualify, surplus pods and finished pods deleted ([`plan`]); RollingUpdate
//! (maxUnavailable, maxSurge) or OnDelete ([`rolling`]); the template history in
//! ControllerRevisions `<set>-<hash>` labelled `controller-revision-hash`, pruned to
//! `revisionHistoryLimit`; and the status counts `kubectl rollout status` reads.
//!
//! # Guarantees
//! - Acts on the pod cache only when it shows every pod this controller created or deleted
//!   ([`Expectations`]); the status is written on every sync.
//! - A failed daemon pod is deleted (and recreated by the next sync) at most once per
//!   backoff step per node ([`backoff`]).
//! - Level-triggered: each sync starts from the cached nodes, pods and revisions.

pub mod backoff;
pub mod eligibility;
pub mod plan;
pub mod rolling;

use crate::backoff::ErrorBackoff;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::{join_all, BoxFuture};
use futures::{FutureExt, StreamExt};
use k3rs_apimachinery::generated_names;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::api_message;
use super::deployment::hash::compute_hash;
use super::expectations::Expectations;
use super::history::{holds, renumber, revision_data};
use super::pod_index::{self, PodIndex};
use super::ref_manager;
use super::replicaset::plan::slow_start_batches;
use super::SyncError as Error;
use super::{api_err, claim, Context, EventRecorder, EventType};
use backoff::Backoff;
use eligibility::REVISION_LABEL;
use k3rs_apimachinery::informers::{read, Shared as SharedView};
use plan::NodeFit;

/// Upstream's service account (and event source) name for the controller.
pub const NAME: &str = "daemon-set-controller";

struct Shared {
    client: kube::Client,
    events: EventRecorder,
    /// The process's pods by controller.
    pods: SharedView<PodIndex>,
    nodes: Store<Node>,
    revisions: Store<ControllerRevision>,
    expectations: Mutex<Expectations>,
    backoff: Mutex<Backoff>,
}

/// Starts the DaemonSet controller.
pub fn start(ctx: Context) -> BoxFuture<'static, ()> {
    run(ctx).boxed()
}

async fn run(ctx: Context) {
    let backoff = ErrorBackoff::new("daemonset");
    let (pod_index, pod_events) = pod_index::watched(&ctx.informers).await;
    let (node_store, node_events) = super::watched::<Node>(&ctx.informers).await;
    let revisions = super::informer::<ControllerRevision>(&ctx.informers).await;
    let controller = super::shared_controller::<DaemonSet>(&ctx.informers).await;
    let sets = controller.store();
    let all_sets = sets.clone();
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        events: ctx.events.clone(),
        pods: pod_index,
        nodes: node_store,
        revisions,
        expectations: Mutex::new(Expectations::default()),
        backoff: Mutex::new(Backoff::default()),
    });
    let after = shared.clone();
    controller
        .watches_shared_stream(pod_events, move |pod| {
            claim::owners_of(&sets, &pod, selector)
        })
        .watches_shared_stream(node_events, move |_node| {
            all_sets
                .state()
                .iter()
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(ctx.stop.cancelled_owned())
        .run(backoff.reconcile(reconcile), backoff.policy(), shared)
        .for_each(|result| {
            (after.expectations.lock())
                .unwrap_or_else(PoisonError::into_inner)
                .forget_deleted(&result);
            futures::future::ready(())
        })
        .await;
}

fn selector(ds: &DaemonSet) -> Option<Selector> {
    Selector::try_from(ds.spec.as_ref()?.selector.clone()).ok()
}

/// One sync of one DaemonSet.
struct Sync<'a> {
    ctx: &'a Shared,
    ds: &'a DaemonSet,
    name: String,
    ns: String,
    key: String,
    pods: Api<Pod>,
    regarding: ObjectReference,
}

async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Shared>) -> Result<Action, Error> {
    ctx.nodes
        .wait_until_ready()
        .await
        .map_err(|_| Error::CacheNotReady)?;
    let ns = ds.namespace().unwrap_or_default();
    let s = Sync {
        ctx: &ctx,
        ds: &ds,
        name: ds.name_any(),
        key: format!("{ns}/{}", ds.name_any()),
        pods: Api::namespaced(ctx.client.clone(), &ns),
        regarding: ds.object_ref(&()),
        ns,
    };
    let Some(sel) = selector(&ds) else {
        return Ok(Action::await_change());
    };
    if sel.selects_all() {
        let msg = "This daemon set is selecting all pods. A non-empty selector is required.";
        s.event(EventType::Warning, "SelectingAll", msg).await;
        return Ok(Action::await_change());
    }
    if ds.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let spec = ds.spec.clone().unwrap_or_default();
    let (current, old_revisions) = s.revisions().await?;
    let hash = current
        .labels()
        .get(REVISION_LABEL)
        .cloned()
        .unwrap_or_default();
    let template_generation = eligibility::template_generation(&ds);
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let strategy = spec.update_strategy.clone().unwrap_or_default();

    let nodes = s.node_fits();
    let mut backing_off = None;
    let satisfied = ctx
        .expectations
        .lock()
        .expect("expectations lock")
        .satisfied(&s.key, Instant::now(), |uid| {
            read(&ctx.pods, |ix| ix.seen(uid))
        });
    if satisfied {
        let owned = s.claim_pods(&sel).await?;
        let refs: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();
        let by_node = plan::pods_by_node(&refs);
        let now = Instant::now();
        let uid = ds.uid().unwrap_or_default();
        let backoff_key = |node: &str| format!("{uid}/{node}");
        let in_backoff = |node: &str| {
            ctx.backoff
                .lock()
                .expect("backoff lock")
                .in_backoff(&backoff_key(node), now)
        };
        let m = plan::manage(
            &nodes,
            &by_node,
            &plan::ManageInput {
                hash: &hash,
                surge: rolling::allows_surge(&strategy),
                min_ready_seconds: min_ready,
                now: Timestamp::now(),
                in_backoff: &in_backoff,
            },
        );
        backing_off = m
            .backing_off
            .iter()
            .filter_map(|n| {
                ctx.backoff
                    .lock()
                    .expect("backoff lock")
                    .remaining(&backoff_key(n), now)
            })
            .min();
        for f in &m.finished {
            let (type_, reason, verb) = if f.succeeded {
                (EventType::Normal, "SucceededDaemonPod", "succeeded")
            } else {
                ctx.backoff
                    .lock()
                    .expect("backoff lock")
                    .next(&backoff_key(&f.node), now);
                (EventType::Warning, "FailedDaemonPod", "failed")
            };
            let msg = format!(
                "Found {verb} daemon pod {}/{} on node {}, will try to {}",
                s.ns,
                f.pod,
                f.node,
                if f.succeeded { "delete it" } else { "kill it" }
            );
            s.event(type_, reason, &msg).await;
        }
        let acted = !m.create.is_empty() || !m.delete.is_empty();
        s.sync_nodes(&m.delete, &m.create, &hash).await?;
        let rolling_update =
            strategy.type_.as_deref().unwrap_or("RollingUpdate") == "RollingUpdate";
        if !acted && rolling_update {
            let budget = rolling::budget(&strategy, &nodes);
            let r = rolling::rolling_update(
                &nodes,
                &by_node,
                budget,
                &rolling::RollingInput {
                    hash: hash.clone(),
                    template_generation,
                    min_ready_seconds: min_ready,
                    now: Timestamp::now(),
                },
            );
            s.sync_nodes(&r.delete, &r.create, &hash).await?;
        }
    }
    s.clean_up_history(old_revisions, spec.revision_history_limit.unwrap_or(10))
        .await;

    // The status from the cache as it is now (upstream reads its listers too).
    let owned = s.owned_pods(&sel);
    let refs: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();
    let old_status = ds.status.clone().unwrap_or_default();
    let st = plan::status(
        &nodes,
        &plan::pods_by_node(&refs),
        &plan::StatusInput {
            old: &old_status,
            generation: ds.meta().generation,
            hash: &hash,
            template_generation,
            min_ready_seconds: min_ready,
            now: Timestamp::now(),
        },
    );
    s.write_status(&old_status, st.clone()).await?;
    let mut after = backing_off;
    if min_ready > 0 && st.number_ready != st.number_available.unwrap_or(0) {
        let d = Duration::from_secs(min_ready as u64);
        after = Some(after.map_or(d, |a| a.min(d)));
    }
    Ok(after.map_or_else(Action::await_change, Action::requeue))
}

fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl Sync<'_> {
    async fn event(&self, type_: EventType, reason: &str, msg: &str) {
        self.ctx.events.publish(&self.regarding, type_, reason, msg);
    }

    /// Every node with whether the daemon pod should run and may stay there.
    fn node_fits(&self) -> Vec<NodeFit> {
        let template = self.ds.spec.clone().unwrap_or_default().template;
        let pod = eligibility::daemon_pod_spec(&template);
        let mut fits: Vec<NodeFit> = self
            .ctx
            .nodes
            .state()
            .into_iter()
            .map(|n| NodeFit {
                name: n.metadata.name.clone().unwrap_or_default(),
                fit: eligibility::node_should_run(&pod, &n),
            })
            .collect();
        fits.sort_by(|a, b| a.name.cmp(&b.name));
        fits
    }

    /// The cached pods this DaemonSet controls (for the status).
    fn owned_pods(&self, sel: &Selector) -> Vec<Arc<Pod>> {
        let uid = self.ds.uid().unwrap_or_default();
        let mut pods = read(&self.ctx.pods, |ix| ix.controlled_by(&uid, &self.ns));
        pods.retain(|p| sel.matches(p.labels()));
        pods
    }

    /// The DaemonSet's pods after adopting matching orphans and releasing non-matching ones.
    async fn claim_pods(&self, sel: &Selector) -> Result<Vec<Arc<Pod>>, Error> {
        let owner = ref_manager::controller_ref("apps/v1", "DaemonSet", &self.ds.metadata);
        let candidates = read(&self.ctx.pods, |ix| ix.candidates(&owner.uid, &self.ns));
        claim::claim_pods(&self.pods, candidates, &owner, false, |pod| {
            sel.matches(pod.labels())
        })
        .await
    }

    /// The revision holding the current template (created, or renumbered as the newest for
    /// a template that came back) and the other revisions the DaemonSet owns (upstream's
    /// `constructHistory`).
    async fn revisions(&self) -> Result<(ControllerRevision, Vec<ControllerRevision>), Error> {
        let template = self.ds.spec.clone().unwrap_or_default().template;
        let uid = self.ds.uid().unwrap_or_default();
        let mut owned: Vec<ControllerRevision> = self
            .ctx
            .revisions
            .state()
            .iter()
            .filter(|cr| cr.namespace().as_deref() == Some(self.ns.as_str()))
            .filter(|cr| ref_manager::controller_of(&cr.metadata).is_some_and(|r| r.uid == uid))
            .map(|cr| (**cr).clone())
            .collect();
        owned.sort_by_key(|cr| cr.revision);
        let max = owned.last().map_or(0, |cr| cr.revision);
        let api: Api<ControllerRevision> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let current = match owned.iter().position(|cr| holds(cr, &template)) {
            Some(i) if owned[i].revision == max => owned.remove(i),
            Some(i) => renumber(&api, &owned.remove(i), max + 1)
                .await
                .map_err(api_err("renumbering controller revision"))?,
            None => self.snapshot(&api, &template, max + 1).await?,
        };
        Ok((current, owned))
    }

    /// Creates the revision `<set>-<hash>` of `template` (upstream's `snapshot`); a name
    /// taken by a different revision bumps `status.collisionCount` and fails the sync.
    async fn snapshot(
        &self,
        api: &Api<ControllerRevision>,
        template: &k8s_openapi::api::core::v1::PodTemplateSpec,
        revision: i64,
    ) -> Result<ControllerRevision, Error> {
        let collision_count = self.ds.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(template, collision_count);
        let name = generated_names::controller_revision_name(&self.name, &hash);
        let mut labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(REVISION_LABEL.into(), hash);
        let cr = ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.ns.clone()),
                labels: Some(labels),
                annotations: self.ds.metadata.annotations.clone(),
                owner_references: Some(vec![ref_manager::controller_ref(
                    "apps/v1",
                    "DaemonSet",
                    &self.ds.metadata,
                )]),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(revision_data(template))),
            revision,
        };
        match api.create(&PostParams::default(), &cr).await {
            Ok(created) => Ok(created),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let existing = api
                    .get(&name)
                    .await
                    .map_err(api_err("reading controller revision"))?;
                let ours = ref_manager::controller_of(&existing.metadata)
                    .is_some_and(|r| Some(&r.uid) == self.ds.metadata.uid.as_ref());
                if ours && holds(&existing, template) {
                    return Ok(existing);
                }
                let sets: Api<DaemonSet> = Api::namespaced(self.ctx.client.clone(), &self.ns);
                super::update_fresh(&sets, &self.name, true, |d| {
                    let st = d.status.get_or_insert_with(Default::default);
                    if st.collision_count == collision_count {
                        st.collision_count = Some(collision_count.unwrap_or(0) + 1);
                    }
                })
                .await
                .map_err(api_err("counting a revision collision"))?;
                Err(Error::Api {
                    what: format!("controller revision {name} exists"),
                    source: kube::Error::Api(e),
                })
            }
            Err(e) => Err(api_err("creating controller revision")(e)),
        }
    }

    /// Deletes `delete` and creates a pod on each of `create` (in slow-start batches),
    /// recording expectations and events as upstream's `syncNodes`.
    async fn sync_nodes(
        &self,
        delete: &[String],
        create: &[String],
        hash: &str,
    ) -> Result<(), Error> {
        let template = self.ds.spec.clone().unwrap_or_default().template;
        let pp = PostParams::default();
        let mut pending = create.iter();
        let mut failure = None;
        for batch in slow_start_batches(create.len()) {
            let nodes: Vec<&String> = pending.by_ref().take(batch).collect();
            let results = join_all(nodes.iter().map(|node| {
                let pod = eligibility::new_pod(self.ds, &template, node, hash);
                let pp = &pp;
                async move { self.pods.create(pp, &pod).await }
            }))
            .await;
            for r in results {
                match r {
                    Ok(created) => {
                        self.ctx
                            .expectations
                            .lock()
                            .expect("expectations lock")
                            .created(&self.key, created.uid().unwrap_or_default(), Instant::now());
                        let msg = format!("Created pod: {}", created.name_any());
                        self.event(EventType::Normal, "SuccessfulCreate", &msg)
                            .await;
                    }
                    Err(e) if super::namespace_gone(&e) => {}
                    Err(e) => {
                        let msg = format!("Error creating: {}", api_message(&e));
                        self.event(EventType::Warning, "FailedCreate", &msg).await;
                        failure.get_or_insert(e);
                    }
                }
            }
            if failure.is_some() {
                break;
            }
        }
        let dp = DeleteParams::default();
        let results = join_all(delete.iter().map(|n| self.pods.delete(n, &dp))).await;
        for (name, r) in delete.iter().zip(results) {
            match r {
                Ok(_) => {
                    let uid = read(&self.ctx.pods, |ix| ix.uid_of(&self.ns, name));
                    if let Some(uid) = uid {
                        self.ctx
                            .expectations
                            .lock()
                            .expect("expectations lock")
                            .deleted(&self.key, uid, Instant::now());
                    }
                    self.event(
                        EventType::Normal,
                        "SuccessfulDelete",
                        &format!("Deleted pod: {name}"),
                    )
                    .await;
                }
                Err(e) if gone(&e) => {}
                Err(e) => {
                    let msg = format!("Error deleting: {}", api_message(&e));
                    self.event(EventType::Warning, "FailedDelete", &msg).await;
                    failure.get_or_insert(e);
                }
            }
        }
        match failure {
            Some(e) => Err(api_err(format!("syncing pods of daemonset {}", self.name))(
                e,
            )),
            None => Ok(()),
        }
    }

    /// Deletes the oldest of `old` past `limit` whose hash no live pod carries (upstream's
    /// `cleanupHistory`).
    async fn clean_up_history(&self, mut old: Vec<ControllerRevision>, limit: i32) {
        let mut excess = old.len() as i64 - i64::from(limit.max(0));
        if excess <= 0 {
            return;
        }
        let uid = self.ds.uid().unwrap_or_default();
        let live: std::collections::HashSet<String> =
            read(&self.ctx.pods, |ix| ix.controlled_by(&uid, &self.ns))
                .iter()
                .filter_map(|p| p.labels().get(REVISION_LABEL).cloned())
                .collect();
        old.sort_by_key(|cr| cr.revision);
        let api: Api<ControllerRevision> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        for cr in old {
            if excess <= 0 {
                break;
            }
            if cr
                .labels()
                .get(REVISION_LABEL)
                .is_some_and(|h| live.contains(h))
            {
                continue;
            }
            if let Err(e) = api.delete(&cr.name_any(), &DeleteParams::default()).await {
                tracing::debug!(error = %e, revision = %cr.name_any(), "deleting revision failed");
            }
            excess -= 1;
        }
    }

    /// Writes `st` unless the stored status already says so for this generation.
    async fn write_status(&self, old: &DaemonSetStatus, st: DaemonSetStatus) -> Result<(), Error> {
        if old == &st {
            return Ok(());
        }
        let sets: Api<DaemonSet> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        super::update_fresh(&sets, &self.name, true, |d| {
            let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
            d.status = Some(DaemonSetStatus {
                collision_count,
                ..st
            });
        })
        .await
        .map_err(api_err(format!(
            "updating status of daemonset {}",
            self.name
        )))?;
        Ok(())
    }
}
