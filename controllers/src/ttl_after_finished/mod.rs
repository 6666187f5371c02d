//! The TTL-after-finished controller (`ttl-after-finished-controller`): a Job with
//! `spec.ttlSecondsAfterFinished` is deleted (foreground, so its pods go first) that many
//! seconds after it finished — the `lastTransitionTime` of its `Complete` or `Failed`
//! condition.

use crate::backoff::ErrorBackoff;
use crate::SharedInformerFactory;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::Client;
use tokio_util::sync::CancellationToken;

/// The controller's name (its service account in kube-system).
pub const NAME: &str = "ttl-after-finished-controller";

/// Why a reconcile failed; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("deleting job {0}: {1}")]
    Delete(String, #[source] kube::Error),
}

/// When the Job is to be deleted: its finish time plus its TTL; `None` without a TTL, while it
/// has not finished, or while it is being deleted.
pub fn expiry(job: &Job) -> Option<Timestamp> {
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = job
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?;
    let at = finished.last_transition_time.as_ref()?.0;
    Some(at + Duration::from_secs(ttl.max(0) as u64))
}

struct Ctx {
    client: Client,
}

/// Runs the controller until `stop`.
pub async fn run(client: Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("ttl_after_finished");
    backoff
        .drive(
            super::shared_controller::<Job>(&informers).await,
            reconcile,
            Arc::new(Ctx { client }),
            stop,
        )
        .await;
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(at) = expiry(&job) else {
        return Ok(Action::await_change());
    };
    let now = Timestamp::now();
    if at > now {
        let left = Duration::try_from(now.duration_until(at)).unwrap_or_default();
        return Ok(Action::requeue(left + Duration::from_millis(10)));
    }
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    tracing::info!(job = %format!("{ns}/{name}"), "TTL after finished: deleting the job");
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            uid: job.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match Api::<Job>::namespaced(ctx.client.clone(), &ns)
        .delete(&name, &params)
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        other => {
            other.map_err(|e| Error::Delete(name, e))?;
        }
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expiry_is_finish_time_plus_ttl() {
        let job = |ttl: Option<i64>, cond: Option<(&str, &str)>| -> Job {
            let mut v = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": []}}}});
            if let Some(t) = ttl {
                v["spec"]["ttlSecondsAfterFinished"] = json!(t);
            }
            if let Some((kind, status)) = cond {
                v["status"] = json!({"conditions": [{"type": kind, "status": status,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
            }
            serde_json::from_value(v).unwrap()
        };
        let at = |s: &str| Some(s.parse::<Timestamp>().unwrap());
        assert_eq!(
            expiry(&job(Some(30), Some(("Complete", "True")))),
            at("2026-01-01T00:00:30Z")
        );
        assert_eq!(
            expiry(&job(Some(0), Some(("Failed", "True")))),
            at("2026-01-01T00:00:00Z")
        );
        assert_eq!(expiry(&job(None, Some(("Complete", "True")))), None);
        assert_eq!(expiry(&job(Some(30), Some(("Complete", "False")))), None);
        assert_eq!(expiry(&job(Some(30), None)), None);
    }
}
