//! The local-path provisioner's queues: installs the `local-path` StorageClass (unless it
//! exists), then creates the volume of each claim [`local_path::to_provision`] lists (a claim
//! is looked at when it changes, when the volume it names changes, or when its class does)
//! and carries out each released volume's [`local_path::teardown`] step (a volume is looked
//! at when it or its helper pod changes). A failed step is retried after the object's
//! backoff; a claim or volume with a step still to come is looked at again every
//! [`RESYNC`].

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::local_path::{self, Teardown};
use super::triggers;
use crate::backoff::ErrorBackoff;
use crate::{informer, Context, EventType};
use k3rs_apimachinery::volume::matching::claim_class;

/// The provisioner's `--controllers` name (off also with k3s's `--disable local-storage`).
pub const CONTROLLER: &str = "local-path-provisioner";
/// Its identity (k3s's service account for it).
pub const NAME: &str = "local-path-provisioner-service-account";

/// How often a claim or volume with a step still to come is looked at again.
pub const RESYNC: Duration = Duration::from_secs(15);

/// Why a step failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating volume {volume}: {source}")]
    Create {
        volume: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting volume {volume}: {source}")]
    Teardown {
        volume: String,
        #[source]
        source: kube::Error,
    },
}

async fn install_class(client: &kube::Client) -> kube::Result<()> {
    let api: Api<StorageClass> = Api::all(client.clone());
    if api.get_opt(local_path::CLASS).await?.is_some() {
        return Ok(());
    }
    match api
        .create(&PostParams::default(), &local_path::storage_class())
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        r => r.map(|_| ()),
    }
}

/// What both queues work with.
struct Provisioner {
    cx: Context,
    base: PathBuf,
    image: String,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    /// Claims whose ProvisioningFailed Event was published (once each).
    reported: Mutex<HashSet<String>>,
}

/// Runs the provisioner with volumes under `base` until `cx.stop`.
pub async fn run(cx: Context, base: PathBuf) {
    let installed = async {
        let backoff = ErrorBackoff::new(CONTROLLER);
        while let Err(e) = install_class(&cx.client).await {
            tracing::debug!(error = %e, "local-path: installing the StorageClass (retrying)");
            tokio::time::sleep(
                backoff
                    .failed(local_path::CLASS)
                    .max(Duration::from_secs(1)),
            )
            .await;
        }
    };
    tokio::select! {
        _ = cx.stop.cancelled() => return,
        _ = installed => {}
    }
    let claims = informer::<PersistentVolumeClaim>(&cx.informers).await;
    let volumes = informer::<PersistentVolume>(&cx.informers).await;
    let p = Arc::new(Provisioner {
        image: local_path::helper_image(cx.args.system_default_registry.as_deref()),
        base,
        volumes: volumes.clone(),
        classes: informer::<StorageClass>(&cx.informers).await,
        reported: Mutex::default(),
        cx: cx.clone(),
    });
    let f = &cx.informers;
    let of_class = claims.clone();
    let backoff = ErrorBackoff::new(CONTROLLER);
    let provisioning = backoff.drive(
        Controller::for_shared_stream(f.informer::<PersistentVolumeClaim>().touched(), claims)
            .watches_shared_stream(f.informer::<PersistentVolume>().touched(), |v| {
                triggers::claim_of_volume(&v)
            })
            .watches_shared_stream(f.informer::<StorageClass>().touched(), move |c| {
                triggers::claims_of_class(&c, &of_class.state())
            }),
        provision_claim,
        p.clone(),
        cx.stop.clone(),
    );
    let backoff = ErrorBackoff::new(CONTROLLER);
    let teardowns = backoff.drive(
        Controller::for_shared_stream(f.informer::<PersistentVolume>().touched(), volumes)
            .watches_shared_stream(f.informer::<Pod>().touched(), |pod| {
                triggers::volume_of_helper(&pod)
            }),
        teardown_volume,
        p,
        cx.stop.clone(),
    );
    tokio::join!(provisioning, teardowns);
}

