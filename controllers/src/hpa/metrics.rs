//! The resource metrics an autoscaler reads: the `metrics.k8s.io/v1beta1` PodMetrics of the
//! target's pods (served by a metrics server when one is installed), how each pod counts
//! (upstream's `groupPods`), and its requests. Pure apart from [`fetch`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::replicas::PodState;

/// `--horizontal-pod-autoscaler-cpu-initialization-period`.
const CPU_INITIALIZATION: Duration = Duration::from_secs(300);
/// `--horizontal-pod-autoscaler-initial-readiness-delay`.
const INITIAL_READINESS_DELAY: Duration = Duration::from_secs(30);

/// One pod's usage sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Milli-units of the resource.
    pub milli: i64,
    pub timestamp: Timestamp,
    pub window: Duration,
}

/// Why the PodMetrics could not be read (upstream's text).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The list request could not be built.
    #[error("{0}")]
    Request(#[from] kube::core::request::Error),
    /// The metrics API answered with an error (or is not served).
    #[error("unable to fetch metrics from resource metrics API: {}", unavailable(.0))]
    Api(#[source] kube::Error),
}

fn unavailable(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 404 => {
            "the server could not find the requested resource (get pods.metrics.k8s.io)".to_string()
        }
        _ => e.to_string(),
    }
}

/// The PodMetrics list holds no pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no metrics returned from resource metrics API")]
pub struct NoMetrics;

/// A container (named) of a pod states no request for the resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no request in container {container}")]
pub struct MissingRequest {
    /// The container's name.
    pub container: String,
}

/// Reads the PodMetrics of `namespace` selected by `selector` through the API (aggregated
/// `metrics.k8s.io`).
pub async fn fetch(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<Value, FetchError> {
    let params = kube::api::ListParams::default().labels(selector);
    let req = kube::core::Request::new(format!(
        "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
    ))
    .list(&params)?;
    client.request::<Value>(req).await.map_err(FetchError::Api)
}

/// The samples of `resource` in a PodMetricsList, by pod name: summed over the pod's
/// containers (or only `container`'s). Pods lacking the resource in a container are left out.
pub fn samples(
    list: &Value,
    resource: &str,
    container: Option<&str>,
) -> Result<BTreeMap<String, Sample>, NoMetrics> {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return Err(NoMetrics);
    }
    let mut out = BTreeMap::new();
    for item in &items {
        let Some(name) = item["metadata"]["name"].as_str() else {
            continue;
        };
        let mut total = 0i64;
        let mut complete = true;
        let mut found = false;
        for c in item["containers"].as_array().into_iter().flatten() {
            if container.is_some_and(|want| c["name"] != want) {
                continue;
            }
            found = true;
            match c["usage"][resource]
                .as_str()
                .and_then(k3rs_apimachinery::resources::milli_value)
            {
                Some(m) => total += m,
                None => complete = false,
            }
        }
        if !complete || (container.is_some() && !found) {
            continue;
        }
        let timestamp = item["timestamp"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let window = item["window"]
            .as_str()
            .and_then(k3rs_apimachinery::duration::parse)
            .unwrap_or(Duration::from_secs(30));
        out.insert(
            name.to_string(),
            Sample {
                milli: total,
                timestamp,
                window,
            },
        );
    }
    Ok(out)
}

/// How `pod` counts for `resource` at `now`, given its sample (upstream's `groupPods`): being
/// deleted or Failed → ignored; Pending → unready; for cpu, a pod that is not Ready, or whose
/// sample may predate its readiness while it is initializing, is unready.
pub fn pod_state(pod: &Pod, resource: &str, sample: Option<&Sample>, now: Timestamp) -> PodState {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    if pod.metadata.deletion_timestamp.is_some() || phase == "Failed" {
        return PodState::Ignored;
    }
    if phase == "Pending" {
        return PodState::Unready;
    }
    let Some(sample) = sample else {
        return PodState::Ready;
    };
    if resource != "cpu" {
        return PodState::Ready;
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let start = status.and_then(|s| s.start_time.as_ref());
    let (Some(ready), Some(start)) = (ready, start) else {
        return PodState::Unready;
    };
    let transition = ready
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let plus = |t: Timestamp, d: Duration| t.checked_add(jiff_span(d)).unwrap_or(t);
    let unready = if plus(start.0, CPU_INITIALIZATION) > now {
        ready.status == "False" || sample.timestamp < plus(transition, sample.window)
    } else {
        ready.status == "False" && plus(start.0, INITIAL_READINESS_DELAY) > transition
    };
    if unready {
        PodState::Unready
    } else {
        PodState::Ready
    }
}

fn jiff_span(d: Duration) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::try_from(d).unwrap_or(k8s_openapi::jiff::SignedDuration::MAX)
}

/// The pod's requests for `resource` in milli-units, summed over its containers (or only
/// `container`); `Err` names a container without one.
pub fn pod_request(
    pod: &Pod,
    resource: &str,
    container: Option<&str>,
) -> Result<i64, MissingRequest> {
    let mut total = 0;
    for c in pod.spec.iter().flat_map(|s| &s.containers) {
        if container.is_some_and(|want| c.name != want) {
            continue;
        }
        let request = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource))
            .and_then(|q| k3rs_apimachinery::resources::milli_value(&q.0));
        match request {
            Some(m) => total += m,
            None => {
                return Err(MissingRequest {
                    container: c.name.clone(),
                })
            }
        }
    }
    Ok(total)
}

