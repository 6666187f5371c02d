//! The binder's two queues (upstream's `claimQueue` and `volumeQueue`): a claim is synced
//! ([`binder::sync_claim`]) when it changes or a volume, StorageClass or Node change concerns
//! it, a volume ([`binder::sync_volume`]) when it changes or a claim change concerns it (see
//! [`triggers`]); each decision is carried out with update/status writes. A write that meets
//! a newer object (409) or fails otherwise fails the sync, which is retried after the
//! object's backoff; every object is synced again every [`RESYNC`] (upstream's resync
//! period).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Resource;

use super::binder::{self, Action, ClaimKey, Subject, World};
use super::edits::{self, Write};
use super::triggers;
use crate::backoff::ErrorBackoff;
use crate::{informer, Context, EventRecorder, SharedInformerFactory};

/// Upstream's controller name (`--controllers persistentvolume-binder`).
pub const CONTROLLER: &str = "persistentvolume-binder";
/// Its identity (`system:serviceaccount:kube-system:persistent-volume-binder`).
pub const NAME: &str = "persistent-volume-binder";

/// How often every claim and volume is synced again without a change (upstream's
/// `--pvclaimbinder-sync-period`, 15 s).
pub const RESYNC: Duration = Duration::from_secs(15);

/// Why a sync failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing for {subject:?}: {source}")]
    Write {
        subject: Subject,
        #[source]
        source: kube::Error,
    },
    #[error("reading claim {namespace}/{name}: {source}")]
    GetClaim {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// What both queues' syncs read and write with.
struct Binder {
    client: kube::Client,
    events: EventRecorder,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    nodes: Store<Node>,
    /// The last Event published per object, not repeated while it stays the same.
    recorded: Mutex<HashMap<Subject, (String, String)>>,
}

impl Binder {
    /// Whether the Event is new for `subject` (then it is remembered as its last).
    fn first_time(&self, subject: &Subject, reason: &str, message: &str) -> bool {
        let seen = (reason.to_string(), message.to_string());
        let mut recorded = self.recorded.lock().unwrap_or_else(PoisonError::into_inner);
        if recorded.get(subject) == Some(&seen) {
            return false;
        }
        recorded.insert(subject.clone(), seen);
        true
    }
}

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
    let binder = Arc::new(Binder {
        client: cx.client.clone(),
        events: cx.events.clone(),
        claims: claims.clone(),
        volumes: volumes.clone(),
        classes: informer::<StorageClass>(&cx.informers).await,
        nodes: informer::<Node>(&cx.informers).await,
        recorded: Mutex::default(),
    });
    let touched = |f: &SharedInformerFactory| f.informer::<PersistentVolumeClaim>().touched();
    let (of_volume, of_class, of_node) = (claims.clone(), claims.clone(), claims.clone());
    let claim_backoff = ErrorBackoff::new(CONTROLLER);
    let claim_queue = claim_backoff.drive(
        Controller::for_shared_stream(touched(&cx.informers), claims)
            .watches_shared_stream(
                cx.informers.informer::<PersistentVolume>().touched(),
                move |v| triggers::claims_of_volume(&v, &of_volume.state()),
            )
            .watches_shared_stream(
                cx.informers.informer::<StorageClass>().touched(),
                move |c| triggers::claims_of_class(&c, &of_class.state()),
            )
            .watches_shared_stream(cx.informers.informer::<Node>().touched(), move |n| {
                triggers::claims_of_node(&n, &of_node.state())
            })
            .with_config(controller::Config::default().concurrency(1)),
        sync_claim,
        binder.clone(),
        cx.stop.clone(),
    );
    let of_claim = volumes.clone();
    let volume_backoff = ErrorBackoff::new(CONTROLLER);
    let volume_queue = volume_backoff.drive(
        Controller::for_shared_stream(
            cx.informers.informer::<PersistentVolume>().touched(),
            volumes,
        )
        .watches_shared_stream(touched(&cx.informers), move |c| {
            triggers::volumes_of_claim(&c, &of_claim.state())
        })
        .with_config(controller::Config::default().concurrency(1)),
        sync_volume,
        binder,
        cx.stop.clone(),
    );
    tokio::join!(claim_queue, volume_queue);
}

