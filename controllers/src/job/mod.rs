//! The Job controller: runs a Job's pods to completion, as kube-controller-manager's
//! `job-controller` does. The decision is [`plan::plan`]; this shell lists the Job's pods,
//! carries the plan out and writes the status.
//!
//! Guarantees: level-triggered (everything is read from the API on each reconcile, so a
//! restart loses nothing); a conflicting status write is retried; the status is written
//! (uncounted pods recorded) before any tracking finalizer is removed.

pub mod plan;
pub mod pod_template;

use crate::backoff::ErrorBackoff;
use crate::SharedInformerFactory;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::Api;
use tokio_util::sync::CancellationToken;

/// Upstream's name of this controller (its service account in kube-system).
pub const NAME: &str = "job-controller";

/// Why one reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the pods of job {0}")]
    ListPods(String, #[source] kube::Error),
    #[error("creating a pod for job {0}")]
    CreatePod(String, #[source] kube::Error),
    #[error("deleting pod {0}")]
    DeletePod(String, #[source] kube::Error),
    #[error("removing the tracking finalizer of pod {0}")]
    ReleasePod(String, #[source] kube::Error),
    #[error("updating the status of job {0}")]
    UpdateStatus(String, #[source] kube::Error),
}

struct Ctx {
    client: kube::Client,
}

/// Runs the controller until `stop`.
pub async fn run(client: kube::Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("job");
    let controller = super::shared_controller::<Job>(&informers)
        .await
        .owns_shared_stream(informers.informer::<Pod>().touched())
        .run(
            backoff.reconcile(reconcile),
            backoff.policy(),
            Arc::new(Ctx { client }),
        )
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "job reconcile");
            }
        });
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = controller => {}
    }
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = format!("batch.kubernetes.io/controller-uid={uid}");
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::ListPods(name.clone(), e))?;
    let owned: Vec<&Pod> = listed
        .items
        .iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect();
    let plan = plan::plan(&job, &owned, Timestamp::now());

    // Finished pods are recorded in the status before their finalizers go.
    if Some(&plan.status) != job.status.as_ref() {
        let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
        let mut updated = (*job).clone();
        updated.status = Some(plan.status.clone());
        match jobs
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {}
            Err(e) if is_code(&e, 409) => return Ok(Action::requeue(Duration::from_millis(100))),
            Err(e) if is_code(&e, 404) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::UpdateStatus(name, e)),
        }
    }
    for pod in &plan.release {
        release(&pods, &owned, pod).await?;
    }
    for pod in &plan.delete {
        match pods.delete(pod, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_code(&e, 404) => {}
            Err(e) => return Err(Error::DeletePod(pod.clone(), e)),
        }
    }
    for index in &plan.create {
        let pod = pod_template::pod_for(&job, *index);
        pods.create(&PostParams::default(), &pod)
            .await
            .map_err(|e| Error::CreatePod(name.clone(), e))?;
    }
    Ok(match plan.requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// Removes the tracking finalizer of `pod` (a merge patch of the remaining finalizers, guarded
/// by the pod's resourceVersion).
async fn release(pods: &Api<Pod>, owned: &[&Pod], pod: &str) -> Result<(), Error> {
    let Some(p) = owned
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(pod))
    else {
        return Ok(());
    };
    let rest: Vec<String> = p
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != plan::TRACKING_FINALIZER)
        .cloned()
        .collect();
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": p.metadata.resource_version,
        "finalizers": if rest.is_empty() { serde_json::Value::Null } else { rest.into() },
    }});
    match pods
        .patch(pod, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        // Gone, or changed meanwhile: the next reconcile sees the pod as it is.
        Err(e) if is_code(&e, 404) || is_code(&e, 409) => Ok(()),
        Err(e) => Err(Error::ReleasePod(pod.to_string(), e)),
    }
}
