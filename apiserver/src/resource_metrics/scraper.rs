//! The scrape loop: every `--metric-resolution`, each node's kubelet `/stats/summary`, read
//! at once over the API server's kubelet client, into the [`Store`].
//!
//! # Guarantees
//! - One scrape of all nodes per resolution (the next one waits when a scrape runs long);
//!   each kubelet gets 90% of the resolution to answer (metrics-server's scrape timeout), a
//!   kubelet that fails or times out is left out of that scrape.
//! - Ends when `stop` is cancelled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::points::{parse, NodePoints};
use super::store::Store;
use crate::kubelet::{location, KubeletClient};
use crate::registry::{ListOptions, Registry, Target};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::status::ApiError;

/// The most of a Summary read (a node with thousands of containers stays far below).
const MAX_SUMMARY: usize = 64 << 20;
/// The Summary with only what the metrics API serves.
const SUMMARY_PATH: &str = "/stats/summary?only_cpu_and_memory=true";

/// Scrapes every node's kubelet into a [`Store`].
#[derive(Debug, Clone)]
pub struct Scraper {
    pub registry: Arc<Registry>,
    pub kubelet: KubeletClient,
    pub store: Arc<Store>,
    /// `--metric-resolution`.
    pub resolution: Duration,
}

impl Scraper {
    /// Scrapes until `stop` is cancelled.
    pub async fn run(self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.resolution);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.scrape().await {
                Ok(scraped) => self.store.record(scraped),
                Err(e) => tracing::warn!(error = %e.message, "metrics: listing the nodes"),
            }
        }
    }

    async fn scrape(&self) -> Result<BTreeMap<String, NodePoints>, ApiError> {
        let nodes = catalog::lookup("", "v1", "nodes").ok_or_else(ApiError::path_not_found)?;
        let target = Target {
            resource: nodes,
            namespace: None,
            name: None,
            subresource: None,
        };
        let list = self.registry.list(&target, ListOptions::default()).await?;
        let timeout = self.resolution.mul_f64(0.9);
        let scrapes = list["items"].as_array().into_iter().flatten().map(|node| {
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            async move {
                let summary = tokio::time::timeout(timeout, self.summary(node)).await;
                match summary {
                    Ok(Ok(summary)) => Some((name, parse(&summary))),
                    Ok(Err(e)) => {
                        tracing::debug!(node = %name, error = %e.message, "metrics: scrape failed");
                        None
                    }
                    Err(_) => {
                        tracing::debug!(node = %name, ?timeout, "metrics: scrape timed out");
                        None
                    }
                }
            }
        });
        Ok(join_all(scrapes).await.into_iter().flatten().collect())
    }

    async fn summary(&self, node: &Value) -> Result<Value, ApiError> {
        let at = location::kubelet_address(node)?;
        let body = self.kubelet.get(&at, SUMMARY_PATH, MAX_SUMMARY).await?;
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::unavailable(format!("the kubelet's summary is not JSON: {e}")))
    }
}
