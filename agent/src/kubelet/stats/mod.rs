//! Resource usage for the kubelet API's `/stats/summary` and `/metrics/resource`.
//!
//! Work in progress: only the node's own CPU and memory ([`node`]); the per-pod and
//! per-container stats (CRI `ListPodSandboxStats`/`ListContainerStats`) and the endpoints are
//! not written yet.

pub mod node;