/// Syncs one claim: binds it, completes its binding, or leaves it to a provisioner.
async fn sync_claim(
    claim: Arc<PersistentVolumeClaim>,
    b: Arc<Binder>,
) -> Result<controller::Action, Error> {
    let claims = [(*claim).clone()];
    let volumes = snapshot(&b.volumes);
    let classes = snapshot(&b.classes);
    // Only the node the claim was selected for matters (its labels).
    let nodes: Vec<Node> = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(k3rs_apimachinery::volume::ANN_SELECTED_NODE))
        .and_then(|n| b.nodes.get(&ObjectRef::new(n)))
        .map(|n| (*n).clone())
        .into_iter()
        .collect();
    let w = World {
        claims: &claims,
        volumes: &volumes,
        classes: &classes,
        nodes: &nodes,
    };
    execute(&b, w, &binder::sync_claim(&claim, w)).await?;
    Ok(controller::Action::requeue(RESYNC))
}

/// Syncs one volume: marks it Available, Bound, Released or Failed, or undoes a binding the
/// controller made to a claim that went elsewhere.
async fn sync_volume(
    volume: Arc<PersistentVolume>,
    b: Arc<Binder>,
) -> Result<controller::Action, Error> {
    let claims: Vec<PersistentVolumeClaim> = match claim_of(&b, &volume).await? {
        Some(c) => vec![c],
        None => vec![],
    };
    let volumes = [(*volume).clone()];
    let w = World {
        claims: &claims,
        volumes: &volumes,
        classes: &[],
        nodes: &[],
    };
    execute(&b, w, &binder::sync_volume(&volume, w)).await?;
    Ok(controller::Action::requeue(RESYNC))
}

/// The claim the volume's `claimRef` names: from the cache, or when the cache lacks it,
/// from the API (a claim created just now may not have reached the cache; upstream's
/// `syncVolume` asks too before it releases a volume).
async fn claim_of(
    b: &Binder,
    volume: &PersistentVolume,
) -> Result<Option<PersistentVolumeClaim>, Error> {
    let Some(key) = triggers::claim_of_volume(volume) else {
        return Ok(None);
    };
    if let Some(c) = b.claims.get(&key) {
        return Ok(Some((*c).clone()));
    }
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    let released = matches!(phase, Some("Released") | Some("Failed"));
    let bound_by_uid = (volume.spec.as_ref())
        .and_then(|s| s.claim_ref.as_ref())
        .and_then(|r| r.uid.as_deref())
        .is_some_and(|u| !u.is_empty());
    if released || !bound_by_uid {
        return Ok(None);
    }
    let namespace = key.namespace.clone().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(b.client.clone(), &namespace);
    api.get_opt(&key.name)
        .await
        .map_err(|source| Error::GetClaim {
            namespace,
            name: key.name.clone(),
            source,
        })
}

/// Carries out `actions` on copies of the cached objects, each write's result replacing the
/// copy (so a second edit of the same object carries the new resourceVersion).
async fn execute(b: &Binder, w: World<'_>, actions: &[Action]) -> Result<(), Error> {
    let client = &b.client;
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
                    Write::Object => pv_api.replace(volume, &pp, &v).await,
                    Write::Status => pv_api.replace_status(volume, &pp, &v).await,
                };
                let written = written.map_err(|source| Error::Write {
                    subject: Subject::Volume(volume.clone()),
                    source,
                })?;
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
                if !b.first_time(subject, reason, message) {
                    continue;
                }
                let regarding = match subject {
                    Subject::Claim(k) => claims.get(k).map(|c| c.object_ref(&())),
                    Subject::Volume(n) => volumes.get(n).map(|v| v.object_ref(&())),
                };
                if let Some(r) = regarding {
                    publish(&b.events, &r, *warning, reason, message);
                }
            }
        }
    }
    Ok(())
}

fn publish(
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
) -> Result<(), Error> {
    let Some(mut c) = claims.get(key).cloned() else {
        return Ok(());
    };
    let Some(write) = edits::claim(a, &mut c, volume) else {
        return Ok(());
    };
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &key.namespace);
    let pp = PostParams::default();
    let written = match write {
        Write::Object => api.replace(&key.name, &pp, &c).await,
        Write::Status => api.replace_status(&key.name, &pp, &c).await,
    };
    let written = written.map_err(|source| Error::Write {
        subject: Subject::Claim(key.clone()),
        source,
    })?;
    claims.insert(key.clone(), written);
    Ok(())
}
