//! The resource metrics API built in (what k3s gets from its packaged metrics-server):
//! `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics, for `kubectl top` and the
//! HorizontalPodAutoscaler, served by the API server itself from the kubelets' Summaries.
//!
//! Every `--metric-resolution` (15 s, k3s's metrics-server setting) the [`scraper`] reads each
//! node's `/stats/summary`; [`points`] reads it; [`usage`] turns two consecutive scrapes into
//! CPU (the rate of the cumulative CPU time) and memory (the working set) as metrics-server
//! does; the [`store`] keeps the latest; [`serve`] answers the API.
//!
//! # Guarantees
//! - The group is in discovery only while the built-in metrics server runs (off with
//!   `--disable metrics-server`, which lets a user install their own).
//! - Usage appears one resolution after a node or pod is first scraped and reflects the last
//!   window; each API server of an HA cluster scrapes for itself, so the values two servers
//!   answer may differ by one window.

pub mod openapi;
pub mod points;
pub mod scraper;
pub mod serve;
pub mod store;
pub mod usage;

use std::time::Duration;

pub use store::Store;

/// `--metric-resolution`'s default (k3s's metrics-server runs with `--metric-resolution=15s`).
pub const DEFAULT_RESOLUTION: Duration = Duration::from_secs(15);
