//! The binder's loop: caches of claims, volumes, storage classes and nodes; every second
//! (and once the caches are filled) the [`binder::plan`] of what they hold is carried out
//! with update/status writes. A write that meets a newer object (409) or fails otherwise
//! ends the pass; the next pass decides again from the caches.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::Store;
use kube::Resource;

use super::binder::{self, Action, ClaimKey, Subject, World};
use super::edits::{self, Write};
use crate::{informer, Context, EventRecorder};

/// Upstream's controller name (`--controllers persistentvolume-binder`).
pub const CONTROLLER: &str = "persistentvolume-binder";
/// Its identity (`system:serviceaccount:kube-system:persistent-volume-binder`).
pub const NAME: &str = "persistent-volume-binder";

const PASS: Duration = Duration::from_secs(1);

fn snapshot<K: Clone + kube::Resource>(s: &Store<K>) -> Vec<K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    s.state().iter().map(|o| (**o).clone()).collect()
}

/// Runs the binder until `cx.stop`.
pub async fn run(cx: Context) {
    let claims = informer::<PersistentVolumeClaim>(&cx.informers).await;
    let volumes = informer::<PersistentVolume>(&cx.informers).await;
    let classes = informer::<StorageClass>(&cx.informers).await;
    let nodes = informer::<Node>(&cx.informers).await;
    let ready = async {
        let _ = tokio::join!(
            claims.wait_until_ready(),
            volumes.wait_until_ready(),
            classes.wait_until_ready(),
            nodes.wait_until_ready()
        );
    };
    let mut recorded: HashMap<Subject, (String, String)> = HashMap::new();
    tokio::select! {
        _ = cx.stop.cancelled() => {}
        _ = ready => loop {
            let (c, v, s, n) = (snapshot(&claims), snapshot(&volumes), snapshot(&classes), snapshot(&nodes));
            let w = World { claims: &c, volumes: &v, classes: &s, nodes: &n };
            let actions = binder::plan(w);
            if let Err(e) = execute(&cx.client, &cx.events, w, &actions, &mut recorded).await {
                tracing::debug!(error = %e, "volume binder: pass ended early (retrying)");
            }
            tokio::select! {
                _ = cx.stop.cancelled() => break,
                _ = tokio::time::sleep(PASS) => {}
            }
        },
    }
}

/// Carries out `actions` on copies of the cached objects, each write's result replacing the
/// copy (so a second edit of the same object carries the new resourceVersion).
pub async fn execute(
    client: &kube::Client,
    events: &EventRecorder,
    w: World<'_>,
    actions: &[Action],
    recorded: &mut HashMap<Subject, (String, String)>,
) -> kube::Result<()> {
    let mut claims: HashMap<ClaimKey, PersistentVolumeClaim> = w
        .claims
        .iter()
        .map(|c| (ClaimKey::of(c), c.clone()))
        .collect();
    let mut volumes: HashMap<String, PersistentVolume> = w
        .volumes
        .iter()
        .map(|v| (v.metadata.name.clone().unwrap_or_default(), v.clone()))
        .collect();
    let pp = PostParams::default();
    let pv_api: Api<PersistentVolume> = Api::all(client.clone());
    for a in actions {
        match a {
            Action::BindVolume { volume, .. }
            | Action::UnbindVolume { volume }
            | Action::VolumePhase { volume, .. } => {
                let claim = match a {
                    Action::BindVolume { claim, .. } => claims.get(claim).cloned(),
                    _ => None,
                };
                let Some(mut v) = volumes.get(volume).cloned() else {
                    continue;
                };
                let Some(write) = edits::volume(a, &mut v, claim.as_ref()) else {
                    continue;
                };
                let written = match write {
                    Write::Object => pv_api.replace(volume, &pp, &v).await?,
                    Write::Status => pv_api.replace_status(volume, &pp, &v).await?,
                };
                volumes.insert(volume.clone(), written);
            }
            Action::BindClaim {
                claim: key, volume, ..
            }
            | Action::ClaimPhase {
                claim: key,
                volume: Some(volume),
                ..
            } => {
                let v = volumes.get(volume).cloned();
                write_claim(client, &mut claims, key, a, v.as_ref()).await?;
            }
            Action::ClaimPhase { claim: key, .. }
            | Action::AnnotateProvisioner { claim: key, .. } => {
                write_claim(client, &mut claims, key, a, None).await?;
            }
            Action::Event {
                subject,
                warning,
                reason,
                message,
            } => {
                let seen = (reason.to_string(), message.clone());
                if recorded.get(subject) == Some(&seen) {
                    continue;
                }
                recorded.insert(subject.clone(), seen);
                let regarding = match subject {
                    Subject::Claim(k) => claims.get(k).map(|c| c.object_ref(&())),
                    Subject::Volume(n) => volumes.get(n).map(|v| v.object_ref(&())),
                };
                if let Some(r) = regarding {
                    publish(events, &r, *warning, reason, message).await;
                }
            }
        }
    }
    Ok(())
}

async fn publish(
    events: &EventRecorder,
    r: &ObjectReference,
    warning: bool,
    reason: &str,
    message: &str,
) {
    let t = if warning {
        crate::EventType::Warning
    } else {
        crate::EventType::Normal
    };
    events.publish(r, t, reason, message);
}

async fn write_claim(
    client: &kube::Client,
    claims: &mut HashMap<ClaimKey, PersistentVolumeClaim>,
    key: &ClaimKey,
    a: &Action,
    volume: Option<&PersistentVolume>,
) -> kube::Result<()> {
    let Some(mut c) = claims.get(key).cloned() else {
        return Ok(());
    };
    let Some(write) = edits::claim(a, &mut c, volume) else {
        return Ok(());
    };
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &key.namespace);
    let pp = PostParams::default();
    let written = match write {
        Write::Object => api.replace(&key.name, &pp, &c).await?,
        Write::Status => api.replace_status(&key.name, &pp, &c).await?,
    };
    claims.insert(key.clone(), written);
    Ok(())
}
