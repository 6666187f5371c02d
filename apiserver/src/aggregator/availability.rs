//! The availability controller (kube-aggregator's `AvailableConditionController`): every
//! [`INTERVAL`], and on every change of an APIService or of a Service or Endpoints one
//! names, it lists the APIServices, keeps the local ones registered ([`super::local`]),
//! checks each service-backed one (its Service, its endpoints, then a GET of
//! `/apis/<group>/<version>` through the proxy within [`fetch::TIMEOUT`]), downloads its
//! discovery and OpenAPI documents when due ([`documents`]), writes the `Available`
//! condition when it changes, and hands the proxy, discovery and OpenAPI the new set of
//! backends.
//!
//! # Guarantees
//! - The condition's `lastTransitionTime` changes only when its status does.
//! - A failed write or check is retried on the next pass; the task never ends early.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::backend::{ApiService, Backend, ServiceRef};
use super::documents;
use super::fetch::{self, Target};
use super::resolve::{self, Unreachable};
use super::{Aggregator, Backends, Trust};
use crate::registry::Registry;
use k3rs_apimachinery::informers::SharedInformerFactory;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

/// How often every APIService is checked (besides on changes).
pub const INTERVAL: Duration = Duration::from_secs(5);

/// The `Available` condition an APIService should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub available: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Why a check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckFailure {
    Unreachable(Unreachable),
    /// The GET of the group/version failed (kube-aggregator's message).
    Discovery(String),
}

impl Condition {
    pub fn local() -> Condition {
        Condition {
            available: true,
            reason: "Local",
            message: "Local APIServices are always available".into(),
        }
    }

    pub fn of_check(result: Result<(), &CheckFailure>) -> Condition {
        match result {
            Ok(()) => Condition {
                available: true,
                reason: "Passed",
                message: "all checks passed".into(),
            },
            Err(CheckFailure::Unreachable(u)) => Condition {
                available: false,
                reason: u.reason(),
                message: u.to_string(),
            },
            Err(CheckFailure::Discovery(message)) => Condition {
                available: false,
                reason: "FailedDiscoveryCheck",
                message: message.clone(),
            },
        }
    }
}

