//! The horizontal pod autoscaler (upstream's `horizontalpodautoscaling` controller, service
//! account `horizontal-pod-autoscaler`): every 15 s per HorizontalPodAutoscaler it reads the
//! target's `scale` subresource, computes the replicas its metrics ask for, normalizes them
//! (bounds, stabilization, rate policies) and writes the new count to the scale, with
//! upstream's status (`currentReplicas`, `desiredReplicas`, `currentMetrics`, `lastScaleTime`,
//! the AbleToScale/ScalingActive/ScalingLimited conditions) and events.
//!
//! # Metrics
//! `Resource` and `ContainerResource` metrics (Utilization and AverageValue targets) come from
//! the `metrics.k8s.io` API, which a metrics server serves once installed; until then the
//! autoscaler keeps the target inside `minReplicas`/`maxReplicas` and its ScalingActive
//! condition says why it cannot compute more (`FailedGetResourceMetric … the server could
//! not find the requested resource (get pods.metrics.k8s.io)`), as kube-controller-manager
//! does. `Pods`, `Object` and `External` metrics need the custom/external metrics APIs, which
//! k3rs does not serve: they are reported as failed the same way.
//!
//! The decisions are pure ([`decide`], [`normalize`], [`replicas`], [`metrics`]); the
//! recommendation and scale-event history is kept in memory per autoscaler, as upstream.

pub mod decide;
pub mod metrics;
pub mod normalize;
pub mod replicas;

use crate::backoff::ErrorBackoff;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingRules, HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus, MetricTarget,
};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::api_message as message;
use super::{api_err, Context, EventRecorder, EventType, SyncError as Error};
use decide::{decide, wants_metrics, InvalidMetric, MetricOutcome, ValidMetric};
use normalize::{Behavior, Bounds, History, Policy, Rules, Select};
use replicas::{resource_replicas, PodSample, Target};

/// Upstream's service account (and event source) name for the controller.
pub const NAME: &str = "horizontal-pod-autoscaler";
/// Its `--controllers` name.
pub const CONTROLLER: &str = "horizontalpodautoscaling";
/// `--horizontal-pod-autoscaler-sync-period`.
const SYNC_PERIOD: Duration = Duration::from_secs(15);

struct Shared {
    client: kube::Client,
    events: EventRecorder,
    histories: Mutex<HashMap<String, History>>,
    epoch: Instant,
}

/// Starts the autoscaler.
pub fn start(ctx: Context) -> BoxFuture<'static, ()> {
    run(ctx).boxed()
}

async fn run(ctx: Context) {
    let backoff = ErrorBackoff::new("hpa");
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        events: ctx.events.clone(),
        histories: Mutex::default(),
        epoch: Instant::now(),
    });
    backoff
        .drive(
            super::shared_controller::<HorizontalPodAutoscaler>(&ctx.informers).await,
            reconcile,
            shared,
            ctx.stop,
        )
        .await;
}

