//! The StatefulSet controller: pods `<set>-<ordinal>` with stable names, labels and claims
//! (`<template>-<set>-<ordinal>`, created before the pod, kept on scale-down unless
//! `persistentVolumeClaimRetentionPolicy.whenScaled` is Delete), OrderedReady or Parallel pod
//! management, RollingUpdate with partition (highest ordinal first) or OnDelete, and the
//! template history in ControllerRevisions `<set>-<hash>` (status `currentRevision` /
//! `updateRevision`).
//!
//! # Guarantees
//! - OrderedReady: a pod is created only when every lower ordinal is Running and Ready, and
//!   removed only when it is the highest and every other pod is; one step per sync.
//! - Level-triggered: each sync starts from the API's pods, claims and revisions.

pub mod identity;
pub mod plan;

use crate::backoff::ErrorBackoff;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use k3rs_apimachinery::generated_names;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::api_message;
use super::deployment::hash;
use super::history::{renumber, revision_data, revision_template};
use super::pod_index::{self, PodIndex};
use super::SyncError as Error;
use super::{api_err, claim, pods, ref_manager, Context, EventRecorder, EventType};
use k3rs_apimachinery::informers::{read, Shared as SharedView};
use plan::{Member, Revision, Step};

struct Shared {
    client: kube::Client,
    events: EventRecorder,
    /// The process's pods by controller.
    pods: SharedView<PodIndex>,
}

/// Starts the StatefulSet controller.
pub fn start(ctx: Context) -> BoxFuture<'static, ()> {
    run(ctx).boxed()
}

async fn run(ctx: Context) {
    let backoff = ErrorBackoff::new("statefulset");
    let (pod_index, pod_events) = pod_index::watched(&ctx.informers).await;
    let controller = super::shared_controller::<StatefulSet>(&ctx.informers).await;
    let sets = controller.store();
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        events: ctx.events.clone(),
        pods: pod_index,
    });
    backoff
        .drive(
            controller.watches_shared_stream(pod_events, move |pod| {
                claim::owners_of(&sets, &pod, selector)
            }),
            reconcile,
            shared,
            ctx.stop,
        )
        .await;
}

fn selector(set: &StatefulSet) -> Option<Selector> {
    let s = Selector::try_from(set.spec.as_ref()?.selector.clone()).ok()?;
    (!s.selects_all()).then_some(s)
}

/// `<set>-<hash>` of a revision's data (FNV-32a of its JSON and the collision count,
/// safe-encoded, as upstream's `HashControllerRevision`).
fn revision_name(set: &str, data: &Value, collision_count: Option<i32>) -> String {
    let mut bytes = data.to_string().into_bytes();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(&c.to_le_bytes());
    }
    generated_names::controller_revision_name(
        set,
        &hash::safe_encode(&hash::fnv32a_str(&bytes).to_string()),
    )
}

struct Sync<'a> {
    ctx: &'a Shared,
    set: &'a StatefulSet,
    name: String,
    ns: String,
    pods: Api<Pod>,
    regarding: k8s_openapi::api::core::v1::ObjectReference,
}