/// The status `obj` should have with `cond`, or `None` when it has it already. The other
/// conditions are kept; the transition time is `now` only when the status changes.
pub fn status_update(obj: &Value, cond: &Condition, now: &str) -> Option<Value> {
    let status = if cond.available { "True" } else { "False" };
    let conditions: Vec<Value> = obj["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let old = conditions.iter().find(|c| c["type"] == "Available");
    if old.is_some_and(|c| {
        c["status"] == status && c["reason"] == cond.reason && c["message"] == *cond.message
    }) {
        return None;
    }
    let since = match old {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let mut new = json!({"type": "Available", "status": status, "lastTransitionTime": since,
        "reason": cond.reason, "message": cond.message});
    let mut out: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != "Available")
        .collect();
    out.insert(0, std::mem::take(&mut new));
    let mut st = obj["status"].clone();
    if !st.is_object() {
        st = json!({});
    }
    st["conditions"] = Value::Array(out);
    Some(st)
}

/// The controller.
#[derive(Clone)]
pub struct AvailabilityController {
    pub aggregator: Arc<Aggregator>,
    pub registry: Arc<Registry>,
    /// The API server's loopback client.
    pub client: kube::Client,
    /// The process's shared informers (Services).
    pub informers: SharedInformerFactory,
}

/// Why a pass could not list the APIServices.
#[derive(Debug, thiserror::Error)]
#[error("listing APIServices: {0}")]
pub struct ListError(#[source] kube::Error);

impl AvailabilityController {
    /// Passes every [`INTERVAL`], and as soon as an APIService, or a Service or Endpoints an
    /// APIService names, changes ([`super::events`]), until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let wake = Arc::new(Notify::new());
        let events = tokio::spawn(super::events::watch(
            self.client.clone(),
            self.informers.clone(),
            self.aggregator.clone(),
            wake.clone(),
        ));
        loop {
            if let Err(e) = self.pass().await {
                tracing::warn!(error = %e, "aggregation availability pass");
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(INTERVAL) => {}
                _ = wake.notified() => {}
            }
        }
        events.abort();
    }

    /// One pass over every APIService (the service-backed ones checked concurrently).
    pub async fn pass(&self) -> Result<(), ListError> {
        let api: Api<APIService> = Api::all(self.client.clone());
        let list = api.list(&Default::default()).await.map_err(ListError)?;
        let objects: Vec<Value> = list
            .items
            .iter()
            .filter_map(|a| serde_json::to_value(a).ok())
            .collect();
        super::local::reconcile(&api, &objects).await;
        let before = self.aggregator.backends();
        let before = &*before;
        let checked: Vec<(&Value, ApiService, Condition, Option<Backend>)> =
            futures::future::join_all(objects.iter().map(|obj| async move {
                let a = ApiService::parse(obj)?;
                let (cond, backend) = match a.service.clone() {
                    None => (Condition::local(), None),
                    Some(svc) => {
                        let previous = before.get(&(a.group.clone(), a.version.clone()));
                        let c = self.check(&a, svc, previous).await;
                        (c.condition, Some(c.backend))
                    }
                };
                Some((obj, a, cond, backend))
            }))
            .await
            .into_iter()
            .flatten()
            .collect();
        // Discovery and the proxy first: an APIService seen `Available` is in discovery.
        let backends: Backends = checked
            .iter()
            .filter_map(|(_, _, _, b)| b.clone())
            .map(|b| {
                let key = (b.api_service.group.clone(), b.api_service.version.clone());
                (key, b)
            })
            .collect();
        self.aggregator.set_backends(backends);
        for (obj, a, cond, _) in &checked {
            self.write(&api, obj, &a.name, cond).await;
        }
        Ok(())
    }

    async fn write(&self, api: &Api<APIService>, obj: &Value, name: &str, cond: &Condition) {
        let Some(status) = status_update(obj, cond, &k3rs_apimachinery::meta::now_rfc3339()) else {
            return;
        };
        let mut new = obj.clone();
        new["status"] = status;
        let Ok(new) = serde_json::from_value::<APIService>(new) else {
            return;
        };
        if let Err(e) = api.replace_status(name, &PostParams::default(), &new).await {
            tracing::debug!(apiservice = name, error = %e, "writing the Available condition");
        } else if !cond.available {
            tracing::info!(apiservice = name, reason = cond.reason, message = %cond.message, "APIService unavailable");
        }
    }

    /// Checks the APIService: its `APIResourceList` through the proxy, then (when due,
    /// [`documents::needs_refresh`]) its discovery and OpenAPI documents.
    async fn check(&self, a: &ApiService, svc: ServiceRef, previous: Option<&Backend>) -> Checked {
        let old_docs = previous.map(|b| b.documents.clone()).unwrap_or_default();
        let result = async {
            let at = resolve::lookup(&self.registry, &svc, self.aggregator.routing)
                .await
                .map_err(CheckFailure::Unreachable)?;
            let trust = Trust::of(a);
            let to = Target {
                at: &at,
                service: &svc,
                trust: &trust,
            };
            let resources = self.resource_list(a, to).await?;
            let due = documents::needs_refresh(
                previous.map(|b| (&b.api_service, b.available, &b.documents)),
                a,
                Instant::now(),
            );
            let docs = if due {
                documents::refresh(&self.aggregator, to, a, &old_docs).await
            } else {
                old_docs.clone()
            };
            Ok((resources, docs))
        }
        .await;
        let condition = Condition::of_check(result.as_ref().map(|_| ()));
        let (available, resources, documents) = match result {
            Ok((resources, docs)) => (true, Some(resources), docs),
            Err(_) => (false, None, old_docs),
        };
        Checked {
            condition,
            backend: Backend {
                api_service: a.clone(),
                service: svc,
                available,
                resources,
                documents,
            },
        }
    }

    /// The extension server's `APIResourceList` for the APIService (kube-aggregator's
    /// availability check), or why not.
    async fn resource_list(&self, a: &ApiService, to: Target<'_>) -> Result<Value, CheckFailure> {
        let path = format!("/apis/{}/{}", a.group, a.version);
        let url = to.url(&path);
        let failed = |why: &dyn std::fmt::Display| {
            CheckFailure::Discovery(format!("failing or missing response from {url}: {why}"))
        };
        let got = fetch::get(&self.aggregator, to, &path, "application/json", None)
            .await
            .map_err(|e| failed(&e))?;
        if !(200..300).contains(&got.status) {
            return Err(failed(&format!("bad status from {url}: {}", got.status)));
        }
        serde_json::from_slice::<Value>(&got.body).map_err(|e| failed(&e))
    }
}

/// One checked APIService.
struct Checked {
    condition: Condition,
    backend: Backend,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_condition(status: &str, reason: &str, message: &str) -> Value {
        json!({"status": {"conditions": [{"type": "Available", "status": status,
            "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": reason, "message": message}]}})
    }

    #[test]
    fn conditions_of_checks() {
        let gone = CheckFailure::Unreachable(Unreachable::ServiceNotFound {
            namespace: "wardle".into(),
            name: "api".into(),
        });
        assert_eq!(
            Condition::of_check(Err(&gone)),
            Condition {
                available: false,
                reason: "ServiceNotFound",
                message: "service/api in \"wardle\" is not present".into()
            }
        );
        let failed = CheckFailure::Discovery("failing or missing response from x".into());
        assert_eq!(
            Condition::of_check(Err(&failed)).reason,
            "FailedDiscoveryCheck"
        );
        assert!(Condition::of_check(Ok(())).available);
    }

    #[test]
    fn writes_only_changes_and_keeps_the_transition_time_of_the_same_status() {
        let now = "2026-02-02T00:00:00Z";
        let local = Condition::local();
        let same = with_condition("True", "Local", "Local APIServices are always available");
        assert_eq!(status_update(&same, &local, now), None);
        let passed = with_condition("True", "Passed", "all checks passed");
        let st = status_update(&passed, &local, now).unwrap();
        assert_eq!(
            st["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(st["conditions"][0]["reason"], "Local");
        let down = Condition {
            available: false,
            reason: "FailedDiscoveryCheck",
            message: "m".into(),
        };
        let st = status_update(&passed, &down, now).unwrap();
        assert_eq!(
            st["conditions"],
            json!([{"type": "Available", "status": "False", "lastTransitionTime": now,
                "reason": "FailedDiscoveryCheck", "message": "m"}])
        );
        let fresh = status_update(&json!({"spec": {}}), &local, now).unwrap();
        assert_eq!(fresh["conditions"][0]["status"], "True");
    }
}