async fn reconcile(hpa: Arc<HorizontalPodAutoscaler>, sh: Arc<Shared>) -> Result<Action, Error> {
    let ns = hpa.namespace().unwrap_or_default();
    let name = hpa.name_any();
    let key = format!("{ns}/{name}");
    if hpa.metadata.deletion_timestamp.is_some() {
        sh.histories.lock().expect("hpa histories").remove(&key);
        return Ok(Action::await_change());
    }
    let spec = hpa.spec.clone().unwrap_or_default();
    let old = hpa.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let now = Timestamp::now();
    let reference = object_ref(&hpa);
    let target = &spec.scale_target_ref;
    let described = format!("{}/{ns}/{}", target.kind, target.name);

    let (scales, scale) = match get_scale(
        &sh.client,
        &ns,
        target.api_version.as_deref().unwrap_or_default(),
        &target.kind,
        &target.name,
    )
    .await
    {
        Ok(found) => found,
        Err(e) => {
            let e = format!("failed to query scale subresource for {described}: {e}");
            sh.events
                .publish(&reference, EventType::Warning, "FailedGetScale", &e);
            let msg =
                format!("the HPA controller was unable to get the target's current scale: {e}");
            set_condition(
                &mut status,
                "AbleToScale",
                false,
                "FailedGetScale",
                &msg,
                now,
            );
            write_status(&sh.client, &hpa, &old, status).await?;
            return Ok(Action::requeue(SYNC_PERIOD));
        }
    };
    let replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let bounds = Bounds {
        min: spec.min_replicas.unwrap_or(1),
        max: spec.max_replicas,
    };
    let behavior = spec.behavior.as_ref().map(|b| Behavior {
        up: rules(b.scale_up.as_ref(), 0),
        down: rules(b.scale_down.as_ref(), 300),
    });
    let outcomes = if wants_metrics(replicas, bounds) {
        let selector = scale.status.as_ref().and_then(|s| s.selector.clone());
        Some(
            compute_metrics(
                &sh.client,
                &ns,
                spec.metrics.as_deref().unwrap_or(&[]),
                selector,
                replicas,
                now,
            )
            .await,
        )
    } else {
        None
    };
    let elapsed = sh.epoch.elapsed();
    let decision = {
        let mut histories = sh.histories.lock().expect("hpa histories");
        decide(
            replicas,
            bounds,
            behavior.as_ref(),
            outcomes,
            histories.entry(key.clone()).or_default(),
            elapsed,
        )
    };
    for (type_, reason, message) in &decision.events {
        sh.events.publish(&reference, *type_, reason, message);
    }
    for (type_, ok, reason, message) in &decision.conditions {
        set_condition(&mut status, type_, *ok, reason, message, now);
    }
    if let Some(current) = &decision.current_metrics {
        let parsed: Vec<MetricStatus> = current
            .iter()
            .filter_map(|m| serde_json::from_value(m.clone()).ok())
            .collect();
        status.current_metrics = Some(parsed);
    }
    status.current_replicas = Some(replicas);
    if let Some(desired) = decision.desired {
        status.desired_replicas = desired;
    }
    if let Some(new) = decision.rescale {
        let reason = &decision.rescale_reason;
        let mut updated = scale.clone();
        updated.spec.get_or_insert_default().replicas = Some(new);
        match scales
            .replace_scale(&target.name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {
                let msg =
                    format!("the HPA controller was able to update the target scale to {new}");
                set_condition(
                    &mut status,
                    "AbleToScale",
                    true,
                    "SucceededRescale",
                    &msg,
                    now,
                );
                let msg = format!("New size: {new}; reason: {reason}");
                sh.events
                    .publish(&reference, EventType::Normal, "SuccessfulRescale", &msg);
                sh.histories
                    .lock()
                    .expect("hpa histories")
                    .entry(key)
                    .or_default()
                    .scaled(behavior.as_ref(), elapsed, replicas, new);
                status.last_scale_time = Some(Time(now));
            }
            Err(e) => {
                let e = message(&e);
                let msg = format!("New size: {new}; reason: {reason}; error: {e}");
                sh.events
                    .publish(&reference, EventType::Warning, "FailedRescale", &msg);
                let msg = format!("the HPA controller was unable to update the target scale: {e}");
                set_condition(
                    &mut status,
                    "AbleToScale",
                    false,
                    "FailedUpdateScale",
                    &msg,
                    now,
                );
            }
        }
    }
    write_status(&sh.client, &hpa, &old, status).await?;
    Ok(Action::requeue(SYNC_PERIOD))
}

/// One behavior direction with the API's defaults for what is unset.
fn rules(r: Option<&HPAScalingRules>, default_window: u64) -> Rules {
    let select = match r.and_then(|r| r.select_policy.as_deref()) {
        Some("Min") => Select::Min,
        Some("Disabled") => Select::Disabled,
        _ => Select::Max,
    };
    let window = r
        .and_then(|r| r.stabilization_window_seconds)
        .map_or(default_window, |s| s.max(0) as u64);
    let policies = r
        .and_then(|r| r.policies.as_ref())
        .into_iter()
        .flatten()
        .map(|p| Policy {
            pods: p.type_ == "Pods",
            value: p.value,
            period: Duration::from_secs(p.period_seconds.max(0) as u64),
        })
        .collect();
    Rules {
        stabilization_window: Duration::from_secs(window),
        select,
        policies,
    }
}