async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Shared>) -> Result<Action, Error> {
    let Some(sel) = selector(&set) else {
        return Ok(Action::await_change());
    };
    let ns = set.namespace().unwrap_or_default();
    let s = Sync {
        ctx: &ctx,
        set: &set,
        name: set.name_any(),
        pods: Api::namespaced(ctx.client.clone(), &ns),
        regarding: set.object_ref(&()),
        ns,
    };
    let spec = set.spec.clone().unwrap_or_default();
    let old_status = set.status.clone().unwrap_or_default();
    let (current, update, revisions) = s.revisions(&spec.template, &old_status).await?;
    let owned = s.claim_pods(&sel).await?;
    let now = Timestamp::now();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let members: Vec<Member> = owned
        .iter()
        .filter_map(|p| {
            let ordinal = identity::ordinal_of(&s.name, &p.name_any())?;
            let phase = p
                .status
                .as_ref()
                .and_then(|st| st.phase.as_deref())
                .unwrap_or("");
            Some(Member {
                name: p.name_any(),
                ordinal,
                revision: p
                    .labels()
                    .get(identity::REVISION_LABEL)
                    .cloned()
                    .unwrap_or_default(),
                running_ready: phase == "Running" && pods::is_ready(p),
                available: phase == "Running" && pods::is_available(p, min_ready, now),
                terminating: p.metadata.deletion_timestamp.is_some(),
                finished: phase == "Succeeded" || phase == "Failed",
            })
        })
        .collect();
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let rolling = strategy.type_.as_deref() != Some("OnDelete");
    let plan_spec = plan::Spec {
        replicas: spec.replicas.unwrap_or(1),
        start: spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0),
        parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
        rolling_partition: rolling.then(|| {
            strategy
                .rolling_update
                .as_ref()
                .and_then(|r| r.partition)
                .unwrap_or(0)
        }),
    };
    let steps = if set.meta().deletion_timestamp.is_some() {
        Vec::new()
    } else {
        plan::plan(&plan_spec, &members, &update.name_any())
    };
    for step in steps {
        match step {
            Step::Create { ordinal, revision } => {
                let cr = match revision {
                    Revision::Current => &current,
                    Revision::Update => &update,
                };
                let template = revision_template(cr).unwrap_or_else(|| spec.template.clone());
                s.create_pod(ordinal, &template, &cr.name_any()).await?;
            }
            Step::Delete { name } => {
                let ordinal = identity::ordinal_of(&s.name, &name).unwrap_or(-1);
                let scaled_away =
                    ordinal >= plan_spec.start + plan_spec.replicas || ordinal < plan_spec.start;
                s.delete_pod(&name).await?;
                if scaled_away {
                    s.release_claims(ordinal).await;
                }
            }
        }
    }
    let mut st = plan::status(
        &old_status,
        set.meta().generation,
        rolling,
        &members,
        &current.name_any(),
        &update.name_any(),
    );
    st.collision_count = old_status.collision_count;
    s.clean_up_revisions(
        &revisions,
        &st,
        &members,
        spec.revision_history_limit.unwrap_or(10),
    )
    .await;
    s.write_status(st).await?;
    Ok(Action::await_change())
}

