//! Prometheus metrics in kube-apiserver's names: `apiserver_request_total{verb,resource,code}`
//! and the `apiserver_request_duration_seconds{verb,resource}` histogram.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Verb and resource of a handled request, left in the response extensions by the handler.
#[derive(Debug, Clone, Copy)]
pub struct RequestLabels {
    /// kube-apiserver's verb label (`GET`, `LIST`, `WATCH`, `POST`…).
    pub verb: &'static str,
    /// The resource (with its subresource, `pods/log`), empty for non-resource URLs.
    pub resource: &'static str,
}

/// kube-apiserver's duration buckets (seconds).
const BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Debug, Default)]
struct Inner {
    requests: BTreeMap<(String, String, u16), u64>,
    durations: BTreeMap<(String, String), Histogram>,
}

/// The request counters and histograms.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    /// Counts one answered request; its duration goes into the histogram unless it was a
    /// watch (which lasts as long as the client wants, as kube-apiserver leaves it out).
    pub fn observe(&self, verb: &str, resource: &str, code: u16, took: Duration) {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *m.requests
            .entry((verb.to_string(), resource.to_string(), code))
            .or_default() += 1;
        // Watches last as long as the client wants; kube-apiserver leaves them out too.
        if verb == "WATCH" {
            return;
        }
        let h = m
            .durations
            .entry((verb.to_string(), resource.to_string()))
            .or_insert_with(|| Histogram {
                counts: vec![0; BUCKETS.len()],
                ..Default::default()
            });
        let secs = took.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += secs;
        h.count += 1;
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, API resource and HTTP response code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for ((verb, resource, code), n) in &m.requests {
            let _ = writeln!(
                out,
                "apiserver_request_total{{code=\"{code}\",resource=\"{resource}\",verb=\"{verb}\"}} {n}"
            );
        }
        out.push_str("# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb and resource.\n");
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        for ((verb, resource), h) in &m.durations {
            let labels = format!("resource=\"{resource}\",verb=\"{verb}\"");
            for (b, c) in BUCKETS.iter().zip(&h.counts) {
                let _ = writeln!(
                    out,
                    "apiserver_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {c}"
                );
            }
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_count{{{labels}}} {}",
                h.count
            );
        }
        render_tasks(&mut out, &k3rs_apimachinery::tasks::snapshot());
        out
    }
}

/// The named tasks' restarts and whether each is failing now.
fn render_tasks(
    out: &mut String,
    tasks: &std::collections::BTreeMap<String, k3rs_apimachinery::tasks::TaskState>,
) {
    out.push_str("# HELP k3rs_task_restarts_total Times a named task of the process was started again after it panicked or returned early.\n");
    out.push_str("# TYPE k3rs_task_restarts_total counter\n");
    for (name, t) in tasks {
        let _ = writeln!(
            out,
            "k3rs_task_restarts_total{{task=\"{name}\"}} {}",
            t.restarts
        );
    }
    out.push_str("# HELP k3rs_task_failing Whether a named task failed and has not run healthily since (1) or not (0).\n");
    out.push_str("# TYPE k3rs_task_failing gauge\n");
    for (name, t) in tasks {
        let _ = writeln!(
            out,
            "k3rs_task_failing{{task=\"{name}\"}} {}",
            u8::from(t.failing)
        );
    }
}

/// Appends `extra` (the datastore's metrics) to a successful `GET /metrics`.
pub async fn append(
    extra: MetricsSource,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let is_metrics = req.uri().path() == "/metrics";
    let resp = next.run(req).await;
    if !is_metrics || resp.status() != axum::http::StatusCode::OK {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    text.push_str(&(extra.0)());
    axum::response::Response::from_parts(parts, axum::body::Body::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.observe("GET", "pods", 200, Duration::from_millis(30));
        m.observe("GET", "pods", 404, Duration::from_millis(1));
        let text = m.render();
        assert!(
            text.contains("apiserver_request_total{code=\"200\",resource=\"pods\",verb=\"GET\"} 1")
        );
        assert!(text.contains("apiserver_request_duration_seconds_bucket{resource=\"pods\",verb=\"GET\",le=\"0.005\"} 1"));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{resource=\"pods\",verb=\"GET\",le=\"0.05\"} 2"));
        assert!(text.contains(
            "apiserver_request_duration_seconds_count{resource=\"pods\",verb=\"GET\"} 2"
        ));
    }
}

/// More `/metrics` text, appended to the API server's (the datastore's metrics).
#[derive(Clone)]
pub struct MetricsSource(pub std::sync::Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for MetricsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsSource")
    }
}
