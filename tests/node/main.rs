//! Nodes: `k3rs agent` and the server's embedded agent running real pods (as root, with
//! containerd, in network namespaces the tests make, see `common::node_lab`), the CRI
//! boundary, the service proxy, cluster DNS, node lifecycle and ServiceLB.
//!
//! One test binary for the area: each file here is a module, reaching the shared helpers as
//! `crate::common`.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod agent_join;
mod agent_pods;
mod agent_probes;
mod agent_proxy;
mod agent_static_pods;
mod cluster_dns;
mod container_logs;
mod cri_containerd;
mod disk_pressure;
mod kubectl_exec;
mod local_path;
mod metrics_top;
mod network_policy;
mod node_failover;
mod node_lifecycle;
mod private_registry;
mod server_embedded_agent;
mod service_network;
mod servicelb;
mod two_nodes;
mod two_nodes_failover;
mod vxlan;
