//! The k3rs agent: what runs on a worker node. For now this is the hollow (simulated) kubelet
//! that registers nodes and runs their pods on paper, for scale tests and for clusters without
//! a container runtime; the real kubelet and proxy will live here too.
//!
//! The agent never depends on the server crate: it talks to the API server like any client.

// Issue 22: the workspace warns on `missing_docs`; 596 public items of this crate are still
// undocumented. Remove this allow once they are.
#![allow(missing_docs)]

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
pub mod join;
pub mod kubelet;
pub mod netpol;
pub mod node_agent;
pub mod pod_network;
pub mod proxy;
pub mod report;
pub mod vxlan;
pub mod watches;
