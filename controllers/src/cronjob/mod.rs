//! The CronJob controller (kube-controller-manager's `cronjob-controller`): starts a Job
//! from the template at each scheduled time, as [`plan::plan`] decides; this shell lists the
//! CronJob's Jobs, carries the plan out, writes the status and requeues at the next time.
//!
//! Guarantees: a Job's name is fixed by its schedule time, so a retried or repeated reconcile
//! never starts the same run twice (409 AlreadyExists counts as started).
//!
//! `spec.timeZone` names a zone of the system's zoneinfo database (`/usr/share/zoneinfo`, the
//! `tzdata` package, as kube-controller-manager's Go runtime reads it); a name it lacks gets an
//! `UnknownTimeZone` warning event and the CronJob does not run.

pub mod plan;

use crate::backoff::ErrorBackoff;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::{Context, EventRecorder, EventType};

/// Upstream's name of this controller (its service account in kube-system).
pub const NAME: &str = "cronjob-controller";

/// Why one reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the jobs of cronjob {0}")]
    ListJobs(String, #[source] kube::Error),
    #[error("creating job {0}")]
    CreateJob(String, #[source] kube::Error),
    #[error("deleting job {0}")]
    DeleteJob(String, #[source] kube::Error),
    #[error("updating the status of cronjob {0}")]
    UpdateStatus(String, #[source] kube::Error),
}

struct Ctx {
    client: kube::Client,
    events: EventRecorder,
}

/// Starts the controller (a [`super::Descriptor`] entry point).
pub fn start(cx: Context) -> BoxFuture<'static, ()> {
    run(cx).boxed()
}

async fn run(cx: Context) {
    let backoff = ErrorBackoff::new("cronjob");
    let ctx = Arc::new(Ctx {
        client: cx.client.clone(),
        events: cx.events.clone(),
    });
    backoff
        .drive(
            super::shared_controller::<CronJob>(&cx.informers)
                .await
                .owns_shared_stream(cx.informers.informer::<Job>().touched()),
            reconcile,
            ctx,
            cx.stop,
        )
        .await;
}

fn code(e: &kube::Error) -> Option<u16> {
    super::status_code(e)
}

async fn reconcile(cj: Arc<CronJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = cj.namespace().unwrap_or_default();
    let name = cj.name_any();
    let uid = cj.metadata.uid.clone().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let listed = jobs
        .list(&Default::default())
        .await
        .map_err(|e| Error::ListJobs(name.clone(), e))?;
    let owned: Vec<&Job> = listed
        .items
        .iter()
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect();
    let plan = plan::plan(&cj, &owned, Timestamp::now());
    let regarding = cj.object_ref(&());
    for ev in &plan.events {
        let ty = if ev.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.events.publish(&regarding, ty, ev.reason, &ev.message);
    }
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    for job in &plan.delete {
        match jobs.delete(job, &background).await {
            Ok(_) => {
                let msg = format!("Deleted job {job}");
                ctx.events
                    .publish(&regarding, EventType::Normal, "SuccessfulDelete", &msg);
            }
            Err(e) if code(&e) == Some(404) => {}
            Err(e) => return Err(Error::DeleteJob(job.clone(), e)),
        }
    }
    let mut status = plan.status.clone();
    if let Some(job) = &plan.create {
        let job_name = job.name_any();
        match jobs.create(&PostParams::default(), job).await {
            Ok(created) => {
                let msg = format!("Created job {job_name}");
                ctx.events
                    .publish(&regarding, EventType::Normal, "SuccessfulCreate", &msg);
                let mut active = status.active.take().unwrap_or_default();
                active.push(plan::reference(&created));
                status.active = Some(active);
            }
            Err(e) if code(&e) == Some(409) => {}
            Err(e) => {
                let msg = format!("Error creating job: {e}");
                ctx.events
                    .publish(&regarding, EventType::Warning, "FailedCreate", &msg);
                return Err(Error::CreateJob(job_name, e));
            }
        }
    }
    if cj.status.as_ref() != Some(&status) {
        let api: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ns);
        match super::update_fresh(&api, &name, true, |c| c.status = Some(status)).await {
            Ok(_) => {}
            Err(e) if code(&e) == Some(404) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::UpdateStatus(name, e)),
        }
    }
    Ok(match plan.requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}