/// A milli-unit amount as a quantity string (`250m`, `2`, `64M`).
pub fn quantity(milli: i64) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let mut v = milli / 1000;
    for suffix in ["", "k", "M", "G", "T"] {
        if v == 0 || v % 1000 != 0 || suffix == "T" {
            return format!("{v}{suffix}");
        }
        v /= 1000;
    }
    unreachable!("the loop returns at T")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn samples_sum_containers_and_skip_incomplete_pods() {
        let list = json!({"items": [
            {"metadata": {"name": "a"}, "timestamp": "2026-01-01T00:00:00Z", "window": "15s",
             "containers": [{"name": "web", "usage": {"cpu": "250m", "memory": "10Mi"}},
                            {"name": "side", "usage": {"cpu": "1", "memory": "1Mi"}}]},
            {"metadata": {"name": "b"}, "timestamp": "2026-01-01T00:00:00Z", "window": "15s",
             "containers": [{"name": "web", "usage": {"memory": "1Mi"}}]},
        ]});
        let s = samples(&list, "cpu", None).unwrap();
        assert_eq!(
            s,
            BTreeMap::from([(
                "a".to_string(),
                Sample {
                    milli: 1250,
                    timestamp: ts("2026-01-01T00:00:00Z"),
                    window: Duration::from_secs(15)
                }
            )])
        );
        let s = samples(&list, "cpu", Some("web")).unwrap();
        assert_eq!(s["a"].milli, 250);
        assert_eq!(s.len(), 1);
        assert_eq!(
            samples(&list, "memory", None).unwrap()["b"].milli,
            1024 * 1024 * 1000
        );
        assert_eq!(
            samples(&json!({"items": []}), "cpu", None)
                .unwrap_err()
                .to_string(),
            "no metrics returned from resource metrics API"
        );
    }

    fn pod(phase: &str, start: &str, ready: &str, transition: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "web", "resources": {"requests": {"cpu": "200m"}}},
                {"name": "side"}]},
            "status": {"phase": phase, "startTime": start, "conditions": [
                {"type": "Ready", "status": ready, "lastTransitionTime": transition}]}
        }))
        .unwrap()
    }

    #[test]
    fn pods_are_grouped_as_upstream() {
        let now = ts("2026-01-01T01:00:00Z");
        let sample = |at: &str| Sample {
            milli: 1,
            timestamp: ts(at),
            window: Duration::from_secs(30),
        };
        let s = sample("2026-01-01T00:59:50Z");
        let old = "2026-01-01T00:00:00Z";
        assert_eq!(
            pod_state(&pod("Running", old, "True", old), "cpu", Some(&s), now),
            PodState::Ready
        );
        assert_eq!(
            pod_state(&pod("Pending", old, "False", old), "cpu", Some(&s), now),
            PodState::Unready
        );
        assert_eq!(
            pod_state(&pod("Failed", old, "False", old), "cpu", Some(&s), now),
            PodState::Ignored
        );
        // Started 2 min ago, ready 10 s ago: the 30 s sample window reaches before readiness.
        let p = pod(
            "Running",
            "2026-01-01T00:58:00Z",
            "True",
            "2026-01-01T00:59:50Z",
        );
        assert_eq!(pod_state(&p, "cpu", Some(&s), now), PodState::Unready);
        // …but memory does not care, and a pod without sample is "missing" (Ready here).
        assert_eq!(pod_state(&p, "memory", Some(&s), now), PodState::Ready);
        assert_eq!(pod_state(&p, "cpu", None, now), PodState::Ready);
        // Long started, not ready, and it went unready within 30 s of its start: unready.
        let p = pod("Running", old, "False", "2026-01-01T00:00:10Z");
        assert_eq!(pod_state(&p, "cpu", Some(&s), now), PodState::Unready);
        // Long started, went unready later (it was ready once): its samples count.
        let p = pod("Running", old, "False", "2026-01-01T00:30:00Z");
        assert_eq!(pod_state(&p, "cpu", Some(&s), now), PodState::Ready);
    }

    #[test]
    fn requests_name_the_container_without_one() {
        let p = pod(
            "Running",
            "2026-01-01T00:00:00Z",
            "True",
            "2026-01-01T00:00:00Z",
        );
        assert_eq!(pod_request(&p, "cpu", Some("web")), Ok(200));
        assert_eq!(
            pod_request(&p, "cpu", None),
            Err(MissingRequest {
                container: "side".into()
            })
        );
    }

    #[test]
    fn quantities_print_like_upstream() {
        assert_eq!(quantity(250), "250m");
        assert_eq!(quantity(2000), "2");
        assert_eq!(quantity(64_000_000_000), "64M");
        assert_eq!(quantity(0), "0");
        assert_eq!(quantity(1_048_576_000), "1048576");
    }
}
