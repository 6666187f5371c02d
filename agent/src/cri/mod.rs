//! The kubelet's side of the Container Runtime Interface (CRI v1, `runtime.v1`).
//!
//! - [`pb`]: the messages and tonic clients generated from `agent/proto/runtime/v1/api.proto`
//!   (the subset of upstream's `api.proto` we use, same wire contract).
//! - [`RuntimeService`], [`ImageService`]: the calls the kubelet makes, as object-safe async
//!   traits; [`grpc::Cri`] implements them over a unix socket, [`fake::FakeRuntime`] in memory
//!   (recording every call) for unit tests.
//! - [`image_presence::ImagePresence`]: an [`ImageService`] that remembers which images are
//!   present, for the kubelet's per-sync checks.

pub mod error;
pub mod fake;
pub mod grpc;
pub mod image_presence;
mod service;

pub use error::{Error, Result};
pub use service::{ImageService, RuntimeService, StreamRequest};

/// The generated CRI v1 protocol types.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("runtime.v1");
}
