//! What a CRI call can fail with.

use std::path::PathBuf;

/// A failed CRI call. Runtime errors keep the gRPC status code and message the runtime sent
/// (the kubelet tells "not found" from real failures by the code).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime's socket could not be connected to.
    #[error("connecting to the container runtime at {address}")]
    Connect {
        /// The socket.
        address: PathBuf,
        /// Why the connection failed.
        #[source]
        source: tonic::transport::Error,
    },
    /// The runtime answered a call with an error.
    #[error("CRI {rpc}: {code:?}: {message}")]
    Rpc {
        /// The call (`CreateContainer`).
        rpc: &'static str,
        /// The gRPC status code.
        code: tonic::Code,
        /// The runtime's message.
        message: String,
    },
}

/// A CRI call's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The call's gRPC status code (`None` when no call was made).
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Error::Rpc { code, .. } => Some(*code),
            Error::Connect { .. } => None,
        }
    }

    /// Whether the runtime said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(tonic::Code::NotFound)
    }

    pub(crate) fn rpc(rpc: &'static str, status: tonic::Status) -> Error {
        Error::Rpc {
            rpc,
            code: status.code(),
            message: status.message().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_grpc_code_and_message() {
        let e = Error::rpc(
            "ContainerStatus",
            tonic::Status::not_found("an error occurred when try to find container \"x\""),
        );
        assert_eq!(e.code(), Some(tonic::Code::NotFound));
        assert!(e.is_not_found());
        assert_eq!(
            e.to_string(),
            "CRI ContainerStatus: NotFound: an error occurred when try to find container \"x\""
        );
        let other = Error::rpc("StartContainer", tonic::Status::unknown("boom"));
        assert!(!other.is_not_found());
    }
}
