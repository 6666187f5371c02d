//! The Kubernetes API: the in-process router and the real `k3rs server` driven by
//! `kubectl` and the Python client (resources, CRDs, CEL, ValidatingAdmissionPolicy, HPA).
//!
//! One test binary for the area: each file here is a module, reaching the shared helpers as
//! `crate::common`.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod aggregation;
mod api_fuzz;
mod apiserver_router;
mod bombs;
mod delete_answers;
mod hpa;
mod kubectl_cel;
mod kubectl_cel_cost;
mod kubectl_crd;
mod kubectl_resources_a;
mod kubectl_resources_b;
mod kubectl_suite;
mod kubectl_vap;
mod list_stream;
mod metrics_api;
mod name_lengths;
mod nospace;
mod openapi_v2;
mod python_client;
mod served_objects;
