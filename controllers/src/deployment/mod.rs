//! The Deployment controller: rolls a Deployment's pod template out through ReplicaSets
//! named `<deployment>-<pod-template-hash>` (RollingUpdate within maxSurge/maxUnavailable, or
//! Recreate), scales them proportionally when the Deployment is scaled mid-rollout, stops while
//! paused, numbers them with revisions (so `kubectl rollout history/undo` work), removes old
//! ones past `revisionHistoryLimit`, and reports progress in the `Available`/`Progressing`
//! conditions with upstream's reasons. `ScalingReplicaSet` events say what it did.
//!
//! # Guarantees
//! - Every size change keeps `sum(spec.replicas) <= replicas + maxSurge` and only shrinks old
//!   sets by what keeps `replicas - maxUnavailable` pods available (as counted by the sets'
//!   statuses).
//! - Level-triggered: each sync starts from the API's ReplicaSets and pods; a conflicting
//!   write (409) ends the sync, which is retried.

pub mod hash;
pub mod plan;
pub mod revision;
pub mod rolling;
pub mod status;

use crate::backoff::ErrorBackoff;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::api_message;
use super::pod_index::{self, PodIndex};
use super::ref_manager::{self, Claim};
use super::{Context, EventRecorder, EventType};
use k3rs_apimachinery::informers::{read, Shared as SharedView};
use plan::{Scale, Spec};

/// Errors of one sync; the sync is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("caches not ready")]
    CacheNotReady,
    #[error("{what} {name}: {source}")]
    Write {
        what: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

fn write_err(what: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_string();
    move |source| Error::Write { what, name, source }
}

struct Shared {
    client: kube::Client,
    events: EventRecorder,
    sets: Store<ReplicaSet>,
    /// The process's pods by controller.
    pods: SharedView<PodIndex>,
}

/// Starts the Deployment controller.
pub fn start(ctx: Context) -> BoxFuture<'static, ()> {
    run(ctx).boxed()
}

async fn run(ctx: Context) {
    let backoff = ErrorBackoff::new("deployment");
    let (sets, set_events) = super::watched::<ReplicaSet>(&ctx.informers).await;
    let (pods, pod_events) = pod_index::watched(&ctx.informers).await;
    let controller = super::shared_controller::<Deployment>(&ctx.informers).await;
    let deployments = controller.store();
    let sets_for_pods = sets.clone();
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        events: ctx.events.clone(),
        sets,
        pods,
    });
    backoff
        .drive(
            controller
                .watches_shared_stream(set_events, move |rs| deployments_of(&deployments, &rs))
                .watches_shared_stream(pod_events, move |pod| {
                    deployment_of_pod(&sets_for_pods, &pod)
                }),
            reconcile,
            shared,
            ctx.stop,
        )
        .await;
}

/// The Deployment controlling `rs`, or for an orphan every Deployment that selects it.
fn deployments_of(deployments: &Store<Deployment>, rs: &ReplicaSet) -> Vec<ObjectRef<Deployment>> {
    let ns = rs.namespace().unwrap_or_default();
    if let Some(r) = ref_manager::controller_of(&rs.metadata) {
        return if r.kind == "Deployment" {
            vec![ObjectRef::new(&r.name).within(&ns)]
        } else {
            Vec::new()
        };
    }
    deployments
        .state()
        .iter()
        .filter(|d| d.namespace().as_deref() == Some(ns.as_str()))
        .filter(|d| selector(d).is_some_and(|s| s.matches(rs.labels())))
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// The Deployment whose ReplicaSet controls `pod` (Recreate waits for old pods to go).
fn deployment_of_pod(sets: &Store<ReplicaSet>, pod: &Pod) -> Option<ObjectRef<Deployment>> {
    let r = ref_manager::controller_of(&pod.metadata).filter(|r| r.kind == "ReplicaSet")?;
    let ns = pod.namespace().unwrap_or_default();
    let rs = sets.get(&ObjectRef::new(&r.name).within(&ns))?;
    let d = ref_manager::controller_of(&rs.metadata).filter(|r| r.kind == "Deployment")?;
    Some(ObjectRef::new(&d.name).within(&ns))
}

/// The Deployment's selector; `None` when invalid or empty (selecting everything).
fn selector(d: &Deployment) -> Option<Selector> {
    let s = Selector::try_from(d.spec.as_ref()?.selector.clone()).ok()?;
    (!s.selects_all()).then_some(s)
}

/// One sync's working state: the Deployment's ReplicaSets as this sync left them.
struct Sync<'a> {
    ctx: &'a Shared,
    d: &'a Deployment,
    ns: String,
    sets: Api<ReplicaSet>,
    regarding: k8s_openapi::api::core::v1::ObjectReference,
}

