//! CustomResourceDefinitions: the CRD's own validation and status, the controller that turns
//! the datastore's CRDs into served resources, and the pure machinery custom resources go
//! through (structural schema validation, pruning, defaulting, printer columns, OpenAPI).
//!
//! # Guarantees
//! - Every server learns the CRDs from the datastore (list + watch), never from the memory of
//!   the server that took the create, so all servers of a cluster serve the same resources.
//! - A custom resource is served once its CRD is `Established`, and stops being served when
//!   the CRD is gone; deleting a CRD first deletes its custom resources (finalizer
//!   `customresourcecleanup.apiextensions.k8s.io`).
//!
//! # Not yet
//! Conversion webhooks (only strategy `None`), CEL validation rules, `x-kubernetes-list-type`
//! and `x-kubernetes-map-type` semantics, defaults applied when reading from storage.

pub mod controller;
pub mod definition;
pub mod generation;
pub mod jsonpath;
pub mod model;
pub mod openapi;
pub mod printer;
pub mod read;
pub mod schema;
pub mod served;
pub mod status;
