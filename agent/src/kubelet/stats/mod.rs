//! Resource usage for the kubelet API's `/stats/summary` (the kubelet's `stats/v1alpha1`
//! Summary) and `/metrics/resource` (Prometheus text with upstream's metric names): the
//! node's own CPU and memory from `/proc` ([`node`]), each running container's from the CRI
//! runtime's `ListContainerStats`, pods as the sums of their containers ([`summary`]), and the
//! metrics rendered from the summary ([`metrics`]).

pub mod metrics;
pub mod node;
pub mod summary;
