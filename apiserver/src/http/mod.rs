//! The HTTP edge: TLS accept loop, router, request parsing, body decoding, handlers.

pub(crate) mod agent_config;
mod audit;
pub(crate) mod body;
mod connect;
pub(crate) mod encryption;
pub(crate) mod handlers;
pub mod inflight;
pub(crate) mod list_body;
pub(crate) mod protobuf;
pub(crate) mod request;
pub mod router;
pub(crate) mod upstream;