/// Why the scale target's current scale could not be read.
#[derive(Debug, thiserror::Error)]
enum ScaleError {
    /// `apiVersion` is not `group/version`.
    #[error("{0}")]
    GroupVersion(#[from] kube::core::gvk::ParseGroupVersionError),
    /// Discovery or the scale subresource failed (the API's message).
    #[error("{}", message(.0))]
    Api(#[from] kube::Error),
}

/// The target's API (resolved through discovery, so custom resources with a scale
/// subresource work) and its current scale.
async fn get_scale(
    client: &kube::Client,
    ns: &str,
    api_version: &str,
    kind: &str,
    name: &str,
) -> Result<(Api<DynamicObject>, Scale), ScaleError> {
    let gv: kube::core::GroupVersion = api_version.parse()?;
    let (resource, _) = kube::discovery::pinned_kind(client, &gv.with_kind(kind)).await?;
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource);
    let scale = api.get_scale(name).await?;
    Ok((api, scale))
}

/// The outcome of each metric of `specs`.
async fn compute_metrics(
    client: &kube::Client,
    ns: &str,
    specs: &[MetricSpec],
    selector: Option<String>,
    replicas: i32,
    now: Timestamp,
) -> Vec<MetricOutcome> {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        let invalid = InvalidMetric {
            reason: "InvalidSelector",
            error: "selector is required".into(),
        };
        return specs.iter().map(|_| Err(invalid.clone())).collect();
    };
    let mut pods: Option<Result<Vec<Pod>, kube::Error>> = None;
    let mut fetched: Option<Result<serde_json::Value, metrics::FetchError>> = None;
    let mut out = Vec::new();
    for spec in specs {
        let (resource, container, target) = match (&spec.resource, &spec.container_resource) {
            (Some(r), _) if spec.type_ == "Resource" => (r.name.clone(), None, &r.target),
            (_, Some(c)) if spec.type_ == "ContainerResource" => {
                (c.name.clone(), Some(c.container.clone()), &c.target)
            }
            _ => {
                out.push(Err(unsupported(spec, ns)));
                continue;
            }
        };
        if pods.is_none() {
            let params = ListParams::default().labels(&selector);
            pods = Some(
                Api::<Pod>::namespaced(client.clone(), ns)
                    .list(&params)
                    .await
                    .map(|l| l.items),
            );
        }
        if fetched.is_none() {
            fetched = Some(metrics::fetch(client, ns, &selector).await);
        }
        let (Some(pods), Some(fetched)) = (&pods, &fetched) else {
            continue;
        };
        out.push(resource_metric(
            &resource,
            container.as_deref(),
            target,
            pods,
            fetched,
            replicas,
            now,
        ));
    }
    out
}

/// A `Resource`/`ContainerResource` metric's outcome from the pods and the PodMetrics list.
fn resource_metric(
    resource: &str,
    container: Option<&str>,
    target: &MetricTarget,
    pods: &Result<Vec<Pod>, kube::Error>,
    fetched: &Result<serde_json::Value, metrics::FetchError>,
    replicas: i32,
    now: Timestamp,
) -> MetricOutcome {
    let (reason, kind, what) = match container {
        None => ("FailedGetResourceMetric", "Resource", "resource"),
        Some(_) => (
            "FailedGetContainerResourceMetric",
            "ContainerResource",
            "container resource",
        ),
    };
    let utilization = target.type_ == "Utilization";
    let goal = match (utilization, target.average_utilization, &target.average_value) {
        (true, Some(u), _) => Target::Utilization(u),
        (false, _, Some(q)) if target.type_ == "AverageValue" => {
            match k3rs_apimachinery::resources::milli_value(&q.0) {
                Some(m) if m > 0 => Target::AverageValue(m),
                _ => return Err(InvalidMetric { reason, error: format!("invalid target value {:?}", q.0) }),
            }
        }
        _ => {
            return Err(InvalidMetric {
                reason,
                error: format!("invalid {what} metric source: neither a utilization target nor a value target was set"),
            })
        }
    };
    let wrap = |e: &dyn std::fmt::Display| InvalidMetric {
        reason,
        error: if utilization {
            format!("failed to get {resource} utilization: {e}")
        } else {
            format!("failed to get {resource} usage: {e}")
        },
    };
    let unable = |e: &dyn std::fmt::Display| {
        wrap(&format!("unable to get metrics for {what} {resource}: {e}"))
    };
    let list = fetched.as_ref().map_err(|e| unable(e))?;
    let samples = metrics::samples(list, resource, container).map_err(|e| unable(&e))?;
    let pods = pods.as_ref().map_err(|e| wrap(&message(e)))?;
    let group: Vec<PodSample> = pods
        .iter()
        .map(|p| PodSample {
            name: p.name_any(),
            state: metrics::pod_state(p, resource, samples.get(&p.name_any()), now),
            request_milli: metrics::pod_request(p, resource, container),
        })
        .collect();
    let usage: BTreeMap<String, i64> = samples.iter().map(|(n, s)| (n.clone(), s.milli)).collect();
    let rec = resource_replicas(replicas, resource, goal, &group, &usage).map_err(|e| wrap(&e))?;
    let mut current = serde_json::json!({"averageValue": metrics::quantity(rec.average_milli)});
    if let Some(u) = rec.utilization {
        current["averageUtilization"] = u.into();
    }
    let field = if container.is_some() {
        "containerResource"
    } else {
        "resource"
    };
    let mut source = serde_json::json!({"name": resource, "current": current});
    if let Some(c) = container {
        source["container"] = c.into();
    }
    let name = match (container.is_some(), utilization) {
        (false, true) => format!("{resource} resource utilization (percentage of request)"),
        (false, false) => format!("{resource} resource"),
        (true, true) => {
            format!("{resource} container resource utilization (percentage of request)")
        }
        (true, false) => format!("{resource} container resource"),
    };
    Ok(ValidMetric {
        replicas: rec.replicas,
        name,
        status: serde_json::json!({"type": kind, field: source}),
    })
}