async fn reconcile(d: Arc<Deployment>, ctx: Arc<Shared>) -> Result<Action, Error> {
    ctx.sets
        .wait_until_ready()
        .await
        .map_err(|_| Error::CacheNotReady)?;
    let ns = d.namespace().unwrap_or_default();
    let s = Sync {
        ctx: &ctx,
        d: &d,
        sets: Api::namespaced(ctx.client.clone(), &ns),
        regarding: d.object_ref(&()),
        ns,
    };
    let now = Timestamp::now();
    let Some(sel) = selector(&d) else {
        let msg = "This deployment is selecting all pods. A non-empty selector is required.";
        ctx.events
            .publish(&s.regarding, EventType::Warning, "SelectingAll", msg);
        return Ok(Action::await_change());
    };
    let spec = Spec::of(&d);
    let owned = s.claim(&sel).await?;
    let mut status_base = d.status.clone().unwrap_or_default();
    let deadline = d.spec.as_ref().and_then(|s| s.progress_deadline_seconds);

    if d.meta().deletion_timestamp.is_none() {
        paused_conditions(&mut status_base, spec.paused, deadline, now);
    }
    let mut sets: Vec<ReplicaSet> = owned;
    let new_idx = plan::find_new(&d, &sets.iter().collect::<Vec<_>>())
        .and_then(|n| sets.iter().position(|r| r.metadata.uid == n.metadata.uid));
    let old_refs: Vec<&ReplicaSet> = sets
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != new_idx)
        .map(|(_, r)| r)
        .collect();
    let scaling = plan::is_scaling_event(&spec, &sets.iter().collect::<Vec<_>>());
    let new_revision = revision::max_revision(old_refs.iter().copied()) + 1;
    // Only the Recreate strategy waits for old pods (a scan of every pod: not per sync).
    let old_pods_running =
        spec.recreate && s.old_pods_running(&old_refs, new_idx.map(|i| &sets[i]));
    let old_active = old_refs.iter().any(|r| plan::replicas(r) > 0);
    let deleting = d.meta().deletion_timestamp.is_some();

    // The new ReplicaSet: bring its annotations up to date, or create it.
    let mut new_idx = new_idx;
    if !deleting && !spec.paused && !scaling {
        match new_idx {
            Some(i) => {
                if let Some(updated) = s.sync_new(&sets[i], new_revision, &spec).await? {
                    sets[i] = updated;
                }
                if status::has_deadline(deadline)
                    && status::get(&status_base, status::PROGRESSING).is_none()
                {
                    let msg = format!("Found new replica set \"{}\"", sets[i].name_any());
                    status::set(
                        &mut status_base,
                        status::condition(
                            status::PROGRESSING,
                            "True",
                            status::FOUND_NEW_RS,
                            &msg,
                            now,
                        ),
                    );
                }
            }
            None if !spec.recreate || (!old_active && !old_pods_running) => {
                let old: Vec<&ReplicaSet> = sets.iter().collect();
                match s
                    .create_new(&spec, &old, new_revision, &mut status_base, now)
                    .await?
                {
                    Created::Set(rs) => {
                        sets.push(*rs);
                        new_idx = Some(sets.len() - 1);
                    }
                    Created::Retry => {
                        s.write_status(status_base).await?;
                        return Ok(Action::requeue(Duration::from_secs(5)));
                    }
                }
            }
            None => {}
        }
        if let Some(i) = new_idx {
            s.sync_revision_annotation(&sets[i]).await?;
        }
    }

    // Sizes.
    let olds = |sets: &[ReplicaSet], new_idx: Option<usize>| -> Vec<usize> {
        (0..sets.len()).filter(|i| Some(*i) != new_idx).collect()
    };
    let rollout = !deleting && !spec.paused && !scaling;
    let ops: Vec<Scale> = {
        let new = new_idx.map(|i| &sets[i]);
        let old: Vec<&ReplicaSet> = olds(&sets, new_idx).into_iter().map(|i| &sets[i]).collect();
        if deleting {
            Vec::new()
        } else if !rollout {
            let status_replicas = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            plan::proportional(&spec, new, &old, status_replicas)
        } else if spec.recreate {
            plan::recreate(&spec, new, &old, old_pods_running)
        } else {
            new.map(|n| plan::rolling(&spec, n, &old))
                .unwrap_or_default()
        }
    };
    let mut scaled: BTreeMap<String, ReplicaSet> = BTreeMap::new();
    for (name, from, to) in &ops {
        if let Some(rs) = sets.iter().find(|r| r.name_any() == *name) {
            let updated = s.scale(rs, *from, *to, &spec).await?;
            scaled.insert(name.clone(), updated);
        }
    }
    for rs in sets.iter_mut() {
        if let Some(u) = scaled.remove(&rs.name_any()) {
            *rs = u;
        }
    }

    // Status.
    let new = new_idx.map(|i| &sets[i]);
    let old: Vec<&ReplicaSet> = olds(&sets, new_idx).into_iter().map(|i| &sets[i]).collect();
    let counts: Vec<status::RsCounts> = sets.iter().map(rs_counts).collect();
    let new_counts = new.map(rs_counts);
    let mut st = status::calculate(
        &status::Input {
            old: &status_base,
            generation: d.meta().generation,
            replicas: spec.replicas,
            max_unavailable: spec.max_unavailable,
            all: &counts,
            new: new_counts.as_ref(),
        },
        now,
    );
    if rollout {
        let subject = match new {
            Some(n) => format!("ReplicaSet \"{}\"", n.name_any()),
            None => format!("Deployment \"{}\"", d.name_any()),
        };
        let before = d.status.clone().unwrap_or_default();
        status::rollout_conditions(
            &before,
            &mut st,
            spec.replicas,
            d.meta().generation,
            deadline,
            &subject,
            now,
        );
        match replica_failure(new, &old) {
            Some(c) => status::set(&mut st, c),
            None => status::remove(&mut st, status::REPLICA_FAILURE),
        }
    }
    let complete = status::complete(spec.replicas, d.meta().generation, &st);
    if ops.is_empty() && (spec.paused || (rollout && complete)) {
        s.clean_up(&old, &d).await;
    }
    let requeue = if rollout && !complete {
        status::until_deadline(deadline, &st, now)
    } else {
        None
    };
    s.write_status(st).await?;
    Ok(match requeue {
        Some(secs) => Action::requeue(Duration::from_secs(secs as u64)),
        None => Action::await_change(),
    })
}