/// Creates the claim's volume if it is one [`local_path::to_provision`] lists.
async fn provision_claim(
    claim: Arc<PersistentVolumeClaim>,
    p: Arc<Provisioner>,
) -> Result<Action, Error> {
    let name = local_path::volume_name(&claim);
    let existing: Vec<PersistentVolume> = (p.volumes.get(&ObjectRef::new(&name)).iter())
        .map(|v| (**v).clone())
        .collect();
    if local_path::to_provision(std::slice::from_ref(&*claim), &existing).is_empty() {
        return Ok(Action::await_change());
    }
    let class = (p.classes.get(&ObjectRef::new(claim_class(&claim))))
        .filter(|s| s.provisioner == local_path::PROVISIONER);
    let Some(class) = class else {
        // Its class's creation will bring it back.
        return Ok(Action::await_change());
    };
    provision(&p, &claim, &class).await?;
    Ok(Action::requeue(RESYNC))
}

/// Carries out the volume's next teardown step.
async fn teardown_volume(
    volume: Arc<PersistentVolume>,
    p: Arc<Provisioner>,
) -> Result<Action, Error> {
    match teardown(&p.cx.client, &volume, &p.image).await {
        Ok(false) => Ok(Action::await_change()),
        Ok(true) => Ok(Action::requeue(RESYNC)),
        Err(source) => Err(Error::Teardown {
            volume: volume.name_any(),
            source,
        }),
    }
}

async fn provision(
    p: &Provisioner,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
) -> Result<(), Error> {
    let cx = &p.cx;
    let r = claim.object_ref(&());
    let key = format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    );
    match local_path::volume_for(claim, class, &p.base) {
        Ok(pv) => {
            let api: Api<PersistentVolume> = Api::all(cx.client.clone());
            let name = pv.name_any();
            match api.create(&PostParams::default(), &pv).await {
                Ok(_) => {
                    let msg = format!("Successfully provisioned volume {name}");
                    cx.events
                        .publish(&r, EventType::Normal, "ProvisioningSucceeded", &msg);
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(source) => {
                    return Err(Error::Create {
                        volume: name,
                        source,
                    })
                }
            }
        }
        Err(msg) => {
            let first = (p.reported.lock().unwrap_or_else(PoisonError::into_inner)).insert(key);
            if first {
                let msg = format!(
                    "failed to provision volume with StorageClass \"{}\": {msg}",
                    class.name_any()
                );
                cx.events
                    .publish(&r, EventType::Warning, "ProvisioningFailed", &msg);
            }
        }
    }
    Ok(())
}

/// Carries out the volume's next teardown step; whether more are to come.
async fn teardown(
    client: &kube::Client,
    volume: &PersistentVolume,
    image: &str,
) -> kube::Result<bool> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), local_path::HELPER_NAMESPACE);
    let helper_name = local_path::helper_name(&volume.name_any());
    // Cheap first test without the helper: most volumes are not released ones of ours.
    let probe = local_path::teardown(volume, None, image);
    if probe == Teardown::None {
        return Ok(false);
    }
    let helper = pods.get_opt(&helper_name).await?;
    let dp = DeleteParams::default();
    match local_path::teardown(volume, helper.as_ref(), image) {
        Teardown::None | Teardown::Wait => {}
        Teardown::CreateHelper(pod) => match pods.create(&PostParams::default(), &pod).await {
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            r => {
                r?;
            }
        },
        Teardown::Retry => {
            pods.delete(&helper_name, &dp).await?;
        }
        Teardown::Finish => {
            let volumes: Api<PersistentVolume> = Api::all(client.clone());
            match volumes.delete(&volume.name_any(), &dp).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                r => {
                    r?;
                }
            }
            pods.delete(&helper_name, &dp).await?;
        }
    }
    Ok(true)
}