/// A metric type whose API k3rs does not serve.
fn unsupported(spec: &MetricSpec, ns: &str) -> InvalidMetric {
    let metric_name = |m: Option<&k8s_openapi::api::autoscaling::v2::MetricIdentifier>| {
        m.map(|m| m.name.clone()).unwrap_or_default()
    };
    match spec.type_.as_str() {
        "Pods" => InvalidMetric {
            reason: "FailedGetPodsMetric",
            error: format!(
                "unable to get metric {}: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered",
                metric_name(spec.pods.as_ref().map(|p| &p.metric))
            ),
        },
        "Object" => InvalidMetric {
            reason: "FailedGetObjectMetric",
            error: format!(
                "unable to get metric {}: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered",
                metric_name(spec.object.as_ref().map(|o| &o.metric))
            ),
        },
        "External" => InvalidMetric {
            reason: "FailedGetExternalMetric",
            error: format!(
                "unable to get external metric {ns}/{}: unable to fetch metrics from external metrics API: no external metrics API (external.metrics.k8s.io) registered",
                metric_name(spec.external.as_ref().map(|e| &e.metric))
            ),
        },
        other => InvalidMetric {
            reason: "InvalidMetricSourceType",
            error: format!("unknown metric source type {other:?}"),
        },
    }
}

/// Sets a condition, keeping its transition time when the status does not change.
fn set_condition(
    status: &mut HorizontalPodAutoscalerStatus,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let value = if ok { "True" } else { "False" };
    let conditions = status.conditions.get_or_insert_default();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = Some(Time(now));
            }
            c.status = value.into();
            c.reason = Some(reason.into());
            c.message = Some(message.into());
        }
        None => conditions.push(HorizontalPodAutoscalerCondition {
            type_: type_.into(),
            status: value.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_transition_time: Some(Time(now)),
        }),
    }
}

/// Writes `status` when it differs from `old` (a conflict retries the sync).
async fn write_status(
    client: &kube::Client,
    hpa: &HorizontalPodAutoscaler,
    old: &HorizontalPodAutoscalerStatus,
    status: HorizontalPodAutoscalerStatus,
) -> Result<(), Error> {
    if &status == old {
        return Ok(());
    }
    let ns = hpa.namespace().unwrap_or_default();
    let mut updated = hpa.clone();
    updated.status = Some(status);
    Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), &ns)
        .replace_status(&hpa.name_any(), &PostParams::default(), &updated)
        .await
        .map(drop)
        .map_err(api_err(format!(
            "updating the status of hpa {}",
            hpa.name_any()
        )))
}

fn object_ref(hpa: &HorizontalPodAutoscaler) -> ObjectReference {
    let mut r = hpa.object_ref(&());
    r.field_path = None;
    r
}