impl Sync<'_> {
    /// The current and update revisions (creating the update revision for a new template)
    /// and every revision the set owns.
    async fn revisions(
        &self,
        template: &PodTemplateSpec,
        status: &k8s_openapi::api::apps::v1::StatefulSetStatus,
    ) -> Result<
        (
            ControllerRevision,
            ControllerRevision,
            Vec<ControllerRevision>,
        ),
        Error,
    > {
        let api: Api<ControllerRevision> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        let uid = self.set.uid().unwrap_or_default();
        let mut owned: Vec<ControllerRevision> = api
            .list(&ListParams::default())
            .await
            .map_err(api_err("listing controller revisions"))?
            .items
            .into_iter()
            .filter(|cr| ref_manager::controller_of(&cr.metadata).is_some_and(|r| r.uid == uid))
            .collect();
        owned.sort_by_key(|cr| cr.revision);
        let max = owned.last().map_or(0, |cr| cr.revision);
        let data = revision_data(template);
        let update = match owned
            .iter()
            .find(|cr| cr.data.as_ref().map(|d| &d.0) == Some(&data))
        {
            Some(cr) if cr.revision == max => cr.clone(),
            Some(cr) => renumber(&api, cr, max + 1)
                .await
                .map_err(api_err("bumping controller revision"))?,
            None => {
                let name = revision_name(&self.name, &data, status.collision_count);
                let mut labels = self
                    .set
                    .spec
                    .as_ref()
                    .and_then(|s| s.selector.match_labels.clone())
                    .unwrap_or_default();
                labels.insert(
                    identity::REVISION_LABEL.into(),
                    name.trim_start_matches(&format!("{}-", self.name))
                        .to_string(),
                );
                let cr = ControllerRevision {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(self.ns.clone()),
                        labels: Some(labels),
                        owner_references: Some(vec![ref_manager::controller_ref(
                            "apps/v1",
                            "StatefulSet",
                            &self.set.metadata,
                        )]),
                        ..ObjectMeta::default()
                    },
                    data: Some(RawExtension(data.clone())),
                    revision: max + 1,
                };
                match api.create(&PostParams::default(), &cr).await {
                    Ok(created) => created,
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        // Someone else's revision has the name: count the collision.
                        let count = status.collision_count.unwrap_or(0) + 1;
                        let sets: Api<StatefulSet> =
                            Api::namespaced(self.ctx.client.clone(), &self.ns);
                        super::update_fresh(&sets, &self.name, true, |s| {
                            s.status
                                .get_or_insert_with(Default::default)
                                .collision_count = Some(count);
                        })
                        .await
                        .map_err(api_err("counting a revision collision"))?;
                        return Err(Error::Api {
                            what: format!("controller revision {name} exists"),
                            source: kube::Error::Api(e),
                        });
                    }
                    Err(e) => return Err(api_err("creating controller revision")(e)),
                }
            }
        };
        let current = status
            .current_revision
            .as_ref()
            .and_then(|n| owned.iter().find(|cr| cr.metadata.name.as_ref() == Some(n)))
            .cloned()
            .unwrap_or_else(|| update.clone());
        Ok((current, update, owned))
    }

    /// The set's pods after adopting matching orphans and releasing non-matching ones
    /// (upstream also requires the pod's name to carry the set's name and an ordinal).
    async fn claim_pods(&self, sel: &Selector) -> Result<Vec<Arc<Pod>>, Error> {
        let owner = ref_manager::controller_ref("apps/v1", "StatefulSet", &self.set.metadata);
        let deleting = self.set.meta().deletion_timestamp.is_some();
        let candidates = read(&self.ctx.pods, |ix| ix.candidates(&owner.uid, &self.ns));
        claim::claim_pods(&self.pods, candidates, &owner, deleting, |pod| {
            sel.matches(pod.labels()) && identity::ordinal_of(&self.name, &pod.name_any()).is_some()
        })
        .await
    }

    /// Creates the pod's missing claims, then the pod.
    async fn create_pod(
        &self,
        ordinal: i32,
        template: &PodTemplateSpec,
        revision: &str,
    ) -> Result<(), Error> {
        let pod_name = identity::pod_name(&self.name, ordinal);
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        for claim in identity::claims(self.set, ordinal) {
            let claim_name = claim.name_any();
            match pvcs.create(&PostParams::default(), &claim).await {
                Ok(_) => {
                    let msg = format!(
                        "create Claim {claim_name} Pod {pod_name} in StatefulSet {} success",
                        self.name
                    );
                    self.ctx.events.publish(
                        &self.regarding,
                        EventType::Normal,
                        "SuccessfulCreate",
                        &msg,
                    );
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    let msg = format!(
                        "create Claim {claim_name} for Pod {pod_name} in StatefulSet {} failed error: {}",
                        self.name,
                        api_message(&e)
                    );
                    self.ctx.events.publish(
                        &self.regarding,
                        EventType::Warning,
                        "FailedCreate",
                        &msg,
                    );
                    return Err(api_err(format!("creating claim {claim_name}"))(e));
                }
            }
        }
        let pod = identity::new_pod(self.set, template, ordinal, revision);
        match self.pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {
                let msg = format!(
                    "create Pod {pod_name} in StatefulSet {} successful",
                    self.name
                );
                self.ctx.events.publish(
                    &self.regarding,
                    EventType::Normal,
                    "SuccessfulCreate",
                    &msg,
                );
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => {
                let msg = format!(
                    "create Pod {pod_name} in StatefulSet {} failed error: {}",
                    self.name,
                    api_message(&e)
                );
                self.ctx
                    .events
                    .publish(&self.regarding, EventType::Warning, "FailedCreate", &msg);
                Err(api_err(format!("creating pod {pod_name}"))(e))
            }
        }
    }

    async fn delete_pod(&self, name: &str) -> Result<(), Error> {
        match self.pods.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                let msg = format!("delete Pod {name} in StatefulSet {} successful", self.name);
                self.ctx.events.publish(
                    &self.regarding,
                    EventType::Normal,
                    "SuccessfulDelete",
                    &msg,
                );
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => {
                let msg = format!(
                    "delete Pod {name} in StatefulSet {} failed error: {}",
                    self.name,
                    api_message(&e)
                );
                self.ctx
                    .events
                    .publish(&self.regarding, EventType::Warning, "FailedDelete", &msg);
                Err(api_err(format!("deleting pod {name}"))(e))
            }
        }
    }

    /// With `whenScaled: Delete`, the claims of a scaled-away ordinal are deleted (upstream
    /// hands them to the garbage collector through an owner reference to the pod).
    async fn release_claims(&self, ordinal: i32) {
        let policy = self
            .set
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref())
            .and_then(|p| p.when_scaled.clone());
        if policy.as_deref() != Some("Delete") {
            return;
        }
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        for claim in identity::claims(self.set, ordinal) {
            if let Err(e) = pvcs
                .delete(&claim.name_any(), &DeleteParams::default())
                .await
            {
                tracing::debug!(error = %e, claim = %claim.name_any(), "deleting claim failed");
            }
        }
    }

    /// Deletes the oldest revisions past the history limit that neither the status nor a
    /// live pod uses.
    async fn clean_up_revisions(
        &self,
        revisions: &[ControllerRevision],
        st: &k8s_openapi::api::apps::v1::StatefulSetStatus,
        members: &[Member],
        limit: i32,
    ) {
        let live: Vec<&str> = members.iter().map(|m| m.revision.as_str()).collect();
        let hash_of = |cr: &ControllerRevision| {
            cr.labels()
                .get(identity::REVISION_LABEL)
                .cloned()
                .unwrap_or_default()
        };
        let removable: Vec<&ControllerRevision> = revisions
            .iter()
            .filter(|cr| {
                let name = cr.metadata.name.as_ref();
                name != st.current_revision.as_ref()
                    && name != st.update_revision.as_ref()
                    && !live.contains(&hash_of(cr).as_str())
                    && !live.contains(&cr.name_any().as_str())
            })
            .collect();
        let excess = removable.len() as i64 - i64::from(limit.max(0));
        if excess <= 0 {
            return;
        }
        let api: Api<ControllerRevision> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        for cr in removable.into_iter().take(excess as usize) {
            let _ = api.delete(&cr.name_any(), &DeleteParams::default()).await;
        }
    }

    async fn write_status(
        &self,
        st: k8s_openapi::api::apps::v1::StatefulSetStatus,
    ) -> Result<(), Error> {
        if self.set.status.as_ref() == Some(&st) {
            return Ok(());
        }
        let sets: Api<StatefulSet> = Api::namespaced(self.ctx.client.clone(), &self.ns);
        super::update_fresh(&sets, &self.name, true, |s| s.status = Some(st))
            .await
            .map_err(api_err(format!(
                "updating status of statefulset {}",
                self.name
            )))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn revisions_are_named_by_the_hash_of_their_data() {
        let t: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": "pg:16"}]}
        }))
        .unwrap();
        let data = revision_data(&t);
        let name = revision_name("db", &data, None);
        assert!(name.starts_with("db-"), "{name}");
        assert_eq!(name, revision_name("db", &data, None));
        assert_ne!(name, revision_name("db", &data, Some(1)));
    }
}
