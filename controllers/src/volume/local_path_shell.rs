//! The local-path provisioner's loop: installs the `local-path` StorageClass (unless it
//! exists), then every second creates the volumes [`local_path::to_provision`] lists and
//! carries out each released volume's [`local_path::teardown`] step.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};

use super::local_path::{self, Teardown};
use crate::{informer, Context, EventType};
use k3rs_apimachinery::volume::matching::claim_class;

/// The provisioner's `--controllers` name (off also with k3s's `--disable local-storage`).
pub const CONTROLLER: &str = "local-path-provisioner";
/// Its identity (k3s's service account for it).
pub const NAME: &str = "local-path-provisioner-service-account";

const PASS: Duration = Duration::from_secs(1);

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

/// Runs the provisioner with volumes under `base` until `cx.stop`.
pub async fn run(cx: Context, base: PathBuf) {
    let client = cx.client.clone();
    let image = local_path::helper_image(cx.args.system_default_registry.as_deref());
    let work = async {
        while let Err(e) = install_class(&client).await {
            tracing::debug!(error = %e, "local-path: installing the StorageClass (retrying)");
            tokio::time::sleep(PASS).await;
        }
        let claims = informer::<PersistentVolumeClaim>(&cx.informers).await;
        let volumes = informer::<PersistentVolume>(&cx.informers).await;
        let classes = informer::<StorageClass>(&cx.informers).await;
        let _ = tokio::join!(
            claims.wait_until_ready(),
            volumes.wait_until_ready(),
            classes.wait_until_ready()
        );
        let mut reported = HashSet::new();
        loop {
            let c: Vec<_> = claims.state().iter().map(|o| (**o).clone()).collect();
            let v: Vec<_> = volumes.state().iter().map(|o| (**o).clone()).collect();
            for claim in local_path::to_provision(&c, &v) {
                let class = classes.state().into_iter().find(|s| {
                    s.name_any() == claim_class(claim) && s.provisioner == local_path::PROVISIONER
                });
                if let Some(class) = class {
                    provision(&cx, claim, &class, &base, &mut reported).await;
                }
            }
            for volume in &v {
                if let Err(e) = teardown(&client, volume, &image).await {
                    tracing::debug!(error = %e, "local-path: deleting a volume (retrying)");
                }
            }
            tokio::time::sleep(PASS).await;
        }
    };
    tokio::select! {
        _ = cx.stop.cancelled() => {}
        _ = work => {}
    }
}

async fn provision(
    cx: &Context,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    base: &std::path::Path,
    reported: &mut HashSet<String>,
) {
    let r = claim.object_ref(&());
    let key = format!(
        "{}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    );
    match local_path::volume_for(claim, class, base) {
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
                Err(e) => tracing::debug!(error = %e, "local-path: creating a volume (retrying)"),
            }
        }
        Err(msg) => {
            if reported.insert(key) {
                let msg = format!(
                    "failed to provision volume with StorageClass \"{}\": {msg}",
                    class.name_any()
                );
                cx.events
                    .publish(&r, EventType::Warning, "ProvisioningFailed", &msg);
            }
        }
    }
}

async fn teardown(
    client: &kube::Client,
    volume: &PersistentVolume,
    image: &str,
) -> kube::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), local_path::HELPER_NAMESPACE);
    let helper_name = local_path::helper_name(&volume.name_any());
    // Cheap first test without the helper: most volumes are not released ones of ours.
    let probe = local_path::teardown(volume, None, image);
    if probe == Teardown::None {
        return Ok(());
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
    Ok(())
}
