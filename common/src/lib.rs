//! What both the server and the agent need (DESIGN.md: the agent never depends on the server
//! crate, so code both use lives here). No Kubernetes types, no async: std only (`sd_notify` included).

pub mod fs;
pub mod labels;
pub mod net;
pub mod sd_notify;
