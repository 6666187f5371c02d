//! Built-in resources: the catalog, structural checks against the k8s-openapi types, and
//! per-kind strategies (defaulting, validation, status handling).

pub mod cluster_ip;
pub(crate) mod custom;
pub(crate) mod event_convert;
pub(crate) mod hpa_convert;
pub(crate) mod intern;
pub(crate) mod node_port;
pub(crate) mod strategy;
pub(crate) mod typed;
