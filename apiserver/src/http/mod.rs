//! The HTTP edge: TLS accept loop, router, request parsing, body decoding, handlers.

mod audit;
pub mod body;
mod connect;
pub mod encryption;
pub mod handlers;
pub mod inflight;
pub mod protobuf;
mod protobuf_authentication;
mod protobuf_autoscaling;
mod protobuf_certificates;
mod protobuf_rbac;
mod protobuf_workloads;
pub mod request;
pub mod router;
