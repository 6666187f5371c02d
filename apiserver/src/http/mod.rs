//! The HTTP edge: TLS accept loop, router, request parsing, body decoding, handlers.

pub mod agent_config;
mod audit;
pub mod body;
mod connect;
pub mod encryption;
pub mod handlers;
pub mod inflight;
pub mod protobuf;
pub mod request;
pub mod router;
pub mod upstream;
