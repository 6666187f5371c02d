//! `/stats/summary` and `/metrics/resource`: the thin shell that samples `/proc` and the CRI
//! runtime and hands them to the pure builders in [`crate::kubelet::stats`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::Kubelet;
use crate::cri::pb;
use crate::kubelet::stats::{metrics, node, summary};

/// The previous node CPU sample (Unix nanoseconds, busy core-nanoseconds), for the rate.
#[derive(Debug, Default)]
pub struct CpuRate(Mutex<Option<(i64, u64)>>);

impl CpuRate {
    /// The node's usage in nano-cores since the previous sample (`None` on the first).
    fn observe(&self, now: i64, core_nanos: u64) -> Option<u64> {
        let mut prev = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let rate = prev.and_then(|(t, c)| {
            let dt = u64::try_from(now - t).ok().filter(|d| *d > 0)?;
            Some(((core_nanos.saturating_sub(c)) as u128 * 1_000_000_000 / dt as u128) as u64)
        });
        *prev = Some((now, core_nanos));
        rate
    }
}

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default()
}

/// The Summary, and whether the runtime's container stats failed.
async fn collect(k: &Kubelet) -> (Value, bool) {
    let time_nanos = now_nanos();
    let cpu_core_nanos = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| node::cpu_usage_core_nanos(&s));
    let sample = summary::NodeSample {
        time_nanos,
        cpu_core_nanos,
        cpu_nano_cores: cpu_core_nanos.and_then(|c| k.cpu_rate.observe(time_nanos, c)),
        memory: std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| node::memory(&s)),
    };
    let running = k
        .cri
        .list_containers(Some(pb::ContainerFilter {
            state: Some(pb::ContainerStateValue {
                state: pb::ContainerState::ContainerRunning as i32,
            }),
            ..Default::default()
        }))
        .await;
    let stats = k.cri.list_container_stats().await;
    let failed = running.is_err() || stats.is_err();
    if let Err(e) = running.as_ref().map(drop).and(stats.as_ref().map(drop)) {
        tracing::warn!(error = %e, "kubelet stats: container stats");
    }
    let started: HashMap<String, i64> = running
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.id, c.created_at))
        .collect();
    let s = summary::summary(&k.node_name, &sample, &stats.unwrap_or_default(), &started);
    (s, failed)
}

/// `GET /stats/summary`.
pub async fn summary_handler(State(k): State<Arc<Kubelet>>) -> Response {
    let (s, _) = collect(&k).await;
    ([(header::CONTENT_TYPE, "application/json")], s.to_string()).into_response()
}

/// `GET /metrics/resource`.
pub async fn metrics_handler(State(k): State<Arc<Kubelet>>) -> Response {
    let (s, failed) = collect(&k).await;
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics::render(&s, failed),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_rate_needs_two_samples() {
        let r = CpuRate::default();
        assert_eq!(r.observe(1_000_000_000, 5_000_000_000), None);
        // 0.5 s of busy time over 2 s: a quarter core.
        assert_eq!(r.observe(3_000_000_000, 5_500_000_000), Some(250_000_000));
        assert_eq!(
            r.observe(3_000_000_000, 6_000_000_000),
            None,
            "no time passed"
        );
    }
}