/// Upstream's `checkPausedConditions`: Progressing Unknown while paused, and once resumed.
fn paused_conditions(
    st: &mut DeploymentStatus,
    paused: bool,
    deadline: Option<i32>,
    now: Timestamp,
) {
    if !status::has_deadline(deadline) {
        return;
    }
    let paused_cond = status::get(st, status::PROGRESSING)
        .is_some_and(|c| c.reason.as_deref() == Some(status::PAUSED));
    if paused && !paused_cond {
        let c = status::condition(
            status::PROGRESSING,
            "Unknown",
            status::PAUSED,
            "Deployment is paused",
            now,
        );
        status::set(st, c);
    } else if !paused && paused_cond {
        let c = status::condition(
            status::PROGRESSING,
            "Unknown",
            status::RESUMED,
            "Deployment is resumed",
            now,
        );
        status::set(st, c);
    }
}

/// The first ReplicaFailure of the new set, else of an old one, as a Deployment condition.
fn replica_failure(
    new: Option<&ReplicaSet>,
    old: &[&ReplicaSet],
) -> Option<k8s_openapi::api::apps::v1::DeploymentCondition> {
    new.into_iter().chain(old.iter().copied()).find_map(|rs| {
        let c = rs
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "ReplicaFailure")?;
        Some(k8s_openapi::api::apps::v1::DeploymentCondition {
            type_: status::REPLICA_FAILURE.into(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_update_time: c.last_transition_time.clone(),
            last_transition_time: c.last_transition_time.clone(),
        })
    })
}

