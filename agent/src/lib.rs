//! The k3rs agent: what runs on a worker node. For now this is the hollow (simulated) kubelet
//! that registers nodes and runs their pods on paper, for scale tests and for clusters without
//! a container runtime; the real kubelet and proxy will live here too.
//!
//! The agent never depends on the server crate: it talks to the API server like any client.

pub mod client;
pub mod cni;
pub mod containerd;
pub mod cri;
pub mod crictl;
pub mod dns;
pub mod hollow;
pub mod host_check;
pub mod host_gw;
pub mod images;
pub mod ingress;
pub mod join;
pub mod kubelet;
pub mod netpol;
pub mod node_agent;
pub mod pod_network;
pub mod proxy;
pub mod report;
pub mod vxlan;
pub mod watches;
