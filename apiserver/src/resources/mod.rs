//! Built-in resources: the catalog, structural checks against the k8s-openapi types, and
//! per-kind strategies (defaulting, validation, status handling).

pub mod cluster_ip;
pub mod custom;
pub mod event_convert;
pub mod hpa_convert;
pub mod intern;
pub mod node_port;
pub mod strategy;
pub mod typed;