fn rs_counts(rs: &ReplicaSet) -> status::RsCounts {
    let st = rs.status.clone().unwrap_or_default();
    status::RsCounts {
        spec_replicas: plan::replicas(rs),
        replicas: st.replicas,
        ready: st.ready_replicas.unwrap_or(0),
        available: st.available_replicas.unwrap_or(0),
    }
}

enum Created {
    Set(Box<ReplicaSet>),
    Retry,
}

impl Sync<'_> {
    /// The ReplicaSets this Deployment owns after adopting and releasing.
    async fn claim(&self, sel: &Selector) -> Result<Vec<ReplicaSet>, Error> {
        let uid = self.d.uid().unwrap_or_default();
        let deleting = self.d.meta().deletion_timestamp.is_some();
        let owner = ref_manager::controller_ref("apps/v1", "Deployment", self.d.meta());
        let mut owned = Vec::new();
        for rs in self.ctx.sets.state() {
            if rs.namespace().as_deref() != Some(self.ns.as_str()) {
                continue;
            }
            let patch =
                match ref_manager::claim(&uid, deleting, &rs.metadata, sel.matches(rs.labels())) {
                    Claim::Own => {
                        owned.push((*rs).clone());
                        continue;
                    }
                    Claim::Ignore => continue,
                    Claim::Adopt => ref_manager::adopt_patch(&rs.metadata, &owner),
                    Claim::Release => ref_manager::release_patch(&rs.metadata, &uid),
                };
            let adopting = ref_manager::controller_of(&rs.metadata).is_none();
            match self
                .sets
                .patch(
                    &rs.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(updated) if adopting => owned.push(updated),
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(write_err("claiming replica set", &rs.name_any())(e)),
            }
        }
        Ok(owned)
    }

    /// Any pod of an old ReplicaSet still running or terminating (Recreate waits for them).
    fn old_pods_running(&self, old: &[&ReplicaSet], new: Option<&ReplicaSet>) -> bool {
        let new_uid = new.and_then(|n| n.uid());
        let uids = old.iter().filter_map(|r| r.uid());
        let uids: Vec<String> = uids.filter(|u| Some(u) != new_uid.as_ref()).collect();
        read(&self.ctx.pods, |ix| {
            uids.iter().any(|uid| {
                ix.controlled_by(uid, &self.ns).iter().any(|p| {
                    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                    !matches!(phase, Some("Failed" | "Succeeded"))
                })
            })
        })
    }

    /// Brings an existing new set's annotations (revision) and minReadySeconds up to date.
    async fn sync_new(
        &self,
        rs: &ReplicaSet,
        new_revision: i64,
        spec: &Spec,
    ) -> Result<Option<ReplicaSet>, Error> {
        let mut updated = rs.clone();
        let mut ann = updated.metadata.annotations.clone().unwrap_or_default();
        let d_ann = self.d.metadata.annotations.clone().unwrap_or_default();
        let mut changed = revision::set_new_rs_annotations(&d_ann, &mut ann, new_revision);
        if plan::replicas(rs) > 0 || revision::desired_replicas(rs).is_none() {
            changed |= revision::set_replicas_annotations(
                &mut ann,
                spec.replicas,
                spec.replicas + spec.max_surge,
            );
        }
        let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
        if let Some(s) = updated.spec.as_mut() {
            if s.min_ready_seconds != min_ready {
                s.min_ready_seconds = min_ready;
                changed = true;
            }
        }
        if !changed {
            return Ok(None);
        }
        let patch = serde_json::json!({
            "metadata": {"annotations": ann},
            "spec": {"minReadySeconds": min_ready},
        });
        let name = rs.name_any();
        let written = self
            .sets
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(write_err("updating replica set", &name))?;
        Ok(Some(written))
    }

    /// Creates the new ReplicaSet; on a name collision with a foreign set, counts the
    /// collision (a new hash next time) and asks for a retry.
    async fn create_new(
        &self,
        spec: &Spec,
        all: &[&ReplicaSet],
        new_revision: i64,
        st: &mut DeploymentStatus,
        now: Timestamp,
    ) -> Result<Created, Error> {
        let d = self.d;
        let dspec = d.spec.clone().unwrap_or_default();
        let hash = hash::compute_hash(&dspec.template, st.collision_count);
        let name = format!("{}-{hash}", d.name_any());
        let mut template = dspec.template.clone();
        template
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(hash::POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector: LabelSelector = dspec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(hash::POD_TEMPLATE_HASH.into(), hash.clone());
        let replicas = if spec.recreate {
            spec.replicas
        } else {
            let sizes: Vec<rolling::Size> = all.iter().map(|r| plan::size(r)).collect();
            let new = rolling::Size {
                name: name.clone(),
                replicas: 0,
                available: 0,
            };
            let mut refs: Vec<&rolling::Size> = sizes.iter().collect();
            refs.push(&new);
            rolling::new_rs_replicas(spec.replicas, spec.max_surge, &refs, &new)
        };
        let mut ann = BTreeMap::new();
        revision::set_new_rs_annotations(
            &d.metadata.annotations.clone().unwrap_or_default(),
            &mut ann,
            new_revision,
        );
        revision::set_replicas_annotations(&mut ann, spec.replicas, spec.replicas + spec.max_surge);
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.ns.clone()),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(ann),
                owner_references: Some(vec![ref_manager::controller_ref(
                    "apps/v1",
                    "Deployment",
                    d.meta(),
                )]),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: dspec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let deadline = dspec.progress_deadline_seconds;
        match self.sets.create(&PostParams::default(), &rs).await {
            Ok(created) => {
                if replicas > 0 {
                    let msg = format!("Scaled up replica set {name} from 0 to {replicas}");
                    self.ctx.events.publish(
                        &self.regarding,
                        EventType::Normal,
                        "ScalingReplicaSet",
                        &msg,
                    );
                }
                if status::has_deadline(deadline) {
                    let msg = format!("Created new replica set \"{name}\"");
                    status::set(
                        st,
                        status::condition(
                            status::PROGRESSING,
                            "True",
                            status::NEW_RS_CREATED,
                            &msg,
                            now,
                        ),
                    );
                }
                Ok(Created::Set(Box::new(created)))
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                // Ours already (a stale cache)? Otherwise a hash collision.
                let existing = self.sets.get_opt(&name).await.ok().flatten();
                let ours = existing.as_ref().is_some_and(|x| {
                    ref_manager::controller_of(&x.metadata).map(|r| &r.uid) == d.uid().as_ref()
                        && x.spec
                            .as_ref()
                            .and_then(|s| s.template.as_ref())
                            .is_some_and(|t| hash::equal_ignore_hash(t, &dspec.template))
                });
                if let (true, Some(x)) = (ours, existing) {
                    return Ok(Created::Set(Box::new(x)));
                }
                st.collision_count = Some(st.collision_count.unwrap_or(0) + 1);
                Ok(Created::Retry)
            }
            Err(e) => {
                let msg = format!(
                    "Failed to create new replica set \"{name}\": {}",
                    api_message(&e)
                );
                self.ctx
                    .events
                    .publish(&self.regarding, EventType::Warning, "FailedCreate", &msg);
                status::set(
                    st,
                    status::condition(
                        status::REPLICA_FAILURE,
                        "True",
                        status::FAILED_RS_CREATE,
                        &msg,
                        now,
                    ),
                );
                if status::has_deadline(deadline) {
                    status::set(
                        st,
                        status::condition(
                            status::PROGRESSING,
                            "False",
                            "ReplicaSetCreateError",
                            &msg,
                            now,
                        ),
                    );
                }
                Ok(Created::Retry)
            }
        }
    }

    /// The Deployment's revision annotation follows its new ReplicaSet's. Written through the
    /// status, as upstream: an annotation change of the Deployment itself bumps its generation.
    async fn sync_revision_annotation(&self, new: &ReplicaSet) -> Result<(), Error> {
        let rev = revision::revision(new).to_string();
        let cur = self
            .d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(revision::REVISION));
        if cur == Some(&rev) {
            return Ok(());
        }
        let api: Api<Deployment> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        super::update_fresh(&api, &self.d.name_any(), true, |d| {
            d.annotations_mut().insert(revision::REVISION.into(), rev);
        })
        .await
        .map_err(write_err("annotating deployment", &self.d.name_any()))?;
        Ok(())
    }

    /// Sets `rs` to `to` replicas (with the replicas annotations) and records the event.
    async fn scale(
        &self,
        rs: &ReplicaSet,
        from: i32,
        to: i32,
        spec: &Spec,
    ) -> Result<ReplicaSet, Error> {
        let mut ann = BTreeMap::new();
        revision::set_replicas_annotations(&mut ann, spec.replicas, spec.replicas + spec.max_surge);
        // No resourceVersion guard: the ReplicaSet controller writes the status meanwhile,
        // and only this controller sets the size.
        let patch = serde_json::json!({"metadata": {"annotations": ann}, "spec": {"replicas": to}});
        let name = rs.name_any();
        let written = self
            .sets
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(write_err("scaling replica set", &name))?;
        if from != to {
            let dir = if to > from { "up" } else { "down" };
            let msg = format!("Scaled {dir} replica set {name} from {from} to {to}");
            self.ctx.events.publish(
                &self.regarding,
                EventType::Normal,
                "ScalingReplicaSet",
                &msg,
            );
        }
        Ok(written)
    }

    /// Deletes old sets past `revisionHistoryLimit` (failures are retried next sync).
    async fn clean_up(&self, old: &[&ReplicaSet], d: &Deployment) {
        let Some(limit) = d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
            return;
        };
        for rs in revision::to_clean_up(old, limit) {
            if let Err(e) = self
                .sets
                .delete(&rs.name_any(), &DeleteParams::default())
                .await
            {
                tracing::debug!(error = %e, rs = %rs.name_any(), "deleting old replica set failed");
            }
        }
    }

    /// Writes `st` unless the Deployment has it already.
    async fn write_status(&self, st: DeploymentStatus) -> Result<(), Error> {
        if self.d.status.as_ref() == Some(&st) {
            return Ok(());
        }
        // Read afresh: the revision annotation may have changed the resourceVersion.
        let api: Api<Deployment> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        super::update_fresh(&api, &self.d.name_any(), true, |d| d.status = Some(st))
            .await
            .map_err(write_err(
                "updating status of deployment",
                &self.d.name_any(),
            ))?;
        Ok(())
    }
}
